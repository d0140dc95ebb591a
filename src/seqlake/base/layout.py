"""The bucket layout: every object of a run, named in one place.

A lake has one root (``s3://<bucket>`` on AWS, a folder locally) and four trees below it::

    runs/<run_id>/request.json              the run request (the execution carries its URI and digest)
    runs/<run_id>/plan.json                 the plan: inputs, shards, children
    runs/<run_id>/children.jsonl            each child's part of the plan, one line each (seqlake.plan.childplan)
    runs/<run_id>/todo/<attempt>.json       the children an execution runs (all, or what a re-run lacks)
    runs/<run_id>/status.json               RUNNING / SUCCEEDED / FAILED / REJECTED, with the reason
    runs/<run_id>/index/input<i>.gztool     gzip seek index of input i (a child reads its points only,
                                            seqlake.reads.seekindex), and its record checkpoints
    runs/<run_id>/index/job.json            what the Batch index job plans (inputs too large for Lambda)
    runs/<run_id>/index/_error.json         the index job's bad-input record
    runs/<run_id>/staging/child=NNNNN/      what child NNNNN wrote: manifest.json (last), positions.arrows
                                            (its per-position tables cut by region, seqlake.lake.positions),
                                            reads.slices (its reads as sorted BAM records cut by reduce window,
                                            seqlake.lake.slices)
    runs/<run_id>/reduce/regions.json       the regions of the reduce step (seqlake.lake.regions)
    runs/<run_id>/reduce/region=NNNNN.json  what the reducer of region NNNNN leaves the commit (written last)
    runs/<run_id>/reduce/region=NNNNN.genomes  its pieces of each sample's consensus FASTA, VCF and .tbi; the
                                            commit removes them once the run is committed (seqlake.lake.genomes)
    runs/<run_id>/reduce/genomes-joined.json  the commit's record that it joined those files under results/
    runs/<run_id>/reduce/region=NNNNN.bam   its BAM records of each sample (BGZF) and their .bai pieces; where
                                            each is: region=NNNNN.bam.json (seqlake.reduce.bams)
    runs/<run_id>/reduce/region=NNNNN.cram  with --cram instead: its samples' CRAM containers, and (a sample
                                            group's last reducer) region=NNNNN.unplaced.cram, their unplaced
                                            reads'; where each is, with its .crai lines: *.cram.json;
                                            reference.fasta (+ .fai): reducer 0's copy of the run's reference
    runs/<run_id>/reduce/coverage_points.parquet  each sample's coverage in <= 2,000 points (the report's)
    runs/<run_id>/staging/_errors/child=NNNNN.json   a child's bad-input record
    runs/<run_id>/parts/<table>/<name>.parquet   a part of a result table as a Batch job wrote it: a child's
                                            alignments (child=NNNNN), a reducer's region (region=NNNNN)
    results/<table>/run_id=<run_id>/        the result tables (Hive partitions; Glue registers them last)
    results/genomes/run_id=<run_id>/        per sample: <sample>.consensus.fasta, <sample>.vcf.gz (+ .tbi),
                                            <sample>.bam (+ .bai): coordinate-sorted, primer-clipped in amplicon mode;
                                            with --cram <sample>.cram (+ .crai) instead, and reference.fasta
                                            (+ .fai), the run's reference, which decodes them
    reports/<run_id>/                       the run's report
    reference-indexes/<key>/index.mmi       a reference's minimap2 index, keyed by its content and preset
    reference-indexes/<key>/contigs.json    its contigs' names, lengths and MD5s, and where each one's bases
                                            are (a FASTA index: written last; the index is complete when it
                                            exists; seqlake.plan.reference)
    reference-indexes/<key>/sequence.txt    the bases, when the reference cannot be read by byte ranges

The user's reference cache (:func:`seqlake.base.cachedir.reference_cache`) keeps indexes in the same
layout: it is the store of local runs and each Batch host's copy of the bucket's.

A child writes its alignments (``child=NNNNN``), and a reducer its region's rows of the per-position result
tables (``region=NNNNN``), as parts under ``runs/<run_id>/parts/<table>/``; the commit, once every child
and region has checked out, publishes each part into ``results/<table>/run_id=<run_id>/`` under the same
name by a server-side copy (:func:`seqlake.base.storage.copy_many`). So no Batch job writes under
``results/`` (its role may not), and nothing is visible before the commit registers the partition in Glue.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

#: ``child=NNNNN``: five digits hold the Batch array limit (10,000 children: 0..9999)
CHILD_DIGITS = 5
#: ``region=NNNNN``: GRCh38 cut into 5 Mb regions has ~640; five digits hold any genome
REGION_DIGITS = 5
RESULTS = "results"
RUNS = "runs"
REPORTS = "reports"
#: the audit records of samples deleted everywhere (who, when, what; never their data)
DELETIONS = "deletions"
#: the records of the tables' compactions (what was rewritten, expired, removed)
COMPACTIONS = "compactions"
#: the folder of the Batch jobs' parts of result tables under ``runs/<run_id>/``
PARTS = "parts"
#: the folder of per-sample files under ``results/`` (no table has this name)
GENOMES = "genomes"
CONSENSUS_SUFFIX = ".consensus.fasta"
VCF_SUFFIX = ".vcf.gz"
#: each sample's coordinate-sorted BAM and its index (``<sample>.bam.bai``: BAM_SUFFIX + BAI_SUFFIX; a ``.csi``
#: instead when a contig is over 2^29 bases: BAM_SUFFIX + CSI_SUFFIX)
BAM_SUFFIX = ".bam"
BAI_SUFFIX = ".bai"
CSI_SUFFIX = ".csi"
#: with ``--cram``, each sample's alignments as CRAM 3.0 instead (``<sample>.cram``, ``<sample>.cram.crai``) and
#: the run's reference beside them (``reference.fasta`` and its ``.fai``: what decodes them)
CRAM_SUFFIX = ".cram"
CRAI_SUFFIX = ".crai"
REFERENCE_FASTA = "reference.fasta"
REFERENCE_INDEXES = "reference-indexes"
#: the name of a run's gzip seek indexes and record checkpoints under ``runs/<id>/index/`` (``input<i>...``)
INDEX_INPUT = "input"
#: the folder of the run inputs the plan pins under ``runs/<id>/`` (:meth:`RunLayout.pinned_input`)
PINNED_INPUTS = "inputs"
_CHILD_NAME = re.compile(r"child=(\d+)")


def _join(base: str, *parts: str) -> str:
    if base.startswith("s3://"):
        return posixpath.join(base.rstrip("/"), *parts)
    return str(Path(base, *parts))


def child_name(child: int) -> str:
    return f"child={child:0{CHILD_DIGITS}d}"


#: what names a reducer's objects under ``runs/<id>/reduce/`` (``region=NNNNN.json``, ``region=NNNNN.genomes``)
REGION_PREFIX = "region="


def region_name(region: int) -> str:
    return f"{REGION_PREFIX}{region:0{REGION_DIGITS}d}"


def child_of(name: str) -> int | None:
    """The child number in an object name made by :func:`child_name` (None if there is none)."""
    m = _CHILD_NAME.search(name)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class LakeLayout:
    """The lake's root: where runs, results and reports live."""

    root: str

    @classmethod
    def of_results(cls, results_prefix: str) -> LakeLayout:
        """The lake whose ``results`` folder is ``results_prefix`` (a local path or ``s3://bucket/results``)."""
        trimmed = results_prefix.rstrip("/")
        head, sep, tail = trimmed.rpartition("/")
        if tail != RESULTS or not sep:
            raise ValueError(f"{results_prefix} is not a lake's {RESULTS} folder")
        return cls(head)

    @property
    def results_root(self) -> str:
        """``results/`` with a trailing separator (Glue table locations end with ``/``)."""
        return _join(self.root, RESULTS) + "/"

    def table_root(self, table: str) -> str:
        return _join(self.root, RESULTS, table) + "/"

    @property
    def reports_root(self) -> str:
        return _join(self.root, REPORTS) + "/"

    @property
    def reports_index(self) -> str:
        """The page that lists every run's report."""
        return _join(self.root, REPORTS, "index.html")

    def run(self, run_id: str) -> RunLayout:
        return RunLayout(self.root, run_id)

    def deletion(self, when: str, digest: str) -> str:
        """The audit record of a sample's deletion (:mod:`seqlake.lake.deletion`): its time, then a digest of
        the name (the key never spells the sample; the record names it inside)."""
        return _join(self.root, DELETIONS, f"{when.replace(':', '')}-{digest}.json")

    def deletion_pending(self, digest: str) -> str:
        """A deletion under way (:mod:`seqlake.lake.deletion`): what it found before removing anything, so that
        one cut short (a Lambda's timeout) goes on where it stopped when started again; removed at its end."""
        return _join(self.root, DELETIONS, f"pending-{digest}.json")

    def compaction(self, when: str) -> str:
        """The record of one compaction of the tables (:mod:`seqlake.lake.compaction`)."""
        return _join(self.root, COMPACTIONS, f"{when.replace(':', '')}.json")

    def reference_index(self, key: str) -> str:
        """The minimap2 index of the reference and preset ``key`` names (:mod:`seqlake.plan.reference`)."""
        return _join(self.root, REFERENCE_INDEXES, key, "index.mmi")

    def reference_contigs(self, key: str) -> str:
        """The contigs of that index (names, lengths, MD5s, where each sequence is), written once the index is
        stored."""
        return _join(self.root, REFERENCE_INDEXES, key, "contigs.json")

    def reference_sequence(self, key: str) -> str:
        """The reference's bases, every contig on one line, laid end to end, when the reference itself cannot
        be read by byte ranges (gzip, a ``.mmi``, lines of uneven width): what the reducers slice."""
        return _join(self.root, REFERENCE_INDEXES, key, "sequence.txt")


