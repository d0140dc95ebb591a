"""AWS's own texts the local cloud writes as AWS does: Batch's and Lambda's status reasons, Step Functions'
``Execution Status Change`` event. The app reads the same texts (``seqlake.aws.batch_reasons``,
``seqlake.aws.events``) from its own copy; ``tests/local/test_component_contract.py`` holds the two copies equal.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

# ---------------------------------------------------------------- Batch, Lambda
#: the reason Batch (ECS) gives a container the kernel killed for using more than its MEMORY (exit code 137)
#: https://docs.aws.amazon.com/batch/latest/userguide/troubleshooting.html
BATCH_OUT_OF_MEMORY = "OutOfMemoryError: Container killed due to memory usage"
#: the error type of a Lambda invocation that used more than its function's MemorySize
#: https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html
LAMBDA_OUT_OF_MEMORY = "Runtime.OutOfMemory"
#: Batch's status reason after a JobStateTimeLimitActions cancel, before the reason code
#: https://docs.aws.amazon.com/batch/latest/APIReference/API_JobStateTimeLimitAction.html
CANCELLED_PREFIX = "Canceled by JobStateTimeLimit action due to reason: "
#: Batch's status reason of an attempt that ran past AttemptDurationSeconds
ATTEMPT_TIMED_OUT = "Job attempt duration exceeded timeout"

# ---------------------------------------------------------------- Step Functions' event
#: https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html
EXECUTION_STATUS_SOURCE = "aws.states"
EXECUTION_STATUS_DETAIL_TYPE = "Step Functions Execution Status Change"


def execution_status_detail(*, execution_arn: str, state_machine_arn: str, name: str, status: str,
                            start: datetime, stop: datetime | None, execution_input: str,
                            output: str | None, error: str | None, cause: str | None) -> dict[str, Any]:
    """The ``detail`` of an ``Execution Status Change`` event as AWS writes it: dates in epoch
    milliseconds, the input and output as JSON text (``output`` only for SUCCEEDED), ``error`` and
    ``cause`` null unless the execution failed (or StopExecution gave them)."""

    def ms(t: datetime | None) -> int | None:
        return None if t is None else int(t.timestamp() * 1000)

    return {
        "executionArn": execution_arn, "stateMachineArn": state_machine_arn, "name": name, "status": status,
        "startDate": ms(start), "stopDate": ms(stop),
        "input": execution_input, "output": output,
        "inputDetails": {"included": True}, "outputDetails": {"included": True} if output is not None else None,
        "error": error, "cause": cause,
    }
