"""A shard's part of a GZTOOL seek index: the bytes of the index a child reads, and how it reads them.

The index pass (:mod:`seqlake.reads.gzindex`) exports one GZTOOL index per gzip input (about 5 MB per GB of
plain FASTQ: a seek point every ~1 MB of plain data, each with its 32 KiB window deflated). A child that
reads a span of the file needs only the seek points around that span, and a GZTOOL index is a header,
then the points one after the other, each of a length it states, then the plain size:

    header    8 zero bytes, "gzipind", "x", then twice the number of points (uint64)     32 bytes
    point     plain offset (uint64), compressed offset (uint64), bits (uint32),
              window size w (uint32), the window deflated (w bytes)                      24 + w bytes
    trailer   plain size of the file (uint64)                                            8 bytes

(integers big-endian; format "x": without line numbers; rapidgzip's ``IndexFormat.GZTOOL``). So the
points a span needs are one contiguous byte range of the index object. The planner records, per span,
that range (:func:`span_range`) and, per input, the length of the header and the first point
(``index_head``); a child reads those two ranges (one ranged GET each, or one when they touch) and puts
them back together as a valid index with fewer points (:func:`read_part`): the header with the new
count, the first point (rapidgzip wants the file's start covered), its points, and the trailer. What a
child reads of the index is then proportional to its shard, not to the input.

rapidgzip treats the data after the part's last point as one chunk reaching the end of the file, and
decodes a chunk whole: a read past that point would decompress the rest of the file. The part's
``limit`` is that point's plain offset, and the child's reader stops there (:class:`Capped`); the
planner chose the last point at or after the span's end, so nothing the span needs lies beyond it.
"""

from __future__ import annotations

import bisect
import io
import struct
from dataclasses import dataclass
from typing import Any

from seqlake.base import storage

_MAGIC = b"\0" * 8 + b"gzipindx"
HEADER_SIZE = 32
_POINT = struct.Struct(">QQII")
_U64 = struct.Struct(">Q")


@dataclass(frozen=True)
class Point:
    """One seek point: its plain offset and where its record lies in the index object."""

    plain: int
    start: int
    stop: int


def index_points(index: bytes) -> list[Point]:
    """The seek points of a GZTOOL index (format "x"), in order; ValueError for anything else."""
    if index[:16] != _MAGIC:
        raise ValueError("not a GZTOOL index without line numbers (format 'x')")
    count = _U64.unpack_from(index, 16)[0]
    points, pos = [], HEADER_SIZE
    for _ in range(count):
        plain, _compressed, _bits, window = _POINT.unpack_from(index, pos)
        points.append(Point(plain, pos, pos + _POINT.size + window))
        pos += _POINT.size + window
    if pos + _U64.size != len(index) or not points or points[0].plain != 0:
        raise ValueError("GZTOOL index: the points do not end where its trailer begins, or none starts at 0")
    return points


def head_size(points: list[Point]) -> int:
    """Bytes of the header and the first point: every child's part starts with them."""
    return points[0].stop


def span_range(points: list[Point], index_size: int, begin: int, end: int) -> tuple[int, int]:
    """The bytes of the index holding the points that plain bytes ``begin`` to ``end`` need: from the
    last point at or before ``begin`` through the first at or after ``end``; through the trailer when
    no point lies at or after ``end`` (the span reaches the file's last chunk)."""
    plains = [p.plain for p in points]
    first = max(0, bisect.bisect_right(plains, begin) - 1)
    last = bisect.bisect_left(plains, end, lo=first)
    stop = index_size if last >= len(points) else points[last].stop
    return points[first].start, stop


@dataclass(frozen=True)
class IndexPart:
    #: a GZTOOL index holding the first point and the span's points
    index: bytes
    #: plain offset the reader must not read beyond (the part's last point); None: the file's end
    limit: int | None


def read_part(uri: str, head: int, start: int, stop: int, plain_size: int) -> IndexPart:
    """The index part of one span: bytes ``[0, head)`` and ``[start, stop)`` of the index at ``uri``."""
    if start <= head:
        data = storage.read_range(uri, 0, stop)
        first, body = b"", data[HEADER_SIZE:]
    else:
        first = storage.read_range(uri, HEADER_SIZE, head)
        body = storage.read_range(uri, start, stop)
    count, pos, last = 0, 0, 0
    while pos + _POINT.size <= len(body):
        last, _compressed, _bits, window = _POINT.unpack_from(body, pos)
        pos += _POINT.size + window
        count += 1
    rest = body[pos:]
    if rest not in (b"", _U64.pack(plain_size)):
        raise ValueError(f"{uri}: bytes {start}..{stop} are not whole seek points")
    body = body[:pos]
    count += 1 if first else 0
    index = _MAGIC + _U64.pack(count) * 2 + first + body + _U64.pack(plain_size)
    return IndexPart(index, None if rest else last)


class Capped:
    """A decompressed reader that ends at plain offset ``limit`` (None: no limit)."""

    def __init__(self, f: Any, limit: int | None) -> None:
        self._f = f
        self._limit = limit

    def read(self, size: int = -1) -> bytes:
        if self._limit is not None:
            left = max(0, self._limit - self._f.tell())
            size = left if size < 0 else min(size, left)
            if size == 0:
                return b""
        data: bytes = self._f.read(size)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        pos: int = self._f.seek(offset, whence)
        return pos

    def tell(self) -> int:
        pos: int = self._f.tell()
        return pos
