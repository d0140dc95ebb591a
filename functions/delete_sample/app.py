"""Delete a sample everywhere (issue 36: a participant withdraws consent), invoked by the lab with
``{"sample": NAME, "confirm": NAME, "requested_by": WHO}`` (docs/DEPLOY.md).

Thin: check the request, read settings from the environment, call
:func:`seqlake.aws.maintenance.delete_sample_step`. A refusal (no confirmation, a name no table holds) is
raised: the caller's synchronous invocation gets its message as the function's error.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from seqlake.aws import observability as obs
from seqlake.aws.maintenance import DeleteRequest, delete_sample_step
from seqlake.aws.observability import logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@obs.logs_access_denied
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = DeleteRequest.from_event(event)
    # the log names the record, not the sample: the log group outlives the deletion
    done = delete_sample_step(request, database=os.environ["GLUE_DATABASE"], bucket=os.environ["DATA_BUCKET"],
                              request_id=context.aws_request_id)
    obs.count(obs.SAMPLES_DELETED)
    logger.info("sample deleted", extra={"audit": done["audit"], "rows": done["rows"],
                                         "objects_removed": done["objects_removed"]})
    return done
