"""The region-keyed reduce: a run cut into many regions gives the tables of the same run in one region."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_worker_merge import assert_same_results, run_all

from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.demo_data import paths
from seqlake.demo_data.simulate import write_pairs
from seqlake.lake import reduce
from seqlake.lake.tables import THRESHOLDS
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference


@pytest.fixture(autouse=True)
def _ref_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path / "refcache"))


def test_many_regions_give_the_tables_of_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r1, r2, reference = paths()
    single = tmp_path / "other_R1.fastq.gz"  # a second, single-end sample (a file may be listed once)
    shutil.copy(r2, single)
    samples = [Sample("s1", str(r1), str(r2)), Sample("s2", str(single))]
    pinned = indexed_reference(str(reference))
    one = make_plan("one", samples, out_prefix=str(tmp_path / "one"), reference=pinned, shards=3)
    # 1,000-base regions: the 29,903-base genome in 30, cut through depth runs, bins and low-coverage intervals
    many = make_plan("many", samples, out_prefix=str(tmp_path / "many"), reference=pinned, shards=4,
                     params=Params(region_size=1_000))
    assert run_all(one).regions == 1
    # and the reducers fold a sample's pieces as soon as a second one arrives (the big-run path)
    monkeypatch.setattr(reduce, "FOLD_ROWS", 1)
    totals = run_all(many)
    assert totals.regions == 30 and totals.rows["low_coverage"] > 0
    assert_same_results(one, many)


def _samtools_depth(reference: Path, r1: Path, r2: Path, minimap2: str, samtools: str,
                    tmp: Path) -> dict[str, np.ndarray]:
    """Per contig, the per-base depth ``samtools depth -a`` gives over the minimap2 command line's alignments."""
    sam = subprocess.run([minimap2, "-ax", "sr", "-t", "1", str(reference), str(r1), str(r2)], capture_output=True,
                         check=True).stdout
    bam = tmp / "cli.bam"
    subprocess.run([samtools, "sort", "-o", str(bam), "-"], input=sam, check=True, capture_output=True)
    out = subprocess.run([samtools, "depth", "-a", str(bam)], capture_output=True, text=True, check=True).stdout
    depth: dict[str, list[int]] = {}
    for line in out.splitlines():
        contig, _, d = line.split("\t")
        depth.setdefault(contig, []).append(int(d))
    return {c: np.array(d, dtype=np.int64) for c, d in depth.items()}


def _below(depth: np.ndarray, threshold: int) -> list[tuple[int, int]]:
    """Maximal 1-based inclusive intervals with depth below ``threshold``."""
    low = np.concatenate([[False], depth < threshold, [False]])
    edges = np.flatnonzero(low[1:] != low[:-1])
    return [(int(s) + 1, int(e)) for s, e in zip(edges[::2], edges[1::2], strict=True)]


def test_thresholds_and_low_coverage_equal_samtools_depth_across_regions(tmp_path: Path, minimap2: str) -> None:
    """A three-contig genome cut into six 20 kb regions (two contigs cut through, at about 25x so the depth
    crosses every threshold along the genome): ``pct_genome_*`` and every ``low_coverage`` interval equal
    ``samtools depth -a`` over the same reads aligned by the minimap2 command line."""
    samtools = shutil.which("samtools")
    if samtools is None:
        pytest.skip("samtools is not installed")
    rng = np.random.default_rng(7)
    lengths = {"chrA": 60_000, "chrB": 25_000, "chrC": 15_000}
    reference = tmp_path / "ref.fa"
    reference.write_text("".join(f">{name}\n{''.join(rng.choice(list('ACGT'), n))}\n" for name, n in lengths.items()))
    r1, r2 = tmp_path / "s_R1.fastq.gz", tmp_path / "s_R2.fastq.gz"
    write_pairs(reference, r1, r2, 8_000, seed=11)
    plan = make_plan("sim", [Sample("s", str(r1), str(r2))], out_prefix=str(tmp_path / "lake"),
                     reference=indexed_reference(str(reference)), params=Params(trim=False, region_size=20_000),
                     shards=3)
    totals = run_all(plan)
    assert totals.regions == 6
    depth = _samtools_depth(reference, r1, r2, minimap2, samtools, tmp_path)
    assert {c: len(d) for c, d in depth.items()} == lengths
    genome = sum(lengths.values())
    (summary,) = pq.read_table(plan.layout.partition("sample_summary")).to_pylist()
    for t in THRESHOLDS:
        at = sum(int((d >= t).sum()) for d in depth.values())
        assert summary[f"pct_genome_{t}x"] == 100 * at / genome, t
    low = pq.read_table(plan.layout.partition("low_coverage")).to_pylist()
    got = sorted((r["contig"], r["threshold"], r["pos"], r["end_pos"]) for r in low)
    want = sorted((c, t, s, e) for c, d in depth.items() for t in THRESHOLDS for s, e in _below(d, t))
    assert got == want
    # intervals of every threshold, and some run through a region's edge inside a contig (the commit joined
    # the two reducers' pieces)
    assert {t for _, t, _, _ in got} == set(THRESHOLDS)
    edges = {"chrA": (20_000, 40_000), "chrB": (20_000,)}
    assert any(s <= edge < e for c, _, s, e in got for edge in edges.get(c, ()))
