"""The reduce step: one reducer per region merges every child's per-position rows of that region, a window at a time.

Children leave their per-position staging tables cut by region and window (:mod:`seqlake.lake.positions`).
The reduce step's plan (``runs/<id>/reduce/regions.json``, :class:`ReducePlan`) fixes the reference's contigs,
the regions (:mod:`seqlake.lake.regions`) and the coverage bin width; then reducer ``r`` (a Batch array child,
``seqlake reduce``) reads its region's block of every child's index (one ranged GET per child, as many bytes as
the region has windows: :class:`seqlake.lake.positions.IndexLayout`) and works through its region's windows
(:func:`seqlake.lake.regions.windows`, :data:`seqlake.base.params.REDUCE_WINDOW` bases each, the size the
children cut at, which the plan takes from child 0) in order; for each window it

1. reads the window's bytes of every child (one ranged GET each, in parallel, in child order);
2. folds them per sample: a sample's children are consecutive, so a sample is merged as soon as its last
   child is read, and its pieces read so far are merged early whenever they outgrow what is merged already
   (:data:`FOLD_BYTES`): the state is about one merged window of the samples being read, never the region,
   never the genome, never the run, whatever the number of children;
3. merges each staging table with the merger registered for its name (:data:`MERGERS`; by default the
   rows with one key are added, as every per-position count is an integer): the children's sorted runs
   of one (sample, contig) are merged by one stable sort of their concatenation (a k-way merge: NumPy's
   stable sort of int64 is a timsort, which merges the k sorted runs), depth runs by the capped sweep of
   :mod:`seqlake.lake.depth` (one sort of their boundaries), covered intervals by a union;
4. turns the merged tables into the window's rows of the result tables with the finishers registered in
   :data:`FINISHERS` (``coverage``: every bin of the window; ``low_coverage``: the intervals below each
   threshold inside it; ``variants``, ``amplicon_depth``, the consensus and VCF pieces), written as they come
   into the region's staged parts (``runs/<id>/parts/<table>/region=NNNNN.parquet``,
   :meth:`RunLayout.region_part`), which the commit publishes into the result partitions;
5. adds the window's partial sums of each sample into the region's, joining what crosses a window's edge
   (:class:`WindowJoin`: a low-coverage interval or an amplicon is one row of the part, as if the region were
   one window); all that is carried from a window to the next is those open intervals and amplicons, the
   samples' sums and the consensus and VCF pieces, spooled to local disk (:class:`GenomePieces`).

Then it writes the region's summary last (``runs/<id>/reduce/region=NNNNN.json``, :class:`RegionSummary`):
per sample the partial sums the commit adds up (depth and covered bases for ``qc_summary``, bases at each
threshold per contig for ``sample_summary`` and ``contig_coverage``), the low-coverage intervals and amplicons
that touch the region's edge inside a contig (the commit joins them to their neighbours'), the coarse coverage
points of the report, and the rows and bytes of each part.

A reducer whose summary already exists exits at once (a retried or re-run reducer computes nothing twice;
its parts are overwritten whole before the summary, so a summary always describes finished parts).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.base import storage
from seqlake.base.errors import SeqlakeError
from seqlake.lake.alleles import AMPLICON_COLUMNS, AmpliconPart, CallParams, amplicon_row
from seqlake.lake.annotate import CdsIndex
from seqlake.lake.coverage import covered_upto, union_intervals
from seqlake.lake.depth import Profile, sum_runs
from seqlake.lake.parquet_io import PartWriter, local_tmp, put_file, to_arrow
from seqlake.lake.positions import (
    IndexLayout,
    PositionsIndexError,
    RegionEntry,
    contig_codes,
    dictionary_column,
    read_region_indexes,
    read_windows,
    sample_groups,
)
from seqlake.lake.regions import (
    Piece,
    ReducePlan,
    Region,
    load_reduce_plan,
    plan_reduce,
    windows,
)
from seqlake.lake.slices import SliceEntry, SliceLayout, child_samples, read_region_entries
from seqlake.lake.tables import BY_NAME, INTERVAL_END, POSITION_STAGING, STAGING_BY_NAME, THRESHOLDS, position_column
from seqlake.lake.vcf import bgzf_compress, tabix_entries
from seqlake.lake.verdict import VerdictParams
from seqlake.plan.gff import load_gff
from seqlake.plan.planfile import Plan
from seqlake.plan.primers import Amplicon, parse_primer_bed
from seqlake.plan.reference import check_unchanged, load_fasta_index
from seqlake.reduce.bams import reduce_region_bams
from seqlake.reduce.calls import RegionReference, call_region
from seqlake.reduce.record_counts import ChildWindow, sample_records, window_allele_tables, window_reads

I64 = npt.NDArray[np.int64]
#: rows of a region's result part held before they are written as a row group
REDUCE_ROW_GROUP_ROWS = 200_000
#: bytes of a sample's rows of one staging table read and not yet merged, past which they are merged (if they
#: also outweigh the rows merged so far): ~1M depth runs, ~200k positions of allele counts
FOLD_BYTES = 32 << 20


def samples_ending(plan: Plan) -> dict[int, list[str]]:
    """Child -> the samples whose last shard it holds, in plan order (a plan's shards are in sample
    order, so a sample's children are consecutive and it is complete once its last child is read)."""
    last: dict[str, int] = {}
    for child in range(plan.array_size):
        for i in plan.child_shards(child):
            last[plan.shards[i].sample] = child
    ending: dict[int, list[str]] = {}
    for sample in plan.samples:
        ending.setdefault(last[sample], []).append(sample)
    return ending


# ----------------------------------------------------------------------------------------- summaries
@dataclass
class SampleSums:
    """One sample's partial sums over one region (or, added up by the commit, the genome)."""

    #: sum of per-base depth (whole spans, the ``coverage`` table's) and bases with depth >= 1
    depth_sum: int = 0
    covered: int = 0
    #: contig -> bases at or above each threshold of THRESHOLDS (``samtools depth -a`` depth)
    at_least: dict[str, list[int]] = field(default_factory=dict)
    #: low-coverage intervals ``[contig, threshold, start, end)`` touching a window boundary inside a contig
    low_edges: list[list[Any]] = field(default_factory=list)
    #: report points: ``[contig, point, depth_sum]`` (point = bin_start // the contig's point width)
    points: list[list[Any]] = field(default_factory=list)
    #: contig -> the consensus's length, N, other IUPAC codes and called reference positions (CONSENSUS_SUMS)
    consensus: dict[str, list[int]] = field(default_factory=dict)
    #: amplicons whose insert crosses a region's edge: ``[amplicon, reads, misprimed, depth_sum, covered
    #: bases, min depth over them]`` of this region's part (the commit adds them up: AMPLICON_PARTS)
    amplicon_edges: list[list[Any]] = field(default_factory=list)
    #: primary alignments no primer clipped (amplicon mode)
    outside_reads: int = 0
    #: the sample's pieces of the per-sample files: ``[region, offset, length]`` of each of GENOME_PIECES
    #: in the region's genomes object, flattened
    genomes: list[list[int]] = field(default_factory=list)

    def add(self, other: SampleSums) -> None:
        self.depth_sum += other.depth_sum
        self.covered += other.covered
        for contig, counts in other.at_least.items():
            mine = self.at_least.setdefault(contig, [0] * len(counts))
            for i, n in enumerate(counts):
                mine[i] += n
        for contig, counts in other.consensus.items():
            mine = self.consensus.setdefault(contig, [0] * len(counts))
            for i, n in enumerate(counts):
                mine[i] += n
        self.low_edges += other.low_edges
        self.points += other.points
        self.amplicon_edges += other.amplicon_edges
        self.outside_reads += other.outside_reads
        self.genomes += other.genomes

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SampleSums:
        at_least = {str(k): [int(x) for x in v] for k, v in d["at_least"].items()}
        consensus = {str(k): [int(x) for x in v] for k, v in d.get("consensus", {}).items()}
        return cls(int(d["depth_sum"]), int(d["covered"]), at_least, [list(x) for x in d["low_edges"]],
                   [list(x) for x in d["points"]], consensus, [list(x) for x in d.get("amplicon_edges", [])],
                   int(d.get("outside_reads", 0)), [[int(v) for v in x] for x in d.get("genomes", [])])


@dataclass
class RegionSummary:
    """What a reducer leaves the commit (``runs/<id>/reduce/region=NNNNN.json``)."""

    run_id: str
    region: int
    samples: dict[str, SampleSums] = field(default_factory=dict)
    #: result table -> rows and bytes of the region's part
    parts: dict[str, list[int]] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> bytes:
        return json.dumps({"run_id": self.run_id, "region": self.region, "seconds": self.seconds, "parts": self.parts,
                           "samples": {s: asdict(v) for s, v in self.samples.items()}},
                          separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RegionSummary:
        d = json.loads(data)
        return cls(str(d["run_id"]), int(d["region"]), {s: SampleSums.from_json(v) for s, v in d["samples"].items()},
                   {t: [int(x) for x in v] for t, v in d["parts"].items()}, float(d.get("seconds", 0.0)))


# ------------------------------------------------------------------------------------------ mergers
#: a staging table's merger: the pieces of one sample (one per child, each sorted by contig and position)
#: -> one table sorted by contig and position
Merger = Callable[[Sequence[pa.Table]], pa.Table]


def _per_contig(pieces: Sequence[pa.Table], columns: Sequence[str]) -> Iterator[tuple[int, dict[str, I64]]]:
    """Per contig code, the pieces' columns concatenated (in child order)."""
    codes = np.concatenate([contig_codes(p) for p in pieces]) if pieces else np.empty(0, dtype=np.int32)
    cols = {c: np.concatenate([p.column(c).to_numpy().astype(np.int64) for p in pieces]) for c in columns}
    order = np.argsort(codes, kind="stable")
    codes = codes[order]
    if not len(codes):
        return
    bounds = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1], [True]]))
    for a, b in itertools.pairwise(bounds):
        yield int(codes[a]), {c: v[order[a:b]] for c, v in cols.items()}


