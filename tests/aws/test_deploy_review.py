"""The deployment review (a first `sam deploy` on a new account, and a stack that behaves): each rule the
AWS documentation states and no linter checks, stated here against template.yaml, the state machine,
samconfig.toml and the build scripts. Static: no AWS, no moto server."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from localcloud.batch import ESSENTIAL_EXITED, Outcome, decide
from localcloud.deployer import Deployer
from seqlake.aws import batch_reasons, steps
from seqlake.base.errors import EXIT_BAD_INPUT
from seqlake.base.model import Step
from seqlake.lake.tables import TABLES

from .conftest import REPO, Resolver
from .test_template import ASL_PATH, as_list, asl, statements

FUNCTIONS = ("StartRunFunction", "PlanFunction", "CommitFunction", "RecordFailureFunction")
INPUT_READERS = ("StartRunFunction", "PlanFunction", "WorkerJobRole")
#: the states that submit a Batch job (the shards', the index job's, the reducers')
BATCH_TASKS = tuple(s.value for s in Step if s.is_batch)


def resources(template: dict[str, Any]) -> dict[str, Any]:
    res: dict[str, Any] = template["Resources"]
    return res


def deployer(template: dict[str, Any], **parameters: str) -> Deployer:
    """The local cloud's intrinsic resolver (Fn::If, Fn::Split, Fn::Join, Fn::Sub) over the template."""
    given = {"Subnets": "subnet-1", "SecurityGroupIds": "sg-1", **parameters}
    return Deployer(template, parameters=given)


def default(template: dict[str, Any], name: str) -> Any:
    return template["Parameters"][name]["Default"]


# 1 ------------------------------------------------------------------------------ reserved concurrency
def test_no_concurrency_is_reserved_unless_asked(template: dict[str, Any]) -> None:
    assert default(template, "ReservedConcurrency") == 0
    for asked, expected in (("0", None), ("5", 5)):
        d = deployer(template, ReservedConcurrency=asked)
        for fn in FUNCTIONS:
            props = d.resolve({"R": resources(template)[fn]["Properties"]["ReservedConcurrentExecutions"]})
            got = props.get("R")
            assert (None if got is None else int(got)) == expected, (fn, asked)


