"""Lambda, locally: each invocation runs the function's real handler in its own Python process.

A process per invocation isolates what a shared process cannot: ``os.environ`` (each function has
its own environment; swapping it in one shared process races between concurrent invocations),
module names (every function's handler is ``app.py``) and module state between invocations. The
child gets the function's environment, ``AWS_ENDPOINT_URL`` pointing at the moto server, and
``src/`` on ``PYTHONPATH`` (locally the core package stands in for the Lambda layer).

Where ``fork`` exists, the processes come from a fork server (:mod:`seqlake.localcloud.forkserver`)
that imported boto3, Powertools, pyarrow and numpy once: an invocation then costs its handler module's
import and its own work, not a second of library imports. Elsewhere (or with ``SEQLAKE_FORK_SERVER=0``)
each invocation is a new interpreter, and start-up is taken off the critical path the way Lambda's init
phase is: :meth:`LambdaRunner.prestart` starts one process per function ahead of time, which imports the
handler's module and then waits for its event; it serves exactly one invocation and exits.

Asynchronous invocations (EventBridge targets) run in a background thread and are retried twice on
failure, as Lambda retries asynchronous events.

The child side writes ``{"result": ...}`` or Lambda's error shape to a result file (stdout stays the
function's log, as on Lambda): :func:`run_child` in a forked child, or
``python -m seqlake.localcloud.lambdas CODE_DIR HANDLER RESULT_FILE``, which reads the event from stdin.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from seqlake.localcloud import forkserver

#: Lambda retries a failed asynchronous invocation twice
ASYNC_RETRIES = 2


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


#: (function, event, last error payload) -> None: called when an asynchronous event fails every attempt
DeadLetter = Callable[[FunctionSpec, bytes, bytes], None]


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
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path
    result_file: Path

    def discard(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        self.result_file.unlink(missing_ok=True)


class LambdaRunner:
    def __init__(
        self,
        functions: dict[str, FunctionSpec],
        base_env: dict[str, str],
        logs_dir: Path,
        dead_letter: DeadLetter | None = None,
    ) -> None:
        self.functions = dict(functions)
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
        #: invocations (and Batch children, see :meth:`fork_server`) fork from a server
        self.forks = forkserver.enabled()
        self._server: forkserver.ForkServer | None = None
        self._live: set[forkserver.Forked] = set()
        self._tmp = Path(tempfile.mkdtemp(prefix="seqlake-lambda-"))
        self._closed = False
        self.invocations: list[tuple[str, bool, float]] = []  # (function, failed, seconds)
        self._sources: list[EventSource] = []

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
    def start_fork_server(self) -> None:
        """Start the fork server now (no-op without one): its imports overlap whatever comes next."""
        if self.forks:
            self.fork_server()

    def prestart(self) -> None:
        """Start one waiting process per function that has none (or the fork server)."""
        for name in self.functions:
            self.prestart_one(name)

    def prestart_one(self, name: str) -> None:
        """Start a waiting process for function ``name`` if it has none (or the fork server)."""
        if self.forks:
            self.fork_server()
        else:
            self._prestart(name)

    def fork_server(self) -> forkserver.ForkServer:
        """The fork server, started on first use; the local Batch forks its children from it too."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the Lambda runner is closed")
            if self._server is None:
                # its preloading runs in its own process while this one goes on
                log = self.logs_dir / "lambda" / "forkserver.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                self._server = forkserver.ForkServer(self.base_env, log_path=log)
            return self._server

    def update(self, spec: FunctionSpec) -> None:
        """A function's configuration changed: a waiting process has the old one."""
        with self._cond:
            self.functions[spec.name] = spec
            old = self._warm.pop(spec.name, None)
        if old is not None:
            old.discard()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            warm, self._warm = list(self._warm.values()), {}
            sources, self._sources = self._sources, []
        for source in sources:
            source.stop()
        for box in warm:
            box.discard()
        with self._cond:
            live, server, self._server = list(self._live), self._server, None
        for child in live:
            child.kill()
        if server is not None:
            server.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _log_path(self, spec: FunctionSpec, n: int) -> Path:
        log_path = self.logs_dir / "lambda" / spec.name / f"{time.strftime('%Y%m%dT%H%M%S')}-{n:04d}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        return log_path

    def _environment(self, spec: FunctionSpec, log_path: Path) -> dict[str, str]:
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
            "SEQLAKE_LAMBDA_ARN": spec.arn,
            "SEQLAKE_LAMBDA_TIMEOUT": str(spec.timeout),
            "POWERTOOLS_TRACE_DISABLED": "true",
        }

    def _spawn(self, spec: FunctionSpec) -> _Sandbox:
        n = next(self._counter)
        log_path = self._log_path(spec, n)
        env = self._environment(spec, log_path)
        result_file = self._tmp / f"{n:06d}.json"
        log = log_path.open("wb")
        argv = [sys.executable, "-m", "seqlake.localcloud.lambdas", str(spec.code_dir), spec.handler, str(result_file)]
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=spec.code_dir
        )
        return _Sandbox(spec, proc, log, log_path, result_file)

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
        if box is not None and box.spec == spec and box.proc.poll() is None:
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
                    error, failed = self.invoke(name, payload)
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
            if self.forks:
                out, log_path = self._run_forked(spec, payload or b"{}")
            else:
                box = self._take(spec)
                log_path = box.log_path
                try:
                    out = self._run(box, payload or b"{}")
                finally:
                    box.log.close()
        finally:
            self.invocations.append((name, "errorType" in out or not out, time.monotonic() - t0))
        if "errorType" in out:
            with log_path.open("a") as f:
                f.write(json.dumps(out) + "\n")
            return json.dumps(out).encode(), True
        return json.dumps(out["result"]).encode(), False

    def _run(self, box: _Sandbox, payload: bytes) -> dict[str, Any]:
        try:
            box.proc.communicate(input=payload, timeout=box.spec.timeout)
        except subprocess.TimeoutExpired:
            box.proc.kill()
            box.proc.wait()
            return _timed_out(box.spec)
        return _result(box.result_file, box.log_path)

    def _run_forked(self, spec: FunctionSpec, payload: bytes) -> tuple[dict[str, Any], Path]:
        n = next(self._counter)
        log_path = self._log_path(spec, n)
        result_file = self._tmp / f"{n:06d}.json"
        request = {
            "kind": "lambda",
            "env": self._environment(spec, log_path),
            "code_dir": str(spec.code_dir),
            "handler": spec.handler,
            "result_file": str(result_file),
            "log_path": str(log_path),
            "event": payload.decode("utf-8", "surrogateescape"),
        }
        child = self.fork_server().spawn(request)
        with self._cond:
            self._live.add(child)
        try:
            if not child.wait(spec.timeout):
                child.kill()
                return _timed_out(spec), log_path
        finally:
            with self._cond:
                self._live.discard(child)
        return _result(result_file, log_path), log_path


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


