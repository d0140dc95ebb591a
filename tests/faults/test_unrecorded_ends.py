"""Runs whose execution ends without RecordFailure recording them (docs/FAULTS.md, "Ends no step records"),
through the local cloud: the execution's end reaches EventBridge as AWS reports it, and the backstop
(functions/record_run_end) records the run FAILED with the execution's error and cause. A run RecordFailure
recorded keeps its reason. One wait for a run stopped by an operator and a bad input RecordFailure records;
a second, with RecordFailure broken, for a bad input nothing else records."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from localcloud.cloud import LocalCloud

from .conftest import Outcome, outcomes, partitions_of, put, record_failure_broken, runs_row

pytestmark = pytest.mark.e2e  # the fault suite's cloud (GROUPS in tests/conftest.py)

GOOD = b"".join(f"@u{i}\nACGTACGTAC\n+\nIIIIIIIIII\n".encode() for i in range(6))
BAD = b"@u0\nACGT\n+\nII I\n"  # a quality character outside '!'..'~': the plan step fails on line 4


@dataclass(frozen=True)
class Ends:
    stopped: Outcome
    recorded: Outcome
    unrecorded: Outcome
    missing_setting: str
    #: (execution ARN, status) of every execution end the local cloud put on the event bus
    emitted: list[tuple[str, str]]


def _stop_once_scheduled(cloud: LocalCloud, name_prefix: str, done: threading.Event) -> None:
    """StopExecution of the run named ``name_prefix...`` once its first task is scheduled (an operator)."""
    sfn = cloud.client("stepfunctions")
    while not done.is_set():
        for e in sfn.list_executions(stateMachineArn=cloud.state_machine_arn)["executions"]:
            if not e["name"].startswith(name_prefix):
                continue
            history = sfn.get_execution_history(executionArn=e["executionArn"])["events"]
            if any(h["type"] == "TaskScheduled" for h in history):
                sfn.stop_execution(executionArn=e["executionArn"])
                return
        done.wait(0.2)


@pytest.fixture(scope="module")
def ends(cloud: LocalCloud) -> Ends:
    done = threading.Event()
    stopper = threading.Thread(target=_stop_once_scheduled, args=(cloud, "ue-stopped-", done), daemon=True)
    stopper.start()
    put(cloud, "incoming/ue-stop/ue-stopped.fastq", GOOD)
    put(cloud, "incoming/ue-recorded/ue-recorded.fastq", BAD)
    try:
        first = outcomes(cloud, cloud.wait())
    finally:
        done.set()
        stopper.join(timeout=30)
    with record_failure_broken(cloud) as missing:
        put(cloud, "incoming/ue-unrecorded/ue-unrecorded.fastq", BAD)
        second = outcomes(cloud, cloud.wait())

    def named(results: dict[str, Outcome], prefix: str) -> Outcome:
        [o] = [o for name, o in results.items() if name.startswith(prefix)]
        return o

    return Ends(named(first, "ue-stopped-"), named(first, "ue-recorded-"), named(second, "ue-unrecorded-"),
                missing, list(cloud._hooks.execution_ends.emitted))


def _recorded_failed(cloud: LocalCloud, o: Outcome) -> dict[str, Any]:
    """The run's status.json, checked FAILED with its runs row saying the same and no result partition."""
    assert o.status["state"] == "FAILED", o.status
    row = runs_row(cloud, o.run_id)
    assert row["state"] == "FAILED" and row["reason"] == o.status["reason"]
    assert partitions_of(cloud, o.run_id) == {"runs"}
    return o.status


def test_a_run_stopped_by_an_operator_is_recorded_failed(cloud: LocalCloud, ends: Ends) -> None:
    assert ends.stopped.execution.status == "ABORTED"
    status = _recorded_failed(cloud, ends.stopped)
    assert status["reason"] == "the execution was stopped by an operator (StopExecution)"
    assert status["error"] == "ExecutionAborted" and status["execution_arn"] == ends.stopped.execution.arn


def test_a_run_whose_failure_could_not_be_recorded_is_recorded_by_the_backstop(cloud: LocalCloud, ends: Ends) -> None:
    """RecordFailure failed (FailedUnrecorded): status.json said RUNNING, with no reason, until the backstop."""
    assert ends.unrecorded.execution.status == "FAILED"
    assert ends.unrecorded.execution.error == "RunFailedUnrecorded"
    status = _recorded_failed(cloud, ends.unrecorded)
    key = ends.unrecorded.status["inputs"][0]["key"]
    # the failed state, its one-line error (not the Lambda error's JSON and stack trace), and why recording failed
    assert status["reason"].startswith(
        f"the execution FAILED: RunFailedUnrecorded: Plan failed: BadInputError: s3://{cloud.bucket}/{key}:4: ")
    assert status["reason"].endswith(f"recording the failure failed too: KeyError: '{ends.missing_setting}'")
    assert "stackTrace" not in status["reason"]


def test_a_failure_recorded_by_record_failure_keeps_its_reason(cloud: LocalCloud, ends: Ends) -> None:
    """Its execution's FAILED end reached the backstop too, which left the run as RecordFailure wrote it."""
    assert (ends.recorded.execution.arn, "FAILED") in ends.emitted
    status = _recorded_failed(cloud, ends.recorded)
    assert status["failed_step"] == "Plan" and status["bad_input"] is True
    key = ends.recorded.status["inputs"][0]["key"]
    assert status["reason"].startswith(f"s3://{cloud.bucket}/{key}:4: "), status["reason"]


def test_every_end_is_put_on_the_bus_once(ends: Ends) -> None:
    arns = [arn for arn, _ in ends.emitted]
    for o in (ends.stopped, ends.recorded, ends.unrecorded):
        assert arns.count(o.execution.arn) == 1
