"""The Batch job that plans a run whose inputs are too large to index inside Lambda.

The state machine starts it with the worker image and ``python -m seqlake.aws.index_job``; it reads
``SEQLAKE_REQUEST_URI`` (``runs/<id>/request.json``, written by the plan step), builds the gzip seek
indexes and the plan with the same :func:`seqlake.aws.steps.make_run_plan` the Lambda uses, and exits
with the worker's codes: 0 done, 65 bad input (also written to ``runs/<id>/index/_error.json`` for the
failure step), anything else retryable.
"""

from __future__ import annotations

import json
import os
import sys

from seqlake import storage
from seqlake.aws.request import RunRequest
from seqlake.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, BadInputError
from seqlake.params import Params


def main() -> int:
    from seqlake.aws.steps import index_error_uri, make_run_plan

    uri = os.environ.get("SEQLAKE_REQUEST_URI")
    if not uri:
        print("seqlake index job: SEQLAKE_REQUEST_URI is not set", file=sys.stderr)
        return EXIT_FAILURE
    body = json.loads(storage.read_bytes(uri))
    request = RunRequest.from_dict(body["request"])
    try:
        summary = make_run_plan(request, Params.from_dict(body.get("params", {})))
    except BadInputError as err:
        print(f"seqlake: bad input: {err}", file=sys.stderr)
        storage.write_bytes(index_error_uri(request), json.dumps(err.to_dict()).encode())
        return EXIT_BAD_INPUT
    print(f"planned {summary.array_size} shard(s): {summary.plan_uri}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
