"""The shard contract: what a Batch child leaves for the commit, and how the commit reads it.

A child (one Batch array index) processes one or more shards (a shard is a piece of one sample). It
leaves, under ``runs/<id>/staging/child=NNNNN/`` (:class:`seqlake.base.layout.RunLayout`):

- ``manifest.json``, written last (its presence means the child is done): per shard, every additive
  aggregate the result tables are computed from (QC histograms and per-cycle sums per mate and
  stage, trimming and alignment counters), the alignments part's row count and size, and the window its
  positions object is cut at (the object holds its own index). Everything but the per-position tables
  travels in this one object, so the commit reads one small object per child.
- with a reference, ``positions.arrows``: its per-position staging tables
  (:data:`seqlake.lake.tables.STAGING_TABLES`: the non-zero depth bins, the covered-interval union and
  the exact depth runs (:mod:`seqlake.lake.depth`) of each of its samples), cut by region
  (:mod:`seqlake.lake.positions`), for the reducers (:mod:`seqlake.reduce.reducer`).
- its alignments, staged (``runs/<id>/parts/alignments/child=NNNNN.parquet``), which the commit publishes
  into their result partition.

Every number is an integer count or sum, so merging children is addition (covered intervals: a
union; depth runs: a capped sweep), exact and independent of the order children are read in. Nothing here depends on the
worker's libraries (cutadapt, mappy, dnaio): the commit imports this module, not the worker.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pyarrow as pa

from seqlake.lake.coverage import CoverageAccumulator
from seqlake.lake.depth import DepthAccumulator
from seqlake.lake.positions import dictionary_column, table_from_arrays
from seqlake.lake.qc import NQ, PositionCounts, QCAccumulator
from seqlake.lake.readgroups import ReadGroup
from seqlake.lake.tables import COVERAGE_BINS, COVERED_INTERVALS, DEPTH_RUNS

#: 6: the positions object's index is in the object (:class:`seqlake.lake.positions.IndexLayout`), the manifest
#: keeps only the window it is cut at
MANIFEST_VERSION = 6
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
    """An accumulator as compact JSON: lengths as sparse pairs (long-read libraries have thousands of
    distinct lengths, short-read ones a few), the per-cycle counts as the blocks they are kept in
    (:func:`counts_to_json`: a long read's cycles in a few bytes each, not a JSON number each)."""
    lengths, counts = acc.lengths.nonzero()
    return {
        "reads": acc.reads,
        "gap_bases": acc.gap_bases,
        "lengths": [lengths.tolist(), counts[0].tolist()],
        "qual_counts": acc.qual_counts.tolist(),
        "read_qual_counts": acc.read_qual_counts.tolist(),
        "max_cycle": acc.max_cycle,
        "cycles": counts_to_json(acc.cycles, acc.max_cycle),
    }


def qc_from_json(d: Mapping[str, Any]) -> QCAccumulator:
    lengths, counts = (np.asarray(x, dtype=np.int64) for x in d["lengths"])
    acc = QCAccumulator()
    acc.reads = int(d["reads"])
    acc.gap_bases = int(d["gap_bases"])
    acc.max_cycle = int(d["max_cycle"])
    if len(lengths):
        dense = np.zeros(int(lengths[-1]) + 1, dtype=np.int64)
        dense[lengths] = counts
        acc.lengths.add(0, dense)
    acc.qual_counts = np.asarray(d["qual_counts"], dtype=np.int64).reshape(NQ)
    acc.read_qual_counts = np.asarray(d["read_qual_counts"], dtype=np.int64).reshape(NQ)
    counts_from_json(acc.cycles, d["cycles"])
    if acc.reads != int(counts.sum()) or acc.max_cycle != (int(lengths[-1]) if len(lengths) else 0):
        raise ValueError(f"QC aggregates disagree: {acc.reads} reads but the length histogram holds {counts.sum()}")
    return acc


def counts_to_json(counts: PositionCounts, n: int) -> list[list[Any]]:
    """The counts of positions 0..n-1, per block that holds any: [its first position, its little-endian
    numpy type, base64 of its counts (rows x positions, zlib level 1)]."""
    out: list[list[Any]] = []
    for b, (block, bound) in enumerate(zip(counts.blocks, counts.bounds, strict=True)):
        first = b * counts.block
        if bound and first < n:
            data = np.ascontiguousarray(block[:, : n - first], dtype=block.dtype.newbyteorder("<"))
            out.append([first, data.dtype.str, base64.b64encode(zlib.compress(data.tobytes(), 1)).decode("ascii")])
    return out


def counts_from_json(counts: PositionCounts, blocks: list[list[Any]]) -> None:
    """Add what :func:`counts_to_json` wrote to ``counts``."""
    for first, dtype, data in blocks:
        values = np.frombuffer(zlib.decompress(base64.b64decode(data)), dtype=np.dtype(dtype))
        counts.add(int(first), values.reshape(counts.rows, -1))


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
    #: the read groups of the shard's aligned reads, in the order first seen (the BAM header's ``@RG``)
    read_groups: list[ReadGroup] = field(default_factory=list)

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
            "read_groups": [g.to_json() for g in self.read_groups],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ShardResult:
        mates = [int(m) for m in d["mates"]]
        qc = {(m, s): qc_from_json(d["qc"][f"{m}/{s}"]) for m in mates for s in STAGES}
        align = None if d.get("align") is None else {m: AlignStats(**d["align"][str(m)]) for m in mates}
        align_qc = None if d.get("align_qc") is None else AlignQC.from_json(d["align_qc"])
        return cls(int(d["shard"]), str(d["sample"]), mates, qc,
                   {m: TrimStats(**d["trim"][str(m)]) for m in mates}, align, align_qc,
                   {str(k): str(v) for k, v in d.get("header", {}).items()},
                   [ReadGroup.from_json(g) for g in d.get("read_groups", [])])


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
    #: the window (bases) the child's positions object is cut at (0 without a reference): the reduce plan takes
    #: child 0's, every reducer checks each object's against it (:mod:`seqlake.lake.positions`)
    positions_window: int = 0
    #: rows of each staging part written as Parquet (the allele tables; empty without a reference)
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
            "positions_window": self.positions_window,
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
            positions_window=int(d.get("positions_window", 0)),
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


# ------------------------------------------------------------------------------- per-position tables
def staging_tables(by_sample: Mapping[str, CoverageAccumulator], depth: Mapping[str, DepthAccumulator],
                   samples: Sequence[str], contigs: Sequence[tuple[str, int]], bin_width: int) -> dict[str, pa.Table]:
    """A child's per-position staging tables (name -> table): the non-zero depth bins, the covered-interval
    unions and the exact depth runs of its samples, sorted by (sample, contig, position), built from NumPy."""
    contig_code = {name: i for i, name in enumerate(name for name, _ in contigs)}
    names = [name for name, _ in contigs]
    cols: dict[str, dict[str, list[Any]]] = {t.name: {c.name: [] for c in t.columns} for t in
                                             (COVERAGE_BINS, COVERED_INTERVALS, DEPTH_RUNS)}

    def put(table: str, sample: int, contig: str, **arrays: Any) -> None:
        n = len(next(iter(arrays.values())))
        if n == 0:
            return
        c = cols[table]
        c["sample"].append(np.full(n, sample, dtype=np.int32))
        c["contig"].append(np.full(n, contig_code[contig], dtype=np.int32))
        for k, v in arrays.items():
            c[k].append(v)

    for s, sample in enumerate(samples):
        cov = by_sample.get(sample)
        runs = depth[sample].profiles if sample in depth else {}
        for contig in names:
            if cov is not None:
                cc = cov.contigs[contig]
                nz = np.flatnonzero(cc.depth_sum)
                put("coverage_bins", s, contig, pos=nz.astype(np.int64) * bin_width, depth_sum=cc.depth_sum[nz])
                put("covered_intervals", s, contig, start=cc.union_start, stop=cc.union_end)
            p = runs.get(contig)
            if p is not None:
                put("depth_runs", s, contig, start=p.start, stop=p.end, depth=p.depth)
    out: dict[str, pa.Table] = {}
    for spec in (COVERAGE_BINS, COVERED_INTERVALS, DEPTH_RUNS):
        c = cols[spec.name]
        arrays: dict[str, Any] = {}
        for col in spec.columns:
            parts = c[col.name]
            joined = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
            if col.name in ("sample", "contig"):
                arrays[col.name] = dictionary_column(joined, list(samples) if col.name == "sample" else names)
            else:
                arrays[col.name] = joined
        out[spec.name] = table_from_arrays(spec, arrays)
    return out
