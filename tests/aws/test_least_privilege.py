"""Each grant enough: the template as SAM renders it (its generated policies, the AWS managed policies it
attaches) grants no ``*`` action, and ``*`` as a resource only for actions AWS authorizes on nothing
narrower. Static, beside checkov; which grants are *needed* is the local sweep's
(``python -m seqlake.local.grants``, ``make grants``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from .conftest import REPO, rendered
from .test_template import STAR_RESOURCE_REASONS

#: the AWS managed policies the rendered template attaches, and why each is acceptable (they hold "*"
#: resources; AWS maintains them)
AWS_MANAGED_REASONS = {
    "service-role/AWSLambdaBasicExecutionRole": "SAM adds it to every function: its own log group and streams",
    "AWSXrayWriteOnlyAccess": "SAM adds it with Tracing: Active (X-Ray has no resource-level permissions)",
    "service-role/AWSLambdaSQSQueueExecutionRole": (
        "SAM adds it for the start function's SQS event (the settle queue): sqs:ReceiveMessage, DeleteMessage "
        "and GetQueueAttributes on any queue; SAM offers no narrower choice for an SQS event source"
    ),
    "service-role/AmazonEC2ContainerServiceforEC2Role": "the ECS agent on the Batch instances (AWS's documented role)",
}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def identity_statements(cfn: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(role or policy id, statement) of every identity policy: roles' inline policies, managed policies and
    ``AWS::IAM::Policy`` resources; a conditional statement (``Fn::If``) as its present branch."""
    out = []
    for lid, r in cfn["Resources"].items():
        p = r.get("Properties", {})
        docs = []
        if r["Type"] == "AWS::IAM::Role":
            docs = [pol["PolicyDocument"] for pol in p.get("Policies", [])]
        elif r["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
            docs = [p["PolicyDocument"]]
        for doc in docs:
            for written in _list(doc["Statement"]):
                out.append((lid, written["Fn::If"][1] if "Fn::If" in written else written))
    return out


def widening(cfn: dict[str, Any]) -> list[str]:
    """What grants more than the app needs: a ``*`` action (or ``service:*``), a ``*`` resource for an action
    AWS authorizes on narrower ARNs, an AWS managed policy without a reason."""
    found = []
    for lid, st in identity_statements(cfn):
        if st.get("Effect") != "Allow":
            continue
        if "NotAction" in st or "NotResource" in st:
            found.append(f"{lid}: NotAction / NotResource grant everything else")
        actions = [str(a) for a in _list(st.get("Action", []))]
        found += [f"{lid}: action {a}" for a in actions if a == "*" or a.endswith(":*")]
        if "*" in _list(st.get("Resource", [])):
            found += [f"{lid}: {a} on Resource '*'" for a in actions if a not in STAR_RESOURCE_REASONS]
    for lid, r in cfn["Resources"].items():
        for arn in _list(r.get("Properties", {}).get("ManagedPolicyArns", [])):
            name = json.dumps(arn).split(":iam::aws:policy/")[-1].rstrip('"}')
            if name not in AWS_MANAGED_REASONS:
                found.append(f"{lid}: AWS managed policy {name} without a reason")
    return found


@pytest.fixture(scope="module")
def cfn(template: dict[str, Any]) -> dict[str, Any]:
    return rendered(template)


def test_the_rendered_template_grants_nothing_wider_than_aws_allows(cfn: dict[str, Any]) -> None:
    statements = identity_statements(cfn)
    roles = {lid for lid, r in cfn["Resources"].items() if r["Type"] == "AWS::IAM::Role"}
    # every role's policies are looked at: the functions', the state machine's, Batch's, the lab member's
    assert {"StartRunFunctionRole", "PlanFunctionRole", "CommitFunctionRole", "RecordFailureFunctionRole",
            "PipelineStateMachineRole", "WorkerJobRole", "BatchInstanceRole"} <= roles
    assert {lid for lid, _ in statements} >= roles - {"BatchInstanceRole"} | {"LabMemberPolicy"}
    assert widening(cfn) == []


def test_widening_is_caught(cfn: dict[str, Any]) -> None:
    cfn = copy.deepcopy(cfn)
    worker = cfn["Resources"]["WorkerJobRole"]["Properties"]
    statement = worker["Policies"][0]["PolicyDocument"]["Statement"]
    statement.append({"Effect": "Allow", "Action": ["s3:*"], "Resource": "arn:aws:s3:::b/*"})
    statement.append({"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"})
    worker.setdefault("ManagedPolicyArns", []).append("arn:aws:iam::aws:policy/AmazonS3FullAccess")
    assert widening(cfn) == [
        "WorkerJobRole: action s3:*",
        "WorkerJobRole: s3:GetObject on Resource '*'",
        "WorkerJobRole: AWS managed policy AmazonS3FullAccess without a reason",
    ]


def test_deploy_md_permissions_are_the_templates(template: dict[str, Any]) -> None:
    """docs/DEPLOY.md's permissions block is generated from template.yaml, and a changed grant changes it."""
    from seqlake.aws import permissions

    doc = permissions.DOC.read_text()
    assert permissions.replace_block(doc, permissions.render(permissions.load())) == doc, (
        "run python -m seqlake.aws.permissions")
    narrowed = permissions.load()
    worker = narrowed["Resources"]["WorkerJobRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    removed = worker.pop(0)
    assert f"| {removed['Sid']} |" in permissions.render(permissions.load())
    assert f"| {removed['Sid']} |" not in permissions.render(narrowed)


def test_an_access_denied_is_logged_with_its_action_and_resource(monkeypatch: Any) -> None:
    from botocore.exceptions import ClientError

    from seqlake.aws import observability as obs
    from seqlake.base.errors import access_denied

    message = ('User: arn:aws:sts::1:assumed-role/r/s is not authorized to perform: s3:PutObject on resource: '
               '"arn:aws:s3:::b/runs/x" because no identity-based policy allows the s3:PutObject action')
    err = ClientError({"Error": {"Code": "AccessDenied", "Message": message}}, "PutObject")
    logged: list[tuple[str, dict[str, str]]] = []
    monkeypatch.setattr(obs.logger, "error", lambda msg, extra: logged.append((msg, extra)))

    @obs.logs_access_denied
    def handler(event: dict[str, Any], context: object) -> None:
        raise err

    with pytest.raises(ClientError):
        handler({}, None)
    assert logged == [("access denied", {"action": "s3:PutObject", "resource": "arn:aws:s3:::b/runs/x"})]
    assert access_denied(ValueError("s3:PutObject on resource: x")) is None


def test_every_statement_no_local_run_needs_is_in_the_template_with_its_reason(cfn: dict[str, Any]) -> None:
    """``make grants`` accepts a statement that no local run needs only with a reason; each such entry names a
    statement that exists (a renamed or removed one must not leave its excuse behind), and the template
    says so beside it."""
    from seqlake.local.grants import NOT_EXERCISED

    sids = {(lid, st.get("Sid")) for lid, st in identity_statements(cfn)}
    text = (REPO / "template.yaml").read_text()
    for (role, sid), reason in NOT_EXERCISED.items():
        assert (role, sid) in sids, f"{role} {sid}: {reason}"
        beside = text.split(f"- Sid: {sid}\n", 1)[1].splitlines()[0]
        assert "make grants: not exercised locally" in beside, sid
