"""What the template's roles must never do, tried for real on the local cloud with IAM enforced: each
request is signed as the role's own session and refused with AWS's AccessDenied naming action and resource."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localcloud import iam
from localcloud.cloud import LocalCloud
from seqlake.base.errors import access_denied
from seqlake.base.layout import GENOMES, RunLayout, batch_job_writes, child_name
from seqlake.lake.tables import RESULT_TABLES

from .conftest import put

# one xdist worker (GROUPS in tests/conftest.py): the local cloud with IAM enforced is started once

#: the roles of the template's pieces (logical ids)
WORKER, START, COMMIT = "WorkerJobRole", "StartRunFunctionRole", "CommitFunctionRole"
FAILURE = "RecordFailureFunctionRole"
DELETE, COMPACT = "DeleteSampleFunctionRole", "CompactFunctionRole"


def as_role(cloud: LocalCloud, role: str, service: str) -> Any:
    return cloud.iam.client(iam.role_arn(str(cloud.deployment.physical[role])), service)


def refused(call: Callable[[], Any]) -> tuple[str, str]:
    """The (action, resource) of the AccessDenied ``call`` gets."""
    with pytest.raises(ClientError) as caught:
        call()
    denied = access_denied(caught.value)
    assert denied is not None, caught.value
    return denied


@pytest.fixture(scope="module")
def enforced(cloud: LocalCloud) -> LocalCloud:
    if not cloud.iam.enforce:
        pytest.skip(f"{iam.var()} turns IAM enforcement off")
    return cloud


def test_a_batch_child_never_writes_or_deletes_inputs_or_committed_results(enforced: LocalCloud) -> None:
    """The worker role (the children's, the reducers' and the index job's) writes its parts under ``runs/``:
    under ``incoming/`` and under any table of a committed run's results (the alignments and the reducers'
    tables included, which the commit publishes) it may not put, copy into or delete anything."""
    cloud = enforced
    arn = f"arn:aws:s3:::{cloud.bucket}"
    run = RunLayout.in_bucket(cloud.bucket, "lp-committed")
    put(cloud, "incoming/lp/in.fastq", b"@r\nACGT\n+\nIIII\n")
    committed = [run.published_part(t, child_name(0)).removeprefix(f"s3://{cloud.bucket}/")
                 for t in (*RESULT_TABLES, GENOMES)]
    for key in committed:
        put(cloud, key, b"committed")
    s3 = as_role(cloud, WORKER, "s3")
    assert s3.get_object(Bucket=cloud.bucket, Key="incoming/lp/in.fastq")["Body"].read()  # it reads inputs
    staged = run.alignments_part(0).removeprefix(f"s3://{cloud.bucket}/")
    s3.put_object(Bucket=cloud.bucket, Key=staged, Body=b"part")  # and writes its parts under runs/
    for key in ("incoming/lp/in.fastq", "incoming/lp/new.fastq", *committed):
        put_refused = refused(lambda k=key: s3.put_object(Bucket=cloud.bucket, Key=k, Body=b"x"))
        assert put_refused == ("s3:PutObject", f"{arn}/{key}")
        copy_refused = refused(lambda k=key: s3.copy_object(
            Bucket=cloud.bucket, Key=k, CopySource={"Bucket": cloud.bucket, "Key": staged}))
        assert copy_refused == ("s3:PutObject", f"{arn}/{key}")
    for key in ("incoming/lp/in.fastq", *committed):
        delete_refused = refused(lambda k=key: s3.delete_object(Bucket=cloud.bucket, Key=k))
        assert delete_refused == ("s3:DeleteObject", f"{arn}/{key}")
    platform = cloud.client("s3")
    assert platform.get_object(Bucket=cloud.bucket, Key="incoming/lp/in.fastq")["Body"].read() == (
        b"@r\nACGT\n+\nIIII\n")
    assert {platform.get_object(Bucket=cloud.bucket, Key=k)["Body"].read() for k in committed} == {b"committed"}


def test_a_batch_job_writes_only_what_the_layout_says_a_batch_job_writes(enforced: LocalCloud) -> None:
    """The worker role's PutObject was all of ``runs/*``: a child could overwrite its run's ``status.json``,
    the execution's ``todo/``, the reduce plan or the index job's ``index/job.json``, which the Lambdas write.
    It is now each pattern of :func:`seqlake.base.layout.batch_job_writes` (template.yaml is rendered from it):
    one key of each is written, and the Lambdas' records under ``runs/`` are refused."""
    cloud = enforced
    s3 = as_role(cloud, WORKER, "s3")
    run = RunLayout.in_bucket(cloud.bucket, "lp-writes")
    key = {"*": "lp-writes"}
    for pattern, _ in batch_job_writes():
        # a concrete key of the pattern: the run's id for its first '*', a name for any other
        concrete = pattern.replace("*", key["*"], 1).replace("*", "child=00000/x.json")
        s3.put_object(Bucket=cloud.bucket, Key=concrete, Body=b"job")
    lambdas_own = [run.status, run.todo("exec-1"), run.reduce_plan, run.index_job, run.request, run.report,
                   run.coverage_points]
    for uri in lambdas_own:
        k = uri.removeprefix(f"s3://{cloud.bucket}/")
        assert refused(lambda k=k: s3.put_object(Bucket=cloud.bucket, Key=k, Body=b"x")) == (
            "s3:PutObject", f"arn:aws:s3:::{cloud.bucket}/{k}")


