"""The real ``multiqc`` (pinned in the dev extra) renders a run's report folder with no seqlake plugin."""

from __future__ import annotations

import csv
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from report.conftest import Run
from seqlake.report import render_run
from seqlake.report.data import SUMMARY_COLUMNS


def _multiqc() -> list[str]:
    exe = shutil.which("multiqc", path=str(Path(sys.executable).parent)) or shutil.which("multiqc")
    if exe is None:
        pytest.skip("multiqc is not installed (it is in the dev extra: pip install -e '.[dev]')")
    return [exe]


def test_multiqc_renders_the_run(demo_run: Run, tmp_path: Path) -> None:
    render_run(str(demo_run.root), demo_run.run_id)
    folder = demo_run.root / "reports" / demo_run.run_id
    out = tmp_path / "multiqc"
    done = subprocess.run([*_multiqc(), str(folder), "-o", str(out), "--no-ansi", "--force"],
                          check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    # every seqlake section is in the report, under one seqlake module
    page = (out / "multiqc_report.html").read_text()
    sections = set(re.findall(r'<h3 id="(seqlake_[a-z_]+)"', page))
    mqc_ids = {p.name.removesuffix("_mqc.json") for p in folder.glob("*_mqc.json")} - {"seqlake_general_stats"}
    assert sections == mqc_ids and len(sections) >= 8
    assert '<h2 class="mb-0" id="seqlake">' in page

    # the general statistics table has the run's samples with reads, Q30 and mapping rate as the tables say
    with (out / "multiqc_data" / "multiqc_general_stats.txt").open() as f:
        stats = {row["Sample"]: row for row in csv.DictReader(f, delimiter="\t")}
    expected = demo_run.expected_rows()
    assert sorted(stats) == sorted(expected)
    general = [c.key for c in SUMMARY_COLUMNS if c.general_stats]
    assert {"reads", "q30_pct", "mapped_pct"} <= set(general)
    for sample, want in expected.items():
        got = {col.rsplit("-", 1)[-1]: value for col, value in stats[sample].items() if col != "Sample"}
        assert set(got) == set(general)
        for key in ("reads", "q30_pct", "mapped_pct", "gc_pct", "mean_depth"):
            assert math.isclose(float(got[key]), float(want[key]), rel_tol=1e-12), key  # type: ignore[arg-type]
