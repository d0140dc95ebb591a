"""The plan step: validate the inputs, plan the run, list the children this execution runs.

:func:`plan_step` writes ``plan.json`` (:func:`seqlake.plan.planner.make_plan`) and the execution's todo list
(the children it runs), and returns their URIs and the array size. Inputs larger than
``lambda_index_max_bytes`` are not read here, nor is a reference indexed (this Lambda carries no aligner):
then the step writes ``index/job.json`` and answers ``needs_index``; the Batch index job
(:mod:`seqlake.aws.index_job`) builds the reference's index if it is not stored yet
(:mod:`seqlake.plan.reference`, once per reference and preset) and plans the run, and the state
machine calls this step again, which then finds the plan. Finding the plan is also how a re-run
of a failed run works (an execution started again with the run's input, docs/DEPLOY.md): the todo
list then holds only the children without a finished manifest, so only they compute again.

It reads FASTQ and writes JSON, never Parquet: its Lambda carries no pyarrow (template.yaml).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from seqlake.aws.request import ExecutionInput, RunRequest
from seqlake.aws.status import job_sizes, previous_start, status_of, write_status
from seqlake.base import storage
from seqlake.base.errors import SeqlakeError
from seqlake.base.layout import RunLayout, child_of
from seqlake.base.model import RunState
from seqlake.base.params import Params
from seqlake.plan.childplan import todo_bytes
from seqlake.plan.planfile import Plan, load_plan
from seqlake.plan.planner import make_plan
from seqlake.plan.reference import ReferencePin, index_ready, index_store, load_contigs, pin_reference
from seqlake.plan.sizing import (
    Compute,
    JobPlan,
    JobSize,
    child_reads,
    child_size,
    index_job_size,
    reducer_size,
)


def _logger() -> Any:
    """The Powertools logger, imported when a message is logged: the index job imports this module in the
    worker image, which carries no Powertools (it runs the planning functions, which log nothing)."""
    from seqlake.aws.observability import logger

    return logger


@dataclass(frozen=True)
class PlanSummary:
    """The plan step's answer (``$.plan`` in the state machine)."""

    plan_uri: str
    array_size: int
    needs_index: bool = False
    #: what the Batch index job reads (``needs_index``)
    index_job_uri: str | None = None
    #: the children this execution runs (``SEQLAKE_TODO_URI`` of the array job)
    todo_uri: str | None = None
    #: bytes of input the run reads (a metric)
    input_bytes: int = 0
    #: each kind of job's vCPUs, memory and timeout (``$.plan.jobs``: :meth:`seqlake.plan.sizing.JobPlan.overrides`)
    jobs: dict[str, Any] = field(default_factory=lambda: JobPlan().overrides())

    def to_dict(self) -> dict[str, Any]:
        return {"plan_uri": self.plan_uri, "array_size": self.array_size, "needs_index": self.needs_index,
                "index_job_uri": self.index_job_uri, "todo_uri": self.todo_uri, "input_bytes": self.input_bytes,
                "jobs": self.jobs}


def params_for(request: RunRequest, reads_per_shard: int | None) -> Params:
    d = dict(request.parameters)
    if reads_per_shard is not None:
        d.setdefault("reads_per_shard", reads_per_shard)
    return Params.from_dict(d)


def input_bytes(request: RunRequest) -> int:
    sheet = request.samplesheet
    return sum(int(i.get("size") or 0) for i in request.inputs if i.get("uri") != sheet)


def pinned_reference(request: RunRequest, params: Params) -> ReferencePin | None:
    """The run's reference as it is now, its index stored in the run's lake (None: no alignment)."""
    if not request.reference:
        return None
    return pin_reference(request.reference, params.preset, index_store(request.layout.lake.root))


def known_inputs(request: RunRequest) -> dict[str, storage.ObjectInfo]:
    """The inputs' sizes and ETags as the start step listed them: the planner does not ask S3 again."""
    return {str(i["uri"]): storage.ObjectInfo(size=int(i["size"]), etag=str(i["etag"]))
            for i in request.inputs if i.get("etag") and i.get("size") is not None}


def reference_bases_before_index(pin: ReferencePin) -> int:
    """A reference's bases before its index is built: its FASTA's bytes (a gzipped FASTA's times 4)."""
    return pin.size * (4 if pin.uri.endswith(".gz") else 1)


def plan_jobs(plan: Plan, compute: Compute, index: JobSize | None = None) -> JobPlan:
    """Size the run's children and reducers from the plan (:mod:`seqlake.plan.sizing`); the reducers' keys,
    refused when more than an array holds (:func:`seqlake.lake.regions.reducer_keys`)."""
    from seqlake.lake.regions import reducer_keys

    contigs = [(c.name, c.length) for c in load_contigs(plan.reference)] if plan.reference else []
    keys = reducer_keys(plan, contigs) if contigs and plan.array_size else []
    subject = plan.reference.uri if plan.reference else plan.plan_uri
    reads = max((child_reads(plan, c) for c in range(plan.array_size)), default=0)
    child = child_size(sum(n for _, n in contigs) or None, reads, plan.params.allele_counts, compute, subject=subject)
    reducer = reducer_size(max(k.expected_s for k in keys), compute, subject=subject) if keys else None
    return JobPlan(child, reducer, index, keys, compute)


def write_jobs(layout: RunLayout, jobs: JobPlan) -> None:
    storage.write_bytes(layout.jobs, json.dumps(jobs.to_dict(), separators=(",", ":")).encode())


