"""The start_run handler on real-shaped events, against moto resources made from template.yaml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.validation.exceptions import SchemaValidationError

from seqlake.aws.events import run_id, s3_object
from seqlake.lake.tables import RESULT_TABLES

from .conftest import REGION, REPO, Deployed, execution_request, load_event, partitions, read_status, runs_row

FASTQ = b"@r1\nACGT\n+\nIIII\n"


@pytest.fixture
def start(
    deployed: Deployed,
    handler: Callable[[str], ModuleType],
    lambda_context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    monkeypatch.setenv("STATE_MACHINE_ARN", deployed.state_machine_arn)
    monkeypatch.setenv("REFERENCE_URI", f"s3://{deployed.bucket}/references/ref/ref.fasta")
    monkeypatch.setenv("ALLOWED_INPUT_BUCKETS", "")
    monkeypatch.setenv("GLUE_DATABASE", deployed.database)
    app = handler("start_run")

    def call(event: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = app.handler(event, lambda_context)
        return result

    return call


def executions(deployed: Deployed) -> list[dict[str, Any]]:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    listed = sfn.list_executions(stateMachineArn=deployed.state_machine_arn)["executions"]
    return [sfn.describe_execution(executionArn=e["executionArn"]) for e in listed]


def test_single_file_starts_a_run(deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    # Given the sample event's object in the bucket
    key = load_event("s3-object-created-single.json")["detail"]["object"]["key"]
    etag = deployed.put(key, FASTQ)
    # When the event arrives
    out = start(deployed.event_for(key))
    # Then one execution named by the run id starts, with the object and its ETag as input
    assert out["status"] == "started"
    [ex] = executions(deployed)
    assert ex["name"] == out["run_id"] and out["run_id"].startswith("sample1-")
    request = execution_request(ex)
    assert request["samples"] == [{"sample": "sample1", "r1": f"s3://{deployed.bucket}/{key}", "r2": None}]
    assert request["inputs"][0]["etag"] == etag and request["reference"].endswith("ref.fasta")


def test_duplicate_delivery_is_a_no_op(deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    deployed.put("incoming/a/s.fastq", FASTQ)
    event = deployed.event_for("incoming/a/s.fastq")
    results = [start(event) for _ in range(3)]
    assert [r["status"] for r in results] == ["started", "duplicate", "duplicate"]
    assert len({r["run_id"] for r in results}) == 1 and len(executions(deployed)) == 1


@pytest.mark.parametrize("order", [("R1", "R2"), ("R2", "R1")])
def test_mates_start_one_paired_run_in_either_order(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], order: tuple[str, str]
) -> None:
    first, second = (f"incoming/run42/demo_{m}.fastq.gz" for m in order)
    deployed.put(first, FASTQ)
    # the first mate waits
    out = start(deployed.event_for(first))
    assert out["status"] == "waiting" and "waiting for mate" in out["reason"]
    assert executions(deployed) == []
    # the second starts the pair
    deployed.put(second, FASTQ)
    out = start(deployed.event_for(second))
    assert out["status"] == "started"
    [ex] = executions(deployed)
    [sample] = execution_request(ex)["samples"]
    assert sample["sample"] == "demo"
    assert sample["r1"].endswith("demo_R1.fastq.gz") and sample["r2"].endswith("demo_R2.fastq.gz")


def test_mates_arriving_together_start_once(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    # Given both mates already in the bucket when both events are processed
    for m in ("R1", "R2"):
        deployed.put(f"incoming/x/s_{m}_001.fastq.gz", FASTQ)
    outs = [start(deployed.event_for(f"incoming/x/s_{m}_001.fastq.gz")) for m in ("R2", "R1")]
    # Then both compute the same run id; only one execution exists
    assert outs[0]["run_id"] == outs[1]["run_id"]
    assert {o["status"] for o in outs} == {"started", "duplicate"}
    assert len(executions(deployed)) == 1


def test_new_content_starts_a_new_run(deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    deployed.put("incoming/s.fq", FASTQ)
    a = start(deployed.event_for("incoming/s.fq"))
    deployed.put("incoming/s.fq", FASTQ + FASTQ.replace(b"r1", b"r2"))
    b = start(deployed.event_for("incoming/s.fq"))
    assert a["status"] == b["status"] == "started" and a["run_id"] != b["run_id"]
    assert len(executions(deployed)) == 2


def test_samplesheet_run_starts_when_every_file_exists(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    sheet = b"sample,fastq_1,fastq_2\nA,a_R1.fastq.gz,a_R2.fastq.gz\nB,b.fastq.gz,\n"
    deployed.put("incoming/batch7/samplesheet.csv", sheet)
    # the sheet first: two of three files missing after A_R1 arrives
    out = start(deployed.event_for("incoming/batch7/samplesheet.csv"))
    assert out["status"] == "waiting" and len(out["waiting_for"]) == 3
    deployed.put("incoming/batch7/a_R1.fastq.gz", FASTQ)
    assert start(deployed.event_for("incoming/batch7/a_R1.fastq.gz"))["status"] == "waiting"
    deployed.put("incoming/batch7/b.fastq.gz", FASTQ)
    assert start(deployed.event_for("incoming/batch7/b.fastq.gz"))["waiting_for"] == [
        f"s3://{deployed.bucket}/incoming/batch7/a_R2.fastq.gz"
    ]
    # the last file starts one run of the whole sheet
    deployed.put("incoming/batch7/a_R2.fastq.gz", FASTQ)
    out = start(deployed.event_for("incoming/batch7/a_R2.fastq.gz"))
    assert out["status"] == "started" and out["run_id"].startswith("batch7-")
    [ex] = executions(deployed)
    request = execution_request(ex)
    assert [s["sample"] for s in request["samples"]] == ["A", "B"]
    assert request["samplesheet"].endswith("batch7/samplesheet.csv") and len(request["inputs"]) == 4


def uploaded_at(deployed: Deployed, key: str) -> str:
    modified = deployed.s3().head_object(Bucket=deployed.bucket, Key=key)["LastModified"]
    return str(modified.isoformat())


def assert_rejection_recorded(deployed: Deployed, out: dict[str, Any], key: str, etag: str, label: str) -> None:
    """status.json, the runs row and the runs partition of a rejected input, as the failure step
    records a failed run: state REJECTED, the one-line reason, the object and its ETag."""
    rid = run_id(label, [s3_object(deployed.bucket, key, etag)])
    assert out["run_id"] == rid and executions(deployed) == []
    st = read_status(deployed, rid)
    uri = f"s3://{deployed.bucket}/{key}"
    size = deployed.s3().head_object(Bucket=deployed.bucket, Key=key)["ContentLength"]
    assert st["state"] == "REJECTED" and st["reason"] == out["reason"] and st["reason"].startswith(f"{uri}:")
    assert st["inputs"] == [{"uri": uri, "bucket": deployed.bucket, "key": key, "etag": etag, "size": size}]
    assert st["failed_step"] == "Start" and st["error"] == "BadInputError" and st["execution_arn"] is None
    assert st["started_at"] == st["finished_at"] == uploaded_at(deployed, key) and st["duration_s"] == 0
    assert st["partitions"] == ["runs"]
    row = runs_row(deployed, rid)
    assert row["state"] == "REJECTED" and row["reason"] == out["reason"] and row["shards"] is None
    assert json.loads(row["inputs"])[0]["etag"] == etag and row["started_at"].isoformat() == st["started_at"]
    assert partitions(deployed, "runs") == [[rid]]
    for table in RESULT_TABLES:
        assert partitions(deployed, table) == [], table


@pytest.mark.parametrize(
    ("sheet", "message"),
    [
        (b"sample,fastq_2\nA,a.fastq.gz\n", "samplesheet.csv:1: missing column 'fastq_1'"),
        (b"sample,fastq_1\nA,a.fastq.gz\nB,a.fastq.gz\n", "samplesheet.csv:3: s3://"),
        (b"sample,fastq_1\nA,s3://elsewhere/a.fastq.gz\n", "samplesheet.csv:2: 's3://elsewhere/a.fastq.gz' is in"),
        (b"sample,fastq_1\nA,../a.fastq.gz\n", "samplesheet.csv:2: path '../a.fastq.gz'"),
    ],
    ids=["missing column", "file twice", "other bucket", "dots"],
)
def test_bad_samplesheet_is_rejected_and_recorded_with_its_line(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], sheet: bytes, message: str
) -> None:
    # Given a samplesheet that fails its checks
    etag = deployed.put("incoming/bad/samplesheet.csv", sheet)
    # When its event arrives
    out = start(deployed.event_for("incoming/bad/samplesheet.csv"))
    # Then no run starts, and the rejection is recorded like a failed run, under the sheet's run id
    assert out["status"] == "rejected" and message in out["reason"]
    assert_rejection_recorded(deployed, out, "incoming/bad/samplesheet.csv", etag, "bad")
    assert read_status(deployed, out["run_id"])["samplesheet"] == f"s3://{deployed.bucket}/incoming/bad/samplesheet.csv"


def test_fastq_key_rejected_by_the_start_function_is_recorded(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    # Given a FASTQ whose name holds no sample (the EventBridge rule lets "incoming/*.fastq" through)
    etag = deployed.put("incoming/odd/.fastq", FASTQ)
    out = start(deployed.event_for("incoming/odd/.fastq"))
    assert out["status"] == "rejected" and "not a FASTQ file name" in out["reason"]
    assert_rejection_recorded(deployed, out, "incoming/odd/.fastq", etag, ".fastq")
    assert read_status(deployed, out["run_id"])["samplesheet"] is None


def test_redelivered_rejection_rewrites_the_same_record(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    # Given a bad sheet and a FASTQ beside it (whose event leads to the sheet too)
    key = "incoming/dup/samplesheet.csv"
    etag = deployed.put(key, b"sample,fastq_1\ns,a.fastq\nt,a.fastq\n")
    deployed.put("incoming/dup/a.fastq", FASTQ)
    first = start(deployed.event_for(key))
    rid = first["run_id"]
    s3 = deployed.s3()
    files = [f"runs/{rid}/status.json", f"results/runs/run_id={rid}/part-00000.parquet"]
    before = [s3.get_object(Bucket=deployed.bucket, Key=k)["Body"].read() for k in files]
    # When the sheet's event is delivered again, and the FASTQ's arrives
    again = [start(deployed.event_for(key)), start(deployed.event_for("incoming/dup/a.fastq"))]
    # Then every delivery names the same run and rewrites the same bytes; one partition, no error
    assert [o["status"] for o in again] == ["rejected", "rejected"]
    assert {o["run_id"] for o in again} == {rid} and {o["reason"] for o in again} == {first["reason"]}
    assert [s3.get_object(Bucket=deployed.bucket, Key=k)["Body"].read() for k in files] == before
    assert_rejection_recorded(deployed, first, key, etag, "dup")
    # and the only objects written are the record's two files
    written = {o["Key"] for o in s3.list_objects_v2(Bucket=deployed.bucket)["Contents"]
               if "/metadata/" not in o["Key"]}  # the Iceberg tables' own metadata, made with the stack
    assert written - {key, "incoming/dup/a.fastq"} == set(files)


def test_url_encoded_key_is_resolved(deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    deployed.put("incoming/my run/s+1.fastq", FASTQ)
    event = deployed.event_for("incoming/my run/s+1.fastq")
    event["detail"]["object"]["key"] = "incoming/my+run/s%2B1.fastq"  # as S3 notifications encode it
    out = start(event)
    assert out["status"] == "started"
    [ex] = executions(deployed)
    assert execution_request(ex)["inputs"][0]["key"] == "incoming/my run/s+1.fastq"


def test_objects_outside_incoming_are_ignored(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    deployed.put("results/x.fastq", FASTQ)
    assert start(deployed.event_for("results/x.fastq"))["status"] == "ignored"


def test_malformed_event_fails_validation(start: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    event = load_event("s3-object-created-single.json")
    del event["detail"]["object"]
    with pytest.raises(SchemaValidationError):
        start(event)


def test_other_buckets_only_when_allowed(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a sheet naming a file in another bucket, which AllowedInputBuckets lists
    s3 = deployed.s3()
    s3.create_bucket(Bucket="sequencer-output")
    s3.put_object(Bucket="sequencer-output", Key="run9/a.fastq.gz", Body=FASTQ)
    deployed.put("incoming/ext/samplesheet.csv", b"sample,fastq_1\nA,s3://sequencer-output/run9/a.fastq.gz\n")
    monkeypatch.setenv("ALLOWED_INPUT_BUCKETS", "sequencer-output, another")
    # Then the run starts with that file
    out = start(deployed.event_for("incoming/ext/samplesheet.csv"))
    assert out["status"] == "started"
    [ex] = executions(deployed)
    assert execution_request(ex)["samples"][0]["r1"] == "s3://sequencer-output/run9/a.fastq.gz"
    # and a bucket not in the list is still refused
    etag = deployed.put("incoming/ext2/samplesheet.csv", b"sample,fastq_1\nA,s3://not-listed/a.fastq.gz\n")
    out = start(deployed.event_for("incoming/ext2/samplesheet.csv"))
    assert out["status"] == "rejected" and "samplesheet.csv:2: " in out["reason"]
    assert "'not-listed', which is not in AllowedInputBuckets (another, sequencer-output)" in out["reason"]
    assert read_status(deployed, out["run_id"])["reason"] == out["reason"]
    assert out["run_id"] == run_id("ext2", [s3_object(deployed.bucket, "incoming/ext2/samplesheet.csv", etag)])


# ---------------------------------------------------------------- folders settled through the queue
@pytest.fixture
def settle_queue(deployed: Deployed, monkeypatch: pytest.MonkeyPatch) -> str:
    """The template's settle queue (FIFO, delay = quiet period; here 0 s: tests deliver its messages
    when they choose), its URL in the start function's environment."""
    props = deployed.resolve(deployed.template["Resources"]["StartRunSettleQueue"]["Properties"])
    attributes = {k: str(v) for k, v in props.items() if k in ("FifoQueue", "VisibilityTimeout")}
    sqs = boto3.client("sqs", region_name=REGION)
    url: str = sqs.create_queue(QueueName=f"{uuid.uuid4().hex[:8]}-{props['QueueName']}", Attributes=attributes)[
        "QueueUrl"]
    monkeypatch.setenv("SETTLE_QUEUE_URL", url)
    monkeypatch.setenv("QUIET_PERIOD_SECONDS", "0")
    return url


