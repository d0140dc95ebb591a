"""Per-position allele counts of a batch of alignments, as ``samtools mpileup`` (1.16.1, htslib 1.16)
piles them up for ``ivar`` (1.3.1): the ``alleles`` and ``indels`` staging tables, counted by the reducers
from the children's sorted records (:mod:`seqlake.reduce.record_counts`).

Which reads and bases count (mpileup ``-A -B -d 0 -Q 0``, the pileups nf-core/viralrecon feeds to ivar):

- rows that are unmapped, secondary (0x100), QC-failed (0x200) or duplicates (0x400) are skipped;
  supplementary rows count; no MAPQ floor; orphans count (``-A``), BAQ is off (``-B``), no depth cap.
- an aligned base (CIGAR M, =, X) is one entry at its reference position: its base (A, C, G, T; anything
  else is N) and strand. A deleted reference base (D) is a ``*`` entry whose quality is that of the
  first read base after the deletion (htslib ``bam_plp`` ``qpos``). Entries of every quality count in the
  ``*_all`` columns (mpileup's column 4 at ``-Q 0``); the per-strand columns count only entries whose
  quality is at least ``min_quality`` (ivar ``-q``).
- a deletion is also an indel allele anchored on the reference base before it, an insertion one anchored
  on the base before it with its inserted bases; ivar counts both whatever their quality.
- ``*_olap`` count the same entries at ``min_quality`` after htslib's overlapping-mates rule
  (``tweak_overlap_quality``, mpileup without ``-x``: the consensus pileup): where both mates of a proper
  pair have an aligned base at one position, equal bases give one mate ``min(qa + qb, 200)`` and the other
  0, different bases give the better one ``0.8 q`` and the other 0; which mate keeps the quality when that
  is not decided by the qualities follows the parity of a hash of the read name. The mates are paired as
  htslib's hash of read names pairs them: in coordinate order a row waits if its mate starts at or after it,
  and the next row of its name is its mate (a name on more than two rows is paired two by two).
- ``read_ends_olap`` counts reads whose last aligned base is here and passes ``min_quality`` after that
  rule (ivar consensus' insertion denominator subtracts them).

Every count is an integer sum over reads, so batches add exactly; the overlap rule needs both mates of a
pair, so a batch holds every record of its read names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.base.limits import CHILD_ALLELE_ROWS, CHILD_BATCH_BASES, CHILD_MERGE_ROWS
from seqlake.formats import cigar as cigar_format
from seqlake.lake.positions import dictionary_column
from seqlake.lake.regions import Region
from seqlake.lake.spill import Counts, FileRun, MemoryRun, Run, merged, sum_sorted
from seqlake.lake.tables import ALLELE_BASES, ALLELE_COUNT_COLUMNS, ALLELES, INDELS

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

#: the count columns of the ``alleles`` staging table, in order: per-strand counts at quality (12), every
#: quality (6), quality sums (5), after the overlap rule (6), read starts and ends (3)
COUNT_COLUMNS: tuple[str, ...] = tuple(c.name for c in ALLELE_COUNT_COLUMNS)
_STRANDED = 2 * (len(ALLELE_BASES) + 1)
_COL = {name: k for k, name in enumerate(COUNT_COLUMNS)}
_NCOL = len(COUNT_COLUMNS)
#: the deletion's base code (0..4: A, C, G, T, N)
DEL = 5
#: the complement of a read byte (reverse-strand rows are read reverse-complemented, as SAM SEQ)
_COMP = np.arange(256, dtype=np.uint8)
for _x, _y in zip("ACGTNacgtn", "TGCANtgcan", strict=True):
    _COMP[ord(_x)] = ord(_y)
#: htslib's 4-bit base codes (``seq_nt16_table``): overlapping mates' bases are compared on these
_NT16 = np.full(256, 15, dtype=np.int64)
for _k, _b in enumerate("=ACMGRSVTWYHKDBN"):
    _NT16[ord(_b)] = _NT16[ord(_b.lower())] = _k
#: CIGAR letters -> BAM op codes
_OP = np.full(256, -1, dtype=np.int64)
for _k, _b in enumerate("MIDNSHP=XB"):
    _OP[ord(_b)] = _k
_REF_OPS = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1, 0], dtype=np.int64)
_QUERY_OPS = np.array([1, 1, 0, 0, 1, 0, 0, 1, 1, 0], dtype=np.int64)
_ALIGNED_OPS = np.array([1, 0, 0, 0, 0, 0, 0, 1, 1, 0], dtype=np.bool_)
#: flags mpileup skips by default (``--ff UNMAP,SECONDARY,QCFAIL,DUP``)
SKIP_FLAGS = 0x4 | 0x100 | 0x200 | 0x400


@dataclass(frozen=True)
class BatchReads:
    """The (trimmed) reads a batch of alignment rows was aligned from: per row, where its read's bases
    and Phred+33 qualities are in ``data`` (the read as sequenced, not reverse-complemented)."""

    data: U8
    seq_start: I64
    qual_start: I64
    length: I64


@dataclass(frozen=True)
class AlignmentRows:
    """What the counting needs of a batch's alignment rows (one entry per row)."""

    contig: I64  # index into the accumulator's contigs, -1 when unmapped
    start: I64  # 0-based leftmost reference position
    flag: I64
    cigar: list[str]
    #: the two mates of a pair share a pair key (>= 0); -1 for single-end rows
    pair: I64
    #: 0-based start of the mate's primary alignment, -1 without one
    mate_start: I64
    mate_contig: I64
    tlen: I64
    #: the rows' read names (only the overlapping pairs' are read)
    names: pa.Array


def parse_cigars(cigars: list[str]) -> tuple[I64, I64, I64]:
    """(row, op code, length) of every CIGAR operation of ``cigars``, in order, parsed at once
    (:func:`seqlake.formats.cigar.parse`, the one home of CIGAR parsing)."""
    return cigar_format.parse(cigars)


def x31_wang_parity(names: list[str]) -> npt.NDArray[np.bool_]:
    """``__ac_Wang_hash(__ac_X31_hash_string(name)) & 1`` (htslib ``khash.h``) of each name, vectorised
    over the names' bytes (uint32 arithmetic wraps as C's ``khint_t``)."""
    if not names:
        return np.zeros(0, dtype=np.bool_)
    width = max(map(len, names))
    raw = np.frombuffer(b"".join(n.encode().ljust(width, b"\0") for n in names), dtype=np.uint8)
    return _x31_wang_parity_of(raw.reshape(len(names), width).astype(np.uint32))


def _x31_wang_parity_of(chars: npt.NDArray[np.uint32]) -> npt.NDArray[np.bool_]:
    """:func:`x31_wang_parity` of names given as rows of bytes, padded with zeros."""
    if chars.shape[0] == 0 or chars.shape[1] == 0:
        return np.zeros(chars.shape[0], dtype=np.bool_)
    with np.errstate(over="ignore"):
        h = chars[:, 0].copy()
        for k in range(1, chars.shape[1]):
            c = chars[:, k]
            h = np.where(c != 0, (h << np.uint32(5)) - h + c, h)
        key = h
        key = key + ~(key << np.uint32(15))
        key = key ^ (key >> np.uint32(10))
        key = key + (key << np.uint32(3))
        key = key ^ (key >> np.uint32(6))
        key = key + ~(key << np.uint32(11))
        key = key ^ (key >> np.uint32(16))
    return (key & np.uint32(1)).astype(np.bool_)


