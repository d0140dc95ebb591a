"""Record numbers of a BGZF file without a seek index: a counting pass over its blocks.

A paired input's R1 and R2 shards must hold the same read numbers, and the blocks of two BGZF files
end at different records, so a paired BGZF input needs record counts. It does not need a seek index:
every BGZF block is a gzip member that names its own compressed size (SAM/BAM specification, 4.1), so
a reader can start at any block. :func:`count_records` inflates every block once, counts its newlines
and takes a checkpoint at the first record start of the first block at or after every ``spacing`` bytes
of plain data. A checkpoint's offset is a BGZF *virtual offset* (section 4.1.1 of the same
specification): the block's compressed offset shifted left 16 bits, plus the record's offset in the
block's plain data (under 2^16: a block holds at most 64 KiB). Shards are then record ranges from a
checkpoint, exactly as for a gzip index (``seqlake.plan.planner``), and a child inflates its blocks from the
checkpoint's block on (``seqlake.plan.shards``): no index is exported, stored or imported.

Blocks are independent, so the pass counts them on every vCPU the process was given, and joins their
counts in file order; every block's CRC32 and size are checked. ISA-L's inflate (about 55 % of the
pass's CPU) releases the GIL; ``bytes.count`` (about 30 %) holds it, and is still the cheaper count:
numpy's would release the GIL, but importing numpy costs about a third of the whole pass on the bench
file. So a local file is cut into chunks of whole blocks (``CHUNK_BYTES`` apart, at the first block
found after each cut) counted by ``n`` processes, this one and ``n - 1`` forked ones, each with a GIL
of its own; an S3 object is counted on threads (a forked process would share this one's S3 client
and its connections). A file that is not whole blocks from chunk to chunk is counted again, read in
order, which names what is wrong with it.
"""

from __future__ import annotations

import itertools
import marshal
import os
import struct
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from seqlake.base import forked, storage
from seqlake.base.cpus import available_cpus, threads_from_env
from seqlake.base.errors import BadInputError
from seqlake.reads.gzindex import (
    CHECKPOINT_SPACING,
    PIPE_U64,
    ScanResult,
    bgzf_block_size,
    naming_truncation,
    next_bgzf_block,
    read_exact,
    whole_records,
    write_all,
)

#: compressed bytes read and handed to a thread at once (whole blocks of at most 64 KiB each)
BATCH_BYTES = 4 << 20
#: compressed bytes of a local file counted by one process at once, on several vCPUs
CHUNK_BYTES = 1 << 20
#: bits of a virtual offset that hold the offset in the block's plain data
VIRTUAL_SHIFT = 16
_NL = 10


class NotBgzfError(Exception):
    """The file is not BGZF after its first block (gzip members of another kind follow): the caller
    indexes it as plain gzip instead."""


def virtual_offset(block: int, within: int) -> int:
    return (block << VIRTUAL_SHIFT) | within


def split_virtual(offset: int) -> tuple[int, int]:
    """(compressed offset of the block, offset in its plain data)."""
    return offset >> VIRTUAL_SHIFT, offset & ((1 << VIRTUAL_SHIFT) - 1)


#: one block's counts: (compressed offset, plain size, newlines, offsets of its first 4 newlines, last byte)
_Block = tuple[int, int, int, tuple[int, ...], int]


def _count_batch(buf: bytes, base: int, path: str) -> list[_Block]:
    """Inflate and count the whole blocks of ``buf`` (which starts at compressed offset ``base``)."""
    from isal import isal_zlib

    out: list[_Block] = []
    q = 0
    while q < len(buf):
        n = bgzf_block_size(buf, q)
        assert n is not None and q + n <= len(buf)  # the reader cut ``buf`` at block ends
        crc, isize = struct.unpack_from("<II", buf, q + n - 8)
        try:
            data = isal_zlib.decompress(buf[q + 18:q + n - 8], wbits=-15)
        except isal_zlib.error as err:  # type: ignore[misc]  # IsalError, an Exception
            raise BadInputError(path, f"corrupt BGZF block at byte {base + q}: {err}") from err
        if len(data) != isize or isal_zlib.crc32(data) != crc:
            raise BadInputError(path, f"corrupt BGZF block at byte {base + q}: its CRC32 or size does not match")
        newlines = data.count(b"\n")
        first: list[int] = []
        p = -1
        while len(first) < 4 and (p := data.find(b"\n", p + 1)) >= 0:
            first.append(p)
        out.append((base + q, len(data), newlines, tuple(first), data[-1] if data else _NL))
        q += n
    return out


