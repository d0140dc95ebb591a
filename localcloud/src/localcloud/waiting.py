"""The wait loop: until nothing runs any more, then the finished runs recorded in the run history."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from localcloud import contract
from localcloud.progress import Execution, Watcher
from localcloud.state import StateDir

#: the wait loop's poll interval while runs are in flight (a Lambda or Batch job returning wakes it sooner)
_SLOW_POLL_SECONDS = 2.0
#: ... and while confirming that nothing is in flight any more
_QUICK_POLL_SECONDS = 0.1
#: after a wake-up, before polling: the interpreter's next transitions
_SETTLE_SECONDS = 0.05
#: while a Lambda or Batch job runs, the state machine is polled only this often unless woken
_BUSY_POLL_SECONDS = 10.0


def wait_idle(watcher: Watcher, busy: Callable[[], bool], activity: threading.Event,
              timeout: float | None) -> list[Execution]:
    """Poll until two polls in a row find nothing running and nothing in flight (``busy``: Lambda events or
    Batch jobs); ``activity`` is set when a Lambda or Batch job returns. Returns the round's new executions.
    ``timeout`` None: as long as the runs take (their state machine's own timeouts end them)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with watcher:
        quiet_polls, interval, polled = 0, 0.1, 0.0
        while quiet_polls < 2:  # two idle polls in a row: an event in flight has landed
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"the local cloud was still busy after {timeout:.0f} s")
            # Each poll is a few requests through moto (the execution's whole history among them),
            # on the core the shards need. The state machine moves when a Lambda or Batch job
            # returns, and those wake this loop; while one runs, the shard bars are updated from
            # the Batch runner alone and moto is asked only every _BUSY_POLL_SECONDS.
            woke = activity.wait(interval)
            if woke:
                activity.clear()
                time.sleep(_SETTLE_SECONDS)  # the interpreter takes the transitions it unblocked
            in_flight = busy()
            if woke or not in_flight or time.monotonic() - polled > _BUSY_POLL_SECONDS:
                running, polled = watcher.poll(), time.monotonic()
            else:
                watcher.update_arrays()
                running = True
            watcher.changed = False
            idle = not (running or in_flight)
            quiet_polls = quiet_polls + 1 if idle else 0
            interval = _QUICK_POLL_SECONDS if idle else min(_SLOW_POLL_SECONDS, interval * 1.5)
        watcher.poll()
    return watcher.finished()


def largest_payload(sfn: Any, arn: str) -> int:
    """The largest input or output of any state of the execution, in bytes, as Step Functions records
    them in its history: what its 256 KiB limit applies to, kept far below it by design."""
    largest = 0
    kw: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kw)
        for event in page["events"]:
            for key, details in event.items():
                if key.endswith("EventDetails") and isinstance(details, dict):
                    for field in ("input", "output"):
                        largest = max(largest, len(str(details.get(field) or "").encode()))
        if not page.get("nextToken"):
            return largest
        kw["nextToken"] = page["nextToken"]


def run_record(state: StateDir, bucket: str, e: Execution, payload_bytes: int | None = None) -> dict[str, Any]:
    """The run history's entry for a finished execution, with its status document's inputs and counts."""
    status_doc: dict[str, Any] = {}
    run_id = str(e.input.get("run_id") or e.name)
    app = contract.app()
    status_key = app.status_key
    path = state.bucket_dir(bucket) / status_key(run_id) if status_key is not None else None
    if path is not None and path.is_file():
        with contextlib.suppress(ValueError):
            status_doc = json.loads(path.read_text())
    # the app's shards: the jobs its state machine names so (JobName), not its other Batch jobs
    shard_jobs = [a for a in e.arrays if a.job_name.startswith(app.shard_jobs)]
    return {
        "run_id": run_id,
        "execution_arn": e.arn,
        "status": e.status,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.started)),
        "seconds": round((e.stopped or time.time()) - e.started, 1),
        "inputs": [{"key": i.get("key"), "etag": i.get("etag")} for i in status_doc.get("inputs", [])],
        "reference": status_doc.get("reference"),
        "states": e.states,
        "error": e.error,
        "cause": (e.cause or "")[:2000] or None,
        "shards": sum(a.size for a in shard_jobs),
        "retried": sum(a.retries for a in shard_jobs),
        "failed_shards": sum(a.failed for a in shard_jobs),
        "status_json": status_doc,
        "largest_payload_bytes": payload_bytes,
    }