def _rebuild(spec_name: str, template: pa.Table, rows: list[tuple[int, dict[str, I64]]]) -> pa.Table:
    """A merged table in the staging schema: the sample and contig dictionaries of the pieces."""
    spec = STAGING_BY_NAME[spec_name]
    contigs = template.column("contig").combine_chunks().dictionary.to_pylist()
    sample = template.column("sample").combine_chunks()
    n = sum(len(next(iter(cols.values()))) for _, cols in rows)
    arrays: dict[str, Any] = {
        "sample": pa.DictionaryArray.from_arrays(pa.array(np.full(n, sample.indices[0].as_py(), dtype=np.int32)),
                                                 sample.dictionary),
        "contig": dictionary_column(np.concatenate([np.full(len(next(iter(c.values()))), k, dtype=np.int32)
                                                    for k, c in rows]) if rows else np.empty(0, np.int32), contigs),
    }
    for col in spec.columns[2:]:
        arrays[col.name] = pa.array(np.concatenate([c[col.name] for _, c in rows]) if rows else np.empty(0, np.int64),
                                    type=col.type)
    return pa.Table.from_arrays([arrays[f.name] for f in spec.schema], schema=spec.schema)


#: bits of a position in a merged row's key (contig code above them): 1 Tb per contig
_POS_BITS = 40


