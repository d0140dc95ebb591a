"""The commit step's data work: check every child and every region, add their aggregates up exactly,
write the run's small result tables.

Every number a child leaves (:mod:`seqlake.lake.staging`) is a count or a histogram, so merging is
integer addition; the derived columns (means, quartiles, N50, mean depth, breadth) are computed once,
from the merged aggregates, by the same functions the worker's QC uses (:func:`seqlake.lake.qc.summarize`).
The per-position tables are not read here: the reducers (:mod:`seqlake.reduce.reducer`) merged them region
by region and wrote ``coverage`` and ``low_coverage``; the commit adds up their summaries (per sample:
depth and covered bases, bases at each threshold per contig, the low-coverage intervals that touch a
region's edge, the report's coverage points), which are small whatever the genome's size.

The children's manifests (one small object each) and the regions' summaries are read by a pool of
threads (:func:`seqlake.base.storage.read_many`), in order, and folded as they arrive; a sample is turned
into rows as soon as its last child is read, and the rows stream into local Parquet files. So memory
stays flat in the number of children and of samples. The children's alignments and the reducers' parts
are staged under ``runs/<id>/parts/<table>/`` (the Batch jobs may not write under ``results/``); one
listing per table checks every part's size against its manifest or summary. No HEAD precedes a GET, and
nothing is written under ``results/`` before every child and region has checked out; then every staged
part (each table the manifests and the summaries name: the reducers' tables are
:data:`seqlake.reduce.reducer.REGION_TABLES`) is published into its result partition by a server-side copy
(:func:`seqlake.base.storage.copy_many`: CopyObject, in parts past 5 GB; no byte of a part passes through
the commit), before the commit writes its own tables and long before it registers the partitions.

Results: ``results/<table>/run_id=<id>/part-00000.parquet`` (alignments: ``child=NNNNN.parquet``;
coverage and low_coverage also ``region=NNNNN.parquet``). ``run_id`` is the Hive partition, not a
column in the files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from seqlake.base import storage
from seqlake.base.errors import SeqlakeError
from seqlake.base.layout import CONSENSUS_SUFFIX, child_name, child_of, region_name
from seqlake.base.metadata import lane_row, sample_fields
from seqlake.lake.alleles import (
    AMPLICON_COLUMNS,
    CONSENSUS_SUMS,
    AmpliconPart,
    CallParams,
    amplicon_row,
    consensus_row,
)
from seqlake.lake.genomes import write_genomes
from seqlake.lake.parquet_io import PartWriter, local_tmp, to_arrow, write_table
from seqlake.lake.qc import QCAccumulator, summarize
from seqlake.lake.readgroups import ReadGroup
from seqlake.lake.regions import ReducePlan, load_reduce_plan
from seqlake.lake.staging import (
    STAGES,
    AlignQC,
    AlignStats,
    ChildManifest,
    PartInfo,
    ShardResult,
    TrimStats,
    median_of_hist,
)
from seqlake.lake.tables import BY_NAME, COVERAGE_POINTS, QC_SUMMARY, RESULT_TABLES, THRESHOLDS
from seqlake.lake.verdict import Genome, VerdictParams, verdict
from seqlake.plan.planfile import Plan
from seqlake.plan.primers import Amplicon, parse_primer_bed
from seqlake.reduce.bams import write_bams, write_crams
from seqlake.reduce.reducer import (
    EDGE_JOINED,
    REGION_TABLES,
    RegionSummary,
    SampleSums,
    reduce_missing,
    samples_ending,
)

Accs = list[tuple[tuple[int, str], QCAccumulator]]


@dataclass
class RunTotals:
    """What ``status.json`` and the ``runs`` table need from the merge."""

    run_id: str
    #: children (the Batch array's size)
    shards: int
    #: raw reads and bases over all samples and mates
    reads: int = 0
    bases: int = 0
    #: rows written per result table
    rows: dict[str, int] = field(default_factory=dict)
    #: contig -> MD5 of the reference's sequence (SAM ``@SQ M5``); empty without a reference
    reference_md5: dict[str, str] = field(default_factory=dict)
    #: library versions the children ran (cutadapt, mappy)
    software: dict[str, str] = field(default_factory=dict)
    #: regions of the reduce step and the coverage bin width (with a reference)
    regions: int = 0
    coverage_bin: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _SampleFold:
    """The running sums of one sample."""

    def __init__(self) -> None:
        self.mates: list[int] = []
        self.qc: dict[tuple[int, str], QCAccumulator] = {}
        self.trim: dict[int, TrimStats] = {}
        self.align: dict[int, AlignStats] | None = None
        self.align_qc: AlignQC | None = None
        #: shard -> Illumina fields of its first read name
        self.headers: dict[int, dict[str, str]] = {}
        #: its read groups (BAM @RG) in child and shard order, each once
        self.read_groups: dict[str, ReadGroup] = {}

    def add(self, r: ShardResult) -> None:
        if not self.mates:
            self.mates = list(r.mates)
            self.qc = {(m, s): QCAccumulator() for m in self.mates for s in STAGES}
            self.trim = {m: TrimStats() for m in self.mates}
        if r.mates != self.mates:
            raise SeqlakeError(f"shard {r.shard} of sample {r.sample}: mates {r.mates}, other shards {self.mates}")
        for key, acc in r.qc.items():
            self.qc[key].merge(acc)
        for m in self.mates:
            self.trim[m].merge(r.trim[m])
        if r.align is not None:
            self.align = self.align or {m: AlignStats() for m in self.mates}
            for m in self.mates:
                self.align[m].merge(r.align[m])
        self.headers[r.shard] = r.header
        for g in r.read_groups:
            self.read_groups.setdefault(g.id, g)
        if r.align_qc is not None:
            self.align_qc = self.align_qc or AlignQC()
            self.align_qc.merge(r.align_qc)

    def accumulators(self) -> Accs:
        return [((m, s), self.qc[(m, s)]) for m in self.mates for s in STAGES]


def _describe(plan: Plan, child: int) -> str:
    shards = plan.child_shards(child)
    samples = sorted({plan.shards[i].sample for i in shards})
    named = ", ".join(samples[:3]) + (f" and {len(samples) - 3} more" if len(samples) > 3 else "")
    return f"child {child} (shard{'s' if len(shards) > 1 else ''} {shards.start}" + (
        f"..{shards.stop - 1}" if len(shards) > 1 else "") + f", sample{'s' if len(samples) > 1 else ''} {named})"


def _checked_manifest(plan: Plan, child: int, uri: str, data: bytes | None) -> ChildManifest:
    """A child's manifest; a missing or foreign one fails the run naming the child."""
    if data is None:
        raise SeqlakeError(f"{_describe(plan, child)} has no manifest at {uri}: it did not finish")
    try:
        m = ChildManifest.from_json(data)
    except (ValueError, KeyError, TypeError) as err:
        raise SeqlakeError(f"{_describe(plan, child)}: unreadable manifest at {uri}: {err}") from err
    if not m.belongs_to(plan.run_id, child, plan.child_shards(child)):
        raise SeqlakeError(f"{_describe(plan, child)}: the manifest at {uri} belongs to run {m.run_id}, "
                           f"child {m.child}, shards {m.shard_indexes}")
    planned = plan.reference.key if plan.reference else None
    if m.reference != planned:  # every manifest names the plan's reference, so all name the same one
        raise SeqlakeError(f"{_describe(plan, child)}: aligned to reference index {m.reference}, the plan's is "
                           f"{planned} ({plan.reference.uri if plan.reference else 'no reference'})")
    return m


