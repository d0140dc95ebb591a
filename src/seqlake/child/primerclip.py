"""Primer clipping before the allele counts (amplicon mode), as ``samtools ampliconclip --both-ends --strand``
(samtools 1.16.1 ``bam_ampliconclip.c``, soft clips, tolerance 5) does it.

Chosen over ``ivar trim -e`` because it only clips: ivar trim also quality-trims with a sliding window and
drops short reads, which seqlake's trimming step already does its own way.

For every mapped row that is not QC-failed (secondary and supplementary rows too): the left end is
matched against the ``+`` primers (a primer whose [start - 5, end] holds the row's first aligned
position clips ``end - pos`` reference bases from the left), then the right end, after that clip,
against the ``-`` primers (a primer whose [start, end + 5] holds the row's end clips ``end - start``
bases from the right); of several matching primers the largest clip wins. Clipping ``n`` reference bases
walks the CIGAR from that end: whole operations while their reference length fits in what is left
(query bases of the operations passed become soft clips), then the rest is taken from the operation
where it stops. The primer search scans the primers sorted by end from a bisection point and stops at
the first primer of the row's strand ending more than the longest primer + 5 beyond the position, as
samtools does (same results at the edges).

The row's read keeps its bases (soft clips): only its start and CIGAR change, and the ``alignments``
table keeps the unclipped alignment. Each row is also given the amplicon of the primer that clipped its
5' end (forward rows: the left clip; reverse rows: the right clip), or none.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.base import storage
from seqlake.lake.pileup import AlignmentRows, parse_cigars
from seqlake.lake.positions import dictionary_column
from seqlake.lake.tables import AMPLICON_READS
from seqlake.plan.primers import PrimerScheme, parse_primer_bed

I64 = npt.NDArray[np.int64]
#: samtools ampliconclip's default ``--tolerance``
TOLERANCE = 5
#: ampliconclip leaves these rows alone
_EXCLUDE = 0x4 | 0x200
_REF = frozenset("MDN=X")
_QUERY = frozenset("MIS=X")
#: rows x primers compared at once (bounds the matching's memory for large schemes)
_BLOCK = 1 << 22


@dataclass(frozen=True)
class _Sites:
    """One contig's primers sorted by end (samtools sorts by ``right``)."""

    left: I64
    right: I64
    reverse: npt.NDArray[np.bool_]
    amplicon: I64
    longest: int


class PrimerClipper:
    def __init__(self, scheme: PrimerScheme, contigs: list[tuple[str, int]]) -> None:
        names = [a.name for a in scheme.amplicons]
        self.amplicons = names
        index = {n: k for k, n in enumerate(names)}
        self.sites: dict[int, _Sites] = {}
        for c, (contig, _) in enumerate(contigs):
            ps = sorted((p for p in scheme.primers if p.contig == contig), key=lambda p: p.end)
            if ps:
                self.sites[c] = _Sites(np.array([p.start for p in ps]), np.array([p.end for p in ps]),
                                       np.array([p.reverse for p in ps]), np.array([index[p.amplicon] for p in ps]),
                                       max(p.end - p.start for p in ps))

    def clip(self, rows: AlignmentRows) -> tuple[AlignmentRows, I64, I64]:
        """The rows with primers soft-clipped, and per row the amplicon (index into :attr:`amplicons`, -1
        for none) whose primer clipped its left and its right end."""
        n = len(rows.flag)
        start = rows.start.copy()
        cigars = list(rows.cigar)
        left_amp = np.full(n, -1, dtype=np.int64)
        right_amp = np.full(n, -1, dtype=np.int64)
        todo = (rows.contig >= 0) & ((rows.flag & _EXCLUDE) == 0)
        for c, sites in self.sites.items():
            at = np.flatnonzero(todo & (rows.contig == c))
            if len(at) == 0:
                continue
            size, amp = _match(sites, start[at], reverse=False)
            left_amp[at] = amp
            for i, s in zip(at[size > 0].tolist(), size[size > 0].tolist(), strict=True):
                start[i], cigars[i] = _trim_left(start[i], cigars[i], s)
            ends = start[at] + _ref_lengths([cigars[i] for i in at.tolist()])
            size, amp = _match(sites, ends, reverse=True)
            right_amp[at] = amp
            for i, s in zip(at[size > 0].tolist(), size[size > 0].tolist(), strict=True):
                cigars[i] = _trim_right(cigars[i], s)
        return replace(rows, start=start, cigar=cigars), left_amp, right_amp


def _ref_lengths(cigars: list[str]) -> I64:
    """Reference bases of each CIGAR (bam_endpos - pos; at least 1, as htslib for no reference operation)."""
    row, op, length = parse_cigars(cigars)
    ref = np.bincount(row, weights=length * np.isin(op, (0, 2, 3, 7, 8)), minlength=len(cigars))
    return np.maximum(np.rint(ref).astype(np.int64), 1)


