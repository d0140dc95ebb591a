"""Each moto patch, on a running local cloud (the pinned moto only). Which test shows which patch is in
``localcloud.patch_registry``; ``test_patch_registry.py`` runs each with its patch off."""

from __future__ import annotations

import gc
import importlib.metadata
import json
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from batch_queues import fair_share_queue, quick_definition
from botocore.exceptions import ClientError

from localcloud import patches
from localcloud.deployer import ACCOUNT, REGION
from seqlake.base import limits


def test_refuses_another_moto_version(monkeypatch: pytest.MonkeyPatch) -> None:
    patches.check_moto_version()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "5.2.4")
    with pytest.raises(RuntimeError, match=f"moto {patches.MOTO_VERSION}"):
        patches.check_moto_version()


def test_the_moto_release_patched_is_the_distributions_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    """localcloud/pyproject.toml's pin is the one home of moto's version (the check above reads it)."""
    component = tomllib.loads((Path(__file__).resolve().parents[2] / "localcloud" / "pyproject.toml").read_text())
    (pin,) = [d for d in component["project"]["dependencies"] if d.startswith("moto")]
    assert patches.MOTO_VERSION == patches.pinned_moto() == pin.split("==")[1]
    monkeypatch.setattr(importlib.metadata, "requires", lambda name: ["boto3==1.0", "moto[s3]==9.9.9 ; extra == 'x'"])
    assert patches.pinned_moto() == "9.9.9"
    monkeypatch.setattr(importlib.metadata, "requires", lambda name: ["boto3==1.0"])
    with pytest.raises(RuntimeError, match="pins no moto release"):
        patches.pinned_moto()


def _put(cloud: Any, key: str, body: bytes) -> None:
    cloud.client("s3").put_object(Bucket=cloud.bucket, Key=key, Body=body)


def test_s3_ranged_get_reads_only_the_range(fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's route for a ranged GET (the s3-ranged-get patch): the local server's direct answer (s3-direct-get,
    which cuts ranges the same way and has its own test) is kept out of the way, or it would answer them all."""
    monkeypatch.setattr(patches, "answer_get_object", lambda method, path, headers: None)
    body = bytes(range(256)) * 4096  # 1 MiB, every offset distinguishable modulo 256
    _put(fixture_cloud, "data/blob.bin", body)
    s3 = fixture_cloud.client("s3")

    def get(rng: str) -> tuple[bytes, str]:
        r = s3.get_object(Bucket=fixture_cloud.bucket, Key="data/blob.bin", Range=rng)
        return r["Body"].read(), r.get("ContentRange", "")

    reads: list[tuple[int, int]] = []
    original = patches._KeyRange._read

    def counting(view: Any, at: int, n: int) -> bytes:
        data: bytes = original(view, at, n)
        reads.append((at, len(data)))
        return data

    monkeypatch.setattr(patches._KeyRange, "_read", counting)
    assert get("bytes=1000-1999") == (body[1000:2000], f"bytes 1000-1999/{len(body)}")
    assert reads == [(1000, 1000)]  # the server read 1000 bytes of the buffer, not the 1 MiB object
    # a large range is streamed: the server holds one chunk of the buffer at a time, not the rest of it
    big = bytes(range(256)) * (3 * 4096 + 7)
    _put(fixture_cloud, "data/big.bin", big)
    reads.clear()
    r = s3.get_object(Bucket=fixture_cloud.bucket, Key="data/big.bin", Range="bytes=10-")
    assert r["Body"].read() == big[10:] and r["ContentLength"] == len(big) - 10
    assert [n for _, n in reads] == [1 << 20] * 3 + [len(big) - 10 - 3 * (1 << 20)]
    assert [at for at, _ in reads] == [10 + i * (1 << 20) for i in range(4)]
    assert get("bytes=-10")[0] == body[-10:]
    assert get(f"bytes={len(body) - 5}-")[0] == body[-5:]
    assert get("bytes=0-1,5-6")[0] == body  # multi-range: S3 (and moto) answer with the whole object
    assert s3.get_object(Bucket=fixture_cloud.bucket, Key="data/blob.bin")["Body"].read() == body
    with pytest.raises(ClientError, match="InvalidRange"):
        get(f"bytes={len(body)}-")


def test_s3_bodies_stay_on_disk(fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A multipart upload completes into a spool the key adopts (never the whole object in memory), with
    moto's ETag and checksum; a whole-object GET is streamed a MiB at a time."""
    from moto.moto_server.werkzeug_app import BackendRequest
    from moto.s3.models import FakeMultipart, s3_backends
    from moto.s3.utils import compute_checksum

    part = 5 << 20  # S3's smallest part but the last
    body = bytes(range(256)) * ((2 * part + 12345) // 256)
    s3, bucket, key = fixture_cloud.client("s3"), fixture_cloud.bucket, "data/multipart.bin"
    joined: list[int] = []

    def complete(*args: Any) -> Any:
        joined.append(1)
        return patches._complete_multipart(*args)

    monkeypatch.setattr(FakeMultipart, "complete", complete)
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    gc.disable()  # what Flask's reference cycles keep until a collection: no part's body
    try:
        etags = [s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=n + 1,
                                Body=body[n * part: (n + 1) * part])["ETag"] for n in range(3)]
        kept = [r for r in gc.get_objects() if isinstance(r, BackendRequest)
                and any(len(r.__dict__.get(name) or b"") >= part for name in ("_cached_data", "data"))]
    finally:
        gc.enable()
    assert kept == []
    done = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={
        "Parts": [{"ETag": e, "PartNumber": n + 1} for n, e in enumerate(etags)]})
    assert joined == [1]
    stored = s3_backends[ACCOUNT]["aws"].get_bucket(bucket).keys[key]
    assert stored._value_buffer._rolled  # on disk, not in memory
    assert stored.size == len(body)
    # moto's own ETag (MD5 of the parts' MD5s) and full-object checksum
    import hashlib

    md5s = b"".join(hashlib.md5(body[n * part: (n + 1) * part]).digest() for n in range(3))
    assert done["ETag"].strip('"') == f"{hashlib.md5(md5s).hexdigest()}-3"
    assert stored.checksum_value == compute_checksum(body, "CRC64NVME").decode()
    # the whole object back, streamed from the buffer a MiB at a time
    reads: list[int] = []
    original = patches._KeyRange._read

    def counting(view: Any, at: int, n: int) -> bytes:
        reads.append(n)
        data: bytes = original(view, at, n)
        return data

    monkeypatch.setattr(patches._KeyRange, "_read", counting)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body
    assert max(reads) == 1 << 20 and sum(reads) == len(body)
    # a composite checksum, part by part, as moto computes it
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")["UploadId"]
    tail = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=body[:100])
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={
        "Parts": [{"ETag": tail["ETag"], "PartNumber": 1}]})
    stored = s3_backends[ACCOUNT]["aws"].get_bucket(bucket).keys[key]
    expected = compute_checksum(compute_checksum(body[:100], "SHA256", encode_base64=False), "SHA256").decode()
    assert (stored.checksum_type, stored.checksum_value, stored.value) == ("COMPOSITE", expected, body[:100])


def test_lambda_invoke_runs_the_real_handler(fixture_cloud: Any) -> None:
    _put(fixture_cloud, "data/plan-me.txt", b"7\nsome words\n")
    lam = fixture_cloud.client("lambda")
    name = next(n for n in fixture_cloud.lambdas.functions if n.endswith("PlanFunction"))
    event = {"uri": f"s3://{fixture_cloud.bucket}/data/plan-me.txt", "run_id": "r"}
    out = lam.invoke(FunctionName=name, Payload=json.dumps(event).encode())
    assert "FunctionError" not in out
    assert json.loads(out["Payload"].read()) == {"shards": 7, "run_id": "r", "uri": event["uri"]}
    # a handler error comes back as Lambda's error payload (what Step Functions' Catch matches on)
    missing = {"uri": f"s3://{fixture_cloud.bucket}/data/missing.txt", "run_id": "r"}
    bad = lam.invoke(FunctionName=name, Payload=json.dumps(missing).encode())
    assert bad["FunctionError"] == "Unhandled"
    assert json.loads(bad["Payload"].read())["errorType"] == "NoSuchKey"


