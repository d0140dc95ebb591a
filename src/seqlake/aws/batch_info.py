"""What AWS Batch knows about a run's shard jobs: retried shards, the failed shard and why, vCPU time.

The state machine passes the (parent) job id. An array job's children are listed with ``ListJobs``
(``arrayJobId``), then described 100 at a time; a plain job (one shard) is its own only child.
Keys are read case-insensitively: Step Functions hands over ``DescribeJobs`` output in PascalCase
inside a failed task's cause, the API answers in camelCase.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from seqlake.base import clients

_DESCRIBE_BATCH = 100


def get(d: Any, *path: str) -> Any:
    """``d[path[0]][path[1]]...`` ignoring key case; None when absent."""
    cur = d
    for key in path:
        if not isinstance(cur, dict):
            return None
        lowered = {k.lower(): v for k, v in cur.items()}
        cur = lowered.get(key.lower())
    return cur


@dataclass(frozen=True)
class ChildJob:
    shard: int
    job_id: str
    status: str
    attempts: int
    status_reason: str | None
    container_reason: str | None
    exit_code: int | None
    log_stream: str | None
    vcpu_seconds: float

    @classmethod
    def from_description(cls, job: dict[str, Any]) -> ChildJob:
        index = get(job, "arrayProperties", "index")
        if index is None:
            # an array child's id is "<array job id>:<index>" (moto omits arrayProperties.index)
            tail = str(get(job, "jobId") or "").rpartition(":")[2]
            index = int(tail) if ":" in str(get(job, "jobId") or "") and tail.isdigit() else None
        attempts = get(job, "attempts") or []
        last = attempts[-1] if attempts else {}
        container = get(job, "container") or {}
        vcpus = _vcpus(container)
        seconds = 0.0
        for a in attempts:
            start, stop = get(a, "startedAt"), get(a, "stoppedAt")
            if isinstance(start, int | float) and isinstance(stop, int | float) and stop > start:
                seconds += (stop - start) / 1000 * vcpus
        exit_code = get(last, "container", "exitCode")
        if exit_code is None:
            exit_code = get(container, "exitCode")
        return cls(
            shard=int(index) if index is not None else 0,
            job_id=str(get(job, "jobId")),
            status=str(get(job, "status")),
            attempts=len(attempts),
            status_reason=get(last, "statusReason") or get(job, "statusReason"),
            container_reason=get(last, "container", "reason") or get(container, "reason"),
            exit_code=int(exit_code) if exit_code is not None else None,
            log_stream=get(last, "container", "logStreamName") or get(container, "logStreamName"),
            vcpu_seconds=seconds,
        )


def _vcpus(container: dict[str, Any]) -> float:
    for r in get(container, "resourceRequirements") or []:
        if str(get(r, "type")).upper() == "VCPU":
            return float(get(r, "value"))
    v = get(container, "vcpus")
    return float(v) if v else 1.0


def _describe(job_ids: list[str]) -> Iterator[dict[str, Any]]:
    batch = clients.client("batch")
    for i in range(0, len(job_ids), _DESCRIBE_BATCH):
        yield from batch.describe_jobs(jobs=job_ids[i : i + _DESCRIBE_BATCH])["jobs"]


def _list(job_id: str, status: str) -> Iterator[dict[str, Any]]:
    batch = clients.client("batch")
    token: str | None = None
    while True:
        kw: dict[str, Any] = {"arrayJobId": job_id, "jobStatus": status}
        if token:
            kw["nextToken"] = token
        page = batch.list_jobs(**kw)
        yield from page.get("jobSummaryList", [])
        token = page.get("nextToken")
        if not token:
            return


def failed_children(job_id: str) -> list[dict[str, Any]]:
    """The summaries of an array job's FAILED children, by index (listing only: no describe)."""
    return sorted(_list(job_id, "FAILED"), key=lambda s: ChildJob.from_description(s).shard)


def describe(summaries: list[dict[str, Any]]) -> list[ChildJob]:
    """Children described in full (attempts, log streams), in the order given."""
    return [ChildJob.from_description(j) for j in _describe([str(get(s, "jobId")) for s in summaries])]


def children(job_id: str, statuses: tuple[str, ...] = ("SUCCEEDED", "FAILED")) -> list[ChildJob]:
    """The shard jobs of ``job_id`` (its array children, or the job itself), by shard index."""
    parent = next(_describe([job_id]), None)
    if parent is None:
        return []
    if get(parent, "arrayProperties", "size") is None:
        return [ChildJob.from_description(parent)]
    ids = [s["jobId"] for status in statuses for s in _list(job_id, status)]
    return sorted((ChildJob.from_description(j) for j in _describe(ids)), key=lambda c: c.shard)
