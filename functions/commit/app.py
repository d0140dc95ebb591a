"""Commit a run: merge the shards, write status.json and the runs row, register partitions last.

Thin: validate the step input, read settings from the environment, call
:func:`seqlake.aws.steps.commit_step`, emit the run's metrics.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from aws_lambda_powertools.utilities.validation import validate

from seqlake.aws import observability as obs
from seqlake.aws.observability import logger, metrics, tracer
from seqlake.aws.request import ExecutionInput
from seqlake.aws.schemas import COMMIT_INPUT
from seqlake.aws.steps import commit_step


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@obs.logs_access_denied
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    validate(event=event, schema=COMMIT_INPUT)
    execution = ExecutionInput.from_dict(event["execution"])
    logger.append_keys(run_id=execution.run_id)
    status = commit_step(execution, event.get("batch"), database=os.environ["GLUE_DATABASE"],
                         execution_arn=event.get("execution_arn"), started_at=event.get("started_at"))
    obs.count(obs.RUNS_SUCCEEDED)
    obs.count(obs.SHARDS, status.shards or 0)
    obs.count(obs.SHARDS_RETRIED, len(status.retried_shards))
    obs.count(obs.READS_PROCESSED, status.reads or 0)
    obs.count(obs.BASES_PROCESSED, status.bases or 0)
    logger.info("run committed", extra={"reads": status.reads, "shards": status.shards,
                                        "retried_shards": len(status.retried_shards)})
    # a few numbers: the state's output must not grow with the run
    return {"state": status.state, "status_uri": status.status_uri, "reads": status.reads,
            "bases": status.bases, "shards": status.shards, "retried_shards": len(status.retried_shards)}
