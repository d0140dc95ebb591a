"""The report in every mode, rendered by ``seqlake process`` and drawn in headless Chromium: amplicon mode
(the real ARTIC V3 MiSeq pair, with the V3 BED and with the same scheme written as primerschemes.org writes a
BED today), long reads, a reference of two contigs; and a report section that fails fails the run.

Issue 37: every ``--primer-bed`` run lost its report to ``KeyError: 'amplicon-depth'`` and still exited 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from report import test_browser
from report.browser import Browser
from report.test_browser import PLOTS_JS
from seqlake.base import faults
from seqlake.demo_data import paths
from seqlake.demo_data.simulate import read_reference
from seqlake.demo_data.simulate_long import LongReadConfig, write_reads

TESTS = Path(__file__).resolve().parents[1]
V3_BED = TESTS / "data" / "nCoV-2019.V3.primer.bed"
#: amplicons of the ARTIC V3 scheme (the issue's "98 amplicons each")
V3_AMPLICONS = 98
_COMPLEMENT = str.maketrans("ACGTacgt", "TGCAtgca")
#: headless Chromium, one per module (test_browser's fixture)
browser = test_browser.browser


def current_style(v3: Path, reference: Path, out: Path) -> Path:
    """The V3 scheme's own primers (coordinates unchanged) written as primerschemes.org writes a BED: seven
    columns, the primer's bases last (read from the reference: a RIGHT primer's reverse complement), names
    ``SARS-CoV-2_<n>_LEFT_<k>`` with ``_alt`` primers numbered ``_2``, ``_3``..., pools as numbers.
    Not a real V5 scheme: the format of one, over V3's coordinates."""
    ref = read_reference(reference)
    genome = ref.contig(0).tobytes().decode()
    seen: dict[str, int] = {}
    lines = []
    for line in v3.read_text().splitlines():
        contig, start, end, name, pool, strand = line.split("\t")[:6]
        amplicon, side = name.split("_")[1], name.split("_")[2]
        key = f"{amplicon}_{side}"
        seen[key] = seen.get(key, 0) + 1
        bases = genome[int(start):int(end)]
        if strand == "-":
            bases = bases.translate(_COMPLEMENT)[::-1]
        lines.append("\t".join((contig, start, end, f"SARS-CoV-2_{amplicon}_{side}_{seen[key]}", pool, strand, bases)))
    out.write_text("\n".join(lines) + "\n")
    return out


def process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "seqlake", "process", *args, "--jobs", "1"], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, check=False)


def summary(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return doc


def _drawn(browser: Browser, page: Path) -> dict[str, Any]:
    """The page opened offline: no exception, no console error, no request; every figure drawn."""
    load = browser.open(page.resolve().as_uri())
    assert load.exceptions == [] and load.console_errors == [] and load.requests == []
    state: dict[str, Any] = browser.evaluate(PLOTS_JS)
    assert state["rendered"]
    for figure in state["figures"]:
        for panel in figure["panels"]:
            assert panel["width"] > 200 and panel["height"] > 100, figure["id"]
            assert panel["series"] >= 1, figure["id"]
    return state


def _amplicon_run(miseq: tuple[Path, Path], reference: Path, bed: Path, out: Path) -> Path:
    proc = process(*map(str, miseq), "--reference", str(reference), "--primer-bed", str(bed), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = summary(out)
    assert doc["state"] == "SUCCEEDED"
    return Path(doc["report_uri"])


@pytest.mark.parametrize("style", ["artic-v3", "primerschemes"])
def test_an_amplicon_run_renders_its_report(style: str, browser: Browser, miseq: tuple[Path, Path], reference: Path,
                                            tmp_path: Path, artifacts: Path) -> None:
    bed = V3_BED if style == "artic-v3" else current_style(V3_BED, reference, tmp_path / "primer.bed")
    page = _amplicon_run(miseq, reference, bed, tmp_path / "lake")
    state = _drawn(browser, page)
    figures = {f["id"]: f for f in state["figures"]}
    assert "plot-amplicon-depth" in figures and len(figures["plot-amplicon-depth"]["panels"]) == 1
    # one point per amplicon of the scheme, in the page's data
    points = browser.evaluate("JSON.parse(document.getElementById('report-data').textContent).plots"
                              ".find(p => p.id === 'amplicon-depth').panels[0].x.length")
    assert points == V3_AMPLICONS
    assert browser.evaluate("document.querySelectorAll('#consensus-table tbody tr').length") == 1
    browser.screenshot(artifacts / f"amplicon-{style}-report.png")


def test_a_long_read_run_renders_its_report(browser: Browser, reference: Path, tmp_path: Path) -> None:
    reads = tmp_path / "ont.fastq.gz"
    write_reads(read_reference(reference), reads, 40, seed=5, cfg=LongReadConfig(median_length=3_000, max_length=9_000))
    proc = process(str(reads), "--reference", str(reference), "--preset", "map-ont", "--no-trim",
                   "--out", str(tmp_path / "lake"))
    assert proc.returncode == 0, proc.stderr
    state = _drawn(browser, Path(summary(tmp_path / "lake")["report_uri"]))
    assert "plot-coverage" in {f["id"] for f in state["figures"]}


def test_a_two_contig_run_renders_its_report(browser: Browser, reference: Path, tmp_path: Path) -> None:
    genome = read_reference(reference).contig(0).tobytes().decode()
    two = tmp_path / "two.fasta"
    two.write_text(f">seg1\n{genome[:15_000]}\n>seg2\n{genome[15_000:]}\n")
    r1, r2, _ = paths()
    proc = process(str(r1), str(r2), "--reference", str(two), "--out", str(tmp_path / "lake"))
    assert proc.returncode == 0, proc.stderr
    state = _drawn(browser, Path(summary(tmp_path / "lake")["report_uri"]))
    coverage = next(f for f in state["figures"] if f["id"] == "plot-coverage")
    assert len(coverage["panels"]) == 2  # one per contig
    assert browser.evaluate("document.querySelectorAll('#consensus-table tbody tr').length") == 2


def test_a_report_section_that_fails_fails_the_run_with_its_reason(miseq: tuple[Path, Path], reference: Path,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "lake"
    proc = process(*map(str, miseq), "--reference", str(reference), "--primer-bed", str(V3_BED), "--out", str(out),
                   env={faults.REPORT_VAR: "fail:section=plot-amplicon-depth"})
    assert proc.returncode == 1
    doc = summary(out)
    assert doc["state"] == "FAILED" and doc["failed_step"] == "Report"
    assert "report section 'plot-amplicon-depth' failed" in doc["reason"]
    assert doc["reason"] in proc.stderr.replace("\n", "")
    # the runs page lists it as failed, with its short page
    run_page = (out / "reports" / doc["run_id"] / "index.html").read_text()
    assert "FAILED" in run_page and "plot-amplicon-depth" in run_page
