"""The state machine's Lambda tasks: plan, commit, record a failure.

Each is one function over plain data, called by a thin handler in ``functions/<name>/app.py``:

- :func:`plan_step` writes ``runs/<id>/plan.json`` (:func:`seqlake.plan.make_plan`) and returns only
  its URI and the array size, so state payloads and Batch container overrides stay small. Inputs
  larger than ``lambda_index_max_bytes`` are not read here: the step writes ``runs/<id>/request.json``
  and answers ``needs_index``; the Batch index job (:mod:`seqlake.aws.index_job`) plans them and the
  state machine calls this step again, which then finds the plan and returns it (idempotent).
- :func:`commit_step`: merge (:func:`seqlake.merge.merge_run`) -> ``status.json`` and the ``runs``
  row -> Glue partitions, last. If registering fails halfway, the partitions already made are
  removed again, so a reader sees all of a run or none of it. A commit that dies without unwinding
  (a timeout, memory) is unwound by :func:`record_failure`.
- :func:`record_failure`: which step, which shard, why (the worker's one-line error from
  ``_errors/shard=NNNNN.json``, else the job's reasons and the last log line), which log stream;
  written to ``status.json`` and the ``runs`` table. Never a partition in the result tables: after a
  commit that died halfway it removes the ones that commit registered.

Test-only: ``SEQLAKE_COMMIT_FAULT`` (:mod:`seqlake.aws.faults`) makes the commit die halfway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from seqlake import storage
from seqlake.aws import batch_info, catalog, clients, faults
from seqlake.aws.batch_info import ChildJob, get
from seqlake.aws.observability import logger
from seqlake.aws.request import RunRequest
from seqlake.aws.status import FAILED, SUCCEEDED, RunStatus, record_unsuccessful, write_runs_row, write_status
from seqlake.params import Params
from seqlake.tables import RESULT_TABLES, RUNS


@dataclass(frozen=True)
class PlanSummary:
    plan_uri: str
    array_size: int
    needs_index: bool = False
    request_uri: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"plan_uri": self.plan_uri, "array_size": self.array_size, "needs_index": self.needs_index,
                "request_uri": self.request_uri}


def run_prefix(request: RunRequest) -> str:
    return f"{request.out_prefix}/runs/{request.run_id}/"


def plan_uri_of(request: RunRequest) -> str:
    return run_prefix(request) + "plan.json"


def request_uri_of(request: RunRequest) -> str:
    return run_prefix(request) + "request.json"


def index_error_uri(request: RunRequest) -> str:
    return run_prefix(request) + "index/_error.json"


def params_for(request: RunRequest, reads_per_shard: int | None) -> Params:
    d = dict(request.parameters)
    if reads_per_shard is not None:
        d.setdefault("reads_per_shard", reads_per_shard)
    return Params.from_dict(d)


def input_bytes(request: RunRequest) -> int:
    sheet = request.samplesheet
    return sum(int(i.get("size") or 0) for i in request.inputs if i.get("uri") != sheet)


def make_run_plan(request: RunRequest, params: Params) -> PlanSummary:
    """Plan the run with the core planner (also what the Batch index job runs)."""
    from seqlake.plan import SampleInputs, make_plan

    samples = [SampleInputs(s.sample, s.r1, s.r2) for s in request.samples]
    plan = make_plan(request.run_id, samples, out_prefix=request.out_prefix, reference=request.reference,
                     params=params)
    return PlanSummary(plan.plan_uri, plan.array_size)


def plan_step(request: RunRequest, *, reads_per_shard: int | None = None,
              lambda_index_max_bytes: int | None = None, execution_arn: str | None = None,
              started_at: str | None = None) -> PlanSummary:
    """Plan the run (or defer it to the index job) and mark it RUNNING in ``status.json``."""
    summary = _plan(request, reads_per_shard, lambda_index_max_bytes)
    status = _base_status(request, "RUNNING", execution_arn, started_at, summary.plan_uri)
    status.shards = summary.array_size or None
    write_status(status)
    return summary


def _plan(request: RunRequest, reads_per_shard: int | None, lambda_index_max_bytes: int | None) -> PlanSummary:
    from seqlake.plan import load_plan

    uri = plan_uri_of(request)
    if storage.exists(uri):
        # a retry, or the call after the index job: the plan is already there
        return PlanSummary(uri, load_plan(uri).array_size)
    params = params_for(request, reads_per_shard)
    total = input_bytes(request)
    if lambda_index_max_bytes is not None and total > lambda_index_max_bytes:
        body = {"request": request.to_dict(), "params": params.to_dict()}
        storage.write_bytes(request_uri_of(request), json.dumps(body, sort_keys=True).encode())
        logger.info("inputs too large for the plan Lambda: planning in a Batch job",
                    extra={"input_bytes": total, "limit": lambda_index_max_bytes})
        return PlanSummary(uri, 0, needs_index=True, request_uri=request_uri_of(request))
    return make_run_plan(request, params)


# ---------------------------------------------------------------------------------------------- commit
def _base_status(request: RunRequest, state: str, execution_arn: str | None, started_at: str | None,
                 plan_uri: str | None) -> RunStatus:
    return RunStatus(
        run_id=request.run_id, state=state, bucket=request.bucket,
        samples=[s.sample for s in request.samples], inputs=list(request.inputs),
        parameters=dict(request.parameters), reference=request.reference, samplesheet=request.samplesheet,
        execution_arn=execution_arn, plan_uri=plan_uri, started_at=started_at)


def _shard_jobs(job_id: str | None) -> list[ChildJob]:
    if not job_id:
        return []
    try:
        return batch_info.children(job_id)
    except Exception as err:  # bookkeeping must not fail a finished run
        logger.warning("could not describe the shard jobs", extra={"job_id": job_id, "error": repr(err)})
        return []


def commit_step(request: RunRequest, plan: dict[str, Any], batch: dict[str, Any] | None, *,
                database: str, execution_arn: str | None = None, started_at: str | None = None) -> RunStatus:
    from seqlake.merge import merge_run
    from seqlake.plan import load_plan

    loaded = load_plan(plan["plan_uri"])
    totals = merge_run(loaded).to_dict()
    status = _base_status(request, SUCCEEDED, execution_arn, started_at, plan["plan_uri"])
    status.shards = loaded.array_size
    status.parameters = {**loaded.params.to_dict(), **status.parameters}
    status.totals = totals
    status.reads = _int_or_none(totals.get("reads"))
    status.bases = _int_or_none(totals.get("bases"))
    jobs = _shard_jobs((batch or {}).get("job_id"))
    status.retried_shards = [j.shard for j in jobs if j.attempts > 1]
    if jobs:
        status.vcpu_seconds = round(sum(j.vcpu_seconds for j in jobs), 3)
    status.finish()
    # the partitions are the commit point; everything they point at is written first
    status.partitions = [*RESULT_TABLES, RUNS.name]
    write_status(status)
    write_runs_row(status)
    fault = faults.first(faults.from_env(faults.COMMIT_VAR), run_id=request.run_id)
    crash_after = fault.number("after_partitions", 0) if fault is not None else None
    register_all_or_none(database, request.bucket, request.run_id, status.partitions, crash_after=crash_after)
    return status


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) else None


def register_all_or_none(database: str, bucket: str, run_id: str, tables: list[str], *,
                         crash_after: int | None = None) -> None:
    """Register ``tables``' partitions of the run; on an error, delete those made. ``crash_after`` (tests
    only) ends the process without unwinding after that many tables."""
    done: list[str] = []
    try:
        for table in tables:
            if crash_after is not None and len(done) >= crash_after:
                faults.crash()
            done += catalog.register_run(database, bucket, run_id, [table])
    except Exception:
        glue = clients.client("glue")
        for table in done:
            glue.batch_delete_partition(DatabaseName=database, TableName=table,
                                        PartitionsToDelete=[{"Values": [run_id]}])
        raise


def unregister_results(database: str, run_id: str) -> list[str]:
    """Delete the run's partitions from every result table (a commit that died halfway left some);
    returns the tables that had one. Best effort: recording the failure matters more."""
    glue = clients.client("glue")
    removed: list[str] = []
    for table in RESULT_TABLES:
        try:
            r = glue.batch_delete_partition(DatabaseName=database, TableName=table,
                                            PartitionsToDelete=[{"Values": [run_id]}])
        except Exception as err:
            logger.warning("could not remove a partition of the failed run",
                           extra={"table": table, "error": repr(err)})
            continue
        if not r.get("Errors"):
            removed.append(table)
    if removed:
        logger.info("removed the partitions a failed commit left", extra={"tables": removed})
    return removed


# --------------------------------------------------------------------------------------------- failure
def _json(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        v = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _read_json(uri: str) -> dict[str, Any] | None:
    try:
        if not storage.exists(uri):
            return None
        return _json(storage.read_bytes(uri).decode("utf-8", "replace"))
    except Exception as err:  # a missing detail must not hide the failure itself
        logger.warning("could not read", extra={"uri": uri, "error": repr(err)})
        return None


def last_log_line(log_group: str | None, stream: str | None) -> str | None:
    """The last non-empty line the worker printed (its one-line error goes last to stderr)."""
    if not log_group or not stream:
        return None
    logs = clients.client("logs")
    try:
        events = logs.get_log_events(
            logGroupName=log_group, logStreamName=stream, limit=20, startFromHead=False)["events"]
    except Exception as err:
        code = str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))
        if code.startswith("AccessDenied"):
            # a grant that matches nothing (e.g. a log group ARN with its ":*" suffix) lands here:
            # say which resource the record-failure role must be able to read
            arn = f"arn:{logs.meta.partition}:logs:{logs.meta.region_name}:*:log-group:{log_group}:log-stream:{stream}"
            logger.warning("AccessDenied: this function's role may not call logs:GetLogEvents on %s, so the "
                           "worker's last log line is not in the failure reason", arn,
                           extra={"log_stream_arn": arn, "error": str(err)})
        else:
            logger.warning("could not read the worker log", extra={"stream": stream, "error": repr(err)})
        return None
    lines = [e["message"].strip() for e in events if e.get("message", "").strip()]
    return lines[-1] if lines else None


def _failed_step(error: dict[str, Any], cause: dict[str, Any], plan: dict[str, Any],
                 batch: dict[str, Any]) -> str:
    job_name = str(get(cause, "jobName") or "")
    if get(cause, "jobId"):
        return "IndexJob" if job_name.startswith("index-") else "ProcessShards"
    if not plan.get("plan_uri") or (plan.get("array_size") == 0 and not plan.get("needs_index")):
        return "Plan"
    if batch.get("job_id") and batch.get("status") == "SUCCEEDED":
        return "Commit"
    return str(error.get("Error") or "unknown")


def _worker_error(plan_uri: str, shard: int | None) -> dict[str, Any] | None:
    """The worker's own record of why shard ``shard`` failed (``_errors/shard=NNNNN.json``); with no
    shard known (Batch's child listing unavailable), the lowest-numbered error file."""
    from seqlake.worker_main import error_uri

    staging = plan_uri.rsplit("/", 1)[0] + "/staging/"
    if shard is not None:
        return _read_json(error_uri(staging, shard))
    try:
        found = sorted(storage.list_uris(storage.join(staging, "_errors") + "/"))
    except Exception as err:  # a missing detail must not hide the failure itself
        logger.warning("could not list worker errors", extra={"error": repr(err)})
        return None
    return _read_json(found[0]) if found else None


def _batch_failure(status: RunStatus, request: RunRequest, cause: dict[str, Any], plan_uri: str | None,
                   log_group: str | None) -> None:
    job_id = str(get(cause, "jobId"))
    every = _shard_jobs(job_id)
    jobs = [j for j in every if j.status == "FAILED"]
    status.retried_shards = [j.shard for j in every if j.attempts > 1]
    child = jobs[0] if jobs else ChildJob.from_description(cause)
    worker: dict[str, Any] | None = None
    if status.failed_step == "IndexJob":
        worker = _read_json(index_error_uri(request))
    elif plan_uri:
        worker = _worker_error(plan_uri, child.shard if jobs else None)
    if status.failed_step == "ProcessShards":
        status.failed_shard = child.shard if jobs or not worker else int(worker.get("shard", child.shard))
    status.log_stream = child.log_stream
    parts = []
    if worker and worker.get("text"):
        parts.append(str(worker["text"]))
    else:
        line = last_log_line(log_group, child.log_stream)
        if line:
            parts.append(line)
    if child.exit_code is not None:
        parts.append(f"exit code {child.exit_code}")
    parts += [r for r in (child.status_reason, child.container_reason) if r]
    status.reason = "; ".join(parts) or str(get(cause, "statusReason") or "the Batch job failed")
    status.shards = status.shards or (len(every) or None)


def record_failure(request: RunRequest, plan: dict[str, Any] | None, batch: dict[str, Any] | None,
                   error: dict[str, Any], *, database: str, execution_arn: str | None = None,
                   started_at: str | None = None, log_group: str | None = None) -> RunStatus:
    plan = plan or {}
    batch = batch or {}
    cause = _json(error.get("Cause"))
    plan_uri = plan.get("plan_uri")
    status = _base_status(request, FAILED, execution_arn, started_at, plan_uri)
    status.error = str(error.get("Error") or "unknown")
    status.failed_step = _failed_step(error, cause, plan, batch)
    status.shards = plan.get("array_size") or None
    if get(cause, "jobId"):
        _batch_failure(status, request, cause, plan_uri, log_group)
    else:
        # a Lambda task: the cause is {"errorMessage", "errorType", ...}; BadInputError's message is
        # the one line users see (file, line, problem)
        status.reason = str(cause.get("errorMessage") or error.get("Cause") or status.error)
        status.log_stream = cause.get("logStreamName")
    status.finish()
    if status.failed_step == "Commit":
        unregister_results(database, request.run_id)
    record_unsuccessful(status, database)
    return status
