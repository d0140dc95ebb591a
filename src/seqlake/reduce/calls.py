"""One sample's variants, consensus and amplicon depth in one region, from the region's merged allele counts.

The reducer of a region (:mod:`seqlake.reduce.reducer`) calls :func:`call_region` for each sample with the
sample's ``alleles``, ``indels`` and ``amplicon_reads`` rows of the region added up over every child.
Everything :mod:`seqlake.lake.alleles` computes is a function of one position's counts (and, for a
deletion's reference allele, the bases after it), so a genome cut into regions gives the rows, bases and
records of the same genome in one region (``tests/core/test_reduce.py``). What a region yields:

- its ``variants`` rows and its ``amplicon_depth`` rows of the amplicons whose insert lies inside it;
- its parts of what only the whole genome knows: per contig the consensus's length, N, IUPAC codes and
  called positions (the commit adds them into the ``consensus`` row), the parts of the amplicons whose
  insert crosses a window's edge (the commit adds them into one row: an amplicon is counted where its reads
  are, in the region holding its insert's first base, its depth wherever its bases are), the reads outside
  every amplicon;
- its pieces of the per-sample files: the consensus FASTA's bytes (a contig's header where the contig
  starts, its newline where it ends) and the VCF's records (plain text: the reducer compresses a sample's
  records of its whole region, window after window, into BGZF blocks and their tabix entries,
  :class:`seqlake.reduce.reducer.GenomePieces`). The commit joins the pieces in region order.

A reducer calls it on each window of its region (a :class:`Region` of the window's pieces): everything is a
function of one position's counts, so the windows' rows, bases and records, laid end to end, are the
region's.

The reference's bases are read per piece of the region and only there (:class:`RegionReference`: one
ranged read through the FASTA index stored with the reference's index), extended past the piece's end by
the longest deletion anchored in it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.lake.alleles import (
    AMPLICON_COLUMNS,
    VARIANT_COLUMNS,
    AmpliconPart,
    CallParams,
    Indel,
    amplicon_part,
    amplicon_row,
    call_variants,
    called_positions,
    consensus_segment,
    consensus_sums,
    fasta_header,
)
from seqlake.lake.annotate import ANNOTATION_COLUMNS, CdsIndex, annotate
from seqlake.lake.parquet_io import to_arrow
from seqlake.lake.positions import contig_codes
from seqlake.lake.regions import Piece, Region
from seqlake.lake.tables import ALLELE_BASES
from seqlake.lake.vcf import vcf_records
from seqlake.lake.verdict import VerdictParams, genome_signals
from seqlake.plan.primers import Amplicon
from seqlake.plan.reference import FastaIndex, read_bases

I64 = npt.NDArray[np.int64]
#: the mpileup depth's columns (every entry at any quality, deletions included)
_DEPTH_COLUMNS = tuple(f"{b}_all" for b in (*ALLELE_BASES, "del"))


@dataclass
class RegionReference:
    """The reference bases of a region's pieces, each read once (longer when a later sample needs more)."""

    index: FastaIndex
    #: piece -> its bases from the piece's start
    read: dict[Piece, bytes] = field(default_factory=dict)

    def bases(self, piece: Piece, stop: int) -> bytes:
        """Bases ``[piece.start, stop)`` of the piece's contig (clipped to the contig)."""
        stop = min(stop, piece.contig_length)
        have = self.read.get(piece, b"")
        if piece.start + len(have) < stop:
            have = self.read[piece] = read_bases(self.index, piece.contig, piece.start, stop)
        return have

    def span(self, piece: Piece, start: int, stop: int) -> bytes:
        """Bases ``[start, stop)`` of the piece's contig: from the piece's bases when they start at or after
        the piece, else one read of their own (a codon straddling the piece's start: a few a window)."""
        if start >= piece.start:
            return self.bases(piece, stop)[start - piece.start : stop - piece.start]
        return read_bases(self.index, piece.contig, start, stop)


@dataclass
class RegionCalls:
    """What one sample's counts in one region give (the module docstring)."""

    variants: pa.Table
    amplicon_depth: pa.Table
    #: contig -> :data:`seqlake.lake.alleles.CONSENSUS_SUMS`
    consensus: dict[str, list[int]]
    amplicon_edges: list[AmpliconPart]
    outside_reads: int
    fasta: bytes
    #: the VCF's records (no header), plain
    records: bytes


def rows_by_piece(table: pa.Table, pieces: int) -> list[pa.Table]:
    """The rows of each of the region's ``pieces`` (the ``k``-th piece's: its contig's code ``k`` in the
    region), in their order within the piece. The codes are read once and the rows cut by slices (taken
    in code order first, should they not be in it): a region of 3,342 decoy contigs read its whole table
    once per piece, 30 minutes of its reducer at 0.05x."""
    if table.num_rows == 0:
        return [table] * pieces
    codes = contig_codes(table)
    if np.any(codes[1:] < codes[:-1]):
        order = np.argsort(codes, kind="stable")
        table, codes = table.take(pa.array(order)), codes[order]
    starts = np.searchsorted(codes, np.arange(pieces + 1))
    return [table.slice(int(a), int(b - a)) for a, b in itertools.pairwise(starts)]


