"""What an EventBridge target receives (the event, or its Input / InputPath / InputTransformer result), and
how an SQS event source hands its queue to a function."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
from moto import mock_aws
from moto.moto_api._internal.models import moto_api_backend

from localcloud.deployer import REGION
from localcloud.events import SqsEventSource, target_input

EVENT = {
    "source": "aws.s3",
    "detail-type": "Object Created",
    "detail": {"bucket": {"name": "b"}, "object": {"key": "incoming/x.fastq.gz", "size": 3}},
}


def test_target_input() -> None:
    assert target_input({"Arn": "a"}, EVENT) == EVENT
    assert target_input({"Arn": "a", "Input": '{"fixed": 1}'}, EVENT) == {"fixed": 1}
    assert target_input({"Arn": "a", "InputPath": "$.detail.object"}, EVENT) == EVENT["detail"]["object"]
    transformer = {"InputPathsMap": {"k": "$.detail.object.key"}, "InputTemplate": '{"key": "<k>"}'}
    assert target_input({"Arn": "a", "InputTransformer": transformer}, EVENT) == {"key": "incoming/x.fastq.gz"}


class _Runner:
    """Stands in for the Lambda runner (not under test): records each batch and fails the messages whose
    body says so, the first time only."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.failed_once: set[str] = set()

    def invoke(self, name: str, payload: bytes) -> tuple[bytes, bool]:
        records = json.loads(payload)["Records"]
        self.batches.append(records)
        failures = [r["messageId"] for r in records
                    if r["body"] == "fail-once" and r["messageId"] not in self.failed_once]
        self.failed_once.update(failures)
        return json.dumps({"batchItemFailures": [{"itemIdentifier": i} for i in failures]}).encode(), False


def _until(condition: Any) -> None:
    for _ in range(300):
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("the event source did not get there")


def test_sqs_event_source_delivers_batches_and_redelivers_reported_failures(monkeypatch: Any) -> None:
    monkeypatch.setattr(SqsEventSource, "RETRY_SECONDS", 0)
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="settle.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        # a burst for one folder: the same de-duplication ID is one message
        for body, group, dedup in (("a", "g1", "d1"), ("a", "g1", "d1"), ("fail-once", "g2", "d2"), ("b", "g1", "d3")):
            sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=dedup)
        runner = _Runner()
        mapping = {"EventSourceArn": arn, "FunctionName": f"arn:aws:lambda:{REGION}:123456789012:function:fn",
                   "BatchSize": 10, "FunctionResponseTypes": ["ReportBatchItemFailures"]}
        source = SqsEventSource(runner, mapping)  # type: ignore[arg-type]
        assert source.pending == 3
        source.start()
        try:
            _until(lambda: source.pending == 0)
        finally:
            source.stop()
        bodies = [r["body"] for batch in runner.batches for r in batch]
        # every message handled, the failed one twice, and the records are SQS's event shape
        assert sorted(bodies) == ["a", "b", "fail-once", "fail-once"]
        record = runner.batches[0][0]
        assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"] == arn
        assert record["attributes"]["MessageGroupId"] in ("g1", "g2")


def test_an_sqs_event_source_leaves_a_later_deployments_queue_of_the_same_name_alone() -> None:
    """moto's backends are process-wide: a local cloud started in a process where another still runs
    resets them and deploys the same queue names. The older cloud's source must not take the newer
    one's messages: its function has the older configuration (a run started without the newer cloud's
    ``--reference``, say)."""
    mapping = {"FunctionName": f"arn:aws:lambda:{REGION}:123456789012:function:fn", "BatchSize": 10}
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="settle")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        older_runner = _Runner()
        older = SqsEventSource(older_runner, {**mapping, "EventSourceArn": arn})  # type: ignore[arg-type]
        older.start()
        try:
            moto_api_backend.reset()  # what a local cloud's start does (MotoServer.reset)
            # the newer deployment makes its queue of the same name
            url = sqs.create_queue(QueueName="settle")["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody="for the newer deployment")
            older._thread.join(timeout=10)  # its queue is gone: it stops by itself
            assert not older._thread.is_alive() and older.orphaned and older.pending == 0
            newer_runner = _Runner()
            newer = SqsEventSource(newer_runner, {**mapping, "EventSourceArn": arn})  # type: ignore[arg-type]
            assert newer.pending == 1 and newer.poll()
        finally:
            older.stop()
        assert older_runner.batches == []
        assert [r["body"] for batch in newer_runner.batches for r in batch] == ["for the newer deployment"]