def _within(group: I64, values: I64) -> I64:
    """Exclusive running sum of ``values`` within consecutive runs of equal ``group``."""
    total = np.cumsum(values) - values
    if len(group) == 0:
        return total
    first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    counts = np.diff(np.concatenate((first, [len(group)])))
    return total - np.repeat(total[first], counts)


def _ranges(lens: I64) -> tuple[I64, I64]:
    """(index of the range, offset inside it) for every element of ranges of lengths ``lens``."""
    owner = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    offset = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    return owner, offset


@dataclass
class BatchCounts:
    """One batch's counts: sorted unique position keys with their count rows, and indel alleles."""

    keys: I64
    counts: npt.NDArray[np.int64]
    #: (position key, deleted length, inserted bases) -> [forward, reverse]
    indels: dict[tuple[int, int, str], list[int]] = field(default_factory=dict)


#: an entry's state inside its strand's half of the histogram: base code (0..5, 5 = deletion) x quality >= min x
#: quality >= min after the overlapping-mates rule
_STATES = 6 * 2 * 2
#: where each count column's base (A, C, G, T, N, deletion) is among the histogram's base codes, which are
#: computed from the read byte as sequenced (A 0, C 1, T 2, G 3: bits 1-2 of the byte; anything else 4): on
#: the forward strand, and on the reverse strand (complemented: a reverse row's A is read as T)
_FORWARD_CODES = np.array([0, 1, 3, 2, 4, 5], dtype=np.int64)
_REVERSE_CODES = np.array([2, 3, 1, 0, 4, 5], dtype=np.int64)
#: htslib's 4-bit code of SEQ's base, looked up by ``reverse << 8 | read byte``
_NT16_SEQ = np.concatenate((_NT16, _NT16[_COMP])).astype(np.uint8)
#: each entry adds ``1 + byte << _QBITS`` to its bin: the count and the quality bytes' sum in one float64 sum.
#: A bin counts at most one entry per row, and at most 4 bins are summed before the fields are taken apart
#: (one strand's states of a position): with fewer than ``_PACKED_ROWS`` rows the count stays below
#: ``2 ** _QBITS`` and the whole below 2 ** 52, where float64 adds integers exactly
_QBITS = 22
_PACKED_ROWS = 1 << 18


def _run_cumsum(first_values: I64, steps: I64, lens: I64) -> I64:
    """Per element of consecutive runs of lengths ``lens`` (each > 0): its run's first value plus ``step``
    for each element before it in the run; one repeat and one running sum, no per-element offsets."""
    out = np.repeat(steps, lens)
    return _restart(out, first_values, steps, lens)


def _run_range(first_values: I64, step: int, lens: I64) -> I64:
    """:func:`_run_cumsum` with one step for every run: a fill instead of a repeat."""
    out = np.full(int(lens.sum()), step, dtype=np.int64)
    return _restart(out, first_values, np.full(len(lens), step, dtype=np.int64), lens)


def _restart(out: I64, first_values: I64, steps: I64, lens: I64) -> I64:
    if len(out) == 0:
        return out
    starts = np.cumsum(lens) - lens
    last_prev = first_values[:-1] + steps[:-1] * (lens[:-1] - 1)
    out[starts[1:]] = first_values[1:] - last_prev
    out[0] = first_values[0]
    return np.cumsum(out, out=out)


@dataclass(frozen=True)
class _Span:
    """The positions a batch's counted rows cover, ranked: the union of their [first, end) keys as sorted
    disjoint intervals. A row's positions are consecutive ranks; ranks are found per row or operation,
    never per base, and a sparse batch (a human genome's) costs no more than a dense one."""

    first: I64
    rank0: I64  # the rank of each interval's first position
    size: int

    @classmethod
    def of(cls, first: I64, end: I64) -> _Span:
        order = np.argsort(first, kind="stable")
        first, end = first[order], end[order]
        reach = np.maximum.accumulate(end) if len(end) else end
        # a new interval where a row starts past every earlier row's end
        new = np.concatenate(([True], first[1:] > reach[:-1])) if len(first) else np.zeros(0, dtype=np.bool_)
        starts = np.flatnonzero(new)
        lo = first[starts]
        hi = reach[np.concatenate((starts[1:] - 1, [len(first) - 1]))] if len(starts) else lo
        lens = hi - lo
        return cls(lo, np.cumsum(lens) - lens, int(lens.sum()))

    def rank(self, keys: I64) -> I64:
        at = np.searchsorted(self.first, keys, side="right") - 1
        return self.rank0[at] + keys - self.first[at]

    def key(self, ranks: I64) -> I64:
        at = np.searchsorted(self.rank0, ranks, side="right") - 1
        return self.first[at] + ranks - self.rank0[at]


@dataclass(frozen=True)
class _Aligned:
    """A batch's aligned (M, =, X) operations: row, first reference position, length, whether the row is
    reverse, and the index of their first base among the batch's aligned bases. An operation's bases are
    taken in the order they have in the read buffer (the read as sequenced): a reverse row's run backwards
    along the reference."""

    row: I64
    ref_start: I64
    length: I64
    back: npt.NDArray[np.bool_]
    first: I64

    def base_at(self, ops: I64, ref_pos: I64) -> I64:
        """The index of the aligned base of operation ``ops`` at reference position ``ref_pos``."""
        off = ref_pos - self.ref_start[ops]
        return self.first[ops] + np.where(self.back[ops], self.length[ops] - 1 - off, off)