def deliver(queue_url: str, start: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """Hand the queue's messages to the function as Lambda's SQS event source does; returns how many."""
    sqs = boto3.client("sqs", region_name=REGION)
    delivered = 0
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                       AttributeNames=["All"]).get("Messages", [])
        if not messages:
            return delivered
        records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                    "attributes": m.get("Attributes", {}), "eventSource": "aws:sqs"} for m in messages]
        out = start({"Records": records})
        assert out == {"batchItemFailures": []}
        for m in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        delivered += len(messages)


def _pairs_sheet(n: int) -> bytes:
    rows = (b"S%d,s%d_R1.fastq.gz,s%d_R2.fastq.gz\n" % (i, i, i) for i in range(n))
    return b"sample,fastq_1,fastq_2\n" + b"".join(rows)


@pytest.mark.parametrize("sheet_first", [False, True], ids=["fastqs then sheet", "sheet then fastqs"])
def test_a_folder_starts_exactly_one_run_whatever_the_upload_order(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], settle_queue: str, sheet_first: bool
) -> None:
    # Given a folder of three pairs and their samplesheet, uploaded in either order (as `aws s3 sync` may)
    keys = [f"incoming/sync/s{i}_R{m}.fastq.gz" for i in range(3) for m in (1, 2)]
    uploads = [("incoming/sync/samplesheet.csv", _pairs_sheet(3))] + [(k, FASTQ) for k in keys]
    if not sheet_first:
        uploads = uploads[1:] + uploads[:1]
    outs = []
    for key, body in uploads:
        deployed.put(key, body)
        outs.append(start(deployed.event_for(key)))
    # Then every event only settles the folder: nothing starts while uploads land
    assert {o["status"] for o in outs} == {"queued"} and executions(deployed) == []
    # When the queue delivers (after the quiet period)
    assert deliver(settle_queue, start) >= 1
    # Then exactly one run starts: the sheet's, with every pair
    [ex] = executions(deployed)
    request = execution_request(ex)
    assert ex["name"].startswith("sync-") and [s["sample"] for s in request["samples"]] == ["S0", "S1", "S2"]
    assert len(request["inputs"]) == 7
    # and a redelivered event settles to the same run
    start(deployed.event_for(keys[0]))
    deliver(settle_queue, start)
    assert len(executions(deployed)) == 1


