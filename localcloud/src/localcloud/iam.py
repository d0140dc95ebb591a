"""IAM, locally: every piece of the app runs under its own role from the template, and moto checks it.

On AWS each piece of the app gets its role's credentials from the service that runs it: a Lambda function
its execution role's (environment variables), a Batch job its job role's (the container credentials
endpoint), the state machine's service integrations and the EventBridge target theirs. Here the local cloud
assumes each role of the deployed template once (as the service principal would, straight through moto's
STS backend, since the trust policies name services) and hands the session's keys to each Lambda
invocation and Batch attempt in its environment; the state machine's calls are signed with its role's keys
(the sfn-credentials patch). moto's IAM authorization is on (``INITIAL_NO_AUTH_ACTION_COUNT`` 0), and every
request it authorizes is decided by :mod:`.policy` (the iam-authorization patch): moto checks identity policies
against ``*`` outside S3, SQS, IAM and STS and skips most conditions and every resource policy.

The local cloud's own calls (deploying the template, mirroring the bucket, the hooks that stand in for AWS
services) are made as the *platform* role, whose session has this process's fake keys and which may do
anything (CloudFormation and the services themselves on AWS); the app's commands a lab member runs
(seqlake's ``seqlake local``, say: upload, query, status) are made as the *user* role, which has the
template's ``LabMemberPolicy`` and nothing else.

The app's IAM setting (:attr:`.contract.Settings.iam`; seqlake's ``--no-iam`` sets it) at ``0`` turns
enforcement off: every process signs with the fake keys, unchecked.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from moto.core.exceptions import AccessDeniedError, JsonRESTError
from moto.iam.models import AWSManagedPolicy, iam_backends
from moto.s3.exceptions import S3ClientError
from moto.sts.models import sts_backends

from localcloud import contract, patches
from localcloud.deployer import ACCOUNT, PARTITION, REGION
from localcloud.environment import FAKE_ENV
from localcloud.policy import Decision, denied_message, evaluate


def platform_role() -> str:
    """The local cloud's own identity (deploy, mirror, the hooks that stand in for AWS services), named after
    the app's stack (:attr:`.contract.App.stack`)."""
    return f"{contract.app().stack}-platform"


def user_role() -> str:
    """The lab member who runs the app's commands: the template's LabMemberPolicy attached, nothing else."""
    return f"{contract.app().stack}-user"


def session_name() -> str:
    """The session name of every role the local cloud assumes: the app's stack."""
    return contract.app().stack