def _read_children(plan: Plan) -> Iterator[ChildManifest]:
    """Every child's manifest, checked, in child order, from one stream of parallel reads (the per-position
    tables went to the reducers)."""
    uris = (plan.layout.manifest(c) for c in range(plan.array_size))
    for child, (uri, data) in enumerate(storage.read_many(uris)):
        yield _checked_manifest(plan, child, uri, data)


#: table -> part name (``child=NNNNN``, ``region=NNNNN``) -> its size in bytes, as its manifest or summary
#: gives it: the Batch jobs' parts under ``runs/<id>/parts/`` the commit checks and publishes
Staged = dict[str, dict[str, int]]


def _read_regions(plan: Plan, rp: ReducePlan, rows: dict[str, int], staged: Staged) -> dict[str, SampleSums]:
    """Every region's summary, checked, added up per sample (the rows of the reducers' parts into ``rows``,
    their names and sizes into ``staged``)."""
    n = len(rp.reducers)  # one summary per reducer: a region of a group of samples
    sums: dict[str, SampleSums] = {}
    for region, (uri, data) in enumerate(storage.read_many(plan.layout.region_summary(r) for r in range(n))):
        if data is None:
            raise SeqlakeError(f"region {region} of {n} has no summary at {uri}: its reducer did not finish")
        s = RegionSummary.from_json(data)
        if s.run_id != plan.run_id or s.region != region:
            raise SeqlakeError(f"the summary at {uri} belongs to run {s.run_id}, region {s.region}")
        for sample, v in s.samples.items():
            sums.setdefault(sample, SampleSums()).add(v)
        for table in REGION_TABLES:
            staged.setdefault(table, {})[region_name(region)] = s.parts[table][1]
            rows[table] = rows.get(table, 0) + s.parts[table][0]
    return sums


