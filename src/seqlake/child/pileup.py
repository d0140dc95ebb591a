"""Per-position allele counts of a batch of alignments, as ``samtools mpileup`` (1.16.1, htslib 1.16)
piles them up for ``ivar`` (1.3.1): the child's side of the ``alleles`` and ``indels`` staging tables.

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
  is not decided by the qualities follows the parity of a hash of the read name.
- ``read_ends_olap`` counts reads whose last aligned base is here and passes ``min_quality`` after that
  rule (ivar consensus' insertion denominator subtracts them).

Every count is an integer sum over reads, so children add exactly; the overlap rule needs both mates of a
pair, and a pair is always in one batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.lake.positions import dictionary_column
from seqlake.lake.tables import ALLELE_BASES, ALLELE_COUNT_COLUMNS, ALLELES, INDELS

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

#: the count columns of the ``alleles`` staging table, in order: per-strand counts at quality (12), every
#: quality (6), quality sums (5), after the overlap rule (6), read starts and ends (3)
COUNT_COLUMNS: tuple[str, ...] = tuple(c.name for c in ALLELE_COUNT_COLUMNS)
_STRANDED = 2 * (len(ALLELE_BASES) + 1)
_COL = {name: k for k, name in enumerate(COUNT_COLUMNS)}
_NCOL = len(COUNT_COLUMNS)
#: base code 0..4 (A, C, G, T, N) of a read byte; 5 is a deletion
_CODE = np.full(256, 4, dtype=np.int64)
for _k, _b in enumerate("ACGT"):
    _CODE[ord(_b)] = _CODE[ord(_b.lower())] = _k
DEL = 5
#: the complement of a read byte (reverse-strand rows are read reverse-complemented, as SAM SEQ)
_COMP = np.arange(256, dtype=np.uint8)
for _x, _y in zip("ACGTNacgtn", "TGCANtgcan", strict=True):
    _COMP[ord(_x)] = ord(_y)
#: htslib's 4-bit base codes (``seq_nt16_table``): overlapping mates' bases are compared on these
_COMP_CODE = np.array([3, 2, 1, 0, 4], dtype=np.int64)
#: the same in one byte (the per-base arrays stay small)
_CODE8 = _CODE.astype(np.uint8)
_COMP_CODE8 = _COMP_CODE.astype(np.uint8)
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
    """(row, op code, length) of every CIGAR operation of ``cigars``, in order, parsed at once."""
    text = "".join(cigars).encode("ascii")
    arr = np.frombuffer(text, dtype=np.uint8)
    lens = np.fromiter((len(c) for c in cigars), dtype=np.int64, count=len(cigars))
    offsets = np.concatenate(([0], np.cumsum(lens)))
    is_op = arr >= 61  # '=' and the letters; digits are 48..57
    op_at = np.flatnonzero(is_op)
    digit_at = np.flatnonzero(~is_op)
    owner = np.searchsorted(op_at, digit_at)  # the op each digit belongs to
    power = op_at[owner] - digit_at - 1
    length = np.bincount(owner, weights=(arr[digit_at] - 48) * 10.0 ** power, minlength=len(op_at))
    row = np.searchsorted(offsets, op_at, side="right") - 1
    return row.astype(np.int64), _OP[arr[op_at]], np.rint(length).astype(np.int64)


def x31_wang_parity(names: list[str]) -> npt.NDArray[np.bool_]:
    """``__ac_Wang_hash(__ac_X31_hash_string(name)) & 1`` (htslib ``khash.h``) of each name, vectorised
    over the names' bytes (uint32 arithmetic wraps as C's ``khint_t``)."""
    if not names:
        return np.zeros(0, dtype=np.bool_)
    width = max(map(len, names))
    raw = np.frombuffer(b"".join(n.encode().ljust(width, b"\0") for n in names), dtype=np.uint8)
    chars = raw.reshape(len(names), width).astype(np.uint32)
    with np.errstate(over="ignore"):
        h = chars[:, 0].copy()
        for k in range(1, width):
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


def _positions(keys: list[I64]) -> tuple[I64, list[I64]]:
    """The distinct keys of ``keys`` and each array of ``keys`` as indexes into them."""
    every = [k for k in keys if len(k)]
    if not every:
        return np.zeros(0, dtype=np.int64), [np.zeros(0, dtype=np.int64) for _ in keys]
    uniq = np.unique(np.concatenate(every))
    return uniq, [np.searchsorted(uniq, k) for k in keys]


#: an entry's state: base code (0..5, 5 = deletion) x reverse strand x quality >= min x quality >= min
#: after the overlapping-mates rule
_STATES = 6 * 2 * 2 * 2


@dataclass(frozen=True)
class _Ops:
    """A batch's CIGAR operations: code, length, row (and index among the counted rows), offsets in the row."""

    op: I64
    length: I64
    row: I64
    counted_row: I64
    ref_off: I64
    q_off: I64