def merge_sum(name: str) -> Merger:
    """Rows with one key are one row whose other columns are the sum (every per-position count adds)."""
    spec = STAGING_BY_NAME[name]
    pos = position_column(spec)
    values = [c.name for c in spec.columns if c.name not in spec.key]
    extra_keys = [k for k in spec.key if k not in ("sample", "contig", pos)]

    def merge(pieces: Sequence[pa.Table]) -> pa.Table:
        pieces = [p for p in pieces if p.num_rows]
        if len(pieces) <= 1:
            return pieces[0] if pieces else spec.schema.empty_table()
        if extra_keys:  # e.g. an inserted sequence: Arrow's hash aggregation
            whole = pa.concat_tables(pieces).combine_chunks()
            codes = pa.array(contig_codes(whole))
            keyed = whole.drop_columns(["contig"]).append_column("_contig", codes)
            grouped = keyed.group_by(["sample", "_contig", pos, *extra_keys]).aggregate([(v, "sum") for v in values])
            grouped = grouped.rename_columns([c.removesuffix("_sum") if c[:-4] in values else c
                                              for c in grouped.column_names])
            grouped = grouped.sort_by([("_contig", "ascending"), (pos, "ascending"), *((k, "ascending")
                                                                                       for k in extra_keys)])
            contigs = whole.column("contig").combine_chunks().dictionary.to_pylist()
            grouped = grouped.append_column("contig", dictionary_column(grouped.column("_contig").to_numpy(), contigs))
            return grouped.select(spec.schema.names).cast(spec.schema)
        # one key per row (contig code, position), sorted once: a stable sort of k sorted runs is a k-way
        # merge; then each value column on its own, in its own type (the state is the keys and one column,
        # not every column widened at once: allele counts have 32 of them)
        codes = np.concatenate([contig_codes(p).astype(np.int64) for p in pieces])
        key = (codes << _POS_BITS) | np.concatenate([p.column(pos).to_numpy().astype(np.int64) for p in pieces])
        del codes
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
        key = key[first]
        arrays: dict[str, Any] = {}
        for v in values:
            column = np.concatenate([p.column(v).to_numpy() for p in pieces])[order]
            arrays[v] = pa.array(np.add.reduceat(column, first, dtype=np.int64), type=spec.schema.field(v).type)
        del order, first
        template = pieces[0]
        sample = template.column("sample").combine_chunks()
        arrays["sample"] = pa.DictionaryArray.from_arrays(
            pa.array(np.full(len(key), sample.indices[0].as_py(), dtype=np.int32)), sample.dictionary)
        arrays["contig"] = dictionary_column(key >> _POS_BITS,
                                             template.column("contig").combine_chunks().dictionary.to_pylist())
        arrays[pos] = pa.array(key & ((1 << _POS_BITS) - 1), type=spec.schema.field(pos).type)
        return pa.Table.from_arrays([arrays[f.name] for f in spec.schema], schema=spec.schema)

    return merge


def merge_union(pieces: Sequence[pa.Table]) -> pa.Table:
    """Covered intervals: the union of the children's unions."""
    pieces = [p for p in pieces if p.num_rows]
    if len(pieces) <= 1:
        return pieces[0] if pieces else STAGING_BY_NAME["covered_intervals"].schema.empty_table()
    rows = []
    for code, cols in _per_contig(pieces, ["start", INTERVAL_END]):
        s, e = union_intervals(cols["start"], cols[INTERVAL_END])
        rows.append((code, {"start": s, INTERVAL_END: e}))
    return _rebuild("covered_intervals", pieces[0], rows)