@dataclass(frozen=True)
class RunLayout:
    """Every object of one run (see the module docstring)."""

    root: str
    run_id: str

    @classmethod
    def in_bucket(cls, bucket: str, run_id: str) -> RunLayout:
        return cls(f"s3://{bucket}", run_id)

    @property
    def lake(self) -> LakeLayout:
        return LakeLayout(self.root)

    # -- runs/<id>/ --------------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return _join(self.root, RUNS, self.run_id) + "/"

    def _run(self, *parts: str) -> str:
        return _join(self.root, RUNS, self.run_id, *parts)

    @property
    def request(self) -> str:
        return self._run("request.json")

    @property
    def plan(self) -> str:
        return self._run("plan.json")

    @classmethod
    def of_plan(cls, plan_uri: str) -> RunLayout:
        """The run whose plan is at ``plan_uri`` (a Batch child is given that URI only)."""
        if plan_uri.startswith("s3://"):
            run_dir = posixpath.dirname(plan_uri)
            runs = posixpath.dirname(run_dir)
            root, run_id = posixpath.dirname(runs), posixpath.basename(run_dir)
        else:
            path = Path(plan_uri)
            root, run_id = str(path.parent.parent.parent), path.parent.name
        layout = cls(root, run_id)
        if layout.plan != plan_uri:
            raise ValueError(f"{plan_uri} is not a run's plan ({RUNS}/<run_id>/plan.json)")
        return layout

    @property
    def child_plans(self) -> str:
        """Every child's part of the plan (:mod:`seqlake.plan.childplan`)."""
        return self._run("children.jsonl")

    def todo(self, attempt: str) -> str:
        return self._run("todo", f"{attempt}.json")

    @property
    def status(self) -> str:
        return self._run("status.json")

    @property
    def summary(self) -> str:
        """What ``seqlake process`` (the core without a cloud) writes about the run."""
        return self._run("summary.json")

    @property
    def index_prefix(self) -> str:
        return self._run("index")

    def index(self, input_number: int) -> str:
        return self._run("index", f"{INDEX_INPUT}{input_number}.gztool")

    def checkpoints(self, input_number: int) -> str:
        return self._run("index", f"{INDEX_INPUT}{input_number}.checkpoints.json")

    @property
    def index_job(self) -> str:
        """What the Batch index job plans: the execution input and the run's parameters."""
        return self._run("index", "job.json")

    @property
    def index_error(self) -> str:
        return self._run("index", "_error.json")

    @property
    def jobs(self) -> str:
        """What the plan sized each kind of Batch job to (vCPUs, memory, timeout, expected seconds) and the
        reducers' keys (:mod:`seqlake.plan.sizing`): the run's record of its job sizes."""
        return self._run("jobs.json")

    def pinned_input(self, kind: str, digest: str, suffix: str) -> str:
        """A run input a later step reads (the primer BED), copied here by the plan and named by its content
        (SHA-256): every step after the plan reads ``runs/`` only, whatever bucket the original is in."""
        return self._run(PINNED_INPUTS, f"{kind}-{digest}{suffix}")

    @property
    def staging(self) -> str:
        return self._run("staging") + "/"

    def child_prefix(self, child: int) -> str:
        return self._run("staging", child_name(child)) + "/"

    def manifest(self, child: int) -> str:
        return self._run("staging", child_name(child), "manifest.json")

    def positions(self, child: int) -> str:
        """The child's per-position staging tables, cut by region (:mod:`seqlake.lake.positions`)."""
        return self._run("staging", child_name(child), "positions.arrows")

    def reads_slices(self, child: int) -> str:
        """The child's reads as sorted BAM records cut by reduce window (:mod:`seqlake.lake.slices`)."""
        return self._run("staging", child_name(child), "reads.slices")

    @property
    def reduce_prefix(self) -> str:
        return self._run("reduce") + "/"

    @property
    def reduce_plan(self) -> str:
        """The reduce step's regions (what the reducers and the commit agree on)."""
        return self._run("reduce", "regions.json")

    @property
    def coverage_points(self) -> str:
        """Each sample's coverage summed into a few points, which the report draws (the commit writes it)."""
        return self._run("reduce", "coverage_points.parquet")

    def region_genomes(self, region: int) -> str:
        """Region ``region``'s pieces of every sample's consensus FASTA and VCF (BGZF blocks, no EOF) and of its
        tabix index, one after the other (offsets in the region's summary); the commit joins them per sample."""
        return self._run("reduce", f"{region_name(region)}.genomes")

    @property
    def genomes_joined(self) -> str:
        """The commit's record that every sample's consensus FASTA, VCF and .tbi are joined under ``results/``
        from the pieces (:meth:`region_genomes`), which may then go (:mod:`seqlake.lake.genomes`)."""
        return self._run("reduce", "genomes-joined.json")

    def region_bams(self, region: int) -> str:
        """The region's BAM records of each sample (BGZF blocks, no EOF) and their .bai pieces (reduce/bams)."""
        return self._run("reduce", f"{region_name(region)}.bam")

    def region_bams_offsets(self, region: int) -> str:
        """Where each sample's blocks and index piece are in :meth:`region_bams` (JSON)."""
        return self._run("reduce", f"{region_name(region)}.bam.json")

    def region_crams(self, region: int, *, unplaced: bool = False) -> str:
        """With ``--cram``: the region's CRAM containers of each sample (or, the last reducer of a sample group,
        its samples' unplaced reads'), and where each is with its .crai lines: :meth:`region_crams_offsets`
        (reduce/cramencode)."""
        return self._run("reduce", f"{region_name(region)}{'.unplaced' if unplaced else ''}.cram")

    def region_crams_offsets(self, region: int, *, unplaced: bool = False) -> str:
        """Where each sample's containers and .crai lines are in :meth:`region_crams` (JSON)."""
        return self.region_crams(region, unplaced=unplaced) + ".json"

    def region_summary(self, region: int) -> str:
        """What region ``region``'s reducer leaves the commit: row counts, partial sums (written last)."""
        return self._run("reduce", f"{region_name(region)}.json")

    @property
    def errors_prefix(self) -> str:
        return self._run("staging", "_errors") + "/"

    def child_error(self, child: int) -> str:
        return self._run("staging", "_errors", f"{child_name(child)}.json")

    # -- results/<table>/run_id=<id>/ ---------------------------------------------------------------
    def partition(self, table: str) -> str:
        """The run's partition folder of ``table``, with a trailing separator."""
        return _join(self.root, RESULTS, table, f"run_id={self.run_id}") + "/"

    def result_file(self, table: str) -> str:
        """The one file of a table the commit writes whole (every table but ``alignments``)."""
        return _join(self.root, RESULTS, table, f"run_id={self.run_id}", "part-00000.parquet")

    # -- runs/<id>/parts/<table>/ -> results/<table>/run_id=<id>/ -----------------------------------
    def staged_parts(self, table: str) -> str:
        """The folder of the Batch jobs' parts of ``table``, with a trailing separator (the commit lists it)."""
        return self._run(PARTS, table) + "/"

    def staged_part(self, table: str, name: str) -> str:
        """Part ``name`` of ``table`` as a Batch job wrote it, before the commit publishes it."""
        return self._run(PARTS, table, f"{name}.parquet")

    def published_part(self, table: str, name: str) -> str:
        """Where the commit publishes part ``name`` of ``table``: in the result partition, under its name."""
        return _join(self.root, RESULTS, table, f"run_id={self.run_id}", f"{name}.parquet")

    def region_part(self, table: str, region: int) -> str:
        """Where the reducer of region ``region`` writes its rows of ``table`` (a staged part)."""
        return self.staged_part(table, region_name(region))

    def alignments_part(self, child: int) -> str:
        """Where child ``child`` writes its alignments (a staged part)."""
        return self.staged_part("alignments", child_name(child))

    def sample_file(self, sample: str, suffix: str) -> str:
        """A per-sample file of the run's results (consensus FASTA, VCF): beside the tables, not one of them."""
        return _join(self.root, RESULTS, GENOMES, f"run_id={self.run_id}", f"{sample}{suffix}")

    def run_reference_staged(self, suffix: str = "") -> str:
        """With ``--cram``: reducer 0's copy of the run's reference, which the commit copies to
        :meth:`run_reference` (the commit may not read the user's references)."""
        return self._run("reduce", REFERENCE_FASTA + suffix)

    def run_reference(self, suffix: str = "") -> str:
        """With ``--cram``: the run's reference beside its CRAMs (``reference.fasta``; ``suffix`` ``.fai``)."""
        return _join(self.root, RESULTS, GENOMES, f"run_id={self.run_id}", REFERENCE_FASTA + suffix)

    # -- reports/<id>/ -------------------------------------------------------------------------------
    @property
    def report_prefix(self) -> str:
        return _join(self.root, REPORTS, self.run_id) + "/"

    @property
    def report(self) -> str:
        return _join(self.root, REPORTS, self.run_id, "index.html")


