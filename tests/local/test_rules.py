"""The local cloud refuses what AWS refuses (``localcloud.rules``): each rule of its table shown on
the running fixture cloud, the table in docs/LOCAL_CLOUD.md generated from the rules, and the real app without
a scheduling priority failing its local run as it would fail on AWS."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from batch_queues import fair_share_queue, quick_definition
from botocore.exceptions import ClientError

from localcloud import containers, rules
from localcloud.packaging import load_template
from seqlake import demo_data

REPO = Path(__file__).resolve().parents[2]


def seqlake_command(*args: str) -> subprocess.CompletedProcess[str]:
    """``seqlake ARGS`` in a process of its own (as tests/local/conftest.py runs it), children as processes."""
    env = {k: v for k, v in os.environ.items() if k != containers.var()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "seqlake", *args], env=env, text=True, capture_output=True,
                          timeout=900, check=False)


def _wait_job(batch: Any, job_id: str) -> dict[str, Any]:
    for _ in range(600):
        job: dict[str, Any] = batch.describe_jobs(jobs=[job_id])["jobs"][0]
        if job["status"] in ("SUCCEEDED", "FAILED"):
            return job
        time.sleep(0.1)
    raise AssertionError("job did not finish")


def _queue_and_definition(cloud: Any) -> tuple[Any, str, dict[str, Any]]:
    batch = cloud.client("batch")
    queue = batch.describe_job_queues()["jobQueues"][0]
    return batch, queue["jobQueueArn"], queue


def test_fair_share_queue_refuses_a_job_without_a_share_identifier(fixture_cloud: Any) -> None:
    batch, _, _ = _queue_and_definition(fixture_cloud)
    queue = fair_share_queue(batch, "fair-share-1")
    jd = quick_definition(batch, "prioritised-1", schedulingPriority=5)
    with pytest.raises(ClientError, match=re.escape(rules.NO_SHARE_IDENTIFIER)) as refused:
        batch.submit_job(jobName="no-share", jobQueue=queue, jobDefinition=jd)
    assert refused.value.response["Error"]["Code"] == "ClientException"
    job_id = batch.submit_job(jobName="shared", jobQueue=queue, jobDefinition=jd, shareIdentifier="run1")["jobId"]
    assert _wait_job(batch, job_id)["status"] == "SUCCEEDED"


def test_fair_share_queue_refuses_a_job_without_a_scheduling_priority(fixture_cloud: Any) -> None:
    batch, fifo_queue, _ = _queue_and_definition(fixture_cloud)
    queue = fair_share_queue(batch, "fair-share-2")
    plain = quick_definition(batch, "unprioritised")
    with pytest.raises(ClientError, match=re.escape(rules.NO_SCHEDULING_PRIORITY)):
        batch.submit_job(jobName="no-priority", jobQueue=queue, jobDefinition=plain, shareIdentifier="run1")
    # the override alone, or the job definition's priority alone, is enough; a FIFO queue needs neither
    overridden = batch.submit_job(jobName="override", jobQueue=queue, jobDefinition=plain, shareIdentifier="run1",
                                  schedulingPriorityOverride=1)["jobId"]
    prioritised = quick_definition(batch, "prioritised-2", schedulingPriority=0)
    defined = batch.submit_job(jobName="defined", jobQueue=queue, jobDefinition=prioritised,
                               shareIdentifier="run1")["jobId"]
    fifo_job = batch.submit_job(jobName="fifo", jobQueue=fifo_queue, jobDefinition=plain)["jobId"]
    for job_id in (overridden, defined, fifo_job):
        assert _wait_job(batch, job_id)["status"] == "SUCCEEDED"


def test_timeouts_under_a_minute_are_refused(fixture_cloud: Any) -> None:
    batch, queue, _ = _queue_and_definition(fixture_cloud)
    with pytest.raises(ClientError, match="under the minimum of 60 seconds"):
        quick_definition(batch, "hasty", timeout={"attemptDurationSeconds": 59})
    jd = quick_definition(batch, "patient", timeout={"attemptDurationSeconds": 60})
    with pytest.raises(ClientError, match="under the minimum of 60 seconds"):
        batch.submit_job(jobName="hasty", jobQueue=queue, jobDefinition=jd, timeout={"attemptDurationSeconds": 30})


def test_container_overrides_batch_refuses_are_refused(fixture_cloud: Any) -> None:
    batch, queue, _ = _queue_and_definition(fixture_cloud)
    jd = quick_definition(batch, "overridden")
    bad: list[dict[str, Any]] = [
        {"environment": [{"name": "AWS_BATCH_JOB_ID", "value": "mine"}]},
        {"resourceRequirements": [{"type": "VCPU", "value": "0.5"}]},
        {"resourceRequirements": [{"type": "MEMORY", "value": "3"}]},
    ]
    for overrides in bad:
        with pytest.raises(ClientError) as refused:
            batch.submit_job(jobName="bad", jobQueue=queue, jobDefinition=jd, containerOverrides=overrides)
        assert refused.value.response["Error"]["Code"] == "ClientException", overrides


def test_a_job_no_instance_type_can_hold_fails_with_the_reason(fixture_cloud: Any) -> None:
    """The fixture's compute environment is ``optimal`` (c4, m4, r4: at most 64 vCPUs, 488 GiB) with
    ``maxvCpus`` 16: a job of 1 TiB fits no instance, a job of 32 vCPUs exceeds the maximum."""
    batch, queue, _ = _queue_and_definition(fixture_cloud)
    jd = quick_definition(batch, "sized")
    huge = batch.submit_job(jobName="huge", jobQueue=queue, jobDefinition=jd, containerOverrides={
        "resourceRequirements": [{"type": "MEMORY", "value": str(1 << 20)}]})["jobId"]
    wide = batch.submit_job(jobName="wide", jobQueue=queue, jobDefinition=jd, containerOverrides={
        "resourceRequirements": [{"type": "VCPU", "value": "32"}]})["jobId"]
    job = _wait_job(batch, huge)
    assert job["status"] == "FAILED" and not job.get("attempts")
    assert job["statusReason"].startswith(rules.CANCELLED_PREFIX + rules.JOB_RESOURCE_REQUIREMENT), job["statusReason"]
    job = _wait_job(batch, wide)
    assert job["status"] == "FAILED"
    assert rules.COMPUTE_ENVIRONMENT_MAX_RESOURCE in job["statusReason"], job["statusReason"]


def test_instance_types_expand_families_and_optimal() -> None:
    assert rules.instance_types()["r5.24xlarge"] == (96, 786_432)
    assert "r5.large" in rules.expand(["r5"]) and "r5a.large" not in rules.expand(["r5"])
    assert {t.split(".")[0] for t in rules.expand(["optimal"])} == set(rules.OPTIMAL_FAMILIES)
    assert rules.expand(["m5.xlarge"]) == ["m5.xlarge"]


def test_the_instance_file_is_what_its_generator_writes() -> None:
    """``src/seqlake/base/instance_types.json`` (the plan's and the rules' one source) is moto's copy of EC2's
    DescribeInstanceTypes for the template's families: ``python -m seqlake.local.instance_data --check``."""
    from seqlake.base import instances
    from seqlake.local import instance_data

    template = load_template(REPO / "template.yaml")
    assert instances.DATA_PATH.read_text() == instance_data.render(template, instance_data.described_types())
    assert set(instance_data.template_families(template)) <= set(instances.data()["families"])  # type: ignore[operator]