def count_batch(rows: AlignmentRows, reads: BatchReads, min_quality: int, offsets: I64) -> BatchCounts:
    """The allele counts of one batch (see the module docstring). ``offsets``: each contig's first key
    (its start in the reference's contigs laid end to end), so keys order as (contig, pos)."""
    sel = np.flatnonzero((rows.contig >= 0) & ((rows.flag & SKIP_FLAGS) == 0))
    cig_row, op, oplen = parse_cigars([rows.cigar[i] for i in sel.tolist()])
    row = sel[cig_row]
    rev = (rows.flag & 0x10) != 0
    ref_off = _within(cig_row, oplen * _REF_OPS[op])
    q_off = _within(cig_row, oplen * _QUERY_OPS[op])
    key0 = offsets[np.maximum(rows.contig, 0)] + rows.start  # key of each row's first aligned base
    ref_len = np.bincount(cig_row, weights=oplen * _REF_OPS[op], minlength=len(sel)).astype(np.int64)
    row_end = np.full(len(rows.flag), -1, dtype=np.int64)
    row_end[sel] = rows.start[sel] + ref_len
    span = _Span.of(key0[sel], key0[sel] + ref_len)
    n = span.size
    # aligned bases, operation by operation, each operation's in read-buffer order (a reverse row's backwards
    # along the reference, as SAM SEQ holds them reverse-complemented): every per-base index then grows by one
    # per base, and the bases and qualities are read with one running sum
    m = np.flatnonzero(_ALIGNED_OPS[op])
    m_row, m_len = row[m], oplen[m]
    m_back = rev[m_row]
    m_key = key0[m_row] + ref_off[m]
    read_off = np.where(m_back, reads.length[m_row] - q_off[m] - m_len, q_off[m])
    raw, qbyte = _bases(reads, m_row, read_off, m_len)
    aligned = _Aligned(m_row, rows.start[m_row] + ref_off[m], m_len, m_back, np.cumsum(m_len) - m_len)
    # each aligned base's state: its code, and its quality at least min_quality before and after the overlap
    # rule (bits 1 and 0, the same until the rule changes bit 0 inside the pairs' overlaps)
    state = _code_state(raw)
    state |= (qbyte >= min_quality + 33).view(np.uint8) * np.uint8(3)
    _overlap_rule(rows, reads.length, row_end, aligned=aligned, raw=raw, qbyte=qbyte, state=state,
                  min_quality=min_quality)
    # every entry is added straight into its position's row of count columns (rows by rank; a reverse
    # operation's bases, in read-buffer order, walk backwards along the reference)
    rank0 = span.rank(m_key)
    dense = len(state) >= _DENSE_BASES * n
    sums = (_DenseSums if dense else _SparseSums)(n, packed=len(sel) < _PACKED_ROWS)
    for ops, bases in _blocks(m_len, sums.block):
        cells = sums.cells(rank0[ops], m_len[ops], m_back[ops])
        sums.add_entries(cells, sums.states(state[bases], m_back[ops], m_len[ops]), qbyte[bases])
    # deleted bases (few), read starts and ends: added where they fall
    dkey, dback, dstate = _deleted_entries(op, oplen, row, cig_row=cig_row, q_off=q_off, ref_off=ref_off, key0=key0,
                                           m=m, rev=rev, reads=reads, aligned=aligned, state=state,
                                           min_quality=min_quality)
    if len(dkey):
        ones = np.ones(len(dkey), dtype=np.int64)
        sums.add_entries(sums.cells(span.rank(dkey), ones, dback), sums.states(dstate.astype(np.uint8), dback, ones),
                         np.zeros(len(dkey), dtype=np.uint8))
    # each row's last aligned base: the last base of its last aligned operation
    last_op = np.flatnonzero(np.concatenate((m_row[1:] != m_row[:-1], [True]))) if len(m) else m
    last_key = m_key[last_op] + m_len[last_op] - 1
    last = np.where(m_back[last_op], aligned.first[last_op], aligned.first[last_op] + m_len[last_op] - 1)
    start_at, end_at = span.rank(key0[sel]), span.rank(last_key)
    for column, at in (("read_starts", start_at), ("read_ends", end_at),
                       ("read_ends_olap", end_at[(state[last] & 1) != 0])):
        sums.add_events(at, column)
    # the positions with an entry (an aligned or a deleted base) or a read start or end
    d = np.flatnonzero(op == 2)
    d_rank = span.rank(key0[row[d]] + ref_off[d])
    occupied = _covered(n, np.concatenate((rank0, d_rank, start_at, end_at)),
                        np.concatenate((rank0 + m_len, d_rank + oplen[d], start_at + 1, end_at + 1)))
    nonzero = np.flatnonzero(occupied)
    counts = sums.rows(nonzero)
    out = BatchCounts(span.key(nonzero), counts)
    _count_indels(out.indels, rows, reads, op=op, oplen=oplen, row=row, ref_off=ref_off, q_off=q_off, key0=key0)
    return out


def _code_state(raw: U8) -> U8:
    """``_STATES``' base code times 4 of each read byte (arithmetic on the bytes: no table look-up per base)."""
    upper = raw & np.uint8(0xDF)  # a lower-case letter as upper case; no other byte becomes A, C, G or T
    acgt = (upper == ord("A")) | (upper == ord("C")) | (upper == ord("G")) | (upper == ord("T"))
    code = np.where(acgt, (upper >> np.uint8(1)) & np.uint8(3), np.uint8(4))
    code <<= np.uint8(2)
    return code


#: the most aligned bases whose 8-byte indexes, bins and weights are made at once: a batch's are made block by
#: block, so that these stay a few MB that the allocator hands out again, where arrays of a whole batch's
#: bases came as fresh pages each time and their page faults cost more than the work on them
_BLOCK_BASES = 1 << 18


def _blocks(lens: I64, block: int | None = None) -> Iterator[tuple[slice, slice]]:
    """Consecutive runs of lengths ``lens`` cut into blocks of about ``block`` (``_BLOCK_BASES``) elements
    (whole runs): each block's runs and elements."""
    block = _BLOCK_BASES if block is None else block
    ends = np.cumsum(lens)
    at = 0
    while at < len(lens):
        start = int(ends[at] - lens[at])
        stop = max(at + 1, int(np.searchsorted(ends, start + block, side="right")))
        yield slice(at, stop), slice(start, int(ends[stop - 1]))
        at = stop


def _bases(reads: BatchReads, row: I64, read_off: I64, lens: I64) -> tuple[U8, U8]:
    """The read bytes and quality bytes of runs of ``lens`` consecutive bytes ``read_off`` into the reads of
    ``row``: one index for both when every read's qualities are as far from its bases (FASTQ reads of one
    length, trimmed or not), the qualities then read through a view of the buffer shifted by that much."""
    data, seq0 = reads.data, reads.seq_start[row] + read_off
    qual0 = reads.qual_start[row] + read_off
    gap = reads.qual_start[row] - reads.seq_start[row]
    same_gap = len(gap) > 0 and bool((gap == gap[0]).all()) and gap[0] >= 0
    total = int(lens.sum())
    raw, qbyte = np.empty(total, dtype=np.uint8), np.empty(total, dtype=np.uint8)
    for ops, bases in _blocks(lens):
        at = _run_range(seq0[ops], 1, lens[ops])
        data.take(at, out=raw[bases])
        if same_gap:
            data[int(gap[0]) :].take(at, out=qbyte[bases])
        else:
            data.take(_run_range(qual0[ops], 1, lens[ops]), out=qbyte[bases])
    return raw, qbyte