# 2 ---------------------------------------------------------------------------- Batch service role
def test_compute_environments_use_the_batch_service_linked_role(template: dict[str, Any]) -> None:
    ces = [r for r in resources(template).values() if r["Type"] == "AWS::Batch::ComputeEnvironment"]
    assert len(ces) == 2
    for ce in ces:
        assert "ServiceRole" not in ce["Properties"]
    trusted = [
        st["Principal"]
        for r in resources(template).values()
        if r["Type"] == "AWS::IAM::Role"
        for st in r["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    ]
    assert {"Service": "batch.amazonaws.com"} not in trusted


# 3 --------------------------------------------------------------------------- nothing waits for ever
def test_the_queue_cancels_jobs_stuck_for_a_reason_the_failure_explains(template: dict[str, Any]) -> None:
    actions = resources(template)["WorkerJobQueue"]["Properties"]["JobStateTimeLimitActions"]
    assert {a["Reason"] for a in actions} == set(batch_reasons.CANCELLED_WHEN_STUCK)
    for a in actions:
        assert a["Action"] == "CANCEL" and a["State"] == "RUNNABLE"
        param = template["Parameters"][a["MaxTimeSeconds"]["Ref"]]
        # Batch accepts 600 s .. 24 h
        assert param["MinValue"] >= 600 and param["MaxValue"] <= 86400 and 600 <= param["Default"] <= 86400
        # the run's failure reason says what to check
        for status_reason in (batch_reasons.CANCELLED_PREFIX + a["Reason"], f"{a['Reason']} - waiting"):
            assert a["Reason"] in (batch_reasons.advice(status_reason) or ""), status_reason


@pytest.mark.parametrize(
    ("status_reason", "names"),
    [
        ("Canceled by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
         ["cancelled", "quota", "OnDemandMaxVcpus"]),
        ("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Service cannot fulfill the capacity requested for instance "
         "type [r6i.large]", ["waiting", "quota"]),
        ("Canceled by JobStateTimeLimit action due to reason: MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT",
         ["WorkerMemoryMiB", "InstanceTypes"]),
        ("Canceled by JobStateTimeLimit action due to reason: MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE",
         ["SpotMaxVcpus"]),
        ("MISCONFIGURATION:SOMETHING_NEW - text", ["MISCONFIGURATION:SOMETHING_NEW", "compute environments"]),
        ("Job attempt duration exceeded timeout", ["AttemptDurationSeconds"]),
        # a region's reducer killed (the 100 Mb genome's): the advice named the shards' memory only
        ("OutOfMemoryError: Container killed due to memory usage",
         ["WorkerMemoryMiB", "ReducerMemoryMiB", "region_size", "IndexJobMemoryMiB"]),
    ],
)
def test_batch_reason_advice(status_reason: str, names: list[str]) -> None:
    text = batch_reasons.advice(status_reason)
    assert text is not None
    for name in names:
        assert name in text


@pytest.mark.parametrize(
    "status_reason", ["Essential container in task exited", "Host EC2 (instance i-1) terminated.", ""]
)
def test_no_advice_for_reasons_that_are_not_the_stacks(status_reason: str) -> None:
    assert batch_reasons.advice(status_reason) is None


def test_every_batch_step_has_a_timeout_from_a_parameter(template: dict[str, Any]) -> None:
    states = asl()["States"]
    subs = resources(template)["PipelineStateMachine"]["Properties"]["DefinitionSubstitutions"]
    init = states[asl()["StartAt"]]
    for name in BATCH_TASKS:
        path = states[name]["TimeoutSecondsPath"]
        assert path.startswith("$.") and "TimeoutSeconds" not in states[name]
        # the path reads a number Init makes from a template parameter: a substitution is text, so it goes
        # through States.StringToJson (a quoted "${X}" in TimeoutSeconds would be a string, which AWS rejects)
        node = init["Parameters"]
        *parents, leaf = path[2:].split(".")
        for key in parents:
            node = node[key]
        expr = node[leaf + ".$"]
        placeholder = re.fullmatch(r"States\.StringToJson\('\$\{(\w+)\}'\)", expr)
        assert placeholder, expr
        param = template["Parameters"][subs[placeholder.group(1)]["Ref"]]
        assert param["Type"] == "Number" and param["MinValue"] >= 600
        # a run's Batch step may take longer than one attempt, never less
        assert param["Default"] >= default(template, "AttemptDurationSeconds")


def test_an_execution_is_bounded_by_its_states(template: dict[str, Any]) -> None:
    """Every state that waits has an upper bound: Batch steps their TimeoutSecondsPath, Lambda steps their
    function's Timeout (at most 15 minutes), retried a bounded number of times."""
    lambdas = {f"{fn}Arn": resources(template)[fn]["Properties"]["Timeout"] for fn in FUNCTIONS}
    for name, s in asl()["States"].items():
        if s["Type"] != "Task":
            continue
        assert all(r["MaxAttempts"] <= 10 for r in s.get("Retry", [])), name
        if name in BATCH_TASKS:
            assert "TimeoutSecondsPath" in s, name
        else:
            fn = s["Parameters"]["FunctionName"].strip("${}")
            assert lambdas[fn] <= 900, name


# 4 ---------------------------------------------------------------------------------- region per env
def test_every_environment_names_its_own_region() -> None:
    cfg = tomllib.loads((REPO / "samconfig.toml").read_text())
    envs = [env for env, tables in cfg.items() if isinstance(tables, dict) and "deploy" in tables and env != "default"]
    assert envs
    for env in envs:
        out = subprocess.run([sys.executable, str(REPO / "scripts" / "samconfig_env.py"), env],
                             capture_output=True, text=True, check=True).stdout.split()
        assert out == [cfg[env]["deploy"]["parameters"]["stack_name"], cfg[env]["global"]["parameters"]["region"]]


def test_an_environment_without_a_region_is_an_error_not_the_default_region(tmp_path: Path) -> None:
    cfg = tmp_path / "samconfig.toml"
    cfg.write_text('version = 0.1\n[default.global.parameters]\nregion = "eu-west-1"\n'
                   '[dev.deploy.parameters]\nstack_name = "seqlake-dev"\n')
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "samconfig_env.py"), "dev", str(cfg)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "[dev.global.parameters] region" in proc.stderr
    assert "samconfig_env.py" in (REPO / "scripts" / "push-worker-image.sh").read_text()


# 5 ------------------------------------------------------------------------------------ stale layer
def test_each_layer_cache_key_covers_its_requirements_makefile_and_source(template: dict[str, Any]) -> None:
    """SAM's cached build keys a layer on a checksum of its ContentUri folder, walked following links
    (samcli.lib.utils.hash.dir_checksum): whatever the build reads must be under it."""
    layers = {n: r for n, r in resources(template).items() if r["Type"] == "AWS::Serverless::LayerVersion"}
    assert "CoreLayer" in layers and len(layers) >= 2
    for name, layer in layers.items():
        content = (REPO / layer["Properties"]["ContentUri"]).resolve()
        walked = {
            Path(root, f).resolve()
            for root, dirs, files in os.walk(content, followlinks=True)
            for f in files
            if "__pycache__" not in root
        }
        build = REPO / layer["Metadata"]["ContextPath"]
        assert build.resolve() == content, name
        needed = [build / "requirements.txt", build / "Makefile"]
        if name == "CoreLayer":
            needed += [REPO / "src" / "seqlake" / "__init__.py", REPO / "src" / "seqlake" / "aws" / "steps.py"]
        for path in needed:
            assert path.resolve() in walked, (name, path)
        # the Makefile has the layer's target, and installs from the layer's folder
        makefile = (build / "Makefile").read_text()
        assert f"\nbuild-{name}:" in makefile and '"$(HERE)requirements.txt"' in makefile, name
    # and CoreLayer takes the package from there, not from a copy SAM made of another folder
    assert '"$(HERE)src/seqlake"' in (REPO / "layers" / "Makefile").read_text()


# 6 ------------------------------------------------------------------------------- the log-reading grant
def test_record_failure_may_read_the_workers_log_streams(template: dict[str, Any]) -> None:
    group = "/aws/batch/seqlake-dev-worker"
    resolve = Resolver(template, {
        "WorkerLogGroup": group,
        # what CloudFormation returns for a log group's GetAtt Arn: it ends in ":*"
        "WorkerLogGroup.Arn": f"arn:aws:logs:us-east-1:123456789012:log-group:{group}:*",
    })
    grants = [
        resolve(r)
        for _, st in statements({"Resources": {"F": resources(template)["RecordFailureFunction"]}})
        if "logs:GetLogEvents" in as_list(st["Action"])
        for r in as_list(st["Resource"])
    ]
    stream = f"arn:aws:logs:us-east-1:123456789012:log-group:{group}:log-stream:worker/default/0123456789abcdef"
    assert any(fnmatch.fnmatchcase(stream, g) for g in grants), grants


class _Warnings:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def warning(self, msg: str, *args: Any, **_: Any) -> None:
        self.messages.append(msg % args)


def test_access_denied_on_the_worker_log_is_a_warning_naming_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    warnings = _Warnings()
    monkeypatch.setattr(steps, "logger", warnings)
    clients = steps.clients  # the client factory steps.py uses
    clients.reset()
    logs = clients.client("logs")
    with Stubber(logs) as stub:
        stub.add_client_error("get_log_events", service_error_code="AccessDeniedException",
                              service_message="not authorized to perform: logs:GetLogEvents")
        assert steps.last_log_line("/aws/batch/seqlake-dev-worker", "worker/default/abc") is None
    clients.reset()
    [warning] = warnings.messages
    assert warning.startswith("AccessDenied")
    assert ":logs:us-east-1:*:log-group:/aws/batch/seqlake-dev-worker:log-stream:worker/default/abc" in warning


# 7 ------------------------------------------------------------------------ job definition revisions
def test_a_deploy_keeps_the_job_definition_revision_running_executions_use(template: dict[str, Any]) -> None:
    jd = resources(template)["WorkerJobDefinition"]["Properties"]
    assert jd["ResourceRetentionPolicy"] == {"SkipDeregisterOnUpdate": True}


# 8 ------------------------------------------------------------------------------ AllowedInputBuckets
def _bucket_statements(template: dict[str, Any], reader: str) -> list[Any]:
    """The reader's IAM statements (as written, Fn::If included) that AllowedInputBuckets generates."""
    props = resources(template)[reader]["Properties"]
    docs = [p.get("PolicyDocument", p) for p in props["Policies"] if isinstance(p, dict)]
    return [st for doc in docs for st in doc["Statement"] if "AllowedInputBuckets" in json.dumps(st)]


def test_allowed_input_buckets_are_readable_by_every_role_that_reads_inputs(template: dict[str, Any]) -> None:
    d = deployer(template, AllowedInputBuckets="lab-a,lab-b")
    for reader in INPUT_READERS:
        granted: dict[str, set[str]] = {}
        for st in d.resolve(_bucket_statements(template, reader)):
            for action in as_list(st["Action"]):
                granted.setdefault(action, set()).update(as_list(st["Resource"]))
        for bucket in ("lab-a", "lab-b"):
            assert any(fnmatch.fnmatchcase(f"arn:aws:s3:::{bucket}/runs/x.fastq.gz", r)
                       for r in granted["s3:GetObject"]), (reader, bucket)
            assert any(fnmatch.fnmatchcase(f"arn:aws:s3:::{bucket}", r) for r in granted["s3:ListBucket"]), reader
            assert not any(fnmatch.fnmatchcase("arn:aws:s3:::lab-c/x", r) for r in granted["s3:GetObject"])
    # nothing extra when the list is empty
    none = deployer(template)
    for reader in INPUT_READERS:
        assert _bucket_statements(template, reader) and none.resolve(_bucket_statements(template, reader)) == []
    # a bucket in another account grants these roles in its own policy: the stack names all three
    assert {f"{r}RoleArn" for r in ("StartRunFunction", "PlanFunction", "WorkerJob")} <= set(template["Outputs"])


# 9 --------------------------------------------------------------------------------------- retries
def _api_strategy(template: dict[str, Any]) -> dict[str, Any]:
    """The job definition's RetryStrategy as Batch's API spells it (what the local Batch reads)."""
    rs = resources(template)["WorkerJobDefinition"]["Properties"]["RetryStrategy"]
    rules = [{k[0].lower() + k[1:]: v for k, v in r.items()} for r in rs["EvaluateOnExit"]]
    return {"attempts": 3, "evaluateOnExit": rules}


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (Outcome(1, ESSENTIAL_EXITED), "EXIT"),  # a deterministic crash fails the same way again
        (Outcome(137, ESSENTIAL_EXITED, reason="OutOfMemoryError: Container killed due to memory usage"), "EXIT"),
        (Outcome(EXIT_BAD_INPUT, ESSENTIAL_EXITED), "EXIT"),
        (Outcome(None, "Host EC2 (instance i-0123456789abcdef0) terminated."), "RETRY"),  # Spot reclaim
        (Outcome(None, "Task failed to start", reason="CannotPullContainerError: pull access denied"), "RETRY"),
        (Outcome(None, "Task failed to start", reason="CannotStartContainerError: API error"), "RETRY"),
        (Outcome(None, "Task failed to start"), "RETRY"),
    ],
)
def test_only_infrastructure_failures_are_retried(template: dict[str, Any], outcome: Outcome, expected: str) -> None:
    strategy = _api_strategy(template)
    assert len(strategy["evaluateOnExit"]) <= 5  # Batch's limit
    assert decide(strategy, outcome, 1) == expected


