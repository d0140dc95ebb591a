"""The first-deploy smoke test: one tiny upload through a deployed stack to an Athena query, then everything the
stack holds torn down.

``scripts/aws-smoke.sh`` deploys a stack of its own (``sam build``, ``sam deploy``, the worker image pushed) and
calls ``python -m seqlake.aws.smoke --stack-name NAME``, which:

1. reads the stack's outputs (bucket, state machine, Glue database, Athena workgroup, ECR repository);
2. uploads :data:`SMOKE_PAIRS` simulated read pairs (the demo's simulator, no reference: QC and trimming only,
   so no index job and one Batch child) to ``incoming/<folder>/smoke_R1.fastq.gz`` and ``_R2``;
3. waits for the execution the upload starts to succeed (:data:`DEFAULT_TIMEOUT_SECONDS`);
4. queries ``qc_summary`` through Athena in the stack's workgroup and checks the raw reads counted are the reads
   uploaded;
5. tears down (also after a failure, unless ``--keep``): every object version of the bucket, every image of the
   repository, then the stack itself (``DeleteStack``, waited for). A failed execution's end reaches the
   backstop function asynchronously (EventBridge), and the backstop writes ``status.json`` when it finds none:
   when it runs after the bucket was emptied, ``DeleteStack`` fails on the bucket it wrote to, by then the only
   resource left; the bucket is emptied again and the stack deleted again (the writer is gone).

The same steps run against the local cloud (:mod:`seqlake.local.smoke`, ``scripts/aws-smoke.sh --local``,
in the suite): there the deploy is the local cloud's own deployer of the same ``template.yaml``, and the stack's
end is the local cloud's stop. A :class:`Target` is what both give: a client factory and the stack's outputs.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: read pairs uploaded: one shard, one Batch child, a few seconds of work
SMOKE_PAIRS = 1_000
SMOKE_SEED = 34
SAMPLE = "smoke"
#: how long the run may take on AWS: a Spot instance's start (minutes), the image's pull, the child, the commit
DEFAULT_TIMEOUT_SECONDS = 3_600
#: what one smoke test may cost, stated (docs/DEPLOY.md, "A first deploy on a new account"): one r5d.large-sized
#: instance for at most the timeout ($0.15 an hour On-Demand, less on Spot), the Lambdas' and Step Functions'
#: few requests, one Athena query (10 MB minimum: $0.00005), the worker image's ECR storage for the hour; the
#: stack (Glue, IAM, Batch, an S3 bucket, SQS, alarms) costs nothing idle and is deleted
COST_BOUND_USD = 1.0
POLL_SECONDS = 5.0
#: the query the smoke ends with: the reads qc_summary counts at each stage for the uploaded sample
QUERY = f"SELECT stage, sum(reads) AS reads FROM qc_summary WHERE sample = '{SAMPLE}' GROUP BY stage ORDER BY stage"  # noqa: S608 - a constant


@dataclass
class Target:
    """A deployed stack: a client factory (credentials allowed to write ``incoming/``, read executions, query
    Athena and delete what the stack holds) and the stack's outputs."""

    client: Callable[[str], Any]
    outputs: Mapping[str, str]
    #: deletes the stack itself after its bucket and repository are empty (None: the caller ends it)
    delete_stack: Callable[[Target], None] | None = None
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    #: returns once nothing the stack runs can still write to the bucket (the local cloud: idle); None where
    #: that cannot be known (AWS: ``delete_stack`` empties the bucket again if a late write made it fail)
    settle: Callable[[], None] | None = None


class SmokeError(RuntimeError):
    """A step of the smoke test did not do what it must; the message says which and why."""


def write_reads(folder: Path) -> tuple[Path, Path]:
    """The tiny pair, simulated from the bundled reference (deterministic)."""
    from seqlake.demo_data import reference_path
    from seqlake.demo_data.simulate import write_pairs

    r1, r2 = folder / f"{SAMPLE}_R1.fastq.gz", folder / f"{SAMPLE}_R2.fastq.gz"
    write_pairs(reference_path(), r1, r2, SMOKE_PAIRS, seed=SMOKE_SEED)
    return r1, r2


def records(path: Path) -> int:
    with gzip.open(path, "rb") as f:
        return sum(1 for _ in f) // 4


def upload(target: Target, paths: tuple[Path, ...], folder: str) -> list[str]:
    s3 = target.client("s3")
    bucket = target.outputs["DataBucketName"]
    keys = []
    for path in paths:
        key = f"incoming/{folder}/{path.name}"
        s3.upload_file(str(path), bucket, key)
        keys.append(key)
    return keys


def wait_for_execution(target: Target, since: float, timeout_s: float) -> dict[str, Any]:
    """The execution started at or after ``since`` (epoch seconds), once it has ended; it must have succeeded."""
    sfn = target.client("stepfunctions")
    arn = target.outputs["StateMachineArn"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        started = [e for e in sfn.list_executions(stateMachineArn=arn)["executions"]
                   if e["startDate"].timestamp() >= since - 1]
        ended = [e for e in started if e["status"] != "RUNNING"]
        if ended:
            found: dict[str, Any] = sfn.describe_execution(executionArn=ended[0]["executionArn"])
            if found["status"] != "SUCCEEDED":
                raise SmokeError(f"execution {found['executionArn']} ended {found['status']}: "
                                  f"{found.get('error', '')} {found.get('cause', '')}".strip())
            return found
        time.sleep(POLL_SECONDS)
    raise SmokeError(f"no execution of {arn} started by the upload ended within {timeout_s:.0f} s")


def query(target: Target, sql: str, timeout_s: float = 300) -> list[tuple[str | None, ...]]:
    """One Athena query in the stack's workgroup and database: its rows (the header left out)."""
    athena = target.client("athena")
    qid = athena.start_query_execution(
        QueryString=sql, WorkGroup=target.outputs["AthenaWorkGroupName"],
        QueryExecutionContext={"Database": target.outputs["GlueDatabaseName"]})["QueryExecutionId"]
    deadline = time.monotonic() + timeout_s
    while True:
        status = athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]
        if status["State"] not in ("QUEUED", "RUNNING"):
            break
        if time.monotonic() > deadline:
            raise SmokeError(f"the Athena query {qid} did not end within {timeout_s:.0f} s")
        time.sleep(0.5)
    if status["State"] != "SUCCEEDED":
        raise SmokeError(f"the Athena query failed: {status.get('StateChangeReason', status['State'])}")
    rows = athena.get_query_results(QueryExecutionId=qid)["ResultSet"]["Rows"]
    return [tuple(c.get("VarCharValue") for c in r["Data"]) for r in rows[1:]]