def merge_depth(pieces: Sequence[pa.Table]) -> pa.Table:
    """Depth runs: the capped sum of the children's profiles (:func:`seqlake.lake.depth.add_profiles`)."""
    pieces = [p for p in pieces if p.num_rows]
    if len(pieces) <= 1:
        return pieces[0] if pieces else STAGING_BY_NAME["depth_runs"].schema.empty_table()
    rows = []
    for code, cols in _per_contig(pieces, ["start", INTERVAL_END, "depth"]):
        p = sum_runs(cols["start"], cols[INTERVAL_END], cols["depth"])
        rows.append((code, {"start": p.start, INTERVAL_END: p.end, "depth": p.depth}))
    return _rebuild("depth_runs", pieces[0], rows)


#: the merger of each staging table that does not simply add (the others: :func:`merge_sum`)
MERGERS: dict[str, Merger] = {"covered_intervals": merge_union, "depth_runs": merge_depth}


def merger(name: str) -> Merger:
    return MERGERS.get(name) or merge_sum(name)


# ----------------------------------------------------------------------------------------- finishers
class GenomePieces:
    """A region's pieces of every sample's files, one sample after the other in one local file (published as
    ``runs/<id>/reduce/region=NNNNN.genomes``): its consensus FASTA's bytes, its VCF records as BGZF blocks
    (no EOF member) and their tabix entries (relative to the VCF piece's first byte). The windows give each
    sample's FASTA bytes and VCF records window by window, every sample in each window: they are spooled to a
    local file as they come, then laid out sample by sample (:meth:`finish`), a window's FASTA piece at a
    time and one sample's VCF records of the region (sparse) at a time; where each piece is goes into the
    sample's sums."""

    def __init__(self, path: Path, region: int) -> None:
        self.path = path
        self.region = region
        self._spool_path = path.with_name(path.name + ".spool")
        self._spool = self._spool_path.open("wb")
        self._spooled = 0
        #: sample -> its windows' pieces in the spool, in window order: (offset, FASTA bytes, VCF records bytes)
        self._pieces: dict[str, list[tuple[int, int, int]]] = {}
        self.bytes = 0

    def add(self, sample: str, fasta: bytes, records: bytes) -> None:
        """One window's consensus FASTA bytes and VCF records of the sample."""
        self._spool.write(fasta)
        self._spool.write(records)
        self._pieces.setdefault(sample, []).append((self._spooled, len(fasta), len(records)))
        self._spooled += len(fasta) + len(records)

    def finish(self, sums: Mapping[str, SampleSums]) -> None:
        """Lay the spooled pieces out sample by sample (one of each of GENOME_PIECES) and say where in each
        sample's sums."""
        self._spool.close()
        with self._spool_path.open("rb") as spool, self.path.open("wb") as out:
            for sample, pieces in self._pieces.items():
                entry = [self.region, self.bytes, 0]
                records = []
                for offset, fasta, vcf in pieces:
                    spool.seek(offset)
                    out.write(spool.read(fasta))
                    records.append(spool.read(vcf))
                    entry[2] += fasta
                plain = b"".join(records)
                bgzf = bgzf_compress(plain, eof=False) if plain else b""
                tbi = tabix_entries(bgzf).to_json()
                out.write(bgzf)
                out.write(tbi)
                entry += [self.bytes + entry[2], len(bgzf), self.bytes + entry[2] + len(bgzf), len(tbi)]
                self.bytes += entry[2] + len(bgzf) + len(tbi)
                sums[sample].genomes.append(entry)
        self._spool_path.unlink()

    def close(self) -> None:
        self._spool.close()


#: a sample's pieces of its files in a region's genomes object, in this order (SampleSums.genomes)
GENOME_PIECES = ("fasta", "vcf", "tbi")


@dataclass(frozen=True)
class RegionContext:
    plan: Plan
    reduce_plan: ReducePlan
    #: what the finishers finish: one window of the reducer's region (:func:`seqlake.lake.regions.windows`)
    region: Region
    #: contig -> report point width (drawn contigs only)
    point_widths: dict[str, int]
    #: the variants' inputs: the region's reference bases, the thresholds, the primer scheme's amplicons
    #: (amplicon mode), and where the samples' file pieces go (with allele counts; else None)
    reference: RegionReference | None = None
    calls: CallParams = field(default_factory=CallParams)
    amplicons: tuple[Amplicon, ...] | None = None
    genomes: GenomePieces | None = None
    #: the run's GFF (``--gff``) for the variants' annotation, and the verdict's thresholds
    cds: CdsIndex | None = None
    verdict: VerdictParams = field(default_factory=VerdictParams)

    def in_window(self, window: Region) -> RegionContext:
        """The context of one window: its pieces, and its own reference bases (none of the last window's)."""
        reference = None if self.reference is None else RegionReference(self.reference.index)
        return replace(self, region=window, reference=reference)


