"""The plan, commit and record-failure handlers on the sample step inputs, with the real core (plan,
worker, merge) against moto S3 and the Glue tables from template.yaml."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

from seqlake.aws import index_job
from seqlake.aws.request import RunRequest, store_request
from seqlake.aws.status import NEW_UPLOAD_ADVICE
from seqlake.base.cachedir import REF_CACHE_VAR
from seqlake.base.errors import BadInputError
from seqlake.child.worker import process_child
from seqlake.lake.tables import RESULT_TABLES, TABLES
from seqlake.plan.planfile import Plan, load_plan
from seqlake.plan.refindex import indexed_reference
from seqlake.reduce.reducer import reduce_region

from .conftest import REGION, Deployed, load_event, partitions, read_status, runs_row

READS = 600


def head_records(name: str, n: int) -> bytes:
    """The first n records of a bundled demo file, gzipped again (a small real-shaped input)."""
    raw = resources.files("seqlake.demo_data").joinpath(name).read_bytes()
    lines = gzip.decompress(raw).split(b"\n")[: 4 * n]
    return gzip.compress(b"\n".join(lines) + b"\n")


REFERENCE_KEY = "references/MN908947.3/MN908947.3.fasta"


@pytest.fixture
def run_input(deployed: Deployed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """events/run-request.json with its objects really in the bucket (ETags and sizes from S3), and its
    reference indexed in the bucket (as an earlier run's index job left it; this host's copy of the index
    goes to a folder of the test's own)."""
    monkeypatch.setenv(REF_CACHE_VAR, str(tmp_path / "refcache"))
    request = load_event("run-request.json")
    request["bucket"] = deployed.bucket
    fasta = resources.files("seqlake.demo_data").joinpath("MN908947.3.fasta").read_bytes()
    deployed.put(REFERENCE_KEY, fasta)
    assert request["reference"].endswith(REFERENCE_KEY)
    request["reference"] = f"s3://{deployed.bucket}/{REFERENCE_KEY}"
    indexed_reference(request["reference"], store=f"s3://{deployed.bucket}")
    for mate, item in zip(("R1", "R2"), request["inputs"], strict=True):
        body = head_records(f"demo_{mate}.fastq.gz", READS)
        item["etag"] = deployed.put(item["key"], body)
        item["size"] = len(body)
    return request


@pytest.fixture
def steps(
    deployed: Deployed,
    handler: Callable[[str], ModuleType],
    lambda_context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    monkeypatch.setenv("GLUE_DATABASE", deployed.database)
    monkeypatch.setenv("READS_PER_SHARD", str(READS // 3))
    monkeypatch.setenv("LAMBDA_INDEX_MAX_BYTES", str(1 << 30))
    monkeypatch.setenv("WORKER_LOG_GROUP", "/aws/batch/seqlake-dev-worker")

    def call(name: str, event: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = handler(name).handler(event, lambda_context)
        return out

    return call


def step_input(name: str, request: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The sample step input with the execution input of ``request`` (stored as the start function
    stores it)."""
    event = load_event(name)
    event["execution"] = store_request(RunRequest.from_dict(request)).to_dict()
    event.update(kw)
    return event


def reduce_all(steps: Callable[[str, dict[str, Any]], dict[str, Any]], run_input: dict[str, Any],
               plan: Plan) -> int:
    """What the state machine runs between the children and the commit: the plan step's second call (the
    regions), then every reducer (what the reduce array's children do); the number of regions."""
    regions: int = steps("plan", step_input("plan-input.json", run_input, reduce=True))["regions"]
    for region in range(regions):
        reduce_region(plan, region)
    return regions


def test_plan_shards_commit(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    run_id = run_input["run_id"]
    # When the plan step runs on the sample step input
    plan = steps("plan", step_input("plan-input.json", run_input))
    # Then it returns only the plan's URI, the array size and its jobs' sizes (runs/<id>/jobs.json)
    jobs = {k: v for k, v in plan.items() if k == "jobs"}["jobs"]
    assert jobs["child"]["memory_mib"] == "7680" and jobs["child"]["timeout_s"] >= 60
    assert {k: v for k, v in plan.items() if k != "jobs"} == {
        "plan_uri": f"s3://{deployed.bucket}/runs/{run_id}/plan.json",
        "array_size": 3,
        "needs_index": False,
        "index_job_uri": None,
        "todo_uri": f"s3://{deployed.bucket}/runs/{run_id}/todo/{run_id}.json",
        "input_bytes": sum(i["size"] for i in run_input["inputs"]),
    }
    # and a retry of the step finds the same plan
    assert steps("plan", step_input("plan-input.json", run_input)) == plan
    # and status.json already says RUNNING
    running = read_status(deployed, run_id)
    assert running["state"] == "RUNNING" and running["shards"] == 3 and running["plan_uri"] == plan["plan_uri"]
    # with what the plan asked Batch for (the run's record: runs/<id>/jobs.json, summed up in status.json)
    sizes = running["job_sizes"]
    assert sizes["child"]["memory_mib"] == 7680 and sizes["reducers"] == 1
    assert sizes["reducer"]["timeout_s"] >= sizes["reducer"]["expected_s"] * 3
    # When every shard has run (what the Batch children do) and the commit step runs
    loaded = load_plan(plan["plan_uri"])
    for shard in range(loaded.array_size):
        process_child(loaded, shard)
    # and the reducers (the demo's 30 kb genome is one region)
    assert reduce_all(steps, run_input, loaded) == 1
    assert not partitions(deployed, "qc_summary")
    out = steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))
    # Then the run is visible in every table, and status.json and the runs row agree
    assert out["state"] == "SUCCEEDED" and out["reads"] == 2 * READS
    for table in TABLES:
        assert partitions(deployed, table.name) == [[run_id]], table.name
    status = read_status(deployed, run_id)
    assert status["state"] == "SUCCEEDED" and status["shards"] == 3 and status["reads"] == 2 * READS
    assert status["partitions"] == [*RESULT_TABLES, "runs"]
    row = runs_row(deployed, run_id)
    assert row["state"] == "SUCCEEDED" and row["shards"] == 3 and row["reads"] == 2 * READS
    assert row["samples"] == "demo" and row["reason"] is None
    # the run's report was rendered from its tables before the commit point, and both records name it
    report = f"s3://{deployed.bucket}/reports/{run_id}/index.html"
    assert status["report_uri"] == row["report_uri"] == report and status["report_error"] is None
    assert b"<html" in deployed.get(f"reports/{run_id}/index.html")[:200].lower()
    assert json.loads(row["inputs"])[0]["etag"] == run_input["inputs"][0]["etag"]
    # a re-run of the commit (e.g. after a timeout) is clean
    assert steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))["state"] == (
        "SUCCEEDED"
    )
    assert partitions(deployed, "runs") == [[run_id]]


def test_a_rerun_computes_only_the_children_without_a_manifest(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    run_id = run_input["run_id"]
    plan = steps("plan", step_input("plan-input.json", run_input))
    loaded = load_plan(plan["plan_uri"])
    # Given a run whose child 1 never finished (its manifest is missing)
    for child in (0, 2):
        process_child(loaded, child)
    # When the run is started again (a new execution name, the same execution input)
    again = steps("plan", step_input("plan-input.json", run_input, execution_name=f"{run_id}-rerun-1"))
    # Then the plan is the same and this execution's todo list holds child 1 only
    assert again["plan_uri"] == plan["plan_uri"] and again["array_size"] == 1
    assert again["todo_uri"] == f"s3://{deployed.bucket}/runs/{run_id}/todo/{run_id}-rerun-1.json"
    assert json.loads(deployed.get(f"runs/{run_id}/todo/{run_id}-rerun-1.json")) == {"children": [1]}
    # and once that child has run, the commit equals a run that never failed
    process_child(loaded, 1)
    reduce_all(steps, run_input, loaded)
    out = steps("commit", step_input("commit-input.json", run_input, plan=again, batch={"job_id": None}))
    assert out["state"] == "SUCCEEDED" and out["reads"] == 2 * READS


def test_commit_registers_all_or_nothing(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    plan = _children_and_reducers(steps, run_input)
    # Given a catalog that refuses one table's partition (the table is missing)
    with _table_missing(deployed, "coverage"), pytest.raises(Exception, match=r"coverage|EntityNotFound"):
        steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))
    # Then no table shows the run
    for table in TABLES:
        assert partitions(deployed, table.name) == [], table.name


@contextlib.contextmanager
def _table_missing(deployed: Deployed, name: str) -> Iterator[None]:
    """Meanwhile, the Glue table ``name`` is missing (the catalog refuses its partitions); then put back."""
    glue = boto3.client("glue", region_name=REGION)
    table = glue.get_table(DatabaseName=deployed.database, Name=name)["Table"]
    glue.delete_table(DatabaseName=deployed.database, Name=name)
    try:
        yield
    finally:
        keep = ("Name", "Description", "TableType", "Parameters", "PartitionKeys", "StorageDescriptor")
        glue.create_table(DatabaseName=deployed.database, TableInput={k: table[k] for k in keep if k in table})


def test_large_inputs_are_planned_by_the_index_job(
    deployed: Deployed,
    run_input: dict[str, Any],
    steps: Callable[[str, dict[str, Any]], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAMBDA_INDEX_MAX_BYTES", "1000")
    first = steps("plan", step_input("plan-input.json", run_input))
    assert first["needs_index"] is True and first["array_size"] == 0
    assert first["index_job_uri"] == f"s3://{deployed.bucket}/runs/{run_input['run_id']}/index/job.json"
    # the Batch index job (same image, other command) plans the run
    monkeypatch.setenv(index_job.JOB_VAR, first["index_job_uri"])
    assert index_job.main() == 0
    # and the plan step, called again, returns it
    again = steps("plan", step_input("plan-input.json", run_input))
    assert again["needs_index"] is False and again["array_size"] == 3


def test_a_reference_not_indexed_yet_is_indexed_once_by_the_index_job(
    deployed: Deployed,
    run_input: dict[str, Any],
    steps: Callable[[str, dict[str, Any]], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a run whose reference has no index in the bucket yet (small inputs: only the index is missing)
    for key in deployed.keys("reference-indexes/"):
        deployed.s3().delete_object(Bucket=deployed.bucket, Key=key)
    # When the plan step runs: it does not build the index (the plan Lambda carries no aligner)
    first = steps("plan", step_input("plan-input.json", run_input))
    assert first["needs_index"] is True and not deployed.keys("reference-indexes/")
    # Then the index job builds it, once, in seqlake's own prefix (never beside the FASTA), and plans
    monkeypatch.setenv(index_job.JOB_VAR, first["index_job_uri"])
    assert index_job.main() == 0
    plan = load_plan(steps("plan", step_input("plan-input.json", run_input))["plan_uri"])
    assert plan.reference is not None and plan.reference.etag == run_input_reference_etag(deployed)
    key = plan.reference.key
    assert sorted(deployed.keys("reference-indexes/")) == [f"reference-indexes/{key}/contigs.json",
                                                          f"reference-indexes/{key}/index.mmi"]
    assert deployed.keys("references/") == [REFERENCE_KEY]
    # and a child only loads it: its host's copy, the same bytes
    manifest = process_child(plan, 0)
    host_copy = Path(os.environ[REF_CACHE_VAR], "reference-indexes", key, "index.mmi")
    assert host_copy.read_bytes() == deployed.get(f"reference-indexes/{key}/index.mmi")
    assert manifest.reference == key and manifest.contigs == [("MN908947.3", 29903)]
    # and the next run of that reference finds the index: no index job
    other = {**run_input, "run_id": run_input["run_id"] + "-2"}
    assert steps("plan", step_input("plan-input.json", other))["needs_index"] is False


def run_input_reference_etag(deployed: Deployed) -> str:
    etag: str = deployed.s3().head_object(Bucket=deployed.bucket, Key=REFERENCE_KEY)["ETag"]
    return etag.strip('"')


def test_a_child_whose_reference_changed_since_the_plan_fails_as_a_changed_input_does(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    plan = load_plan(steps("plan", step_input("plan-input.json", run_input))["plan_uri"])
    # Given the reference replaced after the plan (another genome under the same key)
    deployed.put(REFERENCE_KEY, b">other\n" + b"ACGT" * 2000 + b"\n")
    # When a child runs, Then it fails as bad input naming the reference and why (the worker exits 65)
    with pytest.raises(BadInputError, match=r"MN908947\.3\.fasta: the reference changed after the run was planned"):
        process_child(plan, 0)


def test_bad_input_in_plan_is_raised_for_the_state_machine(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    deployed.put(run_input["inputs"][1]["key"], gzip.compress(b"@r1\nACGT\n+\nIII\n"))
    with pytest.raises(BadInputError, match=r"demo_R2\.fastq\.gz"):
        steps("plan", step_input("plan-input.json", run_input))


def test_failure_in_plan_is_recorded_without_result_partitions(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    run_id = run_input["run_id"]
    event = step_input("record-failure-plan-bad-input.json", run_input)
    out = steps("record_failure", event)
    # the worker's one line, then what to do: a re-run would read the same bytes
    message = f'{json.loads(event["error"]["Cause"])["errorMessage"]}; {NEW_UPLOAD_ADVICE}'
    assert out == {
        "state": "FAILED",
        "status_uri": f"s3://{deployed.bucket}/runs/{run_id}/status.json",
        "failed_step": "Plan",
        "failed_shard": None,
        "reason": message,
    }
    status = read_status(deployed, run_id)
    assert status["state"] == "FAILED" and status["reason"] == message and status["error"] == "BadInputError"
    assert status["bad_input"] is True
    assert runs_row(deployed, run_id)["reason"] == message
    assert partitions(deployed, "runs") == [[run_id]]
    for table in RESULT_TABLES:
        assert partitions(deployed, table) == [], table


def test_failed_shard_is_recorded_with_the_workers_reason(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    run_id = run_input["run_id"]
    # Given shard 2's worker wrote its one-line error before exiting 65
    line = f"s3://{deployed.bucket}/incoming/run42/demo_R1.fastq.gz:1201: truncated record (record 300)"
    error = {
        "file": "x",
        "line": 1201,
        "record": 300,
        "message": "truncated record",
        "error": "BadInput",
        "text": line,
        "shard": 2,
        "attempt": "1",
    }
    deployed.put(f"runs/{run_id}/staging/_errors/child=00002.json", json.dumps(error).encode())
    # When Step Functions reports the array job's failure
    event = step_input("record-failure-shard.json", run_input)
    event["plan"]["plan_uri"] = f"s3://{deployed.bucket}/runs/{run_id}/plan.json"
    out = steps("record_failure", event)
    # Then the failed shard and the worker's own line are recorded
    assert out["failed_step"] == "ProcessShards" and out["failed_shard"] == 2
    assert out["reason"].startswith(line) and "Array Child Job failed" not in out["reason"].split(";")[0]
    assert out["reason"].endswith(NEW_UPLOAD_ADVICE) and read_status(deployed, run_id)["bad_input"] is True
    row = runs_row(deployed, run_id)
    assert row["state"] == "FAILED" and row["failed_shard"] == 2
    for table in RESULT_TABLES:
        assert partitions(deployed, table) == [], table


def test_a_report_that_cannot_be_rendered_fails_the_commit_before_its_commit_point(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 37: a run never says SUCCEEDED without its report (a report section that fails, by the test-only
    fault hook, fails the commit with the section and why; RecordFailure records that reason)."""
    from seqlake.aws.steps import ReportFailedError
    from seqlake.base import faults

    plan = steps("plan", step_input("plan-input.json", run_input))
    loaded = load_plan(plan["plan_uri"])
    for shard in range(loaded.array_size):
        process_child(loaded, shard)
    reduce_all(steps, run_input, loaded)
    monkeypatch.setenv(faults.REPORT_VAR, "fail:section=plot-coverage")
    with pytest.raises(ReportFailedError, match=r"report section 'plot-coverage' failed"):
        steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))
    for table in TABLES:
        assert partitions(deployed, table.name) == [], table.name
    cause = {"errorMessage": "the run's report could not be rendered: ReportError: report section 'plot-coverage' "
             "failed", "errorType": "ReportFailedError"}
    steps("record_failure", step_input("record-failure-plan-bad-input.json", run_input, plan=plan,
                                       failed_step="Commit",
                                       error={"Error": "ReportFailedError", "Cause": json.dumps(cause)}))
    status = read_status(deployed, run_id := run_input["run_id"])
    assert status["state"] == "FAILED" and "plot-coverage" in status["reason"], run_id


# ------------------------------------------------------------------ the reducers' genome pieces (issue 35's bytes)
def _children_and_reducers(steps: Callable[[str, dict[str, Any]], dict[str, Any]],
                           run_input: dict[str, Any]) -> dict[str, Any]:
    """The plan step, every child and every reducer: what the state machine runs before the commit; the plan
    step's output."""
    plan = steps("plan", step_input("plan-input.json", run_input))
    loaded = load_plan(plan["plan_uri"])
    for shard in range(loaded.array_size):
        process_child(loaded, shard)
    reduce_all(steps, run_input, loaded)
    return plan


def _pieces(deployed: Deployed, run_id: str) -> list[str]:
    """The reducers' pieces of the samples' consensus FASTA and VCF under the run's ``reduce/``."""
    return [k for k in deployed.keys(f"runs/{run_id}/reduce/") if k.endswith(".genomes")]


def _sample_files(deployed: Deployed, run_id: str) -> dict[str, bytes]:
    """The run's per-sample files under ``results/genomes/`` (FASTA, VCF, BAM and their indexes), by name."""
    prefix = f"results/genomes/run_id={run_id}/"
    return {k[len(prefix):]: deployed.get(k) for k in deployed.keys(prefix)}


def test_the_genome_pieces_go_once_the_run_is_committed_and_a_rerun_of_the_commit_is_clean(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    run_id = run_input["run_id"]
    plan = _children_and_reducers(steps, run_input)
    # Given the reducer's pieces of the sample's consensus FASTA and VCF (the demo's genome is one region)
    assert _pieces(deployed, run_id) == [f"runs/{run_id}/reduce/region=00000.genomes"]

    def commit() -> dict[str, Any]:
        return steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))

    # When the run is committed
    assert commit()["state"] == "SUCCEEDED"
    # Then the pieces are gone, joined under results/ (issue 35: one byte per base, the BAM's bytes 3x over
    # at low depth), and the rest of reduce/ stays (the summaries, the BAM pieces a re-run joins again)
    assert _pieces(deployed, run_id) == []
    assert {f"runs/{run_id}/reduce/region=00000.json", f"runs/{run_id}/reduce/genomes-joined.json"} <= set(
        deployed.keys(f"runs/{run_id}/reduce/"))
    files = _sample_files(deployed, run_id)
    assert {"demo.consensus.fasta", "demo.vcf.gz", "demo.vcf.gz.tbi", "demo.bam", "demo.bam.bai"} <= set(files)
    assert files["demo.consensus.fasta"].startswith(b">")
    # and a re-run of the commit (a Lambda call retried after its work was done) is clean: it joins nothing
    # again, and every file and table is as it was
    assert commit()["state"] == "SUCCEEDED"
    assert _sample_files(deployed, run_id) == files
    for table in TABLES:
        assert partitions(deployed, table.name) == [[run_id]], table.name


def test_a_commit_failing_before_its_commit_point_leaves_the_genome_pieces_for_the_rerun(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    run_id = run_input["run_id"]
    plan = _children_and_reducers(steps, run_input)
    # Given a catalog that refuses the runs table's partition: the commit's last step before its commit point
    with _table_missing(deployed, "runs"), pytest.raises(Exception, match=r"runs|EntityNotFound"):
        steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))
    # Then no table shows the run, and the pieces are all there (the files were joined from them already)
    for table in TABLES:
        assert partitions(deployed, table.name) == [], table.name
    assert _pieces(deployed, run_id) == [f"runs/{run_id}/reduce/region=00000.genomes"]
    files = _sample_files(deployed, run_id)
    # When the failure is recorded (RecordFailure unwinds the commit) and the run is started again
    steps("record_failure", step_input("record-failure-plan-bad-input.json", run_input, plan=plan,
                                       failed_step="Commit", error={"Error": "EntityNotFoundException",
                                                                    "Cause": "{}"}))
    assert steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))[
        "state"] == "SUCCEEDED"
    # Then the run commits, with the same files, and only then are the pieces gone
    assert partitions(deployed, "runs") == [[run_id]]
    assert _sample_files(deployed, run_id) == files
    assert _pieces(deployed, run_id) == []


def test_a_committed_run_rolled_back_by_record_failure_commits_again_without_its_pieces(
    deployed: Deployed, run_input: dict[str, Any], steps: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> None:
    """A commit that dies after its commit point, while removing the pieces (a timeout), is recorded FAILED by
    RecordFailure, which takes the run out of the tables; the run started again must still commit: what the
    re-run recognises is its record of the files joined under results/, not the tables' state."""
    run_id = run_input["run_id"]
    plan = _children_and_reducers(steps, run_input)
    assert steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))[
        "state"] == "SUCCEEDED"
    files = _sample_files(deployed, run_id)
    assert _pieces(deployed, run_id) == []
    # Given RecordFailure's unwinding of the commit (as after a commit that timed out past its commit point)
    steps("record_failure", step_input("record-failure-plan-bad-input.json", run_input, plan=plan,
                                       failed_step="Commit", error={"Error": "Sandbox.Timedout", "Cause": "{}"}))
    assert partitions(deployed, "runs") == [[run_id]] and partitions(deployed, "qc_summary") == []
    # When the run is started again, Then its commit succeeds with the same files, though the pieces are gone
    assert steps("commit", step_input("commit-input.json", run_input, plan=plan, batch={"job_id": None}))[
        "state"] == "SUCCEEDED"
    for table in TABLES:
        assert partitions(deployed, table.name) == [[run_id]], table.name
    assert _sample_files(deployed, run_id) == files
    assert read_status(deployed, run_id)["state"] == "SUCCEEDED"
