"""Two local clouds in one process: moto's backends are process-wide, so a cloud's start empties them and
deploys again. A cloud still running from before (a test fixture that outlives its tests, a library
user's) must not disturb the newer one: its SQS event sources stop (``tests/local/test_events.py``), and
stopping it leaves the newer cloud's deployment and hooks in place."""

from __future__ import annotations

import os
from pathlib import Path

from seqlake.localcloud import patches
from seqlake.localcloud.cloud import LocalCloud
from seqlake.localcloud.state import StateDir


def test_stopping_an_older_cloud_leaves_a_newer_one_working(tmp_path: Path) -> None:
    before = dict(os.environ)
    older = LocalCloud(state=StateDir(tmp_path / "older"), quiet=True)
    newer = LocalCloud(state=StateDir(tmp_path / "newer"), quiet=True)
    older.start()
    try:
        newer.start()
        try:
            older.stop()
            newer.client("s3").head_bucket(Bucket=newer.bucket)  # its deployment is still there
            assert newer.client("stepfunctions").describe_state_machine(stateMachineArn=newer.state_machine_arn)
            assert patches.HOOKS.batch_run is newer.batch and patches.HOOKS.lambda_invoke is not None
            # moto's Step Functions calls back to the server on MOTO_PORT for service integrations
            assert os.environ["AWS_ENDPOINT_URL"] == newer.endpoint
            assert newer.endpoint.endswith(f":{os.environ['MOTO_PORT']}")
        finally:
            newer.stop()
    finally:
        older.stop()
    assert patches.HOOKS.batch_run is None and patches.HOOKS.lambda_invoke is None
    assert os.environ.get("AWS_ENDPOINT_URL") == before.get("AWS_ENDPOINT_URL")
    assert os.environ.get("MOTO_PORT") == before.get("MOTO_PORT")
