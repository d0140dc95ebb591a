"""Record checkpoints and gzip seek indexes: how a shard starts reading in the middle of a file.

One streaming pass over the decompressed data counts the records and keeps a *checkpoint* every
``spacing`` bytes of plain data: ``(plain offset of a record start, records before it)``. For gzip and
BGZF the pass decompresses with rapidgzip (``RapidgzipFile(chunk_size=1 MiB)``) on the vCPUs the process
was given (:func:`index_threads`: the index job's ``IndexJobVcpus``, or the plan Lambda's vCPUs): in
parallel when they are enough to pay for it (:func:`decode_threads`), else sequentially, with the
counting in a second process when there is a second vCPU (:func:`scan_counting_aside`). It exports its
seek index in the GZTOOL format (~3 MB per GB of plain data); a shard's reader imports that
index with the same ``chunk_size`` (rapidgzip re-chunks the index points to the reader's chunk size),
seeks to the checkpoint before its first record and skips at most ``spacing`` bytes of records. No copy
of the data is written. rapidgzip is used because it both decompresses faster than ``gzip -dc`` on one
core and exports an index a later process can import; ``tests/core/test_plan.py`` joins every shard's
reads back together and compares them with the decompressed file, byte for byte.

rapidgzip does not notice a gzip stream cut inside a deflate block (it returns the data decoded so far),
so the pass checks the end of the file itself (:func:`_check_gzip_end`): the footer's ISIZE and CRC32 must
describe the decompressed data (RFC 1952 section 2.3.1). A cut file can also surface first as a record
cut short or as rapidgzip's "corrupt" error; on any bad-input error the pass reads the file once more
as a stream (isal) to tell a truncated stream apart, and then names the last complete record before
the cut (:func:`seqlake.reads.fastq.find_truncation`).

A ``RapidgzipFile`` left open at interpreter exit aborts the process (SIGABRT); every use here is a
``with`` block.
"""

from __future__ import annotations

import contextlib
import io
import json
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from seqlake.base import forked, storage
from seqlake.base.cpus import available_cpus, threads_from_env
from seqlake.base.errors import BadInputError

#: plain bytes between checkpoints: a shard skips ~half of this on average (~250 records of 2x250 bp)
CHECKPOINT_SPACING = 256 << 10
#: rapidgzip chunk size for building and for importing indexes (they must be equal)
CHUNK_SIZE = 1 << 20
#: read size of the counting pass
SCAN_BLOCK = 4 << 20
#: fewest vCPUs on which the index pass decodes in parallel. rapidgzip's parallel decoding spends about
#: 2.3x the CPU per byte of its sequential (ISA-L) decoding, whatever the thread count (1.8 against 0.78
#: CPU seconds for 436 MB of FASTQ here): it is slower on 2 vCPUs, about even on 3, ~1.7x on 4, ~3.4x on 8
PARALLEL_FROM = 4

_NL = 10


@dataclass(frozen=True)
class ScanResult:
    records: int
    plain_size: int
    #: (plain offset of a record start, records before it), ascending; always starts with (0, 0)
    checkpoints: list[tuple[int, int]] = field(default_factory=list)


def scan_records(stream: BinaryIO, path: str, spacing: int = CHECKPOINT_SPACING,
                 block: int = SCAN_BLOCK) -> ScanResult:
    """Count 4-line records and take a checkpoint at the first record start at or after each multiple of
    ``spacing`` (a missing final newline is accepted). Newlines are counted with ``bytes.count`` over
    big blocks, which runs in C at memory speed: the counting pass costs far less than decompressing.

    A record starts at offset 0 and after every 4th newline. Raises BadInputError when the line count
    says the file ends inside a record.
    """
    buf = bytearray(block)
    view = memoryview(buf)
    scan = _RecordScan(spacing)
    while n := stream.readinto(view):  # type: ignore[attr-defined]
        scan.feed(buf, n)
    return scan.result(path)


