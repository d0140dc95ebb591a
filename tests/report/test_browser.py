"""The report in a real browser: headless Chromium, network blocked, every plot drawn, numbers right.

Screenshots are saved under ``test-artifacts/report/`` (``$SEQLAKE_TEST_ARTIFACTS`` to move it) for a
person to look at. Skipped where Chromium is not installed (``make tools`` installs it where root).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from report.browser import Browser, chromium_path
from report.conftest import Run, replicated
from report.test_report import assert_rows_equal
from seqlake.report import render_report, render_run

#: per chart: how many drawn series (paths with points), its box, and whether the page says it finished
PLOTS_JS = """
(() => ({
  rendered: document.body.dataset.rendered === "true",
  figures: Array.from(document.querySelectorAll("section.figure")).map(f => ({
    id: f.id,
    panels: Array.from(f.querySelectorAll(".plot")).map(p => {
      const svg = p.querySelector("svg");
      const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
      const series = svg ? Array.from(svg.querySelectorAll("path.series")) : [];
      return {width: box.width, height: box.height,
              series: series.filter(s => s.getAttribute("d").split(/[ML]/).length > 2
                                         && s.getBBox().width > 0).length,
              bands: svg ? svg.querySelectorAll("polygon.band").length : 0};
    }),
    legend: f.querySelector(".legend").textContent,
  })),
  trimBars: Array.from(document.querySelectorAll("#trimming .bar")).map(b =>
    Array.from(b.children).reduce((w, s) => w + s.getBoundingClientRect().width, 0)),
}))()
"""
#: the summary table as shown: sample -> column -> (data-v, text)
CELLS_JS = """
(() => Object.fromEntries(Array.from(document.querySelectorAll("#summary-table tbody tr")).map(tr =>
  [tr.dataset.sample, Object.fromEntries(Array.from(tr.querySelectorAll("td[data-col]")).map(td =>
    [td.dataset.col, [td.dataset.v, td.textContent]]))])))()
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    exe = chromium_path()
    if exe is None:
        pytest.skip("Chromium is not installed (make tools installs Debian's chromium where root)")
    with Browser(exe) as b:
        yield b


def _open_cleanly(browser: Browser, page: Path) -> None:
    load = browser.open(page.resolve().as_uri())
    assert load.exceptions == []
    assert load.console_errors == []
    assert load.requests == []  # nothing but the file itself: no CDN, no fetch


FIGURES = ["plot-cycle-quality", "plot-cycle-composition", "plot-length-dist", "plot-read-quality-dist",
           "plot-base-quality-dist", "plot-coverage"]


def _check_plots(state: dict[str, Any], band: bool, figures: list[str] = FIGURES, panels: int = 4) -> None:
    assert state["rendered"]
    assert [f["id"] for f in state["figures"]] == figures
    for figure in state["figures"]:
        assert len(figure["panels"]) == (1 if figure["id"] == "plot-coverage" else panels), figure["id"]
        for panel in figure["panels"]:
            assert panel["width"] > 200 and panel["height"] > 100, figure["id"]
            # composition: the five bases of the chosen sample; otherwise the chosen sample (and a median)
            assert panel["series"] >= (5 if figure["id"] == "plot-cycle-composition" else 1), figure["id"]
            if figure["id"] != "plot-cycle-composition":
                assert (panel["bands"] == 1) == band, figure["id"]
        assert figure["legend"], figure["id"]
    assert state["trimBars"] and all(w > 100 for w in state["trimBars"])


def test_demo_report_in_chromium(browser: Browser, demo_run: Run, artifacts: Path) -> None:
    page = Path(render_run(str(demo_run.root), demo_run.run_id))
    _open_cleanly(browser, page)
    _check_plots(browser.evaluate(PLOTS_JS), band=False)
    assert_rows_equal(browser.evaluate(CELLS_JS), demo_run.expected_rows())
    shot = browser.screenshot(artifacts / "demo-report.png")
    assert shot.stat().st_size > 50_000


def test_single_end_untrimmed_unaligned_in_chromium(browser: Browser, plain_run: Run, artifacts: Path) -> None:
    page = Path(render_run(str(plain_run.root), plain_run.run_id))
    _open_cleanly(browser, page)
    _check_plots(browser.evaluate(PLOTS_JS), band=False, figures=FIGURES[:-1], panels=2)
    assert_rows_equal(browser.evaluate(CELLS_JS), plain_run.expected_rows())
    browser.screenshot(artifacts / "single-end-report.png")


def test_many_samples_in_chromium(browser: Browser, demo_run: Run, tmp_path: Path, artifacts: Path) -> None:
    render_report(demo_run.run_id, replicated(demo_run, 40), str(tmp_path))
    _open_cleanly(browser, tmp_path / "index.html")
    _check_plots(browser.evaluate(PLOTS_JS), band=True)
    # choosing another sample redraws every plot for it, with no error
    browser.evaluate("(() => { const s = document.getElementById('sample-choice'); s.value = 'S0017';"
                     " s.dispatchEvent(new Event('change')); })()")
    assert browser.evaluate("document.querySelector('.chosen-sample').textContent") == "S0017"
    assert browser.evaluate("document.querySelector('#summary-table tr.chosen').dataset.sample") == "S0017"
    browser.screenshot(artifacts / "forty-samples-report.png")


def test_failed_run_and_index_in_chromium(browser: Browser, demo_run: Run, tmp_path: Path, artifacts: Path) -> None:
    import json

    root = tmp_path / "lake"
    status = {"state": "FAILED", "reason": "x_R1.fastq.gz:4937: gzip stream truncated", "failed_step": "Shards"}
    (root / "runs" / "r-failed").mkdir(parents=True)
    (root / "runs" / "r-failed" / "status.json").write_text(json.dumps(status))
    page = Path(render_run(str(root), "r-failed"))
    _open_cleanly(browser, page)
    assert "gzip stream truncated" in browser.evaluate("document.querySelector('dl.failure').textContent")
    browser.screenshot(artifacts / "failed-run.png")
    _open_cleanly(browser, root / "reports" / "index.html")
    assert browser.evaluate("document.querySelectorAll('table.runs tbody tr').length") == 1