def test_a_job_asking_an_instances_installed_memory_fits_no_instance() -> None:
    """Batch gives jobs less than an instance's installed memory (the OS's share less the ECS agent's 32 MiB):
    a job asking an r5.large's whole 16,384 MiB stays RUNNABLE on AWS. The rule compared installed memory and
    let it through."""
    from types import SimpleNamespace

    environment = SimpleNamespace(compute_resources={"instanceTypes": ["r5.large"], "maxvCpus": 16})

    def job(memory_mib: int) -> Any:
        return SimpleNamespace(job_definition=SimpleNamespace(container_properties={"vcpus": 1, "memory": memory_mib}),
                               container_overrides={}, job_queue=SimpleNamespace(environments=[environment]))

    reason = rules.unschedulable(job(16_384))
    assert reason is not None and rules.JOB_RESOURCE_REQUIREMENT in reason
    assert rules.unschedulable(job(15_000)) is None


def test_the_table_in_the_doc_equals_the_rules_module() -> None:
    doc = (REPO / "docs" / "LOCAL_CLOUD.md").read_text()
    template = load_template(REPO / "template.yaml")
    assert rules.render(doc, template) == doc, "python -m localcloud.rules"
    # every rule's test exists
    for rule in rules.RULES:
        path, _, name = rule.test.partition("::")
        assert (REPO / path).is_file(), rule
        assert not name or f"def {name}(" in (REPO / path).read_text(), rule
        assert rule.source.startswith("https://"), rule
    # the calls the app makes with no rule are named: the table is complete
    assert "s3:GetObject" in rules.table(template) and "glue:BatchCreatePartition" in rules.table(template)