class _RecordScan:
    """The counting state of :func:`scan_records`, fed the plain data block by block."""

    def __init__(self, spacing: int) -> None:
        self.spacing = spacing
        self.base = 0  # plain offset of the next block's first byte
        self.lines = 0  # newlines before base
        self.next_ck = spacing
        self.pending: int | None = None  # the next checkpoint's record starts after newline number `pending`
        self.last = _NL
        self.cks: list[tuple[int, int]] = [(0, 0)]

    def feed(self, buf: bytearray, n: int) -> None:
        """Count the first ``n`` bytes of ``buf``, the plain data after everything fed so far."""
        spacing, base, lines, next_ck, pending, cks = (self.spacing, self.base, self.lines, self.next_ck,
                                                      self.pending, self.cks)
        pos = 0
        while True:
            if pending is not None:
                pos, need = _after_newlines(buf, pos, n, pending - lines)
                lines = pending - need
                if need:
                    break
                cks.append((base + pos, pending // 4))
                pending = None
                next_ck = ((base + pos) // spacing + 1) * spacing
            c = next_ck - base
            if c >= n:
                break
            lines += buf.count(b"\n", pos, c)
            pos = c
            if lines % 4 == 0 and (buf[c - 1] if c else self.last) == _NL:
                cks.append((base + c, lines // 4))
                next_ck += spacing
            else:
                pending = (lines // 4 + 1) * 4
        self.lines = lines + buf.count(b"\n", pos, n)
        self.last = buf[n - 1]
        self.base = base + n
        self.next_ck, self.pending = next_ck, pending

    def result(self, path: str) -> ScanResult:
        cks = self.cks
        while len(cks) > 1 and cks[-1][0] >= self.base:
            cks.pop()  # a checkpoint at the end of the data is not a record start
        return ScanResult(records=whole_records(self.lines, self.last, path), plain_size=self.base,
                          checkpoints=cks)


def scan_counting_aside(stream: BinaryIO, path: str, spacing: int = CHECKPOINT_SPACING,
                        block: int = SCAN_BLOCK, depth: int = 2) -> ScanResult:
    """:func:`scan_records` with the counting in a forked helper process, while this one decompresses:
    on two cores the count costs no wall time. Call it only when :func:`seqlake.base.forked.can_fork`.

    A process, not a thread: rapidgzip takes the GIL back many times per ``readinto`` (for its reads of
    the source and between chunks), and a counting thread holds it as long as the decoder then waits
    (~0.1 s per 273 MB, what the count itself costs). The decompressed blocks go through ``depth + 1``
    slots of an anonymous shared mapping; two pipes carry the slot numbers, and at the end the counting
    state back (JSON). The helper runs nothing but the count (:func:`seqlake.base.forked.fork_helper`:
    whatever it raises reaches this process with its traceback and exit status, and is raised here).
    """
    slots = depth + 1
    shared = mmap.mmap(-1, slots * block)
    view = memoryview(shared)
    full_r, full_w = os.pipe()  # slot and length of each decompressed block, to the counting process
    free_r, free_w = os.pipe()  # slots counted, then the counting state (JSON), back

    def count() -> None:  # pragma: no cover  (the helper: coverage does not follow a fork)
        os.close(full_w)
        os.close(free_r)
        scan = _RecordScan(spacing)
        while len(msg := read_exact(full_r, _SLOT.size)) == _SLOT.size:
            slot, n = _SLOT.unpack(msg)
            if n == 0:
                write_all(free_w, json.dumps(scan.__dict__).encode())
                return
            scan.feed(bytearray(view[slot * block:slot * block + n]), n)
            write_all(free_w, PIPE_U64.pack(slot))

    helper = forked.fork_helper(f"the counting process of the index pass of {path}", count)
    os.close(full_r)
    os.close(free_w)
    pipes = [full_w, free_r]
    try:
        free, in_flight = list(range(slots)), 0
        while True:
            if not free:
                free.append(PIPE_U64.unpack(read_exact(free_r, PIPE_U64.size, path))[0])
                in_flight -= 1
            slot = free.pop()
            n = stream.readinto(view[slot * block:(slot + 1) * block])  # type: ignore[attr-defined]
            write_all(full_w, _SLOT.pack(slot, n))
            if not n:
                break
            in_flight += 1
        read_exact(free_r, PIPE_U64.size * in_flight, path)
        state = b"".join(iter(lambda: os.read(free_r, 1 << 20), b""))
    except (HelperGoneError, BrokenPipeError):
        _close_all(pipes)
        helper.join()  # raises what the helper raised
        raise
    except BaseException:
        _close_all(pipes)  # the helper reads a short message and leaves
        helper.reap()  # this process's own error is the one to report
        raise
    _close_all(pipes)
    helper.join()
    if not state:
        raise HelperGoneError(f"{path}: the counting process of the index pass ended without its counts")
    scan = _RecordScan(spacing)
    scan.__dict__.update(json.loads(state))
    scan.cks = [(offset, records) for offset, records in scan.cks]
    return scan.result(path)


class HelperGoneError(RuntimeError):
    """A forked helper's pipe ended before what it was to send (the helper has ended: join it)."""


def _close_all(fds: list[int]) -> None:
    while fds:
        os.close(fds.pop())


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the pipe ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_SLOT = struct.Struct("<QQ")
#: one unsigned 64-bit number on a pipe between a pass and its forked counting process
PIPE_U64 = struct.Struct("<Q")


def read_exact(fd: int, size: int, path: str | None = None) -> bytes:
    """``size`` bytes from the pipe ``fd``: fewer only at its end (an error naming ``path`` if given)."""
    out = b""
    while len(out) < size and (more := os.read(fd, size - len(out))):
        out += more
    if path is not None and len(out) < size:
        raise HelperGoneError(f"{path}: the counting process of the index pass ended early")
    return out


def whole_records(lines: int, last: int, path: str) -> int:
    """Records of data with ``lines`` newlines whose last byte is ``last`` (a missing final newline is
    accepted); BadInputError when the data ends inside a record."""
    records, rest = divmod(lines, 4)
    if last != _NL:
        rest += 1  # the last line has no newline character
    if rest == 4:
        records, rest = records + 1, 0
    if rest:
        first_line = 4 * records + 1
        raise BadInputError(
            path, f"file ends inside a record: record {records + 1} (line {first_line}) has {rest} of 4 lines",
            line=first_line, record=records)
    return records


def _after_newlines(buf: bytearray, pos: int, end: int, need: int) -> tuple[int, int]:
    """Move past up to ``need`` newlines of ``buf[pos:end]``: (position after the last one found, or
    ``end`` when too few; newlines still needed)."""
    while need:
        q = buf.find(b"\n", pos, end)
        if q < 0:
            return end, need
        pos = q + 1
        need -= 1
    return pos, 0


def _check_gzip_end(f: Any, raw: BinaryIO, plain_size: int, path: str) -> None:
    """The last 8 bytes (CRC32 and ISIZE of the last member) must describe the end of the plain data.

    One member: ISIZE equals the plain size mod 2^32 (a cut file matches by chance with p = 2^-32).
    Several members (pigz, BGZF): the CRC32 of the last ISIZE plain bytes must equal the stored CRC.
    """
    raw.seek(0, io.SEEK_END)
    size = raw.tell()
    if size < 18:
        raise BadInputError(path, "truncated gzip stream (shorter than a gzip header and footer)")
    raw.seek(size - 8)
    crc, isize = struct.unpack("<II", raw.read(8))
    if isize == plain_size % (1 << 32) and (plain_size or crc == 0):  # rapidgzip checks no CRC of no data
        return
    member = isize
    while member <= plain_size:
        f.seek(plain_size - member)
        c, left = 0, member
        while left and (b := f.read(min(left, 8 << 20))):
            c = zlib.crc32(b, c)
            left -= len(b)
        if c == crc and not left:
            return
        member += 1 << 32
    raise BadInputError(path, "truncated gzip stream: the file ends inside its last gzip member")


class _Latch(io.RawIOBase):
    """Remembers an exception raised by the compressed source.

    rapidgzip passes a source's exception through, but a ValueError / RuntimeError from the source (a
    lost S3 connection can surface as either) looks just like rapidgzip's own corrupt-data errors; the
    latch tells them apart so an I/O failure stays retryable instead of becoming "bad input".
    """

    def __init__(self, inner: BinaryIO) -> None:
        super().__init__()
        self._inner = inner
        self.error: BaseException | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            n: int = self._inner.readinto(buffer)  # type: ignore[attr-defined]
        except Exception as err:
            self.error = err
            raise
        return n

    def read(self, size: int = -1) -> bytes:
        try:
            return self._inner.read(size)
        except Exception as err:
            self.error = err
            raise

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        try:
            return self._inner.seek(offset, whence)
        except Exception as err:
            self.error = err
            raise

    def tell(self) -> int:
        return self._inner.tell()


class _Checked:
    """A RapidgzipFile whose errors are classified: corrupt data -> BadInputError naming the file,
    a failure of the source (network, disk) -> OSError, which the worker treats as retryable.

    rapidgzip reports corrupt deflate data, a bad header or a CRC mismatch as RuntimeError / ValueError;
    only errors raised by its own calls are translated (not those of the caller's code).
    """

    def __init__(self, f: Any, latch: _Latch, path: str) -> None:
        self._f = f
        self._latch = latch
        self._path = path

    def _source_ok(self) -> None:
        if self._latch.error is not None:
            raise OSError(f"{self._path}: reading the compressed data failed: {self._latch.error}") \
                from self._latch.error

    def _fail(self, err: Exception) -> Exception:
        self._source_ok()
        return BadInputError(self._path, f"corrupt gzip stream: {err}")

    def read(self, size: int = -1) -> bytes:
        try:
            data: bytes = self._f.read(size)
        except (RuntimeError, ValueError) as err:
            raise self._fail(err) from err
        self._source_ok()
        return data

    def readinto(self, buffer: Any) -> int:
        try:
            n: int = self._f.readinto(buffer)
        except (RuntimeError, ValueError) as err:
            raise self._fail(err) from err
        self._source_ok()
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        try:
            pos: int = self._f.seek(offset, whence)
        except (RuntimeError, ValueError) as err:
            raise self._fail(err) from err
        self._source_ok()
        return pos

    def tell(self) -> int:
        pos: int = self._f.tell()
        return pos

    def export_index(self, path: str, fmt: Any) -> None:
        self._f.export_index(path, fmt)


def index_threads() -> int:
    """vCPUs of the index pass: the vCPUs the job was given (``SEQLAKE_THREADS``), else every CPU this
    process may use (a Lambda function: the vCPUs of its memory size)."""
    return threads_from_env(default=available_cpus())


def decode_threads(vcpus: int) -> int:
    """rapidgzip threads on ``vcpus``: all of them from :data:`PARALLEL_FROM` (its threads decode ahead
    while this one counts), else one (sequential decoding; with a second vCPU the counting runs in a
    process of its own, :func:`scan_counting_aside`)."""
    return vcpus if vcpus >= PARALLEL_FROM else 1


@contextlib.contextmanager
def open_indexed(uri: str, index: bytes | None = None, threads: int = 1) -> Iterator[Any]:
    """A seekable decompressed view of a gzip / BGZF file; ``index`` is an exported GZTOOL index.

    Yields a reader with read, readinto, seek and tell (over ``rapidgzip.RapidgzipFile``), decoding on
    ``threads`` threads (a shard's reader: one; the index pass: :func:`index_threads`).
    """
    import rapidgzip

    with storage.open_read(uri, buffer_size=CHUNK_SIZE) as raw:
        latch = _Latch(raw)
        try:
            f = rapidgzip.RapidgzipFile(latch, parallelization=threads, chunk_size=CHUNK_SIZE)
        except (RuntimeError, ValueError) as err:
            if latch.error is not None:
                raise OSError(f"{uri}: reading failed: {latch.error}") from latch.error
            raise BadInputError(uri, f"corrupt gzip stream: {err}") from err
        with f:
            if index is not None:
                try:
                    f.import_index(io.BytesIO(index))
                except (RuntimeError, ValueError) as err:
                    # the index is ours, not the user's: a broken one is retryable, not bad input
                    raise RuntimeError(f"{uri}: cannot import the seek index: {err}") from err
            yield _Checked(f, latch, uri)


@dataclass(frozen=True)
class IndexResult:
    scan: ScanResult
    #: the GZTOOL seek index, None for plain files
    index: bytes | None


def index_gzip(uri: str, spacing: int = CHECKPOINT_SPACING, threads: int | None = None) -> IndexResult:
    """One pass over a gzip / BGZF file on ``threads`` vCPUs (default :func:`index_threads`): count
    records, take checkpoints, export the seek index.

    A truncated stream raises :class:`~seqlake.base.errors.TruncatedStreamError` naming the last complete
    record, whichever way rapidgzip met the cut.
    """
    vcpus = index_threads() if threads is None else max(1, threads)
    if gzip_header_only(uri):  # cut right after its header: no record, and a stream that never ended
        from seqlake.reads.fastq import bare_header_error

        raise bare_header_error(uri)
    with naming_truncation(uri):
        return _index_gzip(uri, spacing, vcpus)


def gzip_header_only(uri: str) -> bool:
    """Whether ``uri`` is one gzip member header and nothing else: a stream cut after its header (see
    :func:`seqlake.reads.fastq.bare_gzip_header`)."""
    from seqlake.reads.fastq import bare_gzip_header

    with storage.open_read(uri) as raw:
        return bare_gzip_header(raw)


@contextlib.contextmanager
def naming_truncation(uri: str) -> Iterator[None]:
    """A reader's :class:`BadInputError` inside becomes the :class:`TruncatedStreamError` naming the last
    complete record when ``uri``'s compressed stream is cut (readers meet a cut in many shapes), and
    one that names no place gets the byte where the gzip members stop being whole."""
    try:
        yield
    except BadInputError as err:
        # imported here: seqlake.reads.fastq brings numpy, a third of a planning pass's start-up, for a rare case
        from seqlake.reads.fastq import find_truncation, locate_gzip_damage

        truncated = find_truncation(uri)
        if truncated is not None:
            raise truncated from err
        if err.line is None and err.record is None and "byte " not in err.message:
            # rapidgzip names no place: a second pass finds the first byte zlib refuses
            where = locate_gzip_damage(uri)
            if where is not None:
                raise BadInputError(uri, f"corrupt gzip stream at {where}") from err
        raise


def _index_gzip(uri: str, spacing: int, vcpus: int) -> IndexResult:
    import rapidgzip

    with open_indexed(uri, threads=decode_threads(vcpus)) as f:
        # a forked counter only when this thread is the process's only one (forked.can_fork)
        aside = decode_threads(vcpus) == 1 < vcpus and forked.can_fork()
        result = scan_counting_aside(f, uri, spacing) if aside else scan_records(f, uri, spacing)
        with storage.open_read(uri) as raw:
            _check_gzip_end(f, raw, result.plain_size, uri)
        # rapidgzip's export wants a path or a file object; a temp file keeps memory flat for big indexes
        with tempfile.TemporaryDirectory(prefix="seqlake-idx-") as tmp:
            out = Path(tmp, "index.gztool")
            f.export_index(str(out), rapidgzip.IndexFormat.GZTOOL)
            index = out.read_bytes()
    # a stream of no data has no seek point: no index (a zero-record span never opens one)
    return IndexResult(scan=result, index=index if result.plain_size else None)


def count_plain(uri: str, spacing: int = CHECKPOINT_SPACING) -> ScanResult:
    """The same checkpoint table for an uncompressed file (paired plain input needs record numbers)."""
    with storage.open_read(uri, buffer_size=SCAN_BLOCK) as f:
        return scan_records(f, uri, spacing)


def skip_records(f: Any, offset: int, count: int, block: int = 1 << 16) -> int:
    """Seek ``f`` to ``offset`` (a record start) and return the plain offset ``count`` records later."""
    f.seek(offset)
    need = 4 * count
    pos = offset
    while need:
        b = f.read(block)
        if not b:
            raise EOFError(f"fewer than {count} records after offset {offset}")
        c = b.count(b"\n")
        if c < need:
            need -= c
            pos += len(b)
            continue
        p = -1
        for _ in range(need):
            p = b.index(b"\n", p + 1)
        return pos + p + 1
    return pos


# -- BGZF without an index pass ---------------------------------------------------------------------
# A BGZF file is a series of gzip members ("blocks") of at most 64 KiB, each naming its own compressed
# size in its header (the ``BC`` extra subfield, SAM/BAM specification section 4.1) and its plain size
# in its footer: a reader can start at any block. A single-end BGZF input is therefore cut like a plain
# file, by byte ranges, with no pass over its data: a shard is the records whose first byte lies in
# its range of blocks (see seqlake.plan.shards).

#: a BGZF block header up to its BSIZE field: gzip magic, deflate, FEXTRA, ..., XLEN 6, ``BC``, SLEN 2
_BGZF_MAGIC = b"\x1f\x8b\x08\x04"
_BGZF_HEADER = 18
#: bytes read to find the first block at or after an offset (blocks are at most 64 KiB)
BGZF_WINDOW = 256 << 10


def bgzf_block_size(buf: bytes, p: int) -> int | None:
    """The whole size of the BGZF block whose header starts at ``buf[p]``, or None when none does."""
    head = buf[p:p + _BGZF_HEADER]
    if len(head) < _BGZF_HEADER or head[:4] != _BGZF_MAGIC or head[10:16] != b"\x06\x00BC\x02\x00":
        return None
    size: int = struct.unpack_from("<H", head, 16)[0] + 1
    return size


def next_bgzf_block(f: Any, offset: int, size: int, path: str) -> int:
    """The compressed offset of the first BGZF block starting at or after ``offset`` (``size`` when
    none does). A candidate header counts when the blocks it chains to are headers too, up to the end
    of the window or of the file, so deflate data that happens to look like a header is passed over."""
    if offset <= 0:
        return 0
    f.seek(offset)
    buf: bytes = f.read(BGZF_WINDOW)
    at_eof = offset + len(buf) >= size
    p = buf.find(_BGZF_MAGIC)
    while p >= 0:
        q, chained = p, 0
        while (n := bgzf_block_size(buf, q)) is not None:
            q += n
            chained += 1
        if chained and ((at_eof and q == len(buf)) or (chained >= 2 and q + _BGZF_HEADER > len(buf))):
            return offset + p
        p = buf.find(_BGZF_MAGIC, p + 1)
    if at_eof:
        return size
    raise BadInputError(path, f"not BGZF: no block header within {BGZF_WINDOW} bytes after byte {offset}")


def bgzf_plain_ratio(f: Any, size: int) -> float:
    """Plain bytes per compressed byte of the file's first blocks (from their headers and footers)."""
    f.seek(0)
    buf: bytes = f.read(min(size, BGZF_WINDOW))
    q = compressed = plain = 0
    while (n := bgzf_block_size(buf, q)) is not None and q + n <= len(buf):
        plain += struct.unpack_from("<I", buf, q + n - 4)[0]
        compressed += n
        q += n
    return plain / compressed if compressed and plain else 1.0


def iter_bgzf_blocks(f: Any, start: int, stop: int | None, path: str) -> Iterator[bytes]:
    """The plain data of the BGZF blocks from compressed offset ``start`` (a block start) up to ``stop``
    (None: the end of the file), block by block, each checked against its CRC32 and size."""
    from isal import isal_zlib

    f.seek(start)
    pos = start
    while stop is None or pos < stop:
        head: bytes = f.read(_BGZF_HEADER)
        if not head:
            return
        n = bgzf_block_size(head, 0)
        if n is None:
            raise BadInputError(path, f"not BGZF: no block header at byte {pos}")
        body: bytes = f.read(n - _BGZF_HEADER)
        if len(body) != n - _BGZF_HEADER:
            raise BadInputError(path, f"truncated BGZF block at byte {pos}")
        crc, isize = struct.unpack_from("<II", body, len(body) - 8)
        try:
            data = isal_zlib.decompress(body[:-8], wbits=-15)
        except isal_zlib.error as err:  # type: ignore[misc]  # IsalError, an Exception
            raise BadInputError(path, f"corrupt BGZF block at byte {pos}: {err}") from err
        if len(data) != isize or isal_zlib.crc32(data) != crc:
            raise BadInputError(path, f"corrupt BGZF block at byte {pos}: its CRC32 or size does not match")
        pos += n
        if data:
            yield data
