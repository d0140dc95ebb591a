"""Lost instances, failing children, a commit that dies, duplicate events (docs/FAULTS.md).

All through the local cloud with the test-only hooks of :mod:`seqlake.base.faults`, each fault scoped
to its own run (by sample or run id), so that every scenario runs at once: one wait for the first
uploads, one for the re-run and the re-upload that follow. Inputs are small: the first 2,000 pairs
of the bundled demo reads make a 4-shard run (``ReadsPerShard`` = 500).
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from localcloud.cloud import LocalCloud
from seqlake.aws.batch_reasons import LAMBDA_OUT_OF_MEMORY
from seqlake.demo_data import paths as demo_paths
from seqlake.lake.tables import COMMIT_TIME_COLUMNS, RESULT_TABLES
from seqlake.local.commands import athena_query

from .conftest import (
    READS_PER_SHARD,
    Outcome,
    by_folder,
    commit_fault,
    commit_memory,
    fastq_records,
    outcomes,
    partitions_of,
    put,
    runs_row,
    start_function,
    status_of,
    worker_fault,
)

pytestmark = pytest.mark.e2e  # one xdist worker (GROUPS in tests/conftest.py): one scenario
REPO = Path(__file__).resolve().parents[2]
PAIRS = 4 * READS_PER_SHARD


@pytest.fixture(scope="module")
def demo_pair() -> tuple[bytes, bytes]:
    """The first 2,000 pairs of the bundled demo reads, gzip (deterministic bytes)."""
    out = []
    for path in demo_paths()[:2]:
        with gzip.open(path, "rb") as f:
            lines = [next(f) for _ in range(4 * PAIRS)]
        out.append(gzip.compress(b"".join(lines), mtime=0))
    return out[0], out[1]


def _tables(cloud: LocalCloud, run_id: str) -> dict[str, list[bytes]]:
    """Each result table's Parquet files of the run, as bytes, in key order."""
    s3 = cloud.client("s3")
    out = {}
    for table in RESULT_TABLES:
        listed = s3.list_objects_v2(Bucket=cloud.bucket, Prefix=f"results/{table}/run_id={run_id}/")
        keys = sorted(o["Key"] for o in listed.get("Contents", []))
        out[table] = [s3.get_object(Bucket=cloud.bucket, Key=k)["Body"].read() for k in keys]
    return out


def _rows(parts: list[bytes]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for body in parts:
        t = pq.read_table(io.BytesIO(body))
        t = t.drop_columns([c for c in COMMIT_TIME_COLUMNS if c in t.column_names])
        rows += list(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))
    return sorted(rows, key=repr)


def _array_job(cloud: LocalCloud, run_id: str, job_ids: list[str]) -> str:
    """The array job whose container override names this run's plan."""
    for job in cloud.client("batch").describe_jobs(jobs=job_ids)["jobs"]:
        env = {e["name"]: e["value"] for e in job.get("container", {}).get("environment", [])}
        if f"/runs/{run_id}/" in env.get("SEQLAKE_PLAN_URI", ""):
            return str(job["jobId"])
    raise AssertionError(f"no array job of {run_id} among {job_ids}")


def _child_jobs(cloud: LocalCloud, array_job_id: str) -> list[dict[str, Any]]:
    batch = cloud.client("batch")
    ids = [j["jobId"] for status in ("SUCCEEDED", "FAILED")
           for j in batch.list_jobs(arrayJobId=array_job_id, jobStatus=status)["jobSummaryList"]]
    jobs: list[dict[str, Any]] = batch.describe_jobs(jobs=ids)["jobs"] if ids else []
    # a child's job id is "<array job id>:<index>"
    return sorted(jobs, key=lambda j: int(str(j["jobId"]).rsplit(":", 1)[1]))