#: the template's managed policy a lab member gets (its logical id)
USER_POLICY = "LabMemberPolicy"
#: the keys of a process that has no role (a job definition without a job role): refused
NO_ROLE = {"AWS_ACCESS_KEY_ID": "no-role", "AWS_SECRET_ACCESS_KEY": "no-role", "AWS_SESSION_TOKEN": "no-role"}
_ADMIN = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
_NOBODY = {"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "sts:AssumeRole"}]}
#: the request's action as moto names it -> as IAM names it
_IAM_ACTIONS = {"lambda:Invoke": "lambda:InvokeFunction", "lambda:InvokeAsync": "lambda:InvokeFunction"}
_AWS_POLICY = re.compile(r":iam::aws:policy/([\w+=,.@/-]+)")
#: services whose errors are XML (query protocol); S3 has its own; the rest answer JSON
_QUERY_SERVICES = ("iam", "sts", "ec2")


#: signing name -> botocore's service name, where they differ
_BOTOCORE_NAMES = {"states": "stepfunctions"}


@functools.cache
def _operations(signing_name: str) -> dict[str, str]:
    """A service's operation names by their lower-case form (moto names some, Batch's, from the URL)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model(_BOTOCORE_NAMES.get(signing_name, signing_name))
    return {op.lower(): op for op in model.operation_names}


def iam_action(service: str, moto_action: str) -> str:
    """The IAM action of a request, from moto's ``service:Operation`` (``lambda:Invoke`` ->
    ``lambda:InvokeFunction``; ``batch:submitjob`` -> ``batch:SubmitJob``)."""
    name = moto_action.split(":", 1)[1]
    if name.islower():  # only then is a model needed (loading one, EC2's above all, costs a cloud's start time)
        name = _operations(service).get(name, name)
    action = f"{service}:{name}"
    return _IAM_ACTIONS.get(action, action)


def var() -> str:
    """The setting's name (the app's): ``0`` (or ``false``, ``off``) turns IAM enforcement off in the local cloud."""
    return contract.app().settings.iam


def enforced(env: Mapping[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get(var(), "1")
    return value.strip().lower() not in ("0", "false", "off", "no")


def require(off: bool) -> None:
    """``--no-iam``: enforcement off for this process (and the local cloud it starts)."""
    if off:
        os.environ[var()] = "0"


@dataclass(frozen=True)
class Credentials:
    """An assumed-role session's keys."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    role_arn: str

    def env(self) -> dict[str, str]:
        """As Lambda hands them to a function (and as a container's SDK reads them)."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_SESSION_TOKEN": self.session_token,
        }


def role_arn(name: str) -> str:
    return f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}"


def _iam_backend() -> Any:
    return iam_backends[ACCOUNT][PARTITION]


def materialize_managed_policies(cfn: Mapping[str, Any]) -> None:
    """The AWS managed policies the template's roles attach (SAM adds some), made in moto from its
    bundled copy of AWS's documents (moto loads none by default, and all 1,300 would slow every start)."""
    roles = [r for r in cfn.get("Resources", {}).values() if r.get("Type") == "AWS::IAM::Role"]
    # plain ARNs, or !Sub arn:${AWS::Partition}:iam::aws:policy/...: the path and name are what count
    named = json.dumps([r.get("Properties", {}).get("ManagedPolicyArns", []) for r in roles])
    wanted = {f"arn:{PARTITION}:iam::aws:policy/{m}" for m in _AWS_POLICY.findall(named)}
    if not wanted:
        return
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    data = json.loads(aws_managed_policies_data)
    backend = _iam_backend()
    for arn in sorted(wanted):
        name = arn.rsplit("/", 1)[-1]
        if arn in backend.managed_policies:
            continue
        if name not in data:
            raise ValueError(f"the template attaches {arn}, which moto's copy of AWS's managed policies lacks")
        policy = AWSManagedPolicy.from_data(name, ACCOUNT, REGION, data[name])
        backend.managed_policies[policy.arn] = policy


