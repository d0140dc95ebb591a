"""``runs/<run_id>/status.json`` and what the run's row in the ``runs`` table holds.

Both are written by the commit step (state ``SUCCEEDED``), by the failure step (state ``FAILED``) or
by the start function for an input it refuses (state ``REJECTED``, no execution) from one
:class:`RunStatus`, so what users read in the bucket and what they query agree. The row is one
Parquet file in the run's ``runs`` partition (:meth:`seqlake.base.layout.RunLayout.result_file`); rewriting
it (a re-run of the commit, or a failed run finished by a re-run) replaces it. The states are
:class:`seqlake.base.model.RunState`. The row is written by :mod:`seqlake.aws.runs_row`: this module needs
no pyarrow, so the plan Lambda, which marks a run RUNNING here, does without it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from seqlake import __version__
from seqlake.base import cost, storage
from seqlake.base.layout import RunLayout
from seqlake.base.model import RunState

if TYPE_CHECKING:
    from seqlake.aws.request import RunRequest


@dataclass
class RunStatus:
    run_id: str
    state: str
    bucket: str
    samples: list[str]
    inputs: list[dict[str, Any]]
    parameters: dict[str, Any] = field(default_factory=dict)
    reference: str | None = None
    samplesheet: str | None = None
    execution_arn: str | None = None
    plan_uri: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    shards: int | None = None
    retried_shards: list[int] = field(default_factory=list)
    failed_step: str | None = None
    failed_shard: int | None = None
    #: every child that failed for good (``failed_shard`` is the first)
    failed_shards: list[int] = field(default_factory=list)
    #: the Batch jobs a timed-out step left running, which the failure step terminated
    stopped_jobs: list[str] = field(default_factory=list)
    #: what the plan asked Batch for, per kind of job (index, child, reducer: vCPUs, memory, timeout, expected
    #: seconds, why) and the reducers' count: ``runs/<id>/jobs.json`` without every reducer's key
    job_sizes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    reason: str | None = None
    #: the run failed because an input is wrong: a retry or a re-run reads the same bytes, a new upload can help
    bad_input: bool = False
    log_stream: str | None = None
    reads: int | None = None
    bases: int | None = None
    totals: dict[str, Any] = field(default_factory=dict)
    vcpu_seconds: float | None = None
    cost_estimate_usd: float | None = None
    partitions: list[str] = field(default_factory=list)
    #: the run's report, or why it could not be rendered (which never fails the run)
    report_uri: str | None = None
    report_error: str | None = None
    software_version: str = __version__

    @property
    def status_uri(self) -> str:
        return status_uri(self.bucket, self.run_id)

    def finish(self, now: datetime | None = None) -> None:
        """Set ``finished_at``, the duration and the cost estimate."""
        end = now or datetime.now(UTC)
        self.finished_at = end.isoformat()
        if self.started_at:
            self.duration_s = round((end - parse_time(self.started_at)).total_seconds(), 3)
        if self.vcpu_seconds is not None:
            self.cost_estimate_usd = cost.compute_cost_usd(self.vcpu_seconds)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def runs_row(self) -> dict[str, Any]:
        """The ``runs`` table row (column names and types of :data:`seqlake.lake.tables.RUNS`)."""
        params = {**self.parameters, "reference": self.reference, "shards": self.shards,
                  "samplesheet": self.samplesheet}
        return {
            "state": self.state,
            "samples": ",".join(self.samples),
            "inputs": json.dumps(self.inputs, sort_keys=True),
            "parameters": json.dumps(params, sort_keys=True),
            "reference": self.reference,
            "software_version": self.software_version,
            **software_columns(self.totals),
            "started_at": parse_time(self.started_at) if self.started_at else None,
            "finished_at": parse_time(self.finished_at) if self.finished_at else None,
            "duration_s": self.duration_s,
            "shards": self.shards,
            "retried_shards": len(self.retried_shards),
            "failed_shard": self.failed_shard,
            "reason": self.reason,
            "reads": self.reads,
            "bases": self.bases,
            "cost_estimate_usd": self.cost_estimate_usd,
            "report_uri": self.report_uri,
        }


def software_columns(totals: dict[str, Any]) -> dict[str, Any]:
    """The ``runs`` columns of the libraries and reference a committed run used (from its totals)."""
    software, md5 = totals.get("software") or {}, totals.get("reference_md5")
    return {"cutadapt_version": software.get("cutadapt"), "mappy_version": software.get("mappy"),
            "reference_md5": json.dumps(md5, sort_keys=True) if md5 else None}


#: the end of a bad-input failure's reason: what starts the run again
NEW_UPLOAD_ADVICE = "fix the file and upload it again: a new upload starts a new run (a re-run reads the same bytes)"


def failed_on_bad_input(status: dict[str, Any]) -> bool:
    """Whether a ``status.json`` document records a failure caused by the input (a REJECTED input always is)."""
    return bool(status.get("bad_input")) or status.get("state") == RunState.REJECTED.value


def parse_time(text: str) -> datetime:
    """ISO 8601 as Step Functions writes it (``2026-11-29T16:30:05.123Z``) -> aware datetime."""
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def status_uri(bucket: str, run_id: str) -> str:
    return RunLayout.in_bucket(bucket, run_id).status


def write_status(status: RunStatus) -> str:
    body = json.dumps(status.to_dict(), indent=2, sort_keys=True, default=str).encode()
    storage.write_bytes(status.status_uri, body)
    return status.status_uri


def status_of(request: RunRequest, state: RunState, execution_arn: str | None,
              started_at: str | None) -> RunStatus:
    """A step's status of the run: what the request says, in ``state``."""
    return RunStatus(
        run_id=request.run_id, state=state.value, bucket=request.bucket,
        samples=[s.name for s in request.samples], inputs=list(request.inputs),
        parameters=dict(request.parameters), reference=request.reference, samplesheet=request.samplesheet,
        execution_arn=execution_arn, plan_uri=request.layout.plan, started_at=started_at)


def job_sizes(request: RunRequest) -> dict[str, Any]:
    """The plan's job sizes for ``status.json`` (empty before the plan, or for a run planned before them)."""
    try:
        jobs = json.loads(storage.read_bytes(request.layout.jobs))
    except (FileNotFoundError, ValueError):
        return {}
    return {**{k: jobs.get(k) for k in ("index", "child", "reducer")}, "reducers": len(jobs.get("reducers") or [])}


def previous_start(request: RunRequest) -> str | None:
    """When the run first started (a re-run keeps it, so the run's duration is the whole story)."""
    try:
        previous = json.loads(storage.read_bytes(request.layout.status))
    except (FileNotFoundError, ValueError):
        return None
    started = previous.get("started_at")
    return started if isinstance(started, str) else None