# 10 ------------------------------------------------------------------------------- instance families
#: GiB of memory per vCPU of the x86_64 general families (c: compute, m: general, r: memory)
GIB_PER_VCPU = {"c": 2, "m": 4, "r": 8}


def test_instance_families_fit_the_jobs_memory_per_vcpu(template: dict[str, Any]) -> None:
    # the default: each region's families (test_instance_types_default_to_families_each_region_offers)
    families = {f for region in template["Mappings"]["RegionInstanceTypes"].values()
                for f in region["Families"].split(",")}
    need = default(template, "WorkerMemoryMiB") / 1024 / default(template, "WorkerVcpus")
    # the index job too: it builds a reference's index on IndexJobVcpus with IndexJobMemoryMiB
    index_job = default(template, "IndexJobMemoryMiB") / 1024 / default(template, "IndexJobVcpus")
    for family in families:
        assert GIB_PER_VCPU[family[0]] >= max(need, index_job), family
    for ce in ("SpotComputeEnvironment", "OnDemandComputeEnvironment"):
        given = resources(template)[ce]["Properties"]["ComputeResources"]["InstanceTypes"]
        assert given["Fn::If"][:2] == ["HasInstanceTypes", {"Ref": "InstanceTypes"}]


def test_on_demand_overflow_is_stated_where_it_is_set(template: dict[str, Any]) -> None:
    """Batch places jobs in the second environment whenever the first cannot take them, at its maxvCpus too."""
    assert "SpotMaxVcpus" in template["Parameters"]["OnDemandMaxVcpus"]["Description"]
    assert "SpotMaxVcpus" in (REPO / "docs" / "DEPLOY.md").read_text().split("### Compute")[1].split("###")[0]


