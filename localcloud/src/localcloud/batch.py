"""AWS Batch, locally: each child job is its own OS process, ``jobs`` at a time.

A child runs the job definition's container command (``python``/``seqlake`` mapped to this
interpreter) with the environment Batch gives a container: the job definition's ``environment``,
then the submit-time overrides on top, then ``AWS_BATCH_JOB_ID``, ``AWS_BATCH_JOB_ATTEMPT``,
``AWS_BATCH_JOB_ARRAY_INDEX`` (array children only), ``AWS_BATCH_JQ_NAME`` and
``AWS_BATCH_CE_NAME``.

The job definition's ``retryStrategy`` is applied as AWS Batch documents it
(https://docs.aws.amazon.com/batch/latest/APIReference/API_EvaluateOnExit.html): after a failed
attempt, the first ``evaluateOnExit`` entry whose given conditions all match decides RETRY or EXIT;
each condition is a pattern that may end in ``*`` (prefix match) and is otherwise exact;
``onExitCode`` is matched against the decimal exit code, ``onStatusReason`` against the attempt's
status reason, ``onReason`` against the container's reason; when no entry matches the job is
retried, while attempts remain. A job that exceeds ``attemptDurationSeconds`` is not retried
(https://docs.aws.amazon.com/batch/latest/userguide/job_timeouts.html).

A container command that is the app's worker (``seqlake ...`` or ``python -m seqlake ...``: the app's adapter
names it, :class:`.contract.App`) is run as the worker's real entry point (``seqlake.cli:run``) by the local
cloud's :class:`.launcher.Launcher`:
forked from its fork server, which imported the worker's libraries once, the child still is its own
process with the job's environment and its own log, without a second of imports per attempt. Any other
command is started as a new process.

A child killed by a signal is reported as a Spot reclaim is: status reason
``Host EC2 (instance i-...) terminated.`` and no exit code. That is how the fault tests simulate
losing an instance: ``kill -9`` the child.

With the app's containers setting at ``1`` in the runner's base environment (``--containers``), every attempt is
instead a container of the worker image (:mod:`localcloud.containers`), given only what Batch
gives a container, with the host volumes mounted rather than substituted.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcloud import containers, contract, memory, rules
from localcloud.aws_texts import BATCH_OUT_OF_MEMORY
from localcloud.launcher import Child, Launcher, Popened, Program

ESSENTIAL_EXITED = "Essential container in task exited"
TIMED_OUT = "Job attempt duration exceeded timeout"
#: AWS Batch allows 1..10 attempts
MAX_ATTEMPTS = 10


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended, in the terms ``evaluateOnExit`` matches against."""

    exit_code: int | None
    status_reason: str
    reason: str | None = None
    timed_out: bool = False

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def _matches(pattern: str | None, value: str | None) -> bool:
    if pattern is None:
        return True
    if value is None:
        return False
    return value.startswith(pattern[:-1]) if pattern.endswith("*") else value == pattern


def decide(retry_strategy: dict[str, Any] | None, outcome: Outcome, attempt: int) -> str:
    """``RETRY`` or ``EXIT`` after failed attempt number ``attempt`` (1-based)."""
    strategy = retry_strategy or {}
    attempts = max(1, min(MAX_ATTEMPTS, int(strategy.get("attempts", 1))))
    if outcome.timed_out or attempt >= attempts:
        return "EXIT"
    for rule in strategy.get("evaluateOnExit") or []:
        exit_code = None if outcome.exit_code is None else str(outcome.exit_code)
        if (
            _matches(rule.get("onExitCode"), exit_code)
            and _matches(rule.get("onStatusReason"), outcome.status_reason)
            and _matches(rule.get("onReason"), outcome.reason or "")
        ):
            return "RETRY" if str(rule.get("action", "")).upper() == "RETRY" else "EXIT"
    return "RETRY"


def instance_id(job_id: str, attempt: int) -> str:
    return "i-" + hashlib.sha256(f"{job_id}/{attempt}".encode()).hexdigest()[:17]


def local_command(command: list[str]) -> list[str]:
    """The container's command on this machine: its Python is this interpreter."""
    if not command:
        raise ValueError("the job definition has no command")
    head, worker = Path(command[0]).name, contract.app().worker_command
    if worker and head == worker:
        return [sys.executable, "-m", worker, *command[1:]]
    if head.startswith("python"):
        return [sys.executable, *command[1:]]
    return list(command)