def _wait_job(batch: Any, job_id: str) -> dict[str, Any]:
    for _ in range(300):
        job: dict[str, Any] = batch.describe_jobs(jobs=[job_id])["jobs"][0]
        if job["status"] in ("SUCCEEDED", "FAILED"):
            return job
        time.sleep(0.1)
    raise AssertionError("job did not finish")


def test_batch_submit_runs_children_and_refuses_array_of_one(fixture_cloud: Any) -> None:
    batch = fixture_cloud.client("batch")
    queue = batch.describe_job_queues()["jobQueues"][0]["jobQueueArn"]
    jd = batch.describe_job_definitions()["jobDefinitions"][0]["jobDefinitionArn"]
    _put(fixture_cloud, "data/words.txt", b"2\na b\nc d e\n")
    env = [
        {"name": "RUN_ID", "value": "direct"},
        {"name": "INPUT_URI", "value": f"s3://{fixture_cloud.bucket}/data/words.txt"},
    ]
    with pytest.raises(ClientError, match="Array size 1"):
        batch.submit_job(jobName="one", jobQueue=queue, jobDefinition=jd, arrayProperties={"size": 1})
    job_id = batch.submit_job(
        jobName="two",
        jobQueue=queue,
        jobDefinition=jd,
        arrayProperties={"size": 2},
        containerOverrides={"environment": env},
    )["jobId"]
    job = _wait_job(batch, job_id)
    assert job["status"] == "SUCCEEDED"
    assert job["arrayProperties"]["statusSummary"]["SUCCEEDED"] == 2
    keys = fixture_cloud.client("s3").list_objects_v2(
        Bucket=fixture_cloud.bucket, Prefix="results/counts/run_id=direct/"
    )["Contents"]
    assert len(keys) == 2
    # describing a job (the array's parent, its children) never changes it: each description is the same
    first = batch.describe_jobs(jobs=[job_id, f"{job_id}:0", f"{job_id}:1"])["jobs"]
    for _ in range(3):
        batch.describe_jobs(jobs=[job_id, f"{job_id}:0", f"{job_id}:1"])
    again = batch.describe_jobs(jobs=[job_id, f"{job_id}:0", f"{job_id}:1"])["jobs"]
    assert [j["container"]["environment"] for j in again] == [j["container"]["environment"] for j in first]
    names = [e["name"] for e in again[0]["container"]["environment"]]
    assert names.count("AWS_BATCH_JOB_ID") == 1 and names.count("RUN_ID") == 1, names


def test_event_rule_delivers_only_matching_uploads(fixture_cloud: Any) -> None:
    sfn = fixture_cloud.client("stepfunctions")
    before = {e["name"] for e in sfn.list_executions(stateMachineArn=fixture_cloud.state_machine_arn)["executions"]}
    fixture_cloud.prewarm()
    _put(fixture_cloud, "other/x.txt", b"2\na\n")  # wrong prefix
    _put(fixture_cloud, "incoming/x.csv", b"2\na\n")  # wrong suffix
    _put(fixture_cloud, "incoming/evt.txt", b"2\na b\nc\n")  # matches incoming/*.txt
    finished = fixture_cloud.wait(timeout=120)
    names = {e["name"] for e in sfn.list_executions(stateMachineArn=fixture_cloud.state_machine_arn)["executions"]}
    assert names - before == {"evt"}
    assert [e.status for e in finished if e.name == "evt"] == ["SUCCEEDED"]


def test_sfn_batch_sync_integration_and_athena(fixture_cloud: Any) -> None:
    # the Fanout state is batch:submitJob.sync: it fails with States.Runtime without the normalisation patch
    fixture_cloud.prewarm()
    _put(fixture_cloud, "incoming/sync.txt", b"3\none two\nthree\nfour five six\n")
    (run,) = [e for e in fixture_cloud.wait(timeout=120) if e.name == "sync"]
    assert run.status == "SUCCEEDED", run.cause
    assert run.states == ["Plan", "Fanout", "Commit", "Done"]
    athena = fixture_cloud.client("athena")
    qid = athena.start_query_execution(
        QueryString="SELECT sum(words) AS w, count(*) AS n FROM counts WHERE run_id = 'sync'"
    )["QueryExecutionId"]
    rows = athena.get_query_results(QueryExecutionId=qid)["ResultSet"]["Rows"]
    assert [[c.get("VarCharValue") for c in r["Data"]] for r in rows] == [["w", "n"], ["6", "3"]]
    with pytest.raises(ClientError, match="InvalidRequestException"):
        athena.start_query_execution(QueryString="SELECT FROM WHERE")


