"""What a run's report shows, computed from the run's committed tables.

:func:`load_run_tables` is the one place that reads the lake (the run's partitions, local or ``s3://``);
everything else here is pure: :func:`build_report` turns the tables into per-sample summary rows and
plot matrices (samples x points) that both the HTML page and the MultiQC files draw from.

Sizes are bounded by design, so a run of thousands of samples still makes a page of a few MB: each
axis has at most :data:`MAX_POINTS` points (longer reads group cycles and lengths into equal bins, as
FastQC does past cycle 9) and coverage at most :data:`MAX_COVERAGE_POINTS` per sample over at most
:data:`MAX_CONTIGS` contigs (the longest).
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from seqlake.base import storage
from seqlake.base.layout import LakeLayout, RunLayout
from seqlake.lake.parquet_io import filtered_batches, read_table
from seqlake.lake.tables import (
    AMPLICON_DEPTH,
    BY_NAME,
    CONSENSUS,
    COVERAGE,
    COVERAGE_POINTS,
    LENGTH_HIST,
    QC_POSITION,
    QC_SUMMARY,
    QUALITY_HIST,
    RUNS,
    SAMPLE_SUMMARY,
    VARIANTS,
)
from seqlake.report.verdicts import verdict_rows

#: the tables a report reads (and, under the ``coverage`` key, the run's coverage points: never the whole
#: coverage table, which grows with the genome)
REPORT_TABLES: tuple[str, ...] = (
    SAMPLE_SUMMARY.name, QC_SUMMARY.name, QC_POSITION.name, LENGTH_HIST.name, QUALITY_HIST.name, RUNS.name,
    VARIANTS.name, CONSENSUS.name, AMPLICON_DEPTH.name,
)
#: PASS variants the report lists (the table has them all)
MAX_VARIANT_ROWS = 500
#: the order of the variants the report lists (ties: the order of the parts and of their rows)
VARIANT_ORDER: list[tuple[str, str]] = [("sample", "ascending"), ("contig", "ascending"), ("pos", "ascending")]
#: rows of a variants part read at once: the table has every allele at >= 3 % (268,000 rows for a 10 Mb genome
#: at 30x, millions for a human sample), the report lists a few hundred of them
VARIANT_BATCH_ROWS = 16_384
#: schema metadata of the coverage points: every contig's length (JSON), for the note on undrawn contigs
CONTIGS_KEY = b"seqlake.contigs"
#: points on one axis (cycles, lengths) before they are grouped into equal bins
MAX_POINTS = 200
#: coverage points per sample over all drawn contigs
MAX_COVERAGE_POINTS = 1000
#: contigs drawn (the longest); the rest are named under the plot
MAX_CONTIGS = 12
#: bases in the order the composition plots draw them
BASES: tuple[str, ...] = ("a", "c", "g", "t", "n")
STAGES: tuple[str, ...] = ("raw", "trimmed")

Matrix = np.ndarray[Any, np.dtype[np.float64]]


def load_run_tables(results_prefix: str, run_id: str) -> dict[str, pa.Table]:
    """The run's partition of each report table (an empty table where the run has none; of ``variants``
    only the rows the report lists, :func:`listed_variants`), and under
    ``coverage`` its coverage points (:data:`seqlake.lake.tables.COVERAGE_POINTS`: at most about 2,000 per
    sample, summed by the reducers; empty without a reference).

    ``results_prefix``: the lake's ``results`` folder, a local path or ``s3://bucket/results``.
    """
    out: dict[str, pa.Table] = {}
    for name in REPORT_TABLES:
        schema = BY_NAME[name].schema
        parts = [u for u in storage.list_uris(storage.join(results_prefix, name, f"run_id={run_id}"))
                 if u.endswith(".parquet")]
        if name == VARIANTS.name:
            out[name] = listed_variants(parts)
            continue
        if name == QC_POSITION.name:
            out[name] = binned_cycles(parts)
            continue
        tables = [read_table(u).select(schema.names).cast(schema) for u in parts]
        out[name] = pa.concat_tables(tables) if tables else schema.empty_table()
    out[COVERAGE.name] = _coverage_points(LakeLayout.of_results(results_prefix).run(run_id))
    return out


#: schema metadata of a ``qc_position`` table already grouped into bins of this many cycles (:func:`binned_cycles`)
CYCLE_BIN_KEY = b"seqlake.cycle_bin"
#: rows of a ``qc_position`` part read at a time while binning
CYCLE_BATCH_ROWS = 65_536
_CYCLE_SUMS: tuple[str, ...] = ("reads", "qual_sum", *BASES)


def _parquet_file(stack: contextlib.ExitStack, uri: str) -> pq.ParquetFile:
    source: Any = stack.enter_context(storage.open_read(uri)) if storage.is_s3(uri) else uri
    return stack.enter_context(pq.ParquetFile(source))


def binned_cycles(parts: list[str]) -> pa.Table:
    """The run's ``qc_position`` rows, grouped into the report's cycle bins as they are read (a batch at a
    time): a run with a 1 Mb read has a million cycles per mate and stage, which the page draws as
    :data:`MAX_POINTS` points; holding them all (and numpy copies of each column) cost the report ~2.5x the
    child's memory. A grouped row's ``cycle`` is its bin's first cycle; the width is in the schema metadata
    (:data:`CYCLE_BIN_KEY`)."""
    schema = QC_POSITION.schema
    largest = 0
    for uri in parts:
        cycles = read_table(uri, columns=["cycle"]).column("cycle")
        largest = max(largest, int(pc.max(cycles).as_py() or 0))
    width = _bin_width(largest)
    if width == 1:
        tables = [read_table(u).select(schema.names).cast(schema) for u in parts]
        return pa.concat_tables(tables) if tables else schema.empty_table()
    keys = ["sample", "mate", "stage", "bin"]
    sums = [(c, "sum") for c in _CYCLE_SUMS]
    grouped: list[pa.Table] = []
    for uri in parts:
        with contextlib.ExitStack() as stack:
            for batch in _parquet_file(stack, uri).iter_batches(batch_size=CYCLE_BATCH_ROWS,
                                                                 columns=["sample", "mate", "stage", "cycle",
                                                                          *_CYCLE_SUMS]):
                rows = pa.Table.from_batches([batch])
                rows = rows.append_column("bin", pc.divide(pc.subtract(rows.column("cycle"), 1), width))
                grouped.append(rows.group_by(keys).aggregate(sums))
    if not grouped:
        return schema.empty_table()
    both = pa.concat_tables(grouped)
    both = both.rename_columns([n.removesuffix("_sum") for n in both.column_names])
    total = both.group_by(keys).aggregate(sums)
    total = total.rename_columns([n.removesuffix("_sum") for n in total.column_names])
    cycle = pc.add(pc.multiply(total.column("bin"), width), 1)
    reads = total.column("reads")
    mean = pc.if_else(pc.greater(reads, 0), pc.divide(pc.cast(total.column("qual_sum"), pa.float64()),
                                                       pc.cast(reads, pa.float64())), None)
    columns = {"cycle": cycle, "mean_qual": mean, **{n: total.column(n) for n in total.column_names}}
    table = pa.table({n: columns[n] for n in schema.names}).cast(schema)
    return table.replace_schema_metadata({CYCLE_BIN_KEY: str(width).encode()})


def listed_variants(parts: list[str]) -> pa.Table:
    """The variants the report lists: the first :data:`MAX_VARIANT_ROWS` PASS rows of the parts in
    :data:`VARIANT_ORDER`, kept as the parts are read a batch of PASS rows at a time (the commit renders the
    report: its memory must not grow with the variants table, which :func:`build_report` would sort whole)."""
    schema = VARIANTS.schema
    kept = schema.empty_table()
    for uri in parts:
        for passed in filtered_batches(uri, "pass", VARIANT_BATCH_ROWS):
            # a stable sort of the rows kept so far (read earlier) then these: ties keep the order of reading
            both = pa.concat_tables([kept, passed.select(schema.names).cast(schema)])
            kept = both.sort_by(VARIANT_ORDER).slice(0, MAX_VARIANT_ROWS)
    return kept


def _coverage_points(layout: RunLayout) -> pa.Table:
    schema = COVERAGE_POINTS.schema
    try:
        points = read_table(layout.coverage_points).select(schema.names).cast(schema)
        contigs = json.loads(storage.read_bytes(layout.reduce_plan))["contigs"]
    except FileNotFoundError:
        return schema.empty_table()
    return points.replace_schema_metadata({CONTIGS_KEY: json.dumps(contigs).encode()})


@dataclass(frozen=True)
class Track:
    """One mate at one stage: the unit every per-read plot has a panel for."""

    mate: int
    stage: str

    @property
    def label(self) -> str:
        return f"R{self.mate} {self.stage}"


@dataclass
class SampleRow:
    """One sample's line in the summary table (and in MultiQC's general statistics): its
    ``sample_summary`` row."""

    sample: str
    pairs: int
    reads: int
    bases: int
    q30_pct: float | None
    gc_pct: float | None
    mean_quality: float | None
    trimmed_reads: int | None
    trimmed_bases_pct: float | None
    mapped_pct: float | None
    properly_paired_pct: float | None
    mean_mapq: float | None
    mean_depth: float | None
    breadth_pct: float | None
    pct_10x: float | None
    median_insert_size: float | None
    error_pct: float | None


@dataclass(frozen=True)
class SummaryColumn:
    """A column of the summary table: its key in :class:`SampleRow`, title, meaning and number format."""

    key: str
    title: str
    doc: str
    #: Python format spec of the shown value
    fmt: str
    #: shown in MultiQC's general statistics table
    general_stats: bool = True


SUMMARY_COLUMNS: tuple[SummaryColumn, ...] = (
    SummaryColumn("pairs", "Pairs", "raw read pairs (single-end: reads)", ",d", general_stats=False),
    SummaryColumn("reads", "Reads (all mates)", "raw reads, both mates of every pair counted", ",d"),
    SummaryColumn("bases", "Bases", "raw bases, both mates", ",d", general_stats=False),
    SummaryColumn("q30_pct", "Q30 %", "raw bases with Phred quality >= 30, % of raw bases", ".2f"),
    SummaryColumn("gc_pct", "GC %", "G and C, % of raw bases", ".2f"),
    SummaryColumn("mean_quality", "Mean Q", "arithmetic mean of the raw bases' Phred scores (as FastQC)", ".1f",
                  general_stats=False),
    SummaryColumn("trimmed_reads", "Pairs kept", "read pairs (single-end: reads) left after trimming and the "
                  "length filter", ",d", general_stats=False),
    SummaryColumn("trimmed_bases_pct", "Trimmed %", "bases removed by trimming and filtering, % of raw bases",
                  ".2f"),
    SummaryColumn("mapped_pct", "Mapped %", "reads with a primary alignment, % of raw reads", ".2f"),
    SummaryColumn("properly_paired_pct", "Proper pairs %", "reads flagged proper pair, % of raw reads", ".2f"),
    SummaryColumn("mean_mapq", "MAPQ", "mean MAPQ of primary alignments", ".1f", general_stats=False),
    SummaryColumn("mean_depth", "Mean depth", "mean depth over the whole reference (samtools depth -a)", ".1f"),
    SummaryColumn("breadth_pct", "≥1x %", "reference bases with depth >= 1, % of the reference", ".2f"),
    SummaryColumn("pct_10x", "≥10x %", "reference bases with depth >= 10, % of the reference", ".2f"),
    SummaryColumn("median_insert_size", "Insert", "median insert size (samtools stats)", ".0f",
                  general_stats=False),
    SummaryColumn("error_pct", "Error %", "mismatches per aligned base, % (samtools stats' error rate x 100)",
                  ".3f", general_stats=False),
)


def format_value(value: float | None, fmt: str) -> str:
    """A summary value as the page shows it (an en dash where the run has no such number)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return format(value, fmt)


