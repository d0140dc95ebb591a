"""AWS's limits that the app must stay inside, each with its documented number and where it is written.

The app's home of these numbers: it plans within them (the array size). The local cloud enforces the AWS limits
among them from its own copy (``localcloud.limits``, held equal to these by
``tests/local/test_component_contract.py``), so a run that would break on AWS breaks locally too, with the error AWS
gives. Dependency-free: any layer may import it.
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
#: a job's attempt timeout (attemptDurationSeconds, in the job definition or SubmitJob's override): at least
#: 60 s; an array job's children each get it, and a job terminated by it is not retried
BATCH_TIMEOUT_MIN = Limit(60, "the minimum value for the timeout is 60 seconds",
                          "https://docs.aws.amazon.com/batch/latest/userguide/job_timeouts.html")
BATCH_SUBMIT_JOB = Limit(30_720, "maximum job payload size (for SubmitJob API operations): 30 KiB", _BATCH_QUOTAS)

# ---------------------------------------------------------------- SQS (the start function's settle queue)
_SQS_GUIDE = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/"
SQS_DEDUPLICATION_SECONDS = Limit(
    300, "a FIFO queue drops a message whose deduplication ID it saw in the last 5 minutes",
    _SQS_GUIDE + "using-messagededuplicationid-property.html",
)
SQS_MAX_DELAY_SECONDS = Limit(
    900, "longest DelaySeconds of a queue (15 minutes)",
    _SQS_GUIDE + "sqs-delay-queues.html",
)

# ---------------------------------------------------------------- S3 copies
_S3_COPY = "https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html"
#: the largest object one CopyObject copies; a larger one is copied in parts (UploadPartCopy)
S3_COPY_OBJECT = Limit(5 << 30, "you can create a copy of your object up to 5 GB in a single atomic action",
                       _S3_COPY)
_S3_MULTIPART = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html"
#: a multipart upload's parts (UploadPartCopy's too): the most parts of one object
S3_MULTIPART_PARTS = Limit(10_000, "maximum number of parts per upload", _S3_MULTIPART)

# ---------------------------------------------------------------- S3 latency of the scale tests
#: per-request latency the scale bench and tests give the local S3 (``SEQLAKE_LOCAL_S3_LATENCY_MS``):
#: "when you make small requests (for example, less than 512 KB), median latencies are often in the
#: range of tens of milliseconds"
S3_SCALE_LATENCY_MS = Limit(
    20,
    "median latency of a small S3 request, in milliseconds",
    "https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/"
    "timeouts-and-retries-for-latency-sensitive-applications.html",
)

# ---------------------------------------------------------------- a Batch child's own budget
#: what each of a child's own budgets stands under (the quote, then where it is said)
_BATCH_JOB_MEMORY = (
    "MEMORY: the hard limit (in MiB) of memory to present to the container; if the container attempts to "
    "exceed it, the container is killed",
    "https://docs.aws.amazon.com/batch/latest/APIReference/API_ResourceRequirement.html",
)
#: allele count rows (one per sample and touched reference position, ~264 bytes each while counted) a child
#: holds before it spills them, sorted, to a run on its local disk (:mod:`seqlake.lake.spill`): with the
#: batch being added and a fold's copies, the counts then take ~0.4 GB at their peak, far under the child
#: job's memory (7,680 MiB by default), whatever the genome and the shard; a hard limit: a job over its
#: memory is killed
CHILD_ALLELE_ROWS = Limit(1 << 19, *_BATCH_JOB_MEMORY)
#: positions one counting of alignment rows spans at most (:meth:`seqlake.lake.pileup.AlleleAccumulator.add`):
#: a chunk whose rows reach more is counted in pieces of whole pairs; its histogram costs ~384 bytes per
#: position (~100 MB), where a 4 MB chunk's could reach 3 M positions (1.2 GB)
CHILD_BATCH_BASES = Limit(1 << 18, *_BATCH_JOB_MEMORY)
#: rows of merged allele counts a child makes at once when it writes its positions object (the sorted runs'
#: rows of one window of keys, added up; one record batch of a region's stream): ~60 MB in Arrow
CHILD_MERGE_ROWS = Limit(1 << 18, *_BATCH_JOB_MEMORY)

ALL: tuple[Limit, ...] = (
    SFN_PAYLOAD,
    LAMBDA_SYNC_REQUEST,
    LAMBDA_ASYNC_REQUEST,
    LAMBDA_RESPONSE,
    BATCH_ARRAY_MIN,
    BATCH_ARRAY_MAX,
    BATCH_TIMEOUT_MIN,
    BATCH_SUBMIT_JOB,
    SQS_DEDUPLICATION_SECONDS,
    SQS_MAX_DELAY_SECONDS,
    S3_COPY_OBJECT,
    S3_MULTIPART_PARTS,
    S3_SCALE_LATENCY_MS,
    CHILD_ALLELE_ROWS,
    CHILD_BATCH_BASES,
    CHILD_MERGE_ROWS,
)