def _check_staged(plan: Plan, staged: Staged) -> None:
    """Every staged part is there with the size its manifest or summary gives: one listing per table."""
    for table, expected in staged.items():
        listed = storage.list_sizes(plan.layout.staged_parts(table))
        for name, size in expected.items():
            uri = plan.layout.staged_part(table, name)
            if listed.get(uri) == size:
                continue
            found = "missing" if uri not in listed else f"{listed[uri]} bytes"
            child = child_of(name)
            if child is not None:
                raise SeqlakeError(f"{_describe(plan, child)}: its {table} part {uri} is {found}, its manifest "
                                   f"says {size} bytes")
            raise SeqlakeError(f"the reducer's part {uri} is {found}, its summary says {size} bytes")


def _publish(plan: Plan, staged: Staged) -> None:
    """Every staged part into its result partition, under its name: server-side copies, many at once."""
    storage.copy_many((plan.layout.staged_part(table, name), plan.layout.published_part(table, name), size)
                      for table, parts in staged.items() for name, size in parts.items())


#: rows of a result table held in memory before they are written out as a row group (the commit's
#: memory is these buffers, one per table, plus the samples being folded: flat in samples and children)
COMMIT_ROW_GROUP_ROWS = 200_000


@dataclass
class _Results:
    """The result tables being written: one local Parquet file per table, and the run's totals."""

    plan: Plan
    writers: dict[str, PartWriter]
    totals: RunTotals
    committed_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: each sample's pieces of its files (consensus FASTA, VCF and its index), joined under results/ with the
    #: tables (lake.genomes)
    files: list[tuple[str, list[list[int]]]] = field(default_factory=list)
    #: the reference's contigs (from the reduce plan; empty without a reference)
    contigs: list[tuple[str, int]] = field(default_factory=list)
    #: amplicon mode: the primer scheme's amplicons, read once
    amplicons: tuple[Amplicon, ...] | None = None
    #: each sample's coverage points for the report (with a reference), and their widths per contig
    points: PartWriter | None = None
    point_widths: dict[str, int] = field(default_factory=dict)

    def _put(self, table: str, columns: Any) -> None:
        self.writers[table].write_arrow(to_arrow(table, columns))

    def add_calls(self, sample: str, sums: SampleSums) -> None:
        """A sample's ``consensus`` rows and the ``amplicon_depth`` rows the reducers left in parts (amplicons
        crossing a region's edge, the reads outside every amplicon), from the regions' sums; its files'
        pieces noted for :func:`write_genomes`."""
        if not sums.genomes:  # no reducer counted alleles
            return
        layout, params = self.plan.layout, CallParams.of(self.plan.params)
        fasta_uri = layout.sample_file(sample, CONSENSUS_SUFFIX)
        cols: dict[str, list[Any]] = {c.name: [] for c in BY_NAME["consensus"].columns}
        for contig in self.contigs:
            consensus_row(cols, sample, contig, sums.consensus.get(contig[0], [0] * len(CONSENSUS_SUMS)), params=params,
                          fasta_uri=fasta_uri)
        self._put("consensus", cols)
        if self.plan.params.primer_bed is not None:
            if self.amplicons is None:
                bed = self.plan.params.primer_bed
                self.amplicons = parse_primer_bed(bed, storage.read_bytes(bed).decode(), None).amplicons
            self._put("amplicon_depth", edge_amplicon_rows(sample, sums, self.amplicons))
        self.files.append((sample, sums.genomes))

    def add_sample(self, sample: str, fold: _SampleFold, sums: SampleSums | None) -> None:
        """A complete sample's rows in every result table the commit writes, and its raw reads and bases
        in the totals."""
        accs = fold.accumulators()
        length = sum(n for _, n in self.contigs)
        spans = (sums.depth_sum / length, sums.covered / length) if sums is not None and length else None
        summary = summary_rows(sample, accs, fold.trim, fold.align, spans)
        self._put("qc_summary", summary)
        exact = GenomeCoverage(self.contigs, sums, fold.align_qc) if sums is not None else None
        metadata = sample_metadata(self.plan, sample, fold)
        if exact is not None and sums is not None:
            metadata["qc_status"], metadata["qc_reasons"] = genome_verdict(self.plan, sums, exact,
                                                                            metadata.get("control_type"))
        self._put("sample_summary", sample_summary_row(
            sample, fold, exact, {"committed_at": self.committed_at, **metadata}))
        self._put("samples", _columns("samples", lane_rows(self.plan, sample, fold)))
        if fold.align_qc is not None:
            self._put("alignment_hist", histogram_rows(sample, fold.align_qc))
        if exact is not None:
            self._put("contig_coverage", exact.contig_rows(sample))
            self._put("low_coverage", exact.edge_rows(sample))
            if self.points is not None:
                self.points.write_arrow(exact.points(sample, self.point_widths))
        for table, cols in qc_tables(sample, accs):
            self._put(table, cols)
        for stage, reads, bases in zip(summary["stage"], summary["reads"], summary["bases"], strict=True):
            if stage == "raw":
                self.totals.reads += reads
                self.totals.bases += bases