@dataclass
class Panel:
    """One chart: an x axis and, per named series, a samples x points matrix (NaN where absent)."""

    title: str
    x: list[float]
    series: dict[str, Matrix]


@dataclass
class Plot:
    """A figure of one or more panels.

    ``kind``: ``samples`` draws one line per sample (or, for many samples, their spread and the chosen
    one); ``components`` draws each series of the chosen sample (the bases of a composition plot).
    """

    id: str
    title: str
    description: str
    kind: str
    xlabel: str
    ylabel: str
    panels: list[Panel]
    log_y: bool = False
    #: one panel per row, across the page (positions along a contig)
    wide: bool = False
    #: the y axis always starts at 0 and ends at least here (percentages: 100)
    y_max: float | None = None
    note: str = ""


@dataclass
class TrimRow:
    """What trimming did to one mate of one sample (the trimming table and bars)."""

    sample: str
    mate: int
    reads_in: int
    reads_out: int
    reads_adapter_trimmed: int
    reads_too_short: int
    bases_in: int
    bases_quality_trimmed: int
    bases_adapter_trimmed: int
    bases_too_short: int


@dataclass
class Report:
    run_id: str
    samples: list[str]
    rows: list[SampleRow]
    trimming: list[TrimRow]
    plots: list[Plot]
    run: dict[str, Any] = field(default_factory=dict)
    #: PASS variants (at most MAX_VARIANT_ROWS) and consensus rows, as ``variants`` / ``consensus`` rows
    variants: list[dict[str, Any]] = field(default_factory=list)
    consensus: list[dict[str, Any]] = field(default_factory=list)
    #: the samples' QC verdicts, worst first (seqlake.report.verdicts)
    verdicts: list[dict[str, Any]] = field(default_factory=list)


