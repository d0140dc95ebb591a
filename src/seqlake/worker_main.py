"""``seqlake worker``: the AWS Batch child entry point (the worker image's command).

Batch sets ``AWS_BATCH_JOB_ARRAY_INDEX`` for array children (it is absent for a plain job: a 1-shard
run); the state machine passes only the plan's URI (``SEQLAKE_PLAN_URI``) so container overrides stay
far below Batch's 8 KiB limit. Exit codes are the contract of :mod:`seqlake.errors`.

On bad input the worker also writes ``<staging>/_errors/shard=NNNNN.json`` (the one-line reason as
structured data) so that the state machine's failure step can record *why* without scraping logs.

Test-only: ``SEQLAKE_FAULT`` (:mod:`seqlake.aws.faults`, ``docs/FAULTS.md``) makes the child die in
the middle of its shard, after its n-th write to the staging prefix, or exit with a given code. The
hook wraps the Parquet and storage writers from here, so the shard worker itself carries no test code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from seqlake.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, BadInputError


def error_uri(staging_prefix: str, shard: int) -> str:
    from seqlake import storage

    return storage.join(staging_prefix, "_errors", f"shard={shard:05d}.json")


def install_fault(plan_run_id: str, staging_prefix: str, sample: str, shard: int) -> int | None:
    """Apply ``SEQLAKE_FAULT`` if it names this child; returns an exit code to end with at once, or
    ``None`` to go on (possibly with the storage writers wrapped to die after the n-th write)."""
    from seqlake import parquet_io, storage
    from seqlake.aws import faults

    attempt = int(os.environ.get("AWS_BATCH_JOB_ATTEMPT", "1"))
    fault = faults.first(faults.from_env(faults.WORKER_VAR), sample=sample, run_id=plan_run_id, shard=shard,
                         attempt=attempt)
    if fault is None:
        return None
    if fault.action == "exit":
        print(f"seqlake fault injection: exit {fault.number('code', EXIT_FAILURE)} on shard {shard}",
              file=sys.stderr)
        return fault.number("code", EXIT_FAILURE)
    after = fault.number("after_writes", 0)
    if after <= 0:
        faults.die()
    writes = 0

    def counted(write: Callable[..., None], uri_arg: int) -> Callable[..., None]:
        def wrapper(*args: Any, **kwargs: Any) -> None:
            nonlocal writes
            write(*args, **kwargs)
            # only the shard's own outputs count, not a reference index written on the way
            if str(args[uri_arg]).startswith(staging_prefix):
                writes += 1
                if writes >= after:
                    faults.die()
        return wrapper

    # every Parquet part goes through parquet_io._put(local, uri) (local path or S3); manifest.json and
    # the error record through storage.write_bytes(uri, data)
    parquet_io._put = counted(parquet_io._put, 1)
    storage.write_bytes = counted(storage.write_bytes, 0)
    return None


def _shard_index(explicit: int | None) -> int:
    if explicit is not None:
        return explicit
    return int(os.environ.get("AWS_BATCH_JOB_ARRAY_INDEX", "0"))


def worker_command(args: argparse.Namespace) -> int:
    from seqlake import storage
    from seqlake.plan import load_plan
    from seqlake.worker import process_shard

    plan_uri = args.plan or os.environ.get("SEQLAKE_PLAN_URI")
    if not plan_uri:
        print("seqlake worker: no plan: set SEQLAKE_PLAN_URI or pass --plan", file=sys.stderr)
        return EXIT_FAILURE
    shard = _shard_index(args.shard)
    plan = load_plan(plan_uri)
    if not 0 <= shard < plan.array_size:
        print(f"seqlake worker: shard {shard} is outside the plan's {plan.array_size} shards",
              file=sys.stderr)
        return EXIT_FAILURE
    code = install_fault(plan.run_id, plan.staging_prefix, plan.shards[shard].sample, shard)
    if code is not None:
        return code
    try:
        process_shard(plan, shard)
    except BadInputError as err:
        print(f"seqlake: bad input: {err}", file=sys.stderr)
        body = {**err.to_dict(), "shard": shard, "attempt": os.environ.get("AWS_BATCH_JOB_ATTEMPT")}
        try:
            storage.write_bytes(error_uri(plan.staging_prefix, shard), json.dumps(body).encode())
        except Exception:
            traceback.print_exc()
        return EXIT_BAD_INPUT
    return EXIT_OK
