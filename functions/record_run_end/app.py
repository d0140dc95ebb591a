"""The backstop: an execution that ended FAILED, TIMED_OUT or ABORTED without its run's failure recorded
(EventBridge's ``Step Functions Execution Status Change``) -> ``status.json`` FAILED with the execution's
error and cause, and the runs row; a run already recorded is left as it is.

Thin: parse the event, read settings from the environment, call
:func:`seqlake.aws.backstop.record_unrecorded_end`, count the failure. An error is raised: Lambda retries
the asynchronous event, then sends it to the function's dead-letter queue.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from seqlake.aws import observability as obs
from seqlake.aws.backstop import record_unrecorded_end
from seqlake.aws.events import ExecutionEnd
from seqlake.aws.observability import logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@obs.logs_access_denied
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    end = ExecutionEnd.from_event(event)
    logger.append_keys(execution_arn=end.execution_arn, execution_status=end.status)
    status = record_unrecorded_end(end, database=os.environ["GLUE_DATABASE"])
    if status is None:
        return {"recorded": False}
    obs.count(obs.RUNS_FAILED)
    logger.error("run ended unrecorded: recorded now", extra={"run_id": status.run_id, "reason": status.reason})
    return {"recorded": True, "state": status.state, "status_uri": status.status_uri, "reason": status.reason}