def _batches(f: Any, path: str) -> Iterator[tuple[bytes, int]]:
    """The file's compressed bytes as (whole blocks, offset of the first), about ``BATCH_BYTES`` each."""
    pos, buf = 0, b""
    while True:
        more: bytes = f.read(BATCH_BYTES)
        buf += more
        q = 0
        while (n := bgzf_block_size(buf, q)) is not None and q + n <= len(buf):
            q += n
        if q:
            yield buf[:q], pos
            pos, buf = pos + q, buf[q:]
        if (buf and not more) or (len(buf) >= 18 and bgzf_block_size(buf, 0) is None):
            raise _not_a_block(buf, pos, path)
        if not more:
            return


def _not_a_block(buf: bytes, pos: int, path: str) -> Exception:
    if buf[:2] == b"\x1f\x8b" and bgzf_block_size(buf, 0) is None:
        return NotBgzfError(f"{path}: a gzip member without a BGZF header at byte {pos}")
    if bgzf_block_size(buf, 0) is not None:
        return BadInputError(path, f"truncated BGZF block at byte {pos}")
    return BadInputError(path, f"not BGZF: no block header at byte {pos}")


def count_records(uri: str, spacing: int = CHECKPOINT_SPACING, threads: int | None = None) -> ScanResult:
    """Records, plain size and checkpoints ``(virtual offset of a record start, records before it)``
    of a BGZF file, on ``threads`` vCPUs (default: the vCPUs the process was given).

    Raises BadInputError for a corrupt block or a file that ends inside a record (a cut file:
    :class:`~seqlake.base.errors.TruncatedStreamError` naming its last complete record), NotBgzfError when
    gzip members that are not BGZF blocks follow the first.
    """
    threads = threads_from_env(default=available_cpus()) if threads is None else max(1, threads)
    with naming_truncation(uri):
        return _count(uri, spacing, threads)


def _count(uri: str, spacing: int, threads: int) -> ScanResult:
    if threads > 1 and not storage.is_s3(uri) and forked.can_fork():
        try:
            starts = _chunk_starts(uri)
            if starts is not None:
                procs = min(threads, len(starts) - 1)  # no process without a chunk
                return _join(_blocks_in_processes(uri, starts, procs), spacing, uri)
        except (_ChunkError, BadInputError, NotBgzfError):
            pass  # the pass below, reading the file in order, raises the error it names
    with storage.open_read(uri, buffer_size=BATCH_BYTES) as f:
        if threads > 1:
            return _join(_blocks_threaded(f, uri, threads), spacing, uri)
        return _join((b for buf, base in _batches(f, uri) for b in _count_batch(buf, base, uri)), spacing, uri)