class LocalIam:
    """The roles' sessions, the platform's and the user's, and the authorization hook (the iam-authorization patch)."""

    def __init__(self, enforce: bool) -> None:
        self.enforce = enforce
        #: resource ARN -> the resource policies on it (bucket policy, queue policies, Lambda permissions),
        #: as the deployer resolved them: moto keeps no such policy that it evaluates with conditions
        self.resource_policies: dict[str, list[dict[str, Any]]] = {}
        self._sessions: dict[str, Credentials] = {}
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.endpoint = ""
        #: AccessDenied answers given: (caller, action, resource)
        self.denied: list[tuple[str, str, str]] = []

    # ---------------------------------------------------------------- lifecycle
    def start(self, endpoint: str) -> Credentials:
        """Make the platform role (after moto's reset) and turn enforcement on; returns the platform's keys."""
        self.endpoint = endpoint
        self._sessions.clear()
        self._clients.clear()
        backend = _iam_backend()
        backend.create_role(
            role_name=platform_role(), assume_role_policy_document=json.dumps(_NOBODY), path="/",
            permissions_boundary=None, description="the local cloud's own calls", tags=[],
            max_session_duration="43200", linked_service=None,
        )
        backend.put_role_policy(platform_role(), "everything", json.dumps(_ADMIN))
        # the platform's session has the fake keys this process (and any boto3 client in it, whose default
        # session keeps the first keys it read) already signs with; a child gets its role's keys, or NO_ROLE
        made = sts_backends[ACCOUNT][PARTITION].assume_role(
            region_name=REGION, role_session_name=session_name(), role_arn=role_arn(platform_role()), policy="",
            duration=43200, external_id="",
        )
        made.access_key_id = FAKE_ENV["AWS_ACCESS_KEY_ID"]
        made.secret_access_key = FAKE_ENV["AWS_SECRET_ACCESS_KEY"]
        made.session_token = FAKE_ENV["AWS_SESSION_TOKEN"]
        platform = self._sessions[role_arn(platform_role())] = Credentials(
            made.access_key_id, made.secret_access_key, made.session_token, role_arn(platform_role())
        )
        if self.enforce:
            patches.HOOKS.authorize = self.authorize
            patches.HOOKS.authorized_port = urllib.parse.urlsplit(endpoint).port
            patches.HOOKS.state_machine_credentials = self.state_machine_credentials
        return platform

    def stop(self) -> None:
        if patches.HOOKS.authorize == self.authorize:
            patches.HOOKS.authorize = patches.HOOKS.authorized_port = None
            patches.HOOKS.state_machine_credentials = None

    def add_user(self, policy_arn: str | None) -> None:
        """The lab member's role, with the template's managed policy (none: may do nothing)."""
        backend = _iam_backend()
        backend.create_role(
            role_name=user_role(), assume_role_policy_document=json.dumps(_NOBODY), path="/",
            permissions_boundary=None, description="a lab member running the app's commands", tags=[],
            max_session_duration="43200", linked_service=None,
        )
        if policy_arn:
            backend.attach_role_policy(policy_arn, user_role())

    # ---------------------------------------------------------------- sessions
    def credentials(self, arn: str | None) -> Credentials | None:
        """The session of role ``arn`` (assumed once per cloud, as the service principal assumes it)."""
        if not arn:
            return None
        with self._lock:
            found = self._sessions.get(arn)
            if found is None:
                made = sts_backends[ACCOUNT][PARTITION].assume_role(
                    region_name=REGION, role_session_name=session_name(), role_arn=arn, policy="",
                    duration=43200, external_id="",
                )
                found = self._sessions[arn] = Credentials(
                    made.access_key_id, made.secret_access_key, made.session_token, arn
                )
        return found

    def env(self, arn: str | None) -> dict[str, str]:
        """Environment credentials for a process running as role ``arn``: its session's; keys moto refuses
        for a process without a role; none when not enforcing (the process keeps the fake keys)."""
        if not self.enforce:
            return {}
        creds = self.credentials(arn)
        return creds.env() if creds is not None else dict(NO_ROLE)

    def client(self, arn: str | None, service: str) -> Any:
        """A client of this cloud signed as role ``arn`` (not enforcing: with the process's keys)."""
        key = (arn or "", service)
        with self._lock:
            found = self._clients.get(key)
        if found is not None:
            return found
        creds = self.credentials(arn) if self.enforce else None
        kw = (
            {"aws_access_key_id": creds.access_key_id, "aws_secret_access_key": creds.secret_access_key,
             "aws_session_token": creds.session_token}
            if creds is not None else {}
        )
        made = boto3.client(service, region_name=REGION, endpoint_url=self.endpoint, **kw)
        with self._lock:
            return self._clients.setdefault(key, made)

    def state_machine_credentials(self) -> tuple[str, str, str] | None:
        """The keys the state machine's service integrations sign with (the sfn-credentials patch): its role's."""
        from moto.stepfunctions.parser.models import stepfunctions_parser_backends

        machines = list(stepfunctions_parser_backends[ACCOUNT][REGION].state_machines)
        if not machines:
            return None
        creds = self.credentials(machines[0].roleArn)
        return None if creds is None else (creds.access_key_id, creds.secret_access_key, creds.session_token)

    # ---------------------------------------------------------------- authorization (the iam-authorization patch)
    def authorize(self, request: Any, moto_resource: str) -> None:
        """Decide a request moto authorizes; raise the service's AccessDenied in AWS's words."""
        service = request._service
        action = iam_action(service, request._action)
        if action == "sts:GetCallerIdentity":  # always allowed, as on AWS
            return
        key = request._access_key
        caller = key.arn
        owner = getattr(key, "_owner_role_name", None)
        role = role_arn(owner) if owner else None
        params = _params(request)
        resources = request_resources(service, action, params, request._path, moto_resource)
        identity = [_document(p) for p in key.collect_policies()]
        context = request_context(service, action, request._path, params)

        def decide(action: str, resources: list[str], context: dict[str, list[str]]) -> Decision:
            return evaluate(caller=caller, action=action, resources=resources, context=context, identity=identity,
                            resource_policies=self.resource_policies, role_arn=role)

        decision = decide(action, resources, context)
        missing = _missing_object(resources[0]) if decision.allowed and action == "s3:GetObject" else None
        if missing is not None:
            # S3 answers a missing key with 404 only to a caller who may list the bucket, else 403
            # (AWS: "If you don't have the s3:ListBucket permission, Amazon S3 returns ... 403"); the
            # listing is judged with the key as its prefix, which the template's s3:prefix conditions name
            action = "s3:ListBucket"
            decision = decide(action, [missing[0]], {**context, "s3:prefix": [missing[1]]})
        source = _copy_source(request) if decision.allowed and action == "s3:PutObject" else None
        if source is not None:
            # a copy (CopyObject, UploadPartCopy) reads its source as s3:GetObject too: moto checks the destination
            action = "s3:GetObject"
            decision = decide(action, [source], context)
        if not decision.allowed:
            self.denied.append((caller, action, decision.resource))
            raise access_denied(service, caller, action, decision)

    def service_allows(self, principal: str, action: str, resource: str, source_arn: str) -> bool:
        """Whether AWS service ``principal`` (``events.amazonaws.com``) may do ``action`` on ``resource``
        on behalf of ``source_arn`` (a rule), by the resource's own policy (it has no identity policy)."""
        decision = evaluate(
            caller=principal, action=action, resources=[resource],
            context={"aws:sourcearn": [source_arn], "aws:securetransport": ["true"]},
            resource_policies=self.resource_policies,
        )
        if not decision.allowed:
            self.denied.append((principal, action, resource))
        return decision.allowed