def test_a_folder_without_a_sheet_starts_a_run_per_pair_and_single_file(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], settle_queue: str
) -> None:
    for key in ("incoming/lab/a_R1.fq.gz", "incoming/lab/a_R2.fq.gz", "incoming/lab/b.fastq", "incoming/lab/c_R1.fq"):
        deployed.put(key, FASTQ)
        assert start(deployed.event_for(key))["status"] == "queued"
    deliver(settle_queue, start)
    # a's pair and b's single file start; c's R1 waits for its mate
    runs = sorted(execution_request(ex)["samples"][0]["sample"] for ex in executions(deployed))
    assert runs == ["a", "b"]
    deployed.put("incoming/lab/c_R2.fq", FASTQ)
    start(deployed.event_for("incoming/lab/c_R2.fq"))
    deliver(settle_queue, start)
    assert sorted(execution_request(ex)["samples"][0]["sample"] for ex in executions(deployed)) == ["a", "b", "c"]


def test_a_folder_still_receiving_uploads_is_looked_at_again(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], settle_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from seqlake.aws.start import StartSettings, settle

    monkeypatch.setenv("QUIET_PERIOD_SECONDS", "60")
    deployed.put("incoming/busy/x.fastq", FASTQ)
    settings = StartSettings.from_env(os.environ)
    # the newest object is younger than the quiet period: no run, the folder's message goes back
    assert [r.status for r in settle(deployed.bucket, "incoming/busy/", settings)] == ["queued"]
    assert executions(deployed) == []
    sqs = boto3.client("sqs", region_name=REGION)
    assert sqs.get_queue_attributes(QueueUrl=settle_queue, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"] == "1"
    # a quiet period later, the same folder starts its run
    later = settle(deployed.bucket, "incoming/busy/", settings, now=time.time() + 61)
    assert [r.status for r in later] == ["started"]


def test_a_samplesheet_start_costs_o_n_s3_requests(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], settle_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """500 paired samples (1,001 objects: a listing of two pages): every event and the settle together cost
    the folder's listing and one GET of the sheet, counted where moto answers each S3 request (the old start
    HEADed every file of the sheet on every event: (2N)^2 requests)."""
    from moto.s3.responses import S3Response

    from seqlake.aws import start as start_module
    from seqlake.aws.events import object_from_event

    n = 500
    s3 = deployed.s3()
    uploads = [(f"incoming/big/s{i}_R{m}.fastq.gz", FASTQ) for i in range(n) for m in (1, 2)]
    uploads.append(("incoming/big/samplesheet.csv", _pairs_sheet(n)))
    events = []
    for key, body in uploads:
        etag = s3.put_object(Bucket=deployed.bucket, Key=key, Body=body)["ETag"]
        event = load_event("s3-object-created-single.json")
        event["detail"]["bucket"]["name"] = deployed.bucket
        event["detail"]["object"].update(key=key, size=len(body), etag=etag.strip('"'))
        events.append(event)
    requests: list[str] = []
    original = S3Response.setup_class

    def counting(self: Any, request: Any, *args: Any, **kwargs: Any) -> None:
        requests.append(f"{request.method} {request.path}")
        original(self, request, *args, **kwargs)

    class Clock:
        """The start module's clock: the uploads land within one quiet period, the queue delivers after it."""

        now = time.time()

        @classmethod
        def time(cls) -> float:
            return cls.now

    monkeypatch.setattr(S3Response, "setup_class", counting)
    monkeypatch.setattr(start_module, "time", Clock)
    monkeypatch.setenv("QUIET_PERIOD_SECONDS", "120")
    settings = start_module.StartSettings.from_env(os.environ)
    outs = [start_module.start_run(object_from_event(e), settings) for e in events]
    assert {o.status for o in outs} == {"queued"}
    Clock.now += 121
    assert deliver(settle_queue, start) == 1  # one message for the whole burst
    [ex] = executions(deployed)
    assert len(execution_request(ex)["samples"]) == n
    listing_pages = -(-len(events) // 1000)
    assert listing_pages == 2
    # this test reads the request back afterwards: not the start's
    reads = [r for r in requests if r.split()[0] in ("GET", "HEAD") and not r.startswith("GET /runs/")]
    assert len(reads) <= listing_pages + 1, reads[:20]  # the folder's listing and the sheet
    writes = [r for r in requests if r.split()[0] not in ("GET", "HEAD")]
    assert len(writes) <= 1, requests  # at most the run's request, written once


def test_the_start_lambda_imports_neither_numpy_nor_dnaio_nor_pyarrow() -> None:
    """Its cold start runs on every upload: a fresh interpreter imports the handler and is checked."""
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import app; "
        "print(','.join(m for m in ('numpy', 'dnaio', 'pyarrow', 'isal', 'cutadapt') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(REPO / "functions" / "start_run"), str(REPO / "src")],
                         capture_output=True, text=True, check=True, cwd=REPO / "functions" / "start_run")
    assert out.stdout.strip() == "", out.stdout


def test_a_400_sample_sheet_fits_the_step_functions_input_limit(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], settle_queue: str
) -> None:
    from seqlake.base import limits

    n, folder = 400, "incoming/2026-11-30_NB501234_0421_AHXYZ/"
    s3 = deployed.s3()
    names = [(f"LIB{i:04d}", *(f"LIB{i:04d}_S{i + 1}_L001_R{m}_001.fastq.gz" for m in (1, 2))) for i in range(n)]
    for _, r1, r2 in names:
        for name in (r1, r2):
            s3.put_object(Bucket=deployed.bucket, Key=folder + name, Body=FASTQ)
    sheet = "sample,fastq_1,fastq_2\n" + "".join(f"{s},{r1},{r2}\n" for s, r1, r2 in names)
    deployed.put(folder + "samplesheet.csv", sheet.encode())
    start(deployed.event_for(folder + "samplesheet.csv"))
    deliver(settle_queue, start)
    [ex] = executions(deployed)
    # the request (every sample and input) is in runs/<id>/request.json; the input only points at it
    assert len(execution_request(ex)["samples"]) == n
    size = len(ex["input"].encode())
    assert size <= 1024 < limits.SFN_PAYLOAD.value, f"{size} bytes"


