"""A child's reads as sorted BAM records cut by the reduce plan's windows, in one object beside its positions
object (``staging/child=NNNNN/reads.slices``; docs/INTERNALS.md, "Read slices and the per-sample BAM")::

    [header: magic, version, windows + 1, samples, child, window size, run digest]
    [index: per window (along the reference, then one for the unplaced reads), per sample of the child:
            offset, placed bytes, placed records, carried bytes, carried records]   little-endian uint64
    [window 0: sample 0: placed BGZF blocks | carried BGZF blocks, sample 1: ...][window 1: ...] ... [unplaced]

A window's placed records are those whose POS is in it (unmapped reads placed at their mate's position
included), in ``samtools sort`` order; its carried records are copies of mapped records of the same
contig that start in an earlier window and reach into it (for the counting only: a BAM holds the placed
ones). Each run of records starts a BGZF block of its own, so a reducer decompresses just the runs it needs.
The index is at a place computed from the plan alone (:class:`SliceLayout`): the reducer of a region reads
its windows' entries of every child with one ranged GET each, then a window of a child with one more.

:class:`SliceSorter` is the child's side: batches of records go in as they are aligned, sorted runs are
spilled to the scratch disk (BGZF, a block run per window, sample and kind) past a byte budget, and
:meth:`SliceSorter.write` merges the runs window by window into the object: memory is the budget plus one
window of one sample's records when there are several runs (the budget alone when there is one: a spill gathers
and compresses its records in pieces), scratch the compressed records once.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from seqlake.base import storage
from seqlake.formats import bam, bgzf
from seqlake.formats.bam import Records
from seqlake.lake.positions import WindowAxis, all_windows, run_digest
from seqlake.lake.regions import Contigs, Region
from seqlake.plan.childplan import PlanView

I64 = npt.NDArray[np.int64]
MAGIC = b"SQLKREAD"
VERSION = 1
_HEADER = struct.Struct("<8sIIIIQ16s")
_ENTRY_FIELDS = 5
_ENTRY = 8 * _ENTRY_FIELDS
#: the records a child holds before it sorts and spills them (encoded bytes, copies for carried records included):
#: ``samtools sort``'s default ``-m 768M``. A shard whose records fit is sorted once and its runs' blocks are the
#: object's as they are; past it, every record is decompressed, merged and compressed again at the write (the
#: MiSeq pair x100, ~480 MB of records: 36.2 CPU s with 256 MiB and two spills, ~5 s of it the merge)
SORT_BUDGET_BYTES = 768 << 20
#: plain bytes of records gathered at a time when a run is written (a window's records are compressed in
#: pieces of about this size: memory holds one piece, not the window's records)
SPILL_PIECE_BYTES = 16 << 20


@dataclass(frozen=True)
class SliceEntry:
    """One sample's records of one window in a child's object: the placed run at ``offset``, the carried
    run right after it."""

    offset: int
    placed_bytes: int
    placed: int
    carried_bytes: int
    carried: int

    @property
    def end(self) -> int:
        return self.offset + self.placed_bytes + self.carried_bytes


@dataclass(frozen=True)
class SliceLayout:
    """Where everything of a child's object is, from the plan alone: its windows along the reference (the
    reduce plan's regions cut at ``window``), then one for the unplaced reads; its samples."""

    regions: tuple[Region, ...]
    window: int
    samples: int

    @property
    def windows(self) -> list[tuple[int, int]]:
        """``(region, its number in the region)`` of each window along the reference."""
        return all_windows(self.regions, self.window)[1]

    @property
    def count(self) -> int:
        """Windows in the index: the reference's, and the unplaced reads' last."""
        return len(self.windows) + 1

    def index_span(self, first: int, stop: int) -> tuple[int, int]:
        """Bytes of the index entries of windows ``[first, stop)`` (every sample's)."""
        row = _ENTRY * self.samples
        return _HEADER.size + first * row, _HEADER.size + stop * row

    @property
    def data_start(self) -> int:
        return self.index_span(0, self.count)[1]

    def region_windows(self, region: int) -> tuple[int, int]:
        """The windows ``[first, stop)`` along the reference of region ``region``."""
        ws = self.windows
        at = [k for k, (r, _) in enumerate(ws) if r == region]
        return (at[0], at[-1] + 1) if at else (0, 0)

    def header(self, run_id: str, child: int) -> bytes:
        return _HEADER.pack(MAGIC, VERSION, self.count, self.samples, child, self.window, run_digest(run_id))


