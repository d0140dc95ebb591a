"""The run watcher: what the user watches while the local cloud works, each execution's states and shards.

It follows the state machine's executions through the Step Functions API and the shard arrays through
the local Batch runner, and keeps what it has reported: the executions that were there when it was
made, or that an earlier round already returned, are not reported again.
"""

from __future__ import annotations

import contextlib
import datetime
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from localcloud import contract
from localcloud.batch import ArrayProgress


def array_unit(job_name: str) -> str:
    """What the display calls the children of the Batch array ``job_name``: the app's word for the first of its
    :attr:`.contract.App.array_units` prefixes the name starts with, else ``children``."""
    return next((unit for prefix, unit in contract.app().array_units.items() if job_name.startswith(prefix)),
                "children")


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


#: the shard arrays the local Batch runner is running or has run, by job id
Arrays = Callable[[], Mapping[str, ArrayProgress]]


class Watcher:
    """Reports a state machine's executions, one round (:meth:`__enter__` .. :meth:`finished`) at a time."""

    def __init__(
        self, sfn: Any, state_machine_arn: str, arrays: Arrays, console: Console, quiet: bool = False
    ) -> None:
        """``sfn``: a Step Functions client; the executions the state machine has now are not reported."""
        self.sfn = sfn
        self.state_machine_arn = state_machine_arn
        self.arrays = arrays
        self.console = console
        self.quiet = quiet
        self._seen = {e["executionArn"] for e in self._list_executions()}
        #: this round's executions, by ARN
        self.executions: dict[str, Execution] = {}
        #: something happened since the caller last cleared this (a run started, a state, an end)
        self.changed = False
        self._bars: dict[str, TaskID] = {}
        self._progress = self._new_progress()

    def _new_progress(self) -> Progress:
        return Progress(
            TextColumn("  {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=self.quiet,
            refresh_per_second=2,  # the CPU belongs to the shards
        )

    def __enter__(self) -> Watcher:
        self.executions, self._bars, self.changed = {}, {}, False
        self._progress = self._new_progress()
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def finished(self) -> list[Execution]:
        """The executions this round saw start (no later round reports them)."""
        out = [e for arn, e in self.executions.items() if arn not in self._seen]
        self._seen.update(self.executions)
        return out

    def _list_executions(self) -> list[dict[str, Any]]:
        pages = self.sfn.get_paginator("list_executions").paginate(stateMachineArn=self.state_machine_arn)
        executions: list[dict[str, Any]] = pages.build_full_result()["executions"]
        return executions

    def _print(self, text: str) -> None:
        self.changed = True
        if not self.quiet:
            self._progress.console.print(text)

    def poll(self) -> bool:
        """Report what changed; True while any execution of the state machine is running."""
        sfn = self.sfn
        items = self._list_executions()
        for item in items:
            arn = item["executionArn"]
            if arn in self._seen:
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
        for job_id, array in list(self.arrays().items()):
            owner = self._owner(array)
            if owner is None:
                continue
            if array not in owner.arrays:
                owner.arrays.append(array)
            note = f"retried {array.retries}" + (f", failed {array.failed}" if array.failed else "")
            if job_id not in self._bars:
                unit = array_unit(array.job_name)
                self._bars[job_id] = self._progress.add_task(
                    f"{array.job_name[:40]} {unit}", total=array.size, note=note
                )
            self._progress.update(self._bars[job_id], completed=array.succeeded + array.failed, note=note)