def test_the_commit_publishes_parts_by_copies_that_read_their_source(enforced: LocalCloud) -> None:
    """The commit copies a staged part into its result partition (s3:GetObject on the source under ``runs/``,
    s3:PutObject on the destination); a copy is judged on its source too, so it cannot copy an input."""
    cloud = enforced
    run = RunLayout.in_bucket(cloud.bucket, "lp-publish")
    staged, published = (u.removeprefix(f"s3://{cloud.bucket}/")
                         for u in (run.alignments_part(1), run.published_part("alignments", child_name(1))))
    put(cloud, staged, b"part")
    put(cloud, "incoming/lp-publish/in.fastq", b"@r\nA\n+\nI\n")
    s3 = as_role(cloud, COMMIT, "s3")
    s3.copy_object(Bucket=cloud.bucket, Key=published, CopySource={"Bucket": cloud.bucket, "Key": staged})
    assert cloud.client("s3").get_object(Bucket=cloud.bucket, Key=published)["Body"].read() == b"part"
    source = "incoming/lp-publish/in.fastq"
    assert refused(lambda: s3.copy_object(Bucket=cloud.bucket, Key=published.replace("child=", "x"),
                                          CopySource={"Bucket": cloud.bucket, "Key": source})) == (
        "s3:GetObject", f"arn:aws:s3:::{cloud.bucket}/{source}")


def test_the_start_function_reads_no_bucket_outside_allowed_input_buckets(enforced: LocalCloud) -> None:
    cloud = enforced
    platform = cloud.client("s3")
    platform.create_bucket(Bucket="another-lab")
    platform.put_object(Bucket="another-lab", Key="incoming/x.fastq", Body=b"@r\nA\n+\nI\n")
    s3 = as_role(cloud, START, "s3")
    put(cloud, "incoming/lp-start/x.fastq", b"@r\nA\n+\nI\n")
    assert s3.get_object(Bucket=cloud.bucket, Key="incoming/lp-start/x.fastq")  # its own bucket's inputs: yes
    assert refused(lambda: s3.get_object(Bucket="another-lab", Key="incoming/x.fastq")) == (
        "s3:GetObject", "arn:aws:s3:::another-lab/incoming/x.fastq")
    assert refused(lambda: s3.list_objects_v2(Bucket="another-lab", Prefix="incoming/")) == (
        "s3:ListBucket", "arn:aws:s3:::another-lab")


def _partition(cloud: LocalCloud, table: str, run_id: str) -> dict[str, Any]:
    return {"Values": [run_id], "StorageDescriptor": {"Location": f"s3://{cloud.bucket}/results/{table}/run_id={run_id}/"}}