def _contig_rows(merged: pa.Table, region: Region) -> Iterator[tuple[Piece, pa.Table]]:
    """Each piece of the region with the merged rows of its contig."""
    codes = contig_codes(merged) if merged.num_rows else np.empty(0, dtype=np.int32)
    for k, piece in enumerate(region.pieces):
        sel = np.flatnonzero(codes == k)
        rows = merged.take(pa.array(sel)) if len(sel) != merged.num_rows else merged
        yield piece, rows


def _np(t: pa.Table, col: str) -> I64:
    out: I64 = t.column(col).to_numpy().astype(np.int64)
    return out


def _strings(value: str, n: int) -> pa.Array:
    """``value`` repeated ``n`` times as a string column, through a one-word dictionary (no Python list)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value])).cast(pa.string())


def _result(table: str, columns: Mapping[str, Any]) -> pa.Table:
    schema = BY_NAME[table].schema
    return pa.Table.from_arrays([c if isinstance(c, pa.Array) else pa.array(c, type=f.type)
                                 for f, c in ((f, columns[f.name]) for f in schema)], schema=schema)


def finish_coverage(ctx: RegionContext, sample: str, merged: Mapping[str, pa.Table],
                    sums: SampleSums) -> dict[str, list[pa.Table]]:
    """Every bin of the region (``coverage``: depth sums, covered bases), the sample's depth and covered
    totals, and its report points."""
    width = ctx.reduce_plan.bin_width
    out = []
    bins = dict(_contig_rows(merged["coverage_bins"], ctx.region))
    ivl = dict(_contig_rows(merged["covered_intervals"], ctx.region))
    for piece in ctx.region.pieces:
        edges = np.append(np.arange(piece.start, piece.end, width, dtype=np.int64), np.int64(piece.end))
        starts, ends = edges[:-1], edges[1:]
        depth = np.zeros(len(starts), dtype=np.int64)
        b = bins[piece]
        np.add.at(depth, (_np(b, "pos") - piece.start) // width, _np(b, "depth_sum"))
        i = ivl[piece]
        us, ue = _np(i, "start"), _np(i, INTERVAL_END)
        covered = np.diff(covered_upto(us, ue, edges))
        sums.depth_sum += int(depth.sum())
        sums.covered += int((ue - us).sum())
        n = len(starts)
        out.append(_result("coverage", {
            "sample": _strings(sample, n), "contig": _strings(piece.contig, n), "bin_start": starts, "bin_end": ends,
            "pos": starts + 1, "depth_sum": depth, "mean_span_depth": depth / np.maximum(ends - starts, 1),
            "covered_bases": covered}))
        pw = ctx.point_widths.get(piece.contig)
        if pw:
            point = starts // pw
            uniq, first = np.unique(point, return_index=True)
            sums.points += [[piece.contig, int(p), int(s)] for p, s in zip(uniq, np.add.reduceat(depth, first),
                                                                             strict=True)]
    return {"coverage": out}


def _below(runs: Profile, threshold: int, start: int, end: int) -> tuple[I64, I64]:
    """The merged intervals of ``[start, end)`` with depth below ``threshold`` (runs inside the window)."""
    shifted = Profile(runs.start - start, runs.end - start, runs.depth)
    s, e = shifted.below(threshold, end - start)
    return s + start, e + start


def finish_depth(ctx: RegionContext, sample: str, merged: Mapping[str, pa.Table],
                 sums: SampleSums) -> dict[str, list[pa.Table]]:
    """``low_coverage`` rows inside the region and the bases at each threshold (``samtools depth -a``)."""
    out = []
    for piece, rows in _contig_rows(merged["depth_runs"], ctx.region):
        p = Profile(_np(rows, "start"), _np(rows, INTERVAL_END), _np(rows, "depth"))
        counts = sums.at_least.setdefault(piece.contig, [0] * len(THRESHOLDS))
        for k, t in enumerate(THRESHOLDS):
            counts[k] += p.bases_at_least(t)
            s, e = _below(p, t, piece.start, piece.end)
            # an interval that reaches a window edge inside the contig may go on in the next region: the
            # commit joins those
            edge = ((s == piece.start) & (piece.start > 0)) | ((e == piece.end) & (piece.end < piece.contig_length))
            sums.low_edges += [[piece.contig, t, int(a), int(b)] for a, b in zip(s[edge], e[edge], strict=True)]
            s, e = s[~edge], e[~edge]
            n = len(s)
            out.append(_result("low_coverage", {
                "sample": _strings(sample, n), "contig": _strings(piece.contig, n),
                "threshold": np.full(n, t, dtype=np.int32), "pos": s + 1, "end_pos": e, "length": e - s}))
    return {"low_coverage": out}


def finish_calls(ctx: RegionContext, sample: str, merged: Mapping[str, pa.Table],
                 sums: SampleSums) -> dict[str, list[pa.Table]]:
    """``variants`` and ``amplicon_depth`` rows of the window, its parts of the ``consensus`` row and of the
    amplicons crossing its edges, and its pieces of the sample's FASTA and VCF (:mod:`seqlake.reduce.calls`)."""
    if ctx.reference is None or ctx.genomes is None:  # allele counting is off
        return {}
    calls = call_region(sample, ctx.region, merged, ctx.reference, params=ctx.calls, amplicons=ctx.amplicons,
                        cds=ctx.cds, verdict=ctx.verdict, multi_contig=len(ctx.reduce_plan.contigs) > 1)
    for contig, counts in calls.consensus.items():
        sums.consensus[contig] = counts
    sums.amplicon_edges += [part.to_json() for part in calls.amplicon_edges]
    sums.outside_reads += calls.outside_reads
    ctx.genomes.add(sample, calls.fasta, calls.records)
    return {"variants": [calls.variants], "amplicon_depth": [calls.amplicon_depth]}


