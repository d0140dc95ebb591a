"""A Batch state that times out terminates its jobs (issue 34, item 3), and the state machine submits each
kind of job with the plan's sizes and timeout (item 4)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from seqlake.aws import steps
from seqlake.aws.status import RunStatus
from seqlake.base import clients
from seqlake.base.model import Step

REPO = Path(__file__).resolve().parents[2]
QUEUE = "arn:aws:batch:eu-west-1:123456789012:job-queue/seqlake-dev-queue"
EXECUTION = "arn:aws:states:eu-west-1:123456789012:execution:seqlake-dev-pipeline:run7-abc"


def asl() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO / "statemachines" / "pipeline.asl.json").read_text())
    return data


def test_the_job_names_the_failure_step_looks_for_are_the_states_job_names() -> None:
    states = asl()["States"]
    for step, prefix in steps.JOB_NAME_PREFIX.items():
        name = states[step.value]["Parameters"]["JobName.$"]
        assert name == f"States.Format('{prefix}{{}}', $$.Execution.Name)", step
    batch_states = {n for n, s in states.items() if s.get("Resource") == "${BatchSubmitJobSync}"}
    assert batch_states == {s.value for s in steps.JOB_NAME_PREFIX}


def test_every_batch_state_submits_the_plans_timeout_and_a_step_timeout() -> None:
    states = asl()["States"]
    paths = {"IndexJob": "$.plan.jobs.index.timeout_s", "ProcessShards": "$.plan.jobs.child.timeout_s",
             "ProcessOneShard": "$.plan.jobs.child.timeout_s", "ReduceRegions": "$.reduce.timeout_s",
             "ReduceOneRegion": "$.reduce.timeout_s"}
    for name, path in paths.items():
        assert states[name]["Parameters"]["Timeout"] == {"AttemptDurationSeconds.$": path}, name
        assert states[name]["TimeoutSecondsPath"] == "$.limits.batch_step_timeout_s", name
        # a timed-out step goes through the failure step, which terminates its jobs
        catch = states[name]["Catch"][0]
        assert "States.ALL" in catch["ErrorEquals"] and states[catch["Next"]]["Next"] == "RecordFailure"
    index = states["IndexJob"]["Parameters"]["ContainerOverrides"]["ResourceRequirements"]
    assert index == [{"Type": "VCPU", "Value.$": "$.plan.jobs.index.vcpus"},
                     {"Type": "MEMORY", "Value.$": "$.plan.jobs.index.memory_mib"}]
    for name in ("Plan", "PlanAfterIndex"):
        assert states[name]["ResultSelector"]["jobs.$"] == "$.Payload.jobs"
    assert states["PlanReduce"]["ResultSelector"]["timeout_s.$"] == "$.Payload.timeout_s"


def test_the_failure_step_may_terminate_jobs() -> None:
    text = (REPO / "template.yaml").read_text()
    block = text[text.index("  RecordFailureFunction:"):]
    block = block[:re.search(r"\n  [A-Z]\w+:\n", block[3:]).start() + 3]  # type: ignore[union-attr]
    assert "JOB_QUEUE: !Ref WorkerJobQueue" in block
    assert re.search(r"Action: \[batch:TerminateJob\]\n\s+Resource: !Sub arn:\$\{AWS::Partition\}:batch:"
                     r"\$\{AWS::Region\}:\$\{AWS::AccountId\}:job/\*", block)


@pytest.fixture
def batch(monkeypatch: pytest.MonkeyPatch) -> Stubber:
    """The Batch API as botocore models it (every request checked against its shape), answering as the
    service documents: the failure step's calls are what is checked here."""
    client = boto3.client("batch", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    real = clients.client
    monkeypatch.setattr(clients, "client", lambda s: client if s == "batch" else real(s))
    return Stubber(client)


def test_a_timed_out_shard_step_terminates_its_array_job(batch: Stubber) -> None:
    """The array parent still RUNNING is terminated (its children go with it); a job of an earlier attempt
    that already ended is left alone."""
    name = "shards-run7-abc"
    batch.add_response("list_jobs", {"jobSummaryList": [
        {"jobId": "parent-1", "jobName": name, "status": "RUNNING", "arrayProperties": {"size": 200}},
        {"jobId": "old-0", "jobName": name, "status": "FAILED"},
    ]}, {"jobQueue": QUEUE, "filters": [{"name": "JOB_NAME", "values": [name]}]})
    batch.add_response("terminate_job", {}, {"jobId": "parent-1",
                                             "reason": "seqlake: the ProcessShards step timed out"})
    with batch:
        assert steps.stop_timed_out_jobs(Step.PROCESS_SHARDS, EXECUTION, QUEUE) == ["parent-1"]
    batch.assert_no_pending_responses()


def test_the_reason_names_the_timeout_and_the_terminated_jobs(batch: Stubber) -> None:
    status = RunStatus("run7-abc", "FAILED", "bucket", ["s1"], [])
    name = "reduce-run7-abc"
    batch.add_response("list_jobs", {"jobSummaryList": [
        {"jobId": "r-9", "jobName": name, "status": "RUNNABLE", "arrayProperties": {"size": 25}}]},
        {"jobQueue": QUEUE, "filters": [{"name": "JOB_NAME", "values": [name]}]})
    batch.add_response("terminate_job", {}, {"jobId": "r-9", "reason": "seqlake: the ReduceRegions step timed out"})
    with batch:
        steps._timed_out(status, Step.REDUCE_REGIONS, EXECUTION, QUEUE)
    assert status.stopped_jobs == ["r-9"]
    assert status.reason is not None and "ReduceRegions step timed out" in status.reason and "r-9" in status.reason
