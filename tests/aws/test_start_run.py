"""The start_run handler on real-shaped events, against moto resources made from template.yaml."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.validation.exceptions import SchemaValidationError

from .conftest import REGION, Deployed, load_event

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
    request = json.loads(ex["input"])
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
    [sample] = json.loads(ex["input"])["samples"]
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
    request = json.loads(ex["input"])
    assert [s["sample"] for s in request["samples"]] == ["A", "B"]
    assert request["samplesheet"].endswith("batch7/samplesheet.csv") and len(request["inputs"]) == 4


@pytest.mark.parametrize(
    ("sheet", "message"),
    [
        (b"sample,fastq_2\nA,a.fastq.gz\n", "missing column 'fastq_1'"),
        (b"sample,fastq_1\nA,s3://elsewhere/a.fastq.gz\n", "elsewhere"),
        (b"sample,fastq_1\nA,../a.fastq.gz\n", ".."),
    ],
)
def test_bad_samplesheet_is_rejected_with_its_line(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]], sheet: bytes, message: str
) -> None:
    deployed.put("incoming/bad/samplesheet.csv", sheet)
    out = start(deployed.event_for("incoming/bad/samplesheet.csv"))
    assert out["status"] == "rejected" and message in out["reason"]
    assert "samplesheet.csv:" in out["reason"] and executions(deployed) == []


def test_url_encoded_key_is_resolved(deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    deployed.put("incoming/my run/s+1.fastq", FASTQ)
    event = deployed.event_for("incoming/my run/s+1.fastq")
    event["detail"]["object"]["key"] = "incoming/my+run/s%2B1.fastq"  # as S3 notifications encode it
    out = start(event)
    assert out["status"] == "started"
    [ex] = executions(deployed)
    assert json.loads(ex["input"])["inputs"][0]["key"] == "incoming/my run/s+1.fastq"


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
    assert json.loads(ex["input"])["samples"][0]["r1"] == "s3://sequencer-output/run9/a.fastq.gz"
    # and a bucket not in the list is still refused
    deployed.put("incoming/ext2/samplesheet.csv", b"sample,fastq_1\nA,s3://not-listed/a.fastq.gz\n")
    out = start(deployed.event_for("incoming/ext2/samplesheet.csv"))
    assert out["status"] == "rejected" and "AllowedInputBuckets" in out["reason"]
