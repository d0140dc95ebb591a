"""Job sizes and time limits from the work: what the plan asks Batch for, each kind of job on its own.

The plan knows the reference's size (its pin), the reads of each child (its spans) and each sample's bases
(its inputs' sizes); from them and the rates measured in BENCHMARKS.md and docs/COST.md it sizes the three
kinds of Batch job (:class:`JobSize`):

- the **index job**: vCPUs and memory from the reference's index build (8.1 bytes a base + 175 MB) and the
  inputs it indexes; a virus's asks for 2 vCPUs and 2 GiB, not the template's 8 / 32 GiB;
- a **child**: the template's ``WorkerMemoryMiB``, raised to what loading the reference's index takes (a
  1.5 Gb reference's index is ~10 GB resident in a child: the template's 7,680 MiB would be killed);
- a **reducer**: the template's size (its memory is flat: one window at a time), its time from its region's
  bases and its group's samples (:func:`reducer_seconds`).

Each job's attempt timeout is its expected seconds times :data:`TIMEOUT_MARGIN` plus
:data:`TIMEOUT_START_SECONDS` (a container's start, the index's download), never under Batch's 60 s. A job
that does not fit the compute environment's largest instance is refused in the plan (on AWS it would stay
RUNNABLE for ever). What the plan chose is written to ``runs/<id>/jobs.json`` (:class:`JobPlan`), the run's
record of its job sizes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from seqlake.base import instances
from seqlake.base.errors import BadInputError
from seqlake.base.limits import BATCH_TIMEOUT_MIN
from seqlake.plan.planfile import Plan

MIB = 1 << 20

# ------------------------------------------------------------------ measured rates (each with where it is measured)
#: the index build's peak: bytes a reference base, plus a constant (docs/COST.md, bench/reference_index.py:
#: 352 MB at 30 Mb, 1,071 MB at 100 Mb, 2,573 MB at 300 Mb)
INDEX_BUILD_BYTES_PER_BASE = 8.1
INDEX_BUILD_FIXED_BYTES = 175_000_000
#: building the index, seconds per Mb on one busy vCPU (docs/COST.md: 0.4-0.7; the 1.5 Gb build 0.46)
INDEX_BUILD_SECONDS_PER_MB = 0.7
#: a child's resident memory per reference base once the index is loaded, both alignment processes and the
#: counts included (BENCHMARKS.md, genome scale: 10,074 MiB resident for the 1.5 Gb reference, 6.7 bytes a
#: base; docs/COST.md: the load alone is 4.3 bytes a base)
CHILD_INDEX_BYTES_PER_BASE = 6.7
#: a child's own work besides the index: chunks, the allele counts' budget (docs/COST.md: 1,340-1,409 MiB
#: resident for the 4 Mb to 100 Mb genomes at 30x, index included)
CHILD_WORK_MIB = 1_536
#: reads a child aligns and counts per second on one vCPU, allele counts on (BENCHMARKS.md, genome scale:
#: 100 Mb at 30x, 40 children of 500,000 reads, ~325 CPU-s each on a loaded machine: ~1,500; the 4 Mb run
#: before the spill ~950) and off (the worker bench: 47,000 reads/s, 30 kb; 10,000 kept for large genomes)
CHILD_READS_PER_SECOND = 950.0
CHILD_READS_PER_SECOND_NO_ALLELES = 10_000.0
#: a child's (or reducer's) download and load of the index, bytes per second (a 4.75 GB index in ~100 s)
INDEX_LOAD_BYTES_PER_SECOND = 50_000_000
#: a reducer's seconds per Mb of its region for one sample: a + b x depth, allele counts (variants) on
#: (docs/COST.md: the 4 Mb region at 3x 12.8 s, at 30x 54.5 s: 2.0 + 0.39 x depth) and off (bench/reduce.py:
#: 0.5 CPU-s per Mb at 30x)
REDUCE_S_PER_MB = 2.0
REDUCE_S_PER_MB_PER_X = 0.39
REDUCE_S_PER_MB_NO_ALLELES = 0.05
REDUCE_S_PER_MB_PER_X_NO_ALLELES = 0.015
#: a reducer's cost of each child it reads (one ranged GET of its index block, its windows' streams)
REDUCE_S_PER_CHILD = 0.05
#: the work the plan gives one reducer at most: samples are grouped until the next would pass it (a
#: sample whose region alone is more is a group of its own); 200 samples of a 5 Mb genome at 30x: groups of 8
REDUCER_TARGET_SECONDS = 600.0
#: FASTQ bytes per base (name, sequence, '+', qualities: a 150 bp read is ~340 bytes); compressed FASTQ
#: inflates ~4x (a sample's bases are estimated from its inputs' sizes when they were not counted)
FASTQ_BYTES_PER_BASE = 2.2
GZIP_RATIO = 4.0
#: bytes of compressed input the index job indexes per second and vCPU (rapidgzip's pass; docs/PERFORMANCE.md)
INDEX_INPUT_BYTES_PER_SECOND = 30_000_000

# ------------------------------------------------------------------ the margin
#: a job's timeout is its expected seconds times this, plus TIMEOUT_START_SECONDS: the rates above were
#: measured on a shared 2-core machine, a Spot instance's neighbours vary, and a timed-out job is not retried
TIMEOUT_MARGIN = 3.0
TIMEOUT_START_SECONDS = 300
#: memory asked is rounded up to this (and margin on the index's part)
MEMORY_STEP_MIB = 256
MEMORY_MARGIN = 1.2
#: the index job of a small reference with inputs the plan Lambda could read: 2 vCPUs
SMALL_INDEX_VCPUS = 2
#: a reference from this size gets the template's IndexJobVcpus (its build runs on all of them)
LARGE_REFERENCE_BASES = 100_000_000

# ------------------------------------------------------------------ what the compute environment offers
# The instance types' vCPUs and the memory Batch gives jobs on them are seqlake.base.instances' (one generated
# file that the local cloud's rules read too).
#: the plan Lambda's environment variable of each :class:`Compute` field (template.yaml sets them from its
#: parameters)
COMPUTE_ENV = {"worker_vcpus": "WORKER_VCPUS", "worker_memory_mib": "WORKER_MEMORY_MIB",
               "index_vcpus": "INDEX_JOB_VCPUS", "index_memory_mib": "INDEX_JOB_MEMORY_MIB",
               "reducer_vcpus": "REDUCER_VCPUS", "reducer_memory_mib": "REDUCER_MEMORY_MIB"}


@dataclass(frozen=True)
class Compute:
    """The template's job sizes and instance types (the plan Lambda's environment; the index job gets them
    in ``index/job.json``)."""

    worker_vcpus: int = 1
    worker_memory_mib: int = 7_680
    index_vcpus: int = 8
    index_memory_mib: int = 32_768
    reducer_vcpus: int = 1
    reducer_memory_mib: int = 2_048
    instance_types: tuple[str, ...] = ("r5", "r5a", "r5b", "r5n", "r6i", "r6a", "r7i", "r7a")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Compute:
        env = os.environ if env is None else env
        values: dict[str, Any] = {f: int(env[v]) for f, v in COMPUTE_ENV.items() if env.get(v)}
        given = tuple(t.strip() for t in env.get("INSTANCE_TYPES", "").split(",") if t.strip())
        # empty is the template's default: the compute environments take the region's families of its
        # RegionInstanceTypes mapping, so the plan caps jobs by those, not by the class's default
        given = given or instances.region_families(env.get("AWS_REGION", ""))
        if given:
            values["instance_types"] = given
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "instance_types": list(self.instance_types)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Compute:
        return cls(**{**d, "instance_types": tuple(d.get("instance_types") or cls.instance_types)})

    def largest(self) -> tuple[int, int] | None:
        """(vCPUs, MiB a job can have) of the largest instance the types allow; None when a type is not known
        here (then nothing is capped)."""
        top = instances.largest(self.instance_types)
        return None if top is None else (top.vcpus, top.job_memory_mib)


@dataclass(frozen=True)
class JobSize:
    """One kind of Batch job as the plan sizes it."""

    kind: str
    vcpus: int
    memory_mib: int
    #: the attempt timeout (Batch's attemptDurationSeconds)
    timeout_s: int
    #: the work the plan expects of the largest job of this kind, in seconds
    expected_s: float
    #: how the numbers were chosen (one line, for the record)
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def overrides(self) -> dict[str, Any]:
        """What the state machine passes to SubmitJob: ResourceRequirements values are strings."""
        return {"vcpus": str(self.vcpus), "memory_mib": str(self.memory_mib), "timeout_s": self.timeout_s}


def timeout_for(expected_s: float) -> int:
    """The attempt timeout covering ``expected_s`` with the margin (never under Batch's minimum)."""
    return max(BATCH_TIMEOUT_MIN.value, math.ceil(expected_s * TIMEOUT_MARGIN + TIMEOUT_START_SECONDS))


def _mib(nbytes: float) -> int:
    return math.ceil(nbytes / MIB / MEMORY_STEP_MIB) * MEMORY_STEP_MIB


def _fit(job: JobSize, compute: Compute, subject: str) -> JobSize:
    largest = compute.largest()
    if largest is not None and (job.vcpus > largest[0] or job.memory_mib > largest[1]):
        raise BadInputError(subject, f"the {job.kind} job needs {job.vcpus} vCPUs and {job.memory_mib} MiB, "
                            f"more than the largest instance of InstanceTypes ({','.join(compute.instance_types)}) "
                            f"offers a job ({largest[0]} vCPUs, {largest[1]} MiB): Batch would never start it; "
                            "add a larger instance family to InstanceTypes")
    return job


def index_job_size(reference_bases: int, input_bytes: int, compute: Compute, *, subject: str,
                   inputs_in_job: bool) -> JobSize:
    """The index job: the reference's build (and, ``inputs_in_job``, the inputs' gzip index pass)."""
    large = reference_bases >= LARGE_REFERENCE_BASES or inputs_in_job
    vcpus = compute.index_vcpus if large else min(SMALL_INDEX_VCPUS, compute.index_vcpus)
    build = INDEX_BUILD_BYTES_PER_BASE * reference_bases + INDEX_BUILD_FIXED_BYTES
    # rapidgzip's pass holds ~256 MiB a thread; the plan itself a few hundred MB
    memory = max(1024, _mib(build * MEMORY_MARGIN + (vcpus * 256 + 512) * MIB))
    # the build is counted on one vCPU (minimap2 builds most of an index on one thread: the 1.5 Gb build took
    # 697 s on 5 threads, 0.46 s per Mb); the gzip pass uses up to 4 (docs/PERFORMANCE.md)
    expected = (reference_bases / 1e6 * INDEX_BUILD_SECONDS_PER_MB
                + input_bytes / (INDEX_INPUT_BYTES_PER_SECOND * min(vcpus, 4)))
    if memory > compute.index_memory_mib:
        raise BadInputError(subject, f"building this reference's index needs {memory:,} MiB ({reference_bases:,} "
                            f"bases), more than IndexJobMemoryMiB ({compute.index_memory_mib:,}): raise it")
    why = (f"reference {reference_bases:,} bases: build {build / MIB:,.0f} MiB x {MEMORY_MARGIN} + the plan; "
           f"{input_bytes:,} input bytes" + (" indexed here" if inputs_in_job else ""))
    return _fit(JobSize("index", vcpus, memory, timeout_for(expected), round(expected, 1), why), compute, subject)


def child_size(reference_bases: int | None, reads: int, allele_counts: bool, compute: Compute, *,
               subject: str) -> JobSize:
    """A child of the array: the template's size, its memory raised to what the reference's index needs."""
    vcpus = compute.worker_vcpus
    need = 0
    load_s = 0.0
    if reference_bases:
        need = _mib(CHILD_INDEX_BYTES_PER_BASE * reference_bases * MEMORY_MARGIN + CHILD_WORK_MIB * MIB)
        load_s = reference_bases * 3.2 / INDEX_LOAD_BYTES_PER_SECOND  # the .mmi is 3.2 bytes a base
    memory = max(compute.worker_memory_mib, need)
    rate = CHILD_READS_PER_SECOND if allele_counts and reference_bases else CHILD_READS_PER_SECOND_NO_ALLELES
    expected = load_s + reads / (rate * vcpus)
    why = (f"{reads:,} reads at {rate:,.0f}/s a vCPU" + (f", index of {reference_bases:,} bases needs {need} MiB"
                                                         if reference_bases else "")
           + f"; WorkerMemoryMiB {compute.worker_memory_mib}")
    return _fit(JobSize("child", vcpus, memory, timeout_for(expected), round(expected, 1), why), compute, subject)


def reducer_seconds(region_bases: int, depths: Sequence[float], children: int, allele_counts: bool) -> float:
    """A reducer's expected seconds: its region's bases for each sample of its group, at the sample's depth,
    and a read of each child of its group."""
    a, b = ((REDUCE_S_PER_MB, REDUCE_S_PER_MB_PER_X) if allele_counts
            else (REDUCE_S_PER_MB_NO_ALLELES, REDUCE_S_PER_MB_PER_X_NO_ALLELES))
    return sum(region_bases / 1e6 * (a + b * d) for d in depths) + REDUCE_S_PER_CHILD * children


def reducer_size(expected_s: float, compute: Compute, *, subject: str) -> JobSize:
    why = f"the largest reducer's region x its group's samples: {expected_s:,.0f} s; ReducerMemoryMiB"
    return _fit(JobSize("reducer", compute.reducer_vcpus, compute.reducer_memory_mib, timeout_for(expected_s),
                        round(expected_s, 1), why), compute, subject)


def sample_bases(plan: Plan) -> dict[str, int]:
    """Each sample's bases, estimated from its inputs (their plain sizes where counted, else compressed sizes
    inflated by :data:`GZIP_RATIO`)."""
    out: dict[str, int] = {}
    for f in plan.inputs:
        plain = f.plain_size if f.plain_size else f.size * (GZIP_RATIO if f.compression != "plain" else 1)
        out[f.sample] = out.get(f.sample, 0) + int(plain / FASTQ_BYTES_PER_BASE)
    return out


def child_reads(plan: Plan, child: int) -> int:
    """Reads of one child (both mates), from its spans' records; a span of unknown length counts as a
    shard of ``reads_per_shard``."""
    total = 0
    for i in plan.child_shards(child):
        spans = plan.shards[i].spans
        known = [s.records for s in spans if s.records is not None]
        total += sum(known) if len(known) == len(spans) else plan.params.reads_per_shard
    return total


@dataclass(frozen=True)
class ReducerKey:
    """One reducer: the region it merges and the children (whole samples) whose rows it reads."""

    index: int
    region: int
    group: int
    children: tuple[int, int]
    samples: int
    expected_s: float


@dataclass
class JobPlan:
    """``runs/<id>/jobs.json``: what the plan chose for each kind of job, and every reducer's key."""

    child: JobSize | None = None
    reducer: JobSize | None = None
    index: JobSize | None = None
    reducers: list[ReducerKey] = field(default_factory=list)
    compute: Compute = field(default_factory=Compute)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index.to_dict() if self.index else None,
                "child": self.child.to_dict() if self.child else None,
                "reducer": self.reducer.to_dict() if self.reducer else None,
                "compute": self.compute.to_dict(),
                "reducers": [[k.region, k.group, k.children[0], k.children[1], k.samples, k.expected_s]
                             for k in self.reducers]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JobPlan:
        keys = [ReducerKey(i, int(r), int(g), (int(a), int(b)), int(n), float(e))
                for i, (r, g, a, b, n, e) in enumerate(d.get("reducers") or [])]
        return cls(job_size_of(d.get("child")), job_size_of(d.get("reducer")), job_size_of(d.get("index")), keys,
                   Compute.from_dict(d.get("compute") or {}))

    def overrides(self) -> dict[str, Any]:
        """The few fields the state machine reads (``$.plan.jobs``)."""
        empty = {"vcpus": "1", "memory_mib": "1024", "timeout_s": BATCH_TIMEOUT_MIN.value}
        return {k: (j.overrides() if j else empty) for k, j in
                (("index", self.index), ("child", self.child), ("reducer", self.reducer))}


def job_size_of(d: Mapping[str, Any] | None) -> JobSize | None:
    return JobSize(**d) if d else None
