"""How many threads a process of a run may use: the vCPUs its job was given.

AWS Batch does not tell a container how many vCPUs its job asked for (the container sees every CPU of
the instance), so the job definition passes them as ``SEQLAKE_THREADS``: the shard worker's
``WorkerVcpus``, the index job's ``IndexJobVcpus``. A Lambda function sees the vCPUs its memory size
buys as its CPU affinity.
"""

from __future__ import annotations

import os

#: the environment variable holding the vCPUs a process was given (set by the job definitions and by
#: ``seqlake process --threads``)
THREADS_VAR = "SEQLAKE_THREADS"


def threads_from_env(default: int = 1) -> int:
    """``$SEQLAKE_THREADS`` when set (at least 1), else ``default``."""
    value = os.environ.get(THREADS_VAR, "").strip()
    if not value:
        return max(1, default)
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"{THREADS_VAR}={value!r} is not a whole number of threads") from None


def available_cpus() -> int:
    """The CPUs this process may be scheduled on (its affinity: in Lambda, the vCPUs of its memory size)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
