"""``seqlake local rerun RUN_ID``: finish a failed run, computing only what failed.

The same path as on AWS (docs/DEPLOY.md, "Finish a failed run"): a new execution of the state machine,
under a new name, with the run's execution input (the request's URI and digest). Its plan step finds
the plan, lists the run's staging once and writes a todo list of the children without a finished
manifest, so the array job has only those children; the commit then writes the same tables as a run
that never failed, and the run keeps its id.

What the local cloud does not keep between two of its lives is put back first, with events paused so
that no upload starts anything: the run's input files (the state folder keeps their metadata, not
their bodies: they come back from the local files they were uploaded from) and the alignments the
finished children wrote into their result partition (the state folder has them; only the local
Athena reads committed results, so they are not restored on every start).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from seqlake.aws.request import ExecutionInput
from seqlake.base.errors import EXIT_FAILURE, EXIT_OK, SeqlakeError
from seqlake.base.layout import RunLayout
from seqlake.base.model import RunState
from seqlake.localcloud.report_command import find_run
from seqlake.localcloud.state import StateDir


def _status(state: StateDir, bucket: str, run_id: str) -> dict[str, Any]:
    path = Path(RunLayout(str(state.bucket_dir(bucket)), run_id).status)
    if not path.is_file():
        raise SeqlakeError(f"no run {run_id} in {state.root} (see `seqlake local runs`)")
    status: dict[str, Any] = json.loads(path.read_text())
    return status


def _execution_input(state: StateDir, bucket: str, run_id: str) -> ExecutionInput:
    layout = RunLayout.in_bucket(bucket, run_id)
    data = (state.bucket_dir(bucket) / "runs" / run_id / "request.json").read_bytes()
    return ExecutionInput(run_id, bucket, layout.request, hashlib.sha256(data).hexdigest())


def _put_back(cloud: Any, state: StateDir, status: dict[str, Any], run_id: str) -> int:
    """The run's inputs and its children's alignments, into the local cloud's S3; how many objects."""
    sources = state.sources()
    s3 = cloud.client("s3")
    put = 0
    for item in status.get("inputs", []):
        uri = str(item["uri"])
        source = sources.get(uri)
        if source is None or not Path(source).is_file():
            raise SeqlakeError(f"cannot re-run {run_id}: its input {uri} came from a file that is gone ({source})")
        cloud.upload(Path(source), uri.removeprefix(f"s3://{cloud.bucket}/"))
        put += 1
    partition = Path(RunLayout(str(state.bucket_dir(cloud.bucket)), run_id).partition("alignments"))
    for part in sorted(partition.glob("*.parquet")) if partition.is_dir() else []:
        key = part.relative_to(state.bucket_dir(cloud.bucket)).as_posix()
        s3.put_object(Bucket=cloud.bucket, Key=key, Body=part.read_bytes())
        put += 1
    return put


def rerun_command(args: argparse.Namespace) -> int:
    from seqlake.localcloud.cloud import LocalCloud
    from seqlake.localcloud.commands import print_runs

    state = StateDir(args.home)
    if not state.exists():
        raise SeqlakeError(f"no local cloud in {state.root}: run `seqlake demo` or `seqlake local run` first")
    console = Console(stderr=True)
    run_id, _ = find_run(state, args.run_id)
    with LocalCloud(state=state, jobs=args.jobs, console=console) as cloud:
        status = _status(state, cloud.bucket, run_id)
        if status.get("state") == RunState.SUCCEEDED.value:
            console.print(f"run [bold]{run_id}[/] already SUCCEEDED: nothing to re-run")
            return EXIT_OK
        with cloud.events_paused():
            put = _put_back(cloud, state, status, run_id)
        execution = _execution_input(state, cloud.bucket, run_id)
        n = sum(1 for r in state.runs() if r.get("run_id") == run_id)
        name = f"{run_id}-rerun-{n}"[:80]
        cloud.client("stepfunctions").start_execution(
            stateMachineArn=cloud.state_machine_arn, name=name, input=json.dumps(execution.to_dict()))
        console.print(f"re-running [bold]{run_id}[/] as execution {name} ({put} object(s) put back)")
        finished = cloud.wait()
    print_runs(console, [r for r in state.runs() if r["run_id"] == run_id][-1:], state.sources())
    return EXIT_OK if finished and all(e.status == "SUCCEEDED" for e in finished) else EXIT_FAILURE