def worker_args(argv: list[str]) -> list[str] | None:
    """The arguments of a local command that runs the app's worker, ``python -m <worker> ARGS`` (None for any
    other, or when the app has no worker entry point: :attr:`.contract.App.worker_main`)."""
    app = contract.app()
    if not (app.worker_command and app.worker_main):
        return None
    head = [sys.executable, "-m", app.worker_command]
    return argv[len(head) :] if argv[: len(head)] == head else None


def _substitute(command: list[str], parameters: dict[str, str]) -> list[str]:
    """Batch replaces ``Ref::name`` placeholders in the command with the job's parameters."""
    return [parameters.get(a[5:], a) if a.startswith("Ref::") else a for a in command]


@dataclass
class ArrayProgress:
    job_id: str
    job_name: str
    size: int
    succeeded: int = 0
    failed: int = 0
    running: int = 0
    retries: int = 0
    started: float = field(default_factory=time.time)
    finished: float | None = None
    failures: list[str] = field(default_factory=list)


#: (log group, log stream, lines) -> None: an attempt's output, for CloudWatch Logs
LogSink = Callable[[str, str, list[str]], None]
#: the awslogs driver's group when the job definition names none
DEFAULT_LOG_GROUP = "/aws/batch/job"
#: the tail of an attempt's output that is sent (a worker's last lines say why it failed)
LOG_TAIL_BYTES = 1 << 20


def log_group_of(container_properties: dict[str, Any]) -> str:
    options = (container_properties.get("logConfiguration") or {}).get("options") or {}
    return str(options.get("awslogs-group") or DEFAULT_LOG_GROUP)


def log_lines(path: Path, tail_bytes: int = LOG_TAIL_BYTES) -> list[str]:
    """The last ``tail_bytes`` of an attempt's output as lines (a partial first line dropped)."""
    with path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - tail_bytes))
        data = f.read()
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[1:] if size > tail_bytes else lines


