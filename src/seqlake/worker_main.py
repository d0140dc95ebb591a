"""``seqlake worker``: the AWS Batch child entry point (the worker image's command).

Batch sets ``AWS_BATCH_JOB_ARRAY_INDEX`` for array children (it is absent for a plain job: a 1-shard
run); the state machine passes only the plan's URI (``SEQLAKE_PLAN_URI``) so container overrides stay
far below Batch's 8 KiB limit. Exit codes are the contract of :mod:`seqlake.errors`.

On bad input the worker also writes ``<staging>/_errors/shard=NNNNN.json`` (the one-line reason as
structured data) so that the state machine's failure step can record *why* without scraping logs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from seqlake.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, BadInputError


def error_uri(staging_prefix: str, shard: int) -> str:
    from seqlake import storage

    return storage.join(staging_prefix, "_errors", f"shard={shard:05d}.json")


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