#: an aligned base's state bits for base and strand, ``code << 3 | reverse << 2``, looked up by
#: ``reverse << 8 | read byte`` (a reverse row's bases are complemented, as SAM SEQ holds them)
_BASE_STATE = np.concatenate((_CODE8 << 3, (_COMP_CODE8[_CODE8] << 3) | 4)).astype(np.uint8)


def _deleted_entries(ops: _Ops, m: I64, rows: AlignmentRows, reads: BatchReads, *, key0: I64,
                     hq_olap: npt.NDArray[np.bool_], min_quality: int) -> tuple[I64, I64]:
    """Keys and states of the deleted reference bases: ``*`` entries with the quality of the next read base
    (the first base of the next aligned operation; an inserted base when an insertion comes between,
    which the overlap rule does not adjust)."""
    d = np.flatnonzero(ops.op == 2)
    if len(d) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rev = (rows.flag & 0x10) != 0
    do, dk = _ranges(ops.length[d])
    drow = ops.row[d]
    nxt = np.minimum(np.searchsorted(m, d), len(m) - 1)
    first_event = np.cumsum(ops.length[m]) - ops.length[m]
    direct = (m[nxt] == d + 1) & (ops.counted_row[m[nxt]] == ops.counted_row[d])
    dsrc = np.where(rev[drow], reads.length[drow] - 1 - ops.q_off[d], ops.q_off[d])
    dq = reads.data[reads.qual_start[drow] + dsrc].astype(np.int64) - 33
    dq_olap = np.where(direct, hq_olap[first_event[nxt]], dq >= min_quality)
    dkey = key0[drow][do] + ops.ref_off[d][do] + dk
    dstate = (DEL * 8 + rev[drow] * 4 + (dq >= min_quality) * 2 + dq_olap)[do]
    return dkey, dstate


