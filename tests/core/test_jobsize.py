"""Issue 34, time limits and job sizes: each kind of Batch job sized and timed from the plan's work; the
reduce keyed by region and group of samples; run inputs a later step reads pinned in the run's folder."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq
import pytest

from seqlake.base.errors import BadInputError
from seqlake.base.layout import BAI_SUFFIX, BAM_SUFFIX, CONSENSUS_SUFFIX, RunLayout
from seqlake.base.limits import BATCH_ARRAY_MAX, BATCH_TIMEOUT_MIN
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.demo_data.simulate import write_pairs
from seqlake.lake.regions import child_groups, reducer_keys, regions
from seqlake.plan import sizing
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
PRIMER_BED = TESTS / "data" / "nCoV-2019.V3.primer.bed"


def bench() -> ModuleType:
    """bench/reduce_keys.py: the plan of many samples, made in memory as the planner cuts it."""
    spec = importlib.util.spec_from_file_location("reduce_keys", REPO / "bench" / "reduce_keys.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("reduce_keys", module)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------- the reduce
@pytest.mark.parametrize("samples", [1, 10, 50, 200])
def test_no_reducers_work_grows_with_the_number_of_samples(samples: int) -> None:
    """200 samples of a 5 Mb genome at 30x: one region, and the samples in groups; the largest reducer's
    expected work is the same at 10, 50 and 200 samples (the reducers multiply instead), and within the
    plan's target."""
    plan, contigs = bench().synthetic_plan(samples, 5_000_000, 30.0)
    keys = reducer_keys(plan, contigs)
    assert len(regions(contigs, plan.params.region_size)) == 1
    assert max(k.expected_s for k in keys) <= max(sizing.REDUCER_TARGET_SECONDS,
                                                  sizing.reducer_seconds(5_000_000, [30.0], 1, True) * 1.01)
    # every sample in exactly one group, every child read by one reducer of each region
    covered = sorted(c for k in keys for c in range(*k.children))
    assert covered == list(range(plan.array_size))
    assert sum(k.samples for k in keys) == samples
    if samples >= 10:
        one_group = sizing.reducer_seconds(5_000_000, [30.0] * samples, plan.array_size, True)
        assert max(k.expected_s for k in keys) < one_group / (samples / 10)  # before: one reducer of every sample


def test_the_largest_reducer_is_flat_from_10_to_200_samples() -> None:
    largest = [max(k.expected_s for k in reducer_keys(*bench().synthetic_plan(n, 5_000_000, 30.0)))
               for n in (10, 200)]
    assert largest[0] == largest[1]


def test_groups_hold_whole_samples_of_many_children() -> None:
    """A deep sample's children are never split between groups."""
    plan, contigs = bench().synthetic_plan(6, 5_000_000, 60.0, Params(reads_per_shard=400_000))
    groups = child_groups(plan, contigs, target_s=1.0)  # every sample its own group
    assert len(groups) == 6
    for a, b in groups:
        assert len({plan.shards[i].sample for c in range(a, b) for i in plan.child_shards(c)}) == 1


def test_too_many_reducers_are_refused_in_the_plan() -> None:
    """A small region_size over a large genome: refused before any child runs, naming the parameter."""
    plan, contigs = bench().synthetic_plan(2, 1_500_000_000, 0.01, Params(region_size=100_000, coverage_bin=100),
                                           contigs=3)
    assert len(regions(contigs, plan.params.region_size)) > BATCH_ARRAY_MAX.value
    with pytest.raises(BadInputError, match=r"region_size: .* reducers, more than a Batch array's 10,000"):
        reducer_keys(plan, contigs)


def test_many_samples_times_regions_are_refused_too() -> None:
    plan, contigs = bench().synthetic_plan(1_000, 1_000_000_000, 30.0, contigs=2)
    with pytest.raises(BadInputError, match="sample groups"):
        reducer_keys(plan, contigs)


# ---------------------------------------------------------------------------------------------- timeouts
def test_every_jobs_timeout_covers_its_expected_work_with_margin() -> None:
    """The 200-sample plan: the index job, a child and every reducer get an attempt timeout of at least their
    expected seconds times the margin, and at least Batch's 60 s; each kind its own."""
    row = bench().measure(200, 5_000_000, 30.0, Params().region_size)
    for kind in ("index", "child", "reducer"):
        job = row[kind]
        assert job["timeout_s"] >= max(BATCH_TIMEOUT_MIN.value, job["expected_s"] * sizing.TIMEOUT_MARGIN), kind
    for key in row["keys"]:
        assert row["reducer"]["timeout_s"] >= key[-1] * sizing.TIMEOUT_MARGIN
    assert len({row[k]["timeout_s"] for k in ("index", "child", "reducer")}) == 3
    assert sizing.timeout_for(0) >= BATCH_TIMEOUT_MIN.value


