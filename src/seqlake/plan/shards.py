"""Reading one shard: record-aligned plain FASTQ chunks covering exactly the shard's reads.

For each span of the shard (one per mate) a reader opens the input (plain: a ranged reader; gzip / BGZF:
rapidgzip with the run's seek index, or isal's stream for a span that starts at the file's start;
BGZF without a seek index: its range of blocks, see :func:`_bgzf_span`, or its blocks from a checkpoint,
see :func:`_bgzf_records`; bz2 / xz: a stream from the start), seeks to the span's offset,
skips its ``skip`` records and then hands out whole records in chunks of about ``CHUNK_BYTES``. For a
paired shard the mate 2 chunk is cut to exactly as many records as the mate 1 chunk, so the worker can
zip them; a file that runs out first is a read count mismatch (BadInputError naming both files).
Memory stays flat: at most a chunk or two per mate is held.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from seqlake.base import storage
from seqlake.base.errors import BadInputError
from seqlake.plan.childplan import PlanView
from seqlake.plan.planfile import InputFile, Span
from seqlake.plan.planner import is_record_start
from seqlake.reads import bgzf, fastq, gzindex, seekindex

#: target size of one chunk of plain FASTQ
CHUNK_BYTES = 2 << 20
_NL = 10


@dataclass(frozen=True)
class Chunk:
    mate: int
    data: bytes
    #: 0-based number of the chunk's first record in its file (line = 4 * record + 1); for byte-range
    #: spans (``relative``) the number counts from the start of the shard instead
    first_record: int
    records: int
    relative: bool = False
    #: offsets of the newlines of ``data`` when the reader found them while cutting it (for parse_chunk)
    newlines: npt.NDArray[np.int64] | None = None


def _newlines(data: bytes, end: int | None = None) -> int:
    """Newlines in ``data[:end]``: numpy compares at ~6 GB/s where ``bytes.count`` manages ~1.7."""
    view = np.frombuffer(data, dtype=np.uint8, count=len(data) if end is None else min(end, len(data)))
    return int(np.count_nonzero(view == _NL))


def _count_records(data: bytes) -> int:
    lines = _newlines(data)
    if data and not data.endswith(b"\n"):
        lines += 1
    return (lines + 3) // 4


def _after_newline(data: bytes, k: int, p: int, before: int) -> int:
    """Offset just after the ``k``-th newline of ``data`` (it has at least ``k``), walking with
    ``find`` / ``rfind`` (memchr speed) from offset ``p``, before which ``data`` has ``before`` newlines."""
    if k <= 0:
        return 0
    if before < k:
        for _ in range(k - before):
            p = data.index(b"\n", p) + 1
        return p
    for _ in range(before - k + 1):
        p = data.rindex(b"\n", 0, p)
    return p + 1


def _cut_after_records(data: bytes, n: int, total: int | None = None) -> int:
    """Offset just after the ``n``-th record of ``data`` (which has at least ``n`` records;
    ``total``: its newline count, when known). Records are of similar sizes: from a proportional
    estimate, the record's last newline is a few ``find`` calls away."""
    if n <= 0:
        return 0
    total = _newlines(data) if total is None else total
    p = len(data) * 4 * n // total
    return _after_newline(data, 4 * n, p, _newlines(data, p))