def merge_run(plan: Plan, *, reduce_here: bool = True) -> RunTotals:
    """Check every child and region, add up, and write the run's result tables (see the module docstring).

    ``reduce_here``: first reduce, in this process, every region the reduce step has not (``seqlake
    process`` and the tests; the state machine runs the reducers as a Batch array before the commit, which
    passes False and fails on a region without a summary). Samples are folded as their children's
    manifests arrive and turned into rows as soon as their last child is read; the rows go to local
    Parquet files, which are put under ``results/`` only after every child and region has checked out."""
    rp = reduce_missing(plan) if reduce_here else (load_reduce_plan(plan) if plan.reference else None)
    totals = RunTotals(plan.run_id, plan.array_size)
    region_rows: dict[str, int] = {}
    staged: Staged = {}
    region_sums = _read_regions(plan, rp, region_rows, staged) if rp is not None else {}
    ending = samples_ending(plan)
    folds: dict[str, _SampleFold] = {}
    #: per sample, its read groups (BAM @RG), once its last child is read
    read_groups: dict[str, list[ReadGroup]] = {}
    alignments: dict[int, PartInfo] = {}
    if rp is not None:
        totals.regions, totals.coverage_bin = len(rp.reducers), rp.bin_width
    # the reducers wrote their tables' parts; of those, the ones whose rows cross a region's edge get a part
    # from here (joined), as does every other table, even an empty one
    written = [t for t in RESULT_TABLES if t != "alignments" and not (
        rp is not None and t in REGION_TABLES and t not in EDGE_JOINED)]
    with local_tmp() as tmp:
        out = _Results(plan, {t: PartWriter(plan.layout.result_file(t), t, tmp, COMMIT_ROW_GROUP_ROWS)
                              for t in written}, totals)
        if rp is not None:
            out.contigs, out.point_widths = rp.contigs, rp.coverage_widths()
            out.points = PartWriter(plan.layout.coverage_points, COVERAGE_POINTS.name, tmp, COMMIT_ROW_GROUP_ROWS,
                                    schema=COVERAGE_POINTS.schema)
        for child, m in enumerate(_read_children(plan)):
            totals.reference_md5 = m.reference_md5 or totals.reference_md5
            totals.software = {**totals.software, **m.software}
            for r in m.shards:
                folds.setdefault(r.sample, _SampleFold()).add(r)
            if m.alignments is not None:
                alignments[child] = m.alignments
                staged.setdefault("alignments", {})[child_name(child)] = m.alignments.bytes
            for sample in ending.get(child, []):
                sums = region_sums.pop(sample, SampleSums()) if rp is not None else None
                if sums is not None:
                    out.add_calls(sample, sums)
                read_groups[sample] = list(folds[sample].read_groups.values())
                out.add_sample(sample, folds.pop(sample), sums)  # no name holds the fold: it goes now
        _check_staged(plan, staged)
        # every child and region checked out: only now is anything written under results/
        _publish(plan, staged)
        if not alignments:  # every table gets a partition, even an empty one (no reference)
            write_table(plan.layout.result_file("alignments"), BY_NAME["alignments"].schema.empty_table())
        if out.points is not None:
            out.points.publish()
        for table, writer in out.writers.items():
            writer.publish()
            totals.rows[table] = writer.rows + region_rows.get(table, 0)
        write_genomes(plan.layout, out.files, out.contigs, CallParams.of(plan.params),
                      reference=plan.reference.uri if plan.reference else None)
        if rp is not None:  # each sample's BAM and .bai, joined from the regions' pieces (reduce/bams)
            (write_crams if plan.params.cram else write_bams)(plan, rp, totals.reference_md5, totals.software,
                                                              read_groups)
    for table in set(region_rows) - set(out.writers):
        totals.rows[table] = region_rows[table]
    totals.rows["alignments"] = sum(i.rows for i in alignments.values())
    return totals


