"""The Batch job that plans a run the plan Lambda cannot: inputs too large to index inside Lambda, or a
reference whose minimap2 index is not stored yet (the Lambda carries no aligner, and a human index needs
more memory than a Lambda has: the job's ``IndexJobMemoryMiB``).

The state machine starts it with the worker image and ``python -m seqlake.aws.index_job``; it reads
``SEQLAKE_INDEX_JOB_URI`` (``runs/<id>/index/job.json``, written by the plan step: the execution input
and the run's parameters), builds the reference's index when it is not stored (once per reference and
preset, in the bucket's ``reference-indexes/``: :mod:`seqlake.plan.reference`), the gzip seek indexes
and the plan with the same :func:`seqlake.aws.plan_step.make_run_plan` the Lambda uses, and exits with
the worker's codes: 0 done, 65 bad input (also written to ``runs/<id>/index/_error.json`` for the
failure step), anything else retryable.
"""

from __future__ import annotations

import json
import os
import sys

from seqlake.aws.request import ExecutionInput
from seqlake.base import storage
from seqlake.base.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, BadInputError
from seqlake.base.params import Params

JOB_VAR = "SEQLAKE_INDEX_JOB_URI"


def main() -> int:
    from seqlake.aws.plan_step import make_run_plan, pinned_reference
    from seqlake.plan.refindex import ensure_index
    from seqlake.plan.sizing import Compute, job_size_of
    from seqlake.reads.gzindex import index_threads

    uri = os.environ.get(JOB_VAR)
    if not uri:
        print(f"seqlake index job: {JOB_VAR} is not set", file=sys.stderr)
        return EXIT_FAILURE
    body = json.loads(storage.read_bytes(uri))
    request = ExecutionInput.from_dict(body["execution"]).load()
    params = Params.from_dict(body.get("params", {}))
    try:
        reference = pinned_reference(request, params)
        if reference is not None:  # before the plan: the shards only load it
            ensure_index(reference, index_threads())
        children = make_run_plan(request, params, reference, Compute.from_dict(body.get("compute") or {}),
                                 job_size_of(body.get("index")))
    except BadInputError as err:
        print(f"seqlake: bad input: {err}", file=sys.stderr)
        storage.write_bytes(request.layout.index_error, json.dumps(err.to_dict()).encode())
        return EXIT_BAD_INPUT
    print(f"planned {children} child(ren): {request.layout.plan}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
