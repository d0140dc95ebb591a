"""What to check when a Batch job ended with a status reason that points at the stack, not at the input.

The job queue cancels a job that sits at its head with one of :data:`CANCELLED_WHEN_STUCK`'s reasons
for longer than the template allows (``JobStateTimeLimitActions``); Batch then reports
``Canceled by JobStateTimeLimit action due to reason: <reason>``. The same codes lead the status
reason while the job waits (``CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Service cannot fulfill ...``).
:func:`advice` turns such a reason into the one sentence a failed run's record should carry.
"""

from __future__ import annotations

#: the reasons the job queue cancels a stuck job for (``template.yaml`` ``JobStateTimeLimitActions``),
#: each with what to check
CANCELLED_WHEN_STUCK: dict[str, str] = {
    "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT": (
        "no instance type of the compute environments can hold one worker: compare WorkerVcpus and "
        "WorkerMemoryMiB with the InstanceTypes parameter (ECS keeps some of each instance's memory)"
    ),
    "MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE": (
        "the job needs more vCPUs than the compute environments may run: raise SpotMaxVcpus or "
        "OnDemandMaxVcpus to at least WorkerVcpus"
    ),
    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY": (
        "EC2 had no capacity for the InstanceTypes in the given subnets while the job waited: check the "
        "account's EC2 vCPU quotas (Service Quotas, 'All Standard (A, C, D, H, I, M, R, T, Z) Spot "
        "Instance Requests' and the On-Demand one; 0 on new accounts is common), add instance families "
        "or subnets in more Availability Zones, or raise OnDemandMaxVcpus"
    ),
}
#: Batch's status reason after a JobStateTimeLimitActions cancel, before the reason code
CANCELLED_PREFIX = "Canceled by JobStateTimeLimit action due to reason: "
#: Batch's status reason of an attempt that ran past AttemptDurationSeconds
ATTEMPT_TIMED_OUT = "Job attempt duration exceeded timeout"
#: the reason Batch (ECS) gives a container the kernel killed for using more than its MEMORY (exit code 137)
BATCH_OUT_OF_MEMORY = "OutOfMemoryError: Container killed due to memory usage"
#: the error type of a Lambda invocation that used more than its function's MemorySize
LAMBDA_OUT_OF_MEMORY = "Runtime.OutOfMemory"


def advice(status_reason: str) -> str | None:
    """What to check for a Batch status reason that names a stack or account problem, else None."""
    for code, text in CANCELLED_WHEN_STUCK.items():
        if code in status_reason:
            waited = "cancelled after waiting at the head of the job queue" if CANCELLED_PREFIX in status_reason \
                else "waiting at the head of the job queue"
            return f"Batch job {waited} ({code}): {text}"
    if "MISCONFIGURATION:" in status_reason:
        return (f"Batch reports a misconfiguration ({status_reason.strip()}): check the compute environments "
                "(instance types, subnets, security groups, launch template) in the Batch console")
    if status_reason.startswith(BATCH_OUT_OF_MEMORY):
        # the same words for every kind of job: the reason's line says whose it is (a shard's, "region N")
        return ("a Batch job used more memory than its job definition gives it: raise WorkerMemoryMiB for a "
                "shard, ReducerMemoryMiB (or lower the run parameter region_size) for a region's reducer, "
                "IndexJobMemoryMiB for the index job (docs/DEPLOY.md, Compute)")
    if status_reason.startswith(ATTEMPT_TIMED_OUT):
        return ("a shard ran longer than AttemptDurationSeconds: raise it, or lower ReadsPerShard so that "
                "each shard has less to do")
    return None


def lambda_advice(error_type: str, step: str) -> str | None:
    """What to check for a Lambda step's error type that names a limit, else None."""
    if error_type == LAMBDA_OUT_OF_MEMORY:
        return f"the {step} function used more memory than its MemorySize (template.yaml)"
    return None