class _SpanReader:
    """Whole records of one span, handed out in chunks."""

    def __init__(self, f: Any, span: Span, path: str) -> None:
        self._f = f
        self._path = path
        self._left_records = span.records
        self._left_bytes = None if span.end_offset is None else span.end_offset - span.offset
        self._buf = b""
        self._eof = False
        #: the newline offsets of the chunk :meth:`take` returned last, when the cut found them (else None)
        self.newlines: npt.NDArray[np.int64] | None = None
        start = span.offset
        if span.skip:
            try:
                start = gzindex.skip_records(f, span.offset, span.skip)
            except EOFError as err:
                raise BadInputError(path, f"file ends before {_first_record(span)} (the plan expected "
                                    "more records: was the file replaced after planning?)") from err
        if span.offset or span.skip:
            f.seek(start)

    def _fill(self, want: int) -> None:
        while not self._eof and len(self._buf) < want:
            size = max(want - len(self._buf), 1 << 16)
            if self._left_bytes is not None:
                size = min(size, self._left_bytes)
            b = self._f.read(size) if size > 0 else b""
            if not b:
                self._eof = True
                break
            if self._left_bytes is not None:
                self._left_bytes -= len(b)
            self._buf += b

    def take(self, max_records: int | None = None, target: int = CHUNK_BYTES) -> tuple[bytes, int]:
        """Up to ``max_records`` whole records; when None, the whole records that fit in ``target``
        bytes (at least one), and never more than the span has left.

        A chunk is at most ``target`` bytes or one record, whatever the span's size: a child's memory
        does not grow with its shard.
        """
        by_size = max_records is None
        self.newlines = None
        if self._left_records is not None:
            max_records = self._left_records if max_records is None else min(max_records, self._left_records)
        if max_records == 0:
            return b"", 0
        return self._take(by_size, max_records or 0, target)

    def _take(self, by_size: bool, max_records: int, target: int) -> tuple[bytes, int]:
        """:meth:`take` after its checks: ``max_records`` 0 means no cap (by size only)."""
        want = target
        while True:
            self._fill(want)
            buf = self._buf
            if by_size and len(buf) >= target:
                # the records that end within the target (the usual case): their newlines are kept for the parser
                newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=target) == _NL)
                in_target = len(newlines)
                n = in_target // 4
                if max_records and n > max_records:
                    return self._cut(_cut_after_records(buf, max_records), max_records)
                if n:
                    return self._cut(int(newlines[4 * n - 1]) + 1, n, newlines[: 4 * n])
                lines = _newlines(buf)
                if lines >= 4:  # a record longer than the target comes alone
                    return self._cut(_cut_after_records(buf, 1, lines), 1)
            else:
                lines = _newlines(buf)
                if max_records and lines >= 4 * max_records:
                    return self._cut(_cut_after_records(buf, max_records, lines), max_records)
            if self._eof:
                n = _count_records(buf)
                if max_records and n > max_records:  # a reader limited past the span's end
                    return self._cut(_cut_after_records(buf, max_records), max_records)
                if self._left_records is not None and n < self._left_records:
                    # the planner counted these records and the file is unchanged: a short read is an
                    # I/O failure (retryable), not bad input
                    raise OSError(f"{self._path}: the data ended {self._left_records - n} records before "
                                  "the shard's planned end")
                return self._cut(len(buf), n)
            want = max(2 * want, len(buf) + (1 << 16))

    def _cut(self, cut: int, n: int, newlines: npt.NDArray[np.int64] | None = None) -> tuple[bytes, int]:
        data, self._buf = self._buf[:cut], self._buf[cut:]
        self.newlines = newlines
        if self._left_records is not None:
            self._left_records -= n
        return data, n


def _check_unchanged(inp: InputFile) -> None:
    """The plan's offsets and index describe the object as planned: refuse a replaced one."""
    now = storage.head(inp.uri)
    if now.size != inp.size or (inp.etag is not None and now.etag != inp.etag) or (
            inp.etag is None and inp.mtime is not None and now.mtime != inp.mtime):
        raise BadInputError(inp.uri, "the file changed after the run was planned (size, ETag or mtime "
                            "differ); start a new run")


