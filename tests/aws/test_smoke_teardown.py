"""The smoke test's teardown against a late writer: a failed execution's end reaches the backstop function
through EventBridge, after the smoke saw the execution end, and the backstop writes ``status.json`` when it
finds none (a race CI met: the bucket emptied, then written to)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import WaiterError
from moto import mock_aws

from seqlake.aws import smoke

BUCKET = "seqlake-smoke-teardown"
LATE_KEY = "runs/smoke-0/status.json"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Any:
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        client.put_object(Bucket=BUCKET, Key="incoming/smoke-0/smoke_R1.fastq.gz", Body=b"x")
        yield client


def _versions(s3: Any) -> list[str]:
    listed = s3.list_object_versions(Bucket=BUCKET)
    return [v["Key"] for v in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]]


def _target(s3: Any, **kw: Any) -> smoke.Target:
    return smoke.Target(lambda _: s3, {"DataBucketName": BUCKET}, log=lambda _: None, **kw)


def test_the_teardown_empties_the_bucket_after_the_stack_settled(s3: Any) -> None:
    """The local cloud's target settles (its backstop writes meanwhile) before the bucket is emptied."""
    smoke.teardown(_target(s3, settle=lambda: s3.put_object(Bucket=BUCKET, Key=LATE_KEY, Body=b"{}") and None))
    assert _versions(s3) == []


class _Stack:
    """CloudFormation's answers to DeleteStack: the first deletion fails (DELETE_FAILED on a bucket that is not
    empty) when the bucket holds a late write, as it does on AWS."""

    def __init__(self, s3: Any, *, never_deleted: bool = False) -> None:
        self.s3, self.deletions, self.never_deleted = s3, 0, never_deleted

    def delete_stack(self, StackName: str) -> None:  # noqa: N803 - boto3's spelling
        self.deletions += 1

    def get_waiter(self, name: str) -> Any:
        stack = self

        class Waiter:
            def wait(self, **_: Any) -> None:
                if stack.never_deleted or _versions(stack.s3):
                    raise WaiterError(name, "Waiter encountered a terminal failure state: DELETE_FAILED", {})

        return Waiter()


def test_a_stack_left_delete_failed_by_a_late_write_is_emptied_and_deleted_again(s3: Any) -> None:
    stack = _Stack(s3)
    target = _target(s3, delete_stack=lambda t: smoke.delete_stack(stack, "seqlake-smoke", t))
    smoke.empty_bucket(target)
    s3.put_object(Bucket=BUCKET, Key=LATE_KEY, Body=b"{}")  # the backstop, after the bucket was emptied
    assert target.delete_stack is not None
    target.delete_stack(target)
    assert stack.deletions == 2 and _versions(s3) == []


def test_a_stack_that_fails_twice_fails_the_smoke_naming_it(s3: Any) -> None:
    stack = _Stack(s3, never_deleted=True)
    with pytest.raises(smoke.SmokeError, match="the stack seqlake-smoke was not deleted"):
        smoke.delete_stack(stack, "seqlake-smoke", _target(s3))
    assert stack.deletions == 2
