"""The Batch runner: real child processes, the job definition's retry strategy as AWS Batch applies it."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import seqlake
from localcloud.batch import (
    DEFAULT_LOG_GROUP,
    ESSENTIAL_EXITED,
    TIMED_OUT,
    BatchRunner,
    Outcome,
    decide,
    local_command,
    log_group_of,
    log_lines,
    worker_args,
)
from localcloud.launcher import Launcher

#: the template's strategy (first match wins; no match = RETRY)
TEMPLATE_STRATEGY = {
    "attempts": 3,
    "evaluateOnExit": [
        {"onExitCode": "65", "action": "exit"},
        {"onStatusReason": "Host EC2*", "action": "retry"},
        {"onReason": "CannotPullContainerError*", "action": "retry"},
    ],
}
#: the common "retry Spot reclaims, exit on anything else" strategy
SPOT_ONLY = {
    "attempts": 3,
    "evaluateOnExit": [
        {"onStatusReason": "Host EC2*", "action": "RETRY"},
        {"onReason": "*", "action": "EXIT"},
    ],
}
RECLAIM = Outcome(None, "Host EC2 (instance i-0123456789abcdef0) terminated.")


@pytest.mark.parametrize(
    ("strategy", "outcome", "attempt", "expected"),
    [
        (TEMPLATE_STRATEGY, Outcome(65, ESSENTIAL_EXITED), 1, "EXIT"),
        (TEMPLATE_STRATEGY, RECLAIM, 1, "RETRY"),
        (TEMPLATE_STRATEGY, RECLAIM, 3, "EXIT"),  # attempts exhausted
        (TEMPLATE_STRATEGY, Outcome(1, ESSENTIAL_EXITED), 1, "RETRY"),  # no entry matches: retried
        (TEMPLATE_STRATEGY, Outcome(None, "x", reason="CannotPullContainerError: no image"), 2, "RETRY"),
        (SPOT_ONLY, Outcome(1, ESSENTIAL_EXITED), 1, "EXIT"),  # onReason '*' matches an empty reason
        (SPOT_ONLY, RECLAIM, 2, "RETRY"),
        ({"attempts": 1}, RECLAIM, 1, "EXIT"),
        (
            {"attempts": 3, "evaluateOnExit": [{"onExitCode": "6*", "action": "EXIT"}]},
            Outcome(65, ""),
            1,
            "EXIT",
        ),
        (
            {"attempts": 3, "evaluateOnExit": [{"onExitCode": "6", "action": "EXIT"}]},
            Outcome(65, ""),
            1,
            "RETRY",
        ),
        # a signalled child has no exit code: onExitCode cannot match it
        ({"attempts": 3, "evaluateOnExit": [{"onExitCode": "*", "action": "EXIT"}]}, RECLAIM, 1, "RETRY"),
        (SPOT_ONLY, Outcome(None, TIMED_OUT, timed_out=True), 1, "EXIT"),  # timeouts are not retried
    ],
)
def test_decide(strategy: dict[str, Any], outcome: Outcome, attempt: int, expected: str) -> None:
    assert decide(strategy, outcome, attempt) == expected


def test_local_command_uses_this_interpreter() -> None:
    assert local_command(["seqlake", "worker"]) == [sys.executable, "-m", "seqlake", "worker"]
    assert local_command(["python3", "-m", "x"]) == [sys.executable, "-m", "x"]
    assert local_command(["sh", "-c", "true"]) == ["sh", "-c", "true"]


class Job:
    """The attributes of moto's batch Job that the runner reads and writes."""

    def __init__(
        self,
        job_id: str,
        command: list[str],
        strategy: dict[str, Any],
        index: int | None = None,
        env: dict[str, str] | None = None,
        timeout: int | None = None,
    ) -> None:
        self.job_id = job_id
        self.job_name = f"name-{job_id}"
        self.job_queue = type("Queue", (), {"name": "q"})()
        self.container_overrides = {"environment": [{"name": k, "value": v} for k, v in (env or {}).items()]}
        self.parameters: dict[str, str] = {}
        self.array_properties = {} if index is None else {"index": index}
        self.timeout = None
        self.job_definition = type(
            "JD",
            (),
            {
                "retry_strategy": strategy,
                "timeout": {"attemptDurationSeconds": timeout} if timeout else None,
                "container_properties": {
                    "command": command,
                    "environment": [
                        {"name": "FROM_JD", "value": "jd"},
                        {"name": "BOTH", "value": "jd"},
                        {"name": "CACHE", "value": "/refcache/sub"},
                    ],
                    "volumes": [{"name": "refcache", "host": {"sourcePath": "/var/lib/x"}}],
                    "mountPoints": [{"sourceVolume": "refcache", "containerPath": "/refcache"}],
                },
            },
        )()
        self.attempts: list[dict[str, Any]] = []
        self.status = "RUNNABLE"
        self.exit_code: int | None = None
        self.job_stopped_reason: str | None = None
        self.job_started_at: Any = None
        self._child_jobs = None

    def _mark_stopped(self, success: bool = True) -> None:
        self.status = "SUCCEEDED" if success else "FAILED"


