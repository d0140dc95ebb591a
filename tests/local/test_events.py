"""What an EventBridge target receives: the event, or its Input / InputPath / InputTransformer result."""

from __future__ import annotations

from seqlake.localcloud.events import target_input

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