def empty_bucket(target: Target) -> int:
    """Every version and delete marker of the stack's bucket deleted (the bucket is versioned); how many."""
    s3 = target.client("s3")
    bucket = target.outputs["DataBucketName"]
    deleted = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        found = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                 for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]]
        for start in range(0, len(found), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": found[start:start + 1000], "Quiet": True})
        deleted += len(found)
    return deleted


def delete_images(target: Target) -> int:
    """Every image of the stack's worker repository deleted (CloudFormation does not delete a non-empty one)."""
    uri = target.outputs.get("WorkerRepositoryUri")
    if not uri:
        return 0
    ecr = target.client("ecr")
    name = uri.split("/", 1)[1]
    ids = [i for page in ecr.get_paginator("list_images").paginate(repositoryName=name) for i in page["imageIds"]]
    for start in range(0, len(ids), 100):
        ecr.batch_delete_image(repositoryName=name, imageIds=ids[start:start + 100])
    return len(ids)


def teardown(target: Target) -> None:
    if target.settle is not None:
        target.settle()
    objects = empty_bucket(target)
    images = delete_images(target)
    target.log(f"smoke: deleted {objects} object version(s) and {images} image(s)")
    if target.delete_stack is not None:
        target.delete_stack(target)
        target.log("smoke: stack deleted")


def run(target: Target, *, timeout_s: float = DEFAULT_TIMEOUT_SECONDS,
        keep: bool = False) -> list[tuple[str | None, ...]]:
    """Steps 2-5 of the module's list; the query's rows (stage, reads). Tears down even when a step fails,
    unless ``keep``."""
    try:
        with tempfile.TemporaryDirectory(prefix="seqlake-smoke-") as tmp:
            paths = write_reads(Path(tmp))
            expected = sum(records(p) for p in paths)
            since = time.time()
            keys = upload(target, paths, f"smoke-{int(since)}")
            target.log(f"smoke: uploaded {', '.join(keys)}; waiting for the run (at most {timeout_s:.0f} s)")
        execution = wait_for_execution(target, since, timeout_s)
        target.log(f"smoke: {execution['executionArn']} SUCCEEDED")
        rows = query(target, QUERY)
        counted = {stage: int(n or 0) for stage, n in rows}
        if counted.get("raw") != expected:
            raise SmokeError(f"Athena counts {counted.get('raw')} raw reads of sample {SAMPLE}, {expected} uploaded")
        target.log(f"smoke: Athena: {counted}")
        return rows
    finally:
        if not keep:
            teardown(target)


def stack_target(stack_name: str, region: str | None) -> Target:
    """A stack deployed on AWS, with the caller's credentials (the deployer's: it deletes the stack too)."""
    import boto3

    session = boto3.session.Session(region_name=region)
    cfn = session.client("cloudformation")
    stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}

    return Target(session.client, outputs, lambda target: delete_stack(cfn, stack_name, target))


def delete_stack(cfn: Any, stack_name: str, target: Target) -> None:
    """``DeleteStack``, waited for; once more after emptying the bucket and the repository again if the first
    left the stack ``DELETE_FAILED`` (a late write: see step 5 of the module's list)."""
    from botocore.exceptions import WaiterError

    for attempt in (1, 2):
        cfn.delete_stack(StackName=stack_name)
        try:
            cfn.get_waiter("stack_delete_complete").wait(StackName=stack_name,
                                                         WaiterConfig={"Delay": 15, "MaxAttempts": 240})
            return
        except WaiterError as failed:
            if attempt == 2:
                raise SmokeError(f"the stack {stack_name} was not deleted: {failed}") from failed
            late = empty_bucket(target) + delete_images(target)
            target.log(f"smoke: DeleteStack failed ({failed}); deleted {late} late object version(s) "
                       "or image(s), deleting again")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seqlake.aws.smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--stack-name", required=True, help="the deployed stack (scripts/aws-smoke.sh deploys it)")
    parser.add_argument("--region", default=None)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="seconds the run may take")
    parser.add_argument("--keep", action="store_true", help="leave the stack and its data (default: tear down)")
    parser.add_argument("--teardown-only", action="store_true",
                        help="only step 5: empty the bucket and the repository, delete the stack")
    args = parser.parse_args(argv)
    target = stack_target(args.stack_name, args.region)
    if args.teardown_only:
        teardown(target)
        return 0
    try:
        run(target, timeout_s=args.timeout, keep=args.keep)
    except SmokeError as failed:
        print(f"smoke: FAILED: {failed}", file=sys.stderr)
        return 1
    print(f"smoke: OK (stack {args.stack_name}{' kept' if args.keep else ' torn down'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
