"""The local cloud's contract with seqlake: the texts and numbers of AWS's that both keep a copy of are the same in
both, and the adapter gives the local cloud what is the app's (``seqlake.local.adapter``)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

import localcloud
from localcloud import athena, aws_texts, containers, contract, emulator_errors, errors, iam, progress
from localcloud import instances as cloud_instances
from localcloud import limits as cloud_limits
from localcloud.batch import local_command, worker_args
from localcloud.deployer import Deployer
from localcloud.packaging import load_template
from localcloud.state import default_home
from seqlake.aws import batch_reasons, events, steps
from seqlake.base import faults, instances
from seqlake.base import limits as app_limits
from seqlake.base.layout import RunLayout
from seqlake.local import adapter, image

REPO = Path(__file__).resolve().parents[2]


def test_batch_and_lambda_reasons_are_the_same_texts() -> None:
    for name in ("BATCH_OUT_OF_MEMORY", "LAMBDA_OUT_OF_MEMORY", "CANCELLED_PREFIX", "ATTEMPT_TIMED_OUT"):
        assert getattr(aws_texts, name) == getattr(batch_reasons, name), name


def test_the_execution_status_change_event_is_the_same() -> None:
    assert aws_texts.EXECUTION_STATUS_SOURCE == events.EXECUTION_STATUS_SOURCE
    assert aws_texts.EXECUTION_STATUS_DETAIL_TYPE == events.EXECUTION_STATUS_DETAIL_TYPE
    assert inspect.signature(aws_texts.execution_status_detail) == inspect.signature(events.execution_status_detail)
    t0, t1 = datetime(2026, 12, 5, 12, tzinfo=UTC), datetime(2026, 12, 5, 13, tzinfo=UTC)
    for output, error in (('{"ok": 1}', None), (None, "States.TaskFailed")):
        kw = {"execution_arn": "arn:e", "state_machine_arn": "arn:sm", "name": "n", "status": "FAILED",
              "start": t0, "stop": t1, "execution_input": "{}", "output": output, "error": error, "cause": None}
        assert aws_texts.execution_status_detail(**kw) == events.execution_status_detail(**kw)


def test_the_limits_both_keep_are_equal() -> None:
    app = {name: value for name, value in vars(app_limits).items() if isinstance(value, app_limits.Limit)}
    ours = {name: value for name, value in vars(cloud_limits).items() if isinstance(value, cloud_limits.Limit)}
    assert ours and set(ours) <= set(app)
    for name, limit in ours.items():
        assert dataclasses.astuple(limit) == dataclasses.astuple(app[name]), name


def test_the_app_s_instance_types_are_the_local_cloud_s() -> None:
    known = cloud_instances.instance_types()
    for name, t in instances.instance_types().items():
        assert dataclasses.astuple(known[name]) == dataclasses.astuple(t), name


def test_the_adapter_gives_the_app() -> None:
    app = contract.app()
    assert app is adapter.APP
    assert local_command(["seqlake", "worker"])[1:] == ["-m", "seqlake", "worker"]
    assert worker_args(local_command(["seqlake", "worker", "--plan", "p"])) == ["worker", "--plan", "p"]
    assert app.status_key is not None
    assert f"s3://b/{app.status_key('r1')}" == RunLayout.in_bucket("b", "r1").status
    assert app.fault_var == faults.WORKER_VAR and faults.InjectedFaultError in app.injected_errors
    assert app.worker_image is image.IMAGE and app.settings is adapter.SETTINGS
    assert containers.container_name("abc:3", 2) == "seqlake-abc-3-2"


def test_the_local_cloud_names_no_variable_of_the_app_s() -> None:
    """The variables seqlake's users set are the adapter's (``App.settings``); the local cloud's own are
    ``LOCALCLOUD_*``; the worker image is the app's (``App.worker_image``)."""
    named = {}
    for path in sorted(Path(localcloud.__file__).parent.rglob("*.py")):
        found = re.findall(r"SEQLAKE_\w*|seqlake-worker", path.read_text())
        if found:
            named[path.name] = found
    assert named == {}


