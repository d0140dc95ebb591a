"""The plain reference parsers the fuzz targets compare seqlake's readers with.

Written for clarity, not speed: a FASTQ file is split into lines and checked record by record against
the bad-input policy of :mod:`seqlake.reads.fastq`; gzip and BGZF are decoded member by member with the
standard library's ``zlib``. Nothing here imports seqlake: a reader and its reference must not share a bug.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass

#: quality bytes a Phred+33 file may hold: '!'..'~'
QMIN, QMAX = 33, 126


@dataclass(frozen=True)
class Counts:
    """What a reader must agree on: reads and bases (sequence characters)."""

    reads: int
    bases: int


class Rejected(Exception):  # noqa: N818 - the reference's verdict, not an error of the harness
    """The reference parser rejects the input; ``line`` is the 1-based line it names."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()  # the final newline ends the last line; a missing one is accepted
    # CRLF: a CR right before a newline belongs to the line end
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def fastq_counts(data: bytes, check_phred64: bool = False) -> Counts:
    """Reads and bases of a plain FASTQ file under seqlake's policy, or :class:`Rejected`."""
    lines = _lines(data)
    non_ascii = re.search(rb"[\x80-\xff]", data)
    if non_ascii:  # FASTQ is ASCII (dnaio's rule, and the chunk parser's)
        raise Rejected(data[:non_ascii.start()].count(b"\n") + 1, "non-ASCII byte")
    if len(lines) % 4:
        raise Rejected(len(lines) // 4 * 4 + 1, "file ends inside a record")
    reads = bases = 0
    quals = bytearray()
    for i in range(0, len(lines), 4):
        head, seq, plus, qual = lines[i:i + 4]
        if not head.startswith(b"@"):
            raise Rejected(i + 1, "header does not start with '@'")
        if not plus.startswith(b"+"):
            raise Rejected(i + 3, "no '+' line")
        if len(plus) > 1 and plus[1:] != head[1:]:
            raise Rejected(i + 3, "'+' line names another read")
        if len(seq) != len(qual):
            raise Rejected(i + 4, "sequence and quality lengths differ")
        if any(q < QMIN or q > QMAX for q in qual):
            raise Rejected(i + 4, "quality byte outside '!'..'~'")
        reads += 1
        bases += len(seq)
        if reads <= 10_000:
            quals += qual
    if check_phred64 and quals and min(quals) >= ord(";") and max(quals) > ord("K"):
        raise Rejected(1, "Phred+64 qualities")
    return Counts(reads, bases)


def newline_records(data: bytes) -> int:
    """Records by line count alone (what the counting passes see), or :class:`Rejected`."""
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if lines % 4:
        raise Rejected(lines // 4 * 4 + 1, "file ends inside a record")
    return lines // 4


class BadGzipError(Exception):
    """The reference gzip decoder rejects the bytes (corrupt or cut)."""


def _header_end(buf: bytes, p: int) -> int | None:
    """Offset after a gzip member header starting at ``p`` (RFC 1952 2.3), None when cut inside it."""
    if len(buf) - p < 10:
        return None
    flags = buf[p + 3]
    q = p + 10
    if flags & 4:  # FEXTRA
        if len(buf) - q < 2:
            return None
        q += 2 + struct.unpack_from("<H", buf, q)[0]
    for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & bit:
            z = buf.find(b"\0", q)
            if z < 0:
                return None
            q = z + 1
    if flags & 2:
        q += 2
    return q if q <= len(buf) else None


def gunzip(buf: bytes) -> bytes:
    """The plain data of a gzip file of one or more members, or :class:`BadGzipError`.

    Policy: every member must be whole (deflate data, CRC32 and ISIZE), a file that is exactly one member
    header and nothing more too (a stream cut after its header: an upload cut short, issue 37; gzip -t:
    unexpected end of file); bytes after the last member, zeros included, are rejected (gzip(1) ignores
    zero padding, but a padded file is a copy gone wrong, and the index pass cannot seek past it).
    """
    out, p = [], 0
    while p < len(buf):
        if buf[p:p + 3] != b"\x1f\x8b\x08":
            raise BadGzipError(f"not a gzip member at byte {p}")
        d = zlib.decompressobj(wbits=31)
        try:
            out.append(d.decompress(buf[p:]))
        except zlib.error as err:
            raise BadGzipError(f"corrupt member at byte {p}: {err}") from err
        if not d.eof:
            raise BadGzipError(f"member at byte {p} is cut")
        p = len(buf) - len(d.unused_data)
    return b"".join(out)
