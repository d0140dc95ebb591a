"""Vectorised read QC over record-aligned plain FASTQ chunks.

A chunk parsed by :func:`seqlake.reads.chunks.parse_chunk` is folded into a :class:`QCAccumulator` with
numpy over the whole buffer: never a Python loop per base or per read. The same accumulator takes
trimmed reads as (start, length) views into the raw buffer, so QC after trimming costs no copy of the
sequences.

The accumulator holds additive aggregates only (counts and histograms), so shards merge exactly
by adding them up (:meth:`QCAccumulator.merge`); every derived number (means, quartiles, N50) is
computed from the merged histograms (:func:`summarize`).

Memory is bounded by bytes, not by the longest read: a chunk's reads are padded into (reads x cycles)
tiles of at most :data:`QC_TILE_BYTES` (reads grouped by length, a long read's cycles in slabs), and the
per-cycle counts are kept in blocks of the narrowest integer type they fit (:class:`PositionCounts`), so
one 1 Mb read among short reads costs a few MB, not reads x 1 Mb. The aggregates are the same integers
however the reads are grouped.

The derived numbers follow ``seqkit stats -a`` (shenwei356/seqkit ``seqkit/cmd/stat.go``; the
length statistics are ``LengthStats`` of shenwei356/bio ``util/length-stats.go``):

- Q20/Q30: bases with Phred (byte - 33) >= 20 / >= 30;
- GC: ``G``, ``C``, ``g``, ``c``; ``sum_gap``: ``-``, ``.`` and space in sequences;
- Q1/Q2/Q3: seqkit's medians of the lower and upper halves of the sorted lengths (the lower half
  takes the middle element when the count is odd). seqkit up to 2.3 printed ``len / 2`` for Q1
  and Q3 when all reads had one length (fixed upstream in bio commit 78fefc3); this module
  implements the fixed definition (Q1 = Q3 = that length);
- N50: the longest length L such that reads of length >= L hold at least half of the bases;
- AvgQual (seqkit >= 2.4): the Phred value of the mean per-base error probability.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from seqlake.reads.chunks import QMAX as _QMAX
from seqlake.reads.chunks import QMIN as _QMIN
from seqlake.reads.chunks import ChunkRecords, parse_chunk, raise_bad_quality

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

NQ = _QMAX - _QMIN + 1

#: seqkit's default gap letters (``-G "- ."``)
_GAP_BYTES: tuple[int, ...] = (ord("-"), ord("."), ord(" "))


def _pair_counts_to_bytes(pairs: npt.NDArray[np.uint16], counts: I64, tail: U8) -> I64:
    halves = pairs.view(np.uint8)  # each pair's two bytes, whatever the byte order
    hist = np.zeros(256, dtype=np.int64)
    np.add.at(hist, halves[0::2], counts)
    np.add.at(hist, halves[1::2], counts)
    np.add.at(hist, tail, 1)
    return hist


def byte_histogram(a: U8) -> I64:
    """Counts of each byte value: ``bincount`` over the uint16 pairs (half the elements it converts). A sort or
    ``unique`` over the pairs was 9x slower than this on an AVX512-ICL x86-64 CPU with numpy 2.4 (which had
    been chosen there on the premise of numpy's SIMD 16-bit sort; measured: 10.0 against 1.0 ms for a
    4,000 x 220 tile)."""
    flat = a.ravel()
    even = flat.size // 2 * 2
    pair_counts = np.bincount(flat[:even].view(np.uint16), minlength=65536)
    present = np.flatnonzero(pair_counts)
    return _pair_counts_to_bytes(present.astype(np.uint16), pair_counts[present], flat[even:])


def _column_sums(a: U8, top: int) -> I64:
    """Column sums of a contiguous (rows x columns) uint8 matrix whose values are at most ``top``.

    Blocks of rows that cannot overflow a narrow type are summed in it (uint8 for 0/1 values, else
    uint16), then the block sums in int64: about 2-3x faster than casting every element to int64."""
    narrow, limit = (np.uint8, 255) if top <= 1 else (np.uint16, 65535)
    rows = max(1, limit // max(top, 1))
    n, m = a.shape
    whole = n // rows * rows
    out: I64 = np.add.reduce(a[:whole].reshape(-1, rows, m), axis=1, dtype=narrow).sum(axis=0, dtype=np.int64)
    if whole < n:
        out += a[whole:].sum(axis=0, dtype=np.int64)
    return out


def _row_sums(a: U8, top: int) -> I64:
    """Row sums of a (rows x columns) uint8 matrix with values at most ``top``; in uint16 when a row's
    sum fits (about 3x faster than an int64 sum)."""
    narrow = np.uint16 if a.shape[1] * top <= 65535 else np.int64
    out: I64 = a.sum(axis=1, dtype=narrow).astype(np.int64, copy=False)
    return out


#: a tile's sums (:func:`tile_sums_numpy`'s): A, C, G, T per cycle (4 x width), the Phred+33 sums per cycle, the
#: quality bytes' histogram (256), each read's Phred sum over the tile, the N bases and the gap bytes
TileSums = tuple[npt.NDArray[np.int64], I64, I64, I64, int, int]


def tile_sums_numpy(arr: U8, seq_start: I64, qual_start: I64, length: I64, *, first: int, width: int) -> TileSums:
    """The sums of cycles ``first``..``first + width - 1`` of the reads at ``seq_start``/``qual_start`` in ``arr``
    (which holds ``width`` bytes past the last read's end): the reads gathered into a (reads x cycles) tile,
    padded to its longest read, reduced by columns and rows. The compiled child does the same over the reads'
    own bytes (:func:`_tile_sums`); this is where it is not built, and its judge (tests/core/test_qc.py)."""
    n = len(length)
    inside = np.clip(length - first, 0, width)
    reads_at = np.cumsum(np.bincount(inside, minlength=width + 1)[::-1])[::-1][1:]
    # one row copy per read from a strided window view: no (reads x cycles) index array
    windows = sliding_window_view(arr, width)
    seq = windows[seq_start + first]
    qual = windows[qual_start + first]
    padding = n * width - int(inside.sum())
    if padding:
        # neutral padding: byte 0 is no base class and no gap; quality '!' is Phred 0
        pad = np.arange(width, dtype=np.int64)[None, :] >= inside[:, None]
        seq[pad] = 0
        qual[pad] = _QMIN
    hist = byte_histogram(qual)
    hist[_QMIN] -= padding
    low = seq | np.uint8(0x20)  # case-insensitive
    acgt = np.empty((4, width), dtype=np.int64)
    for k, base in enumerate(b"acgt"):
        acgt[k] = _column_sums((low == base).view(np.uint8), 1)
    n_bases = gaps = 0
    if int(inside.sum()) - int(acgt.sum()):  # gaps are rare: only looked for when a non-ACGT base exists
        n_bases = int(np.count_nonzero(low == ord("n")))
        gaps = sum(int(np.count_nonzero(seq == g)) for g in _GAP_BYTES)
    qual_sums = _column_sums(qual, _QMAX) - _QMIN * (n - reads_at)
    return acgt, qual_sums, hist, _row_sums(qual, _QMAX) - _QMIN * width, n_bases, gaps


def _compiled_tile_sums() -> Callable[..., TileSums] | None:
    """The tile's sums in compiled code (``mappy.seqlake_qc_tile``, scripts/mappy/seqlake_batch.h) where seqlake's
    mappy build is loaded: a child that aligns has it (its aligner imports it before the first chunk). Nothing
    here imports it, so a QC-only child and the Lambdas never load an alignment library; they count with
    :func:`tile_sums_numpy`."""
    seqlake_qc_tile = getattr(sys.modules.get("mappy"), "seqlake_qc_tile", None)
    if seqlake_qc_tile is None:
        return None

    def tile(arr: U8, seq_start: I64, qual_start: I64, length: I64, *, first: int, width: int) -> TileSums:
        counts, sums, hist, rows, n_bases, gaps = seqlake_qc_tile(arr, seq_start, qual_start, length, first, width)
        return (np.frombuffer(counts, dtype=np.int64).reshape(4, width), np.frombuffer(sums, dtype=np.int64),
                np.frombuffer(hist, dtype=np.int64).copy(), np.frombuffer(rows, dtype=np.int64), n_bases, gaps)

    return tile


def _tile_sums(arr: U8, seq_start: I64, qual_start: I64, length: I64, *, first: int, width: int) -> TileSums:
    sums = _compiled_tile_sums() or tile_sums_numpy
    return sums(np.ascontiguousarray(arr), np.ascontiguousarray(seq_start, dtype=np.int64),
                np.ascontiguousarray(qual_start, dtype=np.int64), np.ascontiguousarray(length, dtype=np.int64),
                first=first, width=width)


#: the bytes of one (reads x cycles) tile of :meth:`QCAccumulator.add`, at most (each of the step's few
#: temporaries is one tile): reads are taken in groups of similar lengths and a long read's cycles in slabs,
#: so a chunk's QC needs this much whatever its lengths, never its reads times its longest read
QC_TILE_BYTES = 4 << 20
#: cycles per slab of a tile, at most: the per-cycle sums of a tile are int64 (a few times 8 bytes a cycle)
QC_SLAB_CYCLES = 1 << 16
#: reads up to this long share a group whatever their lengths (they pad a tile by at most this much each)
QC_GROUP_FLOOR = 64
#: positions (cycles, lengths) per block of :class:`PositionCounts`
POSITION_BLOCK = 1 << 14
#: the integer types a block of counts widens through as its counts grow
_WIDTHS: tuple[type[np.unsignedinteger[Any]] | type[np.int64], ...] = (np.uint8, np.uint16, np.uint32, np.int64)


class PositionCounts:
    """Exact counts per position (a cycle, a read length), ``rows`` of them at each, in blocks of
    :data:`POSITION_BLOCK` positions, each block in the narrowest integer type its counts fit (a bound of
    its largest count, kept as counts are added, says when it must widen). The positions only a few long
    reads reach cost a byte a count instead of eight: one 1 Mb read among short ones adds 6 MB of per-cycle
    counts to an accumulator, not 48."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        #: positions per block
        self.block = POSITION_BLOCK
        self.blocks: list[npt.NDArray[Any]] = []
        #: per block, a bound of its largest count
        self.bounds: list[int] = []

    def __len__(self) -> int:
        """Positions held (a multiple of the block size)."""
        return len(self.blocks) * self.block

    def add(self, first: int, values: npt.NDArray[Any], bound: int | None = None) -> None:
        """Add ``values`` (``rows`` x n, non-negative) at positions ``first``..``first + n - 1``; ``bound``: a
        bound of the largest value (computed when not given)."""
        values = values.reshape(self.rows, -1)
        n = values.shape[1]
        while len(self) < first + n:
            self.blocks.append(np.zeros((self.rows, self.block), dtype=np.uint8))
            self.bounds.append(0)
        b = first // self.block
        while n > 0:
            lo = first - b * self.block
            take = min(n, self.block - lo)
            part = values[:, :take]
            top = self.bounds[b] + (int(part.max()) if bound is None else bound)
            block = self.blocks[b]
            if top > np.iinfo(block.dtype).max:
                block = self.blocks[b] = block.astype(next(w for w in _WIDTHS if np.iinfo(w).max >= top))
            np.add(block[:, lo : lo + take], part, out=block[:, lo : lo + take], casting="unsafe")
            self.bounds[b] = top
            values, first, n, b = values[:, take:], first + take, n - take, b + 1

    def count(self, positions: I64) -> None:
        """Add one (in row 0) at each of ``positions``: a bincount per block they fall in."""
        blocks = positions // self.block
        top = int(blocks.max())
        if top == 0:  # the usual case: every position in the first block
            self.add(0, np.bincount(positions), len(positions))
            return
        for b in np.unique(blocks).tolist():
            at = positions[blocks == b] - b * self.block
            self.add(b * self.block, np.bincount(at), len(at))

    def merge(self, other: PositionCounts) -> None:
        for b, (block, bound) in enumerate(zip(other.blocks, other.bounds, strict=True)):
            if bound:
                self.add(b * other.block, block, bound)

    def dense(self, n: int) -> I64:
        """The counts of positions 0..n-1 as one (rows x n) int64 array."""
        out = np.zeros((self.rows, n), dtype=np.int64)
        for b, block in enumerate(self.blocks):
            lo = b * self.block
            if lo >= n:
                break
            out[:, lo : min(n, lo + self.block)] = block[:, : n - lo]
        return out

    def slabs(self, n: int) -> Iterator[tuple[int, I64]]:
        """The counts of positions 0..n-1 a block at a time: (first position, rows x positions as int64)."""
        for b, first in enumerate(range(0, n, self.block)):
            m = min(self.block, n - first)
            block = self.blocks[b][:, :m] if b < len(self.blocks) else np.zeros((self.rows, m), dtype=np.int64)
            yield first, block.astype(np.int64)

    def totals(self) -> I64:
        """Each row's sum over every position."""
        out = np.zeros(self.rows, dtype=np.int64)
        for block in self.blocks:
            out += block.sum(axis=1, dtype=np.int64)
        return out

    def nonzero(self) -> tuple[I64, I64]:
        """The positions where any count is not zero, and their counts (rows x positions)."""
        where, counts = [np.empty(0, dtype=np.int64)], [np.empty((self.rows, 0), dtype=np.int64)]
        for b, block in enumerate(self.blocks):
            at = np.flatnonzero(block.any(axis=0))
            where.append(at + b * self.block)
            counts.append(block[:, at].astype(np.int64))
        return np.concatenate(where), np.concatenate(counts, axis=1)

    @classmethod
    def of(cls, values: npt.NDArray[Any]) -> PositionCounts:
        """Counts from a dense (rows x n) array."""
        values = np.atleast_2d(values)
        counts = cls(values.shape[0])
        if values.shape[1] and values.any():
            counts.add(0, values)
        return counts


def _length_groups(length: I64, budget: int) -> Iterator[I64]:
    """The reads (indices) in groups of similar lengths: each group's longest read at most twice its shortest
    (or :data:`QC_GROUP_FLOOR`), and the group's reads times its longest read within ``budget`` unless the
    group is one read. Padding each group to its longest read costs at most twice its bases."""
    order = np.argsort(length, kind="stable")
    lens = length[order]
    n, start = len(lens), 0
    while start < n:
        first = int(lens[start])
        # the longest a read of the group may be: twice the first, and the budget for as many reads as that
        top = max(2 * first, QC_GROUP_FLOOR)
        end = int(np.searchsorted(lens, top, side="right"))
        # the group's reads times its longest, within the budget: the last k with (k - start + 1) * lens[k] <= budget
        fits = np.flatnonzero((np.arange(start, end) - start + 1) * lens[start:end] <= budget)
        end = start + (int(fits[-1]) + 1 if len(fits) else 1)
        yield order[start:end]
        start = end


@dataclass
class QCAccumulator:
    """Additive QC aggregates of one (sample, mate, stage); shards merge by :meth:`merge`."""

    reads: int = 0
    #: bases per Phred value 0..93
    qual_counts: I64 = field(default_factory=lambda: np.zeros(NQ, dtype=np.int64))
    #: reads per floored mean Phred value (zero-length reads have none)
    read_qual_counts: I64 = field(default_factory=lambda: np.zeros(NQ, dtype=np.int64))
    #: seqkit's sum_gap ('-', '.', ' '), counted as N in the per-cycle bases too
    gap_bases: int = 0
    #: reads per length (position = length)
    lengths: PositionCounts = field(default_factory=lambda: PositionCounts(1))
    #: per 0-based cycle, the A, C, G, T, N base counts (rows 0-4) and the Phred sum (row 5)
    cycles: PositionCounts = field(default_factory=lambda: PositionCounts(6))
    #: the longest read added
    max_cycle: int = 0

    @property
    def length_counts(self) -> I64:
        """Reads per length (index = length), up to the longest."""
        counts: I64 = self.lengths.dense(self.max_cycle + 1)[0]
        return counts

    @property
    def cycle_bases(self) -> I64:
        """Per-cycle base counts (index = 0-based cycle), rows A, C, G, T, N."""
        return self.cycles.dense(self.max_cycle)[:5]

    @property
    def cycle_qual_sum(self) -> I64:
        """Per-cycle (index = 0-based cycle) Phred sums."""
        sums: I64 = self.cycles.dense(self.max_cycle)[5]
        return sums

    def add_chunk(self, recs: ChunkRecords) -> None:
        """Add the reads of a parsed chunk, checking that every quality byte is in ``!``..``~``."""
        self.add(recs.data, recs.seq_start, recs.qual_start, recs.length, check=recs)

    def add(self, arr: U8, seq_start: I64, qual_start: I64, length: I64, check: ChunkRecords | None = None) -> None:
        """Add reads given as views into ``arr``: ``arr[seq_start[i]:seq_start[i]+length[i]]``.

        Trimmed reads are passed as shifted starts and shorter lengths into the raw buffer. Reads are
        gathered into (reads x cycles) tiles padded to the tile's longest read: per-cycle numbers are column
        reductions, much cheaper than bincounts over flattened indices. Usually the chunk is one tile; when
        its reads times its longest read exceed :data:`QC_TILE_BYTES` the reads go in groups of similar
        lengths and a long read's cycles in slabs (:func:`_length_groups`): the same sums, in bounded memory.
        """
        n = len(length)
        if n == 0:
            return
        self.reads += n
        maxlen = int(length.max())
        self.max_cycle = max(self.max_cycle, maxlen)
        self.lengths.count(length)
        if maxlen == 0:
            return
        if int(max(seq_start.max(), qual_start.max())) + maxlen > len(arr):
            arr = np.concatenate([arr, np.zeros(maxlen, dtype=np.uint8)])  # padding past the end
        bad = False
        if n * maxlen <= QC_TILE_BYTES and maxlen <= QC_SLAB_CYCLES:
            bad = self._add_tile(arr, seq_start, qual_start, length, first=0, width=maxlen)
        else:
            for group in _length_groups(length, QC_TILE_BYTES):
                glen = length[group]
                per_read = np.zeros(len(group), dtype=np.int64)
                width = max(1, min(QC_TILE_BYTES // len(group), QC_SLAB_CYCLES))
                longest = int(glen.max())
                for c0 in range(0, longest, width):
                    bad |= self._add_tile(arr, seq_start[group], qual_start[group], glen, first=c0,
                                          width=min(width, longest - c0), per_read=per_read)
                self._add_read_quals(per_read, glen)
        if bad and check is not None:
            raise_bad_quality(check.path, check.first_record, arr, qual_start, length)

    def _add_tile(self, arr: U8, seq_start: I64, qual_start: I64, length: I64, *, first: int, width: int,
                  per_read: I64 | None = None) -> bool:
        """Cycles ``first``..``first + width - 1`` of some reads; their Phred sums go to ``per_read`` (when
        given; else the tile holds whole reads and their mean qualities are counted here). True when a
        quality byte is outside ``!``..``~``."""
        n = len(length)
        inside = np.clip(length - first, 0, width)  # each read's cycles in the tile
        counts = np.bincount(inside, minlength=width + 1)
        reads_at = np.cumsum(counts[::-1])[::-1][1:]  # reads long enough to have each cycle
        acgt, qual_sums, hist, row_sums, n_bases, gaps = _tile_sums(arr, seq_start, qual_start, length,
                                                                        first=first, width=width)
        bad = bool(hist[:_QMIN].any() or hist[_QMAX + 1 :].any())
        sums = np.empty((6, width), dtype=np.int64)
        sums[:4] = acgt
        sums[4] = reads_at - acgt.sum(axis=0)
        if sums[4].any() and int(sums[4].sum()) - n_bases:  # a non-ACGT base other than N: gaps count
            self.gap_bases += gaps
        sums[5] = qual_sums - _QMIN * reads_at
        self.cycles.add(first, sums, n * (_QMAX - _QMIN))
        self.qual_counts += hist[_QMIN : _QMAX + 1]
        if per_read is None:
            self._add_read_quals(row_sums, length)
        else:
            per_read += row_sums
        return bad

    def _add_read_quals(self, qual_sums: I64, length: I64) -> None:
        """Reads per floored mean Phred value, from their Phred sums."""
        nonzero = length > 0
        self.read_qual_counts += np.bincount(qual_sums[nonzero] // length[nonzero], minlength=NQ)[:NQ]

    def merge(self, other: QCAccumulator) -> None:
        """Add another accumulator's aggregates (exact: integers only)."""
        self.reads += other.reads
        self.lengths.merge(other.lengths)
        self.cycles.merge(other.cycles)
        self.max_cycle = max(self.max_cycle, other.max_cycle)
        self.qual_counts += other.qual_counts
        self.read_qual_counts += other.read_qual_counts
        self.gap_bases += other.gap_bases

    # -- derived numbers -------------------------------------------------------------------
    @property
    def bases(self) -> int:
        lc = self.length_counts
        return int((lc * np.arange(len(lc), dtype=np.int64)).sum())

    def reads_per_cycle(self) -> I64:
        """Reads long enough to have each cycle (index = 0-based cycle)."""
        lc = self.length_counts[1 : self.max_cycle + 1]
        return np.cumsum(lc[::-1])[::-1].astype(np.int64)

    def summary(self) -> dict[str, Any]:
        return summarize(self)

    def to_state(self) -> dict[str, Any]:
        """A JSON-able snapshot (for tests and debugging; Parquet rows are the durable form)."""
        m = self.max_cycle
        return {
            "reads": self.reads,
            "length_counts": self.length_counts[: m + 1].tolist(),
            "qual_counts": self.qual_counts.tolist(),
            "read_qual_counts": self.read_qual_counts.tolist(),
            "cycle_qual_sum": self.cycle_qual_sum[:m].tolist(),
            "cycle_bases": self.cycle_bases[:, :m].tolist(),
            "gap_bases": self.gap_bases,
        }


def _length_value(lengths: I64, acc_counts: I64, even: bool, left: int, right: int) -> float:
    """seqkit's ``LengthStats.getValue``: the element at 0-based rank ``left`` (or the mean of
    ranks ``left`` and ``right`` when ``even``) of the sorted lengths, from cumulative counts."""
    i = int(np.searchsorted(acc_counts, left + 1))
    if not even:
        return float(lengths[i])
    j = int(np.searchsorted(acc_counts, right + 1))
    return float(lengths[i] + lengths[j]) / 2 if j != i else float(lengths[i])


def length_quartiles(length_counts: I64) -> tuple[float, float, float]:
    """Q1, Q2, Q3 of the read lengths as seqkit computes them (bio ``util/length-stats.go``)."""
    lengths = np.flatnonzero(length_counts)
    if len(lengths) == 0:
        return 0.0, 0.0, 0.0
    if len(lengths) == 1:
        v = float(lengths[0])
        return v, v, v
    acc = np.cumsum(length_counts[lengths])
    count = int(acc[-1])
    even = count % 2 == 0
    q2 = _length_value(lengths, acc, even, count // 2 - 1 if even else count // 2, count // 2)
    half = count // 2 if even else (count + 1) // 2
    skip = count // 2  # Q3 looks at the upper half: the ranks after the lower half's median pair
    he = half % 2 == 0
    left = half // 2 - 1 if he else half // 2
    q1 = _length_value(lengths, acc, he, left, half // 2)
    q3 = _length_value(lengths, acc, he, left + skip, half // 2 + skip)
    return q1, q2, q3


def n50(length_counts: I64) -> int:
    """seqkit's N50: scanning lengths from the longest, the first at which the bases summed so far
    reach half of all bases."""
    lengths = np.flatnonzero(length_counts)
    if len(lengths) == 0:
        return 0
    bases = (lengths * length_counts[lengths])[::-1]
    total = int(bases.sum())
    i = int(np.searchsorted(np.cumsum(bases) * 2, total))
    return int(lengths[::-1][min(i, len(lengths) - 1)])


def summarize(acc: QCAccumulator) -> dict[str, Any]:
    """The ``qc_summary`` read-QC columns (and seqkit's ``sum_gap``) from additive aggregates."""
    bases = acc.bases
    length_counts = acc.length_counts
    lengths = np.flatnonzero(length_counts)
    q1, q2, q3 = length_quartiles(length_counts)
    qc = acc.qual_counts
    phred = np.arange(NQ, dtype=np.float64)
    err = float((qc * np.power(10.0, -phred / 10)).sum())
    bc = acc.cycles.totals()
    return {
        "reads": acc.reads,
        "bases": bases,
        "min_len": int(lengths[0]) if len(lengths) else 0,
        "max_len": int(lengths[-1]) if len(lengths) else 0,
        "avg_len": bases / acc.reads if acc.reads else None,
        "q1_len": q1 if acc.reads else None,
        "q2_len": q2 if acc.reads else None,
        "q3_len": q3 if acc.reads else None,
        "n50": n50(length_counts) if acc.reads else None,
        "q20_bases": int(qc[20:].sum()),
        "q30_bases": int(qc[30:].sum()),
        "gc_bases": int(bc[1] + bc[2]),
        "n_bases": int(bc[4]),
        "avg_qual": -10 * float(np.log10(err / bases)) if err > 0 else (0.0 if bases else None),
        "sum_gap": acc.gap_bases,
    }


def seqkit_round(x: float, digits: int) -> float:
    """shenwei356/util ``math.Round``: half away from zero for positive values (Python's
    ``round`` is half-to-even: 29.25 -> 29.2 where seqkit prints 29.3)."""
    p = 10.0**digits
    return float(np.trunc((x + 0.5 / p) * p) / p)


def seqkit_row(acc: QCAccumulator) -> dict[str, str]:
    """The accumulator formatted like ``seqkit stats -a -T`` (2.3) columns, for comparisons."""
    s = summarize(acc)
    b = s["bases"]

    def pct(x: int) -> str:
        return f"{seqkit_round(100 * x / b, 2):.2f}" if b else "0.00"

    return {
        "num_seqs": str(s["reads"]),
        "sum_len": str(b),
        "min_len": str(s["min_len"]),
        "avg_len": f"{seqkit_round(s['avg_len'] or 0.0, 1):.1f}",
        "max_len": str(s["max_len"]),
        "Q1": f"{s['q1_len'] or 0.0:.1f}",
        "Q2": f"{s['q2_len'] or 0.0:.1f}",
        "Q3": f"{s['q3_len'] or 0.0:.1f}",
        "sum_gap": str(s["sum_gap"]),
        "N50": str(s["n50"] or 0),
        "Q20(%)": pct(s["q20_bases"]),
        "Q30(%)": pct(s["q30_bases"]),
        "GC(%)": pct(s["gc_bases"]),
    }


def qc_chunks(chunks: Iterable[bytes | tuple[bytes, I64 | None]], path: str) -> QCAccumulator:
    """QC of a stream of record-aligned chunks of one file (the QC-only path), each with the offsets of
    its newlines or not (:func:`seqlake.reads.fastq.iter_file_chunk_lines`,
    :func:`~seqlake.reads.fastq.iter_file_chunks`)."""
    acc = QCAccumulator()
    first = 0
    for chunk in chunks:
        data, newlines = chunk if isinstance(chunk, tuple) else (chunk, None)
        recs = parse_chunk(data, path, first, newlines)
        acc.add_chunk(recs)
        first += len(recs)
    return acc
