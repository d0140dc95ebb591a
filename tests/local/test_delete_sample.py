"""``seqlake local delete-sample NAME --yes`` (issue 36: a participant withdraws consent), end to end through the
command line: after it no table has a row of NAME, no Parquet file anywhere in the local bucket holds one (older
snapshots' files and orphans included), no object's key names it, every other sample's rows are the same as
before, an audit record says who deleted what and when; and the next local run commits on top of the tables
it left. Then ``seqlake local compact`` on the same folder."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from localcloud.state import StateDir
from seqlake.demo_data import __file__ as _demo_init
from seqlake.lake.deletion import sample_tables

REPO = Path(__file__).resolve().parents[2]
DEMO = Path(_demo_init).parent
pytestmark = [pytest.mark.e2e]
GONE, KEPT = "withdrawn", "kept"


def _seqlake(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "seqlake", *args, "--home", str(home)], env=env, text=True,
                          capture_output=True, timeout=600, check=False)


def _query(sql: str, home: Path) -> list[dict[str, Any]]:
    """The rows as ``seqlake local query`` reads them, in this process (a command per query cost ~3 s of imports:
    this test's 99 queries were most of its 7 minutes); the command itself is run once, at the end."""
    result = StateDir(home).query(sql)
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def _query_command(sql: str, home: Path) -> list[dict[str, Any]]:
    proc = _seqlake("local", "query", "--format", "json", sql, home=home)
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def _reads(folder: Path, name: str, start: int, records: int) -> None:
    for mate in (1, 2):
        with gzip.open(DEMO / f"demo_R{mate}.fastq.gz", "rt") as f, \
                gzip.open(folder / f"{name}_R{mate}.fastq.gz", "wt") as out:
            lines = f.readlines()[4 * start: 4 * (start + records)]
            out.writelines(lines)


def _run(home: Path, folder: Path, samples: list[str]) -> None:
    sheet = folder / "samplesheet.csv"
    sheet.write_text("sample,fastq_1,fastq_2\n" + "".join(f"{s},{s}_R1.fastq.gz,{s}_R2.fastq.gz\n" for s in samples))
    proc = _seqlake("local", "run", "--samplesheet", str(sheet), "--reference", str(DEMO / "MN908947.3.fasta"),
                    "--jobs", "2", home=home)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _rows_of(home: Path, sample: str) -> dict[str, list[dict[str, Any]]]:
    return {t: sorted(_query(f"SELECT * FROM {t} WHERE sample = '{sample}'", home), key=repr)
            for t in sample_tables()}


def test_a_deleted_sample_leaves_no_row_no_file_no_object(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, second, third = (tmp_path / n for n in ("first", "second", "third"))
    for folder in (first, second, third):
        folder.mkdir()
    _reads(first, GONE, 0, 1500)
    _reads(first, KEPT, 1500, 1500)
    _reads(second, GONE, 3000, 1000)  # sequenced again: its rows in two runs, older snapshots holding the first
    _run(home, first, [GONE, KEPT])
    _run(home, second, [GONE])
    kept_before = _rows_of(home, KEPT)
    assert kept_before["sample_summary"] and _rows_of(home, GONE)["sample_summary"]

    refused = _seqlake("local", "delete-sample", GONE, home=home)  # without --yes
    assert refused.returncode == 2 and "--yes" in refused.stderr
    unknown = _seqlake("local", "delete-sample", GONE.upper(), "--yes", home=home)
    assert unknown.returncode == 65 and f"did you mean {GONE}" in unknown.stderr
    done = _seqlake("local", "delete-sample", GONE, "--yes", home=home)
    assert done.returncode == 0, done.stderr

    assert _rows_of(home, GONE) == {t: [] for t in sample_tables()}  # no row of it in any table
    assert _rows_of(home, KEPT) == kept_before  # every other row the same
    bucket = home / "s3" / json.loads((home / "catalog.json").read_text())[0]["location"].split("/")[2]
    for path in bucket.rglob("*.parquet"):  # no file anywhere holds a row of it: old snapshots', orphans
        columns = pq.read_schema(path).names
        if "sample" in columns:
            assert GONE not in pq.read_table(path, columns=["sample"]).column("sample").to_pylist(), path
    objects = json.loads((home / "objects.json").read_text())
    named = [k for keys in objects.values() for k in keys if GONE in k]
    named += [str(p) for p in bucket.rglob(f"*{GONE}*")]
    assert named == []
    assert not [u for u in json.loads((home / "sources.json").read_text()) if GONE in u]
    # nor any record of its runs: status.json, the runs row, the state folder's runs (its name and its uploads'
    # keys); the logs (CloudWatch's, on AWS) and the audit record are the exceptions, by design
    assert [r for r in _query("SELECT samples, inputs, reason FROM runs", home) if GONE in repr(r)] == []
    kept_out = {home / "logs", bucket / "deletions"}
    spelled = [str(p) for p in home.rglob("*") if p.is_file() and p.suffix != ".parquet"
               and not any(k in p.parents for k in kept_out) and GONE.encode() in p.read_bytes()]
    assert spelled == []
    assert KEPT in json.dumps(json.loads((home / "runs.json").read_text()))  # the other sample's record stays
    (audit,) = (bucket / "deletions").glob("*.json")
    record = json.loads(audit.read_text())
    assert record["sample"] == GONE and record["requested_by"] and record["finished_at"]
    assert record["rows"]["sample_summary"] == 2 and len(record["runs"]) == 2
    assert GONE not in audit.name

    # the next local run restores the tables as the deletion left them and commits on top of them
    _reads(third, KEPT, 3000, 1000)
    _run(home, third, [KEPT])
    assert len(_query_command(f"SELECT run_id FROM sample_summary WHERE sample = '{KEPT}'", home)) == 2
    assert _rows_of(home, GONE)["sample_summary"] == []

    # compaction (the other maintenance command): each run's files of a table rewritten into one, the snapshots
    # before it expired (--keep-days 0) and their files removed; the rows the same, the state folder's record of
    # its objects in step with its files
    before = _rows_of(home, KEPT)
    files_before = sum(1 for _ in (bucket / "results").rglob("*.parquet"))
    compacted = _seqlake("local", "compact", "--keep-days", "0", home=home)
    assert compacted.returncode == 0, compacted.stderr
    assert _rows_of(home, KEPT) == before
    assert sum(1 for _ in (bucket / "results").rglob("*.parquet")) < files_before
    objects = json.loads((home / "objects.json").read_text())[bucket.name]
    assert [k for k, m in objects.items() if m["body"] and not (bucket / k).is_file()] == []
    assert len(list((bucket / "compactions").glob("*.json"))) == 1
