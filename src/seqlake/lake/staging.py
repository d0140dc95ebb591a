"""The shard contract: what a Batch child leaves for the commit, and how the commit reads it.

A child (one Batch array index) processes one or more shards (a shard is a piece of one sample). It
leaves, under ``runs/<id>/staging/child=NNNNN/`` (:class:`seqlake.base.layout.RunLayout`):

- ``manifest.json``, written last (its presence means the child is done): per shard, every additive
  aggregate the result tables are computed from (QC histograms and per-cycle sums per mate and
  stage, trimming and alignment counters), the alignments part's row count and size, and the
  coverage parts' row counts. Everything but coverage travels in this one object, so the commit
  reads one small object per child.
- with a reference, three coverage parts (schemas in :data:`seqlake.lake.tables.STAGING_TABLES`): the
  non-zero depth bins, the covered-interval union and the exact depth runs (:mod:`seqlake.lake.depth`)
  of each of the child's samples.
- its alignments, in the result partition (``results/alignments/run_id=<id>/child=NNNNN.parquet``).

Every number is an integer count or sum, so merging children is addition (covered intervals: a
union; depth runs: a capped sweep), exact and independent of the order children are read in. Nothing here depends on the
worker's libraries (cutadapt, mappy, dnaio): the commit imports this module, not the worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pyarrow as pa

from seqlake.lake.coverage import CoverageAccumulator
from seqlake.lake.depth import DepthAccumulator, Profile
from seqlake.lake.qc import NQ, QCAccumulator
from seqlake.lake.tables import COVERAGE_BINS, COVERED_INTERVALS, DEPTH_RUNS

MANIFEST_VERSION = 3
STAGES = ("raw", "trimmed")


@dataclass
class TrimStats:
    """Additive trimming counts of one (sample, mate); the ``qc_summary`` trimmed-stage columns."""

    reads_adapter_trimmed: int = 0
    #: reads with at least :data:`seqlake.child.trim.ADAPTER_QC_MIN` adapter bases removed
    reads_adapter_8bp: int = 0
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


def _add_counts(a: dict[Any, int], b: Mapping[Any, int]) -> None:
    for k, v in b.items():
        a[k] = a.get(k, 0) + v


@dataclass
class AlignQC:
    """Additive alignment QC of one sample, as ``samtools stats`` counts it (rules in
    :mod:`seqlake.child.alignqc`), and the depth bases of every contig (primary + supplementary blocks)."""

    #: MAPQ -> primary mapped reads
    mapq_hist: dict[int, int] = field(default_factory=dict)
    #: |TLEN| -> pairs with both mates mapped (samtools stats' ``IS`` rows)
    insert_hist: dict[int, int] = field(default_factory=dict)
    #: sum of NM (samtools ``mismatches``)
    mismatches: int = 0
    #: M, I, = and X bases (samtools ``bases mapped (cigar)``)
    bases_mapped_cigar: int = 0
    soft_clipped_bases: int = 0
    #: contig -> sum of per-base depth (``samtools depth`` semantics)
    depth_bases: dict[str, int] = field(default_factory=dict)

    def merge(self, other: AlignQC) -> None:
        _add_counts(self.mapq_hist, other.mapq_hist)
        _add_counts(self.insert_hist, other.insert_hist)
        _add_counts(self.depth_bases, other.depth_bases)
        self.mismatches += other.mismatches
        self.bases_mapped_cigar += other.bases_mapped_cigar
        self.soft_clipped_bases += other.soft_clipped_bases

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("mapq_hist", "insert_hist"):
            d[k] = {str(q): n for q, n in sorted(d[k].items())}
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AlignQC:
        return cls({int(k): int(v) for k, v in d["mapq_hist"].items()},
                   {int(k): int(v) for k, v in d["insert_hist"].items()},
                   int(d["mismatches"]), int(d["bases_mapped_cigar"]), int(d["soft_clipped_bases"]),
                   {str(k): int(v) for k, v in d["depth_bases"].items()})


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
    align_qc: AlignQC | None = None
    #: Illumina fields of the shard's first read name (:func:`seqlake.base.metadata.illumina_fields`)
    header: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "shard": self.shard,
            "sample": self.sample,
            "mates": self.mates,
            "qc": {f"{mate}/{stage}": qc_to_json(acc) for (mate, stage), acc in self.qc.items()},
            "trim": {str(m): t.as_dict() for m, t in self.trim.items()},
            "align": None if self.align is None else {str(m): asdict(a) for m, a in self.align.items()},
            "align_qc": None if self.align_qc is None else self.align_qc.to_json(),
            "header": self.header,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ShardResult:
        mates = [int(m) for m in d["mates"]]
        qc = {(m, s): qc_from_json(d["qc"][f"{m}/{s}"]) for m in mates for s in STAGES}
        align = None if d.get("align") is None else {m: AlignStats(**d["align"][str(m)]) for m in mates}
        align_qc = None if d.get("align_qc") is None else AlignQC.from_json(d["align_qc"])
        return cls(int(d["shard"]), str(d["sample"]), mates, qc,
                   {m: TrimStats(**d["trim"][str(m)]) for m in mates}, align, align_qc,
                   {str(k): str(v) for k, v in d.get("header", {}).items()})


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
    #: contig -> MD5 of its sequence (SAM ``@SQ M5``); empty without a reference
    reference_md5: dict[str, str] = field(default_factory=dict)
    #: the key of the reference index the child aligned to (``ReferencePin.key``); None without a reference
    reference: str | None = None
    #: versions of the libraries that made the numbers (cutadapt, mappy)
    software: dict[str, str] = field(default_factory=dict)
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
            "reference_md5": self.reference_md5,
            "reference": self.reference,
            "software": self.software,
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
            reference_md5={str(k): str(v) for k, v in d.get("reference_md5", {}).items()},
            reference=d.get("reference"),
            software={str(k): str(v) for k, v in d.get("software", {}).items()},
            seconds=float(d.get("seconds", 0.0)), version=int(d["version"]))

    def belongs_to(self, run_id: str, child: int, shards: Iterable[int]) -> bool:
        """Is this the finished work of ``child`` of run ``run_id``, covering exactly ``shards``?"""
        return self.run_id == run_id and self.child == child and self.shard_indexes == list(shards)


def median_of_hist(hist: dict[int, int]) -> float | None:
    """The median of a histogram (the mean of the two middle values for an even count)."""
    total = sum(hist.values())
    if total == 0:
        return None
    keys = sorted(hist)
    cum = np.cumsum([hist[k] for k in keys])
    lo = keys[int(np.searchsorted(cum, (total + 1) // 2))]
    hi = keys[int(np.searchsorted(cum, total // 2 + 1))]
    return (lo + hi) / 2


# ------------------------------------------------------------------------------- coverage parts
def coverage_parts(by_sample: Mapping[str, CoverageAccumulator],
                   depth: Mapping[str, DepthAccumulator]) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The non-zero depth bins, the covered-interval unions and the exact depth runs of a child's samples."""
    bins: dict[str, list[Any]] = {c.name: [] for c in COVERAGE_BINS.columns}
    ivl: dict[str, list[Any]] = {c.name: [] for c in COVERED_INTERVALS.columns}
    runs: dict[str, list[Any]] = {c.name: [] for c in DEPTH_RUNS.columns}
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
    for sample, acc in depth.items():
        for contig, p in acc.profiles.items():
            runs["sample"] += [sample] * len(p)
            runs["contig"] += [contig] * len(p)
            runs["start"] += p.start.tolist()
            runs["stop"] += p.end.tolist()
            runs["depth"] += p.depth.tolist()
    return (pa.table(bins, schema=COVERAGE_BINS.schema), pa.table(ivl, schema=COVERED_INTERVALS.schema),
            pa.table(runs, schema=DEPTH_RUNS.schema))