def test_only_the_commit_registers_or_drops_result_partitions(enforced: LocalCloud) -> None:
    """Registering a partition makes a run's results visible; only the commit does it (the start and failure
    steps record a rejected or failed run in ``runs`` only), and only the commit and the failure step's undo
    of a half-committed run drop one."""
    cloud = enforced
    roles = [lid for lid, r in cloud.deployment.cfn["Resources"].items() if r["Type"] == "AWS::IAM::Role"]
    assert {WORKER, START, COMMIT, FAILURE} <= set(roles)
    table = RESULT_TABLES[0]
    for role in roles:
        glue = as_role(cloud, role, "glue")
        create = lambda g=glue: g.batch_create_partition(  # noqa: E731
            DatabaseName=cloud.database, TableName=table, PartitionInputList=[_partition(cloud, table, "lp-glue")])
        drop = lambda g=glue: g.batch_delete_partition(  # noqa: E731
            DatabaseName=cloud.database, TableName=table, PartitionsToDelete=[{"Values": ["lp-glue"]}])
        if role == COMMIT:
            create()
            drop()
            continue
        assert refused(create)[0] == "glue:BatchCreatePartition"
        if role != FAILURE:
            assert refused(drop)[0] == "glue:BatchDeletePartition"


def test_the_maintenance_functions_touch_only_what_they_maintain(enforced: LocalCloud) -> None:
    """The delete function removes a sample's objects (uploads, staged parts, reports, the tables' files) but
    writes none of them back, and leaves the references alone; the compaction removes nothing outside
    ``results/`` and reads no upload; neither drops a table."""
    cloud = enforced
    arn = f"arn:aws:s3:::{cloud.bucket}"
    upload, staged, report, reference = ("incoming/lp-maint/in.fastq", "runs/lp-maint/status.json",
                                         "reports/lp-maint/index.html", "references/lp-maint/ref.fasta")
    for key in (upload, staged, report, reference):
        put(cloud, key, b"x")
    deleting, compacting = as_role(cloud, DELETE, "s3"), as_role(cloud, COMPACT, "s3")
    for key in (upload, report, reference):
        assert refused(lambda k=key: deleting.put_object(Bucket=cloud.bucket, Key=k, Body=b"y")) == (
            "s3:PutObject", f"{arn}/{key}")
    assert refused(lambda: deleting.delete_object(Bucket=cloud.bucket, Key=reference)) == (
        "s3:DeleteObject", f"{arn}/{reference}")
    for key in (upload, staged, report, reference):
        assert refused(lambda k=key: compacting.delete_object(Bucket=cloud.bucket, Key=k)) == (
            "s3:DeleteObject", f"{arn}/{key}")
    assert refused(lambda: compacting.get_object(Bucket=cloud.bucket, Key=upload)) == (
        "s3:GetObject", f"{arn}/{upload}")
    for role in (DELETE, COMPACT):
        glue = as_role(cloud, role, "glue")
        assert refused(lambda g=glue: g.delete_table(DatabaseName=cloud.database, Name=RESULT_TABLES[0]))[0] == (
            "glue:DeleteTable")
    assert {cloud.client("s3").get_object(Bucket=cloud.bucket, Key=k)["Body"].read()
            for k in (upload, staged, report, reference)} == {b"x"}


def test_the_lab_member_uploads_queries_and_reads_results_only(enforced: LocalCloud) -> None:
    cloud = enforced
    s3 = cloud.user_client("s3")
    s3.put_object(Bucket=cloud.bucket, Key="incoming/lp-user/r.fastq", Body=b"@r\nA\n+\nI\n")
    assert refused(lambda: s3.put_object(Bucket=cloud.bucket, Key="results/runs/x", Body=b"x"))[0] == "s3:PutObject"
    delete = refused(lambda: s3.delete_object(Bucket=cloud.bucket, Key="incoming/lp-user/r.fastq"))
    assert delete[0] == "s3:DeleteObject"
    assert refused(lambda: s3.get_object(Bucket=cloud.bucket, Key="incoming/lp-user/r.fastq"))[0] == "s3:GetObject"
    sfn = cloud.user_client("stepfunctions")
    assert refused(lambda: sfn.start_execution(stateMachineArn=cloud.state_machine_arn, input="{}"))[0] == (
        "states:StartExecution")


def test_enforcement_off_gives_every_process_the_local_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(iam.var(), "0")
    assert not iam.enforced()
    local = iam.LocalIam(enforce=False)
    assert local.env("arn:aws:iam::123456789012:role/any") == {}
    monkeypatch.delenv(iam.var())
    assert iam.enforced()