class _Context:
    """The parts of the Lambda context object handlers and Powertools read."""

    def __init__(self) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "local")
        self.function_version = "$LATEST"
        self.invoked_function_arn = os.environ.get("SEQLAKE_LAMBDA_ARN", "")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self._deadline = time.monotonic() + float(os.environ.get("SEQLAKE_LAMBDA_TIMEOUT", "900"))

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _error(err: BaseException) -> dict[str, Any]:
    return {"errorType": type(err).__name__, "errorMessage": str(err), "stackTrace": traceback.format_exception(err)}


class _NullSegment:
    """What a disabled tracer's decorators write into: nothing is recorded."""

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass

    def add_exception(self, exception: BaseException, stack: Any = None, remote: bool = False) -> None:
        pass


class _NullProvider(_NullSegment):
    """A tracing provider that records nothing, for Powertools' ``Tracer`` when tracing is off.

    ``Tracer()`` imports the X-Ray SDK to make its default provider even when
    ``POWERTOOLS_TRACE_DISABLED`` is set (Powertools 3.37: ``Tracer.__build_config``); that import
    costs each local invocation about half a second of CPU. Every ``Tracer`` shares one configuration,
    so a provider given before the handler's module makes its own is the one it uses.
    """

    @contextlib.contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Iterator[_NullSegment]:
        yield _NullSegment()

    @contextlib.asynccontextmanager
    async def in_subsegment_async(self, name: str | None = None, **kwargs: Any) -> AsyncIterator[_NullSegment]:
        yield _NullSegment()

    def patch(self, modules: Any) -> None:
        pass

    def patch_all(self) -> None:
        pass


def _quiet_tracer() -> None:
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() not in ("1", "true"):
        return
    try:
        from aws_lambda_powertools import Tracer
    except ImportError:
        return
    provider: Any = _NullProvider()  # duck-typed: Powertools' BaseProvider is abstract
    Tracer(provider=provider, disabled=True)


def _init(code_dir: str, handler: str) -> tuple[Any, dict[str, Any] | None]:
    """The init phase: the handler's module imported (an error is the invocation's error)."""
    sys.path.insert(0, code_dir)
    _quiet_tracer()
    module_name, function_name = handler.rsplit(".", 1)
    try:
        return getattr(importlib.import_module(module_name), function_name), None
    except Exception as err:
        traceback.print_exc()
        return None, _error(err)


def _handle(handler_fn: Any, init_error: dict[str, Any] | None, raw: bytes, result_file: str) -> None:
    if init_error is not None:
        text = json.dumps(init_error)
    else:
        try:
            text = json.dumps({"result": handler_fn(json.loads(raw), _Context())})
        except Exception as err:
            text = json.dumps(_error(err))
            traceback.print_exc()
    tmp = Path(result_file + ".tmp")
    tmp.write_text(text)
    tmp.replace(result_file)  # atomic: the parent never reads half a result


def run_child(request: dict[str, Any]) -> int:
    """A forked child's whole life: the function's environment, its log as stdout/stderr, one event."""
    os.environ.clear()
    os.environ.update(request["env"])
    forkserver.redirect_output(request["log_path"], append=True)
    try:
        os.chdir(request["code_dir"])
        handler_fn, init_error = _init(request["code_dir"], request["handler"])
        _handle(handler_fn, init_error, request["event"].encode("utf-8", "surrogateescape"), request["result_file"])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def _child_main(argv: list[str]) -> int:
    code_dir, handler, result_file = argv
    handler_fn, init_error = _init(code_dir, handler)  # before the event arrives
    raw = sys.stdin.buffer.read()
    if not raw:  # discarded before any event: nothing to report
        return 0
    _handle(handler_fn, init_error, raw, result_file)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
