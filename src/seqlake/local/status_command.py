"""``seqlake local status RUN_ID``: one run, as its ``status.json`` and the local cloud's records tell it.

Its state and reason, the state machine's states it went through (each execution of it: a re-run is a
second one), its shards (done, failed, retried), its timings, and its report. Reads the state folder
only: no moto, no local cloud started.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from localcloud.state import StateDir
from seqlake.base.errors import EXIT_OK, SeqlakeError
from seqlake.base.layout import RunLayout
from seqlake.base.model import RunState
from seqlake.local.adapter import app_errors
from seqlake.local.report_command import find_run, local_report_path

#: failed shards listed by number (the rest are counted)
LISTED_SHARDS = 10


def _shards(status: dict[str, Any]) -> str:
    total = status.get("shards") or 0
    failed = status.get("failed_shards") or ([status["failed_shard"]] if status.get("failed_shard") is not None else [])
    retried = status.get("retried_shards") or []
    done = total - len(failed) if status.get("state") != RunState.SUCCEEDED.value else total
    listed = ", ".join(str(s) for s in failed[:LISTED_SHARDS]) + (
        f" and {len(failed) - LISTED_SHARDS} more" if len(failed) > LISTED_SHARDS else "")
    text = f"{done} of {total} done"
    if failed:
        text += f"; failed: {listed}"
    return text + (f"; retried: {len(retried)}" if retried else "")


def describe(state: StateDir, run_id: str) -> list[tuple[str, str]]:
    """``(label, value)`` lines about the run (what ``local status`` prints)."""
    run_id, bucket = find_run(state, run_id)
    path = Path(RunLayout(str(bucket), run_id).status)
    if not path.is_file():
        raise SeqlakeError(f"run {run_id} has no status.json in {bucket} (it has not started)")
    status: dict[str, Any] = json.loads(path.read_text())
    lines = [("run", run_id), ("state", str(status.get("state")))]
    if status.get("reason"):
        from seqlake.local.commands import name_local_files

        reason = name_local_files(str(status["reason"]), state.sources())
        lines.append(("reason", f"{status.get('failed_step') or ''}: {reason}"))
    for n, record in enumerate((r for r in state.runs() if r.get("run_id") == run_id), start=1):
        # each execution of the run is an attempt: a re-run is the second
        states = " -> ".join(record.get("states") or [])
        lines.append((f"attempt {n}", f"{record.get('execution_arn', '').rsplit(':', 1)[-1]} "
                                      f"{record.get('status')}, {record.get('started')}, {record.get('seconds')} s: "
                                      f"{states}"))
    lines.append(("shards", _shards(status)))
    lines.append(("samples", ", ".join(status.get("samples") or []) or "-"))
    lines.append(("timings", f"started {status.get('started_at')}, finished {status.get('finished_at')}, "
                             f"{status.get('duration_s')} s"))
    if status.get("reads") is not None:
        lines.append(("reads", f"{status['reads']:,} reads, {status.get('bases') or 0:,} bases (raw)"))
    page = local_report_path(state, run_id)
    lines.append(("report", str(page) if page else status.get("report_error") or "not rendered"))
    return lines


@app_errors
def status_command(args: argparse.Namespace) -> int:
    state = StateDir(args.home)
    state.require()
    console = Console()
    for label, value in describe(state, args.run_id):
        console.print(f"[bold]{label:>9}[/]  {value}", soft_wrap=True, highlight=False)
    return EXIT_OK
