"""The one Logger, Tracer and Metrics of every Lambda handler (AWS Lambda Powertools).

Handlers import these three objects and decorate with them; the core modules only log through
``logger``. Tests and the local cloud switch the utilities off with Powertools' own environment
variables (``POWERTOOLS_TRACE_DISABLED=true``, ``POWERTOOLS_METRICS_DISABLED=true``): nothing
here reads the environment at import time beyond what Powertools itself reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from seqlake.base.errors import access_denied

Handler = TypeVar("Handler", bound=Callable[..., Any])

SERVICE = "seqlake"
NAMESPACE = "seqlake"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)

#: metric names (CloudWatch, namespace ``seqlake``); dashboards and alarms refer to these
RUNS_STARTED = "RunsStarted"
RUNS_WAITING = "RunsWaitingForInputs"
RUNS_DUPLICATE = "DuplicateEvents"
RUNS_REJECTED = "InputsRejected"
RUNS_SUCCEEDED = "RunsSucceeded"
RUNS_FAILED = "RunsFailed"
SHARDS = "Shards"
SHARDS_RETRIED = "ShardsRetried"
READS_PROCESSED = "ReadsProcessed"
BASES_PROCESSED = "BasesProcessed"
INPUT_BYTES_PLANNED = "InputBytesPlanned"
SAMPLES_DELETED = "SamplesDeleted"
PARTITIONS_COMPACTED = "PartitionsCompacted"


def count(name: str, value: float = 1) -> None:
    """Add one count metric (flushed by the handler's ``log_metrics`` decorator)."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def size(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Bytes, value=value)


def logs_access_denied(handler: Handler) -> Handler:
    """The handler, logging an AccessDenied it meets as one record with the action and the resource AWS's
    message names (the grant its role lacks) before the error propagates as before."""

    @functools.wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        except Exception as err:
            denied = access_denied(err)
            if denied is not None:
                logger.error("access denied", extra={"action": denied[0], "resource": denied[1]})
            raise

    return wrapper  # type: ignore[return-value]
