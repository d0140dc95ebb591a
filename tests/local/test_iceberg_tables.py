"""The result tables as Iceberg tables on the local cloud (issue 36), end to end through the command line:
a sample sequenced twice has two rows in ``sample_summary`` and one, the newer run's, in
``sample_summary_latest``; ``--as-of-run`` reads the tables as the first run left them (time travel), as
Athena's ``FOR VERSION AS OF`` the run's snapshot (from ``"<table>$snapshots"``) does; the
tables' metadata survives the local cloud's restart (the second run commits on top of the first)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from seqlake.demo_data import __file__ as _demo_init

REPO = Path(__file__).resolve().parents[2]
DEMO = Path(_demo_init).parent
pytestmark = [pytest.mark.e2e]


def _seqlake(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "seqlake", *args, "--home", str(home)], env=env, text=True,
                          capture_output=True, timeout=600, check=False)


def _query(sql: str, home: Path, *extra: str) -> list[dict[str, Any]]:
    proc = _seqlake("local", "query", "--format", "json", *extra, sql, home=home)
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def _head(src: Path, dst: Path, records: int) -> None:
    with gzip.open(src, "rt") as f, gzip.open(dst, "wt") as out:
        for _ in range(records * 4):
            out.write(f.readline())


def test_a_sample_sequenced_twice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, records in ((first, 4000), (second, 2000)):  # the same sample name, other reads: another run
        folder.mkdir()
        for mate in (1, 2):
            _head(DEMO / f"demo_R{mate}.fastq.gz", folder / f"demo_R{mate}.fastq.gz", records)
    reference = str(DEMO / "MN908947.3.fasta")
    for folder in (first, second):
        proc = _seqlake("local", "run", str(folder / "demo_R1.fastq.gz"), str(folder / "demo_R2.fastq.gz"),
                        "--reference", reference, "--jobs", "2", home=home)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    runs = _query("SELECT run_id, read_pairs_raw FROM sample_summary ORDER BY committed_at", home)
    assert [r["read_pairs_raw"] for r in runs] == [4000, 2000]
    older, newer = runs[0]["run_id"], runs[1]["run_id"]
    latest = _query("SELECT run_id, sample, read_pairs_raw FROM sample_summary_latest", home)
    assert latest == [{"run_id": newer, "sample": "demo", "read_pairs_raw": 2000}]
    for view in ("qc_summary_latest", "variants_latest", "consensus_latest"):
        assert {r["run_id"] for r in _query(f"SELECT DISTINCT run_id FROM {view}", home)} <= {newer}, view
    assert _query("SELECT DISTINCT run_id FROM consensus_latest", home) == [{"run_id": newer}]
    # the named query a lab reads first shows the newer run
    proc = _seqlake("local", "query", "--format", "json", "--named", "sample_overview", home=home)
    assert proc.returncode == 0, proc.stderr
    assert [r["run_id"] for r in json.loads(proc.stdout)] == [newer]
    # time travel: as the first run left the tables
    assert _query("SELECT run_id FROM sample_summary", home, "--as-of-run", older) == [{"run_id": older}]
    assert _query("SELECT run_id FROM sample_summary_latest", home, "--as-of-run", older) == [{"run_id": older}]
    bad = _seqlake("local", "query", "--as-of-run", "no-such-run", "SELECT 1", home=home)
    assert bad.returncode == 65 and "no-such-run" in bad.stderr
    # and in Athena's own words (docs/DEPLOY.md): the run's snapshot from the table's "$snapshots", then the table
    # FOR VERSION AS OF it
    (snap,) = _query(f"""SELECT snapshot_id FROM "sample_summary$snapshots"
                         WHERE summary['seqlake.run-id'] = '{older}'""", home)
    version = f"SELECT run_id, read_pairs_raw FROM sample_summary FOR VERSION AS OF {snap['snapshot_id']}"
    assert _query(version, home) == [{"run_id": older, "read_pairs_raw": 4000}]
    missing = _seqlake("local", "query", "SELECT 1 FROM sample_summary FOR VERSION AS OF 42", home=home)
    assert missing.returncode == 65 and "no snapshot 42" in missing.stderr