def child_samples(plan: PlanView, child: int) -> list[str]:
    """A child's samples in the order its shards hold them: the order of its object's entries."""
    return list(dict.fromkeys(plan.shards[i].sample for i in plan.child_shards(child)))


def parse_entries(data: bytes, samples: int) -> list[list[SliceEntry]]:
    """Per window, per sample, the entries of index bytes (:meth:`SliceLayout.index_span`)."""
    words = np.frombuffer(data, dtype="<u8").astype(np.int64).reshape(-1, samples, _ENTRY_FIELDS)
    return [[SliceEntry(*map(int, e)) for e in w] for w in words]


def check_header(data: bytes, uri: str, layout: SliceLayout, run_id: str, child: int) -> None:
    """Fail naming the object when its header is not the one this run's child would write."""
    want = layout.header(run_id, child)
    if data[: len(want)] != want:
        got = data[:8]
        why = ("not a slices object" if got != MAGIC else
               "another format version, run, child, window or sample count than the plan's")
        raise ValueError(f"{uri}: {why}: re-run the children")


def read_runs(data: bytes, start: int, entry: SliceEntry) -> tuple[bytes, bytes]:
    """The plain record bytes of an entry's placed and carried runs, from bytes read at ``start``."""
    at = entry.offset - start
    placed = bgzf.decompress(memoryview(data)[at : at + entry.placed_bytes])
    carried = bgzf.decompress(memoryview(data)[at + entry.placed_bytes : at + entry.placed_bytes + entry.carried_bytes])
    return placed, carried


def merge_sorted(parts: Sequence[bytes]) -> tuple[bytes | bytearray, I64]:
    """Record bytes of sorted runs, merged into one run in ``samtools sort`` order (ties: the earlier run
    first, as a stable sort of their concatenation): the bytes and each record's start."""
    data = b"".join(parts)
    if not data:
        return b"", np.zeros(0, dtype=np.int64)
    starts = bam.record_starts(data)
    if sum(1 for p in parts if p) == 1:
        return data, starts
    tid, pos, flag = bam.fixed_fields(data, starts)
    order = np.lexsort(((flag & bam.FLAG_REVERSE) != 0, pos, tid.astype(np.uint32))).astype(np.int64)
    return bam.reorder(data, starts, order)


def _pieces(sizes: I64, a: int, b: int, limit: int) -> list[tuple[int, int]]:
    """Records ``a``..``b - 1`` cut into consecutive ranges of at most ``limit`` bytes each (a record larger than
    ``limit`` alone)."""
    ends = np.cumsum(sizes[a:b])
    out = []
    at = a
    while at < b:
        done = int(ends[at - a - 1]) if at > a else 0
        stop = a + int(np.searchsorted(ends, done + limit, side="right"))
        stop = max(stop, at + 1)
        out.append((at, stop))
        at = stop
    return out


@dataclass
class _Run:
    """One sorted run on the scratch disk: per (window, sample, carried) its BGZF bytes (offset, length) and
    records."""

    path: Path
    groups: dict[tuple[int, int, int], tuple[int, int, int]] = field(default_factory=dict)


