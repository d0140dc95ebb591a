"""``seqlake local report RUN_ID [--open]``: the path of a local run's report, opened on request.

The local cloud mirrors its bucket into the state folder (``s3/<bucket>/``), so a run's report is the
file ``s3/<bucket>/reports/<run_id>/index.html`` there. A run committed before it had a report (or
whose report failed to render) gets one now, from the same committed tables by the same code.
Reads the state folder only: no moto, no local cloud started.
"""

from __future__ import annotations

import argparse
import webbrowser
from pathlib import Path

from rich.console import Console

from localcloud.state import StateDir
from seqlake.base import storage
from seqlake.base.errors import EXIT_OK, BadInputError, SeqlakeError
from seqlake.base.layout import RUNS, LakeLayout, RunLayout
from seqlake.local.adapter import app_errors
from seqlake.report import ReportError, read_status, render_run, report_uri


def _runs(state: StateDir) -> dict[str, Path]:
    """Run id -> the bucket folder that holds it (its ``runs/<id>/`` or its results)."""
    out: dict[str, Path] = {}
    if not state.objects_dir.is_dir():
        return out
    for bucket in sorted(p for p in state.objects_dir.iterdir() if p.is_dir()):
        for folder in (bucket / RUNS, Path(LakeLayout(str(bucket)).table_root("qc_summary"))):
            if folder.is_dir():
                for run in folder.iterdir():
                    out.setdefault(run.name.removeprefix("run_id="), bucket)
    return out


def find_run(state: StateDir, run_id: str) -> tuple[str, Path]:
    """The run whose id is ``run_id`` or starts with it, and its bucket folder."""
    runs = _runs(state)
    if run_id in runs:
        return run_id, runs[run_id]
    matches = sorted(r for r in runs if r.startswith(run_id))
    if len(matches) == 1:
        return matches[0], runs[matches[0]]
    if matches:
        raise BadInputError(f"RUN_ID {run_id}", f"names {len(matches)} runs ({', '.join(matches[:5])}): give more "
                            "of the id")
    raise BadInputError(f"RUN_ID {run_id}", f"no such run in {state.root} (see `seqlake local runs`)")


def local_report_path(state: StateDir, run_id: str) -> Path | None:
    """The run's report in the state folder, if it has been rendered."""
    bucket = _runs(state).get(run_id)
    page = Path(report_uri(str(bucket), run_id)) if bucket is not None else None
    return page if page is not None and page.is_file() else None


@app_errors
def report_command(args: argparse.Namespace) -> int:
    state = StateDir(args.home)
    state.require()
    run_id, bucket = find_run(state, args.run_id)
    # absolute: a relative --home (the default ./.seqlake is one) has no file:// URI
    page = Path(report_uri(str(bucket), run_id)).resolve()
    if not page.is_file():
        root = str(bucket)
        has_results = bool(storage.list_uris(RunLayout(str(bucket), run_id).partition("qc_summary")))
        if read_status(root, run_id) is None and not has_results:
            raise SeqlakeError(f"run {run_id} has not finished: it has no status and no results yet")
        try:
            page = Path(render_run(root, run_id)).resolve()
        except ReportError as err:  # one line naming the section and why, exit 1
            raise SeqlakeError(f"the report of run {run_id} could not be rendered: {err}") from err
        Console(stderr=True).print(f"rendered the report of run {run_id} from its tables")
    print(page)
    if args.open and not webbrowser.open(page.as_uri()):
        Console(stderr=True).print("[yellow]no browser to open it here[/]: open the file above")
    return EXIT_OK