# -- what a Batch job may write ------------------------------------------------------------------------------
def batch_job_writes() -> tuple[tuple[str, str], ...]:
    """Every key pattern a Batch job (a child, a reducer, the index job) writes, relative to the bucket, with who
    writes it: the worker role's ``s3:PutObject`` (``template.yaml``'s ``WorkerJobRole``, rendered from this by
    ``python -m seqlake.aws.render_template``). ``*`` stands for a run id, a child or region number, a table, an
    index key. Anything else (``results/``, ``incoming/``, a run's ``status.json``, ``todo/``, the reduce plan,
    the index job's own ``index/job.json``) is the Lambdas' to write, and a job's write there is refused. An
    object a Batch job newly writes is added here, and the template follows."""
    run = RunLayout("", "*")
    return (
        (run.plan, "the index job: the plan (seqlake.aws.index_job)"),
        (run.child_plans, "the index job: each child's part of the plan"),
        (run.jobs, "the index job: the job sizes it planned"),
        (run._run("index", INDEX_INPUT + "*"), "the index job: the inputs' gzip seek indexes and checkpoints"),
        (run.index_error, "the index job: its bad-input record"),
        (run._run(PINNED_INPUTS, "*"), "the index job: the run inputs it pins (the primer BED)"),
        (run.staging + "*", "the children: staging, manifests, bad-input records"),
        (run._run(PARTS, "*"), "the children's alignments and the reducers' regions of the result tables"),
        (run._run("reduce", REGION_PREFIX + "*"), "the reducers: their summaries and genome pieces"),
        (run._run("reduce", REFERENCE_FASTA + "*"), "reducer 0 (--cram): the run's reference, for the commit to copy"),
        (_join("", REFERENCE_INDEXES, "*"), "the index job: a reference's minimap2 index, once"),
    )
