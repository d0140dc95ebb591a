"""Record a failed run: the step, the shard, the reason and the log stream, in status.json and the
runs table (never a partition in the result tables).

Thin: validate the step input, read settings from the environment, call
:func:`seqlake.aws.steps.record_failure`, count the failure.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from aws_lambda_powertools.utilities.validation import validate

from seqlake.aws import observability as obs
from seqlake.aws.observability import logger, metrics, tracer
from seqlake.aws.request import ExecutionInput
from seqlake.aws.schemas import FAILURE_INPUT
from seqlake.aws.steps import record_failure


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@obs.logs_access_denied
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    validate(event=event, schema=FAILURE_INPUT)
    execution = ExecutionInput.from_dict(event["execution"])
    logger.append_keys(run_id=execution.run_id)
    status = record_failure(execution, event.get("plan"), event.get("failed_step"), event["error"],
                            database=os.environ["GLUE_DATABASE"], execution_arn=event.get("execution_arn"),
                            started_at=event.get("started_at"), log_group=os.environ.get("WORKER_LOG_GROUP"),
                            job_queue=os.environ.get("JOB_QUEUE"))
    obs.count(obs.RUNS_FAILED)
    logger.error("run failed", extra={"failed_step": status.failed_step, "failed_shard": status.failed_shard,
                                      "reason": status.reason, "log_stream": status.log_stream})
    obs.count(obs.SHARDS_RETRIED, len(status.retried_shards))
    return {"state": status.state, "status_uri": status.status_uri, "failed_step": status.failed_step,
            "failed_shard": status.failed_shard, "reason": status.reason}
