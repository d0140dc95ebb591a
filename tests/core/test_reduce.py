"""The region-keyed reduce: a run cut into many regions gives the tables of the same run in one region."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_worker_merge import assert_same_results, run_all

from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.demo_data import paths
from seqlake.plan.planner import make_plan


@pytest.fixture(autouse=True)
def _ref_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path / "refcache"))


def test_many_regions_give_the_tables_of_one(tmp_path: Path) -> None:
    r1, r2, reference = paths()
    single = tmp_path / "other_R1.fastq.gz"  # a second, single-end sample (a file may be listed once)
    shutil.copy(r2, single)
    samples = [Sample("s1", str(r1), str(r2)), Sample("s2", str(single))]
    one = make_plan("one", samples, out_prefix=str(tmp_path / "one"), reference=str(reference), shards=3)
    # 1,000-base regions: the 29,903-base genome in 30, cut through depth runs, bins and low-coverage intervals
    many = make_plan("many", samples, out_prefix=str(tmp_path / "many"), reference=str(reference), shards=4,
                     params=Params(region_size=1_000))
    assert run_all(one).regions == 1
    totals = run_all(many)
    assert totals.regions == 30 and totals.rows["low_coverage"] > 0
    assert_same_results(one, many)