def _run_cumsum(first_values: I64, steps: I64, lens: I64) -> I64:
    """Per element of consecutive runs of lengths ``lens`` (each > 0): its run's first value plus ``step``
    for each element before it in the run; one repeat and one running sum, no per-element offsets."""
    out = np.repeat(steps, lens)
    if len(out) == 0:
        return out
    starts = np.cumsum(lens) - lens
    last_prev = first_values[:-1] + steps[:-1] * (lens[:-1] - 1)
    out[starts[1:]] = first_values[1:] - last_prev
    out[0] = first_values[0]
    return np.cumsum(out, out=out)


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
    # aligned bases, in row order and reference order inside a row. Per operation: where its first base is in
    # the read buffer and which way the read runs (reverse rows are read backwards and complemented, as SAM
    # SEQ holds them); per base, a running sum from there (one pass, no per-base offset arrays)
    m = np.flatnonzero(_ALIGNED_OPS[op])
    m_row = row[m]
    m_len = oplen[m]
    m_back = rev[m_row]
    m_step = np.where(m_back, -1, 1)
    m_seq = reads.seq_start[m_row] + np.where(m_back, reads.length[m_row] - 1 - q_off[m], q_off[m])
    m_key = key0[m_row] + ref_off[m]
    sidx = _run_cumsum(m_seq, m_step, m_len)
    raw = reads.data[sidx]
    qidx = _run_cumsum(m_seq + (reads.qual_start - reads.seq_start)[m_row], m_step, m_len)
    qbyte = reads.data[qidx]  # Phred+33: compared with min_quality + 33, summed then corrected
    del sidx, qidx
    back = np.repeat(m_back, m_len)
    hq = qbyte >= min_quality + 33
    aligned = _Aligned(m_row, rows.start[m_row] + ref_off[m], m_len, np.cumsum(m_len) - m_len)
    hq_olap = _overlap_hq(rows, reads.length, row_end, aligned=aligned, raw=raw, back=back, qbyte=qbyte, hq=hq,
                          min_quality=min_quality)
    state = _BASE_STATE[(back.view(np.uint8).astype(np.uint16) << 8) | raw]
    state |= (hq.view(np.uint8) << 1) | hq_olap.view(np.uint8)
    del back
    dkey, dstate = _deleted_entries(_Ops(op, oplen, row, cig_row, ref_off, q_off), m, rows, reads, key0=key0,
                                    hq_olap=hq_olap, min_quality=min_quality)
    # each row's last aligned base: the last base of its last aligned operation
    last_op = np.flatnonzero(np.concatenate((m_row[1:] != m_row[:-1], [True]))) if len(m) else m
    last = aligned.first[last_op] + m_len[last_op] - 1
    last_key = m_key[last_op] + m_len[last_op] - 1
    uniq, bins, (start_at, end_at, dat) = _bins(m_key, m_len, key0[sel], key0[sel] + ref_len, key0[sel], last_key,
                                                 dkey)
    n = len(uniq)
    bins += state
    hist = np.bincount(bins, minlength=n * _STATES)
    qsum = np.bincount(bins, weights=qbyte, minlength=n * _STATES)
    if len(dat):  # few: added where they fall, not as a second histogram of every bin
        dbins, dn = np.unique(dat * _STATES + dstate, return_counts=True)
        hist[dbins] += dn
    nonzero, counts = _reduce(hist.reshape(n, _STATES), qsum.reshape(n, _STATES), start_at, end_at,
                              end_at[hq_olap[last]])
    out = BatchCounts(uniq[nonzero], counts)
    _count_indels(out.indels, rows, reads, op=op, oplen=oplen, row=row, ref_off=ref_off, q_off=q_off, key0=key0)
    return out


def _bins(m_key: I64, m_len: I64, row_first: I64, row_end: I64, *keys: I64) -> tuple[I64, I64, list[I64]]:
    """The batch's positions, each aligned base's histogram bin without its state (its position's index times
    ``_STATES``, built in one running sum when the batch covers its span densely: a virus, an amplicon
    library, a sorted batch) and ``keys`` as position indexes. ``row_first``/``row_end``: the counted rows'
    first and one-past-last reference keys."""
    lo, hi = (int(row_first.min()), int(row_end.max())) if len(row_first) else (0, 0)
    if len(row_first) == 0 or hi - lo >= 4 * int((row_end - row_first).sum()) + 4096:
        bkey = _run_cumsum(m_key, np.ones(len(m_key), dtype=np.int64), m_len)
        uniq, at = _positions([*keys, bkey])
        return uniq, at[-1] * _STATES, at[:-1]
    # the span's positions some row covers, ranked: an aligned operation's positions are consecutive ranks
    edges = np.bincount(row_first - lo, minlength=hi - lo + 1) - np.bincount(row_end - lo, minlength=hi - lo + 1)
    covered = np.cumsum(edges[:-1]) > 0
    rank = np.cumsum(covered) - 1
    bins = _run_cumsum(rank[m_key - lo] * _STATES, np.full(len(m_key), _STATES, dtype=np.int64), m_len)
    return lo + np.flatnonzero(covered), bins, [rank[k - lo] for k in keys]


