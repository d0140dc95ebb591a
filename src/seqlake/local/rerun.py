"""``seqlake local rerun RUN_ID``: finish a failed run, computing only what failed.

The same path as on AWS (docs/DEPLOY.md, "Finish a failed run"): a new execution of the state machine,
under a new name, with the run's execution input (the request's URI and digest). Its plan step finds
the plan, lists the run's staging once and writes a todo list of the children without a finished
manifest, so the array job has only those children; the commit then writes the same tables as a run
that never failed, and the run keeps its id.

What the local cloud does not keep between two of its lives is put back first, with events paused so
that no upload starts anything: the run's input files (the state folder keeps their metadata, not
their bodies: they come back from the local files they were uploaded from). What the finished children
and reducers wrote, their alignments and regions included, is under ``runs/<id>/``, which every start
restores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from localcloud import containers
from localcloud.state import StateDir, md5_file
from seqlake.aws.request import ExecutionInput
from seqlake.base.errors import EXIT_FAILURE, EXIT_OK, BadInputError, SeqlakeError
from seqlake.base.layout import RunLayout
from seqlake.base.model import RunState
from seqlake.local.adapter import app_errors, local_cloud
from seqlake.local.report_command import find_run


def _status(bucket_dir: Path, run_id: str) -> dict[str, Any]:
    path = Path(RunLayout(str(bucket_dir), run_id).status)
    if not path.is_file():
        raise SeqlakeError(f"run {run_id} has no status.json in {bucket_dir}: it has not started")
    status: dict[str, Any] = json.loads(path.read_text())
    return status


def _execution_input(state: StateDir, bucket: str, run_id: str) -> ExecutionInput:
    layout = RunLayout.in_bucket(bucket, run_id)
    data = (state.bucket_dir(bucket) / "runs" / run_id / "request.json").read_bytes()
    return ExecutionInput(run_id, bucket, layout.request, hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class Input:
    """One input object of the run: its URI, the ETag the run read, and the local file it came from."""

    uri: str
    etag: str | None
    source: Path

    @property
    def changed(self) -> bool:
        """The local file is no longer what the run read (a one-PUT upload's ETag is its MD5)."""
        return self.etag is not None and md5_file(self.source) != self.etag.strip('"')


def _inputs(state: StateDir, status: dict[str, Any], run_id: str) -> list[Input]:
    sources = state.sources()
    out = []
    for item in status.get("inputs", []):
        uri = str(item["uri"])
        source = sources.get(uri)
        if source is None or not Path(source).is_file():
            raise BadInputError(uri, f"cannot re-run {run_id}: this input came from a local file that is gone "
                                f"({source})")
        out.append(Input(uri, item.get("etag"), Path(source)))
    return out


def _put_back(cloud: Any, inputs: list[Input]) -> int:
    """The run's inputs, into the local cloud's S3; how many objects."""
    for item in inputs:
        cloud.upload(item.source, item.uri.removeprefix(f"s3://{cloud.bucket}/"))
    return len(inputs)


@app_errors
def rerun_command(args: argparse.Namespace) -> int:
    from localcloud import iam, memory
    from seqlake.aws.status import NEW_UPLOAD_ADVICE, failed_on_bad_input
    from seqlake.local.commands import (
        NEW_UPLOAD_HINT,
        cloud_parameters,
        jobs_of,
        name_local_files,
        outcome,
        print_runs,
    )

    containers.require(args.containers)
    memory.apply_flag(args.no_memory_limits)
    iam.require(args.no_iam)
    state = StateDir(args.home)
    state.require()
    console = Console(stderr=True)
    run_id, bucket_dir = find_run(state, args.run_id)
    status = _status(bucket_dir, run_id)
    if status.get("state") == RunState.SUCCEEDED.value:
        console.print(f"run [bold]{run_id}[/] already SUCCEEDED: nothing to re-run")
        return EXIT_OK
    inputs = _inputs(state, status, run_id)
    changed = [i for i in inputs if i.changed]
    if not changed and failed_on_bad_input(status):
        reason = str(status.get("reason") or "").removesuffix(f"; {NEW_UPLOAD_ADVICE}")
        raise BadInputError(f"run {run_id}", f"it failed on bad input: {name_local_files(reason, state.sources())}; "
                            f"{NEW_UPLOAD_HINT}")
    with local_cloud(state=state, jobs=jobs_of(args), console=console, parameters=cloud_parameters(args)) as cloud:
        with cloud.events_paused():
            put = _put_back(cloud, [i for i in inputs if not i.changed])
        if changed:
            # what the run read is gone: the files as they are now are a new upload, hence a new run
            # (its id hashes the new ETags); the failed run keeps its record of what it read
            names = ", ".join(str(i.source) for i in changed)
            console.print(f"{names} changed since run [bold]{run_id}[/] read it: uploading it again, which "
                          "starts a new run (a re-run only finishes the files a run read)", soft_wrap=True)
            for item in changed:
                cloud.upload(item.source, item.uri.removeprefix(f"s3://{cloud.bucket}/"))
        else:
            execution = _execution_input(state, cloud.bucket, run_id)
            n = sum(1 for r in state.runs() if r.get("run_id") == run_id)
            name = f"{run_id}-rerun-{n}"[:80]
            cloud.client("stepfunctions").start_execution(
                stateMachineArn=cloud.state_machine_arn, name=name, input=json.dumps(execution.to_dict()))
            console.print(f"re-running [bold]{run_id}[/] as execution {name} ({put} object(s) put back)")
        finished = cloud.wait()
    started = {str(e.input.get("run_id") or e.name) for e in finished}
    print_runs(console, [r for r in state.runs() if r["run_id"] in started | {run_id}], state.sources())
    if not finished:
        console.print("[yellow]no run started (see the state folder's logs/lambda/)[/]")
        return EXIT_FAILURE
    return outcome(console, state, finished)
