"""The local cloud's server CPU per request, by API: a local cloud started in this process (IAM enforced, no
S3 latency), a client in a process of its own making ``--requests`` calls of each kind in turn, and this
process's CPU seconds (user and system, every thread) while it does, less what it spends idle.

    python bench/localcloud_requests.py --requests 500 --out bench/work/requests-branch.json
    PYTHONPATH=<other checkout>/src python bench/localcloud_requests.py --baseline 'main at 605ed38' \\
        --out bench/work/requests-main.json

The S3 calls are the Batch worker's (its job role's session, as a child signs them): a whole GET and a ranged
GET of a 3 kB object (the local server's direct route, patch 15), a HEAD, a PUT of 2 kB, a ListObjectsV2 of
50 keys; Step Functions' ``DescribeStateMachine`` (the deployed definition, about 30 kB of JSON) and Batch's
``DescribeJobQueues`` are the platform role's, as the local cloud's own calls are. The CPU is the server's
(plus whatever else this process does meanwhile: nothing but its idle threads, whose rate is measured first
and taken off); on AWS it is S3's and the services', not the app's, so it matters only for the local cloud's
runs and tests. CPU seconds, not wall: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import scale

#: what each kind of request is, in BENCHMARKS.md
KINDS = {
    "get": "S3 GetObject, 3 kB (direct route)",
    "ranged-get": "S3 GetObject, a range of 491 bytes (direct route)",
    "head": "S3 HeadObject",
    "put": "S3 PutObject, 2 kB",
    "list": "S3 ListObjectsV2, 50 keys",
    "sfn": "Step Functions DescribeStateMachine",
    "batch": "Batch DescribeJobQueues",
}
#: objects the GETs, HEADs and the listing read
OBJECTS = 50

#: the client: made ready (its first call made, connections open), then ``n`` calls of one kind when told
_CLIENT = r'''
import sys
import boto3
kind, n, bucket, machine = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s3, sfn, batch = (boto3.client(s, region_name="us-east-1") for s in ("s3", "stepfunctions", "batch"))
body = b"x" * 2000
def call(i):
    key = f"bench/requests/o{i % 50:03d}"
    if kind == "get": s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    elif kind == "ranged-get": s3.get_object(Bucket=bucket, Key=key, Range="bytes=10-500")["Body"].read()
    elif kind == "head": s3.head_object(Bucket=bucket, Key=key)
    elif kind == "put": s3.put_object(Bucket=bucket, Key=f"runs/bench-requests/p{i % 50:03d}", Body=body)
    elif kind == "list": s3.list_objects_v2(Bucket=bucket, Prefix="bench/requests/")
    elif kind == "sfn": sfn.describe_state_machine(stateMachineArn=machine)
    elif kind == "batch": batch.describe_job_queues()
call(0)
print("ready", flush=True)
sys.stdin.readline()
for i in range(n): call(i)
'''


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def run(requests: int, kinds: list[str], home: Path) -> dict[str, Any]:
    from localcloud.state import StateDir
    from seqlake.local.adapter import local_cloud

    os.environ["SEQLAKE_LOCAL_S3_LATENCY_MS"] = "0"
    per_kind: dict[str, dict[str, float]] = {}
    with local_cloud(state=StateDir(str(home)), jobs=1, quiet=True) as cloud:
        s3 = cloud.client("s3")
        for i in range(OBJECTS):
            s3.put_object(Bucket=cloud.bucket, Key=f"bench/requests/o{i:03d}", Body=os.urandom(3000))
        # the worker reads bench/ as it reads incoming/: the listing and GETs are allowed (a refusal would
        # measure moto's error path): its role's session, with a statement for the bench's prefix
        worker = {**os.environ, "AWS_ENDPOINT_URL": cloud.endpoint, **cloud.iam.env(cloud.outputs["WorkerJobRoleArn"])}
        platform = {**os.environ, "AWS_ENDPOINT_URL": cloud.endpoint}
        _allow_bench_prefix(cloud)
        before, t0 = sum(_cpu()), time.monotonic()
        time.sleep(3)
        idle = (sum(_cpu()) - before) / (time.monotonic() - t0)
        load_before = os.getloadavg()[0]
        for kind in kinds:
            client = subprocess.Popen(
                [sys.executable, "-c", _CLIENT, kind, str(requests), cloud.bucket, cloud.state_machine_arn],
                env=platform if kind in ("sfn", "batch") else worker, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True)
            assert client.stdin is not None and client.stdout is not None
            if client.stdout.readline().strip() != "ready":
                raise SystemExit(f"the {kind} client failed")
            (user0, sys0), t0 = _cpu(), time.monotonic()
            client.stdin.write("\n")
            client.stdin.flush()
            if client.wait() != 0:
                raise SystemExit(f"the {kind} client failed")
            (user1, sys1), wall = _cpu(), time.monotonic() - t0
            per_kind[kind] = {
                "ms_per_request": round(1000 * (user1 - user0 + sys1 - sys0 - idle * wall) / requests, 3),
                "user_ms_per_request": round(1000 * (user1 - user0) / requests, 3),
                "system_ms_per_request": round(1000 * (sys1 - sys0) / requests, 3),
            }
            print(kind, per_kind[kind], flush=True)
    return {"requests": requests, "idle_cpu_per_second": round(idle, 4), "kinds": per_kind,
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)]}


def _allow_bench_prefix(cloud: Any) -> None:
    """The worker's role may also read and list ``bench/`` (an inline policy of its own, as an operator would
    add one): the bench measures allowed requests."""
    from moto.iam.models import iam_backends

    from localcloud.deployer import ACCOUNT, PARTITION

    role = cloud.outputs["WorkerJobRoleArn"].rsplit("/", 1)[1]
    bucket = f"arn:{PARTITION}:s3:::{cloud.bucket}"
    iam_backends[ACCOUNT][PARTITION].put_role_policy(role, "bench-requests", json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": f"{bucket}/bench/*"},
            {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": bucket,
             "Condition": {"StringLike": {"s3:prefix": ["bench/*"]}}}]}))


def section(work: Path) -> list[str]:
    """BENCHMARKS.md's lines on the runs saved in ``work`` (``requests-*.json``): CPU per request by API, each
    run a column."""
    results = [json.loads(p.read_text()) for p in sorted(work.glob("requests-*.json"))]
    if not results:
        return []
    labels = [r.get("baseline") or "this checkout" for r in results]
    lines = ["", "## The local cloud's server: CPU per request (`bench/localcloud_requests.py`)", "",
             "CPU milliseconds (user + system, the server's process, its idle rate taken off) per request, the",
             "client in a process of its own; IAM enforced, no S3 latency.", "",
             "| request | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(results)]
    for kind, what in KINDS.items():
        cells = [str(r["kinds"][kind]["ms_per_request"]) if kind in r["kinds"] else "" for r in results]
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    lines.append("| measured (load average before / after) | " + " | ".join(
        f"{r['measured']} ({' / '.join(str(x) for x in r['load_average'])})" for r in results) + " |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=500, help="requests of each kind")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--baseline", help="this run is another checkout's (PYTHONPATH=<that checkout>/src): its label")
    parser.add_argument("--home", type=Path, default=None, help="state folder (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="also write the result here as JSON")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    result = run(args.requests, kinds, args.home or Path(tempfile.mkdtemp(prefix="seqlake-requests-home-")))
    if args.baseline:
        result["baseline"] = args.baseline
    scale.record(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