# ---------------------------------------------------------------------------------------------- job sizes
def test_a_virus_index_job_asks_for_at_most_2_vcpus_and_4_gib() -> None:
    job = sizing.index_job_size(29_903, 20_000_000, sizing.Compute(), subject="ref", inputs_in_job=False)
    assert job.vcpus <= 2 and job.memory_mib <= 4_096


def test_a_large_reference_gets_its_builds_memory_and_the_templates_vcpus() -> None:
    job = sizing.index_job_size(1_500_000_000, 0, sizing.Compute(), subject="ref", inputs_in_job=False)
    assert job.vcpus == 8
    # measured: the 1.5 Gb build peaked at 16,963 MiB as its cgroup counted it (page cache included)
    assert 12_288 < job.memory_mib <= 32_768
    assert job.timeout_s >= 697 * sizing.TIMEOUT_MARGIN  # its build took 697 s here (docs/COST.md)


def test_a_large_references_children_get_the_memory_its_index_needs() -> None:
    """The template's WorkerMemoryMiB (7,680) killed a 1.5 Gb reference's child (docs/COST.md); its children
    now ask for what loading the index takes (10,074 MiB resident, measured), within an r5's largest size."""
    compute = sizing.Compute()
    big = sizing.child_size(1_500_000_000, 500_000, True, compute, subject="ref")
    assert big.memory_mib > 10_074 and big.memory_mib > compute.worker_memory_mib
    small = sizing.child_size(5_000_000, 2_000_000, True, compute, subject="ref")
    assert small.memory_mib == compute.worker_memory_mib


def test_a_job_no_instance_can_hold_is_refused() -> None:
    compute = sizing.Compute(instance_types=("c5.large",))
    with pytest.raises(BadInputError, match=r"largest instance of InstanceTypes \(c5.large\)"):
        sizing.child_size(1_500_000_000, 1_000, True, compute, subject="ref.fa")
    # the largest r7a (192 vCPUs, 1,536 GiB): the memory Batch registers for jobs (base/instance_types.json)
    assert sizing.Compute(instance_types=("r5", "r7a")).largest() == (192, int(1_572_864 * 7_985 / 8_192) - 32)
    assert sizing.Compute(instance_types=("x99",)).largest() is None  # unknown: not capped here


def test_the_templates_default_families_cap_the_jobs() -> None:
    """The template's InstanceTypes default (empty: the region's r5d, r6id, r5ad, r5dn, r6idn) was unknown to
    the plan's hand-written table, so nothing was capped there: a job only an r7a could hold was planned, and on
    AWS it would wait RUNNABLE. The plan reads the generated instance file, and the region's default when
    InstanceTypes is empty."""
    for family in ("r5d", "r6id", "r5ad", "r5dn", "r6idn"):
        assert sizing.Compute(instance_types=(family,)).largest() is not None, family
    hong_kong = sizing.Compute.from_env({"INSTANCE_TYPES": "", "AWS_REGION": "ap-east-1"})
    assert hong_kong.instance_types == ("r5d",)
    largest = hong_kong.largest()
    assert largest is not None and largest[0] == 96 and largest[1] < 768 * 1024
    with pytest.raises(BadInputError, match="largest instance of InstanceTypes"):
        sizing.child_size(120_000_000_000, 1_000, True, hong_kong, subject="ref.fa")


def test_compute_from_the_environment() -> None:
    compute = sizing.Compute.from_env({"WORKER_MEMORY_MIB": "4096", "INSTANCE_TYPES": "m5, c5"})
    assert compute.worker_memory_mib == 4096 and compute.instance_types == ("m5", "c5")
    assert sizing.Compute.from_dict(compute.to_dict()) == compute


# ---------------------------------------------------------------------------------------------- pinned inputs
@pytest.fixture(autouse=True)
def _ref_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path_factory.mktemp("refcache")))


