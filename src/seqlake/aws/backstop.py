"""The backstop: a run whose execution ended without its failure recorded is recorded FAILED all the same.

The state machine records every failure it can catch (``RecordFailure``, :func:`seqlake.aws.steps.record_failure`).
Some ends pass it by: ``RecordFailure`` itself failing (the ``FailedUnrecorded`` state), errors no ``Catch``
catches (``States.DataLimitExceeded``, ``States.Runtime``), an execution stopped by an operator (ABORTED) or
one that timed out (TIMED_OUT). Step Functions reports each of those ends on EventBridge
(:class:`~seqlake.aws.events.ExecutionEnd`); a rule hands them to this step, which writes ``status.json``
FAILED with a reason built from the execution's error and cause, and the ``runs`` row
(:func:`~seqlake.aws.runs_row.record_unsuccessful`) -- unless ``status.json`` is already final: a failure
``RecordFailure`` recorded keeps its reason, a redelivered event changes nothing, a SUCCEEDED run is never
touched.
"""

from __future__ import annotations

import json
from typing import Any

from seqlake.aws.events import ExecutionEnd
from seqlake.aws.observability import logger
from seqlake.aws.request import ExecutionInput
from seqlake.aws.runs_row import record_unsuccessful
from seqlake.aws.status import RunStatus, status_of
from seqlake.base import storage
from seqlake.base.model import RunState

#: characters of the execution's cause kept in the reason (a cause can be a whole Batch job description)
CAUSE_CHARS = 1000
_FINAL = frozenset(s.value for s in RunState if s.final)


def end_reason(end: ExecutionEnd) -> str:
    """Why the run ended, in the words of its execution's end."""
    if end.status == "TIMED_OUT":
        took = f" after {end.seconds:.0f} s" if end.seconds is not None else ""
        return f"the execution timed out{took} (the state machine's TimeoutSeconds)"
    said = ": ".join(x for x in (end.error, _short(end.cause)) if x)
    if end.status == "ABORTED":
        return "the execution was stopped by an operator (StopExecution)" + (f": {said}" if said else "")
    return f"the execution {end.status}" + (f": {said}" if said else " without an error")


def _short(cause: str | None) -> str | None:
    if not cause:
        return cause
    cause = readable(cause)
    return cause if len(cause) <= CAUSE_CHARS else cause[: CAUSE_CHARS - 1] + "…"


#: Step Functions keeps a cause up to this many characters
_CAUSE_MAX = 32_768


def readable(cause: str) -> str:
    """``cause`` with each JSON object in it that is a Lambda error (``errorMessage``, its stack trace beside
    it) or a Batch job description (``statusReason``) replaced by that one line: a Task's cause is such an
    object, and ``FailedUnrecorded``'s cause quotes two of them."""
    text, out, i = cause[:_CAUSE_MAX], [], 0
    decoder = json.JSONDecoder()
    while (j := text.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(text, j)
        except ValueError:
            out.append(text[i : j + 1])
            i = j + 1
            continue
        line = (obj.get("errorMessage") or obj.get("statusReason")) if isinstance(obj, dict) else None
        out += [text[i:j], str(line) if line else text[j:end]]
        i = end
    out.append(text[i:])
    return "".join(out)


def _status_document(uri: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(storage.read_bytes(uri))
    except FileNotFoundError:
        return None
    return doc if isinstance(doc, dict) else None


def record_unrecorded_end(end: ExecutionEnd, *, database: str) -> RunStatus | None:
    """Record the run of ``end`` FAILED unless its ``status.json`` is final already; the status written, or
    None when there was nothing to do."""
    request = ExecutionInput.from_dict(json.loads(end.execution_input)).load()
    previous = _status_document(request.layout.status) or {}
    if previous.get("state") in _FINAL:
        logger.info("the run's end is recorded already", extra={"state": previous.get("state"),
                                                                  "execution_status": end.status})
        return None
    started = previous.get("started_at")
    status = status_of(request, RunState.FAILED, end.execution_arn,
                       started if isinstance(started, str) else end.started.isoformat())
    status.plan_uri = previous.get("plan_uri") or status.plan_uri
    status.shards = previous.get("shards")
    status.error = end.error or f"Execution{end.status.title().replace('_', '')}"
    status.reason = end_reason(end)
    status.finish(end.stopped)
    record_unsuccessful(status, database)
    return status
