"""Variants and consensus of one region's merged allele counts, as ivar 1.3.1 calls them.

Pure functions over one sample's counts in one region (the ``alleles`` and ``indels`` staging rows of
:mod:`seqlake.lake.pileup`, added up over every child): :func:`call_variants` follows ivar
``call_variants_from_plup`` over ``samtools mpileup -A -x -B -d 0 -Q 0`` (overlapping mates both
counted), :func:`consensus_segment` ivar ``call_consensus_from_plup`` over ``samtools mpileup -aa -A -B
-d 0 -Q 0`` (overlapping mates' qualities adjusted by htslib's rule). The rules, from ivar's
``allele_functions.cpp``, ``call_variants.cpp`` and ``call_consensus_pileup.cpp`` at v1.3.1:

Variants, at each position with counts:
- the SNV depth is the A/C/G/T/N entries at quality >= ``min_base_quality`` (no deletions, no indels);
  a position below ``min_depth`` is skipped (ivar keeps ``-m`` in 8 bits: values above 255 wrap, and so
  does this); a position without any kept entry is skipped.
- every base other than the reference base (N included) with frequency count / SNV depth >= the
  reporting frequency is a row; every indel anchored here (counted whatever its quality, always as forward
  strand: ivar upper-cases the indel before testing its strand) with count / mpileup depth (every entry,
  deletions included) >= the reporting frequency is a row, ``depth`` being that mpileup depth.
- ivar's PASS: the left tail of Fisher's exact test (htslib ``kt_fisher_exact``) of
  (err x mpileup depth, (1 - err) x mpileup depth, alt count, ref count), err = 10^-(floor(mean alt quality / 10)),
  truncated to integers as ivar passes them, <= 0.01. Indels' mean quality is ``min_base_quality``.
- ivar's REF_QUAL / ALT_QUAL are running means in single precision truncated to an integer; here they are
  exact means truncated (the two can differ by one where a float running mean lands just below an
  integer).

Consensus, at every position of the region (positions below ``min_depth`` in the mpileup depth are N):
- the single-base alleles are A/C/G/T/N and deletions (``*``) at quality >= ``min_base_quality`` after
  the overlapping-mates rule; taken by count, largest first, until they reach ``threshold`` x their total,
  then every allele with the same count as the last one taken; several are merged into an IUPAC code
  (with ``*`` or N: N); ``*`` alone deletes the base; below the threshold, N.
- insertions anchored here: the bases of each inserted position taken the same way among the insertions
  reaching it (ivar walks them in descending text order, merging neighbours with the same base there),
  against ``threshold`` x (the single-base total minus the reads ending here); the base is inserted when
  its count is at least the count of reads without an inserted base there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from seqlake.base.params import Params
from seqlake.plan.primers import Amplicon

I64 = npt.NDArray[np.int64]

_BASES = "ACGTN"
#: ivar's significance level for PASS (``call_variants.cpp``)
SIG_LEVEL = 0.01


@dataclass(frozen=True)
class CallParams:
    """The thresholds of variant calling and consensus (nf-core/viralrecon's ivar settings)."""

    min_depth: int = 10
    min_base_quality: int = 20
    #: frequency a variant needs to PASS (``ivar variants -t``)
    call_freq: float = 0.25
    #: frequency an allele needs to be a row at all, with its filters
    report_freq: float = 0.03
    consensus_freq: float = 0.75
    consensus_min_depth: int = 10

    @classmethod
    def of(cls, params: Params) -> CallParams:
        return cls(params.variant_min_depth, params.min_base_quality, params.variant_freq,
                   params.variant_report_freq, params.consensus_freq, params.consensus_min_depth)


@dataclass(frozen=True)
class Indel:
    """Reads supporting one indel allele anchored on 0-based position ``pos``."""

    pos: int
    deleted: int
    inserted: str
    fwd: int
    rev: int


# ---------------------------------------------------------------------------- Fisher's exact test
def _lbinom(n: int, k: int) -> float:
    if k in {0, n}:
        return 0.0
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _hypergeo(n11: int, n1_: int, n_1: int, n: int) -> float:
    return math.exp(_lbinom(n1_, n11) + _lbinom(n - n1_, n_1 - n11) - _lbinom(n, n_1))


class _HypergeoAcc:
    """htslib ``hypergeo_acc``: consecutive table probabilities updated incrementally (the same floating
    point steps, so the same tails)."""

    def __init__(self) -> None:
        self.n11 = self.n1_ = self.n_1 = self.n = 0
        self.p = 0.0

    def __call__(self, n11: int, n1_: int, n_1: int, n: int) -> float:
        if n1_ or n_1 or n:
            self.n11, self.n1_, self.n_1, self.n = n11, n1_, n_1, n
        else:
            if n11 % 11 and n11 + self.n - self.n1_ - self.n_1:
                if n11 == self.n11 + 1:
                    self.p *= float(self.n1_ - self.n11) / n11 * (self.n_1 - self.n11) / (
                        n11 + self.n - self.n1_ - self.n_1)
                    self.n11 = n11
                    return self.p
                if n11 == self.n11 - 1:
                    self.p *= float(self.n11) / (self.n1_ - n11) * (self.n11 + self.n - self.n1_ - self.n_1) / (
                        self.n_1 - n11)
                    self.n11 = n11
                    return self.p
            self.n11 = n11
        self.p = _hypergeo(self.n11, self.n1_, self.n_1, self.n)
        return self.p


def fisher_left(n11: int, n12: int, n21: int, n22: int) -> float:
    """The left tail of htslib 1.16 ``kt_fisher_exact`` (``kfunc.c``), step for step."""
    n1_, n_1, n = n11 + n12, n11 + n21, n11 + n12 + n21 + n22
    hi = min(n_1, n1_)
    lo = max(n1_ + n_1 - n, 0)
    if lo == hi:
        return 1.0
    aux = _HypergeoAcc()
    q = aux(n11, n1_, n_1, n)
    if q == 0.0:
        return 0.0 if n11 * (n + 2) < (n_1 + 1) * (n1_ + 1) else 1.0
    p = aux(lo, 0, 0, 0)
    left, i = 0.0, lo + 1
    while p < 0.99999999 * q and i <= hi:
        left += p
        p = aux(i, 0, 0, 0)
        i += 1
    i -= 1
    if p < 1.00000001 * q:
        left += p
    else:
        i -= 1
    p = aux(hi, 0, 0, 0)
    right, j = 0.0, hi - 1
    while p < 0.99999999 * q and j >= 0:
        right += p
        p = aux(j, 0, 0, 0)
        j -= 1
    j += 1
    if p < 1.00000001 * q:
        right += p
    else:
        j += 1
    if abs(i - n11) < abs(j - n11):
        return left
    return 1.0 - right + q


def ivar_pvalue(alt_count: int, ref_count: int, depth: int, mean_alt_quality: int) -> float:
    """ivar's PVAL: err = 10^(-(q / 10)) with C integer division; the table's doubles truncated to int."""
    err = 10.0 ** (-(mean_alt_quality // 10))
    return fisher_left(int(err * depth), int((1 - err) * depth), alt_count, ref_count)


# ---------------------------------------------------------------------------- variants
def _col(counts: Mapping[str, Any], name: str) -> I64:
    return np.asarray(counts[name], dtype=np.int64)


def call_variants(counts: Mapping[str, Any], indels: Sequence[Indel], reference: bytes, ref_start: int,
                  params: CallParams) -> dict[str, list[Any]]:
    """Variant rows of one sample in one region (see the module docstring). ``counts`` holds the
    ``alleles`` columns of the region's positions (``pos`` 0-based, sorted); ``reference`` is the region's
    sequence starting at 0-based ``ref_start``. Rows: 1-based ``pos``, VCF-style ``ref`` / ``alt``."""
    pos = _col(counts, "pos")
    fwd = np.stack([_col(counts, f"{b}_fwd") for b in "acgtn"], axis=1)
    rev = np.stack([_col(counts, f"{b}_rev") for b in "acgtn"], axis=1)
    qual = np.stack([_col(counts, f"{b}_qual") for b in "acgtn"], axis=1)
    hq = fwd + rev
    pdepth = hq.sum(axis=1)
    mdepth = np.sum([_col(counts, f"{b}_all") for b in ("a", "c", "g", "t", "n", "del")], axis=0)
    kept_any = pdepth + _col(counts, "del_fwd") + _col(counts, "del_rev")
    min_depth = params.min_depth & 0xFF  # ivar's uint8_t -m
    ref_base = np.frombuffer(reference, dtype=np.uint8)[pos - ref_start]
    ref_code = np.full(len(pos), -1, dtype=np.int64)
    for k, b in enumerate(_BASES):
        ref_code[ref_base == ord(b)] = k
    by_pos: dict[int, list[Indel]] = {}
    for ind in indels:
        by_pos.setdefault(ind.pos, []).append(ind)
    rows: dict[str, list[Any]] = {c: [] for c in VARIANT_COLUMNS}
    eligible = pdepth >= min_depth
    ok = np.flatnonzero(eligible & ((kept_any > 0) | np.isin(pos, list(by_pos))))
    for i in ok.tolist():
        p = int(pos[i])
        rc = int(ref_code[i])
        ref_dp = int(hq[i, rc]) if rc >= 0 else 0
        site = _Site(rows, params, p, chr(ref_base[i]), ref_dp, int(rev[i, rc]) if rc >= 0 else 0,
                     int(qual[i, rc]) // ref_dp if ref_dp else 0, int(mdepth[i]))
        depth = int(pdepth[i])
        for k, b in enumerate(_BASES):
            n = int(hq[i, k])
            if k != rc and n and n / depth >= params.report_freq:
                site.row(b, "snv", depth=depth, n=n, n_rev=int(rev[i, k]), alt_qual=int(qual[i, k]) // n)
        for ind in sorted(by_pos.get(p, ()), key=lambda x: (x.deleted, x.inserted)):
            n = ind.fwd + ind.rev
            if site.mpileup_depth == 0 or n / site.mpileup_depth < params.report_freq:
                continue
            if ind.deleted:  # VCF style: the anchor base and the deleted bases become the reference allele
                site.row(reference[p - ref_start : p - ref_start + 1 + ind.deleted].decode(), "del",
                         depth=site.mpileup_depth, n=n, n_rev=0, alt_qual=params.min_base_quality)
            else:
                site.row(site.ref + ind.inserted, "ins", depth=site.mpileup_depth, n=n, n_rev=0,
                         alt_qual=params.min_base_quality)
    return rows


VARIANT_COLUMNS = ("pos", "ref", "alt", "type", "depth", "ref_count", "ref_rev", "ref_qual", "alt_count",
                   "alt_fwd", "alt_rev", "alt_qual", "alt_fraction", "pval", "filters", "pass")


@dataclass(frozen=True)
class _Site:
    """What every variant row at one position shares, and the rows being written."""

    rows: dict[str, list[Any]]
    params: CallParams
    pos: int
    ref: str
    ref_count: int
    ref_rev: int
    ref_qual: int
    mpileup_depth: int

    def row(self, allele: str, kind: str, *, depth: int, n: int, n_rev: int, alt_qual: int) -> None:
        """One allele's row; ``allele`` is the alternate allele, or for a deletion the reference allele."""
        ref, alt = (allele, self.ref) if kind == "del" else (self.ref, allele)
        freq = n / depth
        pval = ivar_pvalue(n, self.ref_count, self.mpileup_depth, alt_qual)
        filters = [f for f, failed in (("ft", freq < self.params.call_freq), ("pv", pval > SIG_LEVEL)) if failed]
        values = (self.pos + 1, ref, alt, kind, depth, self.ref_count, self.ref_rev, self.ref_qual, n, n - n_rev,
                  n_rev, alt_qual, freq, pval, ";".join(filters) or "PASS", not filters)
        for c, v in zip(VARIANT_COLUMNS, values, strict=True):
            self.rows[c].append(v)


# ---------------------------------------------------------------------------- consensus
#: IUPAC code of a set of bases (bit 1 A, 2 C, 4 G, 8 T), as ivar's ``gt2iupac`` merges them pairwise
_IUPAC = ".ACMGRSVTWYHKDBN"


def _merge(sorted_desc: list[tuple[int, str]], threshold: float) -> tuple[str, int]:
    """ivar's merge of alleles sorted by count (largest first): the code and the count taken."""
    taken, last = 0, -1
    bits, star, n_base = 0, False, False
    for depth, nuc in sorted_desc:
        if taken and not (taken < threshold or depth == last):
            break
        taken += depth
        last = depth
        if nuc == "*":
            star = True
        elif nuc in "ACGT":
            bits |= 1 << "ACGT".index(nuc)
        else:
            n_base = True
    kinds = int(star) + int(n_base) + bin(bits).count("1")
    code = "*" if star and kinds == 1 else "N" if star or n_base else _IUPAC[bits]
    return ("N" if taken < threshold else code), taken


def _insertion(ins: list[tuple[str, int]], total_indel_depth: int, threshold: float) -> str:
    """The inserted bases ivar appends after a position (``get_consensus_allele``, i >= 1)."""
    alleles = sorted(ins, reverse=True)  # ivar sorts alleles in descending text order ("+" prefix dropped)
    out = []
    for i in range(max(len(s) for s, _ in alleles)):
        nuc_pos: list[tuple[int, str]] = []
        cur_depth = 0
        k = 0
        while k < len(alleles):
            seq, depth = alleles[k]
            if i >= len(seq):
                k += 1
                continue
            tmp = depth
            while k + 1 < len(alleles) and i < len(alleles[k + 1][0]) and alleles[k + 1][0][i] == seq[i]:
                tmp += alleles[k + 1][1]
                k += 1
            cur_depth += tmp
            nuc_pos.append((tmp, seq[i]))
            k += 1
        nuc_pos.sort(key=lambda x: -x[0])
        n, taken = _merge(nuc_pos, threshold * total_indel_depth)
        gap = max(total_indel_depth - cur_depth, 0)
        if taken >= gap:
            out.append(n)
    return "".join(out)


@dataclass(frozen=True)
class _Codes:
    """The consensus base of each counted position: ``code`` (ASCII; ``*`` = deleted), ``called`` (depth
    reached), the single-base total minus read ends (insertions' denominator)."""

    pos: I64
    code: npt.NDArray[np.uint8]
    called: npt.NDArray[np.bool_]
    #: the single-base alleles' total, and that minus the reads ending here (insertions' denominator)
    total: I64
    indel_depth: I64


def _position_codes(counts: Mapping[str, Any], deletion_anchors: set[int], insertion_anchors: set[int],
                    params: CallParams) -> _Codes:
    pos = _col(counts, "pos")
    olap = np.stack([_col(counts, f"{b}_olap") for b in ("a", "c", "g", "t", "n", "del")], axis=1)
    mdepth = sum(_col(counts, f"{b}_all") for b in ("a", "c", "g", "t", "n", "del"))
    total = olap.sum(axis=1)
    thr = params.consensus_freq * total
    ranked = -np.sort(-olap, axis=1)
    cum = np.cumsum(ranked, axis=1)
    reach = np.argmax(cum >= thr[:, None], axis=1)
    last = ranked[np.arange(len(pos)), reach]
    taken = (olap >= last[:, None]) & (olap > 0)
    bits = (taken[:, :4] * np.array([1, 2, 4, 8])).sum(axis=1)
    star, nbase, kinds = taken[:, 5], taken[:, 4], taken.sum(axis=1)
    iupac = np.frombuffer(_IUPAC.encode(), dtype=np.uint8)[bits]
    code = np.where(star & (kinds == 1), ord("*"), np.where(star | nbase, ord("N"), iupac))
    code = np.where((total > 0) & (cum[:, -1] >= thr), code, ord("N")).astype(np.uint8)
    # no single-base allele, only deletions anchored here: ivar writes nothing for the position
    only_del = (total == 0) & np.isin(pos, list(deletion_anchors)) & ~np.isin(pos, list(insertion_anchors))
    code[only_del] = ord("*")
    called = np.asarray(mdepth >= (params.consensus_min_depth & 0xFF), dtype=np.bool_)
    code[~called] = ord("N")
    return _Codes(pos, code, called, total, total - _col(counts, "read_ends_olap"))


def consensus_segment(counts: Mapping[str, Any], indels: Sequence[Indel], start: int, stop: int,
                      params: CallParams) -> str:
    """The consensus of 0-based positions ``start``..``stop`` (exclusive) of one sample's contig (see the
    module docstring): positions without counts or below the minimum depth are N."""
    pos = _col(counts, "pos")
    inside = (pos >= start) & (pos < stop)
    counts = {k: np.asarray(v)[inside] for k, v in counts.items()}
    insertions: dict[int, list[tuple[str, int]]] = {}
    for i in indels:
        if not i.deleted and start <= i.pos < stop:
            insertions.setdefault(i.pos, []).append((i.inserted, i.fwd + i.rev))
    c = _position_codes(counts, {i.pos for i in indels if i.deleted}, set(insertions), params)
    out = np.full(stop - start, ord("N"), dtype=np.uint8)
    out[c.pos - start] = c.code
    text = out.tobytes().decode("ascii")
    pieces, prev = [], 0
    denominators = dict(zip(c.pos.tolist(), c.indel_depth.tolist(), strict=True))
    # an insertion needs a called position with single-base alleles (without any, ivar reads past the end
    # of an empty vector: undefined; here the position is N and nothing is inserted)
    called = set(c.pos[c.called & (c.total > 0)].tolist())
    for p in sorted(insertions):
        if p not in called:
            continue
        pieces.append(text[prev : p - start + 1])
        pieces.append(_insertion(insertions[p], denominators[p], params.consensus_freq))
        prev = p - start + 1
    pieces.append(text[prev:])
    return "".join(pieces).replace("*", "")


def called_positions(counts: Mapping[str, Any], indels: Sequence[Indel], params: CallParams) -> int:
    """Reference positions whose consensus is a base other than N (a deleted base counts as called)."""
    c = _position_codes(counts, {i.pos for i in indels if i.deleted}, {i.pos for i in indels if not i.deleted},
                        params)
    return int(np.count_nonzero(c.code != ord("N")))


# ---------------------------------------------------------------------------- amplicon depth
#: the ``amplicon_depth`` columns
AMPLICON_COLUMNS = ("sample", "amplicon", "contig", "pool", "pos", "end_pos", "reads", "misprimed_reads",
                    "mean_pileup_depth", "min_pileup_depth", "dropout")
#: an amplicon below this mean depth over its insert has dropped out (nf-core/viralrecon's amplicon heatmap and
#: ncov-tools read 20x as covered), as has one with no read of its own whatever its neighbours' overlaps give
DROPOUT_DEPTH = 20


@dataclass
class AmpliconPart:
    """One region's part of an amplicon's row: its reads (counted in the region holding its anchor) and the
    mpileup depth over the insert's bases inside the region. Parts add up (:meth:`add`)."""

    name: str
    reads: int = 0
    misprimed: int = 0
    depth_sum: int = 0
    #: insert bases with a count, and the lowest depth over them (None: none)
    covered: int = 0
    min_depth: int | None = None

    def add(self, other: AmpliconPart) -> None:
        self.reads += other.reads
        self.misprimed += other.misprimed
        self.depth_sum += other.depth_sum
        self.covered += other.covered
        if other.min_depth is not None:
            self.min_depth = other.min_depth if self.min_depth is None else min(self.min_depth, other.min_depth)

    def to_json(self) -> list[Any]:
        return [self.name, self.reads, self.misprimed, self.depth_sum, self.covered, self.min_depth]

    @classmethod
    def from_json(cls, v: Sequence[Any]) -> AmpliconPart:
        return cls(str(v[0]), int(v[1]), int(v[2]), int(v[3]), int(v[4]), None if v[5] is None else int(v[5]))


def amplicon_part(a: Amplicon, pos: I64, depth: I64, start: int, end: int) -> AmpliconPart:
    """The depth part of amplicon ``a`` over bases ``[start, end)`` of its contig, from the positions with
    counts there (``pos`` sorted, ``depth`` their mpileup depth)."""
    lo, hi = max(a.insert_start, start), min(a.insert_end, end)
    inside = (pos >= lo) & (pos < hi)
    d = depth[inside]
    return AmpliconPart(a.name, 0, 0, int(d.sum()), int(inside.sum()), int(d.min()) if len(d) else None)


def amplicon_row(cols: dict[str, list[Any]], sample: str, a: Amplicon | None, part: AmpliconPart) -> None:
    """Append an ``amplicon_depth`` row: an amplicon's whole parts, or (``a`` None) the reads outside any."""
    if a is None:
        values: tuple[Any, ...] = (sample, None, None, None, None, None, part.reads, 0, None, None, None)
    else:
        width = max(a.insert_end - a.insert_start, 1)
        mean = float(part.depth_sum) / width
        values = (sample, a.name, a.contig, a.pool, a.insert_start + 1, a.insert_end, part.reads, part.misprimed,
                  mean, part.min_depth if part.covered == width and part.min_depth is not None else 0,
                  part.reads == 0 or mean < DROPOUT_DEPTH)
    for c, v in zip(AMPLICON_COLUMNS, values, strict=True):
        cols[c].append(v)


# ---------------------------------------------------------------------------- consensus pieces
#: what a region adds to a sample's ``consensus`` row of one contig, in this order: the consensus's numbers,
#: then the variants' QC signals (seqlake.lake.verdict.genome_signals)
CONSENSUS_SUMS = ("length", "n_bases", "ambiguous_bases", "called", "frameshift_indels", "mixed_alleles")


def consensus_sums(segment: str, called: int, signals: Sequence[int] = (0, 0)) -> list[int]:
    """A consensus segment's numbers and its variants' QC signals (:data:`CONSENSUS_SUMS`)."""
    return [len(segment), segment.count("N"), sum(segment.count(b) for b in "RYSWKMBDHV"), called, *signals]


def fasta_header(sample: str, contig: str, params: CallParams, multi_contig: bool = False) -> str:
    """The header line of a sample's consensus of one contig: named by the sample (ivar's consensus is one
    record), or with several contigs by ``sample|contig`` (record names must be unique for ``samtools faidx``
    and every FASTA index; ``|`` as GISAID and nextclade name segments)."""
    name = f"{sample}|{contig}" if multi_contig else sample
    return (f">{name} {contig} ivar-consensus t={params.consensus_freq} m={params.consensus_min_depth} "
            f"q={params.min_base_quality}\n")


def consensus_row(cols: dict[str, list[Any]], sample: str, contig: tuple[str, int], sums: Sequence[int], *,
                  params: CallParams, fasta_uri: str) -> None:
    """Append a ``consensus`` row from the regions' sums of one contig (:data:`CONSENSUS_SUMS`)."""
    (name, contig_length), (length, n, ambiguous, called, frameshifts, mixed) = contig, sums
    for c, v in (("sample", sample), ("contig", name), ("length", length), ("n_bases", n),
                 ("ambiguous_bases", ambiguous), ("frameshift_indels", frameshifts), ("mixed_alleles", mixed),
                 ("pct_called", 100.0 * called / contig_length if contig_length else 0.0),
                 ("min_fraction", params.consensus_freq), ("min_depth", params.consensus_min_depth),
                 ("min_base_quality", params.min_base_quality), ("fasta_uri", fasta_uri)):
        cols[c].append(v)
