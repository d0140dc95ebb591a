"""The shard contract: what a Batch child leaves for the commit, and how the commit reads it.

A child (one Batch array index) processes one or more shards (a shard is a piece of one sample). It
leaves, under ``runs/<id>/staging/child=NNNNN/`` (:class:`seqlake.layout.RunLayout`):

- ``manifest.json``, written last (its presence means the child is done): per shard, every additive
  aggregate the result tables are computed from (QC histograms and per-cycle sums per mate and
  stage, trimming and alignment counters), the alignments part's row count and size, and the
  coverage parts' row counts. Everything but coverage travels in this one object, so the commit
  reads one small object per child.
- with a reference, two coverage parts (schemas in :data:`seqlake.tables.STAGING_TABLES`): the
  non-zero depth bins and the covered-interval union of each of the child's samples.
- its alignments, in the result partition (``results/alignments/run_id=<id>/child=NNNNN.parquet``).

Every number is an integer count or sum, so merging children is addition (covered intervals: a
union), exact and independent of the order children are read in. Nothing here depends on the
worker's libraries (cutadapt, mappy, dnaio): the commit imports this module, not the worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pyarrow as pa

from seqlake.coverage import CoverageAccumulator
from seqlake.qc import NQ, QCAccumulator
from seqlake.tables import COVERAGE_BINS, COVERED_INTERVALS

MANIFEST_VERSION = 2
STAGES = ("raw", "trimmed")


@dataclass
class TrimStats:
    """Additive trimming counts of one (sample, mate); the ``qc_summary`` trimmed-stage columns."""

    reads_adapter_trimmed: int = 0
    bases_quality_trimmed: int = 0
    bases_adapter_trimmed: int = 0
    reads_too_short: int = 0
    bases_too_short: int = 0

    def merge(self, other: TrimStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class AlignStats:
    """Additive alignment counts per mate (``qc_summary``)."""

    mapped_reads: int = 0
    properly_paired: int = 0
    mapq_sum: int = 0

    def merge(self, other: AlignStats) -> None:
        self.mapped_reads += other.mapped_reads
        self.properly_paired += other.properly_paired
        self.mapq_sum += other.mapq_sum


# ------------------------------------------------------------------------------- QC in JSON
def qc_to_json(acc: QCAccumulator) -> dict[str, Any]:
    """An accumulator as compact JSON: arrays cut to the longest read, lengths as sparse pairs
    (long-read libraries have thousands of distinct lengths, short-read ones a few)."""
    m = acc.max_cycle
    lengths = np.flatnonzero(acc.length_counts)
    return {
        "reads": acc.reads,
        "gap_bases": acc.gap_bases,
        "lengths": [lengths.tolist(), acc.length_counts[lengths].tolist()],
        "qual_counts": acc.qual_counts.tolist(),
        "read_qual_counts": acc.read_qual_counts.tolist(),
        "cycle_qual_sum": acc.cycle_qual_sum[:m].tolist(),
        "cycle_bases": acc.cycle_bases[:, :m].tolist(),
    }


def qc_from_json(d: Mapping[str, Any]) -> QCAccumulator:
    lengths, counts = (np.asarray(x, dtype=np.int64) for x in d["lengths"])
    m = int(lengths[-1]) if len(lengths) else 0
    acc = QCAccumulator()
    acc.reads = int(d["reads"])
    acc.gap_bases = int(d["gap_bases"])
    acc.length_counts = np.zeros(max(m + 1, 1), dtype=np.int64)
    acc.length_counts[lengths] = counts
    acc.qual_counts = np.asarray(d["qual_counts"], dtype=np.int64).reshape(NQ)
    acc.read_qual_counts = np.asarray(d["read_qual_counts"], dtype=np.int64).reshape(NQ)
    acc.cycle_qual_sum = np.zeros(max(m, 1), dtype=np.int64)
    acc.cycle_qual_sum[:m] = np.asarray(d["cycle_qual_sum"], dtype=np.int64)
    acc.cycle_bases = np.zeros((5, max(m, 1)), dtype=np.int64)
    if m:
        acc.cycle_bases[:, :m] = np.asarray(d["cycle_bases"], dtype=np.int64)
    if acc.reads != int(counts.sum()):
        raise ValueError(f"QC aggregates disagree: {acc.reads} reads but the length histogram holds {counts.sum()}")
    return acc


# ------------------------------------------------------------------------------- one shard
@dataclass
class ShardResult:
    """One shard's additive aggregates (``align`` is None when the run has no reference)."""

    shard: int
    sample: str
    mates: list[int]
    qc: dict[tuple[int, str], QCAccumulator]
    trim: dict[int, TrimStats]
    align: dict[int, AlignStats] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "shard": self.shard,
            "sample": self.sample,
            "mates": self.mates,
            "qc": {f"{mate}/{stage}": qc_to_json(acc) for (mate, stage), acc in self.qc.items()},
            "trim": {str(m): t.as_dict() for m, t in self.trim.items()},
            "align": None if self.align is None else {str(m): asdict(a) for m, a in self.align.items()},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ShardResult:
        mates = [int(m) for m in d["mates"]]
        qc = {(m, s): qc_from_json(d["qc"][f"{m}/{s}"]) for m in mates for s in STAGES}
        align = None if d.get("align") is None else {m: AlignStats(**d["align"][str(m)]) for m in mates}
        return cls(int(d["shard"]), str(d["sample"]), mates, qc,
                   {m: TrimStats(**d["trim"][str(m)]) for m in mates}, align)