def _col(table: pa.Table, name: str) -> np.ndarray[Any, Any]:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False))


def _pct(part: int | None, whole: int | None) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def sample_rows(sample_summary: pa.Table) -> list[SampleRow]:
    """One summary row per sample: its ``sample_summary`` row."""
    out = []
    for r in sorted(sample_summary.to_pylist(), key=lambda r: r["sample"]):
        bases, kept = r["bases_raw"], r["bases_trimmed"]
        out.append(SampleRow(
            sample=r["sample"],
            pairs=r["read_pairs_raw"],
            reads=r["reads_raw"],
            bases=bases,
            q30_pct=r["pct_q30"],
            gc_pct=r["pct_gc"],
            mean_quality=r["mean_quality"],
            trimmed_reads=r["read_pairs_trimmed"],
            trimmed_bases_pct=_pct(bases - kept, bases),
            mapped_pct=r["pct_mapped"],
            properly_paired_pct=r["pct_properly_paired"],
            mean_mapq=r["mean_mapq"],
            mean_depth=r["mean_depth"],
            breadth_pct=r["pct_genome_1x"],
            pct_10x=r["pct_genome_10x"],
            median_insert_size=r["median_insert_size"],
            error_pct=r["pct_error"],
        ))
    return out


def trimming_rows(qc_summary: pa.Table) -> list[TrimRow]:
    """One row per sample and mate that has a trimmed stage with trimming counts."""
    raw = {(r["sample"], r["mate"]): r for r in qc_summary.to_pylist() if r["stage"] == "raw"}
    out = []
    for r in sorted(qc_summary.to_pylist(), key=lambda r: (r["sample"], r["mate"])):
        if r["stage"] != "trimmed" or r.get("reads_too_short") is None or (r["sample"], r["mate"]) not in raw:
            continue
        before = raw[r["sample"], r["mate"]]
        out.append(TrimRow(
            sample=r["sample"], mate=r["mate"], reads_in=before["reads"], reads_out=r["reads"],
            reads_adapter_trimmed=r["reads_adapter_trimmed"] or 0, reads_too_short=r["reads_too_short"] or 0,
            bases_in=before["bases"], bases_quality_trimmed=r["bases_quality_trimmed"] or 0,
            bases_adapter_trimmed=r["bases_adapter_trimmed"] or 0, bases_too_short=r["bases_too_short"] or 0,
        ))
    return out


