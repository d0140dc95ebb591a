"""Plan a run: validate its inputs, choose the shards, write plan.json; return only its URI and size.
Called again after the children with ``reduce: true``: plan the reduce step (its regions' count).

Thin: validate the step input, read settings from the environment, call
:func:`seqlake.aws.plan_step.plan_step`. Bad input raises ``BadInputError``: Step Functions catches it
and the failure step records its one-line message.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from aws_lambda_powertools.utilities.validation import validate

from seqlake.aws import observability as obs
from seqlake.aws.observability import logger, metrics, tracer
from seqlake.aws.plan_step import plan_step, reduce_plan_step
from seqlake.aws.request import ExecutionInput
from seqlake.aws.schemas import PLAN_INPUT


def _int_env(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value else None


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@obs.logs_access_denied
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    validate(event=event, schema=PLAN_INPUT)
    execution = ExecutionInput.from_dict(event["execution"])
    logger.append_keys(run_id=execution.run_id)
    if event.get("reduce"):  # the second call, after the children: the reduce step's regions
        return reduce_plan_step(execution)
    summary = plan_step(execution, reads_per_shard=_int_env("READS_PER_SHARD"),
                        lambda_index_max_bytes=_int_env("LAMBDA_INDEX_MAX_BYTES"),
                        execution_arn=event.get("execution_arn"), execution_name=event.get("execution_name"),
                        started_at=event.get("started_at"))
    obs.size(obs.INPUT_BYTES_PLANNED, summary.input_bytes)
    logger.info("planned", extra=summary.to_dict())
    return summary.to_dict()
