"""Lambda, locally: each invocation runs the function's real handler in its own Python process.

A process per invocation isolates what a shared process cannot: ``os.environ`` (each function has
its own environment; swapping it in one shared process races between concurrent invocations),
module names (every function's handler is ``app.py``) and module state between invocations. The
child (:mod:`.lambda_runtime`) gets the function's environment, ``AWS_ENDPOINT_URL`` pointing at the
moto server, and the package on ``PYTHONPATH`` (locally the core package stands in for the Lambda layer).

The processes come from the local cloud's :class:`.launcher.Launcher`: forked from its fork server,
which imported boto3, Powertools, pyarrow and numpy once, an invocation costs its handler module's import
and its own work. Where children are new interpreters instead, start-up is taken off the critical path
the way Lambda's init phase is: :meth:`LambdaRunner.prestart` starts one process per function ahead of
time, which imports the handler's module and then waits for its event; it serves exactly one invocation.

Asynchronous invocations (EventBridge targets) run in a background thread and are retried twice on
failure, as Lambda retries asynchronous events. The child writes ``{"result": ...}`` or Lambda's error
shape to a result file (stdout stays the function's log, as on Lambda).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from localcloud import memory
from localcloud.lambda_runtime import ARN_VAR, REQUEST_ID_VAR, TARGET, TIMEOUT_VAR
from localcloud.launcher import Child, Launcher, Program

#: Lambda retries a failed asynchronous invocation twice
ASYNC_RETRIES = 2
#: how long closing waits for asynchronous invocations in flight (their processes are killed first)
CLOSE_WAIT_SECONDS = 30.0


class RunnerClosedError(RuntimeError):
    """An invocation met a runner that was closed: the local cloud stopped (on AWS: the stack deleted)."""


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    code_dir: Path
    handler: str
    environment: dict[str, str]
    timeout: int = 60
    memory: int = 512
    arn: str = ""
    #: SQS queue ARN of the function's DeadLetterConfig: where failed asynchronous events go
    dead_letter_arn: str | None = None
    #: the function's execution role (ARN): its credentials are the invocation's (``localcloud/iam.py``)
    role: str = ""


#: (function, event, last error payload) -> None: called when an asynchronous event fails every attempt
DeadLetter = Callable[[FunctionSpec, bytes, bytes], None]
#: role ARN -> the environment credentials of a process running as that role (empty: the base environment's)
RoleCredentials = Callable[[str], dict[str, str]]


class EventSource(Protocol):
    """A poller that invokes functions with what it reads (an SQS queue): the runner counts what it
    still holds as pending and stops it on close."""

    @property
    def pending(self) -> int: ...

    def stop(self) -> None: ...


@dataclass
class _Sandbox:
    """One started process, waiting for its one event."""

    spec: FunctionSpec
    child: Child
    log_path: Path
    result_file: Path
    request_id: str
    #: the function's memory limit on this process
    cap: memory.Cap

    def discard(self) -> None:
        self.child.kill()
        self.cap.close()
        self.result_file.unlink(missing_ok=True)


class LambdaRunner:
    def __init__(
        self,
        functions: dict[str, FunctionSpec],
        base_env: dict[str, str],
        logs_dir: Path,
        dead_letter: DeadLetter | None = None,
        launcher: Launcher | None = None,
        *,
        credentials: RoleCredentials | None = None,
    ) -> None:
        """``launcher``: where the processes come from (shared with the local Batch); by default one of
        its own, closed with this runner. ``credentials``: each invocation's, from its function's role."""
        self.functions = dict(functions)
        self.credentials = credentials
        self.dead_letter = dead_letter
        self.base_env = base_env
        self.logs_dir = logs_dir
        self._counter = itertools.count(1)
        self._pending = 0
        self._cond = threading.Condition()
        # Asynchronous events (a burst of uploads) queue for a few slots, like a function's reserved
        # concurrency: dozens of interpreters starting at once on a small machine would each outlive
        # the function's timeout and end in the dead-letter queue. The timeout counts from the start.
        self._async_slots = threading.BoundedSemaphore(max(2, os.cpu_count() or 2))
        self._warm: dict[str, _Sandbox] = {}
        self._owns_launcher = launcher is None
        self.launcher = launcher or Launcher(base_env, server_log=logs_dir / "lambda" / "forkserver.log")
        self._live: set[Child] = set()
        self._tmp = Path(tempfile.mkdtemp(prefix="localcloud-lambda-"))
        self._closed = False
        self.invocations: list[tuple[str, bool, float]] = []  # (function, failed, seconds)
        self._sources: list[EventSource] = []
        #: each invocation capped at its function's MemorySize (unless the memory-limits setting is 0)
        self.memory = memory.MemoryLimits(memory.enabled(base_env))

    @property
    def pending(self) -> int:
        """Asynchronous invocations not finished, and events the event sources hold (queued messages)."""
        with self._cond:
            pending, sources = self._pending, list(self._sources)
        return pending + sum(s.pending for s in sources)

    def add_source(self, source: EventSource) -> None:
        with self._cond:
            self._sources.append(source)

    # ---------------------------------------------------------------- sandboxes
    def prestart(self) -> None:
        """Start one waiting process per function that has none (see :meth:`prestart_one`)."""
        for name in self.functions:
            self.prestart_one(name)

    def prestart_one(self, name: str) -> None:
        """Start a waiting process for function ``name`` if it has none and a new process pays for its
        imports; otherwise have the launcher ready (its fork server started)."""
        if self.launcher.starts_cold:
            self._prestart(name)
        else:
            self.launcher.prepare()

    def update(self, spec: FunctionSpec) -> None:
        """A function's configuration changed: a waiting process has the old one."""
        with self._cond:
            self.functions[spec.name] = spec
            old = self._warm.pop(spec.name, None)
        if old is not None:
            old.discard()

    def close(self) -> None:
        """Stop: event sources first, then every process; an asynchronous invocation in flight ends (its
        process killed, no new one started) before the memory caps it may hold are released."""
        with self._cond:
            self._closed = True
            warm, self._warm = list(self._warm.values()), {}
            sources, self._sources = self._sources, []
        for source in sources:
            source.stop()
        for box in warm:
            box.discard()
        deadline = time.monotonic() + CLOSE_WAIT_SECONDS
        while True:
            with self._cond:
                live, pending = list(self._live), self._pending
            for child in live:
                child.kill()
            if not pending or time.monotonic() > deadline:
                break
            with self._cond:
                self._cond.wait(0.1)
        if self._owns_launcher:
            self.launcher.close()
        self.memory.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _log_path(self, spec: FunctionSpec, n: int) -> Path:
        log_path = self.logs_dir / "lambda" / spec.name / f"{time.strftime('%Y%m%dT%H%M%S')}-{n:04d}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        return log_path

    def _environment(self, spec: FunctionSpec, log_path: Path, request_id: str) -> dict[str, str]:
        return {
            **self.base_env,
            **spec.environment,
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": log_path.name,
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "_HANDLER": spec.handler,
            ARN_VAR: spec.arn,
            TIMEOUT_VAR: str(spec.timeout),
            "POWERTOOLS_TRACE_DISABLED": "true",
            REQUEST_ID_VAR: request_id,
            **(self.credentials(spec.role) if self.credentials is not None else {}),
        }

    def _spawn(self, spec: FunctionSpec) -> _Sandbox:
        if self._closed:
            raise RunnerClosedError(f"no new process for {spec.name}: the local cloud stopped")
        n = next(self._counter)
        log_path = self._log_path(spec, n)
        result_file = self._tmp / f"{n:06d}.json"
        request_id = str(uuid.uuid4())
        cap = self.memory.cap(spec.memory)
        program = Program(
            argv=["lambda", str(spec.code_dir), spec.handler, str(result_file)],
            env=self._environment(spec, log_path, request_id),
            cwd=str(spec.code_dir),
            log_path=log_path,
            target=TARGET,
            append_log=True,
            takes_input=True,
            confine=cap.confinement,
        )
        try:
            child = self.launcher.start(program)
        except BaseException:
            cap.close()
            raise
        return _Sandbox(spec, child, log_path, result_file, request_id, cap)

    def _prestart(self, name: str) -> None:
        spec = self.functions[name]
        box = self._spawn(spec)
        with self._cond:
            if self._closed or name in self._warm:
                keep = None
            else:
                self._warm[name], keep = box, box
        if keep is None:
            box.discard()

    def _take(self, spec: FunctionSpec) -> _Sandbox:
        with self._cond:
            box = self._warm.pop(spec.name, None)
        if box is not None and box.spec == spec and not box.child.wait(0):
            return box
        if box is not None:
            box.discard()
        return self._spawn(spec)

    # ---------------------------------------------------------------- invocation
    def __call__(self, name: str, payload: bytes, is_async: bool) -> tuple[bytes, bool]:
        """The hook moto's patched ``Invoke`` calls."""
        if not is_async:
            return self.invoke(name, payload)
        with self._cond:
            self._pending += 1
        threading.Thread(
            target=self._invoke_async, args=(name, payload), daemon=True, name=f"lambda-async-{name}"
        ).start()
        return b"", False

    def _invoke_async(self, name: str, payload: bytes) -> None:
        try:
            with self._async_slots:
                for _ in range(1 + ASYNC_RETRIES):
                    if self._closed:
                        return  # the event outlived the cloud, as an event outlives a deleted stack
                    try:
                        error, failed = self.invoke(name, payload)
                    except RunnerClosedError:
                        return
                    if not failed:
                        return
            spec = self.functions.get(name)
            if spec is not None and spec.dead_letter_arn and self.dead_letter is not None:
                self.dead_letter(spec, payload, error)
        finally:
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()

    def invoke(self, name: str, payload: bytes) -> tuple[bytes, bool]:
        """Run the handler once; returns (response payload, failed)."""
        spec = self.functions.get(name)
        if spec is None:
            body = {"errorType": "ResourceNotFoundException", "errorMessage": f"no local code for function {name}"}
            return json.dumps(body).encode(), True
        t0 = time.monotonic()
        out: dict[str, Any] = {}
        try:
            box = self._take(spec)
            try:
                out, seconds = self._run(box, payload or b"{}")
                out = memory.lambda_outcome(box.cap, out, box.request_id)
                with box.log_path.open("a") as f:
                    if "errorType" in out:
                        f.write(json.dumps(out) + "\n")
                    f.write(f"END RequestId: {box.request_id}\n")
                    f.write(memory.report_line(box.request_id, seconds, spec.memory, box.cap, out) + "\n")
            finally:
                box.cap.close()
        finally:
            self.invocations.append((name, "errorType" in out or not out, time.monotonic() - t0))
        if "errorType" in out:
            return json.dumps(out).encode(), True
        return json.dumps(out["result"]).encode(), False

    def _run(self, box: _Sandbox, payload: bytes) -> tuple[dict[str, Any], float]:
        """The invocation's result or error, and its duration in seconds."""
        with self._cond:
            self._live.add(box.child)
        try:
            with box.log_path.open("a") as f:
                f.write(f"START RequestId: {box.request_id} Version: $LATEST\n")
            started = time.monotonic()
            box.child.send(payload)
            ended = box.child.wait(box.spec.timeout)
            if not ended:
                box.child.kill()
            seconds = time.monotonic() - started
        finally:
            with self._cond:
                self._live.discard(box.child)
        return (_result(box.result_file, box.log_path) if ended else _timed_out(box.spec)), seconds


def _timed_out(spec: FunctionSpec) -> dict[str, Any]:
    return {"errorType": "Sandbox.Timedout", "errorMessage": f"Task timed out after {spec.timeout:.2f} seconds"}


def _result(result_file: Path, log_path: Path) -> dict[str, Any]:
    if not result_file.is_file():
        return {
            "errorType": "Runtime.ExitError",
            "errorMessage": f"the handler's process exited without a result; see {log_path}",
        }
    out: dict[str, Any] = json.loads(result_file.read_text())
    result_file.unlink()
    return out