def test_eventbridge_needs_the_functions_permission_and_dead_letters_by_the_queues_policy(
    enforced: LocalCloud,
) -> None:
    """EventBridge invokes the start function only as its Lambda permission allows (principal and rule);
    an event it may not deliver goes to the target's dead-letter queue, whose policy admits this rule only."""
    from localcloud import patches
    from localcloud.events import EventDelivery

    cloud = enforced
    assert cloud.lambdas is not None
    function = cloud.lambdas.functions[next(n for n in cloud.lambdas.functions if "StartRun" in n)].arn
    delivery = patches.HOOKS.deliver
    assert isinstance(delivery, EventDelivery)
    dlq = cloud.outputs["StartRunDeadLetterQueueUrl"]
    dlq_arn = f"arn:aws:sqs:us-east-1:123456789012:{dlq.rsplit('/', 1)[1]}"
    queue_policy = cloud.iam.resource_policies[dlq_arn]
    permission = cloud.iam.resource_policies.pop(function)
    try:
        put(cloud, "incoming/lp-eb/a.fastq", b"@r\nA\n+\nI\n")
        assert delivery.undelivered[-1][::2] == (function, dlq_arn)
        messages = cloud.client("sqs").receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
        assert messages[0]["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "NO_PERMISSIONS"
        assert "incoming/lp-eb/a.fastq" in messages[0]["Body"]
        cloud.client("sqs").delete_message(QueueUrl=dlq, ReceiptHandle=messages[0]["ReceiptHandle"])
        # a queue whose policy names another rule takes nothing from this one: the event is lost
        cloud.iam.resource_policies[dlq_arn] = [
            {"Statement": [{**s, "Condition": {"ArnEquals": {"aws:SourceArn": "arn:aws:events:us-east-1:1:rule/x"}}}
                           for s in p["Statement"] if s.get("Effect") == "Allow"]} for p in queue_policy]
        put(cloud, "incoming/lp-eb/b.fastq", b"@r\nA\n+\nI\n")
        assert delivery.undelivered[-1][::2] == (function, "")
        assert ("events.amazonaws.com", "sqs:SendMessage", dlq_arn) in cloud.iam.denied
    finally:
        cloud.iam.resource_policies[function] = permission
        cloud.iam.resource_policies[dlq_arn] = queue_policy
    delivered = len(delivery.delivered)
    put(cloud, "incoming/lp-eb/c.fastq", b"@r\nA\n+\nI\n")
    assert delivery.delivered[delivered:] and delivery.delivered[-1][0] == function
    cloud.wait(timeout=300)


def test_the_start_functions_failed_events_go_to_its_dead_letter_queue_as_its_role(enforced: LocalCloud) -> None:
    """Lambda sends an asynchronous event that failed every attempt to the function's DeadLetterConfig queue
    with the function's role: SAM's DeadLetterQueuePolicy statement is what lets it (``make grants``)."""
    from seqlake.local.grants import grants, without

    cloud = enforced
    assert cloud.lambdas is not None and cloud.lambdas.dead_letter is not None
    send = cloud.lambdas.dead_letter
    spec = cloud.lambdas.functions[next(n for n in cloud.lambdas.functions if "StartRun" in n)]
    dlq = cloud.outputs["StartRunDeadLetterQueueUrl"]
    assert spec.dead_letter_arn == f"arn:aws:sqs:us-east-1:123456789012:{dlq.rsplit('/', 1)[1]}"
    send(spec, b'{"lp": "dlq"}', b'{"errorType": "Boom"}')
    sqs = cloud.client("sqs")
    (message,) = sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    assert (message["Body"], message["MessageAttributes"]["ErrorCode"]["StringValue"]) == ('{"lp": "dlq"}', "Boom")
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=message["ReceiptHandle"])
    (grant,) = [g for g in grants(cloud)[0] if g.role == START and g.label.startswith("DeadLetterQueuePolicy")]
    with without(cloud, grant):
        assert refused(lambda: send(spec, b"{}", b"{}")) == ("sqs:SendMessage", spec.dead_letter_arn)