def add_coverage_parts(by_sample: Mapping[str, CoverageAccumulator], depth: Mapping[str, DepthAccumulator],
                       bins: pa.Table, intervals: pa.Table, runs: pa.Table) -> None:
    """Add a child's coverage parts to per-sample accumulators (which hold every sample it names)."""
    for table, add in ((bins, _add_bins), (intervals, _add_intervals)):
        for sample, contig, cols in _groups(table):
            add(by_sample[sample].contigs[contig], cols)
    for sample, contig, cols in _groups(runs):
        depth[sample].add(contig, Profile(cols["start"].astype(np.int64), cols["stop"].astype(np.int64),
                                          cols["depth"].astype(np.int64)))


def _groups(table: pa.Table) -> Iterable[tuple[str, str, dict[str, Any]]]:
    """The rows of a staging part per (sample, contig), as numpy columns (rows are grouped)."""
    if table.num_rows == 0:
        return
    keys = table.select(["sample", "contig"]).to_pylist()
    cols = {name: table.column(name).to_numpy() for name in table.column_names if name not in ("sample", "contig")}
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            yield keys[start]["sample"], keys[start]["contig"], {k: v[start:i] for k, v in cols.items()}
            start = i


def _add_bins(cc: Any, cols: Mapping[str, Any]) -> None:
    np.add.at(cc.depth_sum, cols["bin"], cols["depth_sum"])


def _add_intervals(cc: Any, cols: Mapping[str, Any]) -> None:
    cc.add_union(cols["start"].astype(np.int64), cols["stop"].astype(np.int64))
