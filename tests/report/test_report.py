"""The report's files from a real run: self-contained, numbers equal the tables', failed runs, S3."""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from report.conftest import Run, replicated
from seqlake.base import clients, storage
from seqlake.report import data, load_run_tables, render_report, render_run, report_uri, try_render_run
from seqlake.report.data import MAX_POINTS, SUMMARY_COLUMNS, build_report, format_value
from seqlake.report.html import encode


class _Cells(HTMLParser):
    """The summary table's cells: sample -> column -> (data-v, shown text)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, tuple[str, str]]] = {}
        self._sample: str | None = None
        self._col: tuple[str, str] | None = None
        self._in_table = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._in_table = a.get("id") == "summary-table"
        elif self._in_table and tag == "tr" and a.get("data-sample"):
            self._sample = a["data-sample"]
            self.rows[self._sample or ""] = {}
        elif self._in_table and tag == "td" and a.get("data-col"):
            self._col = (a["data-col"] or "", a.get("data-v") or "")

    def handle_data(self, data: str) -> None:
        if self._col and self._sample:
            self.rows[self._sample][self._col[0]] = (self._col[1], data)
            self._col = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False


def summary_cells(page: str) -> dict[str, dict[str, tuple[str, str]]]:
    parser = _Cells()
    parser.feed(page)
    return parser.rows


def assert_rows_equal(shown: dict[str, dict[str, tuple[str, str]]], expected: dict[str, dict[str, object]]) -> None:
    assert sorted(shown) == sorted(expected)
    for sample, want in expected.items():
        for col in SUMMARY_COLUMNS:
            value, text = shown[sample][col.key]
            expected = want[col.key]
            assert text == format_value(expected, col.fmt), (sample, col.key)  # type: ignore[arg-type]
            if expected is None:  # the run has no such number (not aligned, say)
                assert value == "", (sample, col.key)
            else:
                assert math.isclose(float(value), float(expected), rel_tol=1e-12), (sample, col.key)  # type: ignore[arg-type]


def test_summary_numbers_equal_the_tables(demo_run: Run) -> None:
    uri = render_run(str(demo_run.root), demo_run.run_id)
    assert Path(uri) == demo_run.root / "reports" / demo_run.run_id / "index.html"
    assert_rows_equal(summary_cells(Path(uri).read_text()), demo_run.expected_rows())


def test_page_is_self_contained(demo_run: Run) -> None:
    page = Path(render_run(str(demo_run.root), demo_run.run_id)).read_text()
    # nothing to fetch: no external script, style, image, font or frame, and no URL in the page at all
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=\"(?!data:|#|\.\./index\.html)", page)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page)
    assert "@import" not in page and "url(" not in page
    ids = re.findall(r"<section class=\"figure[^\"]*\" id=\"plot-([a-z-]+)\"", page)
    assert ids == ["cycle-quality", "cycle-composition", "length-dist", "read-quality-dist", "base-quality-dist",
                   "coverage"]


def test_multiqc_files_are_custom_content(demo_run: Run) -> None:
    render_run(str(demo_run.root), demo_run.run_id)
    folder = demo_run.root / "reports" / demo_run.run_id
    docs = {p.name: json.loads(p.read_text()) for p in folder.glob("*_mqc.json")}
    stats = docs["seqlake_general_stats_mqc.json"]
    assert stats["plot_type"] == "generalstats"
    expected = demo_run.expected_rows()
    for sample, row in expected.items():
        assert math.isclose(stats["data"][sample]["mapped_pct"], row["mapped_pct"], rel_tol=1e-12)  # type: ignore[arg-type]
    quality = docs["seqlake_cycle_quality_mqc.json"]
    assert [d["name"] for d in quality["pconfig"]["data_labels"]] == ["R1 raw", "R1 trimmed", "R2 raw", "R2 trimmed"]
    # the raw R1 curve is the table's mean quality per cycle
    qp = pq.read_table(demo_run.root / "results" / "qc_position" / f"run_id={demo_run.run_id}").to_pylist()
    want = {str(r["cycle"]): pytest.approx(r["mean_qual"], abs=5.1e-5)  # written to 4 decimals
            for r in qp if r["mate"] == 1 and r["stage"] == "raw"}
    assert quality["data"][0]["demo"] == want
    assert all(d.get("parent_id") == "seqlake" for name, d in docs.items() if "general_stats" not in name)


@pytest.mark.parametrize("budget", [1000, 50])
def test_coverage_keeps_the_depth_within_its_budget(demo_run: Run, budget: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data, "MAX_COVERAGE_POINTS", budget)
    tables = load_run_tables(str(demo_run.root / "results"), demo_run.run_id)
    coverage = next(p for p in build_report(demo_run.run_id, tables).plots if p.id == "coverage")
    (panel,) = coverage.panels
    depth = panel.series["depth"][0]
    rows = tables["coverage"].to_pylist()
    contig_len = max(r["bin_end"] for r in rows)
    assert len(panel.x) <= budget and not np.isnan(depth).any()
    # bins are regrouped, never resampled: the depth summed over the contig is the table's
    width = panel.x[1] - panel.x[0]  # the bins' width (centres are one width apart; the last bin may be shorter)
    widths = np.array([min(width, contig_len - i * width) for i in range(len(panel.x))])
    assert float((depth * widths).sum()) == pytest.approx(sum(r["depth_sum"] for r in rows))


def test_long_axes_are_grouped(demo_run: Run) -> None:
    tables = load_run_tables(str(demo_run.root / "results"), demo_run.run_id)
    qp = tables["qc_position"]
    # the same run as if its reads were 3x longer: cycles 1..450 with the demo's values repeated
    import pyarrow as pa

    longer = pa.concat_tables([qp.set_column(qp.column_names.index("cycle"), "cycle",
                                             pa.array([c + 150 * k for c in qp["cycle"].to_pylist()], pa.int32()))
                               for k in range(3)])
    report = build_report(demo_run.run_id, {**tables, "qc_position": longer})
    quality = next(p for p in report.plots if p.id == "cycle-quality")
    assert len(quality.panels[0].x) <= MAX_POINTS
    assert "grouped 3 to a point" in quality.description


def test_encoding_round_trips_within_its_resolution() -> None:
    import base64

    m = np.array([[0.0, 12.345, np.nan, 99.99], [1e6, 0.5, 3.0, np.nan]])
    for codec, scale in (("u16", 100.0), ("log16", 4096.0)):
        enc = encode(m, codec, scale)
        codes = np.frombuffer(base64.b64decode(enc["data"]), dtype="<u2").reshape(enc["rows"], enc["cols"])
        back = np.where(codes == 65535, np.nan, codes / scale)
        if codec == "log16":
            back = np.expm1(back)
        finite = ~np.isnan(m)
        assert (np.isnan(back) == ~finite).all()
        tol = 0.005 if codec == "u16" else 1.0 / 4096
        assert np.allclose(back[finite][m[finite] < 600], m[finite][m[finite] < 600], rtol=tol, atol=tol)


def test_failed_run_gets_a_short_page_and_the_index_lists_both(demo_run: Run, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    for src in (demo_run.root / "results").rglob("*.parquet"):
        storage.copy(str(src), str(root / src.relative_to(demo_run.root)))
    render_run(str(root), demo_run.run_id)
    status = {"run_id": "bad-1", "state": "FAILED", "reason": "R1.fastq.gz:17: quality line length 149 != 150",
              "failed_step": "Shards", "failed_shard": 3, "samples": ["x"], "finished_at": "2026-11-30T10:00:00Z"}
    storage.write_bytes(str(root / "runs" / "bad-1" / "status.json"), json.dumps(status).encode())
    page = Path(render_run(str(root), "bad-1")).read_text()
    assert "FAILED" in page and "quality line length 149 != 150" in page and "<svg" not in page
    index = (root / "reports" / "index.html").read_text()
    assert f'href="{demo_run.run_id}/index.html"' in index and 'href="bad-1/index.html"' in index


def test_many_samples_show_a_spread(demo_run: Run, tmp_path: Path) -> None:
    render_report(demo_run.run_id, replicated(demo_run, 40), str(tmp_path))
    cells = summary_cells((tmp_path / "index.html").read_text())
    assert len(cells) == 40
    assert cells["S0000"] == cells["S0039"]


def test_reports_on_s3(demo_run: Run) -> None:
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    with moto.mock_aws():
        clients.reset()
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="lake")
        for src in (demo_run.root / "results").rglob("*.parquet"):
            storage.upload(src, f"s3://lake/{src.relative_to(demo_run.root)}")
        uri = render_run("s3://lake", demo_run.run_id)
        assert uri == report_uri("s3://lake", demo_run.run_id)
        head = s3.get_object(Bucket="lake", Key=f"reports/{demo_run.run_id}/index.html")
        assert head["ContentType"].startswith("text/html")
        assert_rows_equal(summary_cells(head["Body"].read().decode()), demo_run.expected_rows())
        assert s3.head_object(Bucket="lake", Key="reports/index.html")["ContentType"].startswith("text/html")
    clients.reset()


def test_a_report_that_fails_to_render_is_an_outcome_not_an_error(demo_run: Run, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    storage.copy(str(next((demo_run.root / "results" / "qc_summary").rglob("*.parquet"))),
                 str(root / "results" / "qc_summary" / f"run_id={demo_run.run_id}" / "part-0.parquet"))
    (root / "results" / "qc_position" / f"run_id={demo_run.run_id}").mkdir(parents=True)
    (root / "results" / "qc_position" / f"run_id={demo_run.run_id}" / "part-0.parquet").write_bytes(b"not parquet")
    outcome = try_render_run(str(root), demo_run.run_id)
    assert outcome.uri is None and outcome.error and "Parquet" in outcome.error
    good = try_render_run(str(demo_run.root), demo_run.run_id)
    assert good.error is None and good.uri == report_uri(str(demo_run.root), demo_run.run_id)