# 11 -------------------------------------------------------------------------------------------- disk
def test_instances_get_a_sized_gp3_root_volume(template: dict[str, Any]) -> None:
    lt = resources(template)["WorkerLaunchTemplate"]["Properties"]["LaunchTemplateData"]
    [root] = lt["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/xvda"  # the ECS-optimized AL2023 AMI's root device
    assert root["Ebs"]["VolumeType"] == "gp3" and root["Ebs"]["Encrypted"] is True
    assert root["Ebs"]["VolumeSize"] == {"Ref": "RootVolumeGiB"}
    assert default(template, "RootVolumeGiB") >= 100  # image + staging + a ~7 GB human index, per instance


# 12 ----------------------------------------------------------------------------------------- hygiene
def _user_data(template: dict[str, Any]) -> str:
    data = resources(template)["WorkerLaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"]
    return str(data["Fn::Base64"])


def test_containers_cannot_reach_the_instance_metadata(template: dict[str, Any]) -> None:
    """ECS-on-EC2 Batch jobs use host networking, so the hop limit does not stop them: the metadata address is
    blocked for every user but root on the host, and the jobs run as a user that is not root."""
    md = resources(template)["WorkerLaunchTemplate"]["Properties"]["LaunchTemplateData"]["MetadataOptions"]
    assert md["HttpTokens"] == "required"
    rule = "iptables --insert OUTPUT 1 --destination 169.254.169.254/32 --match owner ! --uid-owner 0 --jump REJECT"
    assert rule in _user_data(template)
    dockerfile = (REPO / "containers" / "worker" / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in ("0", "root"), users
    # and nothing claims the hop limit keeps containers out
    for text in ((REPO / "template.yaml").read_text(), (REPO / "docs" / "DEPLOY.md").read_text()):
        assert "containers do not" not in text and "the containers do\n" not in text


def test_jobs_scratch_is_the_instance_store_with_room_for_every_job_of_the_largest_instance(
    template: dict[str, Any],
) -> None:
    """Item 2 of issue 34: every job's TMPDIR is the host's scratch, the user data mounts the NVMe instance
    store there, and every size of every default family has at least SCRATCH_GB_PER_VCPU of it per vCPU and
    8 GiB of memory per vCPU (so memory, not disk, bounds the children an instance holds)."""
    from localcloud import rules

    scratch_gb_per_vcpu = 37.5  # docs/COST.md, "Scratch disk": a child's worst case is ~33 GB
    jd = resources(template)["WorkerJobDefinition"]["Properties"]["ContainerProperties"]
    assert {"Name": "TMPDIR", "Value": "/scratch"} in jd["Environment"]
    [volume] = [v for v in jd["Volumes"] if v["Name"] == "scratch"]
    assert {"SourceVolume": "scratch", "ContainerPath": "/scratch", "ReadOnly": False} in jd["MountPoints"]
    user_data = _user_data(template)
    assert volume["Host"]["SourcePath"] in user_data and "Instance Storage" in user_data
    assert f"mount -o noatime \"$device\" {volume['Host']['SourcePath']}" in user_data
    storage = _instance_storage()
    families = {f for region in template["Mappings"]["RegionInstanceTypes"].values()
                for f in region["Families"].split(",")}
    for family in families:
        sizes = [t for t in storage if t.split(".")[0] == family and not t.endswith("metal")]
        assert sizes, family
        for instance in sizes:
            vcpus, memory_mib = rules.instance_types()[instance]
            assert storage[instance] / vcpus >= scratch_gb_per_vcpu, instance
            assert memory_mib / vcpus >= 8 * 1024, instance


def _instance_storage() -> dict[str, float]:
    """Instance type -> its instance store in GB, from moto's copy of EC2's DescribeInstanceTypes."""
    import gzip

    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as f:
        data = json.load(f)
    return {name: float(t["InstanceStorageInfo"]["TotalSizeInGB"])
            for name, t in data.items() if t.get("InstanceStorageInfo")}


def _region_families() -> dict[str, set[str]]:
    """Every commercial region -> the instance families EC2 offers there, as moto records EC2's offerings."""
    import gzip

    import moto

    folder = Path(moto.__file__).parent / "ec2" / "resources" / "instance_type_offerings" / "region"
    out = {}
    for path in folder.glob("*.json.gz"):
        with gzip.open(path) as f:
            out[path.name.split(".")[0]] = {o["InstanceType"].split(".")[0] for o in json.load(f)}
    return out


def test_instance_types_default_to_families_each_region_offers(template: dict[str, Any]) -> None:
    """The old default (r5, r5a, r5b, r5n, r6i, r6a, r7i, r7a) named families missing in 21 regions (r7a): a
    deploy there failed. Empty now means the region's own list, every family of which the region offers."""
    assert default(template, "InstanceTypes") == ""
    mapping = template["Mappings"]["RegionInstanceTypes"]
    offered = _region_families()
    assert set(mapping) == set(offered), set(offered) ^ set(mapping)
    for region, families in offered.items():
        listed = mapping[region]["Families"].split(",")
        assert listed and set(listed) <= families, (region, set(listed) - families)
    for ce in ("SpotComputeEnvironment", "OnDemandComputeEnvironment"):
        given = resources(template)[ce]["Properties"]["ComputeResources"]["InstanceTypes"]
        for asked, expected in (("", mapping["us-east-1"]["Families"].split(",")), ("m5,c5", ["m5", "c5"])):
            d = deployer(template, InstanceTypes=asked)
            assert d.resolve({"R": given})["R"] == expected, (ce, asked)


def test_compute_environments_pin_the_al2023_ecs_image(template: dict[str, Any]) -> None:
    for ce in ("SpotComputeEnvironment", "OnDemandComputeEnvironment"):
        cr = resources(template)[ce]["Properties"]["ComputeResources"]
        assert cr["Ec2Configuration"] == [{"ImageType": "ECS_AL2023"}]


def test_only_this_stacks_rule_may_dead_letter(template: dict[str, Any]) -> None:
    doc = resources(template)["StartRunDeadLetterQueuePolicy"]["Properties"]["PolicyDocument"]
    [allow] = [st for st in doc["Statement"] if st["Effect"] == "Allow"]
    # the function's EventBridge event (it also has the settle queue's SQS event source)
    [event] = [name for name, e in resources(template)["StartRunFunction"]["Properties"]["Events"].items()
               if e["Type"] == "EventBridgeRule"]
    # SAM names the rule it generates <function logical id><event name>
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [f"StartRunFunction{event}", "Arn"]}}}


