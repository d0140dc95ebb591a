"""template.yaml and the state machine: generated parts in sync, IAM least privilege, retry contract,
ASL structure. Static: no AWS, no moto."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import pytest

from seqlake.aws import render_template
from seqlake.base.cpus import THREADS_VAR
from seqlake.base.layout import REFERENCE_INDEXES, batch_job_writes
from seqlake.lake.tables import RESULT_TABLES, TABLES

from .conftest import REPO, rendered

ASL_PATH = REPO / "statemachines" / "pipeline.asl.json"

# Every Allow on Resource "*" in the template, with the reason AWS requires it: least privilege everywhere
# else, and each exception reviewable. A new one fails test_resource_star_only_where_aws_requires_it until it is listed.
STAR_RESOURCE_REASONS = {
    "batch:ListJobs": "no resource-level permissions for ListJobs",
    "batch:DescribeJobs": "no resource-level permissions for DescribeJobs",
    "xray:PutTraceSegments": "X-Ray ingestion has no resource-level permissions",
    "xray:PutTelemetryRecords": "X-Ray ingestion has no resource-level permissions",
    "xray:GetSamplingRules": "X-Ray sampling has no resource-level permissions",
    "xray:GetSamplingTargets": "X-Ray sampling has no resource-level permissions",
    "logs:CreateLogDelivery": "CloudWatch Logs vended delivery for Step Functions accepts only *",
    "logs:GetLogDelivery": "as above",
    "logs:UpdateLogDelivery": "as above",
    "logs:DeleteLogDelivery": "as above",
    "logs:ListLogDeliveries": "as above",
    "logs:PutResourcePolicy": "as above",
    "logs:DescribeResourcePolicies": "as above",
    "logs:DescribeLogGroups": "as above",
}


def asl() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ASL_PATH.read_text())
    return data


def statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(resource id, statement) of every inline IAM statement in the template (roles and SAM functions)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for lid, r in template["Resources"].items():
        props = r.get("Properties", {})
        docs = [p["PolicyDocument"] for p in props.get("Policies", []) if isinstance(p, dict) and "PolicyDocument" in p]
        docs += [p for p in props.get("Policies", []) if isinstance(p, dict) and "Statement" in p]
        for doc in docs:
            for raw in doc["Statement"]:
                # the KMS statements are {"Fn::If": [condition, statement, AWS::NoValue]}
                out.append((lid, raw["Fn::If"][1] if "Fn::If" in raw else raw))
    return out


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


# ------------------------------------------------------------------------------------------ generated
def test_generated_block_is_up_to_date() -> None:
    text = (REPO / "template.yaml").read_text()
    assert render_template.rendered_template(text) == text, "run: python -m seqlake.aws.render_template"


def test_glue_tables_equal_tables_py(template: dict[str, Any]) -> None:
    glue = {
        r["Properties"]["TableInput"]["Name"]: r["Properties"]["TableInput"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Glue::Table" and r["Properties"]["TableInput"].get("TableType") != "VIRTUAL_VIEW"
    }
    assert set(glue) == {t.name for t in TABLES}
    for t in TABLES:
        expected = t.glue_table_input(location="X")
        got = glue[t.name]
        assert got["StorageDescriptor"]["Columns"] == expected["StorageDescriptor"]["Columns"]
        if t.is_iceberg:  # run_id a column (the Iceberg partition), no Hive partition key
            assert "PartitionKeys" not in got and got["StorageDescriptor"]["Columns"][-1]["Name"] == "run_id"
        else:
            assert got["PartitionKeys"] == expected["PartitionKeys"] == [{"Name": "run_id", "Type": "string"}]
        assert got["StorageDescriptor"]["Location"] == {"Fn::Sub": f"s3://${{DataBucket}}/results/{t.name}/"}


#: what Athena requires of an Iceberg table in the Glue catalog, and how CloudFormation declares one:
#: https://docs.aws.amazon.com/athena/latest/ug/querying-iceberg-creating-tables.html (the table property
#: table_type = ICEBERG; Athena creates and reads Iceberg format version 2),
#: https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-glue-table-opentableformatinput.html
#: and .../aws-properties-glue-table-iceberginput.html (MetadataOperation CREATE: Glue writes the table's first
#: metadata file and its metadata_location; Version "2")
ICEBERG_DOCS = "https://docs.aws.amazon.com/athena/latest/ug/querying-iceberg-creating-tables.html"
#: Iceberg's primitive types as Athena names them in Glue (no tinyint or smallint in Iceberg)
ICEBERG_GLUE_TYPES = {"string", "int", "bigint", "double", "boolean", "timestamp", "float", "date", "binary"}


def test_every_result_table_is_an_iceberg_v2_table_athena_can_read(template: dict[str, Any]) -> None:
    """The requirements of ICEBERG_DOCS, over the rendered template (table type, metadata location created by
    Glue, format version 2), for every result table; ``runs`` stays a Hive table (docs/TABLES.md)."""
    resources = {r["Properties"]["TableInput"]["Name"]: r["Properties"] for r in template["Resources"].values()
                 if r["Type"] == "AWS::Glue::Table"}
    iceberg = {t.name for t in TABLES if t.is_iceberg}
    assert iceberg == set(RESULT_TABLES), ICEBERG_DOCS
    for name in iceberg:
        props = resources[name]
        table_input = props["TableInput"]
        assert table_input["Parameters"]["table_type"] == "ICEBERG", (name, ICEBERG_DOCS)
        # Glue writes the metadata (and the metadata_location parameter) from this, at deploy
        assert props["OpenTableFormatInput"] == {"IcebergInput": {"MetadataOperation": "CREATE", "Version": "2"}}, name
        assert "metadata_location" not in table_input["Parameters"], "Glue sets it; a fixed one would point nowhere"
        assert table_input["TableType"] == "EXTERNAL_TABLE" and "PartitionKeys" not in table_input, name
        assert {c["Type"] for c in table_input["StorageDescriptor"]["Columns"]} <= ICEBERG_GLUE_TYPES, name
        assert "SerdeInfo" not in table_input["StorageDescriptor"], "a Hive SerDe on an Iceberg table"
    assert "OpenTableFormatInput" not in resources["runs"] and resources["runs"]["TableInput"]["PartitionKeys"]


def test_drift_is_detected(tmp_path: Any) -> None:
    # Given a template whose generated block was edited by hand
    text = (REPO / "template.yaml").read_text().replace("Type: bigint", "Type: int", 1)
    (tmp_path / "template.yaml").write_text(text)
    (tmp_path / "queries").symlink_to(REPO / "queries")
    (tmp_path / "views").symlink_to(REPO / "views")
    # Then the check fails, and rendering restores the original
    assert render_template.main(["--check", "--template", str(tmp_path / "template.yaml")]) == 1
    assert render_template.main(["--template", str(tmp_path / "template.yaml")]) == 0
    assert (tmp_path / "template.yaml").read_text() == (REPO / "template.yaml").read_text()


def test_every_query_is_a_named_query(template: dict[str, Any]) -> None:
    named = {
        r["Properties"]["QueryString"] for r in template["Resources"].values() if r["Type"] == "AWS::Athena::NamedQuery"
    }
    files = sorted((REPO / "queries").glob("*.sql"))
    assert files, "queries/*.sql is empty"
    assert named == {f.read_text() for f in files}


def test_every_view_is_a_glue_view(template: dict[str, Any]) -> None:
    views = {
        r["Properties"]["TableInput"]["Name"]: r["Properties"]["TableInput"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Glue::Table" and r["Properties"]["TableInput"].get("TableType") == "VIRTUAL_VIEW"
    }
    files = render_template.read_views(REPO / "views")
    assert files, "views/*.sql is empty"
    assert set(views) == {v.name for v in files}
    assert not set(views) & {t.name for t in TABLES}
    for v in files:
        got = views[v.name]
        assert got["StorageDescriptor"]["Columns"] == [{"Name": n, "Type": t} for n, t in v.columns]
        assert got["Parameters"] == {"presto_view": "true", "comment": "Presto View"}


def test_layer_pins_equal_pyproject() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {}
    for d in deps["dependencies"] + deps["optional-dependencies"]["local"]:
        name, version = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)", d).groups()  # type: ignore[union-attr]
        pins[name.lower()] = version
    requirements = sorted((REPO / "layers").glob("*/requirements.txt"))
    assert len(requirements) >= 2
    for path in requirements:
        for line in path.read_text().splitlines():
            if line and not line.startswith("#"):
                name, version = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)$", line).groups()  # type: ignore[union-attr]
                assert pins.get(name.lower(), version) == version, f"{path}: {line}: pyproject has {pins[name.lower()]}"


# -------------------------------------------------------------------------------------------------- IAM
def test_no_action_star(template: dict[str, Any]) -> None:
    for lid, st in statements(template):
        if st["Effect"] != "Allow":
            continue
        for action in as_list(st["Action"]):
            assert action != "*" and not action.endswith(":*"), f"{lid}: {action}"


def test_resource_star_only_where_aws_requires_it(template: dict[str, Any]) -> None:
    for lid, st in statements(template):
        if st["Effect"] == "Allow" and "*" in as_list(st["Resource"]):
            for action in as_list(st["Action"]):
                assert action in STAR_RESOURCE_REASONS, f"{lid}: {action} on Resource '*' without a listed reason"


def test_worker_role_writes_only_under_runs_and_reference_indexes(template: dict[str, Any]) -> None:
    role = template["Resources"]["WorkerJobRole"]["Properties"]
    writes = [
        st
        for _, st in statements({"Resources": {"WorkerJobRole": {"Properties": role}}})
        if st["Effect"] == "Allow"
        and any(a.startswith("s3:") and a not in ("s3:GetObject", "s3:ListBucket") for a in as_list(st["Action"]))
    ]
    assert writes
    for st in writes:
        assert set(as_list(st["Action"])) == {"s3:PutObject", "s3:AbortMultipartUpload"}
        targets = [r["Fn::Sub"] for r in as_list(st["Resource"])]
        # what base/layout.py says a Batch job writes, no more: the children's alignments and the reducers'
        # regions are staged under runs/ (the commit publishes them into results/); the index job stores a
        # reference's index in seqlake's own prefix, never beside the user's FASTA under references/
        assert targets == [f"${{DataBucket.Arn}}/{pattern}" for pattern, _ in batch_job_writes()]
        assert f"${{DataBucket.Arn}}/{REFERENCE_INDEXES}/*" in targets
        assert not any(t.startswith(("${DataBucket.Arn}/results", "${DataBucket.Arn}/incoming")) for t in targets)
        assert "${DataBucket.Arn}/runs/*" not in targets  # a run's status.json and todo/ are the Lambdas'


def test_failure_step_cannot_register_result_partitions(template: dict[str, Any]) -> None:
    fn = template["Resources"]["RecordFailureFunction"]["Properties"]
    glue = [
        st
        for _, st in statements({"Resources": {"F": {"Properties": fn}}})
        if {"glue:BatchCreatePartition", "glue:CreatePartition"} & set(as_list(st["Action"]))
    ]
    tables = [r["Fn::Sub"] for st in glue for r in as_list(st["Resource"]) if "table/" in r["Fn::Sub"]]
    assert tables == ["arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:table/${GlueDatabase}/runs"]


def test_start_function_records_rejections_in_the_runs_table_only(template: dict[str, Any]) -> None:
    fn = template["Resources"]["StartRunFunction"]["Properties"]
    allowed = [st for _, st in statements({"Resources": {"F": {"Properties": fn}}}) if st["Effect"] == "Allow"]
    # it writes the run's request, and a rejected input's status.json and runs row, nothing else
    writes = [
        st
        for st in allowed
        if any(a.startswith("s3:") and a not in ("s3:GetObject", "s3:ListBucket") for a in as_list(st["Action"]))
    ]
    assert [as_list(st["Action"]) for st in writes] == [["s3:PutObject"], ["s3:PutObject"]]
    assert [r["Fn::Sub"] for st in writes for r in as_list(st["Resource"])] == [
        "${DataBucket.Arn}/runs/*/request.json",
        "${DataBucket.Arn}/runs/*/status.json",
        "${DataBucket.Arn}/results/runs/run_id=*/part-00000.parquet",
    ]
    # and registers partitions in the runs table only
    glue = [st for st in allowed if any(a.startswith("glue:") for a in as_list(st["Action"]))]
    assert [as_list(st["Action"]) for st in glue] == [["glue:BatchCreatePartition"]]
    tables = [r["Fn::Sub"] for r in as_list(glue[0]["Resource"]) if "table/" in r["Fn::Sub"]]
    assert tables == ["arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:table/${GlueDatabase}/runs"]
    assert fn["Environment"]["Variables"]["GLUE_DATABASE"] == {"Ref": "GlueDatabase"}


def test_commit_can_undo_a_half_registered_run(template: dict[str, Any]) -> None:
    fn = template["Resources"]["CommitFunction"]["Properties"]
    actions = {a for _, st in statements({"Resources": {"F": {"Properties": fn}}}) for a in as_list(st["Action"])}
    assert {"glue:BatchCreatePartition", "glue:BatchDeletePartition"} <= actions


def test_bucket_policy_denies_insecure_transport(template: dict[str, Any]) -> None:
    doc = template["Resources"]["DataBucketPolicy"]["Properties"]["PolicyDocument"]
    deny = [st for st in doc["Statement"] if st["Effect"] == "Deny"]
    assert any(
        st["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        and st["Principal"] == "*"
        and st["Action"] == "s3:*"
        and len(st["Resource"]) == 2
        for st in deny
    )


def test_bucket_is_private_encrypted_and_expires_working_data(template: dict[str, Any]) -> None:
    p = template["Resources"]["DataBucket"]["Properties"]
    assert all(p["PublicAccessBlockConfiguration"].values())
    assert p["NotificationConfiguration"]["EventBridgeConfiguration"]["EventBridgeEnabled"] is True
    rules = {r["Id"]: r for r in p["LifecycleConfiguration"]["Rules"]}
    assert rules["runs-working-data"]["Prefix"] == "runs/"
    assert rules["athena-results"]["Prefix"] == "athena-results/"
    enc = p["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]["Fn::If"]
    assert enc[0] == "HasKmsKey" and enc[1]["SSEAlgorithm"] == "aws:kms" and enc[2]["SSEAlgorithm"] == "AES256"


def test_no_hardcoded_partition(template: dict[str, Any]) -> None:
    text = (REPO / "template.yaml").read_text() + ASL_PATH.read_text()
    assert "arn:aws:" not in text


# ------------------------------------------------------------------------------------- Batch contract
def test_retry_strategy_is_the_exit_code_contract(template: dict[str, Any]) -> None:
    rs = template["Resources"]["WorkerJobDefinition"]["Properties"]["RetryStrategy"]
    assert rs["Attempts"] == {"Ref": "JobAttempts"}
    rules = rs["EvaluateOnExit"]
    assert rules[-1] == {"Action": "EXIT", "OnReason": "*"}  # bad input (exit 65) and every other failure
    assert {"Action": "RETRY", "OnStatusReason": "Host EC2*"} in rules
    assert any(r.get("OnReason", "").startswith("CannotPullContainerError") for r in rules)
    assert len(rules) <= 5  # the Batch limit


def test_spot_first_then_on_demand(template: dict[str, Any]) -> None:
    res = template["Resources"]
    order = res["WorkerJobQueue"]["Properties"]["ComputeEnvironmentOrder"]
    assert [o["ComputeEnvironment"]["Ref"] for o in order] == [
        "SpotComputeEnvironment",
        "OnDemandComputeEnvironment",
    ]
    spot = res["SpotComputeEnvironment"]["Properties"]["ComputeResources"]
    assert spot["Type"] == "SPOT" and spot["AllocationStrategy"] == "SPOT_PRICE_CAPACITY_OPTIMIZED"
    assert spot["MinvCpus"] == 0 and spot["InstanceTypes"]["Fn::If"][1] == {"Ref": "InstanceTypes"}
    # many Spot pools in every region: its default families hold at least 8 instance types
    from localcloud import rules

    for region, default in template["Mappings"]["RegionInstanceTypes"].items():
        assert len(rules.expand(default["Families"].split(","))) >= 8, region
    jd = res["WorkerJobDefinition"]["Properties"]
    assert jd["PropagateTags"] is True and jd["Timeout"]["AttemptDurationSeconds"] == {"Ref": "AttemptDurationSeconds"}
    assert jd["ContainerProperties"]["Command"] == ["seqlake", "worker"]
    mounts = jd["ContainerProperties"]["MountPoints"]
    env = {e["Name"]: e["Value"] for e in jd["ContainerProperties"]["Environment"]}
    assert mounts[0]["ContainerPath"] == env["SEQLAKE_REF_CACHE"]
    # the worker aligns on as many threads as the job has vCPUs
    vcpus = next(r["Value"] for r in jd["ContainerProperties"]["ResourceRequirements"] if r["Type"] == "VCPU")
    assert env[THREADS_VAR] == vcpus == {"Ref": "WorkerVcpus"}


# ------------------------------------------------------------------------------------------------- ASL
def test_asl_placeholders_match_definition_substitutions(template: dict[str, Any]) -> None:
    subs = set(template["Resources"]["PipelineStateMachine"]["Properties"]["DefinitionSubstitutions"])
    used = set(re.findall(r"\$\{(\w+)\}", ASL_PATH.read_text()))
    assert used == subs


def test_every_task_retries_transient_errors_and_is_caught() -> None:
    states = asl()["States"]
    for name, s in states.items():
        if s["Type"] != "Task":
            continue
        errors = {e for r in s["Retry"] for e in r["ErrorEquals"]}
        if s["Resource"] == "${LambdaInvoke}":
            assert {
                "Lambda.ServiceException",
                "Lambda.AWSLambdaException",
                "Lambda.SdkClientException",
                "Lambda.TooManyRequestsException",
            } <= errors, name
        else:
            assert "Batch.AWSBatchException" in errors and "States.TaskFailed" not in errors, name
        catch = s["Catch"]
        assert catch[0]["ErrorEquals"] == ["States.ALL"]
        if name == "RecordFailure":
            # through the state that gives each error a Cause where it has none, then FailedUnrecorded
            assert catch[0]["Next"] == "FillMissingCauses"
            assert states["FillMissingCauses"]["Next"] == "FailedUnrecorded"
            continue
        # the failure passes through a state that names the failed state, then RecordFailure
        named = states[catch[0]["Next"]]
        assert named["Type"] == "Pass" and named["Result"] == name and named["Next"] == "RecordFailure", name
        assert named["ResultPath"] == "$.failed_step"


def test_failed_step_names_are_the_models() -> None:
    """Every state a failure can be recorded for is a :class:`seqlake.base.model.Step`, and vice versa."""
    from seqlake.base.model import Step

    states = asl()["States"]
    named = {s["Result"] for s in states.values() if s["Type"] == "Pass" and s.get("ResultPath") == "$.failed_step"}
    assert named == {s.value for s in Step} - {Step.START.value}


def test_fanout_uses_a_plain_job_for_one_shard() -> None:
    states = asl()["States"]
    fanout = states["Fanout"]
    assert fanout["Choices"] == [
        {"Variable": "$.plan.array_size", "NumericGreaterThan": 1, "Next": "ProcessShards"},
        {"Variable": "$.plan.array_size", "NumericEquals": 1, "Next": "ProcessOneShard"},
    ]
    # a re-run whose children are all done already goes straight to the reduce
    assert fanout["Default"] == "PlanReduce"
    assert "ArrayProperties" in states["ProcessShards"]["Parameters"]
    assert "ArrayProperties" not in states["ProcessOneShard"]["Parameters"]


def test_the_reduce_runs_one_reducer_per_region_between_the_children_and_the_commit() -> None:
    states = asl()["States"]
    assert states["ProcessShards"]["Next"] == states["ProcessOneShard"]["Next"] == "PlanReduce"
    assert states["PlanReduce"]["Next"] == "ReduceFanout"
    assert states["ReduceFanout"]["Choices"] == [
        {"Variable": "$.reduce.regions", "NumericGreaterThan": 1, "Next": "ReduceRegions"},
        {"Variable": "$.reduce.regions", "NumericEquals": 1, "Next": "ReduceOneRegion"},
    ]
    assert states["ReduceFanout"]["Default"] == "Commit"  # no reference: nothing to reduce
    assert states["ReduceRegions"]["Parameters"]["ArrayProperties"] == {"Size.$": "$.reduce.regions"}
    for name in ("ReduceRegions", "ReduceOneRegion"):
        state = states[name]
        assert state["Next"] == "Commit"
        overrides = state["Parameters"]["ContainerOverrides"]
        assert overrides["Command"] == ["seqlake", "reduce"]
        # the commit reads the shard jobs' accounting from $.batch: the reducers' job goes elsewhere
        assert state["ResultPath"] == "$.reduce_batch"


@pytest.mark.parametrize("state", ["ProcessShards", "ProcessOneShard"])
def test_shard_jobs_get_only_the_plan_and_todo_uris(state: str) -> None:
    overrides = asl()["States"][state]["Parameters"]["ContainerOverrides"]
    assert overrides == {"Environment": [{"Name": "SEQLAKE_PLAN_URI", "Value.$": "$.plan.plan_uri"},
                                         {"Name": "SEQLAKE_TODO_URI", "Value.$": "$.plan.todo_uri"}],
                         # the plan's sizes (runs/<id>/jobs.json): the reference's index decides the memory
                         "ResourceRequirements": [{"Type": "VCPU", "Value.$": "$.plan.jobs.child.vcpus"},
                                                  {"Type": "MEMORY", "Value.$": "$.plan.jobs.child.memory_mib"}]}


def test_paths_lead_to_succeed_or_fail() -> None:
    states = asl()["States"]
    assert states["Failed"]["Type"] == "Fail" and states["RecordFailure"]["Next"] == "Failed"
    assert states["Failed"]["CausePath"] == "$.failure.result.reason"  # the recorded one-line reason
    assert states["Commit"]["Next"] == "Succeeded" and states["Succeeded"]["Type"] == "Succeed"
    reachable, todo = set(), [asl()["StartAt"]]
    while todo:
        name = todo.pop()
        if name in reachable:
            continue
        reachable.add(name)
        s = states[name]
        todo += [s[k] for k in ("Next", "Default") if k in s]
        todo += [c["Next"] for c in s.get("Choices", []) + s.get("Catch", [])]
    assert reachable == set(states)


def test_sam_translates_offline(template: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """aws-sam-translator (what `sam deploy` and the local cloud run) accepts the template."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    out = rendered(template)
    types = {r["Type"] for r in out["Resources"].values()}
    assert {
        "AWS::Lambda::Function",
        "AWS::StepFunctions::StateMachine",
        "AWS::Events::Rule",
        "AWS::Lambda::LayerVersion",
    } <= types
    rule = out["Resources"]["StartRunFunctionInputUploaded"]  # SAM's name: <function><event>
    target = rule["Properties"]["Targets"][0]
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 10 and "DeadLetterConfig" in target
    assert set(RESULT_TABLES) < {t.name for t in TABLES}


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_samconfig_environment_sets_every_required_parameter(template: dict[str, Any], env: str) -> None:
    cfg = tomllib.loads((REPO / "samconfig.toml").read_text())
    deploy = cfg[env]["deploy"]["parameters"]
    overrides = dict(kv.split("=", 1) for kv in deploy["parameter_overrides"].split())
    params = template["Parameters"]
    assert set(overrides) <= set(params), set(overrides) - set(params)
    required = {k for k, p in params.items() if "Default" not in p}
    assert required <= set(overrides), required - set(overrides)
    assert overrides["Stage"] == env and deploy["stack_name"] == f"seqlake-{env}"
    assert "CAPABILITY_IAM" in deploy["capabilities"] and "CAPABILITY_AUTO_EXPAND" in deploy["capabilities"]


