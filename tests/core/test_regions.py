"""Regions and the per-child positions object: the cut, the offsets, one ranged read per region."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from seqlake.base.params import Params, coverage_bin_width
from seqlake.lake.positions import (
    IndexLayout,
    dictionary_column,
    read_index,
    read_region,
    table_from_arrays,
    write_positions,
)
from seqlake.lake.regions import RegionMap, regions, window_size, windows
from seqlake.lake.tables import COVERAGE_BINS, DEPTH_RUNS, POSITION_STAGING

CONTIGS = [("chr1", 250), ("chr2", 40), ("chr3", 30), ("chr4", 50), ("chr5", 100)]


def test_long_contigs_are_cut_and_short_ones_grouped() -> None:
    got = [[(p.contig, p.start, p.end) for p in r.pieces] for r in regions(CONTIGS, 100)]
    assert got == [[("chr1", 0, 100)], [("chr1", 100, 200)], [("chr1", 200, 250)],
                   [("chr2", 0, 40), ("chr3", 0, 30)], [("chr4", 0, 50)], [("chr5", 0, 100)]]
    assert [r.index for r in regions(CONTIGS, 100)] == list(range(6))
    # every base is in exactly one region, in reference order
    assert sum(r.bases for r in regions(CONTIGS, 100)) == sum(n for _, n in CONTIGS)
    assert len(regions(CONTIGS, 10**9)) == 1
    m = RegionMap(regions(CONTIGS, 100))
    assert [m.region_at("chr1", p) for p in (0, 99, 100, 249)] == [0, 0, 1, 2] and m.region_at("chr3", 5) == 3


def test_bins_must_not_straddle_regions() -> None:
    assert coverage_bin_width(Params(), 29_903) == 100
    assert coverage_bin_width(Params(), 3_100_000_000) == 5_000  # GRCh38: 620,000 bins per sample
    assert coverage_bin_width(Params(region_size=3_000), 3_100_000_000) == 1_000  # widened, then made to divide
    with pytest.raises(ValueError, match="divide"):
        Params(coverage_bin=300, region_size=1_000)


def _runs(rows: list[tuple[int, str, int, int, int]]) -> pa.Table:
    samples, contigs = ["a", "b"], [c for c, _ in CONTIGS]
    cols = list(zip(*rows, strict=True))
    return table_from_arrays(DEPTH_RUNS, {
        "sample": dictionary_column(np.array(cols[0]), samples),
        "contig": dictionary_column(np.array([contigs.index(c) for c in cols[1]]), contigs),
        "start": np.array(cols[2]), "stop": np.array(cols[3]), "depth": np.array(cols[4], dtype=np.int32)})


def test_each_region_reads_its_rows_with_intervals_cut_at_its_edges(tmp_path: Path) -> None:
    runs = _runs([(0, "chr1", 90, 210, 3), (0, "chr3", 0, 30, 1), (1, "chr1", 5, 10, 2), (1, "chr2", 0, 5, 7)])
    bins = table_from_arrays(COVERAGE_BINS, {
        "sample": dictionary_column(np.array([0, 0]), ["a", "b"]),
        "contig": dictionary_column(np.array([0, 4]), [c for c, _ in CONTIGS]),
        "pos": np.array([100, 0]), "depth_sum": np.array([9, 4])})
    path = tmp_path / "positions.arrows"
    index = write_positions(path, {"depth_runs": runs, "coverage_bins": bins}, CONTIGS, regions(CONTIGS, 100),
                            window=100, run_id="r", child=0)
    assert sorted(index) == [0, 1, 2, 3, 5]  # region 4 (chr4) has no rows: no entry
    assert path.stat().st_size == max(e.offset + e.length for r in index.values() for w in r.values()
                                      for e in w.values())

    def region(r: int) -> dict[str, list[dict[str, object]]]:
        return {k: v.to_pylist() for k, v in read_region(str(path), index[r]).items()}

    got = region(0)
    # the run over 90..210 of sample a is cut in three; both samples, in sample order; every table present
    assert got["depth_runs"] == [{"sample": "a", "contig": "chr1", "start": 90, "stop": 100, "depth": 3},
                                 {"sample": "b", "contig": "chr1", "start": 5, "stop": 10, "depth": 2}]
    assert got["coverage_bins"] == [] and set(got) == {t.name for t in POSITION_STAGING}
    assert region(1)["depth_runs"] == [{"sample": "a", "contig": "chr1", "start": 100, "stop": 200, "depth": 3}]
    assert region(1)["coverage_bins"] == [{"sample": "a", "contig": "chr1", "pos": 100, "depth_sum": 9}]
    assert region(2)["depth_runs"][0]["start"] == 200 and region(2)["depth_runs"][0]["stop"] == 210
    # a grouped region's contig dictionary is its own contigs, so every child codes them alike
    three = read_region(str(path), index[3])["depth_runs"]
    assert three.column("contig").combine_chunks().dictionary.to_pylist() == ["chr2", "chr3"]
    assert [(r["sample"], r["contig"]) for r in three.to_pylist()] == [("a", "chr3"), ("b", "chr2")]
    assert region(5)["coverage_bins"] == [{"sample": "a", "contig": "chr5", "pos": 0, "depth_sum": 4}]


def test_a_cut_object_fails_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "positions.arrows"
    runs = _runs([(0, "chr1", 0, 50, 1)])
    index = write_positions(path, {"depth_runs": runs}, CONTIGS, regions(CONTIGS, 100), window=100, run_id="r",
                            child=0)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"positions\.arrows"):
        read_region(str(path), index[0])


def test_a_region_is_cut_into_windows_and_its_index_read_back(tmp_path: Path) -> None:
    first, grouped = regions(CONTIGS, 250)

    assert [[(p.contig, p.start, p.end) for p in w.pieces] for w in windows(first, 100)] == [
        [("chr1", 0, 100)], [("chr1", 100, 200)], [("chr1", 200, 250)]]
    assert [[(p.contig, p.start, p.end) for p in w.pieces] for w in windows(grouped, 80)] == [
        [("chr2", 0, 40), ("chr3", 0, 30)], [("chr4", 0, 50)], [("chr5", 0, 80)], [("chr5", 80, 100)]]
    assert [w.pieces for w in windows(grouped, 10**6)] == [grouped.pieces]  # at most a window: one (a virus)
    assert window_size(100) == 1_000_000 and window_size(300) == 999_900  # whole bins
    runs = _runs([(0, "chr1", 90, 210, 3), (1, "chr1", 0, 250, 1)])
    path = tmp_path / "p.arrows"
    index = write_positions(path, {"depth_runs": runs}, CONTIGS, regions(CONTIGS, 250), window=100, run_id="r",
                            child=3)
    layout = IndexLayout.of(regions(CONTIGS, 250), 100)
    assert sorted(index[0]) == [0, 1, 2] and read_index(str(path), layout, "r", 3) == index