@dataclass(frozen=True)
class Finisher:
    """Turns one sample's merged staging tables of a region into rows of result tables (and partial sums)."""

    needs: tuple[str, ...]
    writes: tuple[str, ...]
    finish: Callable[[RegionContext, str, Mapping[str, pa.Table], SampleSums], dict[str, list[pa.Table]]]


FINISHERS: list[Finisher] = [
    Finisher(("coverage_bins", "covered_intervals"), ("coverage",), finish_coverage),
    Finisher(("depth_runs",), ("low_coverage",), finish_depth),
    Finisher(("alleles", "indels", "amplicon_reads"), ("variants", "amplicon_depth"), finish_calls),
]
#: result tables written by the reducers, one part per region
REGION_TABLES: tuple[str, ...] = tuple(t for f in FINISHERS for t in f.writes)
#: of those, the tables whose rows crossing a region's edge the commit joins and writes in a part of its own
EDGE_JOINED: tuple[str, ...] = ("low_coverage", "amplicon_depth")


# ------------------------------------------------------------------------------------- window joins
@dataclass
class _Carried:
    """What one sample carries from a window to the next: the low-coverage intervals that reach the window's
    end inside the region (``(contig, threshold) -> [start, end)``) and the parts so far of the amplicons that
    cross a window's edge."""

    low: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    amplicons: dict[str, AmpliconPart] = field(default_factory=dict)


class WindowJoin:
    """Adds each window's partial sums of a sample into its region's, and joins what crosses a window's edge
    inside the region, as the commit joins what crosses a region's edge: a low-coverage interval or an
    amplicon becomes one row of the region's part once its last window is finished (or, when it reaches the
    region's edge, one entry of the region's summary for the commit)."""

    def __init__(self, region: Region, amplicons: Sequence[Amplicon] | None) -> None:
        self.pieces = {p.contig: p for p in region.pieces}
        self.amplicons = {a.name: a for a in amplicons or ()}
        self.carried: dict[str, _Carried] = {}

    def fold(self, sample: str, sums: SampleSums, part: SampleSums, window: Region) -> dict[str, list[pa.Table]]:
        """Add the window's ``part`` into the region's ``sums``; the rows it closes."""
        carried = self.carried.setdefault(sample, _Carried())
        low_edges, points, amplicon_edges = part.low_edges, part.points, part.amplicon_edges
        part.low_edges, part.points, part.amplicon_edges = [], [], []
        sums.add(part)
        for contig, point, depth_sum in points:  # a report point may straddle a window's edge: one point
            last = sums.points[-1] if sums.points else None
            if last is not None and last[0] == contig and last[1] == point:
                last[2] += depth_sum
            else:
                sums.points.append([contig, point, depth_sum])
        ends = {p.contig: p.end for p in window.pieces}
        low: list[tuple[str, int, int, int]] = []
        still_open: dict[tuple[str, int], list[int]] = {}
        for contig, t, s, end in low_edges:
            key, start = (contig, t), s
            before = carried.low.pop(key, None)
            if before is not None and before[1] == start:
                start = before[0]
            elif before is not None:
                self._close_low(sums, low, (contig, t, *before))
            if end == ends[contig] and end < self.pieces[contig].end:  # goes on in the next window
                still_open[key] = [start, end]
            else:
                self._close_low(sums, low, (contig, t, start, end))
        for (contig, t), (start, end) in carried.low.items():  # reached the last window's end, not past it
            self._close_low(sums, low, (contig, t, start, end))
        carried.low = still_open
        for v in amplicon_edges:
            got = AmpliconPart.from_json(v)
            carried.amplicons.setdefault(got.name, AmpliconPart(got.name)).add(got)
        cols: dict[str, list[Any]] = {c: [] for c in AMPLICON_COLUMNS}
        for name in list(carried.amplicons):
            a = self.amplicons[name]
            piece, end = self.pieces[a.contig], max(a.insert_end, a.anchor + 1)
            if a.contig in ends and end > ends[a.contig] and ends[a.contig] < piece.end:
                continue  # its next window is still to come
            self._close_amplicon(sums, cols, sample, a, carried.amplicons.pop(name))
        return self._rows(sample, low, cols)

    def close(self, sample: str, sums: SampleSums) -> dict[str, list[pa.Table]]:
        """After the region's last window: anything still carried (nothing, as the last window ends at the
        region's edge) closed."""
        carried = self.carried.pop(sample, _Carried())
        low: list[tuple[str, int, int, int]] = []
        for (contig, t), (start, end) in carried.low.items():
            self._close_low(sums, low, (contig, t, start, end))
        cols: dict[str, list[Any]] = {c: [] for c in AMPLICON_COLUMNS}
        for name, got in carried.amplicons.items():
            self._close_amplicon(sums, cols, sample, self.amplicons[name], got)
        return self._rows(sample, low, cols)

    def _close_low(self, sums: SampleSums, rows: list[tuple[str, int, int, int]],
                   interval: tuple[str, int, int, int]) -> None:
        """A finished interval ``(contig, threshold, start, end)``: a row, or an edge of the region's."""
        contig, _, start, end = interval
        piece = self.pieces[contig]
        if (start == piece.start and piece.start > 0) or (end == piece.end and piece.end < piece.contig_length):
            sums.low_edges.append(list(interval))  # may go on in the next region: the commit joins it
        else:
            rows.append(interval)

    def _close_amplicon(self, sums: SampleSums, cols: dict[str, list[Any]], sample: str, a: Amplicon,
                        got: AmpliconPart) -> None:
        piece = self.pieces[a.contig]
        if piece.start <= min(a.insert_start, a.anchor) and max(a.insert_end, a.anchor + 1) <= piece.end:
            amplicon_row(cols, sample, a, got)
        else:
            sums.amplicon_edges.append(got.to_json())  # crosses the region's edge: the commit adds its parts

    @staticmethod
    def _rows(sample: str, low: list[tuple[str, int, int, int]], cols: dict[str, list[Any]]) -> dict[
            str, list[pa.Table]]:
        out: dict[str, list[pa.Table]] = {}
        if low:
            start = np.array([x[2] for x in low], dtype=np.int64)
            end = np.array([x[3] for x in low], dtype=np.int64)
            out["low_coverage"] = [_result("low_coverage", {
                "sample": _strings(sample, len(low)), "contig": pa.array([x[0] for x in low], pa.string()),
                "threshold": np.array([x[1] for x in low], dtype=np.int32), "pos": start + 1, "end_pos": end,
                "length": end - start})]
        if cols["sample"]:
            out["amplicon_depth"] = [to_arrow("amplicon_depth", cols)]
        return out


