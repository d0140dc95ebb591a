"""Reading FASTQ: compression by magic bytes, decompression, parsing with dnaio, and the bad-input policy.

The bad-input policy: what cannot be read without guessing is rejected, with the file and line, before
any work is spent on it (at plan time where the first records show it). Rejected with
``BadInputError(path, message, line, record)``, where ``line`` is the absolute 1-based line in the
decompressed file and ``record`` the 0-based record:

- a header line not starting with ``@``, a ``+`` line naming a different read than the header (an empty
  ``+`` line or a repeat of the name is fine), sequence and quality of different lengths, a file ending
  inside a record (dnaio's checks, done once per buffer in C);
- quality characters outside ``!``..``~`` (Phred+33, Q0..Q93): :func:`check_quality_range` over whole
  chunks with numpy;
- Phred+64 / Solexa encoded files, detected from the first records (:func:`check_phred_offset`): no quality
  character below ``;`` (Phred+33 Q26, the lowest Solexa code) and at least one above ``K`` (Phred+33 Q42,
  above what Illumina 1.8+ instruments write). Real Phred+33 data always has some low qualities among
  thousands of reads; Phred+64 data has none below ``;`` and plenty above ``K`` (``B`` = Q2 is ``a``..``h``
  territory in Illumina 1.5+). The message says how to convert: ``seqtk seq -Q64 -V in.fq > out.fq``.
  Converting silently would be a guess about the encoding; rejecting is explicit;
- a truncated gzip / bz2 / xz stream, named with the last complete record before the cut
  (:func:`truncated_stream`), and zstd (recognised by name, not supported).

Accepted: CRLF line ends, a missing final newline, zero-length reads, an empty file (zero reads),
multi-member gzip and BGZF (isal's igzip reads both), bz2 and xz (stdlib; stream only, so one shard).

The record structure is dnaio's (marcelm/dnaio, ``src/dnaio/_core.pyx``); line numbers it reports are
0-based and relative to the stream it parsed, so a chunk parsed on its own is rebased with
``4 * first_record``.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, cast

import dnaio
import numpy as np
import numpy.typing as npt
from dnaio.exceptions import FastqFormatError
from isal import igzip, isal_zlib

from seqlake.base import storage
from seqlake.base.errors import BadInputError, TruncatedStreamError

Compression = Literal["plain", "gzip", "bgzf", "bz2", "xz", "zstd"]
#: formats whose streams can be cut into independently readable shards (with a seek index for gzip)
SEEKABLE: frozenset[str] = frozenset({"plain", "gzip", "bgzf"})

#: read block size for decompressed streams
STREAM_BLOCK = 1 << 20


def sniff_compression(head: bytes) -> Compression:
    """The compression of a file from its first bytes (>= 18 for BGZF; never from the name).

    BGZF is gzip whose header has the FEXTRA flag and a ``BC`` subfield (SAM/BAM specification, 4.1).
    """
    if head[:2] == b"\x1f\x8b":
        if len(head) >= 18 and head[3] & 0x04 and head[12:14] == b"BC":
            return "bgzf"
        return "gzip"
    if head[:3] == b"BZh":
        return "bz2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return "plain"


#: a file longer than this is never a bare gzip header (10 bytes, plus its optional name, comment, extra)
_BARE_HEADER_MAX = 64 << 10


def gzip_header_end(head: bytes) -> int | None:
    """Length of the gzip member header at the start of ``head`` (RFC 1952, 2.3: the fixed 10 bytes, then
    FEXTRA, FNAME, FCOMMENT, FHCRC when flagged); None when ``head`` ends inside it or is not one."""
    if len(head) < 10 or head[:3] != b"\x1f\x8b\x08":
        return None
    flags, end = head[3], 10
    if flags & 0x04:  # FEXTRA: a 2-byte length, then that many bytes
        if len(head) < end + 2:
            return None
        end += 2 + int.from_bytes(head[end:end + 2], "little")
    for flag in (0x08, 0x10):  # FNAME, FCOMMENT: zero-terminated
        if flags & flag:
            zero = head.find(b"\0", end)
            if zero < 0:
                return None
            end = zero + 1
    if flags & 0x02:  # FHCRC
        end += 2
    return end if end <= len(head) else None


def bare_gzip_header(raw: BinaryIO) -> bool:
    """Whether the seekable ``raw`` holds one gzip member header and nothing else.

    Such a file is a gzip stream cut right after its header (an upload cut short, or a writer killed before it
    wrote a block: ``gzip -t`` says "unexpected end of file"): it is rejected as truncated
    (:func:`bare_header_error`), never read as an empty sample, since a sample with no reads written by a
    gzip writer that closed is an empty member (header, an empty block, the trailer). A header followed by
    anything else is a stream like any other (cut, corrupt or whole).
    """
    size = raw.seek(0, io.SEEK_END)
    raw.seek(0)
    if size > _BARE_HEADER_MAX:
        return False
    head = raw.read(size)
    raw.seek(0)
    return gzip_header_end(head) == size


def bare_header_error(uri: str) -> TruncatedStreamError:
    """The error of a file that is a gzip member header and nothing else (exit 65)."""
    return TruncatedStreamError(uri, "gzip stream truncated before the end of the first record: the file is a "
                                "gzip header and nothing else (an upload cut short; gzip -t: unexpected end of "
                                "file)", record=0)


#: what the decompressors raise for bad data (isal's error type is untyped in its stubs)
_CORRUPT: tuple[type[BaseException], ...] = (
    gzip.BadGzipFile, cast(type[BaseException], isal_zlib.error), zlib.error, lzma.LZMAError)


def truncated_stream(path: str, compression: str, lines: int) -> TruncatedStreamError:
    """The error of a ``compression`` stream that ends before its end-of-stream marker after ``lines``
    complete decompressed lines: it names the last whole record (counted from 1, as lines are, in every
    message) and its last line."""
    records = lines // 4
    if records == 0:
        return TruncatedStreamError(path, f"{compression} stream truncated before the end of the first record",
                                    record=0)
    return TruncatedStreamError(
        path, f"{compression} stream truncated after record {records} (line {4 * records}), the last complete "
        "record", record=records)


#: what a decompressor object raises for data that is not merely cut short
_PROBE_ERRORS: tuple[type[BaseException], ...] = (*_CORRUPT, EOFError, OSError)
#: compressed bytes per step of :func:`find_truncation` (bounds the output of one step)
_PROBE_BLOCK = 64 << 10
#: a fresh decompressor of one stream (a gzip member, a bz2 or xz stream) per compression
_DECOMPRESSORS: dict[str, Callable[[], Any]] = {
    "gzip": lambda: isal_zlib.decompressobj(wbits=31),
    "bgzf": lambda: isal_zlib.decompressobj(wbits=31),
    "bz2": bz2.BZ2Decompressor,
    "xz": lzma.LZMADecompressor,
}


#: the first bytes of a stream of each compression (a gzip member: magic and deflate)
_STREAM_MAGIC = {"gzip": b"\x1f\x8b\x08", "bgzf": b"\x1f\x8b\x08", "bz2": b"BZh", "xz": b"\xfd7zXZ\x00"}


def _decodable_lines(raw: BinaryIO, compression: str) -> tuple[int, bool]:
    """``(newlines in everything decodable, whether the last stream reached its end marker)``; streams
    (gzip members, bz2 / xz streams) may follow each other."""
    new, magic = _DECOMPRESSORS[compression], _STREAM_MAGIC[compression]
    d, lines, fed = new(), 0, False
    while block := raw.read(_PROBE_BLOCK):
        while block:
            if not fed and block[:len(magic)] != magic[:len(block)]:
                return lines, True  # bytes after the last stream that start none: not a cut (another error)
            lines += d.decompress(block).count(b"\n")
            fed = True
            if not d.eof:
                break
            block = d.unused_data
            d, fed = new(), False
    return lines, d.eof or not fed


def find_truncation(uri: str, compression: str | None = None) -> TruncatedStreamError | None:
    """The error of ``uri``'s compressed stream when it ends before its end-of-stream marker, else None
    (complete, plain, or corrupt in another way).

    A second pass, for when a reader has failed in a way a cut file explains: decompressor objects
    hand out everything decodable before the cut (the file readers drop up to a buffer of it), so
    the error names the file's real last complete record.
    """
    with storage.open_read(uri, buffer_size=_PROBE_BLOCK) as raw:
        comp = compression or sniff_compression(raw.read(32))
        if comp not in _DECOMPRESSORS:
            return None
        raw.seek(0)
        try:
            lines, complete = _decodable_lines(raw, comp)
        except _PROBE_ERRORS:  # corrupt, not (only) cut: the reader's own error stands
            return None
    return None if complete else truncated_stream(uri, comp, lines)


def locate_gzip_damage(uri: str) -> str | None:
    """Where the gzip (or BGZF) file at ``uri`` stops being whole gzip members, for an error that names
    no place: ``"byte N: why"``, or None when every member is whole (or the data just ends: a cut, which
    :func:`find_truncation` names). A second pass, run only after a reader failed; member by member with
    zlib, and byte by byte within the one block that fails, so N is the first byte zlib refuses."""
    with storage.open_read(uri, buffer_size=_PROBE_BLOCK) as raw:
        return gzip_damage_in(raw)


def gzip_damage_in(raw: BinaryIO) -> str | None:
    """:func:`locate_gzip_damage` of an open, seekable reader of the compressed bytes (read from its start)."""
    raw.seek(0)
    d, member, pos = zlib.decompressobj(31), 0, 0
    while block := raw.read(_PROBE_BLOCK):
        while block:
            before = d.copy()
            try:
                d.decompress(block)
            except zlib.error as err:
                at = pos + _first_refused_byte(before, block)
                if at <= member + 2:  # refused within its magic bytes
                    return f"byte {member}: not a gzip member ({err})"
                return f"byte {at}: {err} (in the gzip member that starts at byte {member})"
            if not d.eof:
                pos += len(block)
                break
            pos += len(block) - len(d.unused_data)
            block, member, d = d.unused_data, pos, zlib.decompressobj(31)
    if pos == member:
        return None
    raw.seek(member)
    head = raw.read(3)
    if head != b"\x1f\x8b\x08"[:len(head)]:
        return f"byte {member}: not a gzip member ({pos - member} bytes after the last whole member)"
    return f"byte {member}: the gzip member that starts here ends before its end"


def _first_refused_byte(d: Any, block: bytes) -> int:
    """The offset in ``block`` of the byte on which the decompressor ``d`` fails."""
    for i in range(len(block)):
        try:
            d.decompress(block[i:i + 1])
        except zlib.error:
            return i
    return len(block)


class _TranslatingReader(io.RawIOBase):
    """Turns a decompressor's EOFError / zlib / lzma / OSError into a BadInputError naming the file."""

    def __init__(self, inner: BinaryIO, path: str, compression: str) -> None:
        super().__init__()
        self._inner = inner
        self._path = path
        self._compression = compression

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            n: int = self._inner.readinto(buffer)  # type: ignore[attr-defined]
        except EOFError as err:
            # "Compressed file ended before the end-of-stream marker was reached": find the last record
            truncated = find_truncation(self._path, self._compression)
            if truncated is not None:
                raise truncated from err
            raise self._located(f"truncated or corrupt {self._compression} stream: {err}") from err
        except _CORRUPT as err:
            raise self._located(f"corrupt {self._compression} stream: {err}") from err
        except OSError as err:
            # bz2 reports bad data as a bare OSError; other OSErrors (network, disk) stay retryable
            if str(err) != "Invalid data stream":
                raise
            raise BadInputError(self._path, f"corrupt {self._compression} stream: {err}") from err
        return n

    def _located(self, message: str) -> BadInputError:
        """The error, with the byte where a gzip stream stops being whole members when it can be found."""
        where = locate_gzip_damage(self._path) if self._compression in ("gzip", "bgzf") else None
        return BadInputError(self._path, f"corrupt {self._compression} stream at {where}" if where else message)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._inner.close()
        super().close()


