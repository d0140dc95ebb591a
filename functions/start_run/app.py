"""Uploads under incoming/ -> the runs they complete.

Two event sources, one function: EventBridge's "Object Created" (an upload: settle its folder through the
settle queue, or start a file directly under incoming/) and the settle queue's SQS messages (a folder:
start its runs once it is quiet). Thin: validate the event, read settings from the environment, call
:mod:`seqlake.aws.start`, count the outcomes.
"""

from __future__ import annotations

import json
import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from aws_lambda_powertools.utilities.validation import validate

from seqlake.aws import observability as obs
from seqlake.aws.events import object_from_event
from seqlake.aws.observability import logger, metrics, tracer
from seqlake.aws.schemas import S3_OBJECT_CREATED
from seqlake.aws.start import StartResult, StartSettings, settle, start_run

_METRIC = {
    "started": obs.RUNS_STARTED,
    "waiting": obs.RUNS_WAITING,
    "duplicate": obs.RUNS_DUPLICATE,
    "rejected": obs.RUNS_REJECTED,
}


def _count(results: list[StartResult]) -> None:
    for result in results:
        if result.status in _METRIC:
            obs.count(_METRIC[result.status])


def _settle_records(records: list[dict[str, Any]], settings: StartSettings) -> dict[str, Any]:
    """Each message settles one folder. A FIFO batch stops at its first failure: that message and the
    ones after it are reported failed, so they come back in order (ReportBatchItemFailures)."""
    failures: list[dict[str, str]] = []
    for record in records:
        if failures:
            failures.append({"itemIdentifier": record["messageId"]})
            continue
        body = json.loads(record["body"])
        logger.append_keys(folder=body["folder"])
        try:
            _count(settle(body["bucket"], body["folder"], settings))
        except Exception:
            logger.exception("settling the folder failed")
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
@obs.logs_access_denied
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = StartSettings.from_env(os.environ)
    if "Records" in event:
        return _settle_records(event["Records"], settings)
    validate(event=event, schema=S3_OBJECT_CREATED)
    obj = object_from_event(event)
    logger.append_keys(s3_key=obj.key, etag=obj.etag)
    result = start_run(obj, settings)
    _count([result])
    return result.to_dict()
