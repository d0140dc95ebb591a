"""A Lambda invocation's own process: the function's handler imported (the init phase), one event served.

The local Lambda runner (:mod:`.lambdas`) starts this as a :class:`.launcher.Program` in the function's
environment, its working folder the code folder and its log as stdout and stderr (as on Lambda). The event
comes on stdin; ``{"result": ...}`` or Lambda's error shape goes to the result file.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

#: this module's entry point, as a launcher target
TARGET = f"{__name__}:main"
#: the invocation's request id, chosen by the runner (it writes the log's START, END and REPORT lines)
REQUEST_ID_VAR = "LOCALCLOUD_LAMBDA_REQUEST_ID"
#: the function's ARN and timeout (seconds), for the context object: Lambda gives a handler no variables of them
ARN_VAR = "LOCALCLOUD_LAMBDA_ARN"
TIMEOUT_VAR = "LOCALCLOUD_LAMBDA_TIMEOUT"


class _Context:
    """The parts of the Lambda context object handlers and Powertools read."""

    def __init__(self) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "local")
        self.function_version = "$LATEST"
        self.invoked_function_arn = os.environ.get(ARN_VAR, "")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.aws_request_id = os.environ.get(REQUEST_ID_VAR) or str(uuid.uuid4())
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self._deadline = time.monotonic() + float(os.environ.get(TIMEOUT_VAR, "900"))

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


def main() -> int:
    """The child's whole life (``sys.argv``: CODE_DIR HANDLER RESULT_FILE): the init phase, then one event
    read from stdin, then the result written."""
    code_dir, handler, result_file = sys.argv[1:]
    handler_fn, init_error = _init(code_dir, handler)  # before the event arrives
    raw = sys.stdin.buffer.read()
    try:
        if raw:  # empty: discarded before any event, nothing to report
            _handle(handler_fn, init_error, raw, result_file)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0
