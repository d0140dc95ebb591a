"""The shard worker: raw QC -> trimming -> QC after trimming -> alignment -> coverage -> Parquet parts.

One shard of one sample is streamed chunk by chunk (:func:`seqlake.shards.iter_shard_chunks`), so
memory stays flat as inputs grow: per chunk, the raw records are parsed and validated once
(:func:`seqlake.qc.parse_chunk`), folded into the raw QC, trimmed (:mod:`seqlake.trim`), the kept
reads folded into the trimmed QC as views into the same buffer, aligned (:mod:`seqlake.align`) and
their spans added to the coverage bins (:mod:`seqlake.coverage`). Alignment rows are streamed into
their Parquet part in row groups of ~500k rows.

Parts go to ``<staging>/<sample>/shard=NNNNN/<table>.parquet``: keyed by run, sample and shard only,
never by attempt, so a retried child overwrites its own parts and nothing else. ``manifest.json``
is written last; its presence means the shard is done. Besides row counts it carries the additive
numbers that no table holds exactly (seqkit's ``sum_gap``, the MAPQ sum), so the commit step can
merge shards exactly.

With trimming off (``--no-trim``) the ``trimmed`` stage is still written, equal to ``raw``, so that
queries need not know how a run was made.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from seqlake import shards, storage
from seqlake.align import AlignmentColumns, AlignStats, ReadAligner, alignment_spans, resolve_reference
from seqlake.coverage import CoverageAccumulator
from seqlake.errors import BadInputError
from seqlake.parquet_io import PartWriter, local_tmp, to_arrow, write_table
from seqlake.plan import Plan
from seqlake.qc import NQ, ChunkRecords, QCAccumulator, parse_chunk, summarize
from seqlake.shards import Chunk
from seqlake.tables import QC_SUMMARY
from seqlake.trim import Trimmer, TrimStats, add_stats

STAGES = ("raw", "trimmed")
#: chunks above twice this size are cut into pieces of about this size (whole records)
SPLIT_BYTES = 4 << 20
#: alignment rows buffered as Python values before they become Arrow columns: Python rows cost ~10x
#: the memory of Arrow ones
ALIGN_BATCH_ROWS = 50_000
#: rows per row group of the ``alignments`` part, held in Arrow (~107 bytes a row) until written:
#: 100k rows bound the worker's memory at ~11 MB for them whatever the shard's size, for files only a
#: few per cent larger than with 500k-row groups
ALIGN_ROW_GROUP_ROWS = 100_000
#: the staging tables of a shard (``coverage_intervals`` is staging-only: see seqlake.coverage)
STAGING_TABLES = (
    "qc_summary",
    "qc_position",
    "length_hist",
    "quality_hist",
    "alignments",
    "coverage",
    "coverage_intervals",
)


def shard_prefix(plan: Plan, sample: str, shard: int) -> str:
    return storage.join(plan.staging_prefix, sample, f"shard={shard:05d}")


def part_uri(plan: Plan, sample: str, shard: int, table: str) -> str:
    return storage.join(shard_prefix(plan, sample, shard), f"{table}.parquet")


def manifest_uri(plan: Plan, sample: str, shard: int) -> str:
    return storage.join(shard_prefix(plan, sample, shard), "manifest.json")


@dataclass
class ShardManifest:
    """What a shard wrote; attempt-independent (no timings or host names in the row counts)."""

    run_id: str
    sample: str
    shard: int
    mates: list[int]
    rows: dict[str, int]
    #: per "mate/stage": reads, bases, gap_bases; per mate: trimming and alignment counts
    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ShardManifest:
        return cls(**json.loads(data))


def split_chunks(chunks: tuple[Chunk, ...], target: int = SPLIT_BYTES) -> Iterator[tuple[Chunk, ...]]:
    """Cut chunks larger than ``target`` into pieces of whole records (equal record counts per mate),
    so the worker's per-chunk arrays stay small whatever size of chunk the reader hands out."""
    first = chunks[0]
    if len(first.data) <= 2 * target or first.records < 2:
        yield chunks
        return
    per = max(1, first.records * target // len(first.data))
    cuts = list(range(per, first.records, per))
    offsets = []
    for c in chunks:
        newlines = np.flatnonzero(np.frombuffer(c.data, dtype=np.uint8) == 10)
        offsets.append([0, *(int(newlines[4 * k - 1]) + 1 for k in cuts), len(c.data)])
    starts = [0, *cuts, first.records]
    for i in range(len(starts) - 1):
        yield tuple(
            Chunk(
                c.mate,
                c.data[off[i] : off[i + 1]],
                c.first_record + starts[i],
                starts[i + 1] - starts[i],
                c.relative,
            )
            for c, off in zip(chunks, offsets, strict=True)
        )


def _mate_names_match(n1: list[str], n2: list[str]) -> int | None:
    """Index of the first pair whose names differ (ignoring a /1, /2 suffix), or None."""
    if n1 == n2:  # the usual case, compared in C
        return None
    for i, (a, b) in enumerate(zip(n1, n2, strict=True)):
        if a != b and not (a[-2:] in ("/1", "/2") and b[-2:] in ("/1", "/2") and a[:-2] == b[:-2]):
            return i
    return None


class _ShardRun:
    def __init__(self, plan: Plan, shard_index: int, tmp: str) -> None:
        self.plan = plan
        self.shard = plan.shards[shard_index]
        self.sample = self.shard.sample
        self.mates = [sp.mate for sp in self.shard.spans]
        self.paths = [plan.inputs[sp.input].uri for sp in self.shard.spans]
        self.params = plan.params
        self.raw = {m: QCAccumulator() for m in self.mates}
        self.trimmed = {m: QCAccumulator() for m in self.mates}
        self.trim_stats = {m: TrimStats() for m in self.mates}
        self.align_stats = {m: AlignStats() for m in self.mates}
        self.trimmer = Trimmer(self.params)
        self.aligner: ReadAligner | None = None
        self.coverage: CoverageAccumulator | None = None
        if plan.reference:
            index = resolve_reference(plan.reference, self.params.preset)
            self.aligner = ReadAligner(index, self.params.preset)
            self.coverage = CoverageAccumulator(self.aligner.contigs, self.params.coverage_bin)
        self.alignments = PartWriter(
            part_uri(plan, self.sample, self.shard.index, "alignments"), "alignments", tmp, ALIGN_ROW_GROUP_ROWS
        )
        self.pending = AlignmentColumns()

    def run(self) -> None:
        for big in shards.iter_shard_chunks(self.plan, self.shard.index):
            for chunks in split_chunks(big):
                self._process(chunks)
        self._flush(final=True)

    def _process(self, chunks: Sequence[Chunk]) -> None:
        try:
            recs = [parse_chunk(c.data, p, c.first_record) for c, p in zip(chunks, self.paths, strict=True)]
            for m, r in zip(self.mates, recs, strict=True):
                self.raw[m].add_chunk(r)
            names = recs[0].names()
            if len(recs) == 2:
                bad = _mate_names_match(names, recs[1].names())
                if bad is not None:
                    rec = chunks[0].first_record + bad
                    raise BadInputError(
                        self.paths[1],
                        f"read name {recs[1].names()[bad]!r} does not match "
                        f"its mate {names[bad]!r} in {self.paths[0]} (record {rec})",
                        line=4 * rec + 1,
                        record=rec,
                    )
        except BadInputError as err:
            if chunks[0].relative:
                raise shards.rebase_error(self.plan, self.shard.spans[0], err) from None
            raise
        self._trim_align(recs, names, chunks[0].first_record)

    def _trim_align(self, recs: list[ChunkRecords], names: list[str], first_record: int) -> None:
        trims = [self.trimmer.trim_mate(r.sequences(), r.qualities()) for r in recs]
        keep = self.trimmer.filter(trims)
        for m, r, t in zip(self.mates, recs, trims, strict=True):
            add_stats(self.trim_stats[m], t, keep)
            start = t.start[keep]
            self.trimmed[m].add(r.data, r.seq_start[keep] + start, r.qual_start[keep] + start, t.length[keep])
        if self.aligner is None:
            return
        index: Sequence[int]
        if keep.all():
            kept_names, index = names, range(first_record, first_record + len(names))
            seqs = [t.sequences for t in trims]
        else:
            kept = np.flatnonzero(keep).tolist()
            kept_names = [names[i] for i in kept]
            index = [first_record + i for i in kept]
            seqs = [[t.sequences[i] for i in kept] for t in trims]
        if len(recs) == 2:
            self.aligner.align_pairs(
                kept_names, seqs[0], seqs[1], index, out=self.pending, stats=(self.align_stats[1], self.align_stats[2])
            )
        else:
            self.aligner.align_single(
                kept_names, seqs[0], index, out=self.pending, stats=self.align_stats[self.mates[0]]
            )
        self._flush()

    def _flush(self, final: bool = False) -> None:
        """Pending alignment rows -> one Arrow batch -> the coverage bins and the Parquet part."""
        if len(self.pending) >= ALIGN_BATCH_ROWS or (final and len(self.pending)):
            table = self.pending.to_arrow(self.sample, self.alignments.schema)
            if self.coverage is not None:
                for contig, starts, ends in alignment_spans(table):
                    self.coverage.add_intervals(contig, starts, ends)
            self.alignments.write_arrow(table)
            self.pending = AlignmentColumns()

    # -- the per-shard tables ------------------------------------------------------------------
    def write_parts(self) -> ShardManifest:
        self.alignments.close()
        rows = {"alignments": self.alignments.rows}

        def uri(table: str) -> str:
            return part_uri(self.plan, self.sample, self.shard.index, table)

        for table, cols in (("qc_summary", self.summary_rows()), *qc_tables(self.sample, self.stage_accs())):
            t = to_arrow(table, cols)
            write_table(uri(table), t)
            rows[table] = t.num_rows
        if self.coverage is not None:
            cov = to_arrow("coverage", self.coverage.rows(self.sample))
            ivl = coverage_interval_table(self.coverage.interval_rows(self.sample))
        else:
            cov = to_arrow(
                "coverage",
                {
                    c: []
                    for c in (
                        "sample",
                        "contig",
                        "bin_start",
                        "bin_end",
                        "depth_sum",
                        "mean_depth",
                        "covered_bases",
                    )
                },
            )
            ivl = coverage_interval_table({"sample": [], "contig": [], "start": [], "end": []})
        write_table(uri("coverage"), cov)
        write_table(uri("coverage_intervals"), ivl)
        rows["coverage"] = cov.num_rows
        rows["coverage_intervals"] = ivl.num_rows
        totals: dict[str, dict[str, int]] = {}
        for (mate, stage), acc in self.stage_accs():
            totals[f"{mate}/{stage}"] = {"reads": acc.reads, "bases": acc.bases, "gap_bases": acc.gap_bases}
        for m in self.mates:
            totals[f"{m}/trim"] = self.trim_stats[m].as_dict()
            totals[f"{m}/align"] = asdict(self.align_stats[m])
        return ShardManifest(self.plan.run_id, self.sample, self.shard.index, self.mates, rows, totals)

    def stage_accs(self) -> list[tuple[tuple[int, str], QCAccumulator]]:
        return [((m, s), (self.raw if s == "raw" else self.trimmed)[m]) for m in self.mates for s in STAGES]

    def summary_rows(self) -> dict[str, list[Any]]:
        return summary_rows(
            self.sample,
            self.stage_accs(),
            self.trim_stats,
            self.align_stats if self.aligner else None,
            self.coverage,
        )


def coverage_interval_table(cols: dict[str, list[Any]]) -> pa.Table:
    schema = pa.schema(
        [
            pa.field("sample", pa.string(), False),
            pa.field("contig", pa.string(), False),
            pa.field("start", pa.int64(), False),
            pa.field("end", pa.int64(), False),
        ]
    )
    return pa.table(cols, schema=schema)


def summary_rows(
    sample: str,
    accs: list[tuple[tuple[int, str], QCAccumulator]],
    trim_stats: dict[int, TrimStats],
    align_stats: dict[int, AlignStats] | None,
    coverage: CoverageAccumulator | None,
) -> dict[str, list[Any]]:
    """``qc_summary`` columns. Trimming, alignment and coverage columns are on ``trimmed`` rows only
    (null on ``raw`` rows); mean depth and breadth are per sample (both mates' rows carry them)."""
    rows: list[dict[str, Any]] = []
    depth, breadth = coverage.mean_depth_and_breadth() if coverage is not None else (None, None)
    for (mate, stage), acc in accs:
        s = summarize(acc)
        s.pop("sum_gap")
        row: dict[str, Any] = {"sample": sample, "mate": mate, "stage": stage, **s}
        trimmed = stage == "trimmed"
        row.update({k: (v if trimmed else None) for k, v in trim_stats[mate].as_dict().items()})
        a = align_stats[mate] if align_stats is not None and trimmed else None
        row["mapped_reads"] = a.mapped_reads if a else None
        row["properly_paired"] = a.properly_paired if a else None
        row["mean_mapq"] = (a.mapq_sum / a.mapped_reads if a.mapped_reads else None) if a else None
        row["mean_depth"] = depth if a else None
        row["breadth"] = breadth if a else None
        rows.append(row)
    return {c.name: [r[c.name] for r in rows] for c in QC_SUMMARY.columns}


def qc_tables(sample: str, accs: list[tuple[tuple[int, str], QCAccumulator]]) -> list[tuple[str, dict[str, list[Any]]]]:
    """``qc_position``, ``length_hist`` and ``quality_hist`` columns of some accumulators."""
    pos: dict[str, list[Any]] = {
        k: []
        for k in (
            "sample",
            "mate",
            "stage",
            "cycle",
            "reads",
            "mean_qual",
            "qual_sum",
            "a",
            "c",
            "g",
            "t",
            "n",
        )
    }
    lh: dict[str, list[Any]] = {k: [] for k in ("sample", "mate", "stage", "length", "reads")}
    qh: dict[str, list[Any]] = {k: [] for k in ("sample", "mate", "stage", "quality", "bases", "reads")}
    for (mate, stage), acc in accs:
        ncyc = acc.max_cycle
        reads_at = acc.reads_per_cycle()
        key: tuple[list[Any], ...] = ([sample], [mate], [stage])
        for col, v in zip(("sample", "mate", "stage"), key, strict=True):
            pos[col] += v * ncyc
        pos["cycle"] += list(range(1, ncyc + 1))
        pos["reads"] += reads_at.tolist()
        qsum = acc.cycle_qual_sum[:ncyc]
        pos["qual_sum"] += qsum.tolist()
        pos["mean_qual"] += (qsum / np.maximum(reads_at, 1)).tolist()
        for k, col in enumerate("acgtn"):
            pos[col] += acc.cycle_bases[k, :ncyc].tolist()
        lengths = np.flatnonzero(acc.length_counts)
        for col, v in zip(("sample", "mate", "stage"), key, strict=True):
            lh[col] += v * len(lengths)
        lh["length"] += lengths.tolist()
        lh["reads"] += acc.length_counts[lengths].tolist()
        quals = np.flatnonzero(acc.qual_counts + acc.read_qual_counts)
        for col, v in zip(("sample", "mate", "stage"), key, strict=True):
            qh[col] += v * len(quals)
        qh["quality"] += quals.tolist()
        qh["bases"] += acc.qual_counts[quals].tolist()
        qh["reads"] += acc.read_qual_counts[quals].tolist()
    return [("qc_position", pos), ("length_hist", lh), ("quality_hist", qh)]


def accumulator_from_tables(position: Any, lengths: Any, quality: Any, gap_bases: int) -> QCAccumulator:
    """Rebuild an accumulator from one shard's ``qc_position`` / ``length_hist`` / ``quality_hist``
    rows (already filtered to one mate and stage as numpy-convertible Arrow tables)."""
    acc = QCAccumulator()
    ln = np.asarray(lengths["length"], dtype=np.int64)
    if len(ln):
        acc.length_counts = np.zeros(int(ln.max()) + 1, dtype=np.int64)
        acc.length_counts[ln] = np.asarray(lengths["reads"], dtype=np.int64)
    acc.reads = int(acc.length_counts.sum())
    q = np.asarray(quality["quality"], dtype=np.int64)
    acc.qual_counts = np.zeros(NQ, dtype=np.int64)
    acc.read_qual_counts = np.zeros(NQ, dtype=np.int64)
    acc.qual_counts[q] = np.asarray(quality["bases"], dtype=np.int64)
    acc.read_qual_counts[q] = np.asarray(quality["reads"], dtype=np.int64)
    cyc = np.asarray(position["cycle"], dtype=np.int64) - 1
    ncyc = int(cyc.max()) + 1 if len(cyc) else 0
    acc.cycle_qual_sum = np.zeros(max(ncyc, 1), dtype=np.int64)
    acc.cycle_bases = np.zeros((5, max(ncyc, 1)), dtype=np.int64)
    acc.cycle_qual_sum[cyc] = np.asarray(position["qual_sum"], dtype=np.int64)
    for k, col in enumerate("acgtn"):
        acc.cycle_bases[k, cyc] = np.asarray(position[col], dtype=np.int64)
    acc.gap_bases = gap_bases
    return acc


def process_shard(plan: Plan, shard_index: int) -> ShardManifest:
    """Process one shard and write its parts, then its manifest (see the module docstring)."""
    t0 = time.perf_counter()
    with local_tmp() as tmp:
        run = _ShardRun(plan, shard_index, tmp)
        run.run()
        manifest = run.write_parts()
    manifest.seconds = round(time.perf_counter() - t0, 3)
    storage.write_bytes(manifest_uri(plan, manifest.sample, manifest.shard), manifest.to_json())
    return manifest