# ------------------------------------------------------------------------------- result rows
def summary_rows(
    sample: str,
    accs: Accs,
    trim_stats: dict[int, TrimStats],
    align_stats: dict[int, AlignStats] | None,
    coverage: tuple[float, float] | None,
) -> dict[str, list[Any]]:
    """``qc_summary`` columns. Trimming, alignment and coverage columns are on ``trimmed`` rows only
    (null on ``raw`` rows); mean depth and breadth are per sample (both mates' rows carry them)."""
    rows: list[dict[str, Any]] = []
    depth, breadth = coverage if coverage is not None else (None, None)
    for (mate, stage), acc in accs:
        s = summarize(acc)
        s.pop("sum_gap")
        s["mean_error_quality"] = s.pop("avg_qual")
        s["mean_quality"] = mean_quality(acc)
        row: dict[str, Any] = {"sample": sample, "mate": mate, "stage": stage, **s}
        trimmed = stage == "trimmed"
        row.update({k: (v if trimmed else None) for k, v in trim_stats[mate].as_dict().items()})
        a = align_stats[mate] if align_stats is not None and trimmed else None
        row["mapped_reads"] = a.mapped_reads if a else None
        row["properly_paired"] = a.properly_paired if a else None
        row["mean_mapq"] = (a.mapq_sum / a.mapped_reads if a.mapped_reads else None) if a else None
        row["mean_span_depth"] = depth if a else None
        row["pct_span_breadth"] = 100 * breadth if a and breadth is not None else None
        rows.append(row)
    return {c.name: [r[c.name] for r in rows] for c in QC_SUMMARY.columns}


