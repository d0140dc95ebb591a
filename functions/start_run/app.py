"""EventBridge "Object Created" under incoming/ -> start the run that the object completes.

Thin: validate the event, read settings from the environment, call
:func:`seqlake.aws.start.start_run`, count the outcome.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from aws_lambda_powertools.utilities.validation import validate

from seqlake.aws import observability as obs
from seqlake.aws.events import object_from_event
from seqlake.aws.observability import logger, metrics, tracer
from seqlake.aws.schemas import S3_OBJECT_CREATED
from seqlake.aws.start import StartSettings, start_run

_METRIC = {
    "started": obs.RUNS_STARTED,
    "waiting": obs.RUNS_WAITING,
    "duplicate": obs.RUNS_DUPLICATE,
    "rejected": obs.RUNS_REJECTED,
}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    validate(event=event, schema=S3_OBJECT_CREATED)
    settings = StartSettings.from_env(os.environ)
    obj = object_from_event(event)
    logger.append_keys(s3_key=obj.key, etag=obj.etag)
    result = start_run(obj, settings)
    if result.status in _METRIC:
        obs.count(_METRIC[result.status])
    return result.to_dict()