def tracks(qc_summary: pa.Table) -> list[Track]:
    """The (mate, stage) pairs the run has, mate by mate, raw before trimmed."""
    seen = {(int(m), str(s)) for m, s in zip(_col(qc_summary, "mate"), _col(qc_summary, "stage"), strict=True)}
    return [Track(m, s) for m in (1, 2) for s in STAGES if (m, s) in seen]


def _bin_width(largest: int) -> int:
    """Group an axis of ``largest`` points into at most :data:`MAX_POINTS` equal bins."""
    return max(1, math.ceil(largest / MAX_POINTS))


class _Indexer:
    """Row positions of a table's rows in a samples x bins matrix, one track at a time."""

    def __init__(self, table: pa.Table, samples: list[str]) -> None:
        index = {s: i for i, s in enumerate(samples)}
        self.sample = np.array([index[s] for s in _col(table, "sample")], dtype=np.int64)
        self.mate = _col(table, "mate").astype(np.int64)
        self.stage = _col(table, "stage").astype(str)
        self.n = len(samples)

    def mask(self, track: Track) -> np.ndarray[Any, np.dtype[np.bool_]]:
        return np.asarray((self.mate == track.mate) & (self.stage == track.stage), dtype=np.bool_)

    def add(self, mask: np.ndarray[Any, Any], bins: np.ndarray[Any, Any], values: np.ndarray[Any, Any],
            n_bins: int) -> Matrix:
        out = np.zeros((self.n, n_bins), dtype=np.float64)
        np.add.at(out, (self.sample[mask], bins[mask]), values[mask].astype(np.float64))
        return out