def _docstrings(tree: ast.AST) -> set[int]:
    """The string constants of ``tree`` that are a module's, class's or function's docstring (by ``id``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_no_code_string_of_the_local_cloud_names_seqlake() -> None:
    """The names the local cloud gives (its stack, roles, buckets, folders, cgroups, database) are its own
    (``localcloud-...``) or the app's (:class:`~localcloud.contract.App`); a docstring may name seqlake as an
    example of an app, a string the code uses may not."""
    named = []
    for path in sorted(Path(localcloud.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstrings(tree)
        named += [f"{path.name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and "seqlake" in node.value.lower()]
    assert named == []


def test_the_names_the_app_gives_are_seqlake_s() -> None:
    """The stack seqlake is deployed as locally (its functions' ARNs in docs/GRANTS.md, the roles and sessions
    in a user's AccessDenied), the database its queries default to (the template's), the progress display's
    word for the reducers' children (the state machine's job name)."""
    app = adapter.APP
    assert app.stack == "seqlake-local" and Deployer({"Resources": {}}).stack == app.stack
    assert (iam.platform_role(), iam.user_role(), iam.session_name()) == (
        "seqlake-local-platform", "seqlake-local-user", "seqlake-local")
    assert "function:seqlake-local-PlanFunction" in (REPO / "docs" / "GRANTS.md").read_text()
    template = load_template(REPO / "template.yaml")
    assert athena.default_database() == app.database == template["Parameters"]["GlueDatabaseName"]["Default"]
    reduce = steps.JOB_NAME_PREFIX[steps.Step.REDUCE_REGIONS]
    assert progress.array_unit(f"{reduce}r1") == "regions"
    assert progress.array_unit(f"{steps.JOB_NAME_PREFIX[steps.Step.PROCESS_SHARDS]}r1") == "shards"


def test_without_the_app_the_local_cloud_names_its_own() -> None:
    try:
        contract.use(contract.GENERIC)
        assert Deployer({"Resources": {}}).stack == "localcloud"
        assert (iam.platform_role(), iam.user_role(), iam.session_name()) == (
            "localcloud-platform", "localcloud-user", "localcloud")
        assert athena.default_database() == "default"  # Athena's own, for a query that names no database
        assert progress.array_unit("reduce-r1") == "children"
    finally:
        contract.use(adapter.APP)


def test_the_users_settings_are_the_documented_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each variable the adapter gives the local cloud is one docs/LOCAL_CLOUD.md tells seqlake's users of, and
    the local cloud reads it: the state folder's, for one."""
    docs = (REPO / "docs" / "LOCAL_CLOUD.md").read_text()
    for name in dataclasses.astuple(adapter.SETTINGS):
        assert re.search(rf"(?<![\w.]){re.escape(name)}\b", docs), name
    monkeypatch.delenv(adapter.SETTINGS.home, raising=False)
    assert default_home() == Path(".seqlake")
    monkeypatch.setenv("SEQLAKE_HOME", "/x")
    assert default_home() == Path("/x")


def test_without_the_app_the_local_cloud_knows_no_worker() -> None:
    try:
        contract.use(contract.GENERIC)
        assert local_command(["seqlake", "worker"]) == ["seqlake", "worker"]
        assert worker_args(local_command(["python3", "-m", "seqlake", "worker"])) is None
        assert emulator_errors.counted(faults.InjectedFaultError("x"))
        assert not emulator_errors.counted(errors.InjectedFaultError("x"))
        assert default_home() == Path(".localcloud") and containers.var() == "LOCALCLOUD_CONTAINERS"
    finally:
        contract.use(adapter.APP)
    assert not emulator_errors.counted(faults.InjectedFaultError("x"))


def test_the_sigv4_signing_key_is_the_app_s() -> None:
    from localcloud import patches
    from seqlake.base import clients

    assert patches.signing_key("s3cr3t", "20261205", "us-east-1", "s3") == \
        clients.signing_key("s3cr3t", "20261205", "us-east-1", "s3")
