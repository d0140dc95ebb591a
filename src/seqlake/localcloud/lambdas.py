"""Lambda, locally: each invocation runs the function's real handler in its own Python process.

A process per invocation isolates what a shared process cannot: ``os.environ`` (each function has
its own environment; swapping it in one process raced in the spike: 9 of 30 concurrent runs failed),
module names (every function's handler is ``app.py``) and module state between invocations. The
child gets the function's environment, ``AWS_ENDPOINT_URL`` pointing at the moto server, and
``src/`` on ``PYTHONPATH`` (locally the core package stands in for the Lambda layer).

Asynchronous invocations (EventBridge targets) run in a background thread and are retried twice on
failure, as Lambda retries asynchronous events; the error of the last attempt is logged.

``python -m seqlake.localcloud.lambdas CODE_DIR HANDLER RESULT_FILE`` is the child side: it reads the
event from stdin and writes ``{"result": ...}`` or Lambda's error shape to RESULT_FILE (stdout stays
the function's log, as on Lambda).
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


class LambdaRunner:
    def __init__(self, functions: dict[str, FunctionSpec], base_env: dict[str, str], logs_dir: Path) -> None:
        self.functions = functions
        self.base_env = base_env
        self.logs_dir = logs_dir
        self._counter = itertools.count(1)
        self._pending = 0
        self._cond = threading.Condition()
        self.invocations: list[tuple[str, bool, float]] = []  # (function, failed, seconds)

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

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
            for _ in range(1 + ASYNC_RETRIES):
                _, failed = self.invoke(name, payload)
                if not failed:
                    return
        finally:
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()

    def invoke(self, name: str, payload: bytes) -> tuple[bytes, bool]:
        """Run the handler once; returns (response payload, failed)."""
        spec = self.functions.get(name)
        if spec is None:
            body = {
                "errorType": "ResourceNotFoundException",
                "errorMessage": f"no local code for function {name}",
            }
            return json.dumps(body).encode(), True
        n = next(self._counter)
        log_path = self.logs_dir / "lambda" / name / f"{time.strftime('%Y%m%dT%H%M%S')}-{n:04d}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {
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
            "POWERTOOLS_TRACE_DISABLED": "true",
        }
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="seqlake-lambda-") as tmp, log_path.open("wb") as log:
            result_file = Path(tmp) / "result.json"
            try:
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "seqlake.localcloud.lambdas",
                        str(spec.code_dir),
                        spec.handler,
                        str(result_file),
                    ],
                    input=payload,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=spec.code_dir,
                    timeout=spec.timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                body = {
                    "errorType": "Sandbox.Timedout",
                    "errorMessage": f"Task timed out after {spec.timeout:.2f} seconds",
                }
                self.invocations.append((name, True, time.monotonic() - t0))
                return json.dumps(body).encode(), True
            if not result_file.is_file():
                body = {
                    "errorType": "Runtime.ExitError",
                    "errorMessage": f"the handler's process exited without a result; see {log_path}",
                }
                self.invocations.append((name, True, time.monotonic() - t0))
                return json.dumps(body).encode(), True
            out = json.loads(result_file.read_text())
        failed = "errorType" in out
        self.invocations.append((name, failed, time.monotonic() - t0))
        if failed:
            with log_path.open("a") as f:
                f.write(json.dumps(out) + "\n")
            return json.dumps(out).encode(), True
        return json.dumps(out["result"]).encode(), False


class _Context:
    """The parts of the Lambda context object handlers and Powertools read."""

    def __init__(self, timeout: float) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "local")
        self.function_version = "$LATEST"
        self.invoked_function_arn = os.environ.get("SEQLAKE_LAMBDA_ARN", "")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self._deadline = time.monotonic() + timeout

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _child_main(argv: list[str]) -> int:
    code_dir, handler, result_file = argv
    sys.path.insert(0, code_dir)
    module_name, function_name = handler.rsplit(".", 1)
    event: Any = json.loads(sys.stdin.buffer.read() or b"{}")
    try:
        handler_fn = getattr(importlib.import_module(module_name), function_name)
        result = handler_fn(event, _Context(timeout=900))
        text = json.dumps({"result": result})
    except Exception as err:
        text = json.dumps(
            {
                "errorType": type(err).__name__,
                "errorMessage": str(err),
                "stackTrace": traceback.format_exception(err),
            }
        )
        traceback.print_exc()
    Path(result_file).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
