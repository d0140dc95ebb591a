"""A small CloudFormation deployer for the local cloud, over the public boto3 API only.

moto's own ``CreateStack`` cannot be used: it skips Glue and Athena resources with a warning, ignores
the bucket's EventBridge configuration and ``DefinitionSubstitutions``, and drops ``Ref`` s to what it
skipped. This deployer walks the translated template's
resources in dependency order, resolves the intrinsic functions and conditions, and creates each
resource with one creator per type. A type without a creator is an error, never a silent skip.
"""

from __future__ import annotations

import base64
import graphlib
import json
import re
from collections.abc import Callable
from typing import Any

import boto3

from localcloud import contract

ACCOUNT, REGION, PARTITION = "123456789012", "us-east-1", "aws"
_SUB = re.compile(r"\$\{([^!}][^}]*)\}")
#: a resolved value that must disappear from its list or mapping (``AWS::NoValue``)
_NO_VALUE = object()


def _refs(node: Any) -> set[str]:
    """Names referenced by intrinsics under ``node`` (resources, parameters and pseudo parameters)."""
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    if not isinstance(node, dict):
        return set()
    if "Ref" in node and isinstance(node["Ref"], str):
        return {node["Ref"]}
    if "Fn::GetAtt" in node:
        ga = node["Fn::GetAtt"]
        return {ga.split(".")[0] if isinstance(ga, str) else ga[0]}
    if "Fn::Sub" in node:
        text, variables = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]
        return {m.split(".")[0] for m in _SUB.findall(text) if m not in variables} | _refs(list(variables.values()))
    return _refs(list(node.values()))


def _as_list(v: Any) -> list[Any]:
    return [] if v is None else v if isinstance(v, list) else [v]