def _deleted_entries(op: I64, oplen: I64, row: I64, *, cig_row: I64, q_off: I64, ref_off: I64, key0: I64, m: I64,
                     rev: npt.NDArray[np.bool_], reads: BatchReads, aligned: _Aligned, state: U8,
                     min_quality: int) -> tuple[I64, npt.NDArray[np.bool_], I64]:
    """Keys, strands and states of the deleted reference bases: ``*`` entries with the quality of the next
    read base (the first base of the next aligned operation; an inserted base when an insertion comes
    between, which the overlap rule does not adjust)."""
    d = np.flatnonzero(op == 2)
    if len(d) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.int64)
    do, dk = _ranges(oplen[d])
    drow = row[d]
    nxt = np.minimum(np.searchsorted(m, d), len(m) - 1)
    direct = (m[nxt] == d + 1) & (cig_row[m[nxt]] == cig_row[d])
    dsrc = np.where(rev[drow], reads.length[drow] - 1 - q_off[d], q_off[d])
    dq = reads.data[reads.qual_start[drow] + dsrc].astype(np.int64) - 33
    next_base = aligned.base_at(nxt, aligned.ref_start[nxt])
    dq_olap = np.where(direct, (state[next_base] & 1) != 0, dq >= min_quality)
    dkey = key0[drow][do] + ref_off[d][do] + dk
    dstate = (DEL * 4 + (dq >= min_quality) * 2 + dq_olap)[do]
    return dkey, rev[drow][do], dstate