def test_settle_markers_collapse_a_burst_but_never_an_upload_into_a_look_again() -> None:
    from seqlake.aws.start import again_marker, event_marker

    quiet, t0 = 120.0, 1_800_000_000.0  # t0 starts a window
    # uploads within one quiet period share a message; the next period's uploads get their own
    assert event_marker(t0, quiet) == event_marker(t0 + quiet - 1, quiet) != event_marker(t0 + quiet, quiet)
    # settles looking again in the same window share a message, and never an upload's
    assert again_marker(t0, quiet) == again_marker(t0 + quiet - 1, quiet)
    assert again_marker(t0 - quiet, quiet) != event_marker(t0, quiet)
    # the de-duplication window stays within SQS's 5 minutes however long the quiet period
    assert event_marker(t0, 900) != event_marker(t0 + 301, 900)


def test_the_start_response_stays_within_lambda_s_limit_for_any_sheet(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """A 10,000-sample sheet whose files are all missing, with the longest keys S3 allows: the result
    names the first few and counts the rest."""
    from seqlake.aws.start import WAITING_FOR_SHOWN
    from seqlake.base import limits

    n, stem = 10_000, "x" * 990
    rows = "".join(f"S{i},{stem}{i:05d}_R1.fastq.gz,{stem}{i:05d}_R2.fastq.gz\n" for i in range(n))
    deployed.put("incoming/huge/samplesheet.csv", ("sample,fastq_1,fastq_2\n" + rows).encode())
    out = start(deployed.event_for("incoming/huge/samplesheet.csv"))
    assert out["status"] == "waiting" and f"waiting for {2 * n} file(s)" in out["reason"]
    assert len(out["waiting_for"]) == WAITING_FOR_SHOWN
    assert len(json.dumps(out).encode()) <= limits.LAMBDA_RESPONSE.value
