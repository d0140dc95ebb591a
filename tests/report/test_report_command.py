"""``seqlake local report RUN_ID``: the path of a run's report in the local cloud's state folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from localcloud.state import StateDir
from report.conftest import Run
from seqlake.base.errors import EXIT_BAD_INPUT
from seqlake.cli import main
from seqlake.local.report_command import local_report_path

BUCKET = "seqlake-data-local"


@pytest.fixture
def home(demo_run: Run, tmp_path: Path) -> Path:
    """A state folder whose mirrored bucket holds the demo run (committed tables and run folder)."""
    home = tmp_path / "home"
    state = StateDir(home)
    state.ensure()
    state.save_catalog([])
    bucket = state.objects_dir / BUCKET
    shutil.copytree(demo_run.root / "results", bucket / "results")
    shutil.copytree(demo_run.root / "runs" / demo_run.run_id, bucket / "runs" / demo_run.run_id,
                    ignore=shutil.ignore_patterns("staging", "index"))
    return home


def test_renders_once_then_prints_the_path(demo_run: Run, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert local_report_path(StateDir(home), demo_run.run_id) is None
    assert main(["local", "report", demo_run.run_id[:8], "--home", str(home)]) == 0
    out, err = capsys.readouterr()
    page = Path(out.strip())
    assert page == home / "s3" / BUCKET / "reports" / demo_run.run_id / "index.html"
    assert page.is_file() and "rendered the report" in err
    assert local_report_path(StateDir(home), demo_run.run_id) == page
    (home / "s3" / BUCKET / "reports" / "index.html").unlink()
    assert main(["local", "report", demo_run.run_id, "--home", str(home)]) == 0
    out, err = capsys.readouterr()
    assert Path(out.strip()) == page and err == ""
    assert not (home / "s3" / BUCKET / "reports" / "index.html").exists()  # not rendered again


def test_unknown_and_ambiguous_ids(demo_run: Run, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["local", "report", "nope", "--home", str(home)]) == EXIT_BAD_INPUT
    assert "RUN_ID nope: no such run" in capsys.readouterr().err
    (home / "s3" / BUCKET / "runs" / f"{demo_run.run_id[:4]}zzzz").mkdir()
    assert main(["local", "report", demo_run.run_id[:4], "--home", str(home)]) == EXIT_BAD_INPUT
    assert "names 2 runs" in capsys.readouterr().err


def test_no_local_cloud(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["local", "report", "x", "--home", str(tmp_path / "empty")]) == EXIT_BAD_INPUT
    assert "seqlake demo" in capsys.readouterr().err
