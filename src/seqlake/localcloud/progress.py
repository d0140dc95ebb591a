"""What the user watches while the local cloud works: each execution's states and shard progress."""

from __future__ import annotations

import contextlib
import datetime
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from seqlake.localcloud.batch import ArrayProgress

if TYPE_CHECKING:
    from seqlake.localcloud.cloud import LocalCloud


@dataclass
class Execution:
    arn: str
    name: str
    status: str
    started: float
    stopped: float | None = None
    error: str | None = None
    cause: str | None = None
    states: list[str] = field(default_factory=list)
    input: dict[str, Any] = field(default_factory=dict)
    arrays: list[ArrayProgress] = field(default_factory=list)


def _ts(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime.datetime) else float(value or 0)


class Watcher:
    def __init__(self, cloud: LocalCloud, quiet: bool = False) -> None:
        self.cloud = cloud
        self.quiet = quiet
        self.executions: dict[str, Execution] = {}
        #: something happened since the caller last cleared this (a run started, a state, an end)
        self.changed = False
        self._bars: dict[str, TaskID] = {}
        self._progress = Progress(
            TextColumn("  {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            console=cloud.console,
            disable=quiet,
            refresh_per_second=2,  # the CPU belongs to the shards
        )

    def __enter__(self) -> Watcher:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def _print(self, text: str) -> None:
        self.changed = True
        if not self.quiet:
            self._progress.console.print(text)

    def poll(self) -> bool:
        """Report what changed; True while any execution of the state machine is running."""
        sfn = self.cloud.client("stepfunctions")
        items = self.cloud._list_executions()
        for item in items:
            arn = item["executionArn"]
            if arn in self.cloud._seen:
                continue
            ex = self.executions.get(arn)
            if ex is None:
                ex = Execution(arn, item["name"], "RUNNING", _ts(item["startDate"]))
                self.executions[arn] = ex
                self._print(f"[bold]▶ run {ex.name}[/] started")
            if ex.status != "RUNNING":
                continue
            history = sfn.get_paginator("get_execution_history").paginate(executionArn=arn).build_full_result()
            entered = [
                h["stateEnteredEventDetails"]["name"] for h in history["events"] if h["type"].endswith("StateEntered")
            ]
            for name in entered[len(ex.states) :]:
                self._print(f"  [cyan]{name}[/]")
            ex.states = entered
            if item["status"] != "RUNNING":
                desc = sfn.describe_execution(executionArn=arn)
                ex.status, ex.stopped = desc["status"], _ts(desc.get("stopDate"))
                ex.error, ex.cause = desc.get("error"), desc.get("cause")
                with contextlib.suppress(ValueError, TypeError):
                    ex.input = json.loads(desc.get("input") or "{}")
                took = (ex.stopped or 0) - ex.started
                colour = "green" if ex.status == "SUCCEEDED" else "red"
                self._print(
                    f"[bold {colour}]■ run {ex.name} {ex.status}[/] in {took:.1f} s"
                    + (
                        f": {ex.error}: {(ex.cause or '').splitlines()[0][:300] if ex.cause else ''}"
                        if ex.error
                        else ""
                    )
                )
        self.update_arrays()
        return any(item["status"] == "RUNNING" for item in items)

    def _owner(self, array: ArrayProgress) -> Execution | None:
        """The execution that submitted the job: the state machine names every job after it
        (``shards-<execution>``); None until this watcher has seen that execution (never a guess: two
        runs can be in flight, and the bars are updated between polls)."""
        for ex in self.executions.values():
            if ex.name in array.job_name:
                return ex
        return None

    def update_arrays(self) -> None:
        """The shard bars, from the local Batch runner (no request to moto)."""
        batch = self.cloud.batch
        if batch is None:
            return
        for job_id, array in list(batch.progress.items()):
            owner = self._owner(array)
            if owner is None:
                continue
            if array not in owner.arrays:
                owner.arrays.append(array)
            note = f"retried {array.retries}" + (f", failed {array.failed}" if array.failed else "")
            if job_id not in self._bars:
                self._bars[job_id] = self._progress.add_task(
                    f"{array.job_name[:40]} shards", total=array.size, note=note
                )
            self._progress.update(self._bars[job_id], completed=array.succeeded + array.failed, note=note)