def test_index_job_decodes_on_the_vcpus_it_is_given(template: dict[str, Any]) -> None:
    """The index job's vCPUs are the plan's (2 for a small reference, IndexJobVcpus for a large one), and it
    decodes on as many threads."""
    overrides = json.loads(ASL_PATH.read_text())["States"]["IndexJob"]["Parameters"]["ContainerOverrides"]
    vcpus = next(r["Value.$"] for r in overrides["ResourceRequirements"] if r["Type"] == "VCPU")
    env = {e["Name"]: e.get("Value.$") for e in overrides["Environment"]}
    assert vcpus == env[THREADS_VAR] == "$.plan.jobs.index.vcpus"
    plan_env = template["Resources"]["PlanFunction"]["Properties"]["Environment"]["Variables"]
    assert plan_env["INDEX_JOB_VCPUS"] == {"Ref": "IndexJobVcpus"}
    assert template["Parameters"]["IndexJobVcpus"]["Default"] >= 2


def test_index_job_gets_the_memory_a_reference_index_needs(template: dict[str, Any]) -> None:
    """The index job builds a reference's minimap2 index (GRCh38 with sr: about 11 GiB, docs/DEPLOY.md) with
    its own memory, not a shard's: what the plan sized from the reference, within IndexJobMemoryMiB."""
    overrides = json.loads(ASL_PATH.read_text())["States"]["IndexJob"]["Parameters"]["ContainerOverrides"]
    memory = next(r["Value.$"] for r in overrides["ResourceRequirements"] if r["Type"] == "MEMORY")
    assert memory == "$.plan.jobs.index.memory_mib"
    plan_env = template["Resources"]["PlanFunction"]["Properties"]["Environment"]["Variables"]
    assert plan_env["INDEX_JOB_MEMORY_MIB"] == {"Ref": "IndexJobMemoryMiB"}
    assert template["Parameters"]["IndexJobMemoryMiB"]["Default"] >= 11 * 1024