def _copy_source(request: Any) -> str | None:
    """The object ARN a copy request reads (its ``x-amz-copy-source`` header, ``bucket/key[?versionId=]``)."""
    headers = {k.lower(): v for k, v in dict(request._headers).items()}
    source = headers.get("x-amz-copy-source")
    if not source:
        return None
    path = urllib.parse.unquote(str(source).split("?", 1)[0]).lstrip("/")
    return f"arn:{PARTITION}:s3:::{path}"


def _missing_object(resource: str) -> tuple[str, str] | None:
    """(bucket ARN, key) of an object ARN whose key the bucket does not hold; None if it exists (or is no
    object of a bucket here)."""
    from moto.s3.models import s3_backends

    bucket_arn, _, key = resource.partition("/")
    bucket = s3_backends[ACCOUNT][PARTITION].buckets.get(bucket_arn.rsplit(":", 1)[-1])
    if bucket is None or not key or key in bucket.keys:
        return None
    return bucket_arn, key


def _document(policy: Any) -> dict[str, Any]:
    """A policy moto collected (an inline document, or a managed policy's default version) as a dict, as
    moto's ``IAMPolicy`` reads it. Parsed once per text: a changed policy is another text."""
    if isinstance(policy, str):
        text = policy
    elif isinstance(policy, Mapping):
        text = policy["policy_document"]
    else:
        text = next(v.document for v in policy.versions if v.is_default)
    return _parsed(text)


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> dict[str, Any]:
    """A policy document's JSON (shared: read, never changed)."""
    found: dict[str, Any] = json.loads(text)
    return found


def _params(request: Any) -> dict[str, Any]:
    body = request._body
    if isinstance(body, bytes | bytearray) and body[:1] == b"{":
        with contextlib.suppress(ValueError):
            parsed: dict[str, Any] = json.loads(body)
            return parsed
    return {}


def _query(path: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(path).query, keep_blank_values=True)


def _arn(service: str, resource: str) -> str:
    region = "" if service in ("s3", "iam") else REGION
    return f"arn:{PARTITION}:{service}:{region}:{ACCOUNT}:{resource}"