def test_sync_wait_is_woken_by_batch_and_never_misses_a_wake(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    patches.apply_all()  # as the local cloud's start applies it (this test needs no cloud)
    monkeypatch.setattr(patches, "SYNC_POLL_SECONDS", 30.0)
    monkeypatch.setattr(patches.HOOKS, "batch_run", lambda parent, children: None)
    sleep = patches.SyncCallbackModule.time.sleep
    sleep(0.5)  # a thread's first wait returns at once: it cannot know what it has seen
    timer = threading.Timer(0.3, patches.wake_sync_waiters)
    t0 = time.monotonic()
    timer.start()
    sleep(3.0)  # moto's own sleep would take all of it
    woke = time.monotonic() - t0
    assert 0.25 < woke < 2, woke  # woken by the runner, not by the 30 s fallback nor after the 3 s asked
    patches.wake_sync_waiters()  # a job stopped between the interpreter's poll and its sleep
    t0 = time.monotonic()
    sleep(3.0)
    assert time.monotonic() - t0 < 1
    monkeypatch.setattr(patches.HOOKS, "batch_run", None)  # no runner to wake it: moto's own interval
    t0 = time.monotonic()
    sleep(0.2)
    assert 0.15 < time.monotonic() - t0 < 5


def test_botocore_sessions_share_one_loader() -> None:
    """The local cloud's process parses each service model once (``localcloud/botocore_loader.py``)."""
    import boto3
    import botocore.session

    from localcloud import botocore_loader

    assert botocore_loader.shared()  # importing the patches module shared it, before moto's imports
    a, b = botocore.session.get_session(), boto3.session.Session()._session
    assert a.get_component("data_loader") is b.get_component("data_loader")


def test_server_lookups_list_moto_once_and_keep_one_loader(fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch 8: the host check's list of moto's services is made once; moto keeps one model loader
    (its own class, which applies moto's model extras)."""
    import os

    import moto.backends
    import moto.core.loaders
    import moto.core.utils

    expected = tuple(patches._list_of_moto_modules())
    assert "s3" in expected and "stepfunctions" in expected

    def no_listdir(path: Any) -> list[str]:
        raise AssertionError(f"moto's folder listed again: {path}")

    monkeypatch.setattr(os, "listdir", no_listdir)
    assert moto.backends.list_of_moto_modules() == expected
    loader = moto.core.utils.create_loader()
    assert loader is moto.core.utils.create_loader()
    assert isinstance(loader, moto.core.loaders.Loader)
    # the server still answers (each request goes through the host check)
    assert fixture_cloud.client("s3").list_buckets()["Buckets"]


def test_server_lookups_match_a_host_once_and_find_registered_backends_at_once(
    fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Patch 8: a host name is matched against moto's URL patterns once; a registered account's backends
    are returned without the reset registry's comparisons; a reset still empties them; no CORS headers."""
    import http.client

    from moto.core.base_backend import BackendDict
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    from moto.s3.models import s3_backends

    dispatcher = DomainDispatcherApplication(lambda service: None)
    assert dispatcher.get_backend_for_host("s3.us-east-1.amazonaws.com") == "s3"
    dispatcher.backend_url_patterns = []  # matched already: the patterns are not read again
    assert dispatcher.get_backend_for_host("s3.us-east-1.amazonaws.com") == "s3"
    assert dispatcher.get_backend_for_host("moto_api") == "moto_api"

    backend = s3_backends[ACCOUNT]
    monkeypatch.setattr(BackendDict, "_instances", None)  # the registry is not looked at for a registered account
    assert s3_backends[ACCOUNT] is backend
    monkeypatch.undo()
    s3 = fixture_cloud.client("s3")
    s3.create_bucket(Bucket="patch-8-bucket")
    host, port = fixture_cloud.endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/moto-api/no-such-page", headers={"Origin": "http://example.org"})  # a browser's request
    answer = conn.getresponse()
    answer.read()
    conn.close()
    assert answer.status == 404 and answer.getheader("Access-Control-Allow-Origin") is None
    assert "patch-8-bucket" in s3_backends[ACCOUNT]["aws"].buckets
    s3.delete_bucket(Bucket="patch-8-bucket")
    assert "patch-8-bucket" not in s3_backends[ACCOUNT]["aws"].buckets


# ---------------------------------------------------------------- 9. AWS's limits
SFN_LIMIT = limits.SFN_PAYLOAD.value


def _finished(sfn: Any, arn: str) -> dict[str, Any]:
    for _ in range(600):
        ex: dict[str, Any] = sfn.describe_execution(executionArn=arn)
        if ex["status"] != "RUNNING":
            return ex
        time.sleep(0.1)
    raise AssertionError("the execution did not finish")


def _machine(cloud: Any, name: str, catch: list[str]) -> str:
    """A Task whose Parameters double its input, caught by ``catch``."""
    plan = next(f for f in cloud.lambdas.functions.values() if f.name.endswith("PlanFunction"))
    definition = {
        "StartAt": "Doubled",
        "States": {
            "Doubled": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": plan.arn, "Payload": {"a.$": "$.pad", "b.$": "$.pad"}},
                "Catch": [{"ErrorEquals": catch, "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Pass", "End": True},
        },
    }
    sfn = cloud.client("stepfunctions")
    role = f"arn:aws:iam::{ACCOUNT}:role/any"
    arn: str = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=role)["stateMachineArn"]
    return arn


def test_step_functions_refuses_an_execution_input_over_the_limit(fixture_cloud: Any) -> None:
    sfn = fixture_cloud.client("stepfunctions")
    arn = _machine(fixture_cloud, "limit-input", ["States.ALL"])
    frame = len(json.dumps({"pad": ""}, separators=(",", ":")))
    at_limit = json.dumps({"pad": "x" * (SFN_LIMIT - frame)}, separators=(",", ":"))
    assert len(at_limit) == SFN_LIMIT
    with pytest.raises(ClientError, match="ValidationException"):
        sfn.start_execution(stateMachineArn=arn, name="over", input=at_limit[:-2] + 'é"}')  # one byte over, in UTF-8
    started = sfn.start_execution(stateMachineArn=arn, name="at", input=at_limit)["executionArn"]
    # its Task's input after Parameters is twice the limit: the run fails, States.ALL does not catch it
    failed = _finished(sfn, started)
    assert (failed["status"], failed["error"]) == ("FAILED", "States.DataLimitExceeded"), failed


def test_data_limit_is_caught_only_when_named(fixture_cloud: Any) -> None:
    sfn = fixture_cloud.client("stepfunctions")
    body = json.dumps({"pad": "x" * (SFN_LIMIT // 2 + 10)})  # the input fits; twice it does not
    for catch, status in ((["States.ALL"], "FAILED"), (["States.DataLimitExceeded"], "SUCCEEDED")):
        arn = _machine(fixture_cloud, f"limit-catch-{len(catch[0])}", catch)
        ex = _finished(sfn, sfn.start_execution(stateMachineArn=arn, input=body)["executionArn"])
        assert ex["status"] == status, (catch, ex)
    # and a Parameters result within the limit runs the task (here: the fixture's plan function fails on
    # the padded event, which States.ALL catches as usual)
    arn = _machine(fixture_cloud, "limit-small", ["States.ALL"])
    ex = _finished(sfn, sfn.start_execution(stateMachineArn=arn, input=json.dumps({"pad": "x"}))["executionArn"])
    assert ex["status"] == "SUCCEEDED"


def test_an_execution_end_is_put_on_the_default_bus_as_aws_reports_it(fixture_cloud: Any) -> None:
    """Patch 16: an execution that fails with an error no Catch catches (its Task's input over the limit)
    reaches a rule on the default bus as Step Functions' ``Execution Status Change``, with its error and cause."""
    from seqlake.aws.events import EXECUTION_STATUS_DETAIL_TYPE, ExecutionEnd

    sfn, sqs, events = (fixture_cloud.client(s) for s in ("stepfunctions", "sqs", "events"))
    arn = _machine(fixture_cloud, "end-event", ["States.ALL"])
    url = sqs.create_queue(QueueName="execution-ends")["QueueUrl"]
    queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    pattern = {"source": ["aws.states"], "detail-type": [EXECUTION_STATUS_DETAIL_TYPE],
               "detail": {"stateMachineArn": [arn]}}
    events.put_rule(Name="execution-ends", EventPattern=json.dumps(pattern))
    events.put_targets(Rule="execution-ends", Targets=[{"Id": "ends", "Arn": queue}])
    body = json.dumps({"pad": "x" * (SFN_LIMIT // 2 + 10)})
    ex = _finished(sfn, sfn.start_execution(stateMachineArn=arn, input=body)["executionArn"])
    received: list[dict[str, Any]] = []
    for _ in range(100):  # the event is put as the execution ends, before its status is read
        received += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if received:
            break
        time.sleep(0.1)
    [event] = [json.loads(m["Body"]) for m in received]
    detail = event["detail"]
    assert event["source"] == "aws.states" and event["resources"] == [ex["executionArn"]]
    assert detail["status"] == "FAILED" == ex["status"] and detail["error"] == "States.DataLimitExceeded"
    assert detail["cause"] == ex["cause"] and detail["executionArn"] == ex["executionArn"]
    assert json.loads(detail["input"]) == json.loads(body) and detail["output"] is None
    end = ExecutionEnd.from_event(event)
    assert end.started == ex["startDate"] and end.stopped is not None and end.seconds is not None


def test_an_execution_end_is_pending_until_its_event_is_handed_on() -> None:
    """A waiter that sees an execution ended also sees its event pending (or delivered): never neither."""
    from localcloud.hooks import ExecutionEnds

    activity = threading.Event()
    ends = ExecutionEnds(activity)
    seen: list[tuple[str, int]] = []
    ends.put = lambda execution: seen.append(("put", ends.pending))  # type: ignore[method-assign]
    ends(object(), lambda: seen.append(("ended", ends.pending)))
    assert seen == [("ended", 1), ("put", 1)] and ends.pending == 0 and activity.is_set()


def test_lambda_refuses_requests_over_its_limits(fixture_cloud: Any) -> None:
    lam = fixture_cloud.client("lambda")
    name = next(n for n in fixture_cloud.lambdas.functions if n.endswith("PlanFunction"))
    sync_over = json.dumps({"pad": "x" * limits.LAMBDA_SYNC_REQUEST.value}).encode()
    with pytest.raises(ClientError, match="RequestEntityTooLargeException"):
        lam.invoke(FunctionName=name, Payload=sync_over)
    async_over = json.dumps({"pad": "x" * limits.LAMBDA_ASYNC_REQUEST.value}).encode()
    with pytest.raises(ClientError, match="RequestEntityTooLargeException"):
        lam.invoke(FunctionName=name, Payload=async_over, InvocationType="Event")


def test_lambda_response_over_the_limit_is_a_function_error(
    fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lam = fixture_cloud.client("lambda")
    name = next(n for n in fixture_cloud.lambdas.functions if n.endswith("PlanFunction"))
    # the runner (not under test here) answers with a response one byte over the limit
    big = b'"' + b"x" * (limits.LAMBDA_RESPONSE.value - 1) + b'"'
    monkeypatch.setattr(patches.HOOKS, "lambda_invoke", lambda fn, payload, is_async: (big, False))
    out = lam.invoke(FunctionName=name, Payload=b"{}")
    assert out["FunctionError"] == "Unhandled"
    assert json.loads(out["Payload"].read())["errorType"] == "Function.ResponseSizeTooLarge"
    # (moto's own check refuses responses over 6,000,000 bytes, a little under AWS's 6 MB: a response
    # of 5 MB passes both)
    fits = b'"' + b"x" * (5 << 20) + b'"'
    monkeypatch.setattr(patches.HOOKS, "lambda_invoke", lambda fn, payload, is_async: (fits, False))
    ok = lam.invoke(FunctionName=name, Payload=b"{}")
    assert "FunctionError" not in ok and len(ok["Payload"].read()) == len(fits)


def test_batch_refuses_arrays_over_ten_thousand_and_requests_over_30_kib(fixture_cloud: Any) -> None:
    batch = fixture_cloud.client("batch")
    queue = batch.describe_job_queues()["jobQueues"][0]["jobQueueArn"]
    jd = batch.describe_job_definitions()["jobDefinitions"][0]["jobDefinitionArn"]
    with pytest.raises(ClientError, match=f"Array size {limits.BATCH_ARRAY_MAX.value + 1} is outside"):
        batch.submit_job(jobName="big", jobQueue=queue, jobDefinition=jd,
                         arrayProperties={"size": limits.BATCH_ARRAY_MAX.value + 1})
    env = [{"name": "PAD", "value": "x" * limits.BATCH_SUBMIT_JOB.value}]
    with pytest.raises(ClientError, match="job payload limit"):
        batch.submit_job(jobName="fat", jobQueue=queue, jobDefinition=jd, containerOverrides={"environment": env})


# ---------------------------------------------------------------- Batch's service-side rules (localcloud.rules)
def test_batch_holds_a_fair_share_queue_to_its_share_identifier_and_priority(fixture_cloud: Any) -> None:
    """moto took a fair-share queue's job with no share identifier and no priority (AWS refuses both) and dropped a
    job definition's schedulingPriority, so the priority the template gives could not count."""
    from localcloud import rules

    batch = fixture_cloud.client("batch")
    queue = fair_share_queue(batch, "patch-fair-share")
    plain = quick_definition(batch, "patch-unprioritised")
    with pytest.raises(ClientError, match=rules.NO_SHARE_IDENTIFIER):
        batch.submit_job(jobName="no-share", jobQueue=queue, jobDefinition=plain)
    with pytest.raises(ClientError, match="Either schedulingPriority"):
        batch.submit_job(jobName="no-priority", jobQueue=queue, jobDefinition=plain, shareIdentifier="a")
    prioritised = quick_definition(batch, "patch-prioritised", schedulingPriority=1)
    assert batch.submit_job(jobName="kept", jobQueue=queue, jobDefinition=prioritised, shareIdentifier="a")["jobId"]


def test_a_state_machines_submit_job_passes_every_parameter(fixture_cloud: Any) -> None:
    """Step Functions passes a batch:submitJob task's ShareIdentifier and SchedulingPriorityOverride; moto's
    interpreter dropped them, so the fair-share queue refused the submission AWS takes."""
    batch = fixture_cloud.client("batch")
    queue = fair_share_queue(batch, "patch-sfn-fair-share")
    plain = quick_definition(batch, "patch-sfn-unprioritised")
    definition = {"StartAt": "Submit", "States": {"Submit": {
        "Type": "Task", "Resource": "arn:aws:states:::batch:submitJob",
        "Parameters": {"JobName": "fair", "JobQueue": queue, "JobDefinition": plain, "ShareIdentifier": "a",
                       "SchedulingPriorityOverride": 1},
        "End": True}}}
    sfn = fixture_cloud.client("stepfunctions")
    # the fixture's state machine role (IAM is enforced) may submit to this queue too
    role = sfn.describe_state_machine(stateMachineArn=fixture_cloud.state_machine_arn)["roleArn"]
    grant = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "batch:SubmitJob",
                                                     "Resource": queue}]}
    fixture_cloud.client("iam").put_role_policy(RoleName=role.rsplit("/", 1)[1], PolicyName="patch-sfn-fair-share",
                                                PolicyDocument=json.dumps(grant))
    machine = sfn.create_state_machine(name="patch-sfn-fair-share", definition=json.dumps(definition),
                                       roleArn=role)["stateMachineArn"]
    ex = _finished(sfn, sfn.start_execution(stateMachineArn=machine)["executionArn"])
    assert ex["status"] == "SUCCEEDED", ex.get("cause") or ex.get("error")


# ---------------------------------------------------------------- 10. S3 latency
def test_s3_latency_delays_every_request_when_set(fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(patches, "_sleep", slept.append)
    s3 = fixture_cloud.client("s3")
    monkeypatch.delenv(patches.s3_latency_var(), raising=False)
    s3.list_objects_v2(Bucket=fixture_cloud.bucket)
    assert slept == []  # off by default
    monkeypatch.setenv(patches.s3_latency_var(), str(limits.S3_SCALE_LATENCY_MS.value))
    _put(fixture_cloud, "data/late.txt", b"x")
    s3.head_object(Bucket=fixture_cloud.bucket, Key="data/late.txt")
    s3.get_object(Bucket=fixture_cloud.bucket, Key="data/late.txt")["Body"].read()
    assert slept == [limits.S3_SCALE_LATENCY_MS.value / 1000] * 3


def test_the_mirror_reads_what_the_api_serves(fixture_cloud: Any) -> None:
    """The mirror reads moto's S3 backend directly: it must see exactly the current objects the API lists
    (deleted keys of the versioned bucket left out, overwritten keys at their latest body)."""
    from localcloud.mirror import bucket_objects

    s3 = fixture_cloud.client("s3")
    for i in range(3):
        _put(fixture_cloud, f"mirror-check/{i}.bin", bytes([i]) * (i + 1))
    _put(fixture_cloud, "mirror-check/1.bin", b"second version")
    s3.delete_object(Bucket=fixture_cloud.bucket, Key="mirror-check/2.bin")
    listed = {
        o["Key"]: (o["ETag"].strip('"'), o["Size"])
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=fixture_cloud.bucket)
        for o in page.get("Contents", [])
    }
    mirrored = {key: (meta, b"".join(body())) for key, meta, body in bucket_objects(fixture_cloud.bucket)}
    assert {k: (m.etag, m.size) for k, (m, _) in mirrored.items()} == listed
    assert "mirror-check/2.bin" not in mirrored
    for key in ("mirror-check/0.bin", "mirror-check/1.bin"):
        assert mirrored[key][1] == s3.get_object(Bucket=fixture_cloud.bucket, Key=key)["Body"].read()


def _role(cloud: Any, logical_id: str) -> str:
    from localcloud import iam

    return iam.role_arn(str(cloud.deployment.physical[logical_id]))


class _CountingBuffer:
    """An object's buffer that records the size of every read of it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.reads = inner, list[int]()

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.inner.read(n)
        self.reads.append(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_s3_copies_stay_on_disk(fixture_cloud: Any) -> None:
    """Patch 12: a copy (CopyObject, UploadPartCopy) reads its source a MiB at a time into a spool the new
    key or part adopts, never the whole object into the server's memory."""
    from moto.s3.models import s3_backends

    part = 5 << 20
    body = bytes(range(256)) * ((2 * part + 12345) // 256)
    s3, bucket = fixture_cloud.client("s3"), fixture_cloud.bucket
    _put(fixture_cloud, "data/source.bin", body)
    keys = s3_backends[ACCOUNT]["aws"].get_bucket(bucket).keys
    source = keys["data/source.bin"]
    counting = _CountingBuffer(source._value_buffer)
    source._value_buffer = counting
    try:
        s3.copy_object(Bucket=bucket, Key="data/copy.bin", CopySource={"Bucket": bucket, "Key": "data/source.bin"})
        assert counting.reads and max(counting.reads) <= 1 << 20 and sum(counting.reads) == len(body)
        copied = keys["data/copy.bin"]
        assert copied._value_buffer._rolled and copied.size == len(body)  # on disk, as the source
        assert s3.get_object(Bucket=bucket, Key="data/copy.bin")["Body"].read() == body
        counting.reads.clear()
        upload = s3.create_multipart_upload(Bucket=bucket, Key="data/parts.bin")["UploadId"]
        ranges = [(0, part - 1), (part, len(body) - 1)]
        etags = [s3.upload_part_copy(Bucket=bucket, Key="data/parts.bin", UploadId=upload, PartNumber=n + 1,
                                     CopySource={"Bucket": bucket, "Key": "data/source.bin"},
                                     CopySourceRange=f"bytes={a}-{b}")["CopyPartResult"]["ETag"]
                 for n, (a, b) in enumerate(ranges)]
        assert max(counting.reads) <= 1 << 20 and sum(counting.reads) == len(body)
    finally:
        source._value_buffer = counting.inner
    s3.complete_multipart_upload(Bucket=bucket, Key="data/parts.bin", UploadId=upload, MultipartUpload={
        "Parts": [{"ETag": e, "PartNumber": n + 1} for n, e in enumerate(etags)]})
    assert s3.get_object(Bucket=bucket, Key="data/parts.bin")["Body"].read() == body


def test_a_repeated_complete_waits_and_gets_the_object(fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch 12: a CompleteMultipartUpload sent again while the first still joins the parts (a client's retry
    after its read timeout) waits for it and gets the same object, not the parts the first has closed."""
    from moto.s3.models import s3_backends

    s3, bucket = fixture_cloud.client("s3"), fixture_cloud.bucket
    parts = [bytes([7]) * (5 << 20), b"tail"]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="data/twice.bin")["UploadId"]
    etags = [s3.upload_part(Bucket=bucket, Key="data/twice.bin", UploadId=upload, PartNumber=n + 1,
                            Body=body)["ETag"] for n, body in enumerate(parts)]
    joining = threading.Event()
    slow_chunks = patches.key_chunks

    def slowly(key: Any) -> Iterator[bytes]:  # the first request still joining when the second comes
        joining.set()
        time.sleep(0.3)
        yield from slow_chunks(key)

    monkeypatch.setattr(patches, "key_chunks", slowly)
    backend = s3_backends[ACCOUNT]["aws"]
    made: list[Any] = []
    failed: list[BaseException] = []

    def complete() -> None:
        try:
            made.append(backend.complete_multipart_upload(bucket, upload, iter([(1, etags[0]), (2, etags[1])])))
        except BaseException as exc:  # reported below
            failed.append(exc)

    first = threading.Thread(target=complete)
    first.start()
    assert joining.wait(10)
    second = threading.Thread(target=complete)
    second.start()
    first.join(30)
    second.join(30)
    assert not failed, failed
    assert len(made) == 2 and made[0].etag == made[1].etag
    assert s3.get_object(Bucket=bucket, Key="data/twice.bin")["Body"].read() == b"".join(parts)


def test_iam_authorization_decides_the_local_servers_requests(fixture_cloud: Any) -> None:
    """Patch 13: a role's request is decided on the resource it touches (moto checks "*" outside S3, SQS,
    IAM and STS) and refused with AWS's message; a Lambda GET passes its signature check."""
    if not fixture_cloud.iam.enforce:
        pytest.skip("IAM enforcement is off")
    role = _role(fixture_cloud, "PlanFunctionRole")
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/{role.rsplit('/', 1)[1]}/seqlake-local"
    _put(fixture_cloud, "data/iam.txt", b"x")
    s3 = fixture_cloud.iam.client(role, "s3")
    assert s3.get_object(Bucket=fixture_cloud.bucket, Key="data/iam.txt")["Body"].read() == b"x"  # S3ReadPolicy
    # S3's requests are judged by IAM's action names, not the API's (moto 5.2.6 names them by the API operation):
    # a listing is s3:ListBucket, a HEAD s3:GetObject, a multipart upload's start s3:PutObject
    listed = s3.list_objects_v2(Bucket=fixture_cloud.bucket, Prefix="data/iam")["Contents"]
    assert [o["Key"] for o in listed] == ["data/iam.txt"]
    assert s3.head_object(Bucket=fixture_cloud.bucket, Key="data/iam.txt")["ContentLength"] == 1
    with pytest.raises(ClientError, match=r"not authorized to perform: s3:PutObject on resource"):
        s3.create_multipart_upload(Bucket=fixture_cloud.bucket, Key="data/iam-multipart.bin")
    with pytest.raises(ClientError) as put:
        s3.put_object(Bucket=fixture_cloud.bucket, Key="data/iam.txt", Body=b"y")
    assert put.value.response["Error"] == {
        "Code": "AccessDenied",
        "Message": f"User: {session} is not authorized to perform: s3:PutObject on resource: "
                   f"arn:aws:s3:::{fixture_cloud.bucket}/data/iam.txt because no identity-based policy allows "
                   "the s3:PutObject action",
    } | {k: v for k, v in put.value.response["Error"].items() if k not in ("Code", "Message")}
    with pytest.raises(ClientError) as glue:
        fixture_cloud.iam.client(role, "glue").get_table(DatabaseName="seqlake", Name="counts")
    assert glue.value.response["Error"]["Code"] == "AccessDeniedException"
    assert f"glue:GetTable on resource: arn:aws:glue:us-east-1:{ACCOUNT}:catalog " in str(glue.value)
    # the commit's role may register a partition of its table (catalog, database and table all allowed)
    commit = fixture_cloud.iam.client(_role(fixture_cloud, "CommitFunctionRole"), "glue")
    commit.batch_create_partition(DatabaseName="seqlake", TableName="counts", PartitionInputList=[
        {"Values": ["iam"], "StorageDescriptor": {"Location": f"s3://{fixture_cloud.bucket}/results/counts/run_id=iam/"}}])
    name = next(iter(fixture_cloud.lambdas.functions))
    assert fixture_cloud.client("lambda").get_function_configuration(FunctionName=name)["FunctionName"] == name
    assert fixture_cloud.iam.denied[-1] == (session, "glue:GetTable", f"arn:aws:glue:us-east-1:{ACCOUNT}:catalog")


def test_iam_authorization_sees_a_policy_change_at_once(fixture_cloud: Any) -> None:
    """Patch 13's policies are parsed once per text: a role's policy changed (added, then replaced) decides
    the very next request."""
    if not fixture_cloud.iam.enforce:
        pytest.skip("IAM enforcement is off")
    from moto.iam.models import iam_backends

    role = _role(fixture_cloud, "PlanFunctionRole")
    name = role.rsplit("/", 1)[1]
    _put(fixture_cloud, "data/changing.txt", b"x")
    s3 = fixture_cloud.iam.client(role, "s3")
    iam = iam_backends[ACCOUNT]["aws"]

    def policy(effect: str) -> str:
        return json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": effect, "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{fixture_cloud.bucket}/data/*"}]})

    assert s3.get_object(Bucket=fixture_cloud.bucket, Key="data/changing.txt")["Body"].read() == b"x"
    try:
        iam.put_role_policy(name, "test-change", policy("Deny"))
        with pytest.raises(ClientError, match="explicit deny"):
            s3.get_object(Bucket=fixture_cloud.bucket, Key="data/changing.txt")
        iam.put_role_policy(name, "test-change", policy("Allow"))
        assert s3.get_object(Bucket=fixture_cloud.bucket, Key="data/changing.txt")["Body"].read() == b"x"
        iam.put_role_policy(name, "test-change", policy("Deny"))
        with pytest.raises(ClientError, match="explicit deny"):
            s3.get_object(Bucket=fixture_cloud.bucket, Key="data/changing.txt")
    finally:
        iam.delete_role_policy(name, "test-change")
    assert s3.get_object(Bucket=fixture_cloud.bucket, Key="data/changing.txt")["Body"].read() == b"x"


def test_iam_authorization_leaves_other_requests_to_moto(fixture_cloud: Any) -> None:
    """Patch 13 decides only requests to the local cloud's own server, not ``mock_aws``'s in this process."""
    if not fixture_cloud.iam.enforce:
        pytest.skip("IAM enforcement is off")

    class Request:
        def __init__(self, host: str) -> None:
            self.headers = {"Host": host}

    port = patches.HOOKS.authorized_port
    assert patches._authorized_here(Request(f"127.0.0.1:{port}"))
    assert patches._authorized_here(Request(f"localhost:{port}"))  # moto's interpreter calls localhost
    assert not patches._authorized_here(Request("s3.us-east-1.amazonaws.com"))
    assert not patches._authorized_here(Request(f"127.0.0.1:{port + 1}"))


def test_state_machine_integrations_sign_as_its_role(fixture_cloud: Any) -> None:
    """Patch 14: moto's interpreter signed its service calls with fixed fake keys; now as the state
    machine's role."""
    if not fixture_cloud.iam.enforce:
        pytest.skip("IAM enforcement is off")
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    role = _role(fixture_cloud, "PipelineStateMachineRole").rsplit("/", 1)[1]
    caller = boto_client_for("us-east-1", "sts").get_caller_identity()["Arn"]
    assert caller == f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/seqlake-local"


def test_a_plain_get_object_is_answered_directly_as_moto_answers_it(fixture_cloud: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch 14: a signed GetObject of one range (or none) is answered without moto's web route, with the
    status, bytes and headers moto gives it (but its request id and date); what moto must decide (another
    range, a missing key, a refused caller) goes to moto, and a refusal is recorded once."""
    body = bytes(range(256)) * 9
    _put(fixture_cloud, "data/direct.bin", body)
    s3 = fixture_cloud.client("s3")
    answered: list[bool] = []
    original = patches.answer_get_object

    def watched(*args: Any) -> Any:
        answer = original(*args)
        answered.append(answer is not None)
        return answer

    def get(client: Any, key: str, rng: str | None) -> tuple[Any, ...]:
        try:
            r = client.get_object(Bucket=fixture_cloud.bucket, Key=key, **({"Range": rng} if rng else {}))
        except ClientError as err:
            meta, got = err.response["ResponseMetadata"], {k: v for k, v in err.response["Error"].items()
                                                           if k not in ("RequestId", "HostId")}
        else:
            meta, got = r["ResponseMetadata"], r["Body"].read()
        headers = {k: v for k, v in meta["HTTPHeaders"].items() if k not in ("date", "x-amzn-requestid")}
        return meta["HTTPStatusCode"], headers, got

    import localcloud.http_server as http_server

    checked: list[str] = []  # signatures moto's own check computed (a direct answer confirms its own)
    moto_check = patches._access_control.IAMRequestBase.check_signature
    monkeypatch.setattr(patches._access_control.IAMRequestBase, "check_signature",
                        lambda request: checked.append(request._path) or moto_check(request))
    for rng in (None, "bytes=0-99", "bytes=100-", "bytes=2000-999999", "bytes=-10", "bytes=0-1,5-6", "bytes=9999-"):
        for key in ("data/direct.bin", "data/no-such-key"):
            monkeypatch.setattr(http_server.patches, "answer_get_object", lambda *a: None)
            by_moto = get(s3, key, rng)
            monkeypatch.setattr(http_server.patches, "answer_get_object", watched)
            answered.clear()
            checked.clear()
            assert get(s3, key, rng) == by_moto, (key, rng)
            direct = key == "data/direct.bin" and rng in (None, "bytes=0-99", "bytes=100-", "bytes=2000-999999")
            assert answered == [direct] and (checked == []) == direct, (key, rng)
    # a signature made with the wrong secret: moto's refusal either way, never answered directly
    keys = s3._request_signer._credentials.get_frozen_credentials()
    forged = boto3.client("s3", endpoint_url=fixture_cloud.endpoint, region_name=s3.meta.region_name,
                          aws_access_key_id=keys.access_key, aws_secret_access_key="not-" + keys.secret_key,
                          aws_session_token=keys.token)
    monkeypatch.setattr(http_server.patches, "answer_get_object", lambda *a: None)
    by_moto = get(forged, "data/direct.bin", "bytes=0-9")
    monkeypatch.setattr(http_server.patches, "answer_get_object", watched)
    answered.clear()
    assert get(forged, "data/direct.bin", "bytes=0-9") == by_moto and by_moto[0] == 403 and answered == [False]
    if fixture_cloud.iam.enforce:  # a caller the policy refuses: moto's error, recorded once
        denied = fixture_cloud.iam.client(_role(fixture_cloud, "CommitFunctionRole"), "s3")
        before = len(fixture_cloud.iam.denied)
        answered.clear()
        status, _, error = get(denied, "data/direct.bin", "bytes=0-9")
        assert (status, error["Code"]) == (403, "AccessDenied") and answered == [False]
        assert len(fixture_cloud.iam.denied) == before + 1


def _never_retrying(cloud: Any, service: str, read_timeout: float = 60) -> Any:
    """A client of ``cloud`` (the platform role's) that waits ``read_timeout`` s for each read and never retries:
    it sees each answer of the server as it is (botocore retries a 500)."""
    import boto3
    from botocore.config import Config

    from localcloud import iam

    creds = cloud.iam.credentials(iam.role_arn(iam.platform_role())) if cloud.iam.enforce else None
    keys = ({"aws_access_key_id": creds.access_key_id, "aws_secret_access_key": creds.secret_access_key,
             "aws_session_token": creds.session_token} if creds is not None else {})
    return boto3.client(service, region_name=REGION, endpoint_url=cloud.endpoint, **keys,
                        config=Config(read_timeout=read_timeout, retries={"total_max_attempts": 1}))


def _s3_with_read_timeout(cloud: Any, seconds: float) -> Any:
    """An S3 client of ``cloud`` (the platform role's) that waits ``seconds`` for each read and never retries."""
    return _never_retrying(cloud, "s3", seconds)


def test_a_slow_complete_is_answered_200_and_kept_alive(fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CompleteMultipartUpload still joining its parts past the grace is answered as S3 answers it: 200 at
    once, spaces until the parts are joined, then the result, so a client's read timeout shorter than the join
    never fires (a 4.75 GB upload's join outlasted botocore's 60 s: it retried, s3transfer aborted the upload
    under the first complete); an error found while joining comes inside the 200 (botocore raises it); one
    found within the grace keeps its own status."""
    from localcloud.http_server import KeepAliveHandler

    s3, bucket = _s3_with_read_timeout(fixture_cloud, 0.5), fixture_cloud.bucket
    parts = [bytes([3]) * (5 << 20), b"tail"]

    def upload(key: str) -> tuple[str, list[str]]:
        made = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        return made, [s3.upload_part(Bucket=bucket, Key=key, UploadId=made, PartNumber=n + 1, Body=body)["ETag"]
                      for n, body in enumerate(parts)]

    joined = patches.key_chunks

    def slowly(key: Any) -> Iterator[bytes]:  # each part's join outlasts the client's read timeout
        time.sleep(0.8)
        yield from joined(key)

    monkeypatch.setattr(KeepAliveHandler, "complete_grace_seconds", 0.0)
    monkeypatch.setattr(KeepAliveHandler, "keep_alive_seconds", 0.05)
    monkeypatch.setattr(patches, "key_chunks", slowly)
    made, etags = upload("data/slow.bin")
    done = s3.complete_multipart_upload(Bucket=bucket, Key="data/slow.bin", UploadId=made, MultipartUpload={
        "Parts": [{"ETag": e, "PartNumber": n + 1} for n, e in enumerate(etags)]})
    assert done["ResponseMetadata"]["HTTPStatusCode"] == 200 and done["ETag"].endswith('-2"')
    assert s3.get_object(Bucket=bucket, Key="data/slow.bin")["Body"].read() == b"".join(parts)

    made, etags = upload("data/slow-bad.bin")
    wrong = {"Parts": [{"ETag": etags[0], "PartNumber": 1}, {"ETag": '"' + "0" * 32 + '"', "PartNumber": 2}]}
    with pytest.raises(ClientError) as failed:  # found after the first part's slow join: inside the 200
        s3.complete_multipart_upload(Bucket=bucket, Key="data/slow-bad.bin", UploadId=made, MultipartUpload=wrong)
    assert failed.value.response["Error"]["Code"] == "InvalidPart"
    monkeypatch.setattr(KeepAliveHandler, "complete_grace_seconds", 60.0)
    monkeypatch.setattr(patches, "key_chunks", joined)
    with pytest.raises(ClientError) as failed:
        s3.complete_multipart_upload(Bucket=bucket, Key="data/slow-bad.bin", UploadId=made, MultipartUpload=wrong)
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert failed.value.response["Error"]["Code"] == "InvalidPart"


def test_a_response_is_searched_for_its_request_id_element_only_when_it_has_one(
    fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Patch 17: moto's regex that puts the request id into ``<RequestId>`` ran over every body (a JSON
    ``DescribeJobs`` too, at a cost in proportion to its size); now only over a body with the element, which
    still gets the id, as do the headers of every response."""
    import types

    from moto.core import responses

    searched: list[str] = []

    def sub(pattern: str, replacement: str, text: str) -> str:
        searched.append(text)
        return __import__("re").sub(pattern, replacement, text)

    monkeypatch.setattr(responses, "re", types.SimpleNamespace(sub=sub))
    document = json.dumps({"jobs": [{"jobId": str(i), "status": "SUCCEEDED"} for i in range(100)]})
    headers, body = responses.BaseResponse._enrich_response({"status": 200}, document)
    assert body == document and searched == [] and headers["status"] == "200"
    assert len(headers["x-amzn-requestid"]) == 52
    xml = "<Result><RequestId>old</RequestId></Result>"
    headers, body = responses.BaseResponse._enrich_response({}, xml)
    assert searched == [xml] and body == f"<Result><RequestId>{headers['x-amzn-requestid']}</RequestId></Result>"
    # and a real JSON answer through the server still carries its request id
    answer = fixture_cloud.client("batch").describe_job_queues()
    assert answer["ResponseMetadata"]["RequestId"] and searched == [xml]


def test_a_random_string_is_drawn_in_one_call_from_moto_s_generator(fixture_cloud: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch 17: a request id's characters come from one ``choices`` call of moto's (seedable) generator, not
    one ``choice`` call each; the same pool and options as moto's."""
    import string

    from moto.moto_api._internal import mock_random

    def one_at_a_time(*args: Any) -> Any:
        raise AssertionError("a character drawn on its own")

    monkeypatch.setattr(mock_random, "choice", one_at_a_time)
    drawn = mock_random.get_random_string(length=52)
    assert len(drawn) == 52 and set(drawn) <= set(string.ascii_letters + string.digits)
    assert set(mock_random.get_random_string(length=400, include_digits=False)) <= set(string.ascii_letters)
    assert mock_random.get_random_string(length=400, lower_case=True).islower()
    try:
        mock_random.seed(7)
        first = mock_random.get_random_string(length=52)
        mock_random.seed(7)
        assert mock_random.get_random_string(length=52) == first  # still deterministic once seeded
    finally:
        mock_random.seed()  # unseeded again: the ids made later in this process are not these


def test_a_response_class_s_actions_are_listed_once(fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch 17: moto's dispatch lists a response class's functions once per class, not once a request; the
    names are moto's own listing's."""
    import inspect

    from moto.batch.responses import BatchResponse
    from moto.core import responses, utils

    batch = fixture_cloud.client("batch")
    batch.describe_job_queues()  # listed by now, if it ever is
    assert responses.method_names_from_class(BatchResponse) == set(utils.method_names_from_class(BatchResponse))

    def listed_again(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a response class's functions listed again")

    monkeypatch.setattr(inspect, "getmembers", listed_again)
    assert batch.describe_job_queues()["jobQueues"]  # answered without listing BatchResponse's functions


def _finished_job(cloud: Any, name: str) -> str:
    """The id of a finished array job of the fixture's job definition (two children counting words)."""
    batch = cloud.client("batch")
    queue = batch.describe_job_queues()["jobQueues"][0]["jobQueueArn"]
    jd = batch.describe_job_definitions()["jobDefinitions"][0]["jobDefinitionArn"]
    _put(cloud, f"data/{name}.txt", b"2\na b\nc d e\n")
    env = [{"name": "RUN_ID", "value": name}, {"name": "INPUT_URI", "value": f"s3://{cloud.bucket}/data/{name}.txt"}]
    job_id: str = batch.submit_job(jobName=name, jobQueue=queue, jobDefinition=jd, arrayProperties={"size": 2},
                                   containerOverrides={"environment": env})["jobId"]
    assert _wait_job(batch, job_id)["status"] == "SUCCEEDED"
    return job_id


def test_describe_jobs_answers_while_another_request_submits_a_job(fixture_cloud: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every running execution's .sync task polls DescribeJobs while other executions submit their jobs, each
    request on a server thread of its own. moto's DescribeJobs walked the backend's whole job table, so a
    SubmitJob that added a job meanwhile made it fail ('dictionary changed size during iteration': HTTP 500,
    which ended the polling execution FAILED, unrecorded). Here the interleaving is made certain: a job is
    added to the table while each description is being built, as another thread's SubmitJob adds it."""
    from moto.batch.models import batch_backends

    job_id = _finished_job(fixture_cloud, "describe-while-submitted")
    table = batch_backends[ACCOUNT][REGION]._jobs
    describe, landed = patches.Job.describe, list[str]()

    def describe_while_a_job_is_submitted(job: Any) -> Any:
        landed.append(f"submitted-meanwhile-{len(landed)}")
        table[landed[-1]] = job
        return describe(job)

    monkeypatch.setattr(patches.Job, "describe", describe_while_a_job_is_submitted)
    try:
        jobs = _never_retrying(fixture_cloud, "batch").describe_jobs(jobs=[job_id, f"{job_id}:1"])["jobs"]
    finally:
        for key in landed:
            table.pop(key, None)
    assert [j["jobId"] for j in jobs] == [job_id, f"{job_id}:1"] and landed
    # a job named by its ARN is found too, as moto finds it, and each job is described once
    arn = jobs[1]["jobArn"]
    again = fixture_cloud.client("batch").describe_jobs(jobs=[arn, f"{job_id}:1", "no-such-job"])["jobs"]
    assert [j["jobId"] for j in again] == [f"{job_id}:1"]


def test_a_server_error_under_a_task_is_the_services_error_which_its_catch_catches(
        fixture_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected error in the local server while it answers a service integration is answered as the
    service answers an internal error: HTTP 500 with a request id and the service's error code (Batch's
    ``ServerException``). moto's interpreter reads the request id of every failed integration call: the HTML 500
    it had (no request id) raised KeyError('RequestId') there, which ended the execution FAILED with
    ``States.Runtime`` past every ``Catch``, so no step of the app could record the run."""
    from moto.batch.models import BatchBackend

    from seqlake.base import faults

    def describe_fails(self: Any, jobs: Any) -> Any:
        raise faults.InjectedFaultError("dictionary changed size during iteration")

    monkeypatch.setattr(BatchBackend, "describe_jobs", describe_fails)
    with pytest.raises(ClientError) as refused:
        _never_retrying(fixture_cloud, "batch").describe_jobs(jobs=["any"])
    answer = refused.value.response
    assert answer["Error"]["Code"] == "ServerException" and answer["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert answer["ResponseMetadata"]["RequestId"]
    assert "InjectedFaultError: dictionary changed size during iteration" in answer["Error"]["Message"]
    # the fixture's Fanout task polls DescribeJobs: its Catch (States.ALL) now sees Batch's error
    fixture_cloud.prewarm()
    _put(fixture_cloud, "incoming/server-error.txt", b"2\none two\nthree\n")
    (run,) = [e for e in fixture_cloud.wait(timeout=120) if e.name == "server-error"]
    assert (run.status, run.error, run.states) == ("FAILED", "ShardsFailed", ["Plan", "Fanout", "Failed"]), run
    sfn = fixture_cloud.client("stepfunctions")
    failed = [e["taskFailedEventDetails"] for e in sfn.get_execution_history(executionArn=run.arn)["events"]
              if e["type"] == "TaskFailed"]
    assert [f["error"] for f in failed] == ["Batch.ServerException"], failed


def test_an_emulator_error_is_counted_and_an_injected_one_is_not(fixture_cloud: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: an exception inside the local cloud is still answered as the service's internal error, and is
    also recorded (and logged in the state folder), so that the tests' fixture fails the test that met it; an
    error a test injects on purpose (``faults.InjectedFaultError``) is answered the same way and not recorded."""
    from moto.batch.models import BatchBackend

    from localcloud import emulator_errors
    from seqlake.base import faults

    raised: list[Exception] = [RuntimeError("an emulator race")]

    def describe_fails(self: Any, jobs: Any) -> Any:
        raise raised[0]

    monkeypatch.setattr(BatchBackend, "describe_jobs", describe_fails)
    batch = _never_retrying(fixture_cloud, "batch")
    with pytest.raises(ClientError, match="ServerException"):
        batch.describe_jobs(jobs=["any"])
    assert [e.error for e in emulator_errors.take()] == ["RuntimeError: an emulator race"]
    assert "RuntimeError: an emulator race" in (fixture_cloud.state.logs_dir / "emulator-errors.log").read_text()
    raised[0] = faults.InjectedFaultError("on purpose")
    with pytest.raises(ClientError, match="ServerException"):
        batch.describe_jobs(jobs=["any"])
    assert emulator_errors.take() == []
    # a command run as a process (the tests set the variable for them) fails when its cloud stops
    emulator_errors.record("GET /x", RuntimeError("boom"))
    monkeypatch.setenv(emulator_errors.STRICT_VAR, "1")
    with pytest.raises(emulator_errors.EmulatorFailedError, match="RuntimeError: boom"):
        emulator_errors.check_strict()
    assert emulator_errors.take() == []


def test_glue_update_table_is_refused_at_a_version_that_is_not_the_current_one(fixture_cloud: Any) -> None:
    """An Iceberg commit through Glue reads the table, writes new metadata and swaps the table's metadata
    location under the VersionId it read: Glue refuses the swap when another commit moved the table meanwhile
    (ConcurrentModificationException), which is what makes Iceberg's commits optimistic. moto replaced the table
    whatever version was named: the second of two racing commits "succeeded" and the first one's snapshot was lost."""
    glue = _never_retrying(fixture_cloud, "glue")
    database = "patch_glue_version"
    glue.create_database(DatabaseInput={"Name": database})
    try:
        glue.create_table(DatabaseName=database, TableInput={"Name": "t", "Parameters": {"metadata_location": "m0"}})
        read = glue.get_table(DatabaseName=database, Name="t")["Table"]["VersionId"]
        glue.update_table(DatabaseName=database, VersionId=read,
                          TableInput={"Name": "t", "Parameters": {"metadata_location": "m1"}})
        with pytest.raises(ClientError) as refused:  # a second commit that read the same version
            glue.update_table(DatabaseName=database, VersionId=read,
                              TableInput={"Name": "t", "Parameters": {"metadata_location": "m2"}})
        assert refused.value.response["Error"]["Code"] == "ConcurrentModificationException"
        table = glue.get_table(DatabaseName=database, Name="t")["Table"]
        assert table["Parameters"]["metadata_location"] == "m1"
        # the current version is accepted, and an update without VersionId stays unconditional, as on AWS
        glue.update_table(DatabaseName=database, VersionId=table["VersionId"],
                          TableInput={"Name": "t", "Parameters": {"metadata_location": "m3"}})
        glue.update_table(DatabaseName=database, TableInput={"Name": "t", "Parameters": {"metadata_location": "m4"}})
        assert glue.get_table(DatabaseName=database, Name="t")["Table"]["Parameters"]["metadata_location"] == "m4"
    finally:
        glue.delete_table(DatabaseName=database, Name="t")
        glue.delete_database(Name=database)


def test_a_scheduled_or_disabled_rule_is_delivered_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """CompactFunction's schedule rule has no pattern, and moto's empty pattern matches every event: each upload
    started a compaction (hundreds in one local run). On AWS a scheduled rule fires on its schedule only (never
    locally), and a disabled rule delivers nothing."""
    from moto.events.models import Rule

    patches.apply_all()
    delivered: list[str] = []
    monkeypatch.setattr(patches.HOOKS, "deliver", lambda target, event, arn: delivered.append(arn))
    target = [{"Id": "t", "Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:f"}]
    event = {"source": "aws.s3", "detail-type": "Object Created", "detail": {}}

    def rule(name: str, pattern: str | None, schedule: str | None, state: str = "ENABLED") -> Rule:
        return Rule(name, ACCOUNT, REGION, None, pattern, schedule, None, "default", state, targets=target)

    rule("scheduled", None, "rate(7 days)").send_to_targets(event)
    rule("disabled", json.dumps({"source": ["aws.s3"]}), None, "DISABLED").send_to_targets(event)
    assert delivered == []
    rule("pattern", json.dumps({"source": ["aws.s3"]}), None).send_to_targets(event)
    assert len(delivered) == 1
