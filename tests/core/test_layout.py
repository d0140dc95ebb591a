"""Every object of a run is named by :mod:`seqlake.base.layout`: no other module spells the bucket's folders."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from seqlake.base.layout import LakeLayout, RunLayout, child_of

SRC = Path(__file__).resolve().parents[2] / "src" / "seqlake"
#: a string that builds a path of the bucket's trees (docstrings and comments may name them)
FOLDER = re.compile(r"(^|/)(runs|results|reports|staging)/")


def _code_strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def test_no_module_but_the_layout_spells_a_runs_or_results_path() -> None:
    found = [f"{path.relative_to(SRC)}:{line}: {text!r}"
             for path in sorted(SRC.rglob("*.py")) if path.name != "layout.py"
             for line, text in _code_strings(path) if FOLDER.search(text)]
    assert found == []


def test_the_layout_names_a_runs_objects() -> None:
    run = RunLayout.in_bucket("b", "r-1")
    assert run.plan == "s3://b/runs/r-1/plan.json" and run.request == "s3://b/runs/r-1/request.json"
    assert run.manifest(7) == "s3://b/runs/r-1/staging/child=00007/manifest.json"
    assert run.alignments_part(7) == "s3://b/runs/r-1/parts/alignments/child=00007.parquet"
    assert run.published_part("alignments", "child=00007") == "s3://b/results/alignments/run_id=r-1/child=00007.parquet"
    assert run.region_part("coverage", 3) == "s3://b/runs/r-1/parts/coverage/region=00003.parquet"
    assert run.result_file("qc_summary") == "s3://b/results/qc_summary/run_id=r-1/part-00000.parquet"
    assert run.report == "s3://b/reports/r-1/index.html" and child_of(run.manifest(9999)) == 9999
    assert LakeLayout("s3://b").table_root("runs") == "s3://b/results/runs/"
