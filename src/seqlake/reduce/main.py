"""``seqlake reduce``: one reducer of the reduce step (what each child of the reduce Batch array runs).

Batch sets ``AWS_BATCH_JOB_ARRAY_INDEX`` for array children (absent for a plain job: a one-region run);
the state machine passes only the plan's URI (``SEQLAKE_PLAN_URI``). The array index is the region. A
region whose summary already holds its work exits 0 at once (a retried attempt, a re-run). Exit codes are
the contract of :mod:`seqlake.base.errors`.
"""

from __future__ import annotations

import argparse
import os
import sys

from seqlake.base.errors import EXIT_FAILURE, EXIT_OK

PLAN_VAR = "SEQLAKE_PLAN_URI"


def reduce_command(args: argparse.Namespace) -> int:
    from seqlake.plan.planfile import load_plan
    from seqlake.reduce.reducer import finished_summary, reduce_region

    plan_uri = args.plan or os.environ.get(PLAN_VAR)
    if not plan_uri:
        print(f"seqlake reduce: no plan: set {PLAN_VAR} or pass --plan", file=sys.stderr)
        return EXIT_FAILURE
    region = args.region if args.region is not None else int(os.environ.get("AWS_BATCH_JOB_ARRAY_INDEX", "0"))
    plan = load_plan(plan_uri)
    if finished_summary(plan, region) is not None:
        print(f"seqlake reduce: region {region} is already done (its summary holds its work)")
        return EXIT_OK
    summary = reduce_region(plan, region)
    print(f"seqlake reduce: region {region}: {len(summary.samples)} sample(s), rows {summary.parts}, "
          f"{summary.seconds} s")
    return EXIT_OK