def _column_tables() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per entry kind (at quality, every quality, after the overlap rule, quality sum) and entry state
    (``strand << 5 | base code as read << 2 | (quality >= min) << 1 | (after the overlap rule)``): the count
    column the entry adds to, and whether it counts there (1) or adds 0 (0; its column is then its
    every-quality one, any column of its row would do)."""
    column = np.zeros((4, 64), dtype=np.int64)
    counts = np.zeros((4, 64), dtype=np.int64)
    for strand, codes in enumerate((_FORWARD_CODES, _REVERSE_CODES)):
        for j, code in enumerate(codes.tolist()):  # j: the column's base (a, c, g, t, n, deletion)
            for at in range(4):
                st = strand << 5 | code << 2 | at
                column[:, st] = _COL["a_all"] + j
                counts[1, st] = 1
                if at & 2:
                    column[0, st], counts[0, st] = 2 * j + strand, 1
                    if j < DEL:
                        column[3, st], counts[3, st] = _COL["a_qual"] + j, 1
                if at & 1:
                    column[2, st], counts[2, st] = _COL["a_olap"] + j, 1
    return column, counts


_COLUMN_OF, _COUNTS_IN = _column_tables()


def _covered(n: int, starts: I64, ends: I64) -> npt.NDArray[np.bool_]:
    """Whether each of ``n`` ranks is inside one of the intervals ``[starts, ends)``."""
    depth = np.bincount(starts, minlength=n + 1) - np.bincount(ends, minlength=n + 1)
    covered: npt.NDArray[np.bool_] = np.cumsum(depth[:n]) > 0
    return covered


#: a batch is counted as dense (:class:`_DenseSums`) when it has at least this many aligned bases per position
#: its rows span (a virus at thousands-x has hundreds), else as sparse (:class:`_SparseSums`; a big genome's
#: shard covers it thinly, about one base per position): measured, the two cost about the same near 4
_DENSE_BASES = 4


class _SparseSums:
    """A sparse batch's count rows at every position of its span (by rank, ``_NCOL`` cells a position), int64:
    each entry added into its columns where it falls (``np.add.at``), so the cost is per entry and never
    per cell; its quality (byte - 33) added to its quality-sum column as an entry of its own (packing it
    above the count, as :class:`_DenseSums` does, would cost a pass over every row to take apart: more than
    the entries cost here)."""

    #: bases per block of the per-base work (:func:`_blocks`' default)
    block: int | None = None

    def __init__(self, n: int, *, packed: bool) -> None:
        self.n = n  # (``packed`` is the dense batches' choice)
        self.sums = np.zeros(n * _NCOL, dtype=np.int64)

    @staticmethod
    def cells(rank0: I64, lens: I64, back: npt.NDArray[np.bool_]) -> I64:
        """The first cell of the position of each base of runs of ``lens`` bases from ranks ``rank0``, in
        read-buffer order (a reverse run's bases walk backwards along the reference)."""
        first = np.where(back, rank0 + lens - 1, rank0) * _NCOL
        return _run_cumsum(first, np.where(back, -_NCOL, _NCOL), lens)

    @staticmethod
    def states(state: U8, back: npt.NDArray[np.bool_], lens: I64) -> U8:
        """The bases' states with their strand: ``strand << 5 | base code as read << 2 | (quality >= min) << 1
        | (after the overlap rule)``."""
        return state | np.repeat(back.view(np.uint8) << np.uint8(5), lens)

    def add_entries(self, cells: I64, st: U8, qbyte: U8) -> None:
        """Entries at their positions' first cells with their states and quality bytes (0 for deleted bases:
        they have no quality-sum column): each adds one to its every-quality column and, where it counts
        there, to its at-quality and after-overlap columns and its quality to the quality sum (an entry that
        does not count in a column adds 0 to its every-quality one)."""
        np.add.at(self.sums, cells + _COLUMN_OF[0][st], _COUNTS_IN[0][st])
        np.add.at(self.sums, cells + _COLUMN_OF[3][st], (qbyte.astype(np.int64) - 33) * _COUNTS_IN[3][st])
        np.add.at(self.sums, cells + _COLUMN_OF[1][st], 1)
        np.add.at(self.sums, cells + _COLUMN_OF[2][st], _COUNTS_IN[2][st])

    def add_events(self, ranks: I64, column: str) -> None:
        """One count in ``column`` at each of ``ranks`` (read starts and ends)."""
        np.add.at(self.sums, ranks * _NCOL + _COL[column], 1)

    def rows(self, ranks: I64) -> npt.NDArray[np.int64]:
        """The count rows of the positions ``ranks`` (every position of the span, or some)."""
        table = self.sums.reshape(self.n, _NCOL)
        return table if len(ranks) == self.n else table[ranks]


def _unpack(counts: npt.NDArray[np.int64]) -> None:
    """Packed stranded columns (``count + quality bytes' sum << _QBITS``) taken apart, in place: the counts
    stay, the quality sums (less 33 an entry) go to the quality-sum columns."""
    fwd, rev = counts[:, 0 : 2 * DEL : 2], counts[:, 1 : 2 * DEL : 2]
    qual = (fwd >> _QBITS) + (rev >> _QBITS)
    counts[:, :_STRANDED] &= (1 << _QBITS) - 1
    counts[:, _COL["a_qual"] : _COL["a_qual"] + DEL] = qual - 33 * (fwd + rev)


class _DenseSums:
    """A dense batch's histogram: ``_STATES`` bins a position (base code as read, quality >= min, after the
    overlap rule), the forward entries' by rank, then the reverse entries' mirrored (rank ``n - 1 - r``),
    so that a run of bases in read-buffer order has bins that grow by ``_STATES`` a base whatever its
    strand; float64 sums of integers below 2 ** 52 (exact). Each block of entries is added by one
    ``bincount`` (blocks at least as long as the histogram, so a pass over it is paid for by as many
    entries); the bins are added into count columns once, at the end (a few passes over the positions).
    ``packed``: each entry adds ``1 + byte << _QBITS`` to its bin, the quality bytes' sum riding above the
    count (with fewer than ``_PACKED_ROWS`` rows the fields cannot carry into each other, a position counting
    at most one entry per row), taken apart once the bins are added into columns; else a second histogram
    of the quality bytes."""

    def __init__(self, n: int, *, packed: bool) -> None:
        self.n, self.packed = n, packed
        size = 2 * n * _STATES
        self.block = max(_BLOCK_BASES, size)
        self.hist = np.zeros(size, dtype=np.float64)
        self.qsum = None if packed else np.zeros(size, dtype=np.float64)
        self.events: dict[str, I64] = {}

    def cells(self, rank0: I64, lens: I64, back: npt.NDArray[np.bool_]) -> I64:
        """The first bin of the position of each base of runs of ``lens`` bases from ranks ``rank0``."""
        first = np.where(back, 2 * self.n - rank0 - lens, rank0) * _STATES
        return _run_range(first, _STATES, lens)

    @staticmethod
    def states(state: U8, back: npt.NDArray[np.bool_], lens: I64) -> U8:
        """The bases' states as they are: the strand is in the bin."""
        return state

    def add_entries(self, cells: I64, st: U8, qbyte: U8) -> None:
        """Entries (as :meth:`_SparseSums.add_entries`) at their positions' first bins."""
        bins = cells + st
        size = len(self.hist)
        few = 64 * len(bins) < size  # (deleted bases) added where they fall, not by a pass over every bin
        if self.qsum is None:
            weights = np.multiply(qbyte, float(1 << _QBITS), dtype=np.float64)
            weights += 1.0
            if few:
                np.add.at(self.hist, bins, weights)
            else:
                self.hist += np.bincount(bins, weights=weights, minlength=size)
        elif few:
            np.add.at(self.hist, bins, 1.0)
            np.add.at(self.qsum, bins, qbyte.astype(np.float64))
        else:
            self.hist += np.bincount(bins, minlength=size)
            self.qsum += np.bincount(bins, weights=qbyte, minlength=size)

    def add_events(self, ranks: I64, column: str) -> None:
        """One count in ``column`` at each of ``ranks`` (added when the rows are made)."""
        self.events[column] = ranks

    def _halves(self, hist: npt.NDArray[np.float64], ranks: I64) -> tuple[npt.NDArray[np.float64], ...]:
        """The forward and the reverse bins (base code as read, state) of the positions ``ranks``: views of
        the histogram when they are all of its positions (a dense batch's usual case), else copies."""
        bins = hist.reshape(2 * self.n, 6, 4)
        if len(ranks) == self.n:
            return bins[: self.n], bins[self.n :][::-1]
        return bins[ranks], bins[2 * self.n - 1 - ranks]

    def rows(self, ranks: I64) -> npt.NDArray[np.int64]:
        """The count rows of the positions ``ranks``: each half's states added up per column (float64, exact)
        and its base codes put in column order, then the halves added."""
        k = len(ranks)
        counts = np.empty((k, _NCOL), dtype=np.int64)
        every = np.zeros((k, 6), dtype=np.float64)
        after = np.zeros((k, 6), dtype=np.float64)
        for strand, (half, codes) in enumerate(zip(self._halves(self.hist, ranks), (_FORWARD_CODES, _REVERSE_CODES),
                                                   strict=True)):
            good = half[..., 2] + half[..., 3]
            after += (half[..., 1] + half[..., 3])[:, codes]
            every += (good + half[..., 0] + half[..., 1])[:, codes]
            counts[:, strand:_STRANDED:2] = good[:, codes]
        counts[:, _COL["a_all"] : _COL["a_all"] + 6] = every
        counts[:, _COL["a_olap"] : _COL["a_olap"] + 6] = after
        if self.qsum is None:
            _unpack(counts)
            for column in ("a_all", "a_olap"):
                counts[:, _COL[column] : _COL[column] + 6] &= (1 << _QBITS) - 1
        else:
            fwd, rev = self._halves(self.qsum, ranks)
            q = ((fwd[..., 2] + fwd[..., 3])[:, _FORWARD_CODES[:DEL]]
                 + (rev[..., 2] + rev[..., 3])[:, _REVERSE_CODES[:DEL]])
            stranded = counts[:, 0 : 2 * DEL : 2] + counts[:, 1 : 2 * DEL : 2]
            counts[:, _COL["a_qual"] : _COL["a_qual"] + DEL] = np.rint(q).astype(np.int64) - 33 * stranded
        row = np.full(self.n, -1, dtype=np.int64)
        row[ranks] = np.arange(k)
        for column, at in self.events.items():
            counts[:, _COL[column]] = np.bincount(row[at], minlength=k)
        return counts


def _overlap_rule(rows: AlignmentRows, read_len: I64, row_end: I64, *, aligned: _Aligned, raw: U8, qbyte: U8,
                  state: U8, min_quality: int) -> None:
    """Set bit 0 of each aligned base's ``state`` to whether its quality after htslib's overlapping-mates rule
    (``tweak_overlap_quality``) is at least ``min_quality``. Only the bases inside a pair's overlap are looked
    at (cut out of the aligned operations, not filtered base by base)."""
    flag = rows.flag
    pairable = ((flag & (0x800 | SKIP_FLAGS | 0x8)) == 0) & ((flag & 0x2) != 0) & (rows.pair >= 0) & (
        rows.mate_contig == rows.contig)
    # htslib skips "wild CIGARs": |isize| >= 2 * l_qseq with the mate starting at or after this row's end
    pairable &= ~((np.abs(rows.tlen) >= 2 * read_len) & (rows.mate_start >= row_end))
    idx = np.flatnonzero(pairable)
    if len(idx) < 2:
        return
    a_rows, b_rows = _mates(rows, idx)
    lo = np.maximum(rows.start[a_rows], rows.start[b_rows])
    hi = np.minimum(row_end[a_rows], row_end[b_rows])
    overlapping = hi > lo
    a_rows, b_rows, lo, hi = a_rows[overlapping], b_rows[overlapping], lo[overlapping], hi[overlapping]
    if len(a_rows) == 0:
        return
    a_keeps = _name_parity(rows.names.take(pa.array(a_rows)))
    # each mate's aligned operations cut to its pair's overlap: per base, its index among the aligned bases
    # and its cell in a table of the overlaps laid end to end; a's bases fill the table, b's look it up
    cell0 = np.cumsum(hi - lo) - (hi - lo) - lo  # + a reference position: its cell
    a_ops, a_pair, a_lo, a_len = _cut(aligned, len(flag), a_rows, lo, hi)
    b_ops, b_pair, b_lo, b_len = _cut(aligned, len(flag), b_rows, lo, hi)
    table = np.full(int((hi - lo).sum()), -1, dtype=np.int64)
    a_cell = _run_range(cell0[a_pair] + a_lo, 1, a_len)
    table[a_cell] = _events(aligned, a_ops, a_lo, a_len)
    b_cell = _run_range(cell0[b_pair] + b_lo, 1, b_len)
    match = table[b_cell]
    both = match >= 0
    ea, eb = match[both], _events(aligned, b_ops, b_lo, b_len)[both]
    keeps = a_keeps[np.repeat(b_pair, b_len)[both]]
    a_back = np.zeros(len(table), dtype=np.bool_)
    a_back[a_cell] = np.repeat(aligned.back[a_ops], a_len)
    qa, qb = qbyte[ea].astype(np.int64) - 33, qbyte[eb].astype(np.int64) - 33
    # htslib compares the 4-bit codes of SEQ (a reverse row's bases complemented)
    same_base = (_NT16_SEQ[(a_back[b_cell[both]].astype(np.int64) << 8) | raw[ea]]
                 == _NT16_SEQ[(np.repeat(aligned.back[b_ops], b_len)[both].astype(np.int64) << 8) | raw[eb]])
    summed = np.minimum(qa + qb, 200)
    a80, b80 = (0.8 * qa).astype(np.int64), (0.8 * qb).astype(np.int64)
    after_a = np.where(same_base, np.where(keeps, summed, 0),
                       np.where(qa > qb, a80, np.where(qa < qb, 0, np.where(keeps, a80, 0)))) >= min_quality
    after_b = np.where(same_base, np.where(keeps, 0, summed),
                       np.where(qa > qb, 0, np.where(qa < qb, b80, np.where(keeps, 0, b80)))) >= min_quality
    state[ea] = (state[ea] & 0xFE) | after_a
    state[eb] = (state[eb] & 0xFE) | after_b


def _mates(rows: AlignmentRows, idx: I64) -> tuple[I64, I64]:
    """The pairs among rows ``idx`` whose overlap htslib tweaks: ``a`` the row its hash of read names holds, ``b``
    the next row of that name. In coordinate order (the forward row first at one position, as samtools sort
    orders them), a row is held if its mate starts at or after it, and the next row of its name takes it out:
    so the two mates of a pair, and a name on more than two rows (reads copied under one name) paired two by
    two, never as a chain of every row with the next."""
    order = idx[np.lexsort((rows.flag[idx] & 0x10, rows.start[idx], rows.pair[idx]))]
    key = rows.pair[order]
    bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])
    first, size = bounds[:-1], np.diff(bounds)
    a, b = order[first[size == 2]], order[first[size == 2] + 1]
    held = rows.mate_start[a] >= rows.start[a]
    a_rows, b_rows = [a[held]], [b[held]]
    for at, n in zip(first[size > 2].tolist(), size[size > 2].tolist(), strict=True):  # rare: copied names
        waiting = -1
        for r in order[at : at + n].tolist():
            if waiting >= 0:
                a_rows.append(np.array([waiting]))
                b_rows.append(np.array([r]))
                waiting = -1
            elif rows.mate_start[r] >= rows.start[r]:
                waiting = r
    return np.concatenate(a_rows).astype(np.int64), np.concatenate(b_rows).astype(np.int64)