# ------------------------------------------------------------------------------------------- reducer
def _positions_entries(plan: Plan, rp: ReducePlan, region: int, children: range | None = None) -> list[RegionEntry]:
    """Each of ``children``'s extents of the region's windows: its block of each child's index, where the plan
    puts it (:class:`IndexLayout`), one ranged GET per child of as many bytes as the region has windows (a
    missing child, a foreign one, one in an older format or cut at another window fails naming it)."""
    children = range(plan.array_size) if children is None else children
    uris = [plan.layout.positions(c) for c in children]
    out = []
    try:
        for child, entry in zip(children, read_region_indexes(uris, IndexLayout.of(rp.regions, rp.window), region,
                                                              plan.run_id, children.start), strict=True):
            if entry is None:
                raise SeqlakeError(f"child {child} has no positions object at {plan.layout.positions(child)}: "
                                   "it did not finish")
            out.append(entry)
    except PositionsIndexError as err:
        raise SeqlakeError(str(err)) from err
    return out


def _fold_early(name: str, pieces: list[pa.Table]) -> None:
    """Merge a sample's pieces read so far into one once they outweigh what is merged already (and
    :data:`FOLD_BYTES`): the state stays about one merged window of the sample, whatever the number of its
    children, and each row is merged a few times at most (the merged part at least doubles between folds)."""
    waiting = sum(p.nbytes for p in pieces[1:])
    if len(pieces) > 1 and waiting > max(FOLD_BYTES, pieces[0].nbytes):
        pieces[:] = [merger(name)(pieces)]


def _reduce_window(ctx: RegionContext, stream: Iterator[Mapping[str, pa.Table]], ending: Mapping[int, list[str]],
                   summary: RegionSummary, *, join: WindowJoin, write: Callable[[Mapping[str, list[pa.Table]]], None],
                   children: range, reads: Mapping[str, list[tuple[ChildWindow, SliceEntry]]] | None = None) -> None:
    """One window of each of ``children`` (``stream``, in child order): each sample merged once its last child
    is read, finished, and its window's sums folded into the region's."""
    pending: dict[str, dict[str, list[pa.Table]]] = {}
    for child, tables in zip(children, stream, strict=True):
        for name, table in tables.items():
            for sample, rows in sample_groups(table):
                pieces = pending.setdefault(sample, {}).setdefault(name, [])
                pieces.append(rows)
                _fold_early(name, pieces)
        for sample in ending.get(child, []):
            read = pending.pop(sample, {})
            merged = {spec.name: merger(spec.name)(read.get(spec.name, [])) for spec in POSITION_STAGING}
            del read
            if reads is not None:  # the alleles and indels: counted here from the window's records
                merged.update(window_allele_tables(sample_records(reads.get(sample, [])), ctx.region,
                                                   ctx.reduce_plan.contigs, ctx.plan.params.min_base_quality, sample))
            part = SampleSums()
            for f in FINISHERS:
                write(f.finish(ctx, sample, merged, part))
            del merged
            write(join.fold(sample, summary.samples.setdefault(sample, SampleSums()), part, ctx.region))


