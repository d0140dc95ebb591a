"""Vectorised read QC over record-aligned plain FASTQ chunks.

A chunk parsed by :func:`seqlake.reads.chunks.parse_chunk` is folded into a :class:`QCAccumulator` with
numpy over the whole buffer: never a Python loop per base or per read. The same accumulator takes
trimmed reads as (start, length) views into the raw buffer, so QC after trimming costs no copy of the
sequences.

The accumulator holds additive aggregates only (counts and histograms), so shards merge exactly
by adding them up (:meth:`QCAccumulator.merge`); every derived number (means, quartiles, N50) is
computed from the merged histograms (:func:`summarize`).

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

from collections.abc import Iterable
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


def byte_histogram_by_sort(a: U8) -> I64:
    """Counts of each byte value: ``unique`` (a SIMD sort) over the uint16 pairs."""
    flat = a.ravel()
    even = flat.size // 2 * 2
    pairs, counts = np.unique(flat[:even].view(np.uint16), return_counts=True, sorted=False)
    return _pair_counts_to_bytes(pairs, counts, flat[even:])


def byte_histogram_by_count(a: U8) -> I64:
    """Counts of each byte value: ``bincount`` over the uint16 pairs (half the elements it converts)."""
    flat = a.ravel()
    even = flat.size // 2 * 2
    pair_counts = np.bincount(flat[:even].view(np.uint16), minlength=65536)
    present = np.flatnonzero(pair_counts)
    return _pair_counts_to_bytes(present.astype(np.uint16), pair_counts[present], flat[even:])


#: numpy sorts 16-bit integers with SIMD (x86-simd-sort) only where it detects AVX512_ICL; there the sort
#: over the uint16 pairs is about 3x faster than ``bincount``, elsewhere about 8x slower
def _simd_u16_sort() -> bool:
    try:
        from numpy._core._multiarray_umath import __cpu_features__  # type: ignore[import-not-found]
    except ImportError:  # numpy's private module moved: the portable way
        return False
    return bool(__cpu_features__.get("AVX512_ICL"))


_byte_histogram = byte_histogram_by_sort if _simd_u16_sort() else byte_histogram_by_count


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


def _grow(a: I64, n: int) -> I64:
    if n <= a.shape[-1]:
        return a
    size = max(n, 2 * a.shape[-1])
    out = np.zeros((*a.shape[:-1], size), dtype=np.int64)
    out[..., : a.shape[-1]] = a
    return out


@dataclass
class QCAccumulator:
    """Additive QC aggregates of one (sample, mate, stage); shards merge by :meth:`merge`."""

    reads: int = 0
    #: reads per length (index = length)
    length_counts: I64 = field(default_factory=lambda: np.zeros(256, dtype=np.int64))
    #: bases per Phred value 0..93
    qual_counts: I64 = field(default_factory=lambda: np.zeros(NQ, dtype=np.int64))
    #: reads per floored mean Phred value (zero-length reads have none)
    read_qual_counts: I64 = field(default_factory=lambda: np.zeros(NQ, dtype=np.int64))
    #: per-cycle (index = 0-based cycle) Phred sums
    cycle_qual_sum: I64 = field(default_factory=lambda: np.zeros(256, dtype=np.int64))
    #: per-cycle base counts, rows A, C, G, T, N
    cycle_bases: I64 = field(default_factory=lambda: np.zeros((5, 256), dtype=np.int64))
    #: seqkit's sum_gap ('-', '.', ' '), counted as N in ``cycle_bases`` too
    gap_bases: int = 0

    def add_chunk(self, recs: ChunkRecords) -> None:
        """Add the reads of a parsed chunk, checking that every quality byte is in ``!``..``~``."""
        self.add(recs.data, recs.seq_start, recs.qual_start, recs.length, check=recs)

    def add(self, arr: U8, seq_start: I64, qual_start: I64, length: I64, check: ChunkRecords | None = None) -> None:
        """Add reads given as views into ``arr``: ``arr[seq_start[i]:seq_start[i]+length[i]]``.

        Trimmed reads are passed as shifted starts and shorter lengths into the raw buffer.
        Reads are gathered into a (reads x cycles) matrix padded to the longest read: per-cycle
        numbers are column reductions, much cheaper than bincounts over flattened indices.
        """
        n = len(length)
        if n == 0:
            return
        self.reads += n
        maxlen = int(length.max())
        counts = np.bincount(length, minlength=maxlen + 1)
        self.length_counts = _grow(self.length_counts, maxlen + 1)
        self.length_counts[: maxlen + 1] += counts
        if maxlen == 0:
            return
        self.cycle_qual_sum = _grow(self.cycle_qual_sum, maxlen)
        self.cycle_bases = _grow(self.cycle_bases, maxlen)
        cols = np.arange(maxlen, dtype=np.int64)
        padded = int(length.min()) < maxlen
        if int(max(seq_start.max(), qual_start.max())) + maxlen > len(arr):
            arr = np.concatenate([arr, np.zeros(maxlen, dtype=np.uint8)])  # padding past the end
        # one row copy per read from a strided window view: no (reads x cycles) index array
        windows = sliding_window_view(arr, maxlen)
        seq = windows[seq_start]
        qual = windows[qual_start]
        if padded:
            # neutral padding: byte 0 is no base class and no gap; quality '!' is Phred 0
            pad = cols[None, :] >= length[:, None]
            seq[pad] = 0
            qual[pad] = _QMIN
        hist = _byte_histogram(qual)
        if check is not None and (hist[:_QMIN].any() or hist[_QMAX + 1 :].any()):
            raise_bad_quality(check.path, check.first_record, arr, qual_start, length)
        reads_at = np.cumsum(counts[::-1])[::-1][1:]  # reads long enough to have each cycle
        low = seq | np.uint8(0x20)  # case-insensitive
        acgt = np.zeros(maxlen, dtype=np.int64)
        for k, base in enumerate(b"acgt"):
            c = _column_sums((low == base).view(np.uint8), 1)
            self.cycle_bases[k, :maxlen] += c
            acgt += c
        other = reads_at - acgt
        self.cycle_bases[4, :maxlen] += other
        if other.any():  # gaps are rare: only look for them when a non-ACGT base other than N exists
            rest = int(other.sum()) - int(np.count_nonzero(low == ord("n")))
            if rest:
                self.gap_bases += sum(int(np.count_nonzero(seq == g)) for g in _GAP_BYTES)
        self.cycle_qual_sum[:maxlen] += _column_sums(qual, _QMAX) - _QMIN * n
        qhist = hist[_QMIN : _QMAX + 1]
        qhist[0] -= n * maxlen - int(length.sum())  # the padding
        self.qual_counts += qhist
        nonzero = length > 0
        per_read = _row_sums(qual, _QMAX)[nonzero] - _QMIN * maxlen
        self.read_qual_counts += np.bincount(per_read // length[nonzero], minlength=NQ)[:NQ]

    def merge(self, other: QCAccumulator) -> None:
        """Add another accumulator's aggregates (exact: integers only)."""
        self.reads += other.reads
        for name in ("length_counts", "cycle_qual_sum", "cycle_bases"):
            mine, theirs = getattr(self, name), getattr(other, name)
            mine = _grow(mine, theirs.shape[-1])
            mine[..., : theirs.shape[-1]] += theirs
            setattr(self, name, mine)
        self.qual_counts += other.qual_counts
        self.read_qual_counts += other.read_qual_counts
        self.gap_bases += other.gap_bases

    # -- derived numbers -------------------------------------------------------------------
    @property
    def bases(self) -> int:
        lc = self.length_counts
        return int((lc * np.arange(len(lc), dtype=np.int64)).sum())

    @property
    def max_cycle(self) -> int:
        nz = np.flatnonzero(self.length_counts)
        return int(nz[-1]) if len(nz) else 0

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
    lengths = np.flatnonzero(acc.length_counts)
    q1, q2, q3 = length_quartiles(acc.length_counts)
    qc = acc.qual_counts
    phred = np.arange(NQ, dtype=np.float64)
    err = float((qc * np.power(10.0, -phred / 10)).sum())
    bc = acc.cycle_bases.sum(axis=1)
    return {
        "reads": acc.reads,
        "bases": bases,
        "min_len": int(lengths[0]) if len(lengths) else 0,
        "max_len": int(lengths[-1]) if len(lengths) else 0,
        "avg_len": bases / acc.reads if acc.reads else None,
        "q1_len": q1 if acc.reads else None,
        "q2_len": q2 if acc.reads else None,
        "q3_len": q3 if acc.reads else None,
        "n50": n50(acc.length_counts) if acc.reads else None,
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
