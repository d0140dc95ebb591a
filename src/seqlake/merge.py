"""The commit step's data work: check every shard, add the shards' aggregates up exactly, write the
run's result tables.

Every number in the staging parts is a count or a histogram, so merging is integer addition; the
derived columns (means, quartiles, N50, mean depth, breadth) are computed once, from the merged
aggregates, by the same functions the worker uses (:func:`seqlake.qc.summarize`). Covered bases
are the exception to addition: the shards' covered-interval unions are unioned (see
:mod:`seqlake.coverage`).

Shards are folded one at a time (a sample's accumulators, coverage bins and covered-interval union
are the only state), so memory does not grow with the shard count. Alignment parts are copied
(server-side on S3), never read.

Results: ``<results>/<table>/run_id=<id>/part-0.parquet`` (alignments: one file per shard,
``<sample>-shard=NNNNN.parquet``). ``run_id`` is the Hive partition, not a column in the files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from seqlake import storage
from seqlake.align import AlignStats
from seqlake.coverage import CoverageAccumulator
from seqlake.errors import SeqlakeError
from seqlake.parquet_io import read_table, to_arrow, write_table
from seqlake.plan import Plan
from seqlake.qc import QCAccumulator
from seqlake.tables import BY_NAME, RESULT_TABLES
from seqlake.trim import TrimStats
from seqlake.worker import (
    STAGES,
    ShardManifest,
    accumulator_from_tables,
    manifest_uri,
    part_uri,
    qc_tables,
    summary_rows,
)


@dataclass
class RunTotals:
    """What ``status.json`` and the ``runs`` table need from the merge."""

    run_id: str
    shards: int
    #: raw reads and bases over all samples and mates
    reads: int = 0
    bases: int = 0
    #: per sample: the ``qc_summary`` rows (as dicts)
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: rows written per result table
    rows: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _SampleFold:
    """The running sums of one sample."""

    def __init__(self, sample: str) -> None:
        self.sample = sample
        self.mates: list[int] = []
        self.accs: dict[tuple[int, str], QCAccumulator] = {}
        self.trim: dict[int, TrimStats] = {}
        self.align: dict[int, AlignStats] = {}
        self.aligned = False
        self.coverage: CoverageAccumulator | None = None

    def add(self, plan: Plan, m: ShardManifest) -> None:
        if not self.mates:
            self.mates = list(m.mates)
            self.accs = {(mate, s): QCAccumulator() for mate in self.mates for s in STAGES}
            self.trim = {mate: TrimStats() for mate in self.mates}
            self.align = {mate: AlignStats() for mate in self.mates}
        tables = {
            t: read_table(part_uri(plan, m.sample, m.shard, t)) for t in ("qc_position", "length_hist", "quality_hist")
        }
        for t, table in tables.items():
            _check_rows(m, t, table.num_rows)
        for mate in self.mates:
            for stage in STAGES:
                pos, lh, qh = (_select(tables[t], mate, stage) for t in ("qc_position", "length_hist", "quality_hist"))
                expected = m.totals[f"{mate}/{stage}"]
                acc = accumulator_from_tables(pos, lh, qh, gap_bases=expected["gap_bases"])
                if acc.reads != expected["reads"] or acc.bases != expected["bases"]:
                    raise SeqlakeError(f"shard {m.shard} of sample {m.sample}: QC parts disagree with its manifest")
                self.accs[(mate, stage)].merge(acc)
            self.trim[mate].merge(TrimStats(**m.totals[f"{mate}/trim"]))
            self.align[mate].merge(AlignStats(**m.totals[f"{mate}/align"]))
        if plan.reference:
            self.aligned = True
            self._add_coverage(plan, m)

    def _add_coverage(self, plan: Plan, m: ShardManifest) -> None:
        cov = read_table(part_uri(plan, m.sample, m.shard, "coverage"))
        ivl = read_table(part_uri(plan, m.sample, m.shard, "coverage_intervals"))
        _check_rows(m, "coverage", cov.num_rows)
        _check_rows(m, "coverage_intervals", ivl.num_rows)
        contig = cov.column("contig").to_pylist()
        ends = cov.column("bin_end").to_numpy()
        depth = cov.column("depth_sum").to_numpy()
        if self.coverage is None:
            lengths: dict[str, int] = {}
            for c, e in zip(contig, ends.tolist(), strict=True):
                lengths[c] = max(lengths.get(c, 0), e)
            width = plan.params.coverage_bin
            self.coverage = CoverageAccumulator(list(lengths.items()), width)
        offset = 0
        for cc in self.coverage.contigs.values():
            n = len(cc.depth_sum)
            cc.depth_sum += depth[offset : offset + n]
            offset += n
        ivl_contig = np.asarray(ivl.column("contig").to_pylist(), dtype=object)
        starts = ivl.column("start").to_numpy()
        stops = ivl.column("end").to_numpy()
        for name, cc in self.coverage.contigs.items():
            mask = ivl_contig == name
            if mask.any():
                cc.add_union(starts[mask], stops[mask])

    def accumulators(self) -> list[tuple[tuple[int, str], QCAccumulator]]:
        return [((mate, s), self.accs[(mate, s)]) for mate in self.mates for s in STAGES]


def _select(table: pa.Table, mate: int, stage: str) -> pa.Table:
    mask = pc.and_(pc.equal(table["mate"], mate), pc.equal(table["stage"], stage))
    return table.filter(mask)


def _check_rows(m: ShardManifest, table: str, rows: int) -> None:
    if m.rows.get(table) != rows:
        raise SeqlakeError(
            f"shard {m.shard} of sample {m.sample}: {table} has {rows} rows, its manifest says {m.rows.get(table)}"
        )


def load_manifest(plan: Plan, shard: int) -> ShardManifest:
    """A shard's manifest; a missing one fails the run naming the shard."""
    sample = plan.shards[shard].sample
    uri = manifest_uri(plan, sample, shard)
    if not storage.exists(uri):
        raise SeqlakeError(f"shard {shard} (sample {sample}) has no manifest at {uri}: it did not finish")
    m = ShardManifest.from_json(storage.read_bytes(uri))
    if m.run_id != plan.run_id or m.shard != shard or m.sample != sample:
        raise SeqlakeError(f"shard {shard}: its manifest belongs to run {m.run_id}, shard {m.shard}")
    return m