class GenomeCoverage:
    """A sample's exact depth over the reference, added up from the regions' sums: thresholds per contig and
    the low-coverage intervals that cross a region's edge."""

    def __init__(self, contigs: list[tuple[str, int]], sums: SampleSums, qc: AlignQC | None) -> None:
        self.contigs = contigs
        self.sums = sums
        self.depth_bases = qc.depth_bases if qc is not None else {}

    @property
    def length(self) -> int:
        return sum(n for _, n in self.contigs)

    def mean_depth(self) -> float | None:
        return sum(self.depth_bases.values()) / self.length if self.length else None

    def _at_least(self, contig: str, k: int) -> int:
        counts = self.sums.at_least.get(contig)
        return counts[k] if counts else 0

    def pct_at(self, threshold: int) -> float | None:
        k = THRESHOLDS.index(threshold)
        at = sum(self._at_least(name, k) for name, _ in self.contigs)
        return 100 * at / self.length if self.length else None

    def contig_rows(self, sample: str) -> dict[str, list[Any]]:
        rows: list[dict[str, Any]] = []
        for name, length in self.contigs:
            row: dict[str, Any] = {"sample": sample, "contig": name, "length": length,
                                   "mean_depth": self.depth_bases.get(name, 0) / length if length else None}
            row.update({f"pct_{t}x": 100 * self._at_least(name, k) / length if length else None
                        for k, t in enumerate(THRESHOLDS)})
            rows.append(row)
        return _columns("contig_coverage", rows)

    def points(self, sample: str, widths: dict[str, int]) -> pa.Table:
        """The sample's report points: the regions' partial sums of each point added up."""
        lengths = dict(self.contigs)
        summed: dict[tuple[str, int], int] = {}
        for contig, point, depth_sum in self.sums.points:
            summed[(contig, point)] = summed.get((contig, point), 0) + depth_sum
        keys = sorted(summed, key=lambda k: (-lengths[k[0]], k[0], k[1]))
        starts = [p * widths[c] for c, p in keys]
        return pa.table({"sample": [sample] * len(keys), "contig": [c for c, _ in keys], "bin_start": starts,
                         "bin_end": [min(s + widths[c], lengths[c]) for s, (c, _) in zip(starts, keys, strict=True)],
                         "depth_sum": [summed[k] for k in keys]}, schema=COVERAGE_POINTS.schema)

    def edge_rows(self, sample: str) -> dict[str, list[Any]]:
        """The low-coverage intervals the reducers left at their regions' edges, joined to their neighbours."""
        cols: dict[str, list[Any]] = {c.name: [] for c in BY_NAME["low_coverage"].columns}
        order = {name: i for i, (name, _) in enumerate(self.contigs)}
        edges = sorted(self.sums.low_edges, key=lambda x: (order[x[0]], x[1], x[2]))
        joined: list[list[Any]] = []
        for contig, t, s, e in edges:
            last = joined[-1] if joined else None
            if last is not None and last[0] == contig and last[1] == t and last[3] == s:
                last[3] = e
            else:
                joined.append([contig, t, s, e])
        for contig, t, s, e in joined:
            for k, v in (("sample", sample), ("contig", contig), ("threshold", t), ("pos", s + 1), ("end_pos", e),
                         ("length", e - s)):
                cols[k].append(v)
        return cols