def reduce_region(plan: Plan, region: int, rp: ReducePlan | None = None) -> RegionSummary:
    """Reducer ``region`` (its array index: one region of the reference and one group of whole samples,
    :attr:`ReducePlan.reducers`) merges its region of its group's children, window by window, and writes its
    result parts, then its summary (module docstring); every object it writes is named by its index."""
    t0 = time.perf_counter()
    rp = rp or load_reduce_plan(plan)
    reducer = rp.reducer(region)
    children = reducer.children if rp.groups else range(plan.array_size)
    entries = _positions_entries(plan, rp, reducer.region, children)
    summary = RegionSummary(plan.run_id, region)
    ending = samples_ending(plan)
    the_region = rp.regions[reducer.region]
    with local_tmp() as tmp, contextlib.ExitStack() as stack:
        ctx = _context(plan, rp, the_region, Path(tmp), region)
        if ctx.genomes is not None:
            stack.callback(ctx.genomes.close)
        writers = {t: PartWriter(plan.layout.region_part(t, region), t, tmp, REDUCE_ROW_GROUP_ROWS)
                   for t in REGION_TABLES}

        def write(tables: Mapping[str, list[pa.Table]]) -> None:
            for table, parts in tables.items():
                for part in parts:
                    writers[table].write_arrow(part)

        join = WindowJoin(the_region, ctx.amplicons)
        counting = ctx.reference is not None  # allele counts on: from the children's records (reduce/record_counts)
        slices = [(plan.layout.reads_slices(c), child_samples(plan, c)) for c in children] if counting else []
        slice_entries = read_region_entries(
            [(u, c, SliceLayout(tuple(rp.regions), rp.window, len(s))) for c, (u, s) in zip(children, slices,
                                                                                          strict=True)],
            reducer.region, plan.run_id) if counting else []
        for w, win in enumerate(windows(the_region, rp.window)):
            stream = read_windows((plan.layout.positions(c), entries[k].get(w, {})) for k, c in enumerate(children))
            reads = window_reads(slices, slice_entries, w) if counting else None
            _reduce_window(ctx.in_window(win), stream, ending, summary, join=join, write=write, children=children,
                           reads=reads)
            del reads
        for sample, sums in summary.samples.items():
            write(join.close(sample, sums))
        for table, writer in writers.items():
            writer.publish()
            summary.parts[table] = [writer.rows, writer.bytes]
        if ctx.genomes is not None:
            ctx.genomes.finish(summary.samples)
            put_file(ctx.genomes.path, plan.layout.region_genomes(region))
        reduce_region_bams(plan, rp, region, Path(tmp))
    summary.seconds = round(time.perf_counter() - t0, 3)
    storage.write_bytes(plan.layout.region_summary(region), summary.to_json())
    return summary


def _context(plan: Plan, rp: ReducePlan, region: Region, tmp: Path, reducer: int) -> RegionContext:
    """What the finishers of one region need: with allele counts, the FASTA index of the reference (checked
    unchanged), the thresholds, the primer scheme and the file pieces' local file."""
    widths = rp.coverage_widths()
    if not plan.params.allele_counts or plan.reference is None:
        return RegionContext(plan, rp, region, widths)
    check_unchanged(plan.reference)  # the bases the children aligned to, not a file put in its place since
    bed = plan.params.primer_bed
    amplicons = parse_primer_bed(bed, storage.read_bytes(bed).decode(), None).amplicons if bed else None
    gff = plan.params.gff
    cds = CdsIndex(load_gff(gff, None)) if gff else None
    return RegionContext(plan, rp, region, widths, RegionReference(load_fasta_index(plan.reference)),
                         CallParams.of(plan.params), amplicons, GenomePieces(tmp / "genomes", reducer),
                         cds, VerdictParams.of(plan.params))


def finished_summary(plan: Plan, region: int) -> RegionSummary | None:
    try:
        s = RegionSummary.from_json(storage.read_bytes(plan.layout.region_summary(region)))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    return s if s.run_id == plan.run_id and s.region == region else None


def reduce_missing(plan: Plan) -> ReducePlan | None:
    """Plan the reduce if it is not planned, and reduce every region without a summary, here, one after the
    other (``seqlake process`` and the tests: the state machine runs them as a Batch array)."""
    if not plan.reference:
        return None
    rp: ReducePlan | None
    try:
        rp = load_reduce_plan(plan)
    except FileNotFoundError:
        rp = plan_reduce(plan)
    if rp is None:
        return None
    for region in range(len(rp.reducers)):
        if finished_summary(plan, region) is None:
            reduce_region(plan, region, rp)
    return rp