class BatchRunner:
    """The hook moto's patched ``SubmitJob`` calls; runs jobs in the background."""

    def __init__(
        self,
        jobs: int,
        base_env: dict[str, str],
        logs_dir: Path,
        *,
        on_change: Callable[[ArrayProgress], None] | None = None,
        log_sink: LogSink | None = None,
        launcher: Launcher | None = None,
        credentials: Callable[[str], dict[str, str]] | None = None,
    ) -> None:
        """``credentials``: role ARN -> a container's environment credentials (the job role's, as the
        container credentials endpoint serves them on AWS; ``localcloud/iam.py``)."""
        self.jobs = max(1, jobs)
        self.credentials = credentials
        #: where the attempts' processes come from (shared with the local Lambda; by default its own)
        self._owns_launcher = launcher is None
        self.launcher = launcher or Launcher(base_env, server_log=logs_dir / "batch" / "forkserver.log")
        #: where an attempt's output goes after the attempt, as the awslogs driver sends it to CloudWatch
        self.log_sink = log_sink
        self.base_env = base_env
        self.logs_dir = logs_dir
        self.on_change = on_change
        self.progress: dict[str, ArrayProgress] = {}
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="batch-child")
        self._lock = threading.Lock()
        self._procs: dict[int, Child] = {}
        self._active = 0
        #: attempts run as containers of the worker image (None: as processes)
        self.containers = containers.ContainerRunner(containers.image_ref()) if containers.enabled(base_env) else None
        #: a process attempt capped at its job's memory (a container is capped by podman)
        self.memory = memory.MemoryLimits(memory.enabled(base_env) and self.containers is None)

    @property
    def active(self) -> int:
        with self._lock:
            return self._active

    def __call__(self, parent: Any, children: list[Any]) -> None:
        progress = ArrayProgress(parent.job_id, parent.job_name, max(1, len(children)))
        with self._lock:
            self.progress[parent.job_id] = progress
            self._active += 1
        runnable = children or [parent]
        futures = [self._pool.submit(self._run_job, job, progress, _terminated(parent, job)) for job in runnable]
        threading.Thread(
            target=self._finish_parent,
            args=(parent, children, futures, progress),
            daemon=True,
            name=f"batch-parent-{parent.job_id}",
        ).start()

    def _finish_parent(
        self, parent: Any, children: list[Any], futures: list[Future[None]], progress: ArrayProgress
    ) -> None:
        wait(futures)
        if children:
            ok = all(c.status == "SUCCEEDED" for c in children)
            started = [c.job_started_at for c in children if c.job_started_at is not None]  # a cancelled one: None
            parent.job_started_at = min(started) if started else None
            if not ok and getattr(parent, "stop", False) is not True:  # a terminated parent keeps its reason
                parent.job_stopped_reason = "Array Child Job failed"
            parent._mark_stopped(success=ok)
        progress.finished = time.time()
        self._changed(progress)
        with self._lock:
            self._active -= 1

    def _changed(self, progress: ArrayProgress) -> None:
        if self.on_change is not None:
            self.on_change(progress)

    def _host_paths(self, props: dict[str, Any]) -> dict[str, str]:
        """Container paths of host volumes -> one local folder per volume, shared by all children (as
        all containers on one instance share the host folder)."""
        volumes = {v.get("name"): v for v in props.get("volumes") or []}
        out = {}
        for mount in props.get("mountPoints") or []:
            volume = volumes.get(mount.get("sourceVolume"))
            if volume is not None and mount.get("containerPath"):
                local = self.logs_dir.parent / "hosts" / str(volume["name"])
                local.mkdir(parents=True, exist_ok=True)
                out[str(mount["containerPath"]).rstrip("/")] = str(local)
        return out

    def _environment(self, job: Any, attempt: int) -> dict[str, str]:
        props = job.job_definition.container_properties or {}
        env = dict(self.base_env)
        env.update(self._batch_environment(job, attempt))
        for container_path, local in self._host_paths(props).items():
            for name, value in env.items():
                if value == container_path or value.startswith(container_path + "/"):
                    env[name] = local + value[len(container_path) :]
        return env

    def _batch_environment(self, job: Any, attempt: int) -> dict[str, str]:
        """What Batch sets in a container: the job definition's environment, the overrides, ``AWS_BATCH_*``."""
        props = job.job_definition.container_properties or {}
        env = {e["name"]: str(e["value"]) for e in props.get("environment") or []}
        env.update({e["name"]: str(e["value"]) for e in job.container_overrides.get("environment") or []})
        env.update(
            {
                "AWS_BATCH_JOB_ID": job.job_id,
                "AWS_BATCH_JOB_ATTEMPT": str(attempt),
                "AWS_BATCH_JQ_NAME": job.job_queue.name,
                "AWS_BATCH_CE_NAME": "local",
            }
        )
        index = (job.array_properties or {}).get("index")
        if index is not None:
            env["AWS_BATCH_JOB_ARRAY_INDEX"] = str(index)
        if self.credentials is not None:
            env.update(self.credentials(str(props.get("jobRoleArn") or "")))
        return env

    def _run_job(self, job: Any, progress: ArrayProgress, terminated: Callable[[], str | None]) -> None:
        """Run the job's attempts. Whatever the runner itself raises, the job ends FAILED with the error
        as its reason: an exception left in the pool's future would leave it RUNNING, and the run waiting."""
        try:
            stuck = rules.unschedulable(job)
            if stuck is not None:  # on AWS: RUNNABLE until the queue's JobStateTimeLimitActions cancel it
                self._fail_unstarted(job, progress, stuck)
                return
            self._run_attempts(job, progress, terminated)
        except Exception as err:
            reason = f"local Batch runner error: {type(err).__name__}: {err}"
            traceback.print_exc(file=sys.stderr)
            if job.status not in ("SUCCEEDED", "FAILED"):
                job.job_stopped_reason = reason
                job._mark_stopped(success=False)
                with self._lock:
                    progress.failed += 1
                    progress.failures.append(f"{job.job_id}: {reason}")
            with contextlib.suppress(Exception):
                self._changed(progress)

    def _fail_unstarted(self, job: Any, progress: ArrayProgress, reason: str) -> None:
        """A job that never gets an instance: FAILED with the reason, no attempt (as Batch cancels it)."""
        job.job_stopped_reason = reason
        job._mark_stopped(success=False)
        with self._lock:
            progress.failed += 1
            progress.failures.append(f"{job.job_id}: {reason}")
        self._changed(progress)

    def _run_attempts(self, job: Any, progress: ArrayProgress, terminated: Callable[[], str | None]) -> None:
        jd = job.job_definition
        props = jd.container_properties or {}
        command = job.container_overrides.get("command") or props.get("command") or []
        command = _substitute(list(command), job.parameters)
        argv = command if self.containers is not None else local_command(command)
        timeout = (job.timeout or jd.timeout or {}).get("attemptDurationSeconds")
        attempt = 0
        while True:
            attempt += 1
            stopped = terminated()
            if stopped is not None:  # TerminateJob before it started: cancelled, no attempt
                self._failed(job, progress, stopped, None)
                break
            job.status = "RUNNING"
            now = time.time()
            if attempt == 1:
                job.job_started_at = _dt(now)
            log_path = self.logs_dir / "batch" / job.job_id.replace(":", "_") / f"attempt-{attempt}.log"
            record: dict[str, Any] = {
                "container": {"logStreamName": str(log_path)},
                "startedAt": int(now * 1000),
            }
            job.attempts.append(record)
            with self._lock:
                progress.running += 1
            try:
                self._changed(progress)
                outcome = self._attempt(
                    job,
                    argv,
                    self._environment(job, attempt),
                    log_path=log_path,
                    timeout=timeout,
                    attempt=attempt,
                    terminated=terminated,
                )
            finally:
                with self._lock:
                    progress.running -= 1
            record["stoppedAt"] = int(time.time() * 1000)
            record["statusReason"] = outcome.status_reason
            self._send_log(props, log_path)
            if outcome.exit_code is not None:
                record["container"]["exitCode"] = outcome.exit_code
            if outcome.reason:
                record["container"]["reason"] = outcome.reason
            if outcome.succeeded:
                job.exit_code = 0
                job._mark_stopped(success=True)
                with self._lock:
                    progress.succeeded += 1
                break
            if decide(jd.retry_strategy, outcome, attempt) == "EXIT":
                self._failed(job, progress, outcome.status_reason, outcome.exit_code)
                break
            with self._lock:
                progress.retries += 1
        self._changed(progress)

    def _failed(self, job: Any, progress: ArrayProgress, reason: str, exit_code: int | None) -> None:
        """The job ends FAILED with ``reason`` (its last attempt's, or the termination's)."""
        job.exit_code = exit_code
        job.job_stopped_reason = reason
        job._mark_stopped(success=False)
        with self._lock:
            progress.failed += 1
            progress.failures.append(f"{job.job_id}: {reason}"
                                     + (f" (exit {exit_code})" if exit_code is not None else ""))

    def _attempt(
        self,
        job: Any,
        argv: list[str],
        env: dict[str, str],
        *,
        log_path: Path,
        timeout: int | None,
        attempt: int,
        terminated: Callable[[], str | None] = lambda: None,
    ) -> Outcome:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        proc: Child
        podman: containers.PodmanRun | None = None
        props = job.job_definition.container_properties or {}
        cap = self.memory.cap(containers.resources(props, job.container_overrides).memory_mib)
        try:
            if self.containers is not None:
                podman = self.containers.start(self._container_attempt(job, argv, attempt, log_path))
                proc = Popened(podman)
            else:
                proc = self.launcher.start(_program(argv, env, log_path, cap.confinement))
        except (OSError, RuntimeError) as err:  # what Batch reports when the container cannot start
            # (RuntimeError: the launcher is closed, the cloud stopping under a running job)
            cap.close()
            return Outcome(None, f"CannotStartContainerError: {err}", reason=f"CannotStartContainerError: {err}")
        with self._lock:
            self._procs[proc.pid] = proc
        cap.watch()
        try:
            code = _wait(proc, timeout, terminated)
            killed = cap.killed()
            self._record_memory(job, attempt, cap)
        finally:
            cap.close()
            with self._lock:
                self._procs.pop(proc.pid, None)
        if killed:  # the kernel killed a process of the attempt (the worker, or one it started)
            return Outcome(128 + signal.SIGKILL, BATCH_OUT_OF_MEMORY, reason=BATCH_OUT_OF_MEMORY)
        if code is None:  # out of time, or TerminateJob (SIGKILLed, FAILED with its reason): neither is retried
            return Outcome(None, terminated() or TIMED_OUT, timed_out=True)
        if podman is not None and podman.start_error:  # podman's 125-127: the container never ran
            return Outcome(None, podman.start_error, reason=podman.start_error)
        if code < 0:  # killed by a signal: what a child sees when its Spot instance is reclaimed
            return Outcome(None, f"Host EC2 (instance {instance_id(job.job_id, attempt)}) terminated.")
        return Outcome(code, ESSENTIAL_EXITED)

    def _container_attempt(self, job: Any, command: list[str], attempt: int, log_path: Path) -> containers.Attempt:
        props = job.job_definition.container_properties or {}
        return containers.Attempt(
            name=containers.container_name(job.job_id, attempt),
            command=command,
            env={**containers.forwarded(self.base_env), **self._batch_environment(job, attempt)},
            resources=containers.resources(props, job.container_overrides),
            volumes=self._host_paths(props),
            log_path=log_path,
        )

    def _record_memory(self, job: Any, attempt: int, cap: memory.Cap) -> None:
        """One line per attempt in ``logs/batch/memory.jsonl``: the job's memory, the attempt's peak as the
        cgroup counts it (page cache included) and the largest sample of its anonymous and shared memory
        (:meth:`.memory.Cap.watch`); the local cloud's own record: Batch reports memory through CloudWatch
        metrics, not the job."""
        if cap.mode == "off":
            return
        line = {"job_id": job.job_id, "job_name": job.job_name, "attempt": attempt, "memory_mib": cap.limit_mib,
                "max_memory_used_mib": cap.peak_mib(), "max_resident_mib": cap.resident_peak_mib(),
                "killed": cap.killed()}
        path = self.logs_dir / "batch" / "memory.jsonl"
        with self._lock, path.open("a") as f:
            f.write(json.dumps(line) + "\n")

    def _send_log(self, container_properties: dict[str, Any], log_path: Path) -> None:
        """The attempt's output to CloudWatch Logs; the stream is named by the log file's path (a valid
        stream name), so the recorded ``logStreamName`` is both the stream and the file to open."""
        if self.log_sink is None or not log_path.is_file():
            return
        try:
            self.log_sink(log_group_of(container_properties), str(log_path), log_lines(log_path))
        except Exception as err:  # a lost log must not fail the job: Batch does not fail it either
            print(f"local Batch: could not send {log_path} to CloudWatch Logs: {err}", file=sys.stderr)

    def shutdown(self) -> None:
        """Kill the children this runner started and stop accepting work."""
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            proc.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._owns_launcher:
            self.launcher.close()
        self.memory.close()