class Deployer:
    def __init__(
        self,
        template: dict[str, Any],
        parameters: dict[str, Any] | None = None,
        stack: str | None = None,
        endpoint_url: str | None = None,
        clients: Callable[[str], Any] | None = None,
    ) -> None:
        self.template = template
        #: a client factory to share (the local cloud's: one client per service for the whole process)
        self._client_factory = clients
        #: the stack's name (``None``: the app's, :attr:`.contract.App.stack`)
        self.stack = stack = stack or contract.app().stack
        self.endpoint_url = endpoint_url
        self.values: dict[str, Any] = {
            "AWS::AccountId": ACCOUNT,
            "AWS::Region": REGION,
            "AWS::Partition": PARTITION,
            "AWS::StackName": stack,
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/local",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": _NO_VALUE,
        }
        given = parameters or {}
        for name, spec in template.get("Parameters", {}).items():
            value = given.get(name, spec.get("Default"))
            if value is None:
                raise ValueError(f"template parameter {name} has no value and no default")
            kind = str(spec.get("Type", ""))
            if kind == "CommaDelimitedList" or kind.startswith("List<"):
                value = value if isinstance(value, list) else [s.strip() for s in str(value).split(",") if s.strip()]
            else:
                value = str(value)  # CloudFormation gives every parameter, Number too, to Ref as a string
            self.values[name] = value
        self.physical: dict[str, Any] = {}
        self.attrs: dict[str, dict[str, Any]] = {}
        #: resolved properties of each AWS::Lambda::EventSourceMapping: the local cloud polls them itself
        self.event_source_mappings: list[dict[str, Any]] = []
        #: resource ARN -> its resource policies (bucket and queue policies, Lambda permissions), resolved:
        #: the local cloud evaluates them itself (``localcloud/policy.py``); moto would ignore their conditions
        self.resource_policies: dict[str, list[dict[str, Any]]] = {}
        #: function name -> its DeadLetterConfig's target ARN (moto's Lambda keeps no DeadLetterConfig)
        self.dead_letters: dict[str, str] = {}
        self.conditions: dict[str, bool] = {}
        for name, cond in template.get("Conditions", {}).items():
            self.conditions[name] = self._condition(cond)
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if self._client_factory is not None:
            return self._client_factory(service)
        if service not in self._clients:
            self._clients[service] = boto3.client(service, region_name=REGION, endpoint_url=self.endpoint_url)
        return self._clients[service]

    def name(self, lid: str, maxlen: int = 64) -> str:
        return f"{self.stack}-{lid}"[:maxlen]

    # ---------------------------------------------------------------- conditions and intrinsics
    def _condition(self, node: Any) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            ((k, v),) = node.items()
            if k == "Condition":
                return self.conditions[v] if v in self.conditions else self._condition(self.template["Conditions"][v])
            if k == "Fn::Equals":
                return bool(str(self.resolve(v[0])) == str(self.resolve(v[1])))
            if k == "Fn::Not":
                return not self._condition(v[0])
            if k == "Fn::And":
                return all(self._condition(c) for c in v)
            if k == "Fn::Or":
                return any(self._condition(c) for c in v)
        raise ValueError(f"unsupported condition {node!r}")

    def resolve(self, node: Any) -> Any:  # noqa: C901, PLR0911, PLR0912 - one branch per intrinsic
        if isinstance(node, list):
            return [x for x in (self.resolve(v) for v in node) if x is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((k, v),) = node.items()
            if k == "Ref":
                return self.physical[v] if v in self.physical else self.values[v]
            if k == "Fn::GetAtt":
                lid, att = v.split(".", 1) if isinstance(v, str) else v
                if att not in self.attrs.get(lid, {}):
                    raise NotImplementedError(f"Fn::GetAtt {lid}.{att}: attribute not provided locally")
                return self.attrs[lid][att]
            if k == "Fn::Sub":
                return self._sub(v)
            if k == "Fn::Join":
                return str(v[0]).join(str(x) for x in self.resolve(v[1]))
            if k == "Fn::Select":
                return self.resolve(v[1])[int(self.resolve(v[0]))]
            if k == "Fn::Split":
                return str(self.resolve(v[1])).split(v[0])
            if k == "Fn::If":
                return self.resolve(v[1] if self.conditions[v[0]] else v[2])
            if k == "Fn::Base64":
                return base64.b64encode(str(self.resolve(v)).encode()).decode()
            if k == "Fn::ToJsonString":
                return json.dumps(self.resolve(v))
            if k == "Fn::FindInMap":
                mapping, top, second = (self.resolve(x) for x in v)
                return self.template["Mappings"][mapping][top][second]
            if k == "Fn::GetAZs":
                return [f"{REGION}a", f"{REGION}b", f"{REGION}c"]
            if k.startswith("Fn::"):
                raise NotImplementedError(f"intrinsic function {k} is not supported locally")
        out = {}
        for key, value in node.items():
            r = self.resolve(value)
            if r is not _NO_VALUE:
                out[key] = r
        return out

    def _sub(self, v: Any) -> str:
        text, local = (v, {}) if isinstance(v, str) else (v[0], self.resolve(v[1]))

        def replace(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in local:
                return str(local[name])
            if "." in name and name.split(".")[0] in self.attrs:
                return str(self.resolve({"Fn::GetAtt": name.split(".", 1)}))
            return str(self.resolve({"Ref": name}))

        return _SUB.sub(replace, text).replace("${!", "${")

    # ---------------------------------------------------------------- walk
    def deploy(self) -> dict[str, Any]:
        """Create every resource; returns the resolved Outputs."""
        resources = self.template["Resources"]
        graph = {
            lid: {d for d in _refs(r.get("Properties", {})) | set(_as_list(r.get("DependsOn"))) if d in resources}
            for lid, r in resources.items()
        }
        for lid in graphlib.TopologicalSorter(graph).static_order():
            res = resources[lid]
            if res.get("Condition") and not self.conditions[res["Condition"]]:
                continue
            create = CREATORS.get(res["Type"])
            if create is None:
                raise NotImplementedError(f"{lid}: the local cloud has no creator for {res['Type']}")
            ref, attrs = create(self, lid, self.resolve(res.get("Properties", {})))
            self.physical[lid], self.attrs[lid] = ref, attrs
        outputs = {}
        for key, out in self.template.get("Outputs", {}).items():
            if out.get("Condition") and not self.conditions[out["Condition"]]:
                continue
            outputs[key] = self.resolve(out["Value"])
        return outputs


def to_api(client: Any, operation: str, props: dict[str, Any]) -> dict[str, Any]:
    """CloudFormation property names -> an API operation's input names (case-insensitive, recursive).

    Keys of maps (tags, environment variables, parameters) are kept; numbers and booleans that
    templates give as strings are converted to the shape's type.
    """
    shape = client.meta.service_model.operation_model(operation).input_shape

    def walk(v: Any, s: Any) -> Any:  # noqa: PLR0911 - one return per shape type
        if s.type_name == "structure" and isinstance(v, dict):
            members = {k.lower(): k for k in s.members}
            return {
                members.get(k.lower(), k): walk(x, s.members[members[k.lower()]]) if k.lower() in members else x
                for k, x in v.items()
            }
        if s.type_name == "list" and isinstance(v, list):
            return [walk(x, s.member) for x in v]
        if s.type_name == "map" and isinstance(v, dict):
            return {k: walk(x, s.value) for k, x in v.items()}
        if s.type_name in ("integer", "long") and isinstance(v, str):
            return int(v)
        if s.type_name == "boolean" and isinstance(v, str):
            return v.lower() == "true"
        if s.type_name == "string" and isinstance(v, dict | list):
            return json.dumps(v)
        return v

    result: dict[str, Any] = walk(props, shape)
    return {k: v for k, v in result.items() if k in shape.members}


def _tags_list(p: dict[str, Any]) -> list[dict[str, str]]:
    tags = p.get("Tags") or []
    return [{"Key": k, "Value": str(v)} for k, v in tags.items()] if isinstance(tags, dict) else list(tags)


def _tags_map(p: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: str(t["Value"]) for t in _tags_list(p)}


Created = tuple[Any, dict[str, Any]]


# ---------------------------------------------------------------- creators: (Ref value, attributes)
def s3_bucket(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    s3, name = d.client("s3"), p.get("BucketName") or d.name(lid).lower()
    s3.create_bucket(Bucket=name)
    bridge = p.get("NotificationConfiguration", {}).get("EventBridgeConfiguration", {})
    if str(bridge.get("EventBridgeEnabled", "")).lower() == "true":
        s3.put_bucket_notification_configuration(
            Bucket=name, NotificationConfiguration={"EventBridgeConfiguration": {}}
        )
    if "VersioningConfiguration" in p:
        s3.put_bucket_versioning(
            Bucket=name, VersioningConfiguration={"Status": p["VersioningConfiguration"]["Status"]}
        )
    # lifecycle, encryption and public-access settings have no local effect
    return name, {
        "Arn": f"arn:aws:s3:::{name}",
        "DomainName": f"{name}.s3.amazonaws.com",
        "RegionalDomainName": f"{name}.s3.{REGION}.amazonaws.com",
    }


def iam_policy(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    """An inline policy put on each role, user and group it lists."""
    iam, doc = d.client("iam"), json.dumps({"Version": "2012-10-17", **p["PolicyDocument"]})
    for role in p.get("Roles", []):
        iam.put_role_policy(RoleName=role, PolicyName=p["PolicyName"], PolicyDocument=doc)
    for user in p.get("Users", []):
        iam.put_user_policy(UserName=user, PolicyName=p["PolicyName"], PolicyDocument=doc)
    for group in p.get("Groups", []):
        iam.put_group_policy(GroupName=group, PolicyName=p["PolicyName"], PolicyDocument=doc)
    return lid, {}


def bucket_policy(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    """Recorded for the local cloud's own evaluation (moto would evaluate a bucket policy without its
    conditions: the TLS-only Deny would deny everything)."""
    d.resource_policies.setdefault(f"arn:aws:s3:::{p['Bucket']}", []).append(p["PolicyDocument"])
    return lid, {}


def queue_policy(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    for url in p.get("Queues", []):
        arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{str(url).rsplit('/', 1)[-1]}"
        d.resource_policies.setdefault(arn, []).append(p["PolicyDocument"])
    return lid, {}


def lambda_permission(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    """The function's resource policy statement, as Lambda's AddPermission writes it."""
    name = str(p["FunctionName"])
    arn = name if name.startswith("arn:") else f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
    statement: dict[str, Any] = {
        "Sid": lid,
        "Effect": "Allow",
        "Principal": {"Service" if p["Principal"].endswith(".amazonaws.com") else "AWS": p["Principal"]},
        "Action": p["Action"],
        "Resource": arn,
    }
    if p.get("SourceArn"):
        statement["Condition"] = {"ArnLike": {"AWS:SourceArn": p["SourceArn"]}}
    d.resource_policies.setdefault(arn, []).append({"Version": "2012-10-17", "Statement": [statement]})
    return lid, {}


def managed_policy(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    iam = d.client("iam")
    name = p.get("ManagedPolicyName") or d.name(lid, 128)
    arn = iam.create_policy(
        PolicyName=name, Path=p.get("Path", "/"), PolicyDocument=json.dumps(p["PolicyDocument"]),
        Description=p.get("Description", ""),
    )["Policy"]["Arn"]
    for role in p.get("Roles", []):
        iam.attach_role_policy(RoleName=role, PolicyArn=arn)
    for user in p.get("Users", []):
        iam.attach_user_policy(UserName=user, PolicyArn=arn)
    for group in p.get("Groups", []):
        iam.attach_group_policy(GroupName=group, PolicyArn=arn)
    return arn, {"PolicyArn": arn}


def sqs_queue(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    name = p.get("QueueName") or d.name(lid, 80)
    attributes = {
        k: json.dumps(v) if isinstance(v, dict) else str(v) for k, v in p.items() if k not in ("QueueName", "Tags")
    }
    url = d.client("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url, {"Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}", "QueueName": name, "QueueUrl": url}


def sns_topic(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    arn = d.client("sns").create_topic(Name=p.get("TopicName") or d.name(lid, 256))["TopicArn"]
    return arn, {"TopicArn": arn, "TopicName": arn.rsplit(":", 1)[-1]}


def log_group(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    name = p.get("LogGroupName") or d.name(lid, 512)  # CloudFormation: the stack's name and the logical id
    d.client("logs").create_log_group(logGroupName=name)
    return name, {"Arn": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*"}


def iam_role(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    iam, name = d.client("iam"), p.get("RoleName") or d.name(lid)
    role = iam.create_role(
        RoleName=name,
        Path=p.get("Path", "/"),
        AssumeRolePolicyDocument=json.dumps(p["AssumeRolePolicyDocument"]),
    )["Role"]
    for pol in p.get("Policies", []):  # SAM policy templates omit Version, which moto requires
        doc = {"Version": "2012-10-17", **pol["PolicyDocument"]}
        iam.put_role_policy(RoleName=name, PolicyName=pol["PolicyName"], PolicyDocument=json.dumps(doc))
    for arn in p.get("ManagedPolicyArns", []):  # AWS's own (the local cloud makes them first) or the template's
        iam.attach_role_policy(RoleName=name, PolicyArn=arn)
    return name, {"Arn": role["Arn"], "RoleId": role["RoleId"]}


def iam_instance_profile(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    iam, name = d.client("iam"), p.get("InstanceProfileName") or d.name(lid)
    arn = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
    for role in p.get("Roles", []):
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
    return name, {"Arn": arn}


def lambda_function(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    lam, name = d.client("lambda"), p.get("FunctionName") or d.name(lid)
    kw = to_api(lam, "CreateFunction", {k: v for k, v in p.items() if k != "Tags"})
    kw.update(FunctionName=name, Tags=_tags_map(p))
    fn = lam.create_function(**kw)
    target = (p.get("DeadLetterConfig") or {}).get("TargetArn")
    if target:
        d.dead_letters[name] = str(target)
    return name, {"Arn": fn["FunctionArn"]}


def lambda_layer(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    lam = d.client("lambda")
    out = lam.publish_layer_version(
        **to_api(lam, "PublishLayerVersion", {**p, "LayerName": p.get("LayerName") or d.name(lid)})
    )
    return out["LayerVersionArn"], {}


def lambda_event_invoke_config(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    lam = d.client("lambda")
    lam.put_function_event_invoke_config(**to_api(lam, "PutFunctionEventInvokeConfig", p))
    return lid, {}


def lambda_event_source_mapping(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    """Recorded, not created in moto: moto would invoke the function as each message is sent, ignoring
    the queue's delay; the local cloud polls the queue as Lambda does (``localcloud/events.py``)."""
    d.event_source_mappings.append(p)
    return lid, {}


def events_rule(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    ev, name = d.client("events"), p.get("Name") or d.name(lid)
    kw: dict[str, Any] = {
        k: p[k] for k in ("ScheduleExpression", "State", "Description", "EventBusName", "RoleArn") if k in p
    }
    if "EventPattern" in p:
        kw["EventPattern"] = json.dumps(p["EventPattern"])
    arn = ev.put_rule(Name=name, **kw)["RuleArn"]
    if p.get("Targets"):
        ev.put_targets(
            Rule=name,
            EventBusName=p.get("EventBusName", "default"),
            Targets=to_api(ev, "PutTargets", {"Targets": p["Targets"]})["Targets"],
        )
    return name, {"Arn": arn}


def state_machine(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    sfn, name = d.client("stepfunctions"), p.get("StateMachineName") or d.name(lid, 80)
    if "Definition" in p:
        definition = json.dumps(p["Definition"])
    elif "DefinitionS3Location" in p:
        loc = p["DefinitionS3Location"]
        definition = d.client("s3").get_object(Bucket=loc["Bucket"], Key=loc["Key"])["Body"].read().decode()
    else:
        definition = p["DefinitionString"]
    for key, value in p.get("DefinitionSubstitutions", {}).items():
        definition = definition.replace("${" + key + "}", str(value))
    if re.search(r"\$\{[A-Za-z0-9_]+\}", definition):
        missing = sorted(set(re.findall(r"\$\{([A-Za-z0-9_]+)\}", definition)))
        raise ValueError(f"{lid}: DefinitionSubstitutions missing for {missing}")
    arn = sfn.create_state_machine(
        name=name, definition=definition, roleArn=p["RoleArn"], type=p.get("StateMachineType", "STANDARD")
    )["stateMachineArn"]
    return arn, {"Arn": arn, "Name": name}


def _batch(op: str, name_key: str, arn_key: str, attr: str) -> Callable[[Deployer, str, dict[str, Any]], Created]:
    method = re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()

    def create(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
        b = d.client("batch")
        kw = to_api(b, op, {k: v for k, v in p.items() if k != "Tags"})
        kw.setdefault(name_key, d.name(lid, 128))
        arn = getattr(b, method)(**kw)[arn_key]
        return arn, {attr: arn}

    return create


_create_compute_environment = _batch(
    "CreateComputeEnvironment", "computeEnvironmentName", "computeEnvironmentArn", "ComputeEnvironmentArn"
)


def batch_compute_environment(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    """Without ``ServiceRole`` AWS Batch uses its service-linked role, which AWS creates on first use;
    moto requires an existing role, so the deployer makes that role as AWS would."""
    if not p.get("ServiceRole"):
        iam = d.client("iam")
        made = iam.list_roles(PathPrefix="/aws-service-role/batch.amazonaws.com/")["Roles"]
        role = made[0] if made else iam.create_service_linked_role(AWSServiceName="batch.amazonaws.com")["Role"]
        p = {**p, "ServiceRole": role["Arn"]}
    # CloudFormation's update policy, applied by UpdateComputeEnvironment on a later deploy: no part of the create
    resources = {k: v for k, v in (p.get("ComputeResources") or {}).items() if k != "UpdateToLatestImageVersion"}
    if "ComputeResources" in p:
        p = {**p, "ComputeResources": resources}
    return _create_compute_environment(d, lid, p)


def ec2_launch_template(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    ec2 = d.client("ec2")
    name = p.get("LaunchTemplateName") or d.name(lid, 128)
    data = to_api(ec2, "CreateLaunchTemplate", {"LaunchTemplateData": p.get("LaunchTemplateData", {})})
    lt = ec2.create_launch_template(LaunchTemplateName=name, **data)["LaunchTemplate"]
    version = str(lt["LatestVersionNumber"])
    return lt["LaunchTemplateId"], {
        "LaunchTemplateId": lt["LaunchTemplateId"],
        "LatestVersionNumber": version,
        "DefaultVersionNumber": version,
    }


def ecr_repository(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    name = p.get("RepositoryName") or d.name(lid).lower()
    repo = d.client("ecr").create_repository(repositoryName=name)["repository"]
    return name, {"Arn": repo["repositoryArn"], "RepositoryUri": repo["repositoryUri"]}


def glue_database(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    d.client("glue").create_database(DatabaseInput=p["DatabaseInput"])
    return p["DatabaseInput"]["Name"], {}


def glue_table(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    table_input = p["TableInput"]
    iceberg_input = (p.get("OpenTableFormatInput") or {}).get("IcebergInput")
    if iceberg_input is not None:
        table_input = iceberg_table_input(d.client("s3"), table_input, iceberg_input)
    d.client("glue").create_table(DatabaseName=p["DatabaseName"], TableInput=table_input)
    return table_input["Name"], {}


def iceberg_table_input(s3: Any, table_input: dict[str, Any], iceberg_input: dict[str, Any]) -> dict[str, Any]:
    """What Glue does for ``OpenTableFormatInput.IcebergInput`` (``MetadataOperation: CREATE``), which moto does
    not: an empty Iceberg table of the given format version (2 by default), unpartitioned, its schema the
    storage descriptor's columns, its first metadata file written under ``<Location>metadata/`` and named by
    the table's ``metadata_location``."""
    import uuid

    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    from localcloud.iceberg import schema_from_glue_columns

    if iceberg_input.get("MetadataOperation", "CREATE") != "CREATE":
        raise ValueError(f"IcebergInput.MetadataOperation must be CREATE, not {iceberg_input['MetadataOperation']}")
    sd = table_input["StorageDescriptor"]
    location = str(sd["Location"]).rstrip("/")
    metadata = new_table_metadata(
        schema_from_glue_columns(sd.get("Columns", [])), UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER,
        location, properties={"format-version": str(iceberg_input.get("Version", "2"))})
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    key = f"{prefix}/metadata/00000-{uuid.uuid4()}.metadata.json"
    s3.put_object(Bucket=bucket, Key=key, Body=metadata.model_dump_json().encode())
    params = {**table_input.get("Parameters", {}), "table_type": "ICEBERG",
              "metadata_location": f"s3://{bucket}/{key}"}
    return {**table_input, "Parameters": params}


def athena_workgroup(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    a = d.client("athena")
    config = to_api(a, "CreateWorkGroup", {"Configuration": p.get("WorkGroupConfiguration", {})})
    a.create_work_group(Name=p["Name"], **config, **({"Description": p["Description"]} if "Description" in p else {}))
    if p.get("State") == "DISABLED":
        a.update_work_group(WorkGroup=p["Name"], State="DISABLED")
    return p["Name"], {}


def athena_named_query(d: Deployer, lid: str, p: dict[str, Any]) -> Created:
    a = d.client("athena")
    qid = a.create_named_query(**to_api(a, "CreateNamedQuery", p))["NamedQueryId"]
    return qid, {"NamedQueryId": qid}


CREATORS: dict[str, Callable[[Deployer, str, dict[str, Any]], Created]] = {
    "AWS::S3::Bucket": s3_bucket,
    "AWS::S3::BucketPolicy": bucket_policy,
    "AWS::SQS::Queue": sqs_queue,
    "AWS::SQS::QueuePolicy": queue_policy,
    "AWS::SNS::Topic": sns_topic,
    "AWS::Logs::LogGroup": log_group,
    "AWS::IAM::Role": iam_role,
    "AWS::IAM::Policy": iam_policy,
    "AWS::IAM::ManagedPolicy": managed_policy,
    "AWS::IAM::InstanceProfile": iam_instance_profile,
    "AWS::Lambda::Function": lambda_function,
    "AWS::Lambda::LayerVersion": lambda_layer,
    "AWS::Lambda::Permission": lambda_permission,
    "AWS::Lambda::EventInvokeConfig": lambda_event_invoke_config,
    "AWS::Lambda::EventSourceMapping": lambda_event_source_mapping,
    "AWS::Events::Rule": events_rule,
    "AWS::StepFunctions::StateMachine": state_machine,
    "AWS::Batch::ComputeEnvironment": batch_compute_environment,
    "AWS::Batch::JobQueue": _batch("CreateJobQueue", "jobQueueName", "jobQueueArn", "JobQueueArn"),
    "AWS::Batch::SchedulingPolicy": _batch("CreateSchedulingPolicy", "name", "arn", "Arn"),
    "AWS::Batch::JobDefinition": _batch(
        "RegisterJobDefinition", "jobDefinitionName", "jobDefinitionArn", "JobDefinitionArn"
    ),
    "AWS::EC2::LaunchTemplate": ec2_launch_template,
    "AWS::ECR::Repository": ecr_repository,
    "AWS::Glue::Database": glue_database,
    "AWS::Glue::Table": glue_table,
    "AWS::Athena::WorkGroup": athena_workgroup,
    "AWS::Athena::NamedQuery": athena_named_query,
}