def _reduce(hist: npt.NDArray[np.int64], qsum: npt.NDArray[np.float64] | npt.NDArray[np.intp], start_at: I64,
            end_at: I64, end_olap_at: I64) -> tuple[I64, npt.NDArray[np.int64]]:
    """The positions with an entry or a read start or end (a batch's span is mostly empty) and their count
    rows: the state histogram summed over its axes, quality sums from the summed Phred+33 bytes."""
    occupied: npt.NDArray[np.bool_] = np.asarray(hist.any(axis=1))
    occupied[start_at] = True
    occupied[end_at] = True
    nonzero = np.flatnonzero(occupied)
    # integer sums over the few occupied rows (a BLAS product would start threads that spin on a shared CPU)
    h = hist[nonzero].reshape(len(nonzero), 6, 2, 2, 2)  # -1 cannot be inferred from no rows
    counts = np.empty((len(nonzero), _NCOL), dtype=np.int64)
    stranded = h[:, :, :, 1, :].sum(axis=3)
    counts[:, :_STRANDED] = stranded.reshape(len(nonzero), _STRANDED)
    counts[:, _COL["a_all"] : _COL["a_all"] + 6] = h.reshape(len(nonzero), 6, 8).sum(axis=2)
    counts[:, _COL["a_olap"] : _COL["a_olap"] + 6] = h[:, :, :, :, 1].sum(axis=(2, 3))
    summed = qsum[nonzero].reshape(len(nonzero), 6, 2, 2, 2)[:, :DEL, :, 1, :].sum(axis=(2, 3))
    counts[:, _COL["a_qual"] : _COL["a_qual"] + 5] = np.rint(summed).astype(np.int64) - 33 * stranded[:, :DEL].sum(
        axis=2)
    rank = np.cumsum(occupied) - 1  # a position's row among the occupied ones
    counts[:, _COL["read_starts"]] = np.bincount(rank[start_at], minlength=len(nonzero))
    counts[:, _COL["read_ends"]] = np.bincount(rank[end_at], minlength=len(nonzero))
    counts[:, _COL["read_ends_olap"]] = np.bincount(rank[end_olap_at], minlength=len(nonzero))
    return nonzero, counts


@dataclass(frozen=True)
class _Aligned:
    """A batch's aligned (M, =, X) operations: row, first reference position, length, and the index of their
    first base among the batch's aligned bases."""

    row: I64
    ref_start: I64
    length: I64
    first: I64


def _nt16(raw: U8, back: npt.NDArray[np.bool_]) -> I64:
    return np.where(back, _NT16[_COMP[raw]], _NT16[raw])