def edge_amplicon_rows(sample: str, sums: SampleSums, amplicons: tuple[Amplicon, ...]) -> dict[str, list[Any]]:
    """The ``amplicon_depth`` rows the commit writes: the amplicons whose insert crosses a region's edge (their
    regions' parts added up) and the reads outside every amplicon."""
    cols: dict[str, list[Any]] = {c: [] for c in AMPLICON_COLUMNS}
    parts: dict[str, AmpliconPart] = {}
    for v in sums.amplicon_edges:
        part = AmpliconPart.from_json(v)
        parts.setdefault(part.name, AmpliconPart(part.name)).add(part)
    for a in amplicons:
        if a.name in parts:
            amplicon_row(cols, sample, a, parts[a.name])
    amplicon_row(cols, sample, None, AmpliconPart("", reads=sums.outside_reads))
    return cols


def histogram_rows(sample: str, qc: AlignQC) -> dict[str, list[Any]]:
    """``alignment_hist`` columns of a sample."""
    rows = [{"sample": sample, "metric": metric, "value": value, "frequency": n}
            for metric, hist in (("insert_size", qc.insert_hist), ("mapq", qc.mapq_hist))
            for value, n in sorted(hist.items())]
    return _columns("alignment_hist", rows)


def lane_rows(plan: Plan, sample: str, fold: _SampleFold) -> list[dict[str, Any]]:
    """The ``samples`` rows of a sample: one per input row (lane), in samplesheet order."""
    first_shard: dict[int, int] = {}
    for shard in plan.shards:
        first_shard.setdefault(shard.spans[0].input, shard.index)
    rows = []
    for i, f in enumerate(plan.inputs):
        if f.sample != sample or f.mate != 1:
            continue
        nxt = plan.inputs[i + 1] if i + 1 < len(plan.inputs) else None
        r2 = nxt.uri if nxt is not None and nxt.sample == sample and nxt.mate == 2 else None
        header = fold.headers.get(first_shard.get(i, -1), {})
        rows.append({"sample": sample, "fastq_1": f.uri, "fastq_2": r2, **lane_row(f.metadata, header)})
    return rows


def sample_metadata(plan: Plan, sample: str, fold: _SampleFold) -> dict[str, Any]:
    return sample_fields(lane_rows(plan, sample, fold))


def mean_quality(acc: QCAccumulator) -> float | None:
    """The arithmetic mean of the bases' Phred scores (FastQC's and fastp's mean quality)."""
    bases = int(acc.qual_counts.sum())
    return float((acc.qual_counts * np.arange(len(acc.qual_counts))).sum()) / bases if bases else None


