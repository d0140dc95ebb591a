"""Lambda's memory, enforced locally: an invocation past its function's MemorySize ends as Lambda ends
it, and every invocation's log ends with Lambda's REPORT line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from localcloud import memory
from localcloud.lambdas import FunctionSpec, LambdaRunner
from seqlake.aws.batch_reasons import LAMBDA_OUT_OF_MEMORY

#: with the fork server and with a new interpreter per invocation: the limit reaches both
pytestmark = pytest.mark.usefixtures("launch_mode")


HANDLER = """
def handler(event, context):
    hog = b"x" * (event["mb"] << 20)  # written, so resident
    return {"held": len(hog) >> 20, "limit": context.memory_limit_in_mb, "request_id": context.aws_request_id}
"""
REPORT = re.compile(
    r"^REPORT RequestId: (?P<id>\S+)\tDuration: (?P<ms>[\d.]+) ms\tBilled Duration: (?P<billed>\d+) ms\t"
    r"Memory Size: (?P<size>\d+) MB(\tMax Memory Used: (?P<used>\d+) MB)?$",
    re.MULTILINE,
)
MEMORY_SIZE = 256


def _runner(tmp_path: Path, env: dict[str, str] | None = None) -> LambdaRunner:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "app.py").write_text(HANDLER)
    spec = FunctionSpec("hog", code, "app.handler", {}, timeout=60, memory=MEMORY_SIZE)
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
            **(env or {})}
    return LambdaRunner({"hog": spec}, base, tmp_path / "logs")


def _log(tmp_path: Path) -> str:
    (path,) = (tmp_path / "logs" / "lambda" / "hog").glob("*.log")
    return path.read_text()


def test_an_invocation_past_its_memory_size_fails_with_runtime_out_of_memory(tmp_path: Path, mechanism: str) -> None:
    runner = _runner(tmp_path)
    assert runner.memory.mode.startswith(mechanism)
    try:
        body, failed = runner.invoke("hog", json.dumps({"mb": 2 * MEMORY_SIZE}).encode())
    finally:
        runner.close()
    error = json.loads(body)
    assert failed, error
    assert error["errorType"] == LAMBDA_OUT_OF_MEMORY
    log = _log(tmp_path)
    (report,) = REPORT.finditer(log)
    assert error["errorMessage"].startswith(f"RequestId: {report['id']} Error: Runtime exited with error: ")
    assert int(report["size"]) == MEMORY_SIZE
    assert int(report["used"]) >= MEMORY_SIZE  # as Lambda reports a killed invocation
    # Lambda's order: START, the function's output, the error, END, REPORT
    lines = log.splitlines()
    assert lines[0] == f"START RequestId: {report['id']} Version: $LATEST"
    assert lines[-2:] == [f"END RequestId: {report['id']}", report.group(0)]
    assert json.loads(lines[-3]) == error


def test_an_invocation_within_its_memory_size_reports_what_it_used(tmp_path: Path, mechanism: str) -> None:
    runner = _runner(tmp_path)
    assert runner.memory.mode.startswith(mechanism)
    try:
        body, failed = runner.invoke("hog", json.dumps({"mb": 64}).encode())
    finally:
        runner.close()
    result = json.loads(body)
    assert not failed, result
    assert result["limit"] == MEMORY_SIZE
    (report,) = REPORT.finditer(_log(tmp_path))
    assert report["id"] == result["request_id"]  # the context's id is the log's
    assert int(report["billed"]) >= float(report["ms"]) > 0
    assert int(report["size"]) == MEMORY_SIZE
    assert 64 <= int(report["used"]) < MEMORY_SIZE


def test_limits_off_lets_an_invocation_use_more(tmp_path: Path) -> None:
    runner = _runner(tmp_path, {memory.var(): "0"})
    try:
        body, failed = runner.invoke("hog", json.dumps({"mb": 2 * MEMORY_SIZE}).encode())
    finally:
        runner.close()
    assert not failed, body
    assert json.loads(body)["held"] == 2 * MEMORY_SIZE
    (report,) = REPORT.finditer(_log(tmp_path))
    assert report["used"] is None  # nothing measured it


def test_every_cgroup_is_removed(tmp_path: Path) -> None:
    limits = memory.MemoryLimits()
    if limits.parent is None:
        pytest.skip(f"no writable memory cgroup here (mode {limits.mode})")
    parent = limits.parent
    runner = _runner(tmp_path)
    try:
        runner.invoke("hog", json.dumps({"mb": 2 * MEMORY_SIZE}).encode())
        runner.invoke("hog", json.dumps({"mb": 1}).encode())
        assert runner.memory.parent is not None
        assert not [p for p in runner.memory.parent.iterdir() if p.is_dir()]
    finally:
        runner.close()
        limits.close()
    assert runner.memory.parent is None
    assert not parent.exists()


@pytest.mark.parametrize("mode", ["cgroup1", "cgroup2"])
def test_a_function_takes_its_cgroups_last_sample_itself_as_it_ends(tmp_path: Path, mode: memory.Mode) -> None:
    """A forked function may start and end between two of the caller's samples (1 run in 20 of
    test_batch's memory test, on a loaded machine, saw no resident memory at all): as it ends it reads its
    own cgroup's counters (``forkserver.write_peak``), and the cap's resident peak counts that sample."""
    from localcloud import forkserver

    cgroup = tmp_path / "run-1"
    cgroup.mkdir()
    (cgroup / "memory.stat").write_text("total_rss 0\ntotal_shmem 0\nanon 0\nshmem 0\n")
    cap = memory.Cap(mode, 128, cgroup=cgroup, resident_file=tmp_path / "1.resident")
    cap.watch()  # the caller's samples: nothing resident yet
    counters = ("total_rss", "total_shmem") if mode == "cgroup1" else ("anon", "shmem")
    (cgroup / "memory.stat").write_text(f"{counters[0]} {3 << 20}\n{counters[1]} {1 << 20}\nfile 99999999\n")
    forkserver.write_peak(cap.confinement)  # the child's end, while its pages are still charged
    (cgroup / "memory.stat").write_text("total_rss 0\ntotal_shmem 0\nanon 0\nshmem 0\n")  # and gone
    assert cap.resident_peak_mib() == 4
    (cgroup / "memory.stat").unlink()  # a real cgroup's files go with it
    cap.close()
    assert not (tmp_path / "1.resident").exists()