def _overlap_hq(rows: AlignmentRows, read_len: I64, row_end: I64, *, aligned: _Aligned, raw: U8,
                back: npt.NDArray[np.bool_], qbyte: U8, hq: npt.NDArray[np.bool_],
                min_quality: int) -> npt.NDArray[np.bool_]:
    """Whether each aligned base's quality after htslib's overlapping-mates rule (``tweak_overlap_quality``)
    is at least ``min_quality``. Only the bases inside a pair's overlap are looked at (cut out of the aligned
    operations, not filtered base by base)."""
    out = hq.copy()
    flag = rows.flag
    pairable = ((flag & (0x800 | SKIP_FLAGS | 0x8)) == 0) & ((flag & 0x2) != 0) & (rows.pair >= 0) & (
        rows.mate_contig == rows.contig)
    # htslib skips "wild CIGARs": |isize| >= 2 * l_qseq with the mate starting at or after this row's end
    pairable &= ~((np.abs(rows.tlen) >= 2 * read_len) & (rows.mate_start >= row_end))
    idx = np.flatnonzero(pairable)
    if len(idx) < 2:
        return out
    # a is the leftmost mate (the forward one at one position, as samtools sort orders them), b the other
    order = idx[np.lexsort((flag[idx] & 0x10, rows.start[idx], rows.pair[idx]))]
    same = rows.pair[order[1:]] == rows.pair[order[:-1]]
    a_rows, b_rows = order[:-1][same], order[1:][same]
    lo = np.maximum(rows.start[a_rows], rows.start[b_rows])
    hi = np.minimum(row_end[a_rows], row_end[b_rows])
    overlapping = hi > lo
    a_rows, b_rows, lo, hi = a_rows[overlapping], b_rows[overlapping], lo[overlapping], hi[overlapping]
    if len(a_rows) == 0:
        return out
    a_keeps = x31_wang_parity(rows.names.take(pa.array(a_rows)).to_pylist())
    pair_of = np.full(len(flag), -1, dtype=np.int64)
    pair_of[a_rows] = np.arange(len(a_rows))
    pair_of[b_rows] = np.arange(len(b_rows))
    is_a = np.zeros(len(flag), dtype=np.bool_)
    is_a[a_rows] = True
    # the aligned operations of those rows, cut to their pair's overlap, then their bases
    op_pair = pair_of[aligned.row]
    ops = np.flatnonzero(op_pair >= 0)
    pr = op_pair[ops]
    cut_start = np.maximum(aligned.ref_start[ops], lo[pr])
    cut_end = np.minimum(aligned.ref_start[ops] + aligned.length[ops], hi[pr])
    keep = cut_end > cut_start
    ops, pr, cut_start, cut_end = ops[keep], pr[keep], cut_start[keep], cut_end[keep]
    owner, k = _ranges(cut_end - cut_start)
    bpos = cut_start[owner] + k
    event = aligned.first[ops][owner] + bpos - aligned.ref_start[ops][owner]
    p = pr[owner]
    from_a = is_a[aligned.row[ops]][owner]
    # a dense (pair, offset in the overlap) table of a's aligned bases, looked up by b's
    width = int((hi - lo).max())
    table = np.full(len(a_rows) * width, -1, dtype=np.int64)
    table[p[from_a] * width + bpos[from_a] - lo[p[from_a]]] = event[from_a]
    match = table[p[~from_a] * width + bpos[~from_a] - lo[p[~from_a]]]
    ea, eb = match[match >= 0], event[~from_a][match >= 0]
    pa_ = p[~from_a][match >= 0]
    qa, qb = qbyte[ea].astype(np.int64) - 33, qbyte[eb].astype(np.int64) - 33
    keeps = a_keeps[pa_]
    # htslib compares the 4-bit codes of SEQ (a reverse row's bases complemented)
    same_base = _nt16(raw[ea], back[ea]) == _nt16(raw[eb], back[eb])
    summed = np.minimum(qa + qb, 200)
    a80, b80 = (0.8 * qa).astype(np.int64), (0.8 * qb).astype(np.int64)
    out[ea] = np.where(same_base, np.where(keeps, summed, 0),
                       np.where(qa > qb, a80, np.where(qa < qb, 0, np.where(keeps, a80, 0)))) >= min_quality
    out[eb] = np.where(same_base, np.where(keeps, 0, summed),
                       np.where(qa > qb, 0, np.where(qa < qb, b80, np.where(keeps, 0, b80)))) >= min_quality
    return out



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
    dels = at[op[at] == 2]
    if len(dels):  # deletions, the common indel, grouped with one sort
        ident = np.stack([anchor[op[at] == 2], oplen[dels], rev[op[at] == 2]], axis=1)
        uniq, n = np.unique(ident, axis=0, return_counts=True)
        for (k, length, r), c in zip(uniq.tolist(), n.tolist(), strict=True):
            indels.setdefault((k, length, ""), [0, 0])[r] += c
    data = reads.data
    for i, is_rev, k in zip(at.tolist(), rev.tolist(), anchor.tolist(), strict=True):
        if op[i] != 1:
            continue
        r, size, q = int(row[i]), int(oplen[i]), int(q_off[i])
        if is_rev:
            first = int(reads.seq_start[r] + reads.length[r] - q - size)
            bases = _COMP[data[first : first + size]][::-1].tobytes()
        else:
            first = int(reads.seq_start[r] + q)
            bases = data[first : first + size].tobytes()
        indels.setdefault((k, 0, bases.decode("latin-1").upper()), [0, 0])[int(is_rev)] += 1


def _sum_sorted(keys: I64, counts: npt.NDArray[np.int64]) -> tuple[I64, npt.NDArray[np.int64]]:
    """Rows with equal keys added up; keys sorted."""
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    if len(keys) == 0:
        return keys, counts
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return keys[first], np.add.reduceat(counts, first, axis=0)