def load_jobs(layout: RunLayout) -> JobPlan:
    try:
        return JobPlan.from_dict(json.loads(storage.read_bytes(layout.jobs)))
    except FileNotFoundError:
        raise SeqlakeError(f"the run has no job sizes at {layout.jobs}: planned by an older seqlake; "
                           "upload its inputs again for a new run") from None


def make_run_plan(request: RunRequest, params: Params, reference: ReferencePin | None = None,
                  compute: Compute | None = None, index: JobSize | None = None) -> int:
    """Plan the run with the core planner (also what the Batch index job runs, once it has built the
    reference's index), sizing its jobs before the plan is written (a refused size or reduce leaves no plan);
    the plan's array size. The sizes go to ``runs/<id>/jobs.json``."""
    compute = compute or Compute.from_env()
    sized: list[JobPlan] = []
    plan = make_plan(request.run_id, list(request.samples), out_prefix=request.out_prefix,
                     reference=reference or pinned_reference(request, params), params=params,
                     known=known_inputs(request), check=lambda p: sized.append(plan_jobs(p, compute, index)))
    write_jobs(plan.layout, sized[0])
    return plan.array_size


def plan_step(execution: ExecutionInput, *, reads_per_shard: int | None = None,
              lambda_index_max_bytes: int | None = None, execution_arn: str | None = None,
              execution_name: str | None = None, started_at: str | None = None,
              compute: Compute | None = None) -> PlanSummary:
    """Plan the run (or defer it to the index job, sized from the reference), write this execution's todo
    list, and mark the run RUNNING in ``status.json``. ``compute``: the template's job sizes and instance
    types (the Lambda's environment by default)."""
    compute = compute or Compute.from_env()
    request = execution.load()
    layout = request.layout
    total = input_bytes(request)
    if not storage.exists(layout.plan):
        params = params_for(request, reads_per_shard)
        reference = pinned_reference(request, params)
        too_large = lambda_index_max_bytes is not None and total > lambda_index_max_bytes
        # this Lambda carries no aligner: a reference not indexed yet is indexed by the index job
        unindexed = reference is not None and not index_ready(reference)
        if too_large or unindexed:
            index = index_job_size(reference_bases_before_index(reference) if reference else 0, total, compute,
                                   subject=reference.uri if reference else layout.plan, inputs_in_job=too_large)
            body = {"execution": execution.to_dict(), "params": params.to_dict(), "compute": compute.to_dict(),
                    "index": index.to_dict()}
            storage.write_bytes(layout.index_job, json.dumps(body, sort_keys=True).encode())
            _logger().info("planning in a Batch job: " + ("inputs too large for the plan Lambda" if too_large
                                                       else "the reference is not indexed yet"),
                        extra={"input_bytes": total, "limit": lambda_index_max_bytes,
                               "reference": reference.uri if reference else None})
            _write_running(request, execution_arn, started_at, None)
            return PlanSummary(layout.plan, 0, needs_index=True, index_job_uri=layout.index_job, input_bytes=total,
                               jobs=JobPlan(index=index).overrides())
        array_size: int | None = make_run_plan(request, params, reference, compute)
    else:
        array_size = None  # planned before (the index job, or a re-run): read from the plan
    summary = replace(_todo(request, execution_name or request.run_id, array_size), input_bytes=total,
                      jobs=load_jobs(layout).overrides())
    _write_running(request, execution_arn, started_at, summary.array_size)
    return summary


def reduce_plan_step(execution: ExecutionInput) -> dict[str, int]:
    """After the children: write the reduce step's regions (:func:`seqlake.lake.regions.plan_reduce`) and
    answer how many reducers run (``regions``: one per region and sample group; 0 without a reference: the
    commit follows at once) and their attempt timeout (the plan's, ``runs/<id>/jobs.json``)."""
    from seqlake.lake.regions import plan_reduce

    request = execution.load()
    reduce_plan = plan_reduce(load_plan(request.layout.plan))
    regions = len(reduce_plan.reducers) if reduce_plan is not None else 0
    jobs = load_jobs(request.layout)
    if regions and len(jobs.reducers) != regions:
        raise SeqlakeError(f"the reduce has {regions} reducers, the plan sized {len(jobs.reducers)} "
                           f"({request.layout.jobs})")
    timeout = jobs.overrides()["reducer"]["timeout_s"]
    _logger().info("reduce planned", extra={"regions": regions, "timeout_s": timeout})
    return {"regions": regions, "timeout_s": timeout}


def _todo(request: RunRequest, execution_name: str, array_size: int | None = None) -> PlanSummary:
    """The children without a finished manifest (all of them, unless this is a re-run), listed once;
    ``array_size``: the plan's, when this step just made it (else the plan is read for it)."""
    layout = request.layout
    if array_size is None:
        array_size = load_plan(layout.plan).array_size
    done = {child_of(uri) for uri in storage.list_sizes(layout.staging) if uri.endswith("manifest.json")}
    todo = [c for c in range(array_size) if c not in done]
    uri = layout.todo(execution_name)
    storage.write_bytes(uri, todo_bytes(todo))
    if len(todo) < array_size:
        _logger().info("re-run: only the children without a finished manifest run",
                    extra={"children": len(todo), "of": array_size})
    return PlanSummary(layout.plan, len(todo), todo_uri=uri)


def _write_running(request: RunRequest, execution_arn: str | None, started_at: str | None,
                   shards: int | None) -> None:
    status = status_of(request, RunState.RUNNING, execution_arn, previous_start(request) or started_at)
    status.shards = shards
    status.job_sizes = job_sizes(request)
    write_status(status)
