"""The state machine's Lambda tasks after the children: commit, record a failure.

Each is one function over plain data, called by a thin handler in ``functions/<name>/app.py``. The
execution input is an :class:`~seqlake.aws.request.ExecutionInput` (the request's URI and digest);
every payload these steps return is a few fields, whatever the run's size. The plan step is
:mod:`seqlake.aws.plan_step` (apart: it reads FASTQ and writes no Parquet, so its Lambda carries
other layers).

- :func:`commit_step`: merge (:func:`seqlake.commit.merge.merge_run`) -> ``status.json`` and the ``runs``
  row -> one Iceberg commit per result table (:func:`seqlake.aws.catalog.commit_results`) -> the ``runs``
  partition, last (the commit point) -> the reducers' genome pieces removed (:func:`remove_joined_pieces`).
  If a table's commit fails, the tables already committed are rolled back (rows, snapshots and files), so a
  reader sees all of a run or none of it. A commit that dies without unwinding (a
  timeout, memory) is unwound by :func:`record_failure`.
- :func:`record_failure`: which state failed (the state machine says so: each ``Catch`` passes
  through a state that names it), which children, why (each failed child's one-line error from
  ``_errors/child=NNNNN.json``, else its last log line), written to ``status.json`` and the ``runs``
  table. Only failed children are listed and only the first few described, so the step's work does
  not grow with the array. Never a partition in the result tables: after a commit that died halfway
  it takes the run out of the Iceberg tables that commit reached.

Test-only: ``SEQLAKE_COMMIT_FAULT`` (:mod:`seqlake.base.faults`) makes the commit die halfway.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from seqlake.aws import batch_info, batch_reasons, catalog
from seqlake.aws.batch_info import ChildJob, get
from seqlake.aws.observability import logger
from seqlake.aws.request import ExecutionInput, RunRequest
from seqlake.aws.runs_row import record_unsuccessful, write_runs_row
from seqlake.aws.status import NEW_UPLOAD_ADVICE, RunStatus, job_sizes, previous_start, status_of, write_status
from seqlake.base import clients, faults, storage
from seqlake.base.errors import BAD_INPUT_ERRORS, EXIT_BAD_INPUT
from seqlake.base.layout import child_of
from seqlake.base.model import REDUCE_STEPS, RunState, Step
from seqlake.lake.tables import BY_NAME, RESULT_TABLES, RUNS

if TYPE_CHECKING:
    from seqlake.plan.planfile import Plan

#: failed children described in a failure's reason (the rest are counted)
REASON_CHILDREN = 3
#: characters of each child's line in the reason
REASON_LINE_CHARS = 300


# ---------------------------------------------------------------------------------------------- commit
def _shard_jobs(job_id: str | None) -> list[ChildJob]:
    if not job_id:
        return []
    try:
        return batch_info.children(job_id)
    except Exception as err:  # bookkeeping must not fail a finished run
        logger.warning("could not describe the shard jobs", extra={"job_id": job_id, "error": repr(err)})
        return []


def commit_step(execution: ExecutionInput, batch: dict[str, Any] | None, *, database: str,
                execution_arn: str | None = None, started_at: str | None = None) -> RunStatus:
    from seqlake.commit.merge import merge_run
    from seqlake.plan.planfile import load_plan

    request = execution.load()
    fault = faults.first(faults.from_env(faults.COMMIT_VAR), run_id=request.run_id)
    faults.allocate(fault)
    plan = load_plan(request.layout.plan)
    totals = merge_run(plan, reduce_here=False).to_dict()  # the reducers ran before (the state machine)
    status = status_of(request, RunState.SUCCEEDED, execution_arn, previous_start(request) or started_at)
    status.shards = plan.array_size
    status.job_sizes = job_sizes(request)
    status.parameters = {**plan.params.to_dict(), **status.parameters}
    status.totals = totals
    status.reads = _int_or_none(totals.get("reads"))
    status.bases = _int_or_none(totals.get("bases"))
    jobs = _shard_jobs((batch or {}).get("job_id"))
    status.retried_shards = [j.shard for j in jobs if j.attempts > 1]
    if jobs:
        status.vcpu_seconds = round(sum(j.vcpu_seconds for j in jobs), 3)
    status.finish()
    # the partitions are the commit point; everything they point at is written first, the report too
    status.partitions = [*RESULT_TABLES, RUNS.name]
    _render_report(status, request)
    write_status(status)
    write_runs_row(status)
    crash_after = fault.number("after_partitions", 0) if fault is not None and fault.action == "crash" else None
    commit_all_or_none(database, request.bucket, request.run_id, status.partitions, crash_after=crash_after)
    # committed: the reducers' pieces of the files joined under results/ go (a commit run again joins nothing)
    remove_joined_pieces(plan, int(totals.get("regions") or 0))
    return status


def remove_joined_pieces(plan: Plan, reducers: int) -> None:
    """After the commit point: the reducers' pieces of each sample's consensus FASTA and VCF
    (``runs/<id>/reduce/region=NNNNN.genomes``, :func:`seqlake.lake.genomes.remove_pieces`), which the commit
    joined under ``results/genomes/``. The run is committed whatever happens here: an error is logged, not
    raised (the pieces then stay until ``runs/`` expires), so that it cannot fail a committed run (which
    RecordFailure would then unwind)."""
    from seqlake.lake.genomes import remove_pieces

    if not reducers or plan.reference is None or not plan.params.allele_counts:  # no reducer wrote pieces
        return
    try:
        removed = remove_pieces(plan.layout, reducers)
    except Exception as err:
        logger.warning("could not remove the reducers' genome pieces: they stay until runs/ expires",
                       extra={"run_id": plan.run_id, "error": repr(err)})
        return
    logger.info("removed the reducers' genome pieces, joined under results/", extra={"objects": removed})


def commit_all_or_none(database: str, bucket: str, run_id: str, tables: list[str], *,
                       crash_after: int | None = None) -> None:
    """The run into every table: the Iceberg tables one commit each (rolled back together on an error), then
    the Hive tables' partitions (``runs``), last. ``crash_after`` (tests only) ends the process without
    unwinding after that many tables."""
    iceberg_tables = [t for t in tables if BY_NAME[t].is_iceberg]
    hive_tables = [t for t in tables if not BY_NAME[t].is_iceberg]

    def crash_point(table: str, committed: int) -> None:
        if crash_after is not None and committed >= crash_after:
            faults.crash()

    outcome = catalog.commit_results(database, bucket, run_id, iceberg_tables, before_table=crash_point)
    try:
        register_all_or_none(database, bucket, run_id, hive_tables,
                             crash_after=None if crash_after is None else max(0, crash_after - len(iceberg_tables)))
    except Exception:
        catalog.rollback_results(database, run_id, list(outcome.snapshots))
        raise


class ReportFailedError(RuntimeError):
    """The run's report could not be rendered: the commit fails before its commit point (the run is
    recorded FAILED with this reason by RecordFailure; a run never says SUCCEEDED without its report)."""


def _render_report(status: RunStatus, request: RunRequest, *, required: bool = True) -> None:
    """The run's report from its tables (or a failed run's page); :class:`ReportFailedError` (naming the section and
    why) when it fails and is ``required`` (a succeeding run's: not a failure's page, whose recording matters
    more)."""
    from seqlake.report import try_render_run

    outcome = try_render_run(request.out_prefix, request.run_id, status.to_dict())
    if outcome.error is not None and required:
        raise ReportFailedError(f"the run's report could not be rendered: {outcome.error}")
    status.report_uri, status.report_error = outcome.uri, outcome.error


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
        # the unwind is best effort: a cleanup that fails is logged, and the error that caused it stays the
        # one raised (a second failure must not hide the first)
        glue = clients.client("glue")
        for table in done:
            try:
                glue.batch_delete_partition(DatabaseName=database, TableName=table,
                                            PartitionsToDelete=[{"Values": [run_id]}])
            except Exception as cleanup:
                logger.warning("could not remove a partition while unwinding a failed commit",
                               extra={"table": table, "run_id": run_id, "error": repr(cleanup)})
        raise


def unregister_results(database: str, bucket: str, run_id: str) -> tuple[list[str], str | None]:
    """Take the run out of every result table (a commit that died halfway reached some): the Iceberg
    tables rolled back and the files it published that no table lists removed, a Hive table's partition
    deleted; returns the tables that had it, and why the rollback failed (None: it did not). Recording the
    failure matters more than any of this, so nothing here raises; a rollback that failed is logged as an
    error and named in the run's reason (its rows would stay queryable)."""
    removed: list[str] = []
    failed: str | None = None
    iceberg_tables = [t for t in RESULT_TABLES if BY_NAME[t].is_iceberg]
    try:
        removed += catalog.rollback_results(database, run_id, iceberg_tables)
        discarded = catalog.discard_run_files(database, bucket, run_id, iceberg_tables)
        if discarded:
            logger.info("removed the files a failed commit published", extra={"files": len(discarded)})
    except Exception as err:
        failed = f"{type(err).__name__}: {err}"
        logger.error("could not roll the failed run back out of the Iceberg tables",
                     extra={"run_id": run_id, "error": repr(err)})
    glue = clients.client("glue")
    for table in (t for t in RESULT_TABLES if not BY_NAME[t].is_iceberg):
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
    return removed, failed


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
        return _json(storage.read_bytes(uri).decode("utf-8", "replace"))
    except FileNotFoundError:
        return None
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


