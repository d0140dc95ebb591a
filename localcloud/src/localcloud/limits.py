"""AWS's limits the local cloud enforces (moto does not), each with its documented number and where it is written.

The app keeps the same numbers where it plans within them (``seqlake.base.limits``); the two copies are held
equal by ``tests/local/test_component_contract.py``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    value: int
    #: what the number bounds, as the documentation puts it
    what: str
    #: the AWS page that documents it
    source: str


# ---------------------------------------------------------------- Step Functions
_SFN_QUOTAS = "https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html"
#: an execution's input, each state's input (after InputPath/Parameters) and output (after
#: ResultSelector/ResultPath/OutputPath); over it the execution fails with ``States.DataLimitExceeded``,
#: which ``States.ALL`` does not catch, and ``StartExecution`` refuses the input
SFN_PAYLOAD = Limit(
    262_144,
    "maximum input or output size for a task, state, or execution, in bytes of UTF-8",
    _SFN_QUOTAS,
)

# ---------------------------------------------------------------- Lambda
_LAMBDA_INVOKE = "https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html"
LAMBDA_SYNC_REQUEST = Limit(6_291_456, "invocation payload, synchronous (RequestResponse): 6 MB", _LAMBDA_INVOKE)
LAMBDA_ASYNC_REQUEST = Limit(1_048_576, "invocation payload, asynchronous (Event): 1 MB", _LAMBDA_INVOKE)
LAMBDA_RESPONSE = Limit(6_291_456, "response payload of a synchronous invocation: 6 MB", _LAMBDA_INVOKE)

# ---------------------------------------------------------------- Batch
_BATCH_QUOTAS = "https://docs.aws.amazon.com/batch/latest/userguide/service_limits.html"
BATCH_ARRAY_MIN = Limit(2, "smallest array job (a single job has no arrayProperties)", _BATCH_QUOTAS)
BATCH_ARRAY_MAX = Limit(10_000, "maximum array size for array jobs", _BATCH_QUOTAS)
BATCH_SUBMIT_JOB = Limit(30_720, "maximum job payload size (for SubmitJob API operations): 30 KiB", _BATCH_QUOTAS)

ALL: tuple[Limit, ...] = (
    SFN_PAYLOAD,
    LAMBDA_SYNC_REQUEST,
    LAMBDA_ASYNC_REQUEST,
    LAMBDA_RESPONSE,
    BATCH_ARRAY_MIN,
    BATCH_ARRAY_MAX,
    BATCH_SUBMIT_JOB,
)
