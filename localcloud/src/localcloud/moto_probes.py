"""Does moto still need each patch? One probe per registered patch, run against an unpatched moto.

Each probe shows the behaviour its patch exists for on moto as it is (through ``mock_aws`` and boto3 where the
behaviour can be seen from outside, else by looking at the function the patch replaces) and answers
``needed`` (moto still behaves so), ``gone`` (moto behaves as AWS: the patch can go) or ``review`` (the probe
could not tell: moto moved or changed what the patch replaces, which needs a person). First, every function
the patch replaces must still exist where the registry says.

This module imports moto but neither :mod:`.patches` (which refuses any moto but the pinned one) nor the rest of
seqlake, so that ``make moto-check`` runs it from a scratch virtualenv with the newest moto on PyPI
(:mod:`.moto_check`). In this repository's own environment ``tests/local/test_moto_probes.py`` runs it in a
fresh process (no patch applied) and requires ``needed`` of every patch on the pinned moto: a probe that does
not see its bug there would be worthless against the newest.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from localcloud import patch_registry

REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Verdict:
    patch: str
    state: str  # "needed" | "gone" | "review"
    evidence: str


def _resolve(path: str) -> Any:
    """``module:Attr.attr`` as the registry names it (a trailing ``(...)`` note ignored)."""
    module, _, attrs = path.partition(" ")[0].partition(":")
    found: Any = importlib.import_module(module)
    for name in attrs.split("."):
        found = getattr(found, name)
    return found


@contextlib.contextmanager
def _aws() -> Iterator[None]:
    from moto import mock_aws

    config: Any = {"batch": {"use_docker": False}, "lambda": {"use_docker": False},
                   "stepfunctions": {"execute_state_machine": True}}
    with mock_aws(config=config):
        yield


def _client(service: str) -> Any:
    import boto3

    # mock_aws answers whatever keys sign; these are moto's documented fakes, never a real account's
    fake = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    return boto3.client(service, region_name=REGION, **fake)


def _source(path: str) -> str:
    return inspect.getsource(_resolve(path))


def _pass_machine(sfn: Any) -> str:
    definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    arn: str = sfn.create_state_machine(name="probe", roleArn=f"arn:aws:iam::{ACCOUNT}:role/probe",
                                        definition=definition)["stateMachineArn"]
    return arn


# ---------------------------------------------------------------- the probes, by patch id
def _sfn_normalisation() -> tuple[bool, str]:
    module = "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service"
    service: Any = _resolve(f"{module}:StateTaskService")
    fake: Any = type("Probe", (), {
        "_get_boto_service_name": lambda self, name=None: "batch",
        "_get_boto_service_action": lambda self, name=None: "submit_job",
        "_to_boto_request": service._to_boto_request,
    })()
    parameters = {"JobName": "x", "JobQueue": "q", "JobDefinition": "d"}
    service._normalise_parameters(fake, parameters, "batch", "submitJob")
    return "JobName" in parameters, f"SubmitJob's Parameters after moto's normalisation: {sorted(parameters)}"


def _s3_ranged_get() -> tuple[bool, str]:
    from moto.s3 import models

    key_class: Any = models.FakeKey
    sizes: list[int] = []
    original = key_class.value

    def watched(self: Any) -> Any:
        value = original.fget(self)
        sizes.append(len(value))
        return value

    body = b"x" * (2 << 20)
    with _aws():
        s3 = _client("s3")
        s3.create_bucket(Bucket="probe")
        s3.put_object(Bucket="probe", Key="k", Body=body)
        key_class.value = property(watched, original.fset)
        try:
            got = s3.get_object(Bucket="probe", Key="k", Range="bytes=0-9")["Body"].read()
        finally:
            key_class.value = original
    return len(body) in sizes and got == body[:10], f"a 10-byte range of 2 MiB read {max(sizes, default=0)} bytes"


def _s3_spooled_bodies() -> tuple[bool, str]:
    part = 5 << 20
    with _aws():
        s3 = _client("s3")
        s3.create_bucket(Bucket="probe")
        upload = s3.create_multipart_upload(Bucket="probe", Key="k")["UploadId"]
        etags = [s3.upload_part(Bucket="probe", Key="k", UploadId=upload, PartNumber=n, Body=bytes([n]) * part)["ETag"]
                 for n in (1, 2, 3)]
        tracemalloc.start()
        try:
            s3.complete_multipart_upload(Bucket="probe", Key="k", UploadId=upload, MultipartUpload={
                "Parts": [{"ETag": e, "PartNumber": n} for n, e in enumerate(etags, 1)]})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return peak >= 3 * part, f"completing a 15 MiB upload allocated {peak / 2**20:.1f} MiB at its peak"


def _lambda_invoke() -> tuple[bool, str]:
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("handler.py", "def handler(event, context):\n    return {'ran': True}\n")
    with _aws():
        role = _client("iam").create_role(RoleName="probe", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lam = _client("lambda")
        lam.create_function(FunctionName="probe", Runtime="python3.12", Role=role, Handler="handler.handler",
                            Code={"ZipFile": code.getvalue()})
        answer = lam.invoke(FunctionName="probe", Payload=b'{"echo": 1}')["Payload"].read()
    return answer != b'{"ran": true}', f"the handler returns {{'ran': True}}; moto answered {answer[:80]!r}"


def _batch_env() -> tuple[Any, str, str]:
    batch = _client("batch")
    role = _client("iam").create_role(RoleName="batch-probe", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    ce = batch.create_compute_environment(computeEnvironmentName="probe", type="UNMANAGED",
                                          serviceRole=role)["computeEnvironmentArn"]
    queue = batch.create_job_queue(jobQueueName="probe", state="ENABLED", priority=1,
                                   computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ce}])["jobQueueArn"]
    jd = batch.register_job_definition(jobDefinitionName="probe", type="container", containerProperties={
        "image": "busybox", "command": ["true"], "resourceRequirements": [
            {"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "128"}],
        "environment": [{"name": "FROM_DEFINITION", "value": "1"}]})["jobDefinitionArn"]
    return batch, queue, jd


def _batch_submit() -> tuple[bool, str]:
    with _aws():
        batch, queue, jd = _batch_env()
        try:
            batch.submit_job(jobName="one", jobQueue=queue, jobDefinition=jd, arrayProperties={"size": 1})
        except Exception as refused:
            return False, f"an array of one is refused: {refused}"
    return True, "an array of size 1 is accepted (AWS: 2..10,000), and moto's Docker-free Batch runs no container"


def _batch_describe() -> tuple[bool, str]:
    with _aws():
        batch, queue, jd = _batch_env()
        job = batch.submit_job(jobName="j", jobQueue=queue, jobDefinition=jd,
                               containerOverrides={"environment": [{"name": "A", "value": "1"}]})["jobId"]
        counts = [len(batch.describe_jobs(jobs=[job])["jobs"][0]["container"].get("environment") or [])
                  for _ in range(3)]
    return counts[0] != counts[-1], f"the environment's length over three DescribeJobs: {counts}"


def _batch_describe_jobs() -> tuple[bool, str]:
    source = _source("moto.batch.models:BatchBackend.describe_jobs")
    walks = "self._jobs.items()" in source or "self._jobs.values()" in source
    return walks, "describe_jobs " + ("iterates the live job table" if walks else "does not iterate the job table")


def _glue_version_id() -> tuple[bool, str]:
    source = _source("moto.glue.responses:GlueResponse.update_table")
    ignored = "VersionId" not in source
    return ignored, "update_table " + ("ignores VersionId" if ignored else "reads VersionId")


def _event_targets() -> tuple[bool, str]:
    source = _source("moto.events.models:Rule.send_to_targets")
    return True, ("moto delivers to targets itself without the Lambda permission or the retries and dead-letter "
                  f"queue the local cloud applies (state machine targets {'sent' if 'states' in source else 'dropped'}"
                  " by moto); the local cloud's own delivery, kept by design")


def _athena_results() -> tuple[bool, str]:
    with _aws():
        athena = _client("athena")
        qid = athena.start_query_execution(QueryString="SELECT 1 AS one",
                                           ResultConfiguration={"OutputLocation": "s3://probe/"})["QueryExecutionId"]
        rows = athena.get_query_results(QueryExecutionId=qid)["ResultSet"]["Rows"]
    return rows == [] or rows[-1:] != [{"Data": [{"VarCharValue": "1"}]}], f"SELECT 1 answered rows {rows[:2]}"


def _sync_wait() -> tuple[bool, str]:
    module = "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback"
    polls = "time.sleep(" in inspect.getsource(importlib.import_module(module))
    return polls, "the .sync wait " + ("polls with time.sleep" if polls else "no longer polls with time.sleep")


def _server_lookups() -> tuple[bool, str]:
    import os

    import moto.backends

    calls: list[str] = []
    os_module: Any = os
    listdir = os.listdir

    def counting(path: Any) -> list[str]:
        calls.append(str(path))
        return listdir(path)

    os_module.listdir = counting
    try:
        list(moto.backends.list_of_moto_modules())
        list(moto.backends.list_of_moto_modules())
    finally:
        os_module.listdir = listdir
    return len(calls) > 1, f"two lookups of moto's services listed its folder {len(calls)} times"


def _aws_limits() -> tuple[bool, str]:
    with _aws():
        sfn = _client("stepfunctions")
        arn = _pass_machine(sfn)
        try:
            sfn.start_execution(stateMachineArn=arn, input=json.dumps({"pad": "x" * 300_000}))
        except Exception as refused:
            return False, f"an execution input of 300 KB is refused: {refused}"
    return True, "an execution input of 300 KB (over 262,144 bytes) is accepted"


def _s3_latency() -> tuple[bool, str]:
    _resolve("moto.s3.responses:S3Response.setup_class")
    return True, "moto has no latency setting: the local cloud's own (Settings.s3_latency_ms), kept by design"


def _iam_authorization() -> tuple[bool, str]:
    source = _source("moto.iam.access_control:IAMRequestBase._create_aws_request")
    signs_data = "self._data" in source
    # 5.2.5 took S3's IAM action from the Action its response set (data["Action"], IAM's names); 5.2.6's
    # _get_action is the router's API operation (ListObjectsV2 where IAM says s3:ListBucket)
    by_operation = "querystring" not in _source("moto.core.responses:BaseResponse._get_action")
    return signs_data or by_operation, (
        "an empty body is signed " + ("from the parsed parameters" if signs_data else "as empty")
        + "; S3 actions are named " + ("by the API operation" if by_operation else "as IAM names them")
        + "; moto's evaluation of policies and conditions is replaced by the local cloud's policy.py")


def _sfn_credentials() -> tuple[bool, str]:
    source = inspect.getsource(importlib.import_module("moto.stepfunctions.parser.asl.utils.boto_client"))
    fixed = '"ak"' in source or "'ak'" in source
    return fixed, "integrations sign with " + ("fixed keys ak/sk" if fixed else "keys moto no longer fixes")


def _s3_direct_get() -> tuple[bool, str]:
    return True, "a speed-up of the local server in front of moto (no moto bug): kept while it is measured faster"


def _execution_events() -> tuple[bool, str]:
    with _aws():
        sqs, events, sfn = _client("sqs"), _client("events"), _client("stepfunctions")
        queue = sqs.create_queue(QueueName="probe")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name="probe", EventPattern=json.dumps({"source": ["aws.states"]}))
        events.put_targets(Rule="probe", Targets=[{"Id": "q", "Arn": queue_arn}])
        arn = _pass_machine(sfn)
        execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
        for _ in range(100):
            if sfn.describe_execution(executionArn=execution)["status"] != "RUNNING":
                break
            time.sleep(0.05)
        got = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
    return not got, f"an execution ended; events from aws.states on the default bus: {len(got)}"


def _response_enrichment() -> tuple[bool, str]:
    from moto.core import responses as responses_module

    responses: Any = responses_module
    searched: list[int] = []
    real_re = responses.re

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(real_re, name)

        @staticmethod
        def sub(pattern: Any, replacement: Any, text: Any, *args: Any, **kwargs: Any) -> Any:
            searched.append(len(text))
            return real_re.sub(pattern, replacement, text, *args, **kwargs)

    responses.re = Counting()
    try:
        responses.BaseResponse._enrich_response({}, json.dumps({"jobs": list(range(100))}))
    finally:
        responses.re = real_re
    return bool(searched), f"a JSON body without <RequestId> was searched {len(searched)} time(s)"


def _batch_service_rules() -> tuple[bool, str]:
    with _aws():
        batch, fifo, jd = _batch_env()
        ce = batch.describe_job_queues(jobQueues=[fifo])["jobQueues"][0]["computeEnvironmentOrder"]
        policy = batch.create_scheduling_policy(name="probe-fair", fairsharePolicy={"shareDecaySeconds": 60})["arn"]
        queue = batch.create_job_queue(jobQueueName="probe-fair", state="ENABLED", priority=1,
                                       schedulingPolicyArn=policy, computeEnvironmentOrder=ce)["jobQueueArn"]
        try:
            batch.submit_job(jobName="no-share", jobQueue=queue, jobDefinition=jd)
        except Exception as refused:
            return False, f"a fair-share queue's job without a share identifier is refused: {refused}"
    return True, "a fair-share queue takes a job with neither share identifier nor scheduling priority"


def _sfn_batch_parameters() -> tuple[bool, str]:
    module = importlib.import_module(
        "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_batch")
    passed = module._SUPPORTED_API_PARAM_BINDINGS.get("submitjob") or set()
    dropped = {"ShareIdentifier", "SchedulingPriorityOverride"} - set(passed)
    return bool(dropped), ("batch:submitJob drops " + ", ".join(sorted(dropped)) if dropped
                           else "batch:submitJob passes ShareIdentifier and SchedulingPriorityOverride")


PROBES: dict[str, Callable[[], tuple[bool, str]]] = {
    "sfn-normalisation": _sfn_normalisation,
    "s3-ranged-get": _s3_ranged_get,
    "s3-spooled-bodies": _s3_spooled_bodies,
    "lambda-invoke": _lambda_invoke,
    "batch-submit": _batch_submit,
    "event-targets": _event_targets,
    "athena-results": _athena_results,
    "sync-wait": _sync_wait,
    "server-lookups": _server_lookups,
    "aws-limits": _aws_limits,
    "s3-latency": _s3_latency,
    "batch-describe": _batch_describe,
    "iam-authorization": _iam_authorization,
    "sfn-credentials": _sfn_credentials,
    "s3-direct-get": _s3_direct_get,
    "execution-events": _execution_events,
    "response-enrichment": _response_enrichment,
    "batch-describe-jobs": _batch_describe_jobs,
    "batch-service-rules": _batch_service_rules,
    "sfn-batch-parameters": _sfn_batch_parameters,
    "glue-version-id": _glue_version_id,
}


def probe(patch: patch_registry.Patch) -> Verdict:
    """Whether moto, as installed and unpatched, still needs ``patch``."""
    missing = []
    for path in patch.replaces:
        if path.startswith("("):
            continue
        try:
            _resolve(path)
        except (ImportError, AttributeError):
            missing.append(path)
    if missing:
        return Verdict(patch.id, "review", f"moto no longer has {', '.join(missing)}: re-target the patch")
    try:
        needed, evidence = PROBES[patch.id]()
    except Exception as error:
        return Verdict(patch.id, "review", f"the probe failed: {type(error).__name__}: {error}")
    return Verdict(patch.id, "needed" if needed else "gone", evidence)


def probe_all() -> list[Verdict]:
    return [probe(p) for p in patch_registry.PATCHES]
