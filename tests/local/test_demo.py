"""The README's first command, `seqlake demo`: the bundled data through the whole app, then the named
queries, from the real command line in a fresh state folder."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seqlake.demo_data import paths

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e]


def test_demo_fans_out_and_prints_the_named_queries(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
        "SEQLAKE_CACHE_DIR": str(tmp_path / "cache"),  # a first run: nothing translated yet
        "COLUMNS": "250",  # every column of the tables printed
    }
    proc = subprocess.run(
        [sys.executable, "-m", "seqlake", "demo", "--home", str(tmp_path / "home")],
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert " failed:" not in proc.stderr, proc.stderr[-3000:]  # every named query answered
    for state in ("Plan", "ProcessShards", "Commit", "Succeeded"):  # the execution's states, as they happen
        assert f"  {state}\n" in proc.stderr
    assert "4/4" in proc.stderr  # the array job's shard bar: 20,000 pairs at 5,000 reads per shard
    queries = sorted(p.stem for p in (REPO / "queries").glob("*.sql"))
    for name in queries:
        assert f"{name}" in proc.stdout, name
    # qc_overview's raw rows: each mate's read count as the bundled files hold it
    r1, r2, _ = paths()
    counts = {gzip.decompress(p.read_bytes()).count(b"\n") // 4 for p in (r1, r2)}
    raw_rows = [line for line in proc.stdout.splitlines() if "│ raw " in line and "150.0" in line]
    assert len(raw_rows) == 2 and len(counts) == 1, proc.stdout
    (n,) = counts
    assert all(f"│ {n} " in line for line in raw_rows), raw_rows
    runs = json.loads((tmp_path / "home" / "runs.json").read_text())
    assert [(r["status"], r["shards"], r["retried"]) for r in runs] == [("SUCCEEDED", 4, 0)]
    assert (tmp_path / "cache").is_dir()  # the SAM translation was cached where it was told to be