class _Pieces:
    """``read(size)`` over an iterator of byte strings."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self._rest = b""

    def read(self, size: int = -1) -> bytes:
        parts, have = [self._rest], len(self._rest)
        while size < 0 or have < size:
            piece = next(self._pieces, None)
            if piece is None:
                break
            parts.append(piece)
            have += len(piece)
        data = b"".join(parts)
        cut = len(data) if size < 0 else size
        self._rest = data[cut:]
        return data[:cut]


def _first_record_start(blocks: Iterator[bytes]) -> int:
    """Plain offset, from the first block's start, of the first record start that follows a newline
    (offset 0 is never one: whether a record starts there depends on the block before). The length of
    the data when no record starts before its end."""
    buf, p, at_eof = b"", 0, False
    while True:
        nl = buf.find(b"\n", p)
        if nl >= 0 and (nl + 1 < len(buf) or at_eof):
            if nl + 1 == len(buf):
                return len(buf)
            ok = is_record_start(buf, nl + 1, at_eof)
            if ok:
                return nl + 1
            if ok is False:
                p = nl + 1
                continue
        elif at_eof:
            return len(buf)
        more = next(blocks, None)
        if more is None:
            at_eof = True
        else:
            buf += more


def _bgzf_span(f: Any, span: Span, size: int, path: str) -> Iterator[bytes]:
    """The plain data of the records whose first byte lies in the span's blocks (``offset`` to
    ``end_offset``, compressed offsets of block starts). Where a span starts and where the one before
    it ends is the same function of the same bytes (:func:`_first_record_start` from the span's first
    block), so consecutive spans cover every record once."""
    start, stop = span.offset, span.end_offset if span.end_offset is not None else size
    skip = _first_record_start(gzindex.iter_bgzf_blocks(f, start, None, path)) if start else 0
    tail = _first_record_start(gzindex.iter_bgzf_blocks(f, stop, None, path)) if stop < size else 0
    pos = 0
    for data in gzindex.iter_bgzf_blocks(f, start, stop, path):
        if pos + len(data) > skip:
            yield data[max(0, skip - pos):]
        pos += len(data)
    skip = max(0, skip - pos)  # past the span's blocks when no record starts in them
    pos = 0
    for data in gzindex.iter_bgzf_blocks(f, stop, None, path) if tail > skip else ():
        if pos + len(data) > skip:
            yield data[max(0, skip - pos):tail - pos]
        pos += len(data)
        if pos >= tail:
            break


def _bgzf_records(f: Any, span: Span, path: str) -> Iterator[bytes]:
    """The plain data from a record span's checkpoint (a BGZF virtual offset: :mod:`seqlake.reads.bgzf`) on,
    its first ``skip`` records dropped: block by block, to the end of the file (the reader stops at the
    span's record count)."""
    block, within = bgzf.split_virtual(span.offset)
    need = 4 * span.skip  # newlines to drop
    for block_data in gzindex.iter_bgzf_blocks(f, block, None, path):
        data, within = block_data[within:], 0
        if need:
            lines = _newlines(data)
            if lines < need:
                need -= lines
                continue
            data, need = data[_after_newline(data, need, 0, 0):], 0
        if data:
            yield data
    if need:
        raise BadInputError(path, f"file ends before {_first_record(span)} (the plan expected more "
                            "records: was the file replaced after planning?)")


@contextlib.contextmanager
def _open_index_part(inp: InputFile, span: Span) -> Iterator[Any]:
    """A gzip input seekable through the span's part of its index (the whole index for a plan that
    names no part), read no further than that part reaches."""
    assert inp.index_uri is not None
    if span.index_start is None or span.index_stop is None or inp.index_head is None or inp.plain_size is None:
        part = seekindex.IndexPart(storage.read_bytes(inp.index_uri), None)
    else:
        part = seekindex.read_part(inp.index_uri, inp.index_head, span.index_start, span.index_stop,
                                   inp.plain_size)
    with gzindex.open_indexed(inp.uri, part.index) as f:
        yield seekindex.Capped(f, part.limit)


@contextlib.contextmanager
def _open_span(plan: PlanView, span: Span) -> Iterator[tuple[_SpanReader, InputFile]]:
    inp = plan.inputs[span.input]
    _check_unchanged(inp)
    if span.records == 0:
        # an input planned with no records (an empty file, an empty gzip member, a bare gzip header, a
        # BGZF EOF block: docs/FAULTS.md, "Empty inputs") is not opened: nothing to seek, no index
        yield _SpanReader(io.BytesIO(b""), span, inp.uri), inp
    elif inp.compression == "plain":
        with storage.open_read(inp.uri, buffer_size=1 << 20) as f:
            yield _SpanReader(f, span, inp.uri), inp
    elif inp.compression == "bgzf" and inp.index_uri is None and span.end_offset is not None:
        with storage.open_read(inp.uri, buffer_size=1 << 20) as f:
            data = _Pieces(_bgzf_span(f, span, inp.size, inp.uri))
            yield _SpanReader(data, replace(span, offset=0, end_offset=None), inp.uri), inp
    elif inp.compression == "bgzf" and inp.index_uri is None and (span.offset or span.skip):
        with storage.open_read(inp.uri, buffer_size=1 << 20) as f:
            yield _SpanReader(_Pieces(_bgzf_records(f, span, inp.uri)), replace(span, offset=0, skip=0),
                              inp.uri), inp
    elif inp.compression in ("gzip", "bgzf") and inp.index_uri is not None and (span.offset or span.skip):
        with _open_index_part(inp, span) as f:
            yield _SpanReader(f, span, inp.uri), inp
    else:
        # streams, and gzip spans that start at the file's start: isal's single-threaded inflate
        # costs less CPU than rapidgzip's (which only a seek needs)
        with fastq.open_fastq_stream(inp.uri) as (f, _):
            yield _SpanReader(f, span, inp.uri), inp


def iter_shard_chunks(plan: PlanView, shard_index: int,
                      chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[Chunk, ...]]:
    """Yield, for each step, one Chunk per mate (1 or 2) covering the shard's records in order.

    Paired chunks hold the same number of records. Raises BadInputError when one mate's file ends first.
    """
    shard = plan.shards[shard_index]
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(_open_span(plan, sp)) for sp in shard.spans]
        rec = [sp.first_record or 0 for sp in shard.spans]
        relative = shard.spans[0].first_record is None
        while True:
            first, first_inp = readers[0]
            data1, n1 = first.take(None, chunk_bytes)
            chunks = [Chunk(shard.spans[0].mate, data1, rec[0], n1, relative, first.newlines)]
            for m, (reader, inp) in enumerate(readers[1:], start=1):
                data, n = reader.take(n1, chunk_bytes) if n1 else reader.take(1, chunk_bytes)
                if n != n1:
                    # n > n1 only when mate 1 has ended (n1 == 0): whichever file ended first is short
                    short, long_ = (first_inp, inp) if n > n1 else (inp, first_inp)
                    at = rec[0] + min(n, n1)
                    raise BadInputError(
                        short.uri, f"paired files have different read counts: this file ends after {at} "
                        f"records of the shard's range but {long_.uri} has more", line=4 * at + 1, record=at)
                chunks.append(Chunk(shard.spans[m].mate, data, rec[m], n, relative))
            if n1 == 0:
                return
            rec = [r + n1 for r in rec]
            yield tuple(chunks)