class SliceSorter:
    """A child's records, sorted and cut by window (see the module docstring)."""

    def __init__(self, contigs: Contigs, layout: SliceLayout, samples: Sequence[str], scratch: Path, *,
                 budget: int = SORT_BUDGET_BYTES, codec: bgzf.Codec = bgzf.ZLIB) -> None:
        self.layout = layout
        self.axis = WindowAxis(contigs, all_windows(layout.regions, layout.window)[0])
        self.unplaced = layout.count - 1
        self.sample_code = {s: k for k, s in enumerate(samples)}
        self.scratch = scratch
        self.budget = budget
        self.codec = codec
        #: the batches' encoded records end to end (one buffer: a spill sorts them without joining copies)
        self._data = bytearray()
        #: per batch: each record's start in the buffer and its size, the copies' rows and keys
        self._pending: list[tuple[I64, I64, I64, npt.NDArray[np.uint64]]] = []
        self._pending_bytes = 0
        self._seq = 0
        self.runs: list[_Run] = []

    def add(self, sample: str, records: Records) -> None:
        """A batch of one sample's records (in the child's output order)."""
        if len(records):
            data, starts = bam.encode(records)
            self.add_encoded(sample, data, starts, records.tid, records.pos, records.flag, records.end())

    def add_encoded(self, sample: str, data: bytes | bytearray, starts: I64, tid: I64, pos: I64,  # noqa: PLR0917
                    flag: I64, end: I64) -> None:
        """A batch of one sample's records already encoded (``data``, each record at ``starts``), with each one's
        reference, position, flag and reference end (:func:`seqlake.formats.bam.Records.end`)."""
        n = len(starts)
        if n == 0:
            return
        placed = tid >= 0
        first = np.full(n, self.unplaced, dtype=np.int64)
        last = first.copy()
        if placed.any():
            first[placed] = self.axis.region[self.axis.window(tid[placed], pos[placed])]
            mapped = placed & ((flag & bam.FLAG_UNMAPPED) == 0)
            last[placed] = first[placed]
            last[mapped] = self.axis.region[self.axis.window(tid[mapped], end[mapped] - 1)]
        copies = last - first + 1
        row = np.repeat(np.arange(n, dtype=np.int64), copies)
        within = np.arange(len(row), dtype=np.int64) - np.repeat(np.cumsum(copies) - copies, copies)
        window = first[row] + within
        # one uint64 key per copy, and the output order as a tie-break: sample, window, carried; then samtools'
        key = (np.uint64(self.sample_code[sample]) << np.uint64(48) | window.astype(np.uint64) << np.uint64(1)
               | (within > 0).astype(np.uint64))
        coord = (tid.astype(np.uint32).astype(np.uint64) << np.uint64(33)
                 | (pos + 1).astype(np.uint64) << np.uint64(1)
                 | ((flag & bam.FLAG_REVERSE) != 0).astype(np.uint64))[row]
        seq = self._seq + row
        self._seq += n
        sizes = np.diff(np.append(starts, len(data))).astype(np.int64)
        base = len(self._data)
        self._data += data
        self._pending.append((starts + base, sizes, row, np.stack([key, coord, seq.astype(np.uint64)], axis=1)))
        self._pending_bytes += len(data) * len(row) // n
        if self._pending_bytes > self.budget:
            self._spill()

    def _spill(self) -> None:
        if not self._pending:
            return
        at_parts, size_parts, keys = [], [], []
        for starts, sizes, row, key in self._pending:
            at_parts.append(starts[row])
            size_parts.append(sizes[row])
            keys.append(key)
        data = self._data
        at, size_of, key = np.concatenate(at_parts), np.concatenate(size_parts), np.concatenate(keys)
        self._pending, self._pending_bytes, self._data = [], 0, bytearray()
        order = np.lexsort((key[:, 2], key[:, 1], key[:, 0]))
        at, size_of, key = at[order], size_of[order], key[order]
        run = _Run(self.scratch / f"reads-run-{len(self.runs):05d}.bgzf")
        self.scratch.mkdir(parents=True, exist_ok=True)
        group = key[:, 0]
        bounds = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1], [True])))
        with run.path.open("wb") as out:
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
                begin = out.tell()
                for c, d in _pieces(size_of, a, b, SPILL_PIECE_BYTES):
                    out.write(bgzf.compress(bam.gather(data, at[c:d], size_of[c:d])[0], eof=False, codec=self.codec))
                g = int(group[a])
                run.groups[(g >> 1 & ((1 << 47) - 1), g >> 48, g & 1)] = (begin, out.tell() - begin, b - a)
        self.runs.append(run)

    def _group(self, files: Sequence[int], window: int, sample: int, carried: int) -> tuple[bytes, int]:
        """A group's BGZF blocks and records: one run's blocks as they are (a child whose records fit the
        budget: compressed once, at the spill), several runs' merged and compressed again."""
        found = [(f, run.groups[key]) for f, run in zip(files, self.runs, strict=True)
                 if (key := (window, sample, carried)) in run.groups]
        if len(found) == 1:
            f, (at, size, records) = found[0]
            return os.pread(f, size, at), records
        merged, starts = merge_sorted([bgzf.decompress(os.pread(f, size, at)) for f, (at, size, _) in found])
        return (bgzf.compress(merged, eof=False, codec=self.codec) if merged else b""), len(starts)

    def write(self, out: BinaryIO, run_id: str, child: int) -> list[list[SliceEntry]]:
        """Merge the runs into the object (see the module docstring); the index it wrote. The runs are
        deleted."""
        self._spill()
        samples = self.layout.samples
        index = np.zeros((self.layout.count, samples, _ENTRY_FIELDS), dtype="<u8")
        out.write(self.layout.header(run_id, child))
        out.write(index.tobytes())
        files = [os.open(run.path, os.O_RDONLY) for run in self.runs]
        try:
            for w in range(self.layout.count):
                for s in range(samples):
                    offset = out.tell()
                    a, n_placed = self._group(files, w, s, 0)
                    b, n_carried = self._group(files, w, s, 1)
                    out.write(a)
                    out.write(b)
                    index[w, s] = offset, len(a), n_placed, len(b), n_carried
        finally:
            for f in files:
                os.close(f)
        out.seek(_HEADER.size)
        out.write(index.tobytes())
        out.seek(0, os.SEEK_END)
        for run in self.runs:
            run.path.unlink(missing_ok=True)
        self.runs = []
        return [[SliceEntry(*map(int, e)) for e in w] for w in index]