def _ratio(num: Matrix, den: Matrix, scale: float = 1.0) -> Matrix:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, scale * num / np.where(den > 0, den, 1), np.nan)


def _per_cycle(table: pa.Table, samples: list[str], run_tracks: list[Track]) -> tuple[Plot, Plot]:
    ix = _Indexer(table, samples)
    cycle = _col(table, "cycle").astype(np.int64)
    binned = (table.schema.metadata or {}).get(CYCLE_BIN_KEY)  # grouped as it was read (binned_cycles)
    width = int(binned) if binned else _bin_width(int(cycle.max()) if len(cycle) else 1)
    bins = (cycle - 1) // width
    n_bins = int(bins.max()) + 1 if len(bins) else 0
    x = [float(1 + i * width) for i in range(n_bins)]
    quality, composition = [], []
    for track in run_tracks:
        m = ix.mask(track)
        reads = ix.add(m, bins, _col(table, "reads"), n_bins)
        quality.append(Panel(track.label, x, {"mean quality": _ratio(ix.add(m, bins, _col(table, "qual_sum"),
                                                                             n_bins), reads)}))
        counts = {b: ix.add(m, bins, _col(table, b), n_bins) for b in BASES}
        total = sum(counts.values(), np.zeros((ix.n, n_bins)))
        composition.append(Panel(track.label, x, {b.upper(): _ratio(c, total, 100.0) for b, c in counts.items()}))
    grouped = f" Cycles are grouped {width} to a point." if width > 1 else ""
    return (
        Plot("cycle-quality", "Per-cycle mean quality", "Mean Phred quality at each position of the reads." + grouped,
             "samples", "cycle", "mean Phred quality", quality),
        Plot("cycle-composition", "Per-cycle base composition",
             "Share of A, C, G, T and N at each position, for the chosen sample." + grouped,
             "components", "cycle", "% of bases", composition, y_max=100.0),
    )


def _histogram(table: pa.Table, samples: list[str], run_tracks: list[Track], x_col: str,
               count_col: str) -> tuple[list[float], list[Matrix], int]:
    """Per track, each sample's histogram as % of its total, with x grouped into equal bins."""
    ix = _Indexer(table, samples)
    xs = _col(table, x_col).astype(np.int64)
    width = _bin_width(int(xs.max()) + 1 if len(xs) else 1)
    bins = xs // width
    n_bins = int(bins.max()) + 1 if len(bins) else 0
    out = []
    for track in run_tracks:
        counts = ix.add(ix.mask(track), bins, _col(table, count_col), n_bins)
        out.append(_ratio(counts, np.broadcast_to(counts.sum(axis=1, keepdims=True), counts.shape), 100.0))
    return [float(i * width) for i in range(n_bins)], out, width


def _distributions(length_hist: pa.Table, quality_hist: pa.Table, samples: list[str],
                   run_tracks: list[Track]) -> list[Plot]:
    plots = []
    x, mats, width = _histogram(length_hist, samples, run_tracks, "length", "reads")
    grouped = f" Lengths are grouped {width} to a point." if width > 1 else ""
    plots.append(Plot("length-dist", "Read length distribution", "Reads of each length, % of the sample's reads."
                      + grouped, "samples", "read length", "% of reads",
                      [Panel(t.label, x, {"reads": m}) for t, m in zip(run_tracks, mats, strict=True)]))
    x, mats, _ = _histogram(quality_hist, samples, run_tracks, "quality", "reads")
    plots.append(Plot("read-quality-dist", "Per-read mean quality",
                      "Reads by their mean Phred quality (floored), % of the sample's reads.", "samples",
                      "mean Phred quality of the read", "% of reads",
                      [Panel(t.label, x, {"reads": m}) for t, m in zip(run_tracks, mats, strict=True)]))
    x, mats, _ = _histogram(quality_hist, samples, run_tracks, "quality", "bases")
    plots.append(Plot("base-quality-dist", "Per-base quality", "Bases by Phred quality, % of the sample's bases.",
                      "samples", "Phred quality", "% of bases",
                      [Panel(t.label, x, {"bases": m}) for t, m in zip(run_tracks, mats, strict=True)]))
    return plots