def _child_line(child: ChildJob, worker: dict[str, Any] | None, log_group: str | None) -> str:
    """One failed child in the reason: its own error, else its last log line, then Batch's words."""
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
    text = "; ".join(parts) or "the Batch job failed"
    text = text if len(text) <= REASON_LINE_CHARS else text[: REASON_LINE_CHARS - 1] + "…"
    # a reason that points at the stack or the account says what to check, in full
    hint = batch_reasons.advice(child.status_reason or "")
    return f"{text}; {hint}" if hint else text


def _todo_children(plan: dict[str, Any]) -> list[int] | None:
    uri = plan.get("todo_uri")
    body = _read_json(uri) if uri else None
    children = (body or {}).get("children")
    return [int(c) for c in children] if isinstance(children, list) else None


def _bad_input(child: ChildJob, record: dict[str, Any] | None) -> bool:
    """A Batch job that failed on bad input: its error record says so, or its exit code does."""
    return bool(record and record.get("error") == "BadInput") or child.exit_code == EXIT_BAD_INPUT


def _batch_failure(status: RunStatus, request: RunRequest, cause: dict[str, Any], plan: dict[str, Any],
                   log_group: str | None) -> None:
    job_id = str(get(cause, "jobId"))
    if status.failed_step == Step.INDEX_JOB:
        child = ChildJob.from_description(cause)
        status.log_stream = child.log_stream
        record = _read_json(request.layout.index_error)
        status.bad_input = _bad_input(child, record)
        status.reason = _child_line(child, record, log_group)
        return
    reducing = status.failed_step in {s.value for s in REDUCE_STEPS}
    # a reducer's array index is its key (region x sample groups + group: runs/<id>/jobs.json lists them)
    unit = "reducer" if reducing else "shard"
    todo = None if reducing else _todo_children(plan)

    def run_child(j: ChildJob) -> int:
        """Array index -> the run's child number (a re-run's array holds only some children)."""
        return todo[j.shard] if todo is not None and j.shard < len(todo) else j.shard

    failed: list[dict[str, Any]] = []
    if get(cause, "arrayProperties"):
        try:
            failed = batch_info.failed_children(job_id)
        except Exception as err:  # the listing is a detail: the failure is recorded all the same
            logger.warning("could not list the failed children", extra={"job_id": job_id, "error": repr(err)})
    if failed:
        described = batch_info.describe(failed[:REASON_CHILDREN])
        children = [run_child(ChildJob.from_description(f)) for f in failed]
    else:  # without Batch's listing, the children that recorded bad input (one LIST), else the job itself
        children = [] if reducing else sorted(
            c for c in map(child_of, storage.list_sizes(request.layout.errors_prefix)) if c is not None)
        described = [ChildJob.from_description(cause)] * max(1, min(len(children), REASON_CHILDREN))
        children = children or [run_child(described[0])]
    lines = []
    for j, c in zip(described, children, strict=False):
        record = None if reducing else _read_json(request.layout.child_error(c))
        status.bad_input = status.bad_input or _bad_input(j, record)
        lines.append(f"{unit} {c}: {_child_line(j, record, log_group)}")
    status.failed_shards = children
    status.failed_shard = status.failed_shards[0]
    status.log_stream = described[0].log_stream
    count = len(status.failed_shards)
    # a reduce step's array is the reducers (Batch's description has its size), a shard step's the children
    total = (get(cause, "arrayProperties") or {}).get("size", count) if reducing else plan.get("array_size") or count
    head = f"{count} of {total} {unit}s failed" if count > 1 else f"{unit} {status.failed_shard} failed"
    more = f"; and {count - len(lines)} more (status.json lists them)" if count > len(lines) else ""
    status.reason = (f"{head}: " + " | ".join(lines) + more) if count > 1 else lines[0].split(": ", 1)[1]