def _run(
    tmp_path: Path,
    jobs: list[Job],
    parent: Job | None = None,
    concurrency: int = 2,
    sent: list[tuple[str, str, list[str]]] | None = None,
) -> Job:
    def sink(group: str, stream: str, lines: list[str]) -> None:
        if sent is not None:
            sent.append((group, stream, lines))

    runner = BatchRunner(concurrency, {"PATH": "/usr/bin:/bin", "BOTH": "base"}, tmp_path / "logs", log_sink=sink)
    parent = parent or Job("parent", [], {})
    runner(parent, jobs)
    deadline = time.monotonic() + 60
    while runner.active and time.monotonic() < deadline:
        time.sleep(0.02)
    runner.shutdown()
    return parent


def test_exit_65_is_not_retried(tmp_path: Path) -> None:
    job = Job("j:0", ["sh", "-c", "exit 65"], TEMPLATE_STRATEGY, index=0)
    _run(tmp_path, [job])
    assert job.status == "FAILED"
    assert len(job.attempts) == 1
    assert job.attempts[0]["container"]["exitCode"] == 65
    assert job.attempts[0]["statusReason"] == ESSENTIAL_EXITED


def test_sigkill_looks_like_a_spot_reclaim_and_is_retried(tmp_path: Path) -> None:
    script = 'if [ "$AWS_BATCH_JOB_ATTEMPT" = 1 ]; then kill -9 $$; fi; exit 0'
    job = Job("j:1", ["sh", "-c", script], TEMPLATE_STRATEGY, index=1)
    parent = _run(tmp_path, [job])
    assert job.status == "SUCCEEDED"
    assert len(job.attempts) == 2
    first = job.attempts[0]
    assert "exitCode" not in first["container"]
    assert first["statusReason"].startswith("Host EC2 (instance i-")
    assert first["statusReason"].endswith(") terminated.")
    assert job.attempts[1]["container"]["exitCode"] == 0
    assert parent.status == "SUCCEEDED"


def test_failure_matching_no_entry_is_retried_until_attempts_run_out(tmp_path: Path) -> None:
    job = Job("j:2", ["sh", "-c", "exit 3"], TEMPLATE_STRATEGY, index=2)
    parent = _run(tmp_path, [job, Job("j:3", ["true"], TEMPLATE_STRATEGY, index=3)])
    assert job.status == "FAILED"
    assert [a["container"]["exitCode"] for a in job.attempts] == [3, 3, 3]
    assert parent.status == "FAILED"
    assert parent.job_stopped_reason == "Array Child Job failed"


def test_attempt_timeout_is_not_retried(tmp_path: Path) -> None:
    job = Job("t:0", ["sleep", "30"], SPOT_ONLY, index=0, timeout=1)
    t0 = time.monotonic()
    _run(tmp_path, [job])
    assert time.monotonic() - t0 < 10
    assert job.status == "FAILED"
    assert [a["statusReason"] for a in job.attempts] == [TIMED_OUT]


def test_terminating_an_array_parent_stops_its_children(tmp_path: Path) -> None:
    """TerminateJob on an array parent (what the failure step calls when a Batch state timed out): its
    running children are killed and the waiting ones never start, FAILED with the reason, none retried
    (AWS: "terminating an array parent job terminates all of its child jobs")."""
    reason = "seqlake: the ProcessShards step timed out"
    parent = Job("p", [], {})
    children = [Job(f"p:{i}", ["sleep", "30"], SPOT_ONLY, index=i) for i in range(3)]

    def terminate() -> None:
        time.sleep(1.5)
        parent.job_stopped_reason = reason
        parent.stop = True  # moto's Job.terminate

    threading.Thread(target=terminate, daemon=True).start()
    t0 = time.monotonic()
    _run(tmp_path, children, parent=parent, concurrency=2)
    assert time.monotonic() - t0 < 15
    assert [c.status for c in children] == ["FAILED"] * 3
    assert [len(c.attempts) for c in children] == [1, 1, 0]  # the third never started
    assert [a["statusReason"] for c in children for a in c.attempts] == [reason, reason]
    assert children[2].job_stopped_reason == reason and parent.job_stopped_reason == reason