@contextlib.contextmanager
def open_fastq_stream(uri: str) -> Iterator[tuple[BinaryIO, Compression]]:
    """A binary stream of the decompressed bytes of ``uri`` and the sniffed compression."""
    with storage.open_read(uri) as raw, _decompressed(raw, uri) as opened:
        yield opened


@contextlib.contextmanager
def _decompressed(raw: BinaryIO, uri: str) -> Iterator[tuple[BinaryIO, Compression]]:
    """:func:`open_fastq_stream` of ``raw``, an open reader of ``uri``'s stored bytes, which stays open (and
    holds what was read of them: :func:`sniff_fastq` checks its gzip members from it)."""
    head = raw.read(32)
    raw.seek(0)
    comp = sniff_compression(head)
    if comp == "zstd":
        raise BadInputError(uri, "zstd-compressed FASTQ is not supported; use gzip (or bgzip)")
    inner: BinaryIO
    if comp == "gzip" and bare_gzip_header(raw):
        raise bare_header_error(uri)
    if comp in ("gzip", "bgzf"):
        inner = cast(BinaryIO, igzip.IGzipFile(fileobj=raw, mode="rb"))  # type: ignore[no-untyped-call]
    elif comp == "bz2":
        inner = cast(BinaryIO, bz2.BZ2File(raw))
    elif comp == "xz":
        inner = cast(BinaryIO, lzma.LZMAFile(raw))  # noqa: SIM115 - closed by the stream below
    else:
        yield raw, comp
        return
    # closing it closes the decompressor, which leaves the reader it was given open
    stream = io.BufferedReader(_TranslatingReader(inner, uri, comp), buffer_size=STREAM_BLOCK)
    try:
        yield cast(BinaryIO, stream), comp
    finally:
        stream.close()