def _records_before(plan: PlanView, span: Span) -> int:
    """Records before a byte-range span's start (counted only to report an error's absolute line)."""
    inp = plan.inputs[span.input]
    if inp.compression == "bgzf":
        with storage.open_read(inp.uri, buffer_size=1 << 20) as f:
            lines = sum(b.count(b"\n") for b in gzindex.iter_bgzf_blocks(f, 0, span.offset, inp.uri))
            if span.offset:
                skip = _first_record_start(gzindex.iter_bgzf_blocks(f, span.offset, None, inp.uri))
                lines += _Pieces(gzindex.iter_bgzf_blocks(f, span.offset, None, inp.uri)).read(skip).count(b"\n")
        return lines // 4
    with storage.open_read(inp.uri, buffer_size=1 << 20) as f:
        left, lines = span.offset, 0
        while left and (b := f.read(min(left, 8 << 20))):
            lines += b.count(b"\n")
            left -= len(b)
    return lines // 4


def _first_record(span: Span) -> str:
    """The span's first record as messages name it (from 1), or its byte offset for a span cut by bytes."""
    return f"its record {span.first_record + 1}" if span.first_record is not None else f"byte {span.offset}"


def rebase_error(plan: PlanView, span: Span, err: BadInputError) -> BadInputError:
    """Turn an error with shard-relative lines (a byte-range span) into one with absolute lines."""
    base = _records_before(plan, span)
    if err.line is None:
        return err
    line = err.line + 4 * base
    record, message = None, err.message
    if err.record is not None:  # messages count records from 1 (``record`` is 0-based)
        record = err.record + base
        message = re.sub(rf"\brecord {err.record + 1}\b", f"record {record + 1}", err.message)
    message = re.sub(rf"\bline {err.line}\b", f"line {line}", message)
    return BadInputError(err.path, message, line=line, record=record)
