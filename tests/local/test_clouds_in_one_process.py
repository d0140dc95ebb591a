"""Two local clouds in one process: moto's backends are process-wide, so a cloud's start empties them and
deploys again. A cloud still running from before (a test fixture that outlives its tests, a library
user's) must not disturb the newer one: its SQS event sources stop (``tests/local/test_events.py``), and
stopping it leaves the newer cloud's deployment and hooks in place."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from localcloud import patches
from localcloud.cloud import LocalCloud
from localcloud.state import StateDir


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


def test_a_cloud_that_fails_to_start_leaves_nothing_running(tmp_path: Path, monkeypatch) -> None:
    """A deploy that fails (a template moto cannot serve, once) must not leave the moto server's threads or
    its environment behind: the next fork in the process (the aligner's, a counting pass's) refuses to fork
    beside them, and failed 28 unrelated tests of a clean clone."""
    before = dict(os.environ)

    def failing_deploy(self: LocalCloud) -> None:
        raise RuntimeError("the template did not deploy")

    monkeypatch.setattr(LocalCloud, "deploy", failing_deploy)
    cloud = LocalCloud(state=StateDir(tmp_path / "failing"), quiet=True)
    try:
        cloud.start()
    except RuntimeError as e:
        assert str(e) == "the template did not deploy"
    else:
        raise AssertionError("start() returned although its deploy failed")
    assert not [t.name for t in threading.enumerate() if t.name == "moto-server" and t.is_alive()]
    assert os.environ.get("AWS_ENDPOINT_URL") == before.get("AWS_ENDPOINT_URL")
    assert patches.HOOKS.batch_run is None and patches.HOOKS.lambda_invoke is None
