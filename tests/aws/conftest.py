"""Fixtures of the AWS app's tests: the template as data, moto resources made from the template's own
definitions, the sample events, the handlers loaded from their folders, a Lambda context."""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import io
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from moto import mock_aws
from samtranslator.yaml_helper import yaml_parse

from localcloud.deployer import iceberg_table_input
from seqlake.base import clients

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "events"
ACCOUNT, REGION = "123456789012", "us-east-1"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "seqlake-dev",
}
_SUB = re.compile(r"\$\{([^!}][^}]*)\}")


def load_template() -> dict[str, Any]:
    parsed: dict[str, Any] = yaml_parse((REPO / "template.yaml").read_text())
    return parsed


def rendered(template: dict[str, Any]) -> dict[str, Any]:
    """The CloudFormation SAM makes of the template (code locations stand in: they change no policy)."""
    import copy
    import os

    from samtranslator.translator.transform import transform

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    tpl = copy.deepcopy(template)
    for r in tpl["Resources"].values():
        p = r.get("Properties", {})
        if r["Type"] == "AWS::Serverless::Function":
            p["CodeUri"] = "s3://artifacts/code.zip"
        elif r["Type"] == "AWS::Serverless::LayerVersion":
            p["ContentUri"] = "s3://artifacts/layer.zip"
        elif r["Type"] == "AWS::Serverless::StateMachine":
            p["DefinitionUri"] = {"Bucket": "artifacts", "Key": "pipeline.asl.json"}
    out: dict[str, Any] = transform(tpl, {}, NoManagedPolicies())
    return out


def load_event(name: str) -> dict[str, Any]:
    """One sample event from events/ (the same files the docs show)."""
    data: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return data


class Resolver:
    """Just enough of CloudFormation's intrinsics to build moto resources from the template: Ref and
    Fn::Sub over parameter defaults, pseudo parameters and the physical names of resources made so far."""

    def __init__(self, template: dict[str, Any], names: dict[str, str] | None = None) -> None:
        self.values: dict[str, Any] = dict(PSEUDO)
        for k, p in template.get("Parameters", {}).items():
            if "Default" in p:
                self.values[k] = p["Default"]
        self.values.update(names or {})

    def __call__(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self(v) for v in node]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Ref"}:
            return self.values[node["Ref"]]
        if set(node) == {"Fn::Sub"}:
            text, local = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]
            values = {**self.values, **{k: self(v) for k, v in local.items()}}
            return _SUB.sub(lambda m: str(values[m.group(1)]), text)
        if set(node) == {"Fn::Join"}:
            return str(node["Fn::Join"][0]).join(str(self(v)) for v in node["Fn::Join"][1])
        if set(node) == {"Fn::Base64"}:
            return base64.b64encode(str(self(node["Fn::Base64"])).encode()).decode()
        return {k: self(v) for k, v in node.items()}


@dataclass
class Deployed:
    """The resources the handlers touch, created in moto from template.yaml."""

    template: dict[str, Any]
    bucket: str
    database: str
    state_machine_arn: str
    resolve: Resolver
    role_arn: str = ""

    def s3(self) -> Any:
        return boto3.client("s3", region_name=REGION)

    def put(self, key: str, body: bytes) -> str:
        etag: str = self.s3().put_object(Bucket=self.bucket, Key=key, Body=body)["ETag"]
        return etag.strip('"')

    def get(self, key: str) -> bytes:
        body: bytes = self.s3().get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return body

    def keys(self, prefix: str) -> list[str]:
        """The bucket's keys under ``prefix``, sorted."""
        listed = self.s3().list_objects_v2(Bucket=self.bucket, Prefix=prefix).get("Contents", [])
        return sorted(str(o["Key"]) for o in listed)

    def event_for(self, key: str) -> dict[str, Any]:
        """A real-shaped Object Created event for an object already in the bucket."""
        head = self.s3().head_object(Bucket=self.bucket, Key=key)
        ev = load_event("s3-object-created-single.json")
        ev["detail"]["bucket"]["name"] = self.bucket
        ev["detail"]["object"].update(key=key, size=head["ContentLength"], etag=head["ETag"].strip('"'))
        return ev


def partitions(deployed: Deployed, table: str) -> list[list[str]]:
    """The runs ``table`` shows, as partition values (``[run_id]``): a Hive table's registered partitions, an
    Iceberg table's committed runs (its current snapshot's)."""
    from seqlake.aws.catalog import iceberg_catalog
    from seqlake.lake import iceberg
    from seqlake.lake.tables import BY_NAME

    if BY_NAME[table].is_iceberg:
        return [[run] for run in iceberg.committed_runs(iceberg_catalog(), deployed.database, table)]
    glue = boto3.client("glue", region_name=REGION)
    return [p["Values"] for p in glue.get_partitions(DatabaseName=deployed.database, TableName=table)["Partitions"]]


def read_status(deployed: Deployed, run_id: str) -> dict[str, Any]:
    body = deployed.s3().get_object(Bucket=deployed.bucket, Key=f"runs/{run_id}/status.json")["Body"].read()
    data: dict[str, Any] = json.loads(body)
    return data


def execution_request(ex: dict[str, Any]) -> dict[str, Any]:
    """The run request an execution's input points at (``runs/<id>/request.json``), checked against
    the input's digest."""
    from seqlake.aws.request import ExecutionInput

    return ExecutionInput.from_dict(json.loads(ex["input"])).load().to_dict()


