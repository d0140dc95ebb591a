"""``seqlake worker``: the AWS Batch child entry point (the worker image's command).

Batch sets ``AWS_BATCH_JOB_ARRAY_INDEX`` for array children (it is absent for a plain job: a 1-child
run). The state machine passes only the plan's URI (``SEQLAKE_PLAN_URI``) and the list of children
this execution runs (``SEQLAKE_TODO_URI``: every child, or on a re-run those without a finished
manifest; array index i runs the i-th child of the list), so container overrides stay far below
Batch's limit whatever the run's size. A child reads its own entry of the list and its own part of
the plan (:mod:`seqlake.plan.childplan`), and of each gzip seek index the points of its span
(:mod:`seqlake.reads.seekindex`): what it reads grows with its shard, not with the run. Exit codes are the
contract of :mod:`seqlake.base.errors`.

A child whose manifest already holds its finished work (an attempt after one that got that far, or a
re-run) exits 0 at once: nothing is computed twice. On bad input the worker also writes
``runs/<id>/staging/_errors/child=NNNNN.json`` (the one-line reason as structured data) so that the
state machine's failure step can record *why* without scraping logs.

Test-only: ``SEQLAKE_FAULT`` (:mod:`seqlake.base.faults`, ``docs/FAULTS.md``) makes the child die in
the middle of its work, after its n-th write of the child's own objects, or exit with a given code
(``shard=`` selects a child by number). The hook wraps the Parquet and storage writers from here, so
the shard worker itself carries no test code.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

from seqlake.base.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, BadInputError, access_denied
from seqlake.base.layout import RunLayout

TODO_VAR = "SEQLAKE_TODO_URI"
PLAN_VAR = "SEQLAKE_PLAN_URI"


def install_fault(layout: RunLayout, sample: str, child: int) -> int | None:
    """Apply ``SEQLAKE_FAULT`` if it names this child; returns an exit code to end with at once, or
    ``None`` to go on (possibly with the storage writers wrapped to die after the n-th write)."""
    from seqlake.base import faults, storage
    from seqlake.lake import parquet_io

    attempt = int(os.environ.get("AWS_BATCH_JOB_ATTEMPT", "1"))
    fault = faults.first(faults.from_env(faults.WORKER_VAR), sample=sample, run_id=layout.run_id, shard=child,
                         attempt=attempt)
    if fault is None:
        return None
    if fault.action == "exit":
        print(f"seqlake fault injection: exit {fault.number('code', EXIT_FAILURE)} on shard {child}",
              file=sys.stderr)
        return fault.number("code", EXIT_FAILURE)
    after = fault.number("after_writes", 0)
    if after <= 0:
        faults.die()
    writes = 0
    own = (layout.child_prefix(child), layout.manifest(child), layout.alignments_part(child))

    def counted(write: Callable[..., None], uri_arg: int) -> Callable[..., None]:
        def wrapper(*args: Any, **kwargs: Any) -> None:
            nonlocal writes
            write(*args, **kwargs)
            # only the child's own outputs count, not a reference index written on the way
            if str(args[uri_arg]).startswith(own):
                writes += 1
                if writes >= after:
                    faults.die()
        return wrapper

    # every Parquet part goes through parquet_io._put(local, uri) (local path or S3); manifest.json and
    # the error record through storage.write_bytes(uri, data)
    parquet_io._put = counted(parquet_io._put, 1)
    storage.write_bytes = counted(storage.write_bytes, 0)
    return None


def child_index(explicit: int | None) -> int:
    """This process's child: ``--shard``, else the array index mapped through the todo list."""
    from seqlake.plan.childplan import todo_child

    if explicit is not None:
        return explicit
    index = int(os.environ.get("AWS_BATCH_JOB_ARRAY_INDEX", "0"))
    todo = os.environ.get(TODO_VAR)
    if not todo:
        return index
    return todo_child(todo, index)


#: Arrow's allocator in a child: the C heap rather than Arrow's default mimalloc pool, which keeps the pages of
#: each flushed alignment batch and Parquet row group (~20-25 MB of a child's peak RSS, docs/PERFORMANCE.md).
#: Arrow reads the variable once, when pyarrow is imported: the worker sets it before its imports.
ARROW_POOL = ("ARROW_DEFAULT_MEMORY_POOL", "system")


def child_process_settings() -> None:
    """The process settings a shard child runs under: Arrow's allocator (before pyarrow is imported) and the C
    heap's thresholds (:mod:`seqlake.child.heap`). One function, so that what measures a child (bench/bam.py)
    runs it as the worker does."""
    os.environ.setdefault(*ARROW_POOL)
    from seqlake.child.heap import keep_freed_memory

    keep_freed_memory()  # a child reuses its per-chunk memory (see seqlake.child.heap)


def _failed(plan: Any, child: int, err: Exception) -> int:
    """The exit code of a child that failed with ``err``, its last line saying why (the failure step records
    it): bad input (also written as structured data), a full disk (what to raise), or a grant the child's
    role lacks; anything else is raised on."""
    from seqlake.base import storage

    if isinstance(err, BadInputError):
        print(f"seqlake: bad input: {err}", file=sys.stderr)
        body = {**err.to_dict(), "child": child, "attempt": os.environ.get("AWS_BATCH_JOB_ATTEMPT")}
        try:
            storage.write_bytes(plan.layout.child_error(child), json.dumps(body).encode())
        except Exception:
            traceback.print_exc()
        return EXIT_BAD_INPUT
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        traceback.print_exc()
        print(f"seqlake: no space left on the child's disk ({err.filename or tempfile.gettempdir()}): a child "
              "spills its allele counts there; raise RootVolumeGiB or lower ReadsPerShard (docs/DEPLOY.md)",
              file=sys.stderr)
        return EXIT_FAILURE
    denied = access_denied(err)
    if denied is None:
        raise err
    traceback.print_exc()
    print(f"seqlake: access denied: {denied[0]} on {denied[1]}", file=sys.stderr)
    return EXIT_FAILURE


def worker_command(args: argparse.Namespace) -> int:
    child_process_settings()  # first: Arrow reads its allocator's variable when the imports below load it
    from seqlake.child.worker import finished_manifest, process_child
    from seqlake.plan.childplan import load_child_plan

    plan_uri = args.plan or os.environ.get(PLAN_VAR)
    if not plan_uri:
        print(f"seqlake worker: no plan: set {PLAN_VAR} or pass --plan", file=sys.stderr)
        return EXIT_FAILURE
    child = child_index(args.shard)
    try:
        plan = load_child_plan(plan_uri, child)
    except ValueError as err:
        print(f"seqlake worker: {err}", file=sys.stderr)
        return EXIT_FAILURE
    if finished_manifest(plan, child) is not None:
        print(f"seqlake worker: child {child} is already done (its manifest holds its work)")
        return EXIT_OK
    code = install_fault(plan.layout, plan.shards[plan.first_shard].sample, child)
    if code is not None:
        return code
    try:
        process_child(plan, child)
    except Exception as err:
        return _failed(plan, child, err)
    return EXIT_OK