def result_uri(plan: Plan, table: str, name: str = "part-0.parquet") -> str:
    return storage.join(plan.results_prefix, table, f"run_id={plan.run_id}", name)


def _alignment_rows(uri: str) -> int:
    with storage.open_read(uri) as f:
        return int(pq.read_metadata(f).num_rows)


def verify_shards(plan: Plan) -> None:
    """Every shard finished: its manifest exists and its alignments part has the rows it says
    (the other parts are checked as they are folded). Nothing is kept: memory stays flat."""
    for i in range(plan.array_size):
        m = load_manifest(plan, i)
        src = part_uri(plan, m.sample, m.shard, "alignments")
        if not storage.exists(src):
            raise SeqlakeError(f"shard {m.shard} (sample {m.sample}) has no alignments part at {src}")
        _check_rows(m, "alignments", _alignment_rows(src))


def merge_run(plan: Plan) -> RunTotals:
    """Check every shard, merge, and write the run's result tables (see the module docstring)."""
    verify_shards(plan)  # before anything is written under results/
    totals = RunTotals(plan.run_id, plan.array_size)
    align_rows = 0
    folds = {sample: _SampleFold(sample) for sample in plan.samples}
    for i in range(plan.array_size):
        m = load_manifest(plan, i)
        if m.rows.get("alignments"):
            storage.copy(
                part_uri(plan, m.sample, m.shard, "alignments"),
                result_uri(plan, "alignments", f"{m.sample}-shard={m.shard:05d}.parquet"),
            )
            align_rows += m.rows["alignments"]
        folds[m.sample].add(plan, m)
    if not align_rows:  # every table gets a partition, even an empty one (no reference, no reads)
        write_table(result_uri(plan, "alignments"), BY_NAME["alignments"].schema.empty_table())
    out: dict[str, list[pa.Table]] = {t: [] for t in RESULT_TABLES if t != "alignments"}
    for sample, fold in folds.items():
        accs = fold.accumulators()
        summary = summary_rows(sample, accs, fold.trim, fold.align if fold.aligned else None, fold.coverage)
        out["qc_summary"].append(to_arrow("qc_summary", summary))
        for table, cols in qc_tables(sample, accs):
            out[table].append(to_arrow(table, cols))
        if fold.coverage is not None:
            out["coverage"].append(to_arrow("coverage", fold.coverage.rows(sample)))
        rows = out["qc_summary"][-1].to_pylist()
        totals.samples[sample] = rows
        for r in rows:
            if r["stage"] == "raw":
                totals.reads += r["reads"]
                totals.bases += r["bases"]
    for table, parts in out.items():
        merged = pa.concat_tables(parts) if parts else BY_NAME[table].schema.empty_table()
        write_table(result_uri(plan, table), merged)
        totals.rows[table] = merged.num_rows
    totals.rows["alignments"] = align_rows
    return totals