def _indels(rows: pa.Table) -> list[Indel]:
    if rows.num_rows == 0:
        return []
    cols = [rows.column(c).to_pylist() for c in ("pos", "deleted", "inserted", "fwd", "rev")]
    return [Indel(*values) for values in zip(*cols, strict=True)]


def call_region(sample: str, region: Region, merged: Mapping[str, pa.Table], reference: RegionReference, *,
                params: CallParams, amplicons: Sequence[Amplicon] | None, cds: CdsIndex | None = None,
                verdict: VerdictParams | None = None, multi_contig: bool = False) -> RegionCalls:
    """One sample's calls in one region (see the module docstring); with ``cds`` (the run's GFF) each variant
    is annotated (:mod:`seqlake.lake.annotate`); ``multi_contig``: the reference has several contigs (each
    FASTA record is then named by the sample and its contig)."""
    verdict = verdict or VerdictParams()
    variants: dict[str, list[Any]] = {"sample": [], "contig": [], **{c: [] for c in VARIANT_COLUMNS},
                                      **{c: [] for c in ANNOTATION_COLUMNS}}
    amplicon_cols: dict[str, list[Any]] = {c: [] for c in AMPLICON_COLUMNS}
    consensus: dict[str, list[int]] = {}
    edges: list[AmpliconPart] = []
    outside = 0
    fasta: list[str] = []
    pieces = len(region.pieces)
    alleles, indel_rows = rows_by_piece(merged["alleles"], pieces), rows_by_piece(merged["indels"], pieces)
    reads = rows_by_piece(merged["amplicon_reads"], pieces) if amplicons is not None else []
    for k, piece in enumerate(region.pieces):
        rows = alleles[k]
        counts = {c: rows.column(c).to_numpy() for c in rows.column_names if c not in ("sample", "contig")}
        indels = _indels(indel_rows[k])
        stop = max([piece.end, *(i.pos + 1 + i.deleted for i in indels)])
        found = call_variants(counts, indels, reference.bases(piece, stop), piece.start, params)
        n = len(found["pos"])
        first = len(variants["pos"])
        variants["sample"] += [sample] * n
        variants["contig"] += [piece.contig] * n
        for c in VARIANT_COLUMNS:
            variants[c] += found[c]
        if cds is not None:
            annotate(variants, first, piece.contig, cds,
                     lambda lo, hi, piece=piece: reference.span(piece, lo, hi))  # type: ignore[misc]
        else:
            for c in ANNOTATION_COLUMNS:
                variants[c] += [None] * n
        segment = consensus_segment(counts, indels, piece.start, piece.end, params)
        consensus[piece.contig] = consensus_sums(segment, called_positions(counts, indels, params),
                                                 genome_signals(variants, first, cds is not None, verdict))
        fasta += [fasta_header(sample, piece.contig, params, multi_contig) if piece.start == 0 else "", segment,
                  "\n" if piece.end == piece.contig_length else ""]
        if amplicons is not None:
            outside += _amplicons(sample, piece, rows, reads[k],
                                  amplicons=amplicons, cols=amplicon_cols, edges=edges)
    table = to_arrow("variants", variants)
    records = vcf_records([(p.contig, p.contig_length) for p in region.pieces], variants)
    return RegionCalls(table, to_arrow("amplicon_depth", amplicon_cols), consensus, edges, outside,
                       "".join(fasta).encode(), records.encode())


def _amplicons(sample: str, piece: Piece, alleles: pa.Table, reads: pa.Table, *, amplicons: Sequence[Amplicon],
               cols: dict[str, list[Any]], edges: list[AmpliconPart]) -> int:
    """The piece's amplicons: a row for each whose insert (and anchor) lies inside it, a part for each that
    crosses its edge; returns the reads outside every amplicon on the piece's contig (counted at base 0)."""
    pos: I64 = alleles.column("pos").to_numpy().astype(np.int64) if alleles.num_rows else np.zeros(0, np.int64)
    depth: I64 = (sum(alleles.column(c).to_numpy().astype(np.int64) for c in _DEPTH_COLUMNS)
                  if alleles.num_rows else np.zeros(0, np.int64))
    counted = {str(a): (int(r), int(m)) for a, r, m in zip(reads.column("amplicon").to_pylist(),
                                                          reads.column("reads").to_pylist(),
                                                          reads.column("misprimed_reads").to_pylist(), strict=True)}
    for a in amplicons:
        if a.contig != piece.contig:
            continue
        holds_anchor = piece.start <= a.anchor < piece.end
        if not holds_anchor and not (a.insert_start < piece.end and a.insert_end > piece.start):
            continue
        part = amplicon_part(a, pos, depth, piece.start, piece.end)
        if holds_anchor:
            part.reads, part.misprimed = counted.get(a.name, (0, 0))
        if piece.start <= min(a.insert_start, a.anchor) and max(a.insert_end, a.anchor + 1) <= piece.end:
            amplicon_row(cols, sample, a, part)
        else:
            edges.append(part)
    return counted.get("", (0, 0))[0]