def _join(blocks: Iterable[_Block], spacing: int, uri: str) -> ScanResult:
    """The records, plain size and checkpoints of a file's blocks, given in file order."""
    lines = plain = 0
    last = _NL
    next_ck = spacing
    cks: list[tuple[int, int]] = [(0, 0)]
    for coffset, n, newlines, first, end_byte in blocks:
        if n == 0:
            continue
        if plain >= next_ck:
            within = _first_record_start(lines, last, first, n)
            if within is not None:
                cks.append((virtual_offset(coffset, within), (lines + _newlines_to_record(lines, last)) // 4))
                next_ck = ((plain + within) // spacing + 1) * spacing
        lines += newlines
        plain += n
        last = end_byte
    return ScanResult(records=whole_records(lines, last, uri), plain_size=plain, checkpoints=cks)


def _blocks_threaded(f: Any, uri: str, threads: int) -> Iterator[_Block]:
    """The blocks of an object read once (S3), batches counted on ``threads`` threads."""
    with ThreadPoolExecutor(threads) as pool:
        pending: deque[Future[list[_Block]]] = deque()
        batches = _batches(f, uri)
        while True:
            # at most two batches per thread in flight: memory stays flat whatever the file's size
            while len(pending) < 2 * threads and (batch := next(batches, None)) is not None:
                pending.append(pool.submit(_count_batch, batch[0], batch[1], uri))
            if not pending:
                return
            yield from pending.popleft().result()


class _ChunkError(Exception):
    """The file is not whole BGZF blocks from chunk to chunk: the pass reading it in order says why."""


def _chunk_starts(uri: str) -> list[int] | None:
    """Compressed offsets of the first block at or after every ``CHUNK_BYTES``, and the file's size;
    None when the file is a single chunk or a chunk holds no block start (not BGZF after its start)."""
    with storage.open_read(uri) as f:
        size = f.seek(0, os.SEEK_END)
        if size < 2 * CHUNK_BYTES:
            return None
        starts = [next_bgzf_block(f, k * CHUNK_BYTES, size, uri) for k in range(-(-size // CHUNK_BYTES))]
    starts.append(size)
    if any(not 0 <= b - a <= CHUNK_BYTES + (1 << 16) for a, b in itertools.pairwise(starts)):
        return None
    return starts


def _count_chunk(f: Any, start: int, end: int, uri: str) -> list[_Block]:
    """The blocks from compressed offset ``start`` to ``end`` (which must be whole blocks)."""
    f.seek(start)
    buf: bytes = f.read(end - start)
    q = 0
    while q < len(buf) and (n := bgzf_block_size(buf, q)) is not None and q + n <= len(buf):
        q += n
    if q != end - start:
        raise _ChunkError(uri)
    return _count_batch(buf, start, uri)


def _blocks_in_processes(uri: str, starts: list[int], procs: int) -> Iterator[_Block]:
    """The blocks of a local file, chunk ``k`` counted by process ``k % procs``: this one and
    ``procs - 1`` forked ones, each with a GIL of its own (``bytes.count`` holds it, and the inflating
    threads of one process wait for it). A forked helper (:func:`seqlake.base.forked.fork_helper`)
    reads its own chunks and sends each chunk's blocks back through a pipe (marshal); a chunk of bad
    data makes this pass raise _ChunkError (the pass in order names the error), and anything else a
    helper raises is raised here, with its traceback and exit status."""
    helpers: list[tuple[forked.Helper, int]] = []
    try:
        for i in range(1, procs):
            r, w = os.pipe()
            chunks = range(i, len(starts) - 1, procs)

            def count(r: int = r, w: int = w, chunks: range = chunks) -> None:  # pragma: no cover  (forked)
                os.close(r)
                _count_chunks_and_send(uri, starts, chunks, w)

            helper = forked.fork_helper(f"BGZF counting process {i} of {uri}", count)
            os.close(w)
            helpers.append((helper, r))
        with storage.open_read(uri) as f:
            for k in range(len(starts) - 1):
                if k % procs == 0:
                    yield from _count_chunk(f, starts[k], starts[k + 1], uri)
                else:
                    yield from _receive(*helpers[k % procs - 1], uri)
    finally:
        for helper, r in helpers:
            os.close(r)  # a process still sending gets EPIPE and leaves
            helper.reap()  # one that raised did so at _receive; this pass is ending for its own reason


def _count_chunks_and_send(uri: str, starts: list[int], chunks: range, w: int) -> None:  # pragma: no cover
    """Count the helper's chunks and send each one's blocks; stop at the first chunk whose data is bad
    (an empty message: the parent's pass in order names the error). Anything else it raises reaches the
    parent through :func:`seqlake.base.forked.fork_helper`."""
    with storage.open_read(uri) as f:
        for k in chunks:
            try:
                msg = marshal.dumps(_count_chunk(f, starts[k], starts[k + 1], uri))
            except (_ChunkError, BadInputError):
                msg = b""
            write_all(w, PIPE_U64.pack(len(msg)) + msg)
            if not msg:
                return


def _receive(helper: forked.Helper, fd: int, uri: str) -> list[_Block]:
    """The next chunk's blocks from ``helper``; what it raised when it sent none (or _ChunkError when
    it found bad data and left it to the pass in order)."""
    head = read_exact(fd, PIPE_U64.size)
    size = PIPE_U64.unpack(head)[0] if len(head) == PIPE_U64.size else 0
    msg = read_exact(fd, size) if size else b""
    if not msg or len(msg) != size:
        if len(head) < PIPE_U64.size or len(msg) != size:
            helper.join()  # the helper ended without a word for this chunk: raises what it raised
            raise forked.HelperError(f"{helper.name} ended before sending its counts")
        raise _ChunkError(uri)
    blocks: list[_Block] = marshal.loads(msg)  # noqa: S302  (written by our own forked process)
    return blocks


def _newlines_to_record(lines: int, last: int) -> int:
    """Newlines from a block's start to the first record start at or after it, given the ``lines``
    before the block and the byte before it (a record starts after every 4th newline)."""
    if lines % 4:
        return 4 - lines % 4
    return 0 if last == _NL else 4  # else the record that starts with line ``lines`` began before the block


def _first_record_start(lines: int, last: int, first: tuple[int, ...], n: int) -> int | None:
    """Offset in the block's plain data (``n`` bytes, newlines at ``first``) of its first record start;
    None when none starts in it."""
    k = _newlines_to_record(lines, last)
    if k == 0:
        return 0
    if len(first) < k or first[k - 1] + 1 >= n:
        return None
    return first[k - 1] + 1