def _event(cloud: LocalCloud, key: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((REPO / "events" / "s3-object-created-single.json").read_text())
    head = cloud.client("s3").head_object(Bucket=cloud.bucket, Key=key)
    event = copy.deepcopy(event)
    event["resources"] = [f"arn:aws:s3:::{cloud.bucket}"]
    event["detail"]["bucket"]["name"] = cloud.bucket
    event["detail"]["object"].update(key=key, size=head["ContentLength"], etag=head["ETag"].strip('"'))
    event["detail"]["object"].pop("version-id", None)
    return event


@dataclass
class Scenario:
    first: dict[str, Outcome]  # by incoming/<folder>/
    rerun: Outcome  # the crashed commit's run, re-run
    reupload: Outcome  # the new run of the re-uploaded key


def _together(cloud: LocalCloud, objects: dict[str, bytes]) -> None:
    threads = [threading.Thread(target=put, args=(cloud, k, v)) for k, v in objects.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.fixture(scope="module")
def scenario(cloud: LocalCloud, demo_pair: tuple[bytes, bytes]) -> Scenario:
    def recs(n: int, seed: int, prefix: str = "r") -> bytes:
        return b"".join(fastq_records(n, seed=seed, prefix=prefix))

    kill = "kill:sample=lost:shard=1:attempt=1:after_writes=1"
    hog = f"allocate:run=co-:mb={commit_memory(cloud) + 256}"  # past the commit function's MemorySize
    with worker_fault(cloud, f"{kill};exit:sample=af:code=1"), \
            commit_fault(cloud, f"crash:run=cc-:after_partitions=3;{hog}"):
        # a clean 4-shard run and the same reads under another sample name, whose shard 1 loses its
        # instance on attempt 1 after writing its first Parquet part
        put(cloud, "incoming/lost-clean/demo_R1.fastq.gz", demo_pair[0])
        put(cloud, "incoming/lost-clean/demo_R2.fastq.gz", demo_pair[1])
        put(cloud, "incoming/lost-killed/lost_R1.fastq.gz", demo_pair[0])
        put(cloud, "incoming/lost-killed/lost_R2.fastq.gz", demo_pair[1])
        put(cloud, "incoming/always-fails/af.fastq", recs(40, 11))  # its child exits 1 on every attempt
        put(cloud, "incoming/commit-crash/cc.fastq", recs(40, 12))  # its commit dies halfway
        put(cloud, "incoming/commit-oom/co.fastq", recs(40, 18))  # its commit runs out of memory
        # one event delivered three times at once (at-least-once delivery)
        with cloud.events_paused():
            put(cloud, "incoming/dup-event/de.fastq", recs(20, 13))
        event = json.dumps(_event(cloud, "incoming/dup-event/de.fastq")).encode()
        for _ in range(3):
            cloud.client("lambda").invoke(FunctionName=start_function(cloud), InvocationType="Event", Payload=event)
        # mates: R2 before R1; and both at once
        put(cloud, "incoming/mates-r2-first/m_R2.fastq", recs(20, 15, "p"))
        put(cloud, "incoming/mates-r2-first/m_R1.fastq", recs(20, 14, "p"))
        _together(cloud, {"incoming/mates-together/t_R1.fastq": recs(20, 14, "p"),
                          "incoming/mates-together/t_R2.fastq": recs(20, 15, "p")})
        put(cloud, "incoming/reupload/ru.fastq", recs(10, 16))
        first = by_folder(outcomes(cloud, cloud.wait(timeout=900)))
    # the operator re-runs the crashed commit's run (its input, a new execution name) and a user
    # re-uploads a file with new content
    crashed = first["commit-crash"].execution
    sfn = cloud.client("stepfunctions")
    original = sfn.describe_execution(executionArn=crashed.arn)["input"]
    sfn.start_execution(stateMachineArn=cloud.state_machine_arn, name=f"{crashed.name}-rerun1", input=original)
    put(cloud, "incoming/reupload/ru.fastq", recs(30, 17))
    second = outcomes(cloud, cloud.wait(timeout=900))
    rerun = next(o for o in second.values() if o.execution.name.endswith("-rerun1"))
    (reupload,) = (o for o in second.values() if not o.execution.name.endswith("-rerun1"))
    return Scenario(first, rerun, reupload)


def test_every_scenario_started_exactly_one_run(scenario: Scenario) -> None:
    assert sorted(scenario.first) == ["always-fails", "commit-crash", "commit-oom", "dup-event", "lost-clean",
                                      "lost-killed", "mates-r2-first", "mates-together", "reupload"]


def test_lost_instance_is_retried_and_changes_nothing(cloud: LocalCloud, scenario: Scenario) -> None:
    clean, lost = scenario.first["lost-clean"], scenario.first["lost-killed"]
    assert clean.execution.status == "SUCCEEDED" and clean.status["shards"] == 4
    assert clean.status["retried_shards"] == []
    # Batch reported the lost host, retried that child only, and the run succeeded
    assert lost.execution.status == "SUCCEEDED", lost.status.get("reason")
    children = _child_jobs(cloud, _array_job(cloud, lost.run_id, [a.job_id for a in lost.execution.arrays]))
    assert [len(c["attempts"]) for c in children] == [1, 2, 1, 1]
    first = children[1]["attempts"][0]
    assert first["statusReason"].startswith("Host EC2 (instance i-") and first["statusReason"].endswith(") terminated.")
    assert "exitCode" not in first["container"]
    assert "seqlake fault injection: SIGKILL" in Path(first["container"]["logStreamName"]).read_text()
    # status.json and the runs table say so
    assert lost.status["retried_shards"] == [1]
    assert runs_row(cloud, lost.run_id)["retried_shards"] == "1"
    # every committed table equals the clean run's, row for row once run id and sample are swapped
    # (byte for byte where the files hold neither)
    ours, theirs = _tables(cloud, lost.run_id), _tables(cloud, clean.run_id)
    swap = {clean.run_id: lost.run_id, "demo": "lost"}
    bucket = f"s3://{cloud.bucket}/incoming"
    swap.update({f"{bucket}/lost-clean/demo_R{m}.fastq.gz": f"{bucket}/lost-killed/lost_R{m}.fastq.gz"
                 for m in (1, 2)})  # the samples table names the files
    for table in RESULT_TABLES:
        assert len(ours[table]) == len(theirs[table]), table
        if ours[table] != theirs[table]:
            renamed = [tuple(swap.get(v, v) if isinstance(v, str) else v for v in row) for row in _rows(theirs[table])]
            assert _rows(ours[table]) == sorted(renamed, key=repr), table
    assert lost.partitions == clean.partitions == frozenset({*RESULT_TABLES, "runs"})


def test_crashing_child_is_not_retried_and_fails_the_run(cloud: LocalCloud, scenario: Scenario) -> None:
    o = scenario.first["always-fails"]
    # a crash (exit 1) is not an infrastructure failure: the job definition's last retry entry ends it
    # after one attempt; the run failed with shard, reason and log recorded
    assert o.execution.status == "FAILED"
    st = o.status
    assert st["state"] == "FAILED" and st["failed_step"] == "ProcessOneShard" and st["failed_shard"] == 0
    assert "exit code 1" in st["reason"], st["reason"]
    # the worker's last log line, read from CloudWatch Logs, where the local Batch sends each attempt's output
    assert "seqlake fault injection: exit 1" in st["reason"], st["reason"]
    # the log location is recorded: locally the attempt's log file, which names the stream too
    assert st["log_stream"] and Path(st["log_stream"]).name == "attempt-1.log"
    assert "seqlake fault injection: exit 1" in Path(st["log_stream"]).read_text()
    assert o.partitions == frozenset({"runs"})
    row = runs_row(cloud, o.run_id)
    assert (row["state"], row["failed_shard"], row["reason"]) == ("FAILED", "0", st["reason"])


def test_commit_crash_leaves_nothing_visible_and_a_rerun_commits(cloud: LocalCloud, scenario: Scenario) -> None:
    o = scenario.first["commit-crash"]
    # the run failed at Commit, after 3 tables had their partition: now none has
    assert o.execution.status == "FAILED"
    assert o.status["failed_step"] == "Commit" and o.status["state"] == "FAILED"
    commit_log = cloud.state.logs_dir / "lambda"
    assert any("seqlake fault injection: crash" in p.read_text(errors="replace")
               for p in commit_log.glob("*Commit*/*.log")), "the commit did not crash"
    # the re-run (checked after it) committed cleanly: all tables, status and runs row SUCCEEDED
    rerun = scenario.rerun
    assert rerun.execution.status == "SUCCEEDED" and rerun.execution.name == f"{o.run_id}-rerun1"
    assert rerun.run_id == o.run_id
    assert status_of(cloud, o.run_id)["state"] == "SUCCEEDED"
    assert partitions_of(cloud, o.run_id) == frozenset({*RESULT_TABLES, "runs"})
    assert runs_row(cloud, o.run_id)["state"] == "SUCCEEDED"
    reads = athena_query(cloud, f"SELECT sum(reads) FROM qc_summary WHERE run_id = '{o.run_id}' AND stage = 'raw'")
    assert reads.rows == [("40",)]


def test_commit_past_its_memory_size_fails_the_run_with_runtime_out_of_memory(cloud: LocalCloud,
                                                                             scenario: Scenario) -> None:
    o = scenario.first["commit-oom"]
    assert o.execution.status == "FAILED"
    st = o.status
    assert (st["state"], st["failed_step"], st["error"]) == ("FAILED", "Commit", LAMBDA_OUT_OF_MEMORY)
    assert st["reason"].startswith("the Commit function used more memory than its MemorySize"), st["reason"]
    assert "Error: Runtime exited with error: " in st["reason"]
    assert o.partitions == frozenset({"runs"})
    assert runs_row(cloud, o.run_id)["reason"] == st["reason"]
    # the commit's log ends as Lambda's does, with the REPORT line of an invocation that used all its memory
    size = commit_memory(cloud)
    reports = [p.read_text().splitlines()[-1] for p in (cloud.state.logs_dir / "lambda").glob("*Commit*/*.log")]
    assert f"Memory Size: {size} MB\tMax Memory Used: {size} MB" in "\n".join(r for r in reports if "REPORT" in r)


def test_commit_crash_partitions_were_removed_before_the_rerun(scenario: Scenario) -> None:
    # partitions as seen right after the first wait (before the re-run)
    assert scenario.first["commit-crash"].partitions == frozenset({"runs"})
    # and no file the crashed commit had published is left under results/ (a crawler or a repair finds none)
    assert scenario.first["commit-crash"].result_files == frozenset()
    assert scenario.rerun.result_files  # the re-run published them again from runs/


def test_same_event_three_times_starts_one_run(scenario: Scenario) -> None:
    assert scenario.first["dup-event"].execution.status == "SUCCEEDED"


@pytest.mark.parametrize("folder", ["mates-r2-first", "mates-together"])
def test_mates_in_any_order_start_one_paired_run(scenario: Scenario, folder: str) -> None:
    o = scenario.first[folder]
    assert o.execution.status == "SUCCEEDED"
    assert o.status["reads"] == 40 and len(o.status["inputs"]) == 2


def test_reupload_starts_a_new_run_and_keeps_the_old(cloud: LocalCloud, scenario: Scenario) -> None:
    old, new = scenario.first["reupload"], scenario.reupload
    assert old.run_id != new.run_id and old.execution.status == new.execution.status == "SUCCEEDED"
    sql = "SELECT run_id, reads FROM qc_summary WHERE stage = 'raw' AND run_id IN ('{}', '{}') ORDER BY reads"
    assert athena_query(cloud, sql.format(old.run_id, new.run_id)).rows == [(old.run_id, "10"), (new.run_id, "30")]