class AlleleAccumulator:
    """A sample's allele counts over a child's batches, sparse: rows only where a read has a base or a
    deletion. Batches are added up lazily (once the pending rows outnumber the summed ones), so adding
    costs O(n log n) over the child whatever the genome's size."""

    def __init__(self, contigs: list[tuple[str, int]], min_quality: int) -> None:
        self.contigs = contigs
        lengths = np.array([n for _, n in contigs], dtype=np.int64)
        self.offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        self.min_quality = min_quality
        self.keys = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros((0, _NCOL), dtype=np.int64)
        self._pending: list[BatchCounts] = []
        self._pending_rows = 0
        self.indels: dict[tuple[int, int, str], list[int]] = {}

    def add(self, rows: AlignmentRows, reads: BatchReads) -> None:
        batch = count_batch(rows, reads, self.min_quality, self.offsets)
        self._pending.append(batch)
        self._pending_rows += len(batch.keys)
        for ident, (f, r) in batch.indels.items():
            counts = self.indels.setdefault(ident, [0, 0])
            counts[0] += f
            counts[1] += r
        if self._pending_rows > len(self.keys):
            self._compact()

    def _compact(self) -> None:
        if self._pending:
            self.keys, self.counts = _sum_sorted(
                np.concatenate([self.keys, *(b.keys for b in self._pending)]),
                np.concatenate([self.counts, *(b.counts for b in self._pending)]))
            self._pending, self._pending_rows = [], 0

    def _split(self, keys: I64) -> tuple[I64, I64]:
        """(contig index, 0-based position) of keys."""
        contig = np.searchsorted(self.offsets, keys, side="right") - 1
        return contig, keys - self.offsets[contig]

    def tables(self, sample: str) -> tuple[pa.Table, pa.Table]:
        """The ``alleles`` and ``indels`` staging rows, sorted by (contig, pos)."""
        self._compact()
        contig, pos = self._split(self.keys)
        names = [n for n, _ in self.contigs]
        cols: dict[str, pa.Array] = {
            "sample": dictionary_column(np.zeros(len(pos), dtype=np.int32), [sample]),
            "contig": dictionary_column(contig, names),
            "pos": pa.array(pos),
        }
        for k, column in enumerate(ALLELE_COUNT_COLUMNS):
            cols[column.name] = pa.array(self.counts[:, k], type=pa.int64()).cast(column.type)
        alleles = pa.table(cols, schema=ALLELES.schema)
        items = sorted(self.indels.items())
        icontig, ipos = self._split(np.array([k[0] for k, _ in items], dtype=np.int64))
        indels = pa.table({
            "sample": dictionary_column(np.zeros(len(items), dtype=np.int32), [sample]),
            "contig": dictionary_column(icontig, names),
            "pos": pa.array(ipos),
            "deleted": pa.array([k[1] for k, _ in items], pa.int32()),
            "inserted": pa.array([k[2] for k, _ in items], pa.string()),
            "fwd": pa.array([v[0] for _, v in items], pa.int32()),
            "rev": pa.array([v[1] for _, v in items], pa.int32()),
        }, schema=INDELS.schema)
        return alleles, indels


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


def batch_inputs(table: pa.Table, chunk: ChunkReads, contigs: list[tuple[str, int]]) -> tuple[
        AlignmentRows, BatchReads]:
    """A chunk's ``alignments`` rows and reads as :func:`count_batch` takes them: each row pointed at its
    read (by mate and read index)."""
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
        cigar=[c or "" for c in table.column("cigar").to_pylist()],
        pair=np.where((flag & 0x1) != 0, read_index, -1), mate_start=ints("mate_pos", 0) - 1,
        mate_contig=code("mate_contig"), tlen=ints("tlen", 0), names=table.column("read_name").combine_chunks())
    reads = BatchReads(chunk.data, pick[0][m, at], pick[1][m, at], pick[2][m, at])
    return rows, reads