#: the job name each Batch state gives its job (``JobName`` in statemachines/pipeline.asl.json: the prefix,
#: then the execution's name; tests/aws/test_jobsize.py checks them against the ASL)
JOB_NAME_PREFIX = {Step.INDEX_JOB: "index-", Step.PROCESS_SHARDS: "shards-", Step.PROCESS_ONE_SHARD: "shard-",
                   Step.REDUCE_REGIONS: "reduce-", Step.REDUCE_ONE_REGION: "reduce-"}
#: the states a job can still be billed or started in (TerminateJob cancels the ones not started yet)
_LIVE = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")


def stop_timed_out_jobs(step: Step, execution_arn: str, queue: str) -> list[str]:
    """Terminate the Batch jobs of a state that timed out (``States.Timeout``): Step Functions stops waiting
    for them but leaves them running and billing. Finds them by their job name in the queue (the error has
    no job id) and terminates each live one; an array parent's children go with it ("terminating an array
    parent job terminates all of its child jobs"). The ids terminated."""
    name = JOB_NAME_PREFIX[step] + execution_arn.rsplit(":", 1)[-1]
    batch = clients.client("batch")
    stopped: list[str] = []
    pages = batch.get_paginator("list_jobs").paginate(
        jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
    for page in pages:
        for job in page["jobSummaryList"]:
            if job.get("status") in _LIVE and "arrayIndex" not in (job.get("arrayProperties") or {}):
                batch.terminate_job(jobId=job["jobId"], reason=f"seqlake: the {step.value} step timed out")
                stopped.append(str(job["jobId"]))
    return stopped


def _timed_out(status: RunStatus, step: Step, execution_arn: str | None, queue: str | None) -> None:
    """A Batch state that timed out: its jobs terminated, and the reason says so."""
    stopped: list[str] = []
    note = "no job queue configured: its Batch jobs were not stopped"
    if execution_arn and queue:
        try:
            stopped = stop_timed_out_jobs(step, execution_arn, queue)
            note = (f"its Batch job(s) {', '.join(stopped)} terminated" if stopped
                    else "no Batch job of it was still running")
        except Exception as err:  # recording the failure matters more; the reason says what is left running
            logger.warning("could not terminate the timed-out step's jobs", extra={"error": repr(err)})
            note = f"terminating its Batch jobs failed ({err}): stop them by hand (aws batch terminate-job)"
    status.reason = (f"the {step.value} step timed out (the state's TimeoutSecondsPath, BatchStepTimeoutSeconds: "
                     f"queueing included); {note}")
    status.stopped_jobs = stopped


def record_failure(execution: ExecutionInput, plan: dict[str, Any] | None, failed_step: str | None,
                   error: dict[str, Any], *, database: str, execution_arn: str | None = None,
                   started_at: str | None = None, log_group: str | None = None,
                   job_queue: str | None = None) -> RunStatus:
    plan = plan or {}
    cause = _json(error.get("Cause"))
    request = execution.load()
    status = status_of(request, RunState.FAILED, execution_arn, previous_start(request) or started_at)
    status.error = str(error.get("Error") or "unknown")
    step = Step(failed_step) if failed_step in set(Step) else None
    status.failed_step = step.value if step else str(failed_step or "unknown")
    status.shards = plan.get("array_size") or None
    status.job_sizes = job_sizes(request)
    if step is not None and step.is_batch and status.error == "States.Timeout":
        _timed_out(status, step, execution_arn, job_queue)
    elif step is not None and step.is_batch and get(cause, "jobId"):
        _batch_failure(status, request, cause, plan, log_group)
    else:
        # a Lambda task: the cause is {"errorMessage", "errorType", ...}; BadInputError's message is
        # the one line users see (file, line, problem)
        status.reason = str(cause.get("errorMessage") or error.get("Cause") or status.error)
        hint = batch_reasons.lambda_advice(status.error, status.failed_step)
        if hint is not None:
            status.reason = f"{hint}: {status.reason}"
        status.log_stream = cause.get("logStreamName")
        status.bad_input = status.error in BAD_INPUT_ERRORS
    if status.bad_input:
        status.reason = f"{status.reason}; {NEW_UPLOAD_ADVICE}"
    status.finish()
    if step is Step.COMMIT:
        _, rollback_failed = unregister_results(database, request.bucket, request.run_id)
        if rollback_failed is not None:
            status.reason = (f"{status.reason}; the tables the commit had reached could not be rolled back "
                             f"({rollback_failed}): this run's rows may still be queryable")
    _render_report(status, request, required=False)
    record_unsuccessful(status, database)
    return status