def _match(sites: _Sites, pos: I64, reverse: bool) -> tuple[I64, I64]:
    """``matching_clip_site`` for many positions: the clip size (0: no primer) and the clipping primer's
    amplicon (-1: none)."""
    n = len(sites.right)
    pos_tol = np.maximum(pos - TOLERANCE, 0) if reverse else pos
    lo, hi = np.zeros(len(pos), dtype=np.int64), np.full(len(pos), n, dtype=np.int64)
    mid = hi // 2
    while True:  # samtools' bisection, step for step, for every position at once
        busy = hi - lo > 1
        if not busy.any():
            break
        go_right = busy & (sites.right[np.minimum(mid, n - 1)] <= pos_tol)
        lo = np.where(go_right, mid, lo)
        hi = np.where(busy & ~go_right, mid, hi)
        mid = (lo + hi) // 2
    size = np.zeros(len(pos), dtype=np.int64)
    amp = np.full(len(pos), -1, dtype=np.int64)
    step = max(1, _BLOCK // max(n, 1))
    mod_left = sites.left if reverse else np.maximum(sites.left - TOLERANCE, 0)
    mod_right = sites.right + TOLERANCE if reverse else sites.right
    strand = sites.reverse == reverse
    i = np.arange(n)
    for b in range(0, len(pos), step):
        p = pos[b : b + step, None]
        valid = (i[None, :] >= lo[b : b + step, None]) & strand[None, :]
        stop = valid & (p + sites.longest + TOLERANCE < mod_right[None, :])
        first_stop = np.where(stop.any(axis=1), stop.argmax(axis=1), n)
        hit = valid & (i[None, :] < first_stop[:, None]) & (p >= mod_left[None, :]) & (p <= mod_right[None, :])
        clip = np.where(hit, (p - sites.left[None, :]) if reverse else (sites.right[None, :] - p), -1)
        best = clip.argmax(axis=1)
        size[b : b + step] = np.maximum(clip[np.arange(len(best)), best], 0)
        amp[b : b + step] = np.where(hit.any(axis=1), sites.amplicon[best], -1)
    return size, amp


def _ops(cigar: str) -> list[tuple[int, str]]:
    out, n = [], 0
    for ch in cigar:
        if ch.isdigit():
            n = n * 10 + ord(ch) - 48
        else:
            out.append((n, ch))
            n = 0
    return out


def _cigar(ops: list[tuple[int, str]]) -> str:
    return "".join(f"{n}{op}" for n, op in ops)


def _trim_front(ops: list[tuple[int, str]], bases: int) -> tuple[int, list[tuple[int, str]]]:
    """``bam_trim_left`` with soft clips on a CIGAR's operations: the reference bases the start moves by,
    and the new operations (``bam_trim_right`` is the same on the operations reversed)."""
    remove, query, hard, moved = bases, 0, 0, 0
    k = 0
    while k < len(ops):
        n, op = ops[k]
        if op == "H":
            hard += n
        else:
            if op in _REF:
                if n > remove:
                    break
                remove -= n
                moved += n
            if op in _QUERY:
                query += n
        k += 1
    out: list[tuple[int, str]] = [(hard, "H")] if hard else []
    if k < len(ops):
        n, op = ops[k]
        if op in _REF:
            moved += remove
        if op in _QUERY:
            query += remove
        if query:
            out.append((query, "S"))
        out.append((n - remove, op))
        out += ops[k + 1 :]
    else:
        query = sum(n for n, op in ops if op in _QUERY)
        if query:
            out.append((query, "S"))
    return moved, out


def _trim_left(pos: int, cigar: str, bases: int) -> tuple[int, str]:
    """``bam_trim_left`` with soft clips: the new start and CIGAR."""
    moved, ops = _trim_front(_ops(cigar), bases)
    return pos + moved, _cigar(ops)


def _trim_right(cigar: str, bases: int) -> str:
    """``bam_trim_right`` with soft clips: the new CIGAR (the start does not move)."""
    _, ops = _trim_front(_ops(cigar)[::-1], bases)
    return _cigar(ops[::-1])


class AmpliconCounts:
    """A child's primer clipper and, per sample, its primary alignments by the amplicon that clipped their 5'
    end, and per contig those no primer clipped (the ``amplicon_reads`` staging rows)."""

    def __init__(self, clipper: PrimerClipper, scheme: PrimerScheme, contigs: list[tuple[str, int]]) -> None:
        self.clipper = clipper
        self.contigs = contigs
        code = {name: k for k, (name, _) in enumerate(contigs)}
        by_name = {a.name: a for a in scheme.amplicons}
        #: each amplicon's contig code and anchor (where its rows go), in the clipper's order
        self.contig_of = np.array([code[by_name[n].contig] for n in clipper.amplicons], dtype=np.int64)
        self.anchor = np.array([by_name[n].anchor for n in clipper.amplicons], dtype=np.int64)
        #: per sample: bins 0..n-1 the amplicons, then one bin per contig (its alignments no primer clipped)
        self.reads: dict[str, I64] = {}
        self.misprimed: dict[str, I64] = {}

    @classmethod
    def of(cls, primer_bed: str | None, contigs: list[tuple[str, int]]) -> AmpliconCounts | None:
        """The run's primer scheme (checked when the run was planned), or None outside amplicon mode."""
        if primer_bed is None:
            return None
        scheme = parse_primer_bed(primer_bed, storage.read_bytes(primer_bed).decode(), dict(contigs))
        return cls(PrimerClipper(scheme, contigs), scheme, contigs)

    def clip(self, sample: str, rows: AlignmentRows) -> AlignmentRows:
        clipped, left, right = self.clipper.clip(rows)
        n = len(self.clipper.amplicons)
        bins = n + len(self.contigs)
        primary = (rows.contig >= 0) & ((rows.flag & (0x4 | 0x100 | 0x800)) == 0)
        five = np.where((rows.flag & 0x10) != 0, right, left)[primary]
        other = np.where((rows.flag & 0x10) != 0, left, right)[primary]
        misprimed = (five >= 0) & (other >= 0) & (other != five)
        where = np.where(five >= 0, five, n + rows.contig[primary])
        reads = np.bincount(where, minlength=bins)
        wrong = np.bincount(where[misprimed], minlength=bins)
        self.reads[sample] = self.reads.get(sample, 0) + reads
        self.misprimed[sample] = self.misprimed.get(sample, 0) + wrong
        return clipped

    def clipped_alignments(self, table: pa.Table) -> pa.Table:
        """An ``alignments`` batch with its primers soft-clipped (``pos``, ``end_pos``, ``cigar``; nothing else
        read or changed): what the depth and coverage of amplicon mode count, as viralrecon measures them
        after primer trimming (``samtools depth -a`` over ``samtools ampliconclip --both-ends --strand``). A
        row clipped whole keeps no reference base (its span is empty)."""
        import pyarrow.compute as pc  # here, not at the top: as in seqlake.lake.pileup

        names = pa.array([n for n, _ in self.contigs], pa.string())
        n = table.num_rows
        contig = np.asarray(pc.index_in(table.column("contig").cast(pa.string()), value_set=names).fill_null(-1),
                            dtype=np.int64)
        start = np.asarray(table.column("pos").fill_null(1), dtype=np.int64) - 1
        zeros = np.zeros(n, dtype=np.int64)
        rows = AlignmentRows(contig, start, np.asarray(table.column("flag").fill_null(0), dtype=np.int64),
                             [c or "" for c in table.column("cigar").to_pylist()], zeros - 1, zeros - 1, zeros - 1,
                             zeros, pa.nulls(n, pa.string()))
        clipped, _, _ = self.clipper.clip(rows)
        mapped = contig >= 0
        ends = clipped.start + np.where(mapped, _ref_lengths(clipped.cigar), 0)
        # an alignment clipped whole: its CIGAR has no reference operation left (htslib's end would be pos + 1)
        empty = np.array([not any(op in c for op in "MDN=X") for c in clipped.cigar], dtype=np.bool_)
        ends = np.where(empty, clipped.start, ends)
        pos = pa.array(np.where(mapped, clipped.start + 1, 0), pa.int64()).cast(table.schema.field("pos").type)
        end = pa.array(ends, pa.int64()).cast(table.schema.field("end_pos").type)
        valid = pc.is_valid(table.column("contig"))
        cols = {"pos": pc.if_else(valid, pos, table.column("pos")),
                "end_pos": pc.if_else(valid, end, table.column("end_pos")),
                "cigar": pc.if_else(valid, pa.array(clipped.cigar, pa.string()), table.column("cigar"))}
        for name, col in cols.items():
            table = table.set_column(table.schema.get_field_index(name), name, col)
        return table

    def table(self, sample: str) -> pa.Table:
        """The sample's rows, sorted by (contig, pos, amplicon) as every staging table is."""
        n = len(self.clipper.amplicons)
        names = np.array([*self.clipper.amplicons, *([""] * len(self.contigs))], dtype=object)
        contig = np.concatenate([self.contig_of, np.arange(len(self.contigs), dtype=np.int64)])
        pos = np.concatenate([self.anchor, np.zeros(len(self.contigs), dtype=np.int64)])
        bins = n + len(self.contigs)
        reads = self.reads.get(sample, np.zeros(bins, dtype=np.int64))
        wrong = self.misprimed.get(sample, np.zeros(bins, dtype=np.int64))
        keep = np.flatnonzero(reads > 0)
        keep = keep[np.lexsort((names[keep].astype(str), pos[keep], contig[keep]))]
        return pa.table({"sample": dictionary_column(np.zeros(len(keep), dtype=np.int32), [sample]),
                         "contig": dictionary_column(contig[keep], [c for c, _ in self.contigs]),
                         "pos": pos[keep], "amplicon": pa.array(names[keep].tolist(), pa.string()),
                         "reads": reads[keep], "misprimed_reads": wrong[keep]}, schema=AMPLICON_READS.schema)