def _program(argv: list[str], env: dict[str, str], log_path: Path, confine: dict[str, Any] | None = None) -> Program:
    """The attempt's process: the worker's entry point for the app's worker command, else the command itself."""
    args = worker_args(argv)
    if args is None:
        return Program(argv, env, str(Path.cwd()), log_path, confine=confine)
    app = contract.app()
    return Program([app.worker_command, *args], env, str(Path.cwd()), log_path, target=app.worker_main,
                   confine=confine)


#: how often a running attempt looks whether its job (or its array parent) was terminated
TERMINATE_POLL_SECONDS = 1.0


def _terminated(parent: Any, job: Any) -> Callable[[], str | None]:
    """The reason a job was terminated (``TerminateJob`` on it or on its array parent: moto's ``terminate``
    sets ``stop`` and the reason), or None. On AWS, terminating an array parent terminates its children."""

    def reason() -> str | None:
        for j in (job, parent):
            if getattr(j, "stop", False) is True:
                return str(getattr(j, "job_stopped_reason", None) or "Terminated")
        return None

    return reason


def _wait(proc: Child, timeout: float | None, terminated: Callable[[], str | None] = lambda: None) -> int | None:
    """The attempt's exit code (negative: the signal that killed it); None if it ran out of time or its job
    was terminated, and was killed. A child whose exit code is unknown (its fork server went away) counts as
    killed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        step = TERMINATE_POLL_SECONDS if left is None else max(0.0, min(TERMINATE_POLL_SECONDS, left))
        if proc.wait(step):
            return -signal.SIGKILL if proc.returncode is None else proc.returncode
        if terminated() is not None or (left is not None and left <= step):
            proc.kill()
            return None


def _dt(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds)