def test_child_environment(tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    code = (
        "import json, os, sys; json.dump({k: os.environ.get(k) for k in ['AWS_BATCH_JOB_ARRAY_INDEX', "
        "'AWS_BATCH_JOB_ATTEMPT', 'AWS_BATCH_JOB_ID', 'FROM_JD', 'BOTH', 'CACHE']}, open(sys.argv[1], 'w'))"
    )
    job = Job("e:4", ["python", "-c", code, str(out)], SPOT_ONLY, index=4, env={"BOTH": "override"})
    _run(tmp_path, [job])
    assert job.status == "SUCCEEDED"
    env = json.loads(out.read_text())
    assert env == {
        "AWS_BATCH_JOB_ARRAY_INDEX": "4",
        "AWS_BATCH_JOB_ATTEMPT": "1",
        "AWS_BATCH_JOB_ID": "e:4",
        "FROM_JD": "jd",
        "BOTH": "override",
        "CACHE": str(tmp_path / "hosts" / "refcache") + "/sub",
    }


def test_plain_job_has_no_array_index_and_jobs_limit_concurrency(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    # each child records how many children were running when it started
    code = (
        "import os, sys, time, pathlib; d = pathlib.Path(sys.argv[1]); "
        "me = d / os.environ['AWS_BATCH_JOB_ID'].replace(':', '_'); me.touch(); "
        "n = len(list(d.iterdir())); time.sleep(0.4); me.unlink(); "
        "(d.parent / ('seen-' + me.name)).write_text(str(n))"
    )
    children = [Job(f"c:{i}", ["python", "-c", code, str(marks)], SPOT_ONLY, index=i) for i in range(4)]
    _run(tmp_path, children, concurrency=2)
    assert all(c.status == "SUCCEEDED" for c in children)
    seen = [int(p.read_text()) for p in tmp_path.glob("seen-*")]
    assert len(seen) == 4
    assert max(seen) <= 2
    single = Job("plain", ["sh", "-c", 'test -z "$AWS_BATCH_JOB_ARRAY_INDEX"'], SPOT_ONLY)
    _run(tmp_path, [], parent=single)
    assert single.status == "SUCCEEDED"


def test_each_attempts_output_goes_to_cloudwatch_logs_named_by_its_file(tmp_path: Path) -> None:
    script = 'echo "attempt $AWS_BATCH_JOB_ATTEMPT"; echo; echo "bad: line 7" >&2; exit 1'
    job = Job("j:9", ["sh", "-c", script], {"attempts": 2}, index=0)
    sent: list[tuple[str, str, list[str]]] = []
    _run(tmp_path, [job], sent=sent)
    assert job.status == "FAILED" and len(job.attempts) == 2
    streams = [a["container"]["logStreamName"] for a in job.attempts]
    assert [(g, s) for g, s, _ in sent] == [(DEFAULT_LOG_GROUP, streams[0]), (DEFAULT_LOG_GROUP, streams[1])]
    assert [lines for _, _, lines in sent] == [["attempt 1", "", "bad: line 7"], ["attempt 2", "", "bad: line 7"]]
    assert Path(streams[1]).read_text() == "attempt 2\n\nbad: line 7\n"


def test_log_group_and_tail() -> None:
    assert log_group_of({"logConfiguration": {"logDriver": "awslogs", "options": {"awslogs-group": "/g"}}}) == "/g"
    assert log_group_of({}) == DEFAULT_LOG_GROUP


def test_log_tail_drops_the_partial_first_line(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert log_lines(log) == [f"line {i}" for i in range(1000)]
    tail = log_lines(log, tail_bytes=30)
    assert tail == ["line 997", "line 998", "line 999"]


def test_seqlake_commands_fork_from_the_fork_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's command (``seqlake ...``) runs in a child of the fork server: no new interpreter is
    started (Popen would fail here), yet it has the job's environment, its own log and its exit code."""
    server = Launcher(
        {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        fork=True,
        preload=("seqlake.cli",),
    )
    server.prepare()  # the server itself is a new interpreter

    def no_popen(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a seqlake command started a new interpreter")

    monkeypatch.setattr("localcloud.launcher.subprocess.Popen", no_popen)
    missing = tmp_path / "no-such-plan.json"
    failing = Job("f:0", ["seqlake", "worker"], SPOT_ONLY, index=0, env={"SEQLAKE_PLAN_URI": str(missing)})
    version = Job("v:1", ["python", "-m", "seqlake", "--version"], SPOT_ONLY, index=1)
    runner = BatchRunner(2, {"PATH": "/usr/bin:/bin"}, tmp_path / "logs", launcher=server)
    try:
        runner(Job("parent", [], {}), [failing, version])
        deadline = time.monotonic() + 60
        while runner.active and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        runner.shutdown()
        server.close()
    assert version.status == "SUCCEEDED"
    assert Path(version.attempts[0]["container"]["logStreamName"]).read_text() == f"seqlake {seqlake.__version__}\n"
    assert failing.status == "FAILED" and len(failing.attempts) == 1  # SPOT_ONLY: exit 1 is not retried
    assert failing.attempts[0]["container"]["exitCode"] == 1
    log = Path(failing.attempts[0]["container"]["logStreamName"]).read_text()
    assert str(missing) in log  # the job's SEQLAKE_PLAN_URI, refused


def test_worker_args() -> None:
    assert worker_args([sys.executable, "-m", "seqlake", "worker", "--plan", "p"]) == ["worker", "--plan", "p"]
    assert worker_args([sys.executable, "-m", "seqlake.other"]) is None
    assert worker_args(["sh", "-c", "seqlake"]) is None


def test_a_closed_fork_server_fails_the_attempt_as_a_container_that_cannot_start(tmp_path: Path) -> None:
    closed = Launcher({"PATH": "/usr/bin:/bin"}, fork=True)
    closed.close()
    job = Job("c:0", ["seqlake", "worker"], SPOT_ONLY, index=0)
    runner = BatchRunner(1, {"PATH": "/usr/bin:/bin"}, tmp_path / "logs", launcher=closed)
    runner(Job("parent", [], {}), [job])
    deadline = time.monotonic() + 60
    while runner.active and time.monotonic() < deadline:
        time.sleep(0.02)
    runner.shutdown()
    assert job.status == "FAILED" and len(job.attempts) == 1  # SPOT_ONLY: any reason but a reclaim exits
    assert job.attempts[0]["statusReason"] == "CannotStartContainerError: the launcher is closed"


def test_a_job_whose_runner_raises_ends_failed_with_the_reason(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception of the runner itself (not of the job's process) fails that job, names itself as the
    reason and lets the array and the run end: it must not stay RUNNING in a future nobody reads."""
    def broken(self: BatchRunner, job: Any, attempt: int) -> dict[str, str]:
        if job.job_id == "b:0":
            raise KeyError("AWS_BATCH_JQ_NAME")
        return {"PATH": "/usr/bin:/bin"}

    monkeypatch.setattr(BatchRunner, "_environment", broken)
    job, other = Job("b:0", ["true"], SPOT_ONLY, index=0), Job("b:1", ["true"], SPOT_ONLY, index=1)
    parent = _run(tmp_path, [job, other])
    assert job.status == "FAILED"
    assert job.job_stopped_reason == "local Batch runner error: KeyError: 'AWS_BATCH_JQ_NAME'"
    assert other.status == "SUCCEEDED"
    assert parent.status == "FAILED" and parent.job_stopped_reason == "Array Child Job failed"


@pytest.mark.usefixtures("launch_mode")
def test_an_attempt_past_its_jobs_memory_is_killed_as_ecs_kills_it(tmp_path: Path, mechanism: str) -> None:
    """Under a job's 128 MiB, an attempt allocating 300 MiB (in a child process of its own) ends and one
    allocating 32 MiB runs, with each mode's measures. A memory cgroup, joined before the program's first
    instruction, counts the whole tree from its start: the kernel kills the first (exit 137, ECS's reason),
    the second's peak is at least its 32 MiB, and a short attempt's resident memory is seen (sampled at once,
    in its cgroup). The rlimit fallback caps each process's data segment: the allocation fails
    (``MemoryError``, the attempt failing with its exit code, not killed), and a command that is not a
    ``seqlake`` function has no peak (its rusage carries the launching process's own across fork and exec)."""
    from seqlake.aws.batch_reasons import BATCH_OUT_OF_MEMORY

    # a child process of the attempt holds the memory: the cgroup counts the whole tree
    hog = "import subprocess, sys; subprocess.run([sys.executable, '-c', \"h = b'x' * (300 << 20)\"], check=True)"
    job = Job("m:0", [sys.executable, "-c", hog], SPOT_ONLY, index=0)
    job.job_definition.container_properties["resourceRequirements"] = [{"type": "MEMORY", "value": "128"}]
    fits = Job("m:1", [sys.executable, "-c", "h = b'x' * (32 << 20)"], SPOT_ONLY, index=1)
    short = Job("m:2", [sys.executable, "-c", "pass"], SPOT_ONLY, index=2)
    forked = Job("m:3", [sys.executable, "-m", "seqlake", "--version"], SPOT_ONLY, index=3)
    for each in (fits, short, forked):
        each.job_definition.container_properties["memory"] = 128
    _run(tmp_path, [job, fits, short, forked])
    assert (fits.status, short.status, forked.status) == ("SUCCEEDED",) * 3
    assert job.status == "FAILED"
    (attempt,) = job.attempts
    lines = [json.loads(x) for x in (tmp_path / "logs" / "batch" / "memory.jsonl").read_text().splitlines()]
    by_job = {line["job_id"]: line for line in lines}
    assert {line["memory_mib"] for line in lines} == {128}
    if mechanism.startswith("cgroup"):
        assert attempt["statusReason"] == BATCH_OUT_OF_MEMORY
        assert attempt["container"] == {**attempt["container"], "exitCode": 137, "reason": BATCH_OUT_OF_MEMORY}
        assert by_job["m:0"]["killed"] and by_job["m:0"]["max_memory_used_mib"] == 128
        assert not by_job["m:1"]["killed"] and 32 <= by_job["m:1"]["max_memory_used_mib"] < 128
        for name in ("m:1", "m:2", "m:3"):  # sampled as soon as it runs, in its cgroup: never nothing
            assert by_job[name]["max_resident_mib"] > 0, by_job[name]
        assert 0 < by_job["m:3"]["max_memory_used_mib"] < 128
    else:
        assert attempt["container"]["exitCode"] == 1 and attempt["statusReason"] == ESSENTIAL_EXITED
        assert "MemoryError" in Path(attempt["container"]["logStreamName"]).read_text()
        assert not any(line["killed"] for line in lines)
        assert by_job["m:1"]["max_memory_used_mib"] is None  # a command: nothing measures its own peak
        assert 0 < by_job["m:3"]["max_memory_used_mib"] < 128  # a seqlake function writes its peak when it ends
        assert all(line["max_resident_mib"] is None for line in lines)  # nothing to sample without a cgroup


def test_an_attempts_page_cache_is_counted_apart(tmp_path: Path) -> None:
    """An attempt that writes more than its job's memory to disk fills its cgroup with page cache, which the
    kernel reclaims at the limit instead of killing (the 1.5 Gb shard's index and spill): its peak as the
    cgroup counts it reaches the limit, and its anonymous and shared memory, sampled, stays at what the
    process holds."""
    from localcloud import memory

    probe = memory.MemoryLimits()
    probe.close()
    if not probe.mode.startswith("cgroup"):
        pytest.skip("no writable memory cgroup here: a Batch attempt's memory is not limited")
    out = tmp_path / "written.bin"
    write = (f"import time; f = open({str(out)!r}, 'wb'); block = b'x' * (1 << 20)\n"
             "for _ in range(256): f.write(block)\n"
             "f.close(); time.sleep(0.3)")
    job = Job("w:0", [sys.executable, "-c", write], SPOT_ONLY, index=0)
    job.job_definition.container_properties["memory"] = 128
    _run(tmp_path, [job])
    assert job.status == "SUCCEEDED" and out.stat().st_size == 256 << 20
    (line,) = [json.loads(x) for x in (tmp_path / "logs" / "batch" / "memory.jsonl").read_text().splitlines()]
    assert not line["killed"] and line["max_memory_used_mib"] >= 100
    assert 0 < line["max_resident_mib"] < 64