def read_window_bytes(uris: Sequence[str], entries: Sequence[Sequence[Sequence[SliceEntry]]], w: int) -> list[
        tuple[bytes, int] | None]:
    """Each child's bytes of window ``w`` of a region (every entry of its samples there) and where they start in
    its object: one ranged GET per child holding any record there, in parallel; None for a child without.
    ``entries``: :func:`read_region_entries`'s, child by child."""
    spans = []
    for uri, ents in zip(uris, entries, strict=True):
        es = [e for e in ents[w] if e.end > e.offset]
        spans.append((uri, min(e.offset for e in es), max(e.end for e in es)) if es else (uri, 0, 0))
    got = iter(storage.read_many_ranges([s for s in spans if s[2] > s[1]]))
    out: list[tuple[bytes, int] | None] = []
    for uri, start, stop in spans:
        data = next(got) if stop > start else b""
        if data is None:
            raise FileNotFoundError(uri)
        out.append((data, start) if stop > start else None)
    return out


def read_region_entries(children: Sequence[tuple[str, int, SliceLayout]], region: int, run_id: str) -> list[
        list[list[SliceEntry]]]:
    """Per child (``(uri, child, its layout)`` in child order), per window of region ``region``, per sample of
    the child: its entries (two ranged GETs per child: the header, the region's entries)."""
    heads = storage.read_many_ranges([(u, 0, _HEADER.size) for u, _, _ in children])
    bodies = storage.read_many_ranges([(u, *layout.index_span(*layout.region_windows(region)))
                                       for u, _, layout in children])
    out = []
    for (uri, child, layout), head, body in zip(children, heads, bodies, strict=True):
        if head is None or body is None:
            raise FileNotFoundError(f"{uri}: the child did not finish (no reads.slices)")
        check_header(head, uri, layout, run_id, child)
        out.append(parse_entries(body, layout.samples))
    return out