@dataclass(frozen=True)
class PartInfo:
    """A Parquet part a child wrote: rows and bytes (the commit checks both against a listing)."""

    rows: int
    bytes: int


@dataclass
class ChildManifest:
    """What one child wrote; independent of the attempt (a retried child writes the same manifest
    but for ``seconds``)."""

    run_id: str
    child: int
    shards: list[ShardResult]
    #: None when the run has no reference (no alignments part)
    alignments: PartInfo | None = None
    #: rows of each coverage staging part (empty without a reference)
    coverage_rows: dict[str, int] = field(default_factory=dict)
    #: reference contigs and lengths (the coverage parts hold non-zero bins only)
    contigs: list[tuple[str, int]] = field(default_factory=list)
    seconds: float = 0.0
    version: int = MANIFEST_VERSION

    @property
    def shard_indexes(self) -> list[int]:
        return [s.shard for s in self.shards]

    def to_json(self) -> bytes:
        body = {
            "version": self.version,
            "run_id": self.run_id,
            "child": self.child,
            "shards": [s.to_json() for s in self.shards],
            "alignments": None if self.alignments is None else asdict(self.alignments),
            "coverage_rows": self.coverage_rows,
            "contigs": [list(c) for c in self.contigs],
            "seconds": self.seconds,
        }
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ChildManifest:
        d = json.loads(data)
        if d.get("version") != MANIFEST_VERSION:
            raise ValueError(f"manifest version {d.get('version')}, this code reads {MANIFEST_VERSION}")
        a = d.get("alignments")
        return cls(
            run_id=d["run_id"], child=int(d["child"]), shards=[ShardResult.from_json(s) for s in d["shards"]],
            alignments=None if a is None else PartInfo(int(a["rows"]), int(a["bytes"])),
            coverage_rows={k: int(v) for k, v in d.get("coverage_rows", {}).items()},
            contigs=[(str(n), int(length)) for n, length in d.get("contigs", [])],
            seconds=float(d.get("seconds", 0.0)), version=int(d["version"]))

    def belongs_to(self, run_id: str, child: int, shards: Iterable[int]) -> bool:
        """Is this the finished work of ``child`` of run ``run_id``, covering exactly ``shards``?"""
        return self.run_id == run_id and self.child == child and self.shard_indexes == list(shards)


# ------------------------------------------------------------------------------- coverage parts
def coverage_parts(by_sample: Mapping[str, CoverageAccumulator]) -> tuple[pa.Table, pa.Table]:
    """The non-zero depth bins and the covered-interval unions of a child's samples."""
    bins: dict[str, list[Any]] = {c.name: [] for c in COVERAGE_BINS.columns}
    ivl: dict[str, list[Any]] = {c.name: [] for c in COVERED_INTERVALS.columns}
    for sample, cov in by_sample.items():
        for contig, cc in cov.contigs.items():
            nz = np.flatnonzero(cc.depth_sum)
            bins["sample"] += [sample] * len(nz)
            bins["contig"] += [contig] * len(nz)
            bins["bin"] += nz.tolist()
            bins["depth_sum"] += cc.depth_sum[nz].tolist()
            n = len(cc.union_start)
            ivl["sample"] += [sample] * n
            ivl["contig"] += [contig] * n
            ivl["start"] += cc.union_start.tolist()
            ivl["stop"] += cc.union_end.tolist()
    return (pa.table(bins, schema=COVERAGE_BINS.schema), pa.table(ivl, schema=COVERED_INTERVALS.schema))


def add_coverage_parts(by_sample: Mapping[str, CoverageAccumulator], bins: pa.Table, intervals: pa.Table) -> None:
    """Add a child's coverage parts to per-sample accumulators (which hold every sample it names)."""
    for table, add in ((bins, _add_bins), (intervals, _add_intervals)):
        if table.num_rows == 0:
            continue
        keys = table.select(["sample", "contig"]).to_pylist()
        cols = {name: table.column(name).to_numpy() for name in table.column_names if name not in ("sample", "contig")}
        start = 0
        for i in range(1, len(keys) + 1):
            if i == len(keys) or keys[i] != keys[start]:
                cc = by_sample[keys[start]["sample"]].contigs[keys[start]["contig"]]
                add(cc, {k: v[start:i] for k, v in cols.items()})
                start = i


def _add_bins(cc: Any, cols: Mapping[str, Any]) -> None:
    np.add.at(cc.depth_sum, cols["bin"], cols["depth_sum"])


def _add_intervals(cc: Any, cols: Mapping[str, Any]) -> None:
    cc.add_union(cols["start"].astype(np.int64), cols["stop"].astype(np.int64))