def test_the_primer_bed_is_pinned_in_the_runs_folder_and_read_from_there(tmp_path: Path) -> None:
    """The plan copies the BED into runs/<id>/ by its content; the children, the reducers and the commit
    read that copy: the original may go (on AWS the commit's role reads runs/ only)."""
    from seqlake.child.worker import process_child
    from seqlake.commit.merge import merge_run
    from seqlake.demo_data import paths as demo_paths

    _, _, reference = demo_paths()
    r1, r2 = tmp_path / "a_R1.fastq.gz", tmp_path / "a_R2.fastq.gz"
    write_pairs(reference, r1, r2, 2_000, seed=5)
    bed = tmp_path / "elsewhere" / "primers.bed"
    bed.parent.mkdir()
    shutil.copy(PRIMER_BED, bed)
    plan = make_plan("amp", [Sample("s1", str(r1), str(r2))], out_prefix=str(tmp_path / "lake"),
                     reference=indexed_reference(str(reference)), params=Params(primer_bed=str(bed)), shards=2)
    pinned = plan.params.primer_bed
    assert pinned is not None and pinned.startswith(plan.layout.prefix)
    assert Path(pinned).read_bytes() == PRIMER_BED.read_bytes()
    bed.unlink()  # the original is gone (or unreadable to the later steps' roles)
    for child in range(plan.array_size):
        process_child(plan, child)
    merge_run(plan)
    amplicons = pq.read_table(plan.layout.partition("amplicon_depth"))
    assert amplicons.num_rows == 98 + 1


COMPARED = ("sample_summary", "contig_coverage", "low_coverage", "variants", "consensus", "coverage")
#: columns that name the run (its id, its commit time, its files)
RUN_NAMED = ("committed_at", "run_id")


def test_groups_of_samples_give_the_tables_of_one_reducer(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Three samples reduced as one group and as three (one reducer a sample): the same result tables."""
    from seqlake.child.worker import process_child
    from seqlake.commit.merge import merge_run
    from seqlake.demo_data import paths as demo_paths

    _, _, reference = demo_paths()
    samples = []
    for i in range(3):
        r1, r2 = tmp_path / f"s{i}_R1.fastq.gz", tmp_path / f"s{i}_R2.fastq.gz"
        write_pairs(reference, r1, r2, 1_000, seed=10 + i)
        samples.append(Sample(f"s{i}", str(r1), str(r2)))
    pinned = indexed_reference(str(reference))
    results = {}
    for name, target in (("one", math.inf), ("three", 1e-9)):
        monkeypatch.setattr(sizing, "REDUCER_TARGET_SECONDS", target)
        plan = make_plan(name, samples, out_prefix=str(tmp_path / name), reference=pinned,
                         params=Params(reads_per_shard=1_000))
        for child in range(plan.array_size):
            process_child(plan, child)
        totals = merge_run(plan)
        assert totals.regions == (1 if name == "one" else 3)
        for reducer in range(totals.regions):  # each reducer wrote BAM records of its group's samples only
            pieces = json.loads(Path(plan.layout.region_bams_offsets(reducer)).read_bytes())
            assert sorted(pieces) == (["s0", "s1", "s2"] if name == "one" else [f"s{reducer}"])
        results[name] = {t: pq.read_table(plan.layout.partition(t)) for t in COMPARED}
    for sample in ("s0", "s1", "s2"):  # each sample's files joined from its own group's reducers
        files = [Path(RunLayout(str(tmp_path / n), n).sample_file(sample, CONSENSUS_SUFFIX)).read_bytes()
                 for n in ("one", "three")]
        assert files[0] == files[1] and files[0].startswith(f">{sample} ".encode())
        bams = [Path(RunLayout(str(tmp_path / n), n).sample_file(sample, BAM_SUFFIX)).read_bytes()
                for n in ("one", "three")]  # and its BAM from its group's reducers' pieces (reduce/bams)
        assert bams[0] == bams[1] and bams[0].startswith(b"\x1f\x8b")
        bais = [Path(RunLayout(str(tmp_path / n), n).sample_file(sample, BAM_SUFFIX + BAI_SUFFIX)).read_bytes()
                for n in ("one", "three")]
        assert bais[0] == bais[1]
    for table, one in results["one"].items():
        three = results["three"][table]
        key = [c for c in ("sample", "contig", "threshold", "pos", "bin") if c in one.column_names]
        a, b = ([{k: v for k, v in row.items() if k not in RUN_NAMED and not k.endswith("_uri")}
                 for row in t.sort_by([(k, "ascending") for k in key]).to_pylist()] for t in (one, three))
        assert a, table
        differ = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
        assert not differ, (table, {k: (v, differ[0][1][k]) for k, v in differ[0][0].items() if v != differ[0][1][k]})
