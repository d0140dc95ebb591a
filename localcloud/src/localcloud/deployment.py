"""The app deployed into moto: ``template.yaml`` packaged, translated (cached), created; what it made.

Also the deployment's later changes: a template parameter given a new value in the functions that
``Ref`` it (``sam deploy --parameter-overrides``), and which functions a run calls.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from localcloud import contract, iam
from localcloud.aws_texts import EXECUTION_STATUS_SOURCE
from localcloud.deployer import ACCOUNT, REGION, Deployer
from localcloud.lambdas import FunctionSpec, LambdaRunner
from localcloud.packaging import ARTIFACT_BUCKET, load_template, package
from localcloud.translate import translate

#: the template's file name in the app's folder
TEMPLATE = "template.yaml"


def user_cache_dir() -> Path:
    """Files derived from others that any state folder may share (the translated template): the app's cache
    folder (:attr:`.contract.App.cache_dir`), else ``$XDG_CACHE_HOME/localcloud`` (``~/.cache/localcloud``)."""
    given = contract.app().cache_dir
    if given is not None:
        return given()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "localcloud"


#: template parameters the local cloud sets: a folder under incoming/ is quiet after 2 s (minutes on AWS)
LOCAL_PARAMETERS = {"StartQuietPeriodSeconds": "2"}
#: template parameter types the local cloud fills with its own network stand-ins
_SUBNET_TYPES = ("AWS::EC2::Subnet::Id", "List<AWS::EC2::Subnet::Id>")
_SG_TYPES = ("AWS::EC2::SecurityGroup::Id", "List<AWS::EC2::SecurityGroup::Id>")
_VPC_TYPES = ("AWS::EC2::VPC::Id",)

#: service name -> a client of the local cloud
Clients = Callable[[str], Any]


@dataclass
class Deployment:
    """What the template made, as the commands and the runners need it."""

    #: the translated (CloudFormation) template
    cfn: dict[str, Any]
    #: logical id -> physical id
    physical: dict[str, Any]
    outputs: dict[str, Any]
    #: the data bucket (the one whose events reach EventBridge)
    bucket: str
    state_machine_arn: str
    database: str
    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    event_source_mappings: list[dict[str, Any]] = field(default_factory=list)
    #: resource ARN -> its resource policies (bucket, queues, Lambda permissions), for the local IAM
    resource_policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _network_parameters(template: dict[str, Any]) -> dict[str, Any]:
    specs = template.get("Parameters", {})
    wanted = {n: str(s.get("Type", "")) for n, s in specs.items()}
    if not any(t in _SUBNET_TYPES + _SG_TYPES + _VPC_TYPES for t in wanted.values()):
        return {}
    # The account's network, which a real deployment is given as parameters. Made in moto's EC2
    # backend directly (moto is pinned): through the API, moto would parse its own copy of the 1 MB
    # EC2 model to answer three calls, about half a second of every start.
    from moto.ec2.models import ec2_backends

    ec2 = ec2_backends[ACCOUNT][REGION]
    vpc = ec2.create_vpc(cidr_block="10.0.0.0/16").id
    subnet = ec2.create_subnet(vpc_id=vpc, cidr_block="10.0.0.0/24").id
    sg = ec2.create_security_group(name="localcloud", description="the local cloud's network", vpc_id=vpc).id
    out: dict[str, Any] = {}
    for name, kind in wanted.items():
        if kind in _SUBNET_TYPES:
            out[name] = [subnet] if kind.startswith("List<") else subnet
        elif kind in _SG_TYPES:
            out[name] = [sg] if kind.startswith("List<") else sg
        elif kind in _VPC_TYPES:
            out[name] = vpc
    return out


def translate_cached(template: dict[str, Any], state_cache: Path) -> dict[str, Any]:
    """SAM -> CloudFormation, cached by the packaged template's hash (the code zips' hashes and the
    inlined state machine are part of it) in the user's cache folder, shared by every state folder
    (else in ``state_cache``): importing the translator and translating take about a second of CPU."""
    digest = hashlib.sha256(
        json.dumps([importlib.metadata.version("aws-sam-translator"), template], sort_keys=True).encode()
    ).hexdigest()[:24]
    name = f"cloudformation-{digest}.json"
    folders = [user_cache_dir(), state_cache]
    for folder in folders:
        with contextlib.suppress(OSError, ValueError):
            result: dict[str, Any] = json.loads((folder / name).read_text())
            return result
    cfn = translate(template)
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / f"{name}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(cfn))
            tmp.replace(folder / name)
            break
        except OSError:  # a read-only home: the state folder keeps it
            continue
    return cfn


def deploy(app: Path, clients: Clients, endpoint: str, state_cache: Path,
           overrides: Mapping[str, str] | None = None) -> Deployment:
    """Package ``app``'s template into the artifact bucket, translate it and create its resources;
    ``overrides``: template parameters given values, as ``sam deploy --parameter-overrides`` does."""
    s3 = clients("s3")
    s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    packaged = package(
        load_template(app / TEMPLATE), app, lambda b, k, body: s3.put_object(Bucket=b, Key=k, Body=body)
    )
    cfn = translate_cached(packaged.template, state_cache)
    parameters = {**_network_parameters(cfn), **LOCAL_PARAMETERS, **(overrides or {})}
    iam.materialize_managed_policies(cfn)  # the AWS managed policies the roles attach
    deployer = Deployer(cfn, parameters, endpoint_url=endpoint, clients=clients)
    outputs = deployer.deploy()
    resources = cfn["Resources"]

    def physical(kind: str) -> list[Any]:
        made = deployer.physical
        return [made[lid] for lid, r in resources.items() if r["Type"] == kind and lid in made]

    buckets = physical("AWS::S3::Bucket")
    bridged = [
        deployer.physical[lid]
        for lid, r in resources.items()
        if r["Type"] == "AWS::S3::Bucket"
        and r.get("Properties", {}).get("NotificationConfiguration", {}).get("EventBridgeConfiguration")
    ]
    databases = physical("AWS::Glue::Database")
    lam = clients("lambda")
    functions: dict[str, FunctionSpec] = {}
    for lid, code_dir in packaged.code_dirs.items():
        conf = lam.get_function_configuration(FunctionName=deployer.physical[lid])
        functions[conf["FunctionName"]] = FunctionSpec(
            name=conf["FunctionName"],
            code_dir=code_dir,
            handler=conf["Handler"],
            environment=conf.get("Environment", {}).get("Variables", {}),
            timeout=int(conf.get("Timeout", 60)),
            memory=int(conf.get("MemorySize", 512)),
            arn=conf["FunctionArn"],
            dead_letter_arn=deployer.dead_letters.get(conf["FunctionName"]),
            role=conf.get("Role", ""),
        )
    return Deployment(
        cfn=cfn,
        physical=deployer.physical,
        outputs=outputs,
        bucket=(bridged or buckets)[0],
        state_machine_arn=physical("AWS::StepFunctions::StateMachine")[0],
        database=databases[0] if databases else contract.app().database,
        functions=functions,
        event_source_mappings=deployer.event_source_mappings,
        resource_policies=deployer.resource_policies,
    )


def instance_role(deployment: Deployment) -> str:
    """The role of the Batch instances (their instance profile's): the ECS agent's, which writes the
    containers' logs (the job definitions run on EC2, without an execution role)."""
    resources = deployment.cfn["Resources"]
    for lid, res in resources.items():
        if res["Type"] == "AWS::IAM::InstanceProfile" and lid in deployment.physical:
            for role in res.get("Properties", {}).get("Roles", []):
                name = deployment.physical.get(role.get("Ref", "")) if isinstance(role, dict) else role
                if name:
                    return iam.role_arn(str(name))
    return ""


def override_parameter(deployment: Deployment, lambdas: LambdaRunner, lam: Any, name: str, value: str) -> list[str]:
    """Give template parameter ``name`` a new value in the functions' environments that ``Ref`` it
    (``sam deploy --parameter-overrides`` for this process); returns the functions changed."""
    changed = []
    for lid, res in deployment.cfn["Resources"].items():
        variables = res.get("Properties", {}).get("Environment", {}).get("Variables", {})
        keys = [k for k, v in variables.items() if v == {"Ref": name}]
        if res["Type"] != "AWS::Lambda::Function" or not keys:
            continue
        fn = deployment.physical[lid]
        env = dict(lambdas.functions[fn].environment)
        env.update(dict.fromkeys(keys, value))
        lam.update_function_configuration(FunctionName=fn, Environment={"Variables": env})
        lambdas.update(replace(lambdas.functions[fn], environment=env))
        changed.append(fn)
    if not changed:
        raise ValueError(f"no function's environment refers to the template parameter {name}")
    return changed


def _function_name(task: dict[str, Any]) -> str | None:
    """The Lambda function a Task state invokes (``lambda:invoke`` or a function ARN as resource)."""
    target = str((task.get("Parameters") or {}).get("FunctionName") or task.get("Resource") or "")
    if ":lambda:" in target and ":function:" in target:
        return target.split(":")[6]  # arn:aws:lambda:region:account:function:NAME[:qualifier]
    return None


def execution_end_functions(deployment: Deployment) -> set[str]:
    """The functions the rules on Step Functions' execution events invoke (the backstop: an end no step
    recorded, i.e. only a run that failed unrecorded calls it)."""
    out: set[str] = set()
    for r in deployment.cfn.get("Resources", {}).values():
        pattern = r.get("Properties", {}).get("EventPattern") or {}
        if r.get("Type") != "AWS::Events::Rule" or EXECUTION_STATUS_SOURCE not in pattern.get("source", []):
            continue
        for target in r["Properties"].get("Targets", []):
            arn = target.get("Arn")
            if isinstance(arn, dict) and "Fn::GetAtt" in arn:
                out.add(str(deployment.physical[arn["Fn::GetAtt"][0]]))
    return out


def state_machine_functions(definition: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(every function the definition invokes, those reached without passing through a Catch)."""
    called: set[str] = set()
    on_success: set[str] = set()

    def walk(machine: dict[str, Any]) -> None:
        states: dict[str, Any] = machine.get("States", {})
        for state in states.values():
            name = _function_name(state) if state.get("Type") == "Task" else None
            if name:
                called.add(name)
        todo, seen = [machine.get("StartAt")], set()
        while todo:
            current = todo.pop()
            if current in seen or current not in states:
                continue
            seen.add(current)
            state = states[current]
            name = _function_name(state) if state.get("Type") == "Task" else None
            if name:
                on_success.add(name)
            todo += [state.get("Next"), state.get("Default"), *(c.get("Next") for c in state.get("Choices", []))]
            for sub in [*state.get("Branches", []), state.get("ItemProcessor"), state.get("Iterator")]:
                if sub:
                    walk(sub)

    walk(definition)
    return called, on_success
