"""Test-only fault injection: off unless an environment variable names a fault.

The fault tests (``tests/faults/``, table in ``docs/FAULTS.md``) use these hooks to make the app fail
the way production fails, through the real entry points: a Batch child that loses its instance in
the middle of its shard, a child that fails every attempt, a commit step that dies halfway through
registering partitions. Nothing here runs unless the variable is set; no template or state machine
sets it.

- ``SEQLAKE_FAULT`` (read by ``seqlake worker``, :mod:`seqlake.child.worker_main`), e.g.
  ``kill:sample=s1:shard=1:attempt=1:after_writes=1``: the child SIGKILLs itself after its first
  storage write of shard 1 on attempt 1 (what a Spot reclaim does to a container); or
  ``exit:code=1``: the child exits 1 before doing anything, on every attempt.
- ``SEQLAKE_COMMIT_FAULT`` (read by :func:`seqlake.aws.steps.commit_step`), e.g.
  ``crash:after_partitions=2``: the commit process dies (``os._exit``, no cleanup, as a Lambda that
  times out or runs out of memory) after registering the run's partitions in two tables; or
  ``allocate:mb=4096``: the commit writes 4 GiB of memory before it merges (more than its function's
  MemorySize: the local cloud's memory limit ends it as Lambda's does).
- ``SEQLAKE_REPORT_FAULT`` (read by the report, :mod:`seqlake.report.html`, wherever it renders: the commit
  step, ``seqlake process``, ``seqlake local report``), e.g. ``fail:section=plot-amplicon-depth``: building that
  section of the page raises, as a section whose data it cannot draw does (the run fails with the reason).

Grammar: ``action[:key=value]...``, several separated by ``;`` (the first that applies fires); an
absent key matches anything. Keys ``sample``, ``run`` (a
prefix of the run id), ``shard``, ``attempt`` and ``section`` (a report section's id) select where the fault
fires.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Any

WORKER_VAR = "SEQLAKE_FAULT"
COMMIT_VAR = "SEQLAKE_COMMIT_FAULT"
REPORT_VAR = "SEQLAKE_REPORT_FAULT"
#: the exit status a process killed by the kernel's OOM killer or SIGKILL reports through a shell
CRASH_STATUS = 137
ACTIONS = ("kill", "exit", "crash", "allocate", "fail")
_INT_KEYS = ("shard", "attempt", "after_writes", "after_partitions", "code", "mb")
#: what a ``kill`` fault prints as PID 1 of a container, where the local container runner reclaims the instance
RECLAIM_MARKER = "seqlake fault injection: reclaim this instance"


class InjectedFaultError(RuntimeError):
    """What a ``fail`` fault raises (a report section), and an error a test raises inside the local cloud on
    purpose (e.g. from a moto backend it replaced): there answered as
    the service's internal error like any other, but not counted among the emulator's own failures
    (``localcloud.emulator_errors``; the adapter names this type to it), which fail the test that meets
    them."""


@dataclass(frozen=True)
class Fault:
    action: str
    selectors: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, int] = field(default_factory=dict)

    def number(self, key: str, default: int) -> int:
        return self.numbers.get(key, default)

    def applies(self, *, sample: str | None = None, run_id: str | None = None, shard: int | None = None,
                attempt: int | None = None, section: str | None = None) -> bool:
        if "sample" in self.selectors and self.selectors["sample"] != sample:
            return False
        if "section" in self.selectors and self.selectors["section"] != section:
            return False
        if "run" in self.selectors and not (run_id or "").startswith(self.selectors["run"]):
            return False
        if "shard" in self.numbers and self.numbers["shard"] != shard:
            return False
        return "attempt" not in self.numbers or self.numbers["attempt"] == attempt


def parse(text: str) -> Fault:
    """``kill:shard=1:after_writes=1`` -> :class:`Fault`; ``ValueError`` names what is wrong."""
    action, *pairs = text.strip().split(":")
    if action not in ACTIONS:
        raise ValueError(f"fault {text!r}: action must be one of {', '.join(ACTIONS)}")
    selectors: dict[str, str] = {}
    numbers: dict[str, int] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"fault {text!r}: {pair!r} is not key=value")
        if key in _INT_KEYS:
            numbers[key] = int(value)
        elif key in ("sample", "run", "section"):
            selectors[key] = value
        else:
            raise ValueError(f"fault {text!r}: unknown key {key!r}")
    return Fault(action, selectors, numbers)


def from_env(var: str, env: Any = None) -> list[Fault]:
    """The faults named by ``var`` (none when unset)."""
    text = (os.environ if env is None else env).get(var, "")
    return [parse(part) for part in text.split(";") if part.strip()]


def first(faults: list[Fault], **where: Any) -> Fault | None:
    """The first of ``faults`` that applies ``where`` (see :meth:`Fault.applies`)."""
    return next((f for f in faults if f.applies(**where)), None)


def die() -> None:
    """SIGKILL this process: no ``finally``, no flush, no exit handler, as when the host disappears.

    PID 1 of a container cannot SIGKILL itself (the kernel protects a namespace's init): there, ask the
    local container runner to reclaim the instance (SIGTERM, then SIGKILL, as ECS stops a container) and
    wait for it."""
    if os.getpid() == 1:
        sys.stderr.write(RECLAIM_MARKER + "\n")
        sys.stderr.flush()
        while True:
            signal.pause()
    sys.stderr.write("seqlake fault injection: SIGKILL\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def allocate(fault: Fault | None) -> None:
    """An ``allocate`` fault: write ``mb`` MiB (resident: untouched pages would not count), then let go."""
    if fault is not None and fault.action == "allocate":
        held = b"\1" * (fault.number("mb", 0) << 20)
        del held


def fail_report_section(section: str, run_id: str | None = None) -> None:
    """Raise :class:`InjectedFaultError` if ``SEQLAKE_REPORT_FAULT`` names this report section (or any, without
    ``section=``)."""
    fault = first(from_env(REPORT_VAR), run_id=run_id, section=section)
    if fault is not None and fault.action == "fail":
        raise InjectedFaultError(f"seqlake fault injection: report section {section} failed")


def crash() -> None:
    """End this process at once without cleanup (a Lambda killed by its timeout or memory limit)."""
    sys.stderr.write("seqlake fault injection: crash\n")
    sys.stderr.flush()
    os._exit(CRASH_STATUS)