def _coverage(table: pa.Table, samples: list[str]) -> Plot | None:
    if table.num_rows == 0:
        return None
    index = {s: i for i, s in enumerate(samples)}
    contig = _col(table, "contig").astype(str)
    start, end = _col(table, "bin_start").astype(np.int64), _col(table, "bin_end").astype(np.int64)
    depth_sum = _col(table, "depth_sum").astype(np.float64)
    sample = np.array([index[s] for s in _col(table, "sample")], dtype=np.int64)
    by_contig = table.group_by("contig").aggregate([("bin_end", "max")])
    lengths = dict(zip(by_contig["contig"].to_pylist(), by_contig["bin_end_max"].to_pylist(), strict=True))
    drawn = sorted(lengths, key=lambda c: (-lengths[c], c))[:MAX_CONTIGS]
    listed = (table.schema.metadata or {}).get(CONTIGS_KEY)  # every contig, the undrawn ones too
    lengths = {**{str(n): int(length) for n, length in json.loads(listed)}, **lengths} if listed else lengths
    total = sum(lengths[c] for c in drawn)
    panels = []
    for c in drawn:
        m = contig == c
        step = int(np.max(end[m] - start[m])) or 1  # the bin width (the contig's last bin may be shorter)
        budget = max(20, MAX_COVERAGE_POINTS * lengths[c] // total)
        width = step * max(1, math.ceil(math.ceil(lengths[c] / step) / budget))
        n_bins = math.ceil(lengths[c] / width)
        bins = start[m] // width
        sums = np.zeros((len(samples), n_bins))
        np.add.at(sums, (sample[m], bins), depth_sum[m])
        sizes = np.minimum((np.arange(n_bins) + 1) * width, lengths[c]) - np.arange(n_bins) * width
        x = [float(i * width + s / 2) for i, s in enumerate(sizes)]
        panels.append(Panel(f"{c} ({lengths[c]:,} bp)", x, {"depth": sums / sizes}))
    rest = sorted(set(lengths) - set(drawn))
    note = f"{len(rest)} shorter contig(s) not drawn: {', '.join(rest[:20])}{' ...' if len(rest) > 20 else ''}"
    return Plot("coverage", "Coverage along each contig", "Mean depth in each bin along the reference.", "samples",
                "position (bp)", "mean depth", panels, log_y=True, wide=True, note=note if rest else "")


def build_report(run_id: str, tables: dict[str, pa.Table]) -> Report:
    """Everything the page and the MultiQC files show, from the run's tables."""
    summary = tables[QC_SUMMARY.name]
    rows = sample_rows(tables[SAMPLE_SUMMARY.name])
    samples = [r.sample for r in rows]
    run_tracks = tracks(summary)
    plots: list[Plot] = [*_per_cycle(tables[QC_POSITION.name], samples, run_tracks),
                         *_distributions(tables[LENGTH_HIST.name], tables[QUALITY_HIST.name], samples, run_tracks)]
    coverage = _coverage(tables[COVERAGE.name], samples)
    if coverage is not None:
        plots.append(coverage)
    amplicons = _amplicon_depth(tables[AMPLICON_DEPTH.name], samples)
    if amplicons is not None:
        plots.append(amplicons)
    runs = tables[RUNS.name].to_pylist()
    variants = tables[VARIANTS.name]
    passed = variants.filter(variants.column("pass")).sort_by(VARIANT_ORDER)
    return Report(run_id, samples, rows, trimming_rows(summary), plots, runs[0] if runs else {},
                  passed.slice(0, MAX_VARIANT_ROWS).to_pylist(),
                  tables[CONSENSUS.name].sort_by([("sample", "ascending"), ("contig", "ascending")]).to_pylist(),
                  verdict_rows(tables[SAMPLE_SUMMARY.name].to_pylist()))


def _amplicon_depth(table: pa.Table, samples: list[str]) -> Plot | None:
    """Mean depth per amplicon (amplicon mode), one line per sample along the scheme's amplicons."""
    rows = [r for r in table.to_pylist() if r["amplicon"] is not None]
    if not rows:
        return None
    order = sorted({(r["contig"], r["pos"], r["amplicon"]) for r in rows})
    column = {a[2]: k for k, a in enumerate(order)}
    index = {s: i for i, s in enumerate(samples)}
    depth = np.full((len(samples), len(order)), np.nan)
    for r in rows:
        if r["sample"] in index:
            depth[index[r["sample"]], column[r["amplicon"]]] = r["mean_pileup_depth"]
    return Plot("amplicon-depth", "Amplicon depth", "Mean depth over each amplicon's insert (between its "
                "primers), amplicons in scheme order; below 20x an amplicon counts as dropped out.", "samples",
                "amplicon", "mean depth", [Panel("amplicons", [float(k + 1) for k in range(len(order))],
                                                   {"depth": depth})], log_y=True, wide=True)