def _non_ascii_line(blocks: Iterable[bytes]) -> tuple[int, int] | None:
    """1-based line and byte value of the first non-ASCII byte in a stream of blocks, if any."""
    lines = 0
    for block in blocks:
        arr = np.frombuffer(block, dtype=np.uint8)
        bad = np.flatnonzero(arr >= 0x80)
        if bad.size:
            first = int(bad[0])
            return lines + int(np.count_nonzero(arr[:first] == 0x0A)) + 1, int(arr[first])
        lines += int(np.count_nonzero(arr == 0x0A))
    return None


def _translate(err: FastqFormatError, path: str, first_record: int,
               blocks: Iterable[bytes] | None = None) -> BadInputError:
    if err.line is None:
        # dnaio checks for non-ASCII bytes once per buffer and names no line: find it ourselves
        found = _non_ascii_line(blocks) if blocks is not None and "Non-ASCII" in err.message else None
        if found is None:
            return BadInputError(path, err.message)
        rel_line, byte = found
        line = rel_line + 4 * first_record
        return BadInputError(path, f"non-ASCII byte 0x{byte:02x} (FASTQ is ASCII)", line=line,
                             record=(line - 1) // 4)
    line = err.line + 1 + 4 * first_record
    record = first_record + err.line // 4
    message = err.message
    if message.startswith("Premature end of file"):
        # dnaio names the line that is missing and quotes the partial record; point at the record's
        # first line instead, as the planner's line count does
        line = 4 * record + 1
        message = f"file ends inside a record: record {record + 1} (line {line}) is incomplete (truncated file?)"
    return BadInputError(path, message, line=line, record=record)


def parse_records(chunk: bytes, path: str, first_record: int = 0) -> list[dnaio.SequenceRecord]:
    """Parse a record-aligned plain FASTQ chunk; errors carry absolute lines (``4*first_record`` added)."""
    if not chunk:
        return []
    try:
        size = max(1 << 17, min(len(chunk) + 1, 4 << 20))
        with dnaio.FastqReader(io.BytesIO(chunk), buffer_size=size) as r:
            return list(r)
    except FastqFormatError as err:
        raise _translate(err, path, first_record, [chunk]) from None


def read_records(uri: str, max_records: int | None = None) -> Iterator[dnaio.SequenceRecord]:
    """Stream the records of a whole file (any supported compression) with absolute error lines."""
    failure: FastqFormatError | None = None
    with open_fastq_stream(uri) as (stream, _):
        try:
            with dnaio.FastqReader(stream, buffer_size=STREAM_BLOCK, _close_file=False) as r:
                for n, rec in enumerate(r):
                    if max_records is not None and n >= max_records:
                        return
                    yield rec
        except FastqFormatError as err:
            if err.line is not None or "Non-ASCII" not in err.message:
                raise _translate(err, uri, 0) from None
            failure = err
    if failure is not None:
        # dnaio names no line for a non-ASCII byte: a second streaming pass over the file finds it
        with open_fastq_stream(uri) as (again, _):
            raise _translate(failure, uri, 0, iter(lambda: again.read(STREAM_BLOCK), b"")) from None


def check_quality_range(chunk: bytes, path: str, first_record: int = 0) -> None:
    """Reject quality characters outside ``!``..``~`` in a record-aligned plain chunk.

    Vectorised: one pass of numpy comparisons finds the (rare) bytes outside the printable range;
    only when some exist are they mapped to lines (``searchsorted`` over newline positions) to see if
    any lies in a quality line (every 4th line). ``\\r`` right before a newline is a CRLF line end.
    """
    arr = np.frombuffer(chunk, dtype=np.uint8)
    odd = np.flatnonzero(((arr < 33) & (arr != 10)) | (arr > 126))
    if odd.size == 0:
        return
    newlines = np.flatnonzero(arr == 10)
    line_of = np.searchsorted(newlines, odd, side="left")
    in_qual = (line_of % 4) == 3
    if not in_qual.any():
        return
    cand = odd[in_qual]
    cand_lines = line_of[in_qual]
    nxt = cand + 1
    is_crlf = (arr[cand] == 13) & ((nxt >= arr.size) | (arr[np.minimum(nxt, arr.size - 1)] == 10))
    bad = np.flatnonzero(~is_crlf)
    if bad.size == 0:
        return
    pos = int(cand[bad[0]])
    rel_line = int(cand_lines[bad[0]])
    rel_record = rel_line // 4
    header_start = 0 if rel_line < 4 else int(newlines[rel_line - 4]) + 1
    header_end = int(newlines[rel_line - 3])
    name = chunk[header_start:header_end].rstrip(b"\r").decode("ascii", "replace")
    raise BadInputError(
        path,
        f"quality character {chr(arr[pos])!r} (byte {int(arr[pos])}) is outside '!'..'~' "
        f"(record {first_record + rel_record + 1}, {name!r})",
        line=4 * first_record + rel_line + 1,
        record=first_record + rel_record,
    )


#: quality bytes sampled at plan time for the encoding check
PHRED_SAMPLE_RECORDS = 10_000


def check_phred_offset(qualities: bytes, path: str) -> None:
    """Reject Phred+64 / Solexa data (rule in the module docstring) from a sample of qualities."""
    if not qualities:
        return
    values = np.frombuffer(qualities, dtype=np.uint8)  # min() and max() of bytes step through them in Python
    lo, hi = int(values.min()), int(values.max())
    if lo >= ord(";") and hi > ord("K"):
        raise BadInputError(
            path,
            f"qualities look like Phred+64 (Illumina 1.3-1.7 / Solexa): none below ';', some up to "
            f"{chr(hi)!r}; "
            "seqlake reads Phred+33 only: convert with `seqtk seq -Q64 -V in.fastq > out.fastq`",
        )


def check_mates(r1: list[dnaio.SequenceRecord], r2: list[dnaio.SequenceRecord], path1: str, path2: str,
                first_record: int = 0) -> None:
    """R1 and R2 hold the same reads in the same order (ids equal up to a trailing /1, /2)."""
    if len(r1) != len(r2):
        n = min(len(r1), len(r2))
        raise BadInputError(
            path1 if len(r1) < len(r2) else path2,
            f"paired files have different read counts: {path1} has {first_record + len(r1)} records, "
            f"{path2} has {first_record + len(r2)}",
            line=4 * (first_record + n) + 1, record=first_record + n,
        )
    for i, (a, b) in enumerate(zip(r1, r2, strict=True)):
        if not a.is_mate(b):
            rec = first_record + i
            raise BadInputError(
                path2, f"read name {b.id!r} does not match its mate {a.id!r} in {path1} (record {rec + 1})",
                line=4 * rec + 1, record=rec,
            )


@dataclass(frozen=True)
class Sniff:
    """What the first records of a file say."""

    compression: Compression
    #: records parsed (up to PHRED_SAMPLE_RECORDS); fewer means the file is that short
    records: int
    #: decompressed bytes those records take
    plain_bytes: int
    #: True when the sample reached the end of the file
    complete: bool
    #: a gzip or BGZF file read to its end: where its bytes stop being whole gzip members (None: they do
    #: not; :func:`locate_gzip_damage`)
    gzip_damage: str | None = None


#: decompressed bytes read by the plan-time sniff (~2,000 reads of 2x250 bp, ~4,000 of 2x150)
SNIFF_BYTES = 1 << 20
#: the sniff grows up to this when the first record is longer than SNIFF_BYTES
SNIFF_MAX_BYTES = 256 << 20


def sniff_fastq(uri: str, max_records: int = PHRED_SAMPLE_RECORDS, max_bytes: int | None = None) -> Sniff:
    """Check the shape and quality encoding of the first records (``SNIFF_BYTES`` by default) and
    measure their size."""
    want = SNIFF_BYTES if max_bytes is None else max_bytes
    damage = None
    with storage.open_read(uri) as raw, _decompressed(raw, uri) as (stream, comp):
        data = stream.read(want)
        while True:
            extra = stream.read(1)
            complete = not extra
            if complete:
                break
            data += extra
            # keep whole records only; a first record longer than the sample (long reads) grows it
            aligned = record_aligned_prefix(data)
            if aligned or len(data) >= SNIFF_MAX_BYTES:
                data = aligned
                break
            data += stream.read(len(data))
        if complete and comp in ("gzip", "bgzf"):
            # the stream reader stops at the last whole member: what follows (damage, another file's tail)
            # is what an index pass would refuse. Checked from the bytes the sniff fetched (a small file's
            # one GET), as that pass is skipped for a file taken whole here.
            damage = gzip_damage_in(raw)
    records = parse_records(data, uri)
    quals = b"".join(r.qualities_as_bytes() for r in records[:max_records])
    check_quality_range(data, uri)
    check_phred_offset(quals, uri)
    return Sniff(compression=comp, records=len(records), plain_bytes=len(data), complete=complete,
                 gzip_damage=damage)


def record_aligned_prefix(data: bytes) -> bytes:
    """The longest prefix of ``data`` (which starts at a record) made of whole 4-line records."""
    end = data.rfind(b"\n") + 1
    for _ in range(data.count(b"\n") % 4):
        end = data.rfind(b"\n", 0, end - 1) + 1
    return data[:end]


def iter_file_chunks(path: str, buffer_size: int = 4 << 20) -> Iterator[bytes]:
    """Record-aligned chunks of a local FASTQ file (plain or gzip), each about ``buffer_size`` bytes
    (or one record, if longer). A convenience for tests and the QC-only benchmark; the worker reads
    shards via :mod:`seqlake.plan.shards`."""
    for chunk, _ in iter_file_chunk_lines(path, buffer_size):
        yield chunk


def iter_file_chunk_lines(
    path: str, buffer_size: int = 4 << 20
) -> Iterator[tuple[bytes, npt.NDArray[np.int64] | None]]:
    """:func:`iter_file_chunks` with the offsets of each chunk's newlines, which the chunker finds anyway
    (for :func:`seqlake.reads.chunks.parse_chunk`: None for a last chunk without a final newline).

    Blocks are decompressed into one reused buffer; a chunk ends after the last newline of its last whole
    record (numpy finds newlines several times faster than ``bytes.count``, which dnaio's chunker uses).
    Only the whole records are copied out; the incomplete tail moves to the buffer's front.
    """
    with open(path, "rb") as raw:  # noqa: PTH123 - a binary stream handed to igzip
        magic = raw.read(2)
    opener = igzip.open if magic == b"\x1f\x8b" else open
    buf = bytearray(buffer_size)
    held = 0  # bytes of an incomplete record at the buffer's front
    with opener(path, "rb") as f:
        while True:
            if held == len(buf):  # a record longer than the buffer: grow it
                buf.extend(bytes(len(buf)))
            n = f.readinto(memoryview(buf)[held:])
            if not n:
                if held:
                    yield bytes(memoryview(buf)[:held]), None  # the last record, without a final newline
                return
            size = held + n
            view = np.frombuffer(buf, dtype=np.uint8, count=size)
            newlines = np.flatnonzero(view == 10)
            del view  # a bytearray cannot be resized while a numpy view holds its buffer
            whole = len(newlines) // 4 * 4
            if not whole:
                held = size
                continue
            end = int(newlines[whole - 1]) + 1
            with memoryview(buf) as mv:
                yield bytes(mv[:end]), newlines[:whole]  # one copy (slicing the bytearray would make two)
            buf[: size - end] = buf[end:size]
            held = size - end