def runs_row(deployed: Deployed, run_id: str) -> dict[str, Any]:
    """The run's one row in the ``runs`` table's Parquet file."""
    key = f"results/runs/run_id={run_id}/part-00000.parquet"
    body = deployed.s3().get_object(Bucket=deployed.bucket, Key=key)["Body"].read()
    [row] = pq.read_table(io.BytesIO(body)).to_pylist()
    return dict(row)


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": "seqlake",
    "POWERTOOLS_SERVICE_NAME": "seqlake",
}


def _asl(template: dict[str, Any], resolve: Resolver, fake_arns: dict[str, str]) -> str:
    text = (REPO / "statemachines" / "pipeline.asl.json").read_text()
    subs = template["Resources"]["PipelineStateMachine"]["Properties"]["DefinitionSubstitutions"]
    for k, v in subs.items():
        value = fake_arns.get(k) or resolve(v)
        text = text.replace("${" + k + "}", str(value))
    return text


@pytest.fixture(scope="module")
def aws_stack(template: dict[str, Any]) -> Iterator[Deployed]:
    """One moto session per test module (boto3 clients are slow to make): fake credentials, Powertools
    tracing and metrics off, and the bucket, Glue database and tables, and state machine created from
    their definitions in template.yaml."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in _ENV.items():
            mp.setenv(k, v)
        for k in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
            mp.delenv(k, raising=False)
        clients.reset()
        with mock_aws():
            yield _create(template)
        clients.reset()


def _create_tables(template: dict[str, Any], resolve: Any, s3: Any, glue: Any, iceberg_only: bool = False) -> None:
    """The template's Glue tables; an Iceberg one with its first metadata, as Glue (and the local cloud's
    deployer) makes it from ``OpenTableFormatInput``. ``iceberg_only``: (re)make just those, empty."""
    for r in template["Resources"].values():
        if r["Type"] != "AWS::Glue::Table" or (iceberg_only and "OpenTableFormatInput" not in r["Properties"]):
            continue
        p = resolve(r["Properties"])
        table_input = p["TableInput"]
        if "OpenTableFormatInput" in p:
            table_input = iceberg_table_input(s3, table_input, p["OpenTableFormatInput"]["IcebergInput"])
        if iceberg_only:
            glue.delete_table(DatabaseName=p["DatabaseName"], Name=table_input["Name"])
        glue.create_table(DatabaseName=p["DatabaseName"], TableInput=table_input)


def _create(template: dict[str, Any]) -> Deployed:
    res = template["Resources"]
    resolve = Resolver(template)
    bucket = resolve(res["DataBucket"]["Properties"]["BucketName"])
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={"EventBridgeConfiguration": {}})
    glue = boto3.client("glue", region_name=REGION)
    db_input = resolve(res["GlueDatabase"]["Properties"]["DatabaseInput"])
    glue.create_database(DatabaseInput=db_input)
    resolve.values.update(DataBucket=bucket, GlueDatabase=db_input["Name"])
    _create_tables(template, resolve, s3, glue)
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName="sfn", AssumeRolePolicyDocument=json.dumps(trust)
    )["Role"]["Arn"]
    return Deployed(template, bucket, db_input["Name"], "", resolve, role)


@pytest.fixture
def deployed(aws_stack: Deployed) -> Deployed:
    """The module's stack with an empty bucket and a fresh state machine (no executions yet)."""
    s3 = aws_stack.s3()
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=aws_stack.bucket):
        objs = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("Versions", [])]
        objs += [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("DeleteMarkers", [])]
        if objs:
            s3.delete_objects(Bucket=aws_stack.bucket, Delete={"Objects": objs})
    glue = boto3.client("glue", region_name=REGION)
    _create_tables(aws_stack.template, aws_stack.resolve, s3, glue, iceberg_only=True)  # their metadata went
    for table in glue.get_tables(DatabaseName=aws_stack.database)["TableList"]:
        parts = glue.get_partitions(DatabaseName=aws_stack.database, TableName=table["Name"])["Partitions"]
        if parts:
            glue.batch_delete_partition(
                DatabaseName=aws_stack.database,
                TableName=table["Name"],
                PartitionsToDelete=[{"Values": p["Values"]} for p in parts],
            )
    fn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:"
    fake = {
        "PlanFunctionArn": fn + "plan",
        "CommitFunctionArn": fn + "commit",
        "RecordFailureFunctionArn": fn + "record",
        "JobQueueArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/q",
        "JobDefinitionArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:job-definition/seqlake-dev-worker:1",
    }
    # a new state machine per test: moto cannot delete executions
    name = f"{aws_stack.resolve(aws_stack.template['Resources']['PipelineStateMachine']['Properties']['Name'])}"
    name += f"-{uuid.uuid4().hex[:8]}"
    arn = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
        name=name, definition=_asl(aws_stack.template, aws_stack.resolve, fake), roleArn=aws_stack.role_arn
    )["stateMachineArn"]
    return dataclasses.replace(aws_stack, state_machine_arn=arn)


@pytest.fixture
def lambda_context() -> Any:
    @dataclass
    class Context:
        function_name: str = "seqlake-test"
        memory_limit_in_mb: int = 512
        invoked_function_arn: str = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:seqlake-test"
        aws_request_id: str = "c0ffee00-1111-2222-3333-444455556666"
        function_version: str = "$LATEST"

        def get_remaining_time_in_millis(self) -> int:
            return 60_000

    return Context()


@pytest.fixture(scope="session")
def handler() -> Callable[[str], ModuleType]:
    """Load ``functions/<name>/app.py`` under a unique module name (every function has an app.py)."""
    cache: dict[str, ModuleType] = {}

    def load(name: str) -> ModuleType:
        if name not in cache:
            spec = importlib.util.spec_from_file_location(f"seqlake_fn_{name}", REPO / "functions" / name / "app.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            cache[name] = module
        return cache[name]

    return load