def _glue(name: str, params: Mapping[str, Any]) -> list[str]:
    """Glue authorizes on the catalog, the database and the table a request names (``Name`` is the table
    of ``GetTable`` and the database of ``GetDatabase``)."""
    out = [_arn("glue", "catalog")]
    named = params.get("Name")
    database = params.get("DatabaseName") or (named if name.endswith("Database") else None)
    if database:
        out.append(_arn("glue", f"database/{database}"))
        table = (params.get("TableName") or (params.get("TableInput") or {}).get("Name")
                 or (named if name.endswith("Table") else None))
        if table:
            out.append(_arn("glue", f"table/{database}/{table}"))
    return out


def _athena_workgroup(params: Mapping[str, Any]) -> str:
    workgroup = params.get("WorkGroup")
    if not workgroup:
        from moto.athena.models import athena_backends

        backend = athena_backends[ACCOUNT][REGION]
        found = backend.executions.get(str(params.get("QueryExecutionId"))) or backend.named_queries.get(
            str(params.get("NamedQueryId"))
        )
        workgroup = getattr(found, "workgroup", None) or "primary"
        workgroup = getattr(workgroup, "name", workgroup)
    return _arn("athena", f"workgroup/{workgroup}")


def _lambda_function(path: str) -> str:
    # /2015-03-31/functions/NAME-or-ARN/invocations
    name = urllib.parse.unquote(urllib.parse.urlsplit(path).path.split("/functions/", 1)[-1].split("/")[0])
    return name if name.startswith("arn:") else _arn("lambda", f"function:{name}")


def _batch_arn(kind: str, value: str) -> str:
    return value if value.startswith("arn:") else _arn("batch", f"{kind}/{value}")


def request_resources(  # noqa: PLR0911 - one return per service
    service: str, action: str, params: Mapping[str, Any], path: str, moto_resource: str
) -> list[str]:
    """The resources AWS authorizes ``action`` against (moto names them for S3, SQS, IAM and STS only)."""
    name = action.split(":", 1)[1]
    if service == "glue":
        return _glue(name, params)
    if service == "states":
        arn = params.get("executionArn") or params.get("stateMachineArn")
        return [str(arn)] if arn else ["*"]
    if service == "lambda" and name == "InvokeFunction":
        return [_lambda_function(path)]
    if service == "batch":
        if name == "SubmitJob":
            return [_batch_arn("job-queue", str(params.get("jobQueue"))),
                    _batch_arn("job-definition", str(params.get("jobDefinition")))]
        if name in ("TerminateJob", "CancelJob"):
            return [_arn("batch", f"job/{params.get('jobId')}")]
        return ["*"]
    if service == "logs":
        group, stream = params.get("logGroupName"), params.get("logStreamName")
        if group and stream:
            return [_arn("logs", f"log-group:{group}:log-stream:{stream}")]
        if group:
            return [_arn("logs", f"log-group:{group}:*")]
        return ["*"]
    if service == "athena":
        return [_athena_workgroup(params)]
    if service == "events" and params.get("Name"):
        return [_arn("events", f"rule/{params['Name']}")]
    return [moto_resource]


def request_context(service: str, action: str, path: str, params: Mapping[str, Any]) -> dict[str, list[str]]:
    """The condition keys a request carries (lower-case names)."""
    context = {
        # the local endpoint stands in for AWS's HTTPS endpoints (every SDK client uses TLS there)
        "aws:securetransport": ["true"],
    }
    if service == "s3":
        query = _query(path)
        if action == "s3:ListBucket":
            context["s3:prefix"] = query.get("prefix", [""])[:1]
    return context


def access_denied(service: str, caller: str, action: str, decision: Decision) -> Exception:
    """The service's AccessDenied error, with AWS's message."""
    message = denied_message(caller, action, decision)
    if service == "s3":
        return S3ClientError("AccessDenied", message)
    if service in _QUERY_SERVICES:
        # moto's error: "User: {arn} is not authorized to perform: {action}": the rest follows the action
        return AccessDeniedError(caller, message.split("is not authorized to perform: ", 1)[1])
    error = JsonRESTError("AccessDeniedException", message)
    error.code = 403
    return error
