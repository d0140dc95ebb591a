"""Allele counts spilled to sorted runs on disk and merged back a window at a time give the counts held in
memory. (The child no longer counts alleles: the reducers do, from the records, tests/core/test_record_counts.py;
the spill stays the accumulator's bound for any caller that counts more than a window.)"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from test_pileup import CONTIGS, MIN_QUALITY, random_batch

from seqlake.lake.pileup import AlleleAccumulator
from seqlake.lake.spill import FileRun, MemoryRun, merged


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
