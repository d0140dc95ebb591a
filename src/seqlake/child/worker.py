"""The shard worker: raw QC -> trimming -> QC after trimming -> alignment -> coverage.

A Batch child processes the shards of its array index (:meth:`seqlake.plan.planfile.Plan.child_shards`: one
shard, or several small samples packed together). Each shard is streamed chunk by chunk
(:func:`seqlake.plan.shards.iter_shard_chunks`), so memory stays flat as inputs grow: per chunk, the raw
records are parsed and validated once (:func:`seqlake.reads.chunks.parse_chunk`), folded into the raw QC,
trimmed (:mod:`seqlake.child.trim`), the kept reads folded into the trimmed QC as views into the same
buffer, aligned (:mod:`seqlake.child.align`) and their spans added to the coverage bins
(:mod:`seqlake.lake.coverage`). Alignment rows stream into one Parquet part per child, in row groups.

What the child leaves is the shard contract of :mod:`seqlake.lake.staging`, at the paths of
:class:`seqlake.base.layout.RunLayout`: named by run and child only, never by attempt, so a retried child
overwrites its own objects and nothing else; ``manifest.json`` goes last.

With trimming off (``--no-trim``) the ``trimmed`` stage is still counted, equal to ``raw``, so that
queries need not know how a run was made.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.base import storage
from seqlake.base.cpus import threads_from_env
from seqlake.base.errors import BadInputError
from seqlake.base.limits import CHILD_ALLELE_ROWS, CHILD_BATCH_BASES, CHILD_MERGE_ROWS
from seqlake.base.metadata import illumina_fields
from seqlake.base.params import coverage_bin_width
from seqlake.child.align import AlignedBatch, PendingBatch, ReadAligner, alignment_spans
from seqlake.child.alignqc import alignment_qc
from seqlake.child.bamencode import encode_rows
from seqlake.child.primerclip import AmpliconCounts
from seqlake.child.trim import MateTrim, Trimmer, add_stats
from seqlake.lake.coverage import CoverageAccumulator
from seqlake.lake.depth import I64, DepthAccumulator, depth_blocks
from seqlake.lake.parquet_io import PartWriter, local_tmp, put_file
from seqlake.lake.pileup import ChunkReads, batch_inputs
from seqlake.lake.positions import RegionStream, write_positions
from seqlake.lake.qc import QCAccumulator
from seqlake.lake.readgroups import ShardGroups
from seqlake.lake.regions import reference_length, regions, window_size
from seqlake.lake.slices import SliceLayout, SliceSorter, child_samples
from seqlake.lake.staging import (
    STAGES,
    AlignQC,
    AlignStats,
    ChildManifest,
    PartInfo,
    ShardResult,
    TrimStats,
    staging_tables,
)
from seqlake.plan import shards
from seqlake.plan.childplan import PlanView
from seqlake.plan.reference import check_unchanged, load_contigs, local_index
from seqlake.plan.shards import Chunk
from seqlake.reads.chunks import ChunkRecords, parse_chunk

#: chunks above twice this size are cut into pieces of about this size (whole records)
SPLIT_BYTES = 4 << 20
#: alignment rows buffered as Python values before they become Arrow columns: Python rows cost ~10x
#: the memory of Arrow ones
ALIGN_BATCH_ROWS = 50_000
#: rows per row group of the ``alignments`` part, held in Arrow (~107 bytes a row) until written:
#: 100k rows bound the worker's memory at ~11 MB for them whatever the shard's size, for files only a
#: few per cent larger than with 500k-row groups
ALIGN_ROW_GROUP_ROWS = 100_000


@dataclass(frozen=True)
class MemoryBudget:
    """What a child holds of its per-position counts: allele rows summed in memory before they are spilled
    to its local disk, and rows merged at once when they are written (:mod:`seqlake.lake.spill`). The
    output is the same whatever the budget; only memory, disk and time change."""

    allele_rows: int = CHILD_ALLELE_ROWS.value
    merge_rows: int = CHILD_MERGE_ROWS.value
    batch_bases: int = CHILD_BATCH_BASES.value


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


class _Aligning:
    """What a child's shards share when the run has a reference: one index in memory (and the alignment
    processes that share it), one alignments part, and a coverage accumulator per sample. A context
    manager: leaving it stops the alignment processes and closes the part, whatever happened (as cutadapt's
    runners hold their workers), so a failure leaks no process."""

    def __init__(self, plan: PlanView, child: int, tmp: str, budget: MemoryBudget | None = None) -> None:
        assert plan.reference is not None
        self.budget = budget or MemoryBudget()
        self.spill = Path(tmp) / "spill"
        self.reference = plan.reference
        check_unchanged(self.reference)  # as the inputs are: a replaced reference fails the child
        contigs = load_contigs(self.reference)  # as the planner stored them beside the index: no sequence here
        #: the index's contigs (name, length) in index order, and their MD5s (SAM ``@SQ M5``)
        self.contigs = [(c.name, c.length) for c in contigs]
        self.reference_md5 = {c.name: c.md5 for c in contigs}
        index = local_index(self.reference)
        with contextlib.ExitStack() as stack:
            self.aligner = stack.enter_context(ReadAligner(index, plan.params.preset, threads=threads_from_env()))
            self.part = stack.enter_context(
                PartWriter(plan.layout.alignments_part(child), "alignments", tmp, ALIGN_ROW_GROUP_ROWS))
            self.primers = AmpliconCounts.of(plan.params.primer_bed, self.contigs)
            self._resources = stack.pop_all()
        self.coverage: dict[str, CoverageAccumulator] = {}
        self.depth: dict[str, DepthAccumulator] = {}
        #: the samples whose records the reducers count alleles from (allele counts on)
        self.counted: dict[str, None] = {}
        self.bin_width = coverage_bin_width(plan.params, reference_length(self.contigs))
        self.min_base_quality = plan.params.min_base_quality
        self.count = plan.params.allele_counts
        #: the child's reads as BAM records, sorted and cut by the reducers' windows (lake/slices)
        samples = child_samples(plan, child)
        self.slice_layout = SliceLayout(tuple(regions(self.contigs, plan.params.region_size)),
                                        window_size(self.bin_width), len(samples))
        from isal import isal_zlib  # the worker image has it; the Lambdas that import lake/slices do not

        self.slices = SliceSorter(self.contigs, self.slice_layout, samples, Path(tmp) / "reads-runs",
                                  codec=(isal_zlib, 2))

    def __enter__(self) -> _Aligning:
        return self

    def __exit__(self, *exc: object) -> None:
        self._resources.close()

    def coverage_of(self, sample: str) -> CoverageAccumulator:
        if sample not in self.coverage:
            self.coverage[sample] = CoverageAccumulator(self.contigs, self.bin_width)
            self.depth[sample] = DepthAccumulator()
        return self.coverage[sample]

    def take_chunk(self, sample: str, batch: AlignedBatch, reads: ChunkReads, groups: ShardGroups) -> None:
        """One aligned chunk's rows and reads into the sample's sorted BAM records (as the BAM holds them:
        primer-clipped in amplicon mode, each in its lane's read group), which the reducers count alleles
        from. The aligner's packed CIGARs are the records' unless the primers clipped them."""
        table = batch.rows
        # the primers clip the rows' CIGAR texts; without primers the aligner's packed CIGARs are the records'
        rows, bases = batch_inputs(table, reads, self.contigs, cigars=self.primers is not None)
        cigar: tuple[I64, npt.NDArray[np.uint32]] | None = batch.cigar
        if self.primers is not None:
            rows, cigar = self.primers.clip(sample, rows), None
        enc = encode_rows(rows, bases, mapq=_ints(table, "mapq"), nm=_ints(table, "nm"),
                          read_group=groups.of(rows.names), cigar=cigar)
        self.slices.add_encoded(sample, enc.data, enc.starts, enc.tid, enc.pos, enc.flag, enc.end)
        if self.count:  # its alleles and indels: counted by the reducers from these records (reduce/record_counts)
            self.counted.setdefault(sample, None)

    def allele_tables(self) -> dict[str, pa.Table]:
        """In amplicon mode the ``amplicon_reads`` staging table: every sample's rows, sample after sample. (The
        ``alleles`` and ``indels`` are the reducers' now, counted from the records.)"""
        parts = [self.primers.table(s) for s in sorted(self.counted)] if self.primers else []
        return {"amplicon_reads": pa.concat_tables(parts).combine_chunks()} if parts else {}

    def allele_streams(self) -> dict[str, RegionStream]:
        """No streamed staging table any more: the ``alleles`` are counted by the reducers."""
        return {}

    def close_counts(self) -> None:
        """Nothing to delete: the child no longer spills allele counts."""

    def add_batch(self, sample: str, table: pa.Table, blocks: Mapping[str, tuple[I64, I64]]) -> None:
        """One batch of a sample's alignment rows (and their aligned blocks) into its coverage bins and
        exact depth; in amplicon mode, of the rows with their primers clipped (viralrecon measures coverage
        after primer trimming: primer bases say nothing of the sample, and the neighbours' primers cover an
        amplicon that dropped out)."""
        coverage = self.coverage_of(sample)
        if self.primers is not None:
            table = self.primers.clipped_alignments(table)
            blocks = depth_blocks(table)
        for contig, starts, ends in alignment_spans(table):
            coverage.add_intervals(contig, starts, ends)
        self.depth[sample].add_blocks(blocks)


class _ShardRun:
    def __init__(self, plan: PlanView, shard_index: int, aligning: _Aligning | None) -> None:
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
        self.align_qc = AlignQC()
        self.header: dict[str, str] | None = None
        #: the read groups of the shard's reads (its samplesheet row's lane, else its read names')
        self.groups = ShardGroups(self.sample, plan.inputs[self.shard.spans[0].input].metadata, plan.params.preset)
        self.trimmer = Trimmer(self.params)
        self.aligning = aligning
        #: aligned chunks' rows not yet in the coverage bins and the Parquet part
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        #: chunks aligning behind this one (ReadAligner.submit_*), collected in order, and their reads
        #: (for the allele counts)
        self.aligning_chunks: deque[PendingBatch] = deque()
        self.chunk_reads: deque[ChunkReads] = deque()

    def run(self) -> None:
        for big in shards.iter_shard_chunks(self.plan, self.shard.index):
            for chunks in split_chunks(big):
                self._process(chunks)
        self._collect(behind=0)
        self._flush(final=True)

    def _process(self, chunks: Sequence[Chunk]) -> None:
        try:
            recs = [parse_chunk(c.data, p, c.first_record, c.newlines) for c, p in zip(chunks, self.paths, strict=True)]
            for m, r in zip(self.mates, recs, strict=True):
                self.raw[m].add_chunk(r)
            # read names are needed to check mates and to name alignments; a single-end child that does not
            # align only needs its first read's, for the header fields
            names = recs[0].names() if len(recs) == 2 or self.aligning is not None else []
            if self.header is None and len(recs[0]):
                self.header = illumina_fields(names[0] if names else recs[0].first_name())
            if len(recs) == 2:
                bad = _mate_names_match(names, recs[1].names())
                if bad is not None:
                    rec = chunks[0].first_record + bad
                    raise BadInputError(
                        self.paths[1],
                        f"read name {recs[1].names()[bad]!r} does not match "
                        f"its mate {names[bad]!r} in {self.paths[0]} (record {rec + 1})",
                        line=4 * rec + 1,
                        record=rec,
                    )
        except BadInputError as err:
            if chunks[0].relative:
                raise shards.rebase_error(self.plan, self.shard.spans[0], err) from None
            raise
        self._trim_align(recs, names, chunks[0].first_record)

    def _trim_align(self, recs: list[ChunkRecords], names: list[str], first_record: int) -> None:
        if not self.trimmer.enabled and self.aligning is None:
            return  # the trimmed stage is the raw one (see result): no read needs a string of its own
        if not self.trimmer.enabled:  # every read is kept whole: only the sequences, for mappy
            whole = range(first_record, first_record + len(names))
            self._align(names, whole, [r.sequence_bytes() for r in recs],
                        _chunk_reads(recs, np.arange(whole.start, whole.stop), None, None))
            return
        trims = [self.trimmer.trim_mate(r.sequences(), r.qualities()) for r in recs]
        keep = self.trimmer.filter(trims)
        for m, r, t in zip(self.mates, recs, trims, strict=True):
            add_stats(self.trim_stats[m], t, keep)
            start = t.start[keep]
            self.trimmed[m].add(r.data, r.seq_start[keep] + start, r.qual_start[keep] + start, t.length[keep])
        if self.aligning is None:
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
        self._align(kept_names, index, seqs, _chunk_reads(recs, np.asarray(index, dtype=np.int64), trims, keep))

    def _align(self, names: list[str], index: Sequence[int], seqs: Sequence[Sequence[str | bytes]],
               reads: ChunkReads) -> None:
        """Submit the kept reads (one list of sequences per mate) for alignment behind this chunk."""
        assert self.aligning is not None
        aligner = self.aligning.aligner
        self.chunk_reads.append(reads)
        if len(seqs) == 2:
            self.aligning_chunks.append(aligner.submit_pairs(names, seqs[0], seqs[1], index, self.sample))
        else:
            self.aligning_chunks.append(aligner.submit_single(names, seqs[0], index, self.sample))
        self._collect(behind=aligner.in_flight)

    def _collect(self, behind: int) -> None:
        """Aligned chunks, oldest first, into the pending rows and the counts, leaving ``behind`` chunks
        aligning while the next one is read and trimmed (the same rows and row groups either way)."""
        while len(self.aligning_chunks) > behind:
            # rather than wait, align here the parts no process has started yet, oldest call first
            while not self.aligning_chunks[0].done() and any(c.steal_one() for c in self.aligning_chunks):
                pass
            batch = self.aligning_chunks.popleft().result()
            assert self.aligning is not None  # chunks align only with a reference
            self.aligning.take_chunk(self.sample, batch, self.chunk_reads.popleft(), self.groups)
            self.pending.append(batch.rows)
            self.pending_rows += batch.rows.num_rows
            for m, counts in zip(self.mates, batch.stats, strict=True):
                self.align_stats[m].merge(counts)
            self._flush()

    def _flush(self, final: bool = False) -> None:
        """Pending alignment rows -> one Arrow batch -> the coverage bins and the Parquet part."""
        if self.pending_rows >= ALIGN_BATCH_ROWS or (final and self.pending_rows):
            assert self.aligning is not None
            table = pa.concat_tables(self.pending).combine_chunks()
            blocks = depth_blocks(table)  # the exact depth's and the alignment QC's, parsed once
            self.aligning.add_batch(self.sample, table, blocks)
            self.align_qc.merge(alignment_qc(table, blocks))
            self.aligning.part.write_arrow(table)
            self.pending, self.pending_rows = [], 0

    def result(self) -> ShardResult:
        # without trimming, nothing is cut or dropped: the trimmed stage's aggregates are the raw ones
        trimmed = self.trimmed if self.trimmer.enabled else self.raw
        qc = {(m, s): (self.raw if s == "raw" else trimmed)[m] for m in self.mates for s in STAGES}
        header = self.header or {}
        if self.aligning is None:
            return ShardResult(self.shard.index, self.sample, self.mates, qc, self.trim_stats, header=header)
        self.aligning.coverage_of(self.sample)  # a sample without alignments still has a (zero) depth
        return ShardResult(self.shard.index, self.sample, self.mates, qc, self.trim_stats, self.align_stats,
                           self.align_qc, header, list(self.groups.seen.values()))


def _ints(table: pa.Table, column: str) -> I64:
    """A column of integers (nulls as 0) as int64."""
    return np.asarray(table.column(column).fill_null(0), dtype=np.int64)


def _chunk_reads(recs: list[ChunkRecords], index: I64, trims: list[MateTrim] | None,
                 keep: np.ndarray | None) -> ChunkReads:
    """Where the kept reads' trimmed bases and qualities are in the chunk's buffers (the allele counts
    read them there: no copy per read)."""
    data = recs[0].data if len(recs) == 1 else np.concatenate([r.data for r in recs])
    shift = 0
    seq, qual, length = [], [], []
    for k, r in enumerate(recs):
        if trims is None:
            seq.append(r.seq_start + shift)
            qual.append(r.qual_start + shift)
            length.append(r.length)
        else:
            t, kept = trims[k], keep if keep is not None else slice(None)
            seq.append(r.seq_start[kept] + t.start[kept] + shift)
            qual.append(r.qual_start[kept] + t.start[kept] + shift)
            length.append(t.length[kept])
        shift += len(r.data)
    return ChunkReads(data, index, tuple(seq), tuple(qual), tuple(length))


def library_versions(aligned: bool) -> dict[str, str]:
    """The versions of the libraries whose results a child writes (for the ``runs`` table)."""
    import cutadapt

    out = {"cutadapt": cutadapt.__version__}
    if aligned:
        import mappy

        out["mappy"] = mappy.__version__
    return out


def write_child_positions(plan: PlanView, child: int, aligning: _Aligning, contigs: list[tuple[str, int]],
                          tmp: str) -> int:
    """The child's per-position staging tables (depth and coverage, allele counts) in one object, cut by region
    and window, with its index (:mod:`seqlake.lake.positions`); the window it is cut at."""
    tables = staging_tables(aligning.coverage, aligning.depth, list(aligning.coverage), contigs, aligning.bin_width)
    tables.update(aligning.allele_tables())
    local = Path(tmp) / "positions.arrows"
    try:
        window = window_size(aligning.bin_width)
        write_positions(local, tables, contigs, regions(contigs, plan.params.region_size), aligning.allele_streams(),
                        window=window, run_id=plan.run_id, child=child)
    finally:
        aligning.close_counts()
    put_file(local, plan.layout.positions(child))
    reads = Path(tmp) / "reads.slices"
    with reads.open("wb") as out:
        aligning.slices.write(out, plan.run_id, child)
    put_file(reads, plan.layout.reads_slices(child))
    return window


def run_child(plan: PlanView, child: int, tmp: str, budget: MemoryBudget | None = None) -> ChildManifest:
    """Process the child's shards and write its parts; the manifest is returned, not yet written."""
    with contextlib.ExitStack() as stack:
        aligning = stack.enter_context(_Aligning(plan, child, tmp, budget)) if plan.reference else None
        results = []
        for index in plan.child_shards(child):
            run = _ShardRun(plan, index, aligning)
            run.run()
            results.append(run.result())
        manifest = ChildManifest(plan.run_id, child, results, software=library_versions(aligning is not None))
        if aligning is not None:
            aligning.aligner.close()  # nothing more to align: the processes go before the parts are written
            _finish_aligning(plan, child, aligning, manifest, tmp)
    return manifest


def _finish_aligning(plan: PlanView, child: int, aligning: _Aligning, manifest: ChildManifest, tmp: str) -> None:
    """Publish the alignments part and write the per-position object (depth, coverage and allele counts by
    region and window, its index inside); the window and the reference's contigs into the manifest."""
    manifest.reference = aligning.reference.key
    manifest.reference_md5 = aligning.reference_md5
    aligning.part.publish()
    manifest.alignments = PartInfo(aligning.part.rows, aligning.part.bytes)
    manifest.contigs = list(aligning.contigs)
    manifest.positions_window = write_child_positions(plan, child, aligning, manifest.contigs, tmp)


def finished_manifest(plan: PlanView, child: int) -> ChildManifest | None:
    """The child's manifest when it is already the finished work of this child (a re-run, or an
    attempt after one that wrote it); None otherwise."""
    try:
        manifest = ChildManifest.from_json(storage.read_bytes(plan.layout.manifest(child)))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    if not manifest.belongs_to(plan.run_id, child, plan.child_shards(child)):
        return None
    return manifest if manifest.reference == (plan.reference.key if plan.reference else None) else None


def process_child(plan: PlanView, child: int, budget: MemoryBudget | None = None) -> ChildManifest:
    """Process one child's shards and write its parts, then its manifest (see the module docstring)."""
    t0 = time.perf_counter()
    with local_tmp() as tmp:
        manifest = run_child(plan, child, tmp, budget)
    manifest.seconds = round(time.perf_counter() - t0, 3)
    storage.write_bytes(plan.layout.manifest(child), manifest.to_json())
    return manifest