def test_alarms_go_to_the_given_topic(template: dict[str, Any]) -> None:
    res = resources(template)
    alarms = {lid: r for lid, r in res.items() if r.get("Condition") == "HasAlarmTopic"}
    watched = set()
    for r in alarms.values():
        p = r["Properties"]
        if r["Type"] == "AWS::CloudWatch::Alarm":
            assert p["AlarmActions"] == [{"Ref": "AlarmTopicArn"}]
            watched.add(p["MetricName"])
        else:
            assert r["Type"] == "AWS::Events::Rule" and p["Targets"][0]["Arn"] == {"Ref": "AlarmTopicArn"}
            assert p["EventPattern"]["detail"]["status"] == ["FAILED"]
            watched.add("BatchJobsFailed")
    assert watched == {"ApproximateNumberOfMessagesVisible", "ExecutionsFailed", "BatchJobsFailed"}
    assert default(template, "AlarmTopicArn") == ""


def test_every_dead_letter_queue_has_an_alarm(template: dict[str, Any]) -> None:
    """Issue 34: the settle queue's dead-letter queue had none. A dead-letter queue is any queue another
    queue's RedrivePolicy or a function's DeadLetterQueue / OnFailure names."""
    res = resources(template)
    text = json.dumps(res)
    queues = [lid for lid, r in res.items() if r["Type"] == "AWS::SQS::Queue"]
    dead_letter = {q for q in queues
                   if any(f'"{q}", "Arn"' in json.dumps(r["Properties"].get(k, {}))
                          for r in res.values() for k in ("RedrivePolicy", "DeadLetterQueue", "EventInvokeConfig"))
                   or q.endswith("DeadLetterQueue")}
    assert {"StartRunDeadLetterQueue", "StartRunSettleDeadLetterQueue", "RecordRunEndDeadLetterQueue"} <= dead_letter
    watched = {r["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for r in res.values()
               if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"]["Namespace"] == "AWS/SQS"}
    assert dead_letter <= watched, dead_letter - watched
    assert text  # the template was read


def _statements(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node] if "Action" in node and "Effect" in node else []
        return found + [st for v in node.values() for st in _statements(v)]
    if isinstance(node, list):
        return [st for v in node for st in _statements(v)]
    return []


def test_whoever_may_put_an_object_may_abort_its_multipart_upload(template: dict[str, Any]) -> None:
    """A large object goes up in parts (boto3 from 8 MB; the worker's positions and indexes, the lab's FASTQ): an
    upload that fails is aborted by the same caller, which s3:PutObject does not allow (s3:AbortMultipartUpload),
    so its parts stayed billed until the bucket's lifecycle rule removed them."""
    # the start and run-end functions write a request.json, a status.json and one runs row: bytes, one PUT each
    small_writers = {"StartRunFunction", "RecordRunEndFunction"}
    puts = [(lid, st) for lid, r in resources(template).items() if lid not in small_writers
            for st in _statements(r) if st["Effect"] == "Allow" and "s3:PutObject" in as_list(st["Action"])]
    assert {lid for lid, _ in puts} >= {"PlanFunction", "CommitFunction", "WorkerJobRole", "LabMemberPolicy"}
    for lid, st in puts:
        assert "s3:AbortMultipartUpload" in as_list(st["Action"]), (lid, st.get("Sid"))


def test_athena_results_use_the_kms_key_when_one_is_set(template: dict[str, Any]) -> None:
    config = resources(template)["AthenaWorkGroup"]["Properties"]["WorkGroupConfiguration"]["ResultConfiguration"]
    encryption = config["EncryptionConfiguration"]
    for key, expected in (("", {"EncryptionOption": "SSE_S3"}),
                          ("arn:aws:kms:us-east-1:1:key/k", {"EncryptionOption": "SSE_KMS",
                                                               "KmsKey": "arn:aws:kms:us-east-1:1:key/k"})):
        assert deployer(template, KmsKeyArn=key).resolve({"E": encryption})["E"] == expected, key


def test_compute_environments_follow_the_latest_image_on_update(template: dict[str, Any]) -> None:
    for ce in ("SpotComputeEnvironment", "OnDemandComputeEnvironment"):
        assert resources(template)[ce]["Properties"]["ComputeResources"]["UpdateToLatestImageVersion"] is True


def test_the_lab_lists_only_its_prefixes(template: dict[str, Any]) -> None:
    statements = _statements(resources(template)["LabMemberPolicy"])
    lists = [st for st in statements if "s3:ListBucket" in as_list(st["Action"])]
    assert lists
    for st in lists:
        prefixes = st["Condition"]["StringLike"]["s3:prefix"]
        assert prefixes and not any(p in ("*", "") for p in prefixes)
        assert not any(p.startswith(("reference-indexes", "references")) for p in prefixes)


def test_deploy_md_lists_every_batch_and_failed_state() -> None:
    """DEPLOY.md's lists of the fan-out, the failed steps and the timed-out steps name every state of the
    machine that belongs there (the reduce states were missing from all three)."""
    machine = asl()["States"]
    doc = (REPO / "docs" / "DEPLOY.md").read_text()
    flow = doc.split("### State machine", 1)[1].split("###", 1)[0]
    failures = doc.split("### Failures", 1)[1].split("`failed_shard`", 1)[0]
    timeouts = doc.split("- Each Batch step of the state machine", 1)[1].split("has a timeout", 1)[0]
    caught = [name for name, st in machine.items() if st.get("Catch")]
    batch = [name for name, st in machine.items() if "BatchSubmitJob" in str(st.get("Resource", ""))]
    assert set(BATCH_TASKS) == set(batch)
    for name in caught:
        assert f"`{name}`" in flow and f"`{name}`" in failures, name
    for name in batch:
        assert f"`{name}`" in timeouts, name


def test_every_function_and_the_state_machine_log_to_a_group_with_a_retention(template: dict[str, Any]) -> None:
    """Lambda's default log group (/aws/lambda/<name>, made on the first invocation) keeps logs for ever: each
    function names its own group, and every group the stack logs to has LogRetentionDays."""
    res = resources(template)
    functions = [lid for lid, r in res.items() if r["Type"] == "AWS::Serverless::Function"]
    assert len(functions) >= 5
    groups = []
    for fn in functions:
        groups.append(res[fn]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"])
    machine = res["PipelineStateMachine"]["Properties"]["Logging"]["Destinations"]
    groups += [d["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0] for d in machine]
    for group in groups:
        assert res[group]["Type"] == "AWS::Logs::LogGroup", group
        assert res[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, group
    assert len(set(groups)) == len(groups)


def test_expired_delete_markers_are_removed(template: dict[str, Any]) -> None:
    rules = resources(template)["DataBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert any(r.get("ExpiredObjectDeleteMarker") is True and "NoncurrentVersionExpiration" in r for r in rules)


def test_runs_share_the_queue_fairly(template: dict[str, Any]) -> None:
    queue = resources(template)["WorkerJobQueue"]["Properties"]
    assert resources(template)[queue["SchedulingPolicyArn"]["Ref"]]["Type"] == "AWS::Batch::SchedulingPolicy"
    # with a scheduling policy, Batch requires a share identifier on every submission
    for name in BATCH_TASKS:
        share = asl()["States"][name]["Parameters"]["ShareIdentifier.$"]
        assert "$$.Execution.Name" in share and share.startswith("States.Hash(")  # hex: a valid identifier


# 13 ------------------------------------------------------------------------------ Athena reserved words
#: Athena's reserved keywords in SQL SELECT statements (docs: "Escape reserved keywords in queries")
SELECT_RESERVED = set("""ALTER AND AS BETWEEN BY CASE CAST CONSTRAINT CREATE CROSS CUBE CURRENT_CATALOG
CURRENT_DATE CURRENT_PATH CURRENT_ROLE CURRENT_SCHEMA CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER DEALLOCATE
DELETE DESCRIBE DISTINCT DROP ELSE END ESCAPE EXCEPT EXECUTE EXISTS EXTRACT FALSE FIRST FOR FROM FULL GROUP
GROUPING HAVING IN INNER INSERT INTERSECT INTO IS JOIN JSON_ARRAY JSON_EXISTS JSON_OBJECT JSON_QUERY JSON_TABLE
JSON_VALUE LAST LEFT LIKE LISTAGG LOCALTIME LOCALTIMESTAMP NATURAL NORMALIZE NOT NULL OR ORDER OUTER RECURSIVE
RIGHT ROLLUP SELECT SKIP TABLE THEN TRIM TRUE UESCAPE UNION UNNEST USING VALUES WHEN WHERE WITH""".split())  # noqa: SIM905
#: the DDL list's words that are plausible column names (the whole list is in the same docs page)
DDL_RESERVED = set("""ALL ARRAY BINARY BOOLEAN BOTH CHAR COLUMN CONF CURRENT CURSOR DATABASE DATE DAYOFWEEK
DECIMAL DIV DOUBLE END EXCHANGE EXTENDED EXTERNAL FETCH FLOAT FLOOR FOLLOWING FOREIGN FUNCTION GRANT IF IMPORT
INT INTEGER INTERVAL LATERAL LESS LOCAL MACRO MAP MORE NONE NUMERIC OF ON ONLY OUT OVER PARTIALSCAN PARTITION
PERCENT PRECEDING PRECISION PRESERVE PRIMARY PROCEDURE RANGE READS REDUCE REGEXP REFERENCES REVOKE RLIKE ROW
ROWS SET SMALLINT START TABLESAMPLE TIME TIMESTAMP TO TRANSFORM TRIGGER TRUNCATE UNBOUNDED UNIQUEJOIN UPDATE
USER UTC_TIMESTAMP VARCHAR VIEWS WINDOW""".split())  # noqa: SIM905


def test_no_column_needs_quoting_in_queries() -> None:
    columns = {c.name for t in TABLES for c in t.columns} | {"run_id"}
    assert not {c for c in columns if c.upper() in SELECT_RESERVED}


def test_columns_reserved_in_ddl_are_documented_with_their_quoting() -> None:
    """The tables are made through Glue, not DDL; a user who writes DDL over them must quote these."""
    columns = {c.name for t in TABLES for c in t.columns}
    reserved = sorted(c for c in columns if c.upper() in DDL_RESERVED)
    deploy = (REPO / "docs" / "DEPLOY.md").read_text()
    for c in reserved:
        assert f"`` `{c}` ``" in deploy, c


# 14 ------------------------------------------------------------------------------------- layer size
def test_lint_measures_the_layers() -> None:
    """`make lint` (and so `make test`) builds the layers with their Makefile and fails when a function's
    layers together pass 172 MiB; the builds take seconds with a warm pip cache, so they run there once
    rather than here again."""
    lint = (REPO / "Makefile").read_text().split("\nlint:")[1].split("\n\n")[0]
    assert "scripts/layer_size.py" in lint
    script = (REPO / "scripts" / "layer_size.py").read_text()
    assert '"SEQLAKE_LAYER_LIMIT_MIB", "172"' in script and "AWS::Serverless::LayerVersion" in script


def test_asl_stays_valid_json_after_substitution(template: dict[str, Any]) -> None:
    """CloudFormation replaces each ${key} as text, then parses: the definition must parse either way."""
    subs = resources(template)["PipelineStateMachine"]["Properties"]["DefinitionSubstitutions"]
    text = ASL_PATH.read_text()
    for key in subs:
        text = text.replace("${" + key + "}", "86400" if key.endswith("Seconds") else "arn:x")
    assert json.loads(text)["States"]["Init"]["Parameters"]["limits"]
