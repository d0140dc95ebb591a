"""The headline scale, held small enough for CI: a run of 200 children through the local cloud in
which three children fail for good, finished by ``seqlake local rerun``.

The run ends FAILED with a reason naming the three shards; the re-run computes exactly those three
children (the Batch array of the re-run's execution has three children) and ends SUCCEEDED; every
result table then equals, row for row, the tables of the same input run cleanly (in a state folder
of its own, with 4 shards: the exact merge makes results independent of the sharding, which
tests/core/test_worker_merge.py shows on its own).

200 children, not 1,000 (each child costs the local cloud ~0.3-0.45 CPU-s: 1,000 made this test ~320 of the
suite's CPU-s): no code path has a threshold between the two. Batch is asked about the failed children only
(listed, then the first ``REASON_CHILDREN`` described) and, at the re-run's commit, about its three; the S3
listings stay within one page of 1,000 keys either way (the re-run's listing of ``staging/``: a manifest a
child, 997 at 1,000 children; the commit's listing of a table's parts: one a child); moto's ``ListJobs`` has
no pages. What grows with the children is checked no less strictly: besides the 32 KiB bound, the largest
state payload of the 200-child run may exceed the 4-shard clean run's by less than :data:`PAYLOAD_SLACK`
bytes.
bench/scale.py runs 1,000 and 10,000 children (largest payloads 612 and 614 B).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from localcloud.deployer import ACCOUNT, REGION
from localcloud.state import StateDir
from seqlake.base import faults
from seqlake.base.layout import RunLayout
from seqlake.lake.tables import BY_NAME, COMMIT_TIME_COLUMNS, RESULT_TABLES
from seqlake.local.status_command import describe

pytestmark = pytest.mark.e2e

CHILDREN = 200
PAIRS = 2 * CHILDREN
#: an early child, one in the middle and the last one
FAILING = (17, 130, CHILDREN - 1)
#: what the failed run's largest payload may exceed the clean run's by: its failure (``$.error``, whose cause
#: is the array job's description, and the reason naming three shards), never anything per child. A payload
#: growing by 6 KiB / 196 children (~31 bytes) a child fails, as under 32 KiB at 1,000 children (~30 bytes)
PAYLOAD_SLACK = 6 << 10
BUCKET = f"seqlake-dev-{ACCOUNT}-{REGION}"


def _reads(tmp_path: Path) -> tuple[Path, Path]:
    """The first PAIRS pairs of the bundled demo library."""
    import gzip

    out = []
    for mate in (1, 2):
        raw = resources.files("seqlake.demo_data").joinpath(f"demo_R{mate}.fastq.gz").read_bytes()
        lines = gzip.decompress(raw).split(b"\n")[: 4 * PAIRS]
        path = tmp_path / f"scale_R{mate}.fastq"
        path.write_bytes(b"\n".join(lines) + b"\n")
        out.append(path)
    return out[0], out[1]


def _seqlake(*args: str) -> int:
    """The command line as a user runs it: a process of its own (this test process may hold another
    test's moto mocks)."""
    return subprocess.run([sys.executable, "-m", "seqlake", *args], timeout=1800, check=False).returncode


def _run(reads: tuple[Path, Path], home: Path, reads_per_shard: int) -> int:
    return _seqlake("local", "run", str(reads[0]), str(reads[1]), "--home", str(home),
                    "--reads-per-shard", str(reads_per_shard))


def _status(home: Path, run_id: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(
        Path(RunLayout(str(StateDir(home).bucket_dir(BUCKET)), run_id).status).read_text())
    return status


def _rows(home: Path, run_id: str, table: str) -> list[tuple[Any, ...]]:
    folder = Path(RunLayout(str(StateDir(home).bucket_dir(BUCKET)), run_id).partition(table))
    names = [n for n in BY_NAME[table].schema.names if n not in COMMIT_TIME_COLUMNS]
    t = pq.read_table(sorted(folder.glob("*.parquet")), schema=BY_NAME[table].schema)
    return sorted((tuple(r[n] for n in names) for r in t.to_pylist()), key=repr)


def test_three_failed_children_of_two_hundred_are_rerun_alone(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _reads(tmp_path)
    failing, clean = tmp_path / "failing", tmp_path / "clean"
    # Given a run of 200 children in which three exit 1 on every attempt (SEQLAKE_FAULT, set for
    # `seqlake local run`, reaches its Batch children)
    monkeypatch.setenv(faults.WORKER_VAR, ";".join(f"exit:shard={c}" for c in FAILING))
    assert _run(reads, failing, PAIRS // CHILDREN) != 0
    (first,) = StateDir(failing).runs()
    run_id = first["run_id"]
    assert first["status"] == "FAILED" and first["shards"] == CHILDREN
    status = _status(failing, run_id)
    # Then it is recorded FAILED with a reason naming those three shards
    assert status["state"] == "FAILED" and status["failed_step"] == "ProcessShards"
    assert status["failed_shards"] == list(FAILING)
    assert status["reason"].startswith(f"3 of {CHILDREN} shards failed: ")
    for child in FAILING:
        assert f"shard {child}: seqlake fault injection: exit 1 on shard {child}" in status["reason"]
    # When the failed run is finished (the fault no longer fires)
    monkeypatch.delenv(faults.WORKER_VAR)
    assert _seqlake("local", "rerun", run_id, "--home", str(failing)) == 0
    # Then exactly three children ran again, and the run, under its own id, SUCCEEDED
    again = StateDir(failing).runs()[-1]
    assert again["run_id"] == run_id and again["status"] == "SUCCEEDED" and again["shards"] == len(FAILING)
    assert _status(failing, run_id)["state"] == "SUCCEEDED"
    # and `seqlake local status` tells the story: both attempts (executions), all shards done
    told = describe(StateDir(failing), run_id[:12])
    executions = [value for label, value in told if label.startswith("attempt ")]
    assert len(executions) == 2 and "FAILED" in executions[0] and "SUCCEEDED" in executions[1], executions
    assert ("shards", f"{CHILDREN} of {CHILDREN} done") in told and ("state", "SUCCEEDED") in told
    # and every result table equals the same input's, run without failures
    assert _run(reads, clean, PAIRS // 4) == 0
    (clean_run,) = StateDir(clean).runs()
    assert clean_run["run_id"] == run_id and clean_run["shards"] == 4
    for table in RESULT_TABLES:
        assert _rows(failing, run_id, table) == _rows(clean, run_id, table), table
    # no state's input or output grows with the run: far below Step Functions' 256 KiB, and the 200-child
    # run's largest exceeds the 4-shard run's by its failure alone
    assert first["largest_payload_bytes"] < 32 << 10, first["largest_payload_bytes"]
    assert first["largest_payload_bytes"] < clean_run["largest_payload_bytes"] + PAYLOAD_SLACK, (
        first["largest_payload_bytes"], clean_run["largest_payload_bytes"])