def _app_copy(to: Path) -> Path:
    to.mkdir()
    for name in ("template.yaml",):
        shutil.copy(REPO / name, to / name)
    for folder in ("functions", "layers", "statemachines", "queries", "views"):
        shutil.copytree(REPO / folder, to / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return to


def test_the_app_without_a_scheduling_priority_fails_its_local_run_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The must-show of issue 34: as on AWS, a job for the fair-share queue with no scheduling priority is
    refused, the state machine's Catch records the reason, and the run fails naming schedulingPriority."""
    app = _app_copy(tmp_path / "app")
    template = (app / "template.yaml").read_text()
    without = re.sub(r"\n      SchedulingPriority: \d+\n", "\n", template)
    assert without != template, "the template gives its job definition a scheduling priority"
    (app / "template.yaml").write_text(without)
    machine = (app / "statemachines" / "pipeline.asl.json").read_text()
    assert "SchedulingPriorityOverride" not in machine
    monkeypatch.setenv("SEQLAKE_APP_DIR", str(app))
    r1, r2, reference = demo_data.paths()
    proc = seqlake_command("local", "run", str(r1), str(r2), "--reference", str(reference), "--jobs", "1",
                           "--home", str(tmp_path / "home"))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    folded = " ".join(output.split())  # the reason is wrapped to the terminal's width
    assert "Either schedulingPriority in job definition or schedulingPriorityOverride" in folded, output[-3000:]
    assert "IndexJob" in output  # the first Batch step, recorded by its Catch


def _run_machine(cloud: Any, name: str, definition: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    from localcloud.deployer import ACCOUNT

    sfn = cloud.client("stepfunctions")
    arn = sfn.create_state_machine(name=name, definition=json.dumps(definition),
                                   roleArn=f"arn:aws:iam::{ACCOUNT}:role/any")["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps(given))["executionArn"]
    for _ in range(300):
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.1)
    raise AssertionError("the execution did not end")


def test_failed_unrecorded_names_the_failed_state_when_an_error_has_no_cause(fixture_cloud: Any) -> None:
    """Issue 34, item 7: a caught error without a Cause (States.Timeout has none) made FailedUnrecorded's
    States.Format fail with States.Runtime, so the backstop recorded that instead of the failed state. The real
    states, run by the local interpreter: the cause names the failed step and says no cause was given."""
    machine = json.loads((REPO / "statemachines" / "pipeline.asl.json").read_text())
    states = {name: machine["States"][name] for name in ("FillMissingCauses", "FailedUnrecorded")}
    given = {"failed_step": "ProcessShards", "error": {"Error": "States.Timeout"},
             "record_error": {"Error": "Lambda.Unknown", "Cause": "the record function crashed"}}
    ended = _run_machine(fixture_cloud, "fill-causes", {"StartAt": "FillMissingCauses", "States": states}, given)
    assert ended["status"] == "FAILED" and ended["error"] == "RunFailedUnrecorded", ended
    assert ended["cause"] == ("ProcessShards failed: States.Timeout: (no cause given); recording the failure failed "
                              "too: Lambda.Unknown: the record function crashed"), ended["cause"]
    # without the filling state, the same input ends in States.Runtime, naming none of it
    bare = _run_machine(fixture_cloud, "bare-causes",
                        {"StartAt": "FailedUnrecorded", "States": {"FailedUnrecorded": states["FailedUnrecorded"]}},
                        given)
    assert bare.get("error") != "RunFailedUnrecorded", bare
