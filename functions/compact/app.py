"""Compaction and retention of the Iceberg tables (issue 36), on the stack's schedule (``CompactionSchedule``)
or invoked by an operator: each run's small files rewritten into one per table, the snapshots older than
``SnapshotRetentionDays`` expired and their files removed.

Thin: read settings from the environment, call :func:`seqlake.aws.maintenance.compact_step` with the
function's remaining time (it starts no partition it may not finish; the next invocation goes on).
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from seqlake.aws import observability as obs
from seqlake.aws.maintenance import compact_step
from seqlake.aws.observability import logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@obs.logs_access_denied
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    done = compact_step(database=os.environ["GLUE_DATABASE"], bucket=os.environ["DATA_BUCKET"],
                        keep_days=float(os.environ["SNAPSHOT_RETENTION_DAYS"]),
                        remaining_ms=context.get_remaining_time_in_millis())
    obs.count(obs.PARTITIONS_COMPACTED, done["compacted"])
    logger.info("tables compacted", extra=done)
    return done
