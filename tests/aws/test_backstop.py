"""The backstop (functions/record_run_end): an execution that ended FAILED, TIMED_OUT or ABORTED while its run's
status.json is not final is recorded FAILED with the execution's error and cause; a run already recorded is
never touched. The handler on real-shaped events, against moto S3 and the Glue tables from template.yaml; the
rule's pattern with moto's matcher."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
from moto.events.models import EventPattern

from seqlake.aws.backstop import end_reason, readable
from seqlake.aws.events import UNSUCCESSFUL_ENDS, BadEventError, ExecutionEnd, execution_status_event
from seqlake.aws.request import RunRequest, store_request

from .conftest import Deployed, Resolver, load_event, partitions, read_status, runs_row

SAMPLE = "execution-status-change-failed.json"
STATE_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:seqlake-dev-pipeline"


@pytest.fixture
def backstop(deployed: Deployed, handler: Callable[[str], ModuleType], lambda_context: Any,
             monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, Any]], dict[str, Any]]:
    monkeypatch.setenv("GLUE_DATABASE", deployed.database)

    def call(event: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = handler("record_run_end").handler(event, lambda_context)
        return out

    return call


def ended(deployed: Deployed, **detail: Any) -> dict[str, Any]:
    """The sample event, its input the execution input of a run request stored in the bucket."""
    request = load_event("run-request.json")
    request["bucket"] = deployed.bucket
    event = load_event(SAMPLE)
    event["detail"]["input"] = json.dumps(store_request(RunRequest.from_dict(request)).to_dict())
    event["detail"].update(detail)
    return event


def put_status(deployed: Deployed, run_id: str, **doc: Any) -> bytes:
    body = json.dumps({"run_id": run_id, **doc}).encode()
    deployed.put(f"runs/{run_id}/status.json", body)
    return body


RUN = "demo-9f8e7d6c5b4a3f2e"


@pytest.mark.parametrize("before", [{"state": "RUNNING", "started_at": "2026-11-29T16:30:05.123+00:00"}, None])
def test_an_end_no_step_recorded_is_recorded_failed_with_the_executions_error(
    deployed: Deployed, backstop: Callable[[dict[str, Any]], dict[str, Any]], before: dict[str, Any] | None
) -> None:
    """RecordFailure never ran (an uncatchable error) or failed: status.json RUNNING, or none at all."""
    if before is not None:
        put_status(deployed, RUN, **before)
    event = ended(deployed)
    out = backstop(event)
    status = read_status(deployed, RUN)
    detail = event["detail"]
    assert status["state"] == "FAILED" and out["recorded"] is True
    assert status["reason"] == f"the execution FAILED: {detail['error']}: {detail['cause']}" == out["reason"]
    assert status["error"] == "States.DataLimitExceeded"
    assert status["execution_arn"] == detail["executionArn"]
    # the run's start as the plan step recorded it, else the execution's; its end is the execution's
    assert status["started_at"] == (before or {}).get("started_at", "2026-11-29T16:30:05.123000+00:00")
    assert datetime.fromisoformat(status["finished_at"]) == datetime.fromtimestamp(detail["stopDate"] / 1000, UTC)
    assert runs_row(deployed, RUN)["reason"] == status["reason"] and runs_row(deployed, RUN)["state"] == "FAILED"
    assert partitions(deployed, "runs") == [[RUN]]


@pytest.mark.parametrize("state", ["FAILED", "SUCCEEDED", "REJECTED"])
def test_a_run_already_recorded_is_never_touched(
    deployed: Deployed, backstop: Callable[[dict[str, Any]], dict[str, Any]], state: str
) -> None:
    """A failure RecordFailure recorded keeps its reason; a SUCCEEDED run (an event of another execution of
    the same run, or a late one) is left as the commit wrote it."""
    reason = None if state == "SUCCEEDED" else "shard 2 failed: truncated record"
    body = put_status(deployed, RUN, state=state, reason=reason)
    assert backstop(ended(deployed)) == {"recorded": False}
    assert deployed.get(f"runs/{RUN}/status.json") == body
    assert deployed.keys("results/runs/") == [] and partitions(deployed, "runs") == []


def test_a_redelivered_event_changes_nothing(
    deployed: Deployed, backstop: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    put_status(deployed, RUN, state="RUNNING")
    event = ended(deployed)
    assert backstop(event)["recorded"] is True
    first = deployed.get(f"runs/{RUN}/status.json")
    assert backstop(copy.deepcopy(event)) == {"recorded": False}
    assert deployed.get(f"runs/{RUN}/status.json") == first


def _end(status: str, error: str | None = None, cause: str | None = None, seconds: int = 3600) -> ExecutionEnd:
    start = datetime(2026, 11, 29, 16, 30, 5, tzinfo=UTC)
    return ExecutionEnd("arn:x", status, start, start.fromtimestamp(start.timestamp() + seconds, UTC), "{}",
                        error, cause)


def test_the_reason_says_how_the_execution_ended() -> None:
    assert end_reason(_end("FAILED", "States.Runtime", "An error occurred while executing the state 'Commit'")) == (
        "the execution FAILED: States.Runtime: An error occurred while executing the state 'Commit'")
    assert end_reason(_end("FAILED")) == "the execution FAILED without an error"
    assert end_reason(_end("ABORTED")) == "the execution was stopped by an operator (StopExecution)"
    assert end_reason(_end("ABORTED", "Cancelled", "wrong reference")) == (
        "the execution was stopped by an operator (StopExecution): Cancelled: wrong reference")
    assert end_reason(_end("TIMED_OUT", seconds=86_400)) == (
        "the execution timed out after 86400 s (the state machine's TimeoutSeconds)")
    long = end_reason(_end("FAILED", "States.TaskFailed", "x" * 5000))
    assert len(long) < 1100 and long.endswith("…")


@pytest.mark.parametrize(("status", "error"), [("TIMED_OUT", "ExecutionTimedOut"), ("ABORTED", "ExecutionAborted")])
def test_a_stopped_or_timed_out_run_is_recorded_with_its_end(
    deployed: Deployed, backstop: Callable[[dict[str, Any]], dict[str, Any]], status: str, error: str
) -> None:
    put_status(deployed, RUN, state="RUNNING")
    backstop(ended(deployed, status=status, error=None, cause=None))
    recorded = read_status(deployed, RUN)
    assert recorded["state"] == "FAILED" and recorded["error"] == error
    assert recorded["reason"] == end_reason(ExecutionEnd.from_event(ended(deployed, status=status, error=None,
                                                                          cause=None)))


def test_another_event_is_refused_naming_its_field(backstop: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    with pytest.raises(BadEventError, match=r"not a Step Functions Execution Status Change event: field"):
        backstop(load_event("s3-object-created-single.json"))
    running = load_event(SAMPLE)
    running["detail"]["status"] = "RUNNING"
    with pytest.raises(BadEventError, match=r"field detail\.status"):
        backstop(running)


def rule_pattern(template: dict[str, Any]) -> EventPattern:
    ev = template["Resources"]["RecordRunEndFunction"]["Properties"]["Events"]["ExecutionEnded"]["Properties"]
    return EventPattern.load(json.dumps(Resolver(template, {"PipelineStateMachine": STATE_MACHINE})(ev["Pattern"])))


def test_the_rule_takes_every_unsuccessful_end_of_this_state_machine_only(template: dict[str, Any]) -> None:
    pattern = rule_pattern(template)
    sample = load_event(SAMPLE)
    for status in (*UNSUCCESSFUL_ENDS, "SUCCEEDED", "RUNNING"):
        event = execution_status_event({**sample["detail"], "status": status}, account="123456789012",
                                       region="us-east-1", event_id="e", time=datetime.now(UTC))
        assert pattern.matches_event(event) is (status in UNSUCCESSFUL_ENDS), status
    other = copy.deepcopy(sample)
    other["detail"]["stateMachineArn"] += "-other"
    assert not pattern.matches_event(other)
    props = template["Resources"]["RecordRunEndFunction"]["Properties"]
    assert props["Events"]["ExecutionEnded"]["Properties"]["DeadLetterConfig"] and props["DeadLetterQueue"]


def test_a_quoted_lambda_error_or_batch_job_is_its_one_line() -> None:
    """``FailedUnrecorded``'s cause quotes the failed Task's cause and RecordFailure's (Lambda error objects
    with their stack traces): the reason keeps their messages."""
    lam = json.dumps({"errorType": "BadInputError", "errorMessage": "s3://b/incoming/x/q.fastq:4: bad quality",
                      "stackTrace": ["Traceback ...", "  File \"app.py\" {line 3}"]})
    rec = json.dumps({"errorType": "KeyError", "errorMessage": "'GLUE_DATABASE'", "stackTrace": []})
    cause = f"Plan failed: BadInputError: {lam}; recording the failure failed too: KeyError: {rec}"
    assert readable(cause) == ("Plan failed: BadInputError: s3://b/incoming/x/q.fastq:4: bad quality; "
                               "recording the failure failed too: KeyError: 'GLUE_DATABASE'")
    job = json.dumps({"jobId": "j", "statusReason": "Essential container in task exited", "container": {"x": 1}})
    assert readable(f"{{not json {job}") == "{not json Essential container in task exited"
    assert readable('{"a": 1} and {"b": {"c": 2}}') == '{"a": 1} and {"b": {"c": 2}}'