def _columns(table: str, rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {c.name: [r.get(c.name) for r in rows] for c in BY_NAME[table].columns}


def genome_verdict(plan: Plan, sums: SampleSums, exact: GenomeCoverage,
                   control: str | None) -> tuple[str, str | None]:
    """A sample's QC verdict (seqlake.lake.verdict) from its consensus sums over every contig (the consensus
    checks only with allele counts) and its exact depth."""
    total = [sum(v[k] for v in sums.consensus.values()) for k in range(len(CONSENSUS_SUMS))]
    values = dict(zip(CONSENSUS_SUMS, total, strict=True))
    genome = Genome(exact.length, values["called"] if sums.genomes else None, values["ambiguous_bases"],
                    values["frameshift_indels"], values["mixed_alleles"], exact.pct_at(10), control)
    return verdict(genome, VerdictParams.of(plan.params))


def _pct(part: int, whole: int) -> float | None:
    return 100 * part / whole if whole else None


def sample_summary_row(sample: str, fold: _SampleFold, exact: GenomeCoverage | None,
                       metadata: dict[str, Any]) -> dict[str, list[Any]]:
    """The ``sample_summary`` row of a sample (see the table's columns)."""
    raw = [summarize(fold.qc[(m, "raw")]) for m in fold.mates]
    trimmed = [summarize(fold.qc[(m, "trimmed")]) for m in fold.mates]
    raw_acc = QCAccumulator()
    for m in fold.mates:
        raw_acc.merge(fold.qc[(m, "raw")])
    both = summarize(raw_acc) if fold.mates else {}
    bases = both.get("bases", 0)
    raw_reads = sum(s["reads"] for s in raw)
    row: dict[str, Any] = {
        "sample": sample,
        "read_pairs_raw": raw[0]["reads"] if raw else 0,
        "reads_raw": raw_reads,
        "bases_raw": bases,
        "read_pairs_trimmed": trimmed[0]["reads"] if trimmed else 0,
        "bases_trimmed": sum(s["bases"] for s in trimmed),
        "pct_q30": _pct(both.get("q30_bases", 0), bases),
        "pct_gc": _pct(both.get("gc_bases", 0), bases),
        "mean_quality": mean_quality(raw_acc),
        "mean_error_quality": both.get("avg_qual"),
        "reads_adapter_8bp": sum(t.reads_adapter_8bp for t in fold.trim.values()),
        **metadata,
    }
    if fold.align is not None:
        mapped = sum(a.mapped_reads for a in fold.align.values())
        row["pct_mapped"] = _pct(mapped, raw_reads)
        row["pct_properly_paired"] = _pct(sum(a.properly_paired for a in fold.align.values()), raw_reads)
        row["mean_mapq"] = sum(a.mapq_sum for a in fold.align.values()) / mapped if mapped else None
    qc = fold.align_qc
    if qc is not None:
        row["median_insert_size"] = median_of_hist(qc.insert_hist)
        row["pct_error"] = 100 * qc.mismatches / qc.bases_mapped_cigar if qc.bases_mapped_cigar else None
        row["soft_clipped_bases"] = qc.soft_clipped_bases
    if exact is not None:
        row["mean_depth"] = exact.mean_depth()
        row.update({f"pct_genome_{t}x": exact.pct_at(t) for t in THRESHOLDS})
    return _columns("sample_summary", [row])


def qc_tables(sample: str, accs: Accs) -> Iterator[tuple[str, dict[str, Any]]]:
    """Row batches of ``qc_position``, ``length_hist`` and ``quality_hist`` of some accumulators, as numpy
    columns; ``qc_position`` a block of cycles at a time (:meth:`PositionCounts.slabs`), so that a long read's
    million cycles are never all in memory as columns."""

    def keys(mate: int, stage: str, n: int) -> dict[str, Any]:
        return {"sample": np.full(n, sample, dtype=object), "mate": np.full(n, mate, dtype=np.int64),
                "stage": np.full(n, stage, dtype=object)}

    for (mate, stage), acc in accs:
        reads_per_cycle = acc.reads_per_cycle()
        for first, cycles in acc.cycles.slabs(acc.max_cycle):
            n = cycles.shape[1]
            reads_at = reads_per_cycle[first : first + n]
            yield "qc_position", {
                **keys(mate, stage, n), "cycle": np.arange(first + 1, first + n + 1, dtype=np.int64),
                "reads": reads_at, "qual_sum": cycles[5], "mean_qual": cycles[5] / np.maximum(reads_at, 1),
                **{col: cycles[k] for k, col in enumerate("acgtn")}}
        lengths, counts = acc.lengths.nonzero()
        yield "length_hist", {**keys(mate, stage, len(lengths)), "length": lengths, "reads": counts[0]}
        quals = np.flatnonzero(acc.qual_counts + acc.read_qual_counts)
        yield "quality_hist", {**keys(mate, stage, len(quals)), "quality": quals, "bases": acc.qual_counts[quals],
                               "reads": acc.read_qual_counts[quals]}