def _cut(aligned: _Aligned, n_rows: int, mates: I64, lo: I64, hi: I64) -> tuple[I64, I64, I64, I64]:
    """The aligned operations of rows ``mates`` (one per pair, pairs in order; ``n_rows`` rows in the batch)
    cut to their pair's overlap [lo, hi): operation, pair, first reference position and length of each
    non-empty cut."""
    pair_of = np.full(n_rows, -1, dtype=np.int64)
    pair_of[mates] = np.arange(len(mates))
    op_pair = pair_of[aligned.row]
    ops = np.flatnonzero(op_pair >= 0)
    pair = op_pair[ops]
    cut_lo = np.maximum(aligned.ref_start[ops], lo[pair])
    cut_hi = np.minimum(aligned.ref_start[ops] + aligned.length[ops], hi[pair])
    keep = cut_hi > cut_lo
    return ops[keep], pair[keep], cut_lo[keep], (cut_hi - cut_lo)[keep]


def _events(aligned: _Aligned, ops: I64, cut_lo: I64, lens: I64) -> I64:
    """The aligned-base index of each reference position of the cuts, in reference order."""
    return _run_cumsum(aligned.base_at(ops, cut_lo), np.where(aligned.back[ops], -1, 1), lens)


def _name_parity(names: pa.Array) -> npt.NDArray[np.bool_]:
    """:func:`x31_wang_parity` of an Arrow string array, read from its buffers (no Python strings)."""
    names = names.cast(pa.large_string()) if names.type != pa.large_string() else names
    if names.null_count:
        names = names.fill_null("")
    _, offsets_buf, data_buf = names.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[names.offset : names.offset + len(names) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    lens = np.diff(offsets)
    width = int(lens.max()) if len(lens) else 0
    cols = np.arange(width, dtype=np.int64)
    inside = cols < lens[:, None]
    chars = np.where(inside, data[np.where(inside, offsets[:-1, None] + cols, 0)] if len(data) else 0, 0)
    return _x31_wang_parity_of(chars.astype(np.uint32))


def _count_indels(indels: dict[tuple[int, int, str], list[int]], rows: AlignmentRows, reads: BatchReads, *,
                  op: I64, oplen: I64, row: I64, ref_off: I64, q_off: I64, key0: I64) -> None:
    """Deletions (by length) and insertions (by inserted bases, upper case, reference strand) anchored on
    the reference base before them. An indel before a row's first aligned base has no anchor in the read
    and is not counted (mpileup prints none)."""
    at = np.flatnonzero(((op == 1) | (op == 2)) & (ref_off > 0))
    if len(at) == 0:
        return
    rev = (rows.flag[row[at]] & 0x10) != 0
    anchor = key0[row[at]] + ref_off[at] - 1
    is_del = op[at] == 2
    if is_del.any():  # deletions, the common indel, grouped with one sort of (anchor, length, strand)
        length = oplen[at[is_del]]
        longest = int(length.max()) + 1
        uniq, n = np.unique((anchor[is_del] * longest + length) * 2 + rev[is_del], return_counts=True)
        for ident, c in zip(uniq.tolist(), n.tolist(), strict=True):
            indels.setdefault((ident // 2 // longest, ident // 2 % longest, ""), [0, 0])[ident % 2] += c
    ins = at[~is_del]
    if len(ins) == 0:
        return
    # every inserted sequence's bytes gathered at once, on the reference strand (a reverse row's read
    # backwards and complemented), then cut per insertion
    r, size, back = row[ins], oplen[ins], rev[~is_del]
    first = reads.seq_start[r] + np.where(back, reads.length[r] - q_off[ins] - 1, q_off[ins])
    raw = reads.data[_run_cumsum(first, np.where(back, -1, 1), size)]
    text = np.where(np.repeat(back, size), _COMP[raw], raw).astype(np.uint8).tobytes()
    ends = np.cumsum(size).tolist()
    found = Counter(zip(anchor[~is_del].tolist(), (text[e - s : e] for e, s in zip(ends, size.tolist(), strict=True)),
                        back.tolist(), strict=True))
    for (k, bases, is_rev), c in found.items():
        indels.setdefault((k, 0, bases.decode("latin-1").upper()), [0, 0])[int(is_rev)] += c


def _take(rows: AlignmentRows, reads: BatchReads, at: slice) -> tuple[AlignmentRows, BatchReads]:
    """Rows ``at`` of a batch, with their reads."""
    return (AlignmentRows(rows.contig[at], rows.start[at], rows.flag[at], rows.cigar[at], rows.pair[at],
                          rows.mate_start[at], rows.mate_contig[at], rows.tlen[at],
                          rows.names.slice(at.start, at.stop - at.start)),
            BatchReads(reads.data, reads.seq_start[at], reads.qual_start[at], reads.length[at]))


def _pieces(rows: AlignmentRows, reads: BatchReads, offsets: I64, bases: int) -> Iterator[
        tuple[AlignmentRows, BatchReads]]:
    """The batch whole when the positions its rows reach (each row taken as its read's length from its start)
    are at most ``bases``; else consecutive pieces of about ``bases`` read bases, cut only where no pair has
    rows on both sides (the overlap rule needs both mates). The counts are sums over rows: the pieces' add up
    to the batch's."""
    n = len(rows.flag)
    mapped = rows.contig >= 0
    key0 = offsets[np.maximum(rows.contig, 0)] + rows.start
    if n == 0 or _Span.of(key0[mapped], key0[mapped] + reads.length[mapped]).size <= bases:
        yield rows, reads
        return
    # a cut before row i is allowed when every pair seen so far has its last row before i
    at = np.arange(n, dtype=np.int64)
    paired = rows.pair >= 0
    last = at.copy()
    if paired.any():
        pair_ids, inverse = np.unique(rows.pair[paired], return_inverse=True)
        pair_last = np.zeros(len(pair_ids), dtype=np.int64)
        np.maximum.at(pair_last, inverse, at[paired])
        last[paired] = pair_last[inverse]
    can_cut = np.maximum.accumulate(last) == at  # a cut may follow row i
    done = np.cumsum(np.where(mapped, reads.length, 0))
    first = 0
    while first < n:
        # the furthest allowed cut within the budget (at least the first allowed one)
        reach = int(np.searchsorted(done, (done[first - 1] if first else 0) + bases, side="right"))
        cuts = np.flatnonzero(can_cut[first : max(reach, first + 1)])
        stop = first + 1 + int(cuts[-1]) if len(cuts) else first + 1 + int(np.argmax(can_cut[first:]))
        yield _take(rows, reads, slice(first, stop))
        first = stop


class AlleleAccumulator:
    """A sample's allele counts over a child's batches, sparse: rows only where a read has a base or a
    deletion. Batches are added up lazily (once the pending rows outnumber the summed ones), so adding
    costs O(n log n) over the child whatever the genome's size; once the rows held pass ``row_budget``
    (:data:`seqlake.base.limits.CHILD_ALLELE_ROWS`) the summed rows are spilled to a sorted run in ``spill``
    (a folder of the child's scratch) and the sums start again (:mod:`seqlake.lake.spill`), so memory is
    bounded whatever the positions the reads touch. ``spill=None``: never spilled."""

    def __init__(self, contigs: list[tuple[str, int]], min_quality: int, *, spill: Path | None = None,
                 row_budget: int = CHILD_ALLELE_ROWS.value, batch_bases: int = CHILD_BATCH_BASES.value) -> None:
        self.contigs = contigs
        lengths = np.array([n for _, n in contigs], dtype=np.int64)
        self.offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        self.min_quality = min_quality
        self.keys = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros((0, _NCOL), dtype=np.int64)
        self._pending: list[BatchCounts] = []
        self._pending_rows = 0
        self.indels: dict[tuple[int, int, str], list[int]] = {}
        self.spill = spill
        self.row_budget = max(1, row_budget)
        self.batch_bases = max(1, batch_bases)
        self.spilled: list[FileRun] = []

    def add(self, rows: AlignmentRows, reads: BatchReads) -> None:
        """Count a batch of alignment rows: in pieces of whole pairs when the positions they reach pass
        ``batch_bases`` (a batch's histogram costs ~384 bytes per position it spans)."""
        for piece in _pieces(rows, reads, self.offsets, self.batch_bases):
            self._add(*piece)

    def _add(self, rows: AlignmentRows, reads: BatchReads) -> None:
        batch = count_batch(rows, reads, self.min_quality, self.offsets)
        self._pending.append(batch)
        self._pending_rows += len(batch.keys)
        for ident, (f, r) in batch.indels.items():
            counts = self.indels.setdefault(ident, [0, 0])
            counts[0] += f
            counts[1] += r
        over = self.spill is not None and len(self.keys) + self._pending_rows > self.row_budget
        if self._pending_rows > len(self.keys) or over:
            self._compact()
        if over and 2 * len(self.keys) > self.row_budget:  # the sums fill half the budget: out to disk
            self._spill_run()

    def _compact(self) -> None:
        if self._pending:
            self.keys, self.counts = sum_sorted([(self.keys, self.counts),
                                                 *((b.keys, b.counts) for b in self._pending)], _NCOL)
            self._pending, self._pending_rows = [], 0

    @property
    def rows_held(self) -> int:
        """Count rows in memory: the summed ones and the pending batches'."""
        return len(self.keys) + self._pending_rows

    def spill_all(self) -> None:
        """Spill the rows in memory (a child's other samples make room for the one being counted)."""
        self._compact()
        if self.spill is not None and len(self.keys):
            self._spill_run()

    def _spill_run(self) -> None:
        assert self.spill is not None
        self.spill.mkdir(parents=True, exist_ok=True)
        self.spilled.append(FileRun(self.spill / f"run-{len(self.spilled):05d}.counts", self.keys, self.counts))
        self.keys = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros((0, _NCOL), dtype=np.int64)

    def runs(self) -> list[Run]:
        """The sorted runs whose rows add up to the counts: the spilled ones and the rows in memory."""
        self._compact()
        return [*self.spilled, MemoryRun(self.keys, self.counts)]

    def close(self) -> None:
        """Delete the spilled runs (the child's scratch folder goes too, this frees the disk sooner)."""
        for run in self.spilled:
            run.delete()
        self.spilled = []

    def _split(self, keys: I64) -> tuple[I64, I64]:
        """(contig index, 0-based position) of keys."""
        contig = np.searchsorted(self.offsets, keys, side="right") - 1
        return contig, keys - self.offsets[contig]

    def windows(self, lo: int, hi: int, window_rows: int = CHILD_MERGE_ROWS.value) -> Iterator[
            tuple[I64, I64, Counts]]:
        """``(contig index, position, count rows)`` of the summed rows with keys in ``[lo, hi)`` (contigs laid
        end to end), a window of keys at a time, in key order."""
        for keys, counts in merged(self.runs(), lo, hi, _NCOL, window_rows):
            contig, pos = self._split(keys)
            yield contig, pos, counts

    def tables(self, sample: str) -> tuple[pa.Table, pa.Table]:
        """The ``alleles`` and ``indels`` staging rows of the whole reference, sorted by (contig, pos)."""
        names = [n for n, _ in self.contigs]
        end = int(self.offsets[-1] + self.contigs[-1][1]) if self.contigs else 0
        batches = [allele_batch(contig, pos, counts, sample=0, samples=[sample], contig_names=names)
                   for contig, pos, counts in self.windows(0, end)]
        alleles = pa.Table.from_batches(batches, schema=ALLELES.schema).combine_chunks()
        return alleles, self.indel_table(sample)

    def indel_table(self, sample: str) -> pa.Table:
        """The ``indels`` staging rows, sorted by (contig, pos, deleted, inserted)."""
        names = [n for n, _ in self.contigs]
        items = sorted(self.indels.items())
        icontig, ipos = self._split(np.array([k[0] for k, _ in items], dtype=np.int64))
        return pa.table({
            "sample": dictionary_column(np.zeros(len(items), dtype=np.int32), [sample]),
            "contig": dictionary_column(icontig, names),
            "pos": pa.array(ipos),
            "deleted": pa.array([k[1] for k, _ in items], pa.int32()),
            "inserted": pa.array([k[2] for k, _ in items], pa.string()),
            "fwd": pa.array([v[0] for _, v in items], pa.int32()),
            "rev": pa.array([v[1] for _, v in items], pa.int32()),
        }, schema=INDELS.schema)


def allele_batch(contig: npt.NDArray[np.integer], pos: I64, counts: Counts, *, sample: int, samples: Sequence[str],
                 contig_names: Sequence[str]) -> pa.RecordBatch:
    """``alleles`` staging rows of one sample (its code among ``samples``) from count rows, the contig codes
    into ``contig_names``; each count column in its schema's type."""
    cols: list[pa.Array] = [dictionary_column(np.full(len(pos), sample, dtype=np.int32), samples),
                            dictionary_column(contig, contig_names), pa.array(pos, pa.int64())]
    # column by column from one transposed copy, as the columns' (narrower) types when every count fits
    narrow = {column.type.to_pandas_dtype() for column in ALLELE_COUNT_COLUMNS}
    dtype = narrow.pop() if len(narrow) == 1 else np.int64
    # (a spilled run's rows come in that type already: nothing to check)
    fits = counts.dtype == dtype or not counts.size or (np.iinfo(dtype).min <= counts.min()
                                                        and counts.max() <= np.iinfo(dtype).max)
    by_column = _transposed(counts, dtype if fits else np.int64)
    cols += [_typed(pa.array(by_column[k]), column.type) for k, column in enumerate(ALLELE_COUNT_COLUMNS)]
    return pa.RecordBatch.from_arrays(cols, schema=ALLELES.schema)


#: rows transposed at once by :func:`_transposed`: a block's rows and columns stay in the CPU's caches
_TRANSPOSE_ROWS = 256


def _transposed(counts: Counts, dtype: type[np.signedinteger]) -> npt.NDArray[np.signedinteger]:
    """``counts`` column by column (C order) in ``dtype``, a block of rows at a time: ~3x faster than one
    transposing copy of the whole, whose column-wise reads miss the caches on every row."""
    out = np.empty((counts.shape[1], counts.shape[0]), dtype=dtype)
    for first in range(0, counts.shape[0], _TRANSPOSE_ROWS):
        out[:, first : first + _TRANSPOSE_ROWS] = counts[first : first + _TRANSPOSE_ROWS].T
    return out


def _typed(array: pa.Array, type_: pa.DataType) -> pa.Array:
    """``array`` in ``type_`` (cast only when it is not: a cast that changes nothing still costs a call)."""
    return array if array.type == type_ else array.cast(type_)


class AlleleRows:
    """The ``alleles`` staging table of a child's samples, streamed region by region
    (:class:`seqlake.lake.positions.RegionStream`): in a region, each sample's summed rows (samples in
    order), a window of keys at a time, one record batch per window; no region's whole table is held."""

    schema = ALLELES.schema

    def __init__(self, by_sample: Mapping[str, AlleleAccumulator], contigs: list[tuple[str, int]],
                 window_rows: int = CHILD_MERGE_ROWS.value) -> None:
        self.samples = sorted(by_sample)
        self.by_sample = by_sample
        self.window_rows = window_rows
        self.code = {name: k for k, (name, _) in enumerate(contigs)}
        lengths = np.array([n for _, n in contigs], dtype=np.int64)
        self.offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)

    def batches(self, region: Region) -> Iterator[pa.RecordBatch]:
        names = region.contigs
        local = np.full(len(self.code), -1, dtype=np.int32)
        for k, name in enumerate(names):
            local[self.code[name]] = k
        for s, sample in enumerate(self.samples):
            acc = self.by_sample[sample]
            for piece in region.pieces:
                base = int(self.offsets[self.code[piece.contig]])
                for contig, pos, counts in acc.windows(base + piece.start, base + piece.end, self.window_rows):
                    yield allele_batch(local[contig], pos, counts, sample=s, samples=self.samples, contig_names=names)


@dataclass(frozen=True)
class ChunkReads:
    """The kept (trimmed) reads of one aligned chunk: their read indexes, in order, and per mate where each
    read's bases and Phred+33 qualities are in ``data`` (the mates' buffers laid end to end)."""

    data: U8
    index: I64
    #: per mate (1, then 2), arrays over the kept reads
    seq_start: tuple[I64, ...]
    qual_start: tuple[I64, ...]
    length: tuple[I64, ...]


def batch_inputs(table: pa.Table, chunk: ChunkReads, contigs: list[tuple[str, int]], *, cigars: bool = True) -> tuple[
        AlignmentRows, BatchReads]:
    """A chunk's ``alignments`` rows and reads as :func:`count_batch` takes them: each row pointed at its
    read (by mate and read index). ``cigars=False`` leaves the rows' CIGAR texts out (an empty list: for a
    caller that has them packed already and reads nothing else that needs them)."""
    import pyarrow.compute as pc  # here, not at the top: as in seqlake.child.align

    names = pa.array([n for n, _ in contigs], pa.string())

    def code(col: str) -> I64:
        return np.asarray(pc.index_in(table.column(col).cast(pa.string()), value_set=names).fill_null(-1),
                          dtype=np.int64)

    def ints(col: str, null: int) -> I64:
        return np.asarray(table.column(col).fill_null(null), dtype=np.int64)

    flag = ints("flag", 0)
    mate = ints("mate", 1)
    read_index = ints("read_index", -1)
    at = np.searchsorted(chunk.index, read_index)
    at = np.minimum(at, max(len(chunk.index) - 1, 0))
    pick = [np.asarray(x) for x in (chunk.seq_start, chunk.qual_start, chunk.length)]
    m = np.minimum(mate - 1, len(chunk.length) - 1)
    rows = AlignmentRows(
        contig=code("contig"), start=ints("pos", 1) - 1, flag=flag,
        cigar=[c or "" for c in table.column("cigar").to_pylist()] if cigars else [],
        pair=np.where((flag & 0x1) != 0, read_index, -1), mate_start=ints("mate_pos", 0) - 1,
        mate_contig=code("mate_contig"), tlen=ints("tlen", 0), names=table.column("read_name").combine_chunks())
    reads = BatchReads(chunk.data, pick[0][m, at], pick[1][m, at], pick[2][m, at])
    return rows, reads
