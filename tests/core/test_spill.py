"""A child's allele counts spilled to sorted runs on its disk and merged back a window at a time give the
positions object (every region's every table) of a child that holds them all in memory."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from test_pileup import CONTIGS, MIN_QUALITY, random_batch
from test_worker_merge import assert_same_results

from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.child import worker
from seqlake.child.pileup import AlleleAccumulator
from seqlake.child.spill import FileRun, MemoryRun, merged
from seqlake.demo_data.simulate import write_pairs
from seqlake.lake import merge
from seqlake.lake.positions import IndexLayout, PositionsIndex, read_index, read_region
from seqlake.lake.regions import regions
from seqlake.plan.planfile import Plan
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference


@pytest.fixture(autouse=True)
def _ref_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path / "refcache"))


def test_spilled_runs_add_up_to_the_counts_held_in_memory(tmp_path: Path) -> None:
    rng = random.Random(5)
    batches = [random_batch(rng, 40) for _ in range(12)]
    whole = AlleleAccumulator(CONTIGS, MIN_QUALITY)
    spilling = AlleleAccumulator(CONTIGS, MIN_QUALITY, spill=tmp_path / "spill", row_budget=300)
    for rows, reads in batches:
        whole.add(rows, reads)
        spilling.add(rows, reads)
    assert len(spilling.spilled) >= 3 and not whole.spilled
    assert all(run.path.exists() for run in spilling.spilled)
    for a, b in zip(whole.tables("s"), spilling.tables("s"), strict=True):
        assert a.num_rows > 0 and a.equals(b)
    spilling.close()
    assert not list((tmp_path / "spill").iterdir())


def test_windows_of_runs_sum_equal_keys_in_key_order(tmp_path: Path) -> None:
    """Runs overlapping in every way (and a file run's key search across its sampled keys) merged in windows
    of a few rows: the sums of all of them, key by key, whatever the window."""
    rng = np.random.default_rng(2)
    runs = []
    for k in range(5):
        keys = np.unique(rng.integers(0, 20_000, 3_000 if k else 50))
        counts = rng.integers(0, 1_000, (len(keys), 3))
        # a file run's key search reads one stride of keys after a search of every stride-th key
        runs.append(FileRun(tmp_path / f"run{k}", keys, counts, stride=64) if k % 2 else MemoryRun(keys, counts))
    want: dict[int, np.ndarray] = {}
    for run in runs:
        for key, row in zip(run.keys(0, run.rows), run.counts(0, run.rows), strict=True):
            want[int(key)] = want.get(int(key), 0) + row
    for window in (5, 40, 100_000):
        got = list(merged(runs, 1_000, 19_000, 3, window))
        keys = np.concatenate([k for k, _ in got])
        assert list(keys) == sorted(k for k in want if 1_000 <= k < 19_000)
        assert np.array_equal(np.concatenate([c for _, c in got]), np.array([want[int(k)] for k in keys]))
        assert window > 1_000 or len(got) > 1


@pytest.mark.parametrize(("high", "itemsize"), [(1, 1), (255, 1), (256, 2), (65_535, 2), (65_536, 4), (2**31, 8)])
def test_a_run_is_stored_as_narrow_as_its_counts_and_read_back_as_int32_at_least(
        tmp_path: Path, high: int, itemsize: int) -> None:
    """A big genome's runs are nearly all counts of 0 and 1: their file takes 8 + 32 bytes a row, not
    8 + 128, and the counts come back equal, in the in-memory runs' type (int32, or int64 past it)."""
    keys = np.arange(0, 3_000, 3, dtype=np.int64)
    counts = np.zeros((len(keys), 32), dtype=np.int64)
    counts[::7, 5] = 1
    counts[-1, 31] = high
    run = FileRun(tmp_path / "run", keys, counts, stride=64)
    assert run.path.stat().st_size == len(keys) * (8 + 32 * itemsize)
    back = run.counts(0, run.rows)
    assert back.dtype == (np.int64 if high > 2**31 - 1 else np.int32)
    assert np.array_equal(back, counts) and np.array_equal(run.keys(0, run.rows), keys)
    # a window in the middle, as the merge reads it
    assert np.array_equal(run.counts(100, 250), counts[100:250])


def _index(plan: Plan, child: int) -> PositionsIndex:
    """The child's whole positions index, where its manifest's contigs and window put it."""
    manifest = worker.finished_manifest(plan, child)
    assert manifest is not None and manifest.positions_window
    layout = IndexLayout.of(regions(manifest.contigs, plan.params.region_size), manifest.positions_window)
    return read_index(plan.layout.positions(child), layout, plan.run_id, child)


def _positions(plan: Plan, child: int) -> dict[int, dict[str, pa.Table]]:
    index = _index(plan, child)
    assert index
    return {r: read_region(plan.layout.positions(child), entry) for r, entry in index.items()}


def test_a_child_that_spills_writes_the_positions_of_one_that_does_not(tmp_path: Path) -> None:
    """Reads over three contigs cut into 5 kb regions (pairs across region edges and contig ends), two
    samples in one child: with budgets of a few thousand rows (chunks counted in pieces of 5,000 read
    bases, runs spilled past 8,000 rows, merged 2,000 rows at a time) the child spills runs and writes each
    region's alleles in several record batches; every region's every table equals the unspilled child's, and
    so does every result table the reducers and the commit make of them."""
    rng = np.random.default_rng(3)
    lengths = {"chrA": 12_000, "chrB": 7_000, "chrC": 3_000}
    reference = tmp_path / "ref.fa"
    reference.write_text("".join(f">{name}\n{''.join(rng.choice(list('ACGT'), n))}\n" for name, n in lengths.items()))
    samples = []
    for k, name in enumerate(("s1", "s2")):
        r1, r2 = tmp_path / f"{name}_R1.fastq.gz", tmp_path / f"{name}_R2.fastq.gz"
        write_pairs(reference, r1, r2, 1_000, seed=20 + k)
        samples.append(Sample(name, str(r1), str(r2)))
    pinned = indexed_reference(str(reference))
    plans = [make_plan(f"p{k}", samples, out_prefix=str(tmp_path / f"lake{k}"), reference=pinned, shards=2,
                       params=Params(region_size=5_000)) for k in range(2)]
    children = {plan.array_size for plan in plans}
    assert children == {1}  # both samples in one child
    worker.process_child(plans[0], 0)
    budget = worker.MemoryBudget(allele_rows=8_000, merge_rows=2_000, batch_bases=5_000)
    worker.process_child(plans[1], 0, budget)
    whole, spilled = _index(plans[0], 0), _index(plans[1], 0)
    assert whole.keys() == spilled.keys()
    for region, entry in whole.items():  # the same rows per window and table (bytes differ: batches)
        assert {w: {t: e.rows for t, e in tables.items()} for w, tables in entry.items()} == {
            w: {t: e.rows for t, e in tables.items()} for w, tables in spilled[region].items()}
    a, b = _positions(plans[0], 0), _positions(plans[1], 0)
    assert len(a) >= 5
    streams = 0
    for region, tables in a.items():
        for name, table in tables.items():
            assert table.equals(b[region][name]), (region, name)
            streams += len(b[region][name].to_batches()) > 1
    assert sum(a[r]["alleles"].num_rows for r in a) > 10_000
    assert streams >= len(a)  # the spilled child's alleles came in windows
    # and the reducers, reading streams of several batches, make the same result tables
    for plan in plans:
        merge.merge_run(plan)
    assert_same_results(plans[0], plans[1])
