"""The maintenance functions' handlers (issue 36 on AWS) against moto S3 and the Glue tables of template.yaml:
the delete function refuses an unconfirmed request and a name no table holds (with a "did you mean"), deletes a
confirmed one with its audit record under ``deletions/``, and goes on with a deletion cut short; the compact
function rewrites a run's files into one and records it."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqlake.aws import catalog
from seqlake.aws.maintenance import COMPACTION_MARGIN_S, UNDECLARED, DeleteRequest, DeleteRequestError
from seqlake.lake import compaction, iceberg
from seqlake.lake.deletion import SampleNotFoundError
from seqlake.lake.tables import BY_NAME

from .conftest import Deployed

RUN = "maint-run-1"


def _samples_part(names: list[str], uploads: dict[str, str]) -> bytes:
    schema = BY_NAME["samples"].schema
    rows = [{"sample": n, "fastq_1": uploads.get(n, f"s3://elsewhere/{n}_R1.fastq.gz")} for n in names]
    table = pa.Table.from_pylist(rows, schema=schema)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


@pytest.fixture
def lake(deployed: Deployed, monkeypatch: pytest.MonkeyPatch) -> Deployed:
    """A run committed to the ``samples`` table in two files (samples ``Gone`` and ``kept``), ``Gone``'s upload
    and report in the bucket."""
    monkeypatch.setenv("GLUE_DATABASE", deployed.database)
    monkeypatch.setenv("DATA_BUCKET", deployed.bucket)
    monkeypatch.setenv("SNAPSHOT_RETENTION_DAYS", "0")
    upload = f"s3://{deployed.bucket}/incoming/batch/Gone_R1.fastq.gz"
    deployed.put("incoming/batch/Gone_R1.fastq.gz", b"@r\nA\n+\nI\n")
    deployed.put(f"reports/{RUN}/index.html", b"<html>Gone, kept</html>")
    deployed.put(f"results/samples/run_id={RUN}/part-00000.parquet", _samples_part(["Gone"], {"Gone": upload}))
    deployed.put(f"results/samples/run_id={RUN}/part-00001.parquet", _samples_part(["kept"], {}))
    catalog.commit_results(deployed.database, deployed.bucket, RUN, ["samples"])
    return deployed


def _samples(deployed: Deployed) -> list[str]:
    rows = iceberg.scan(catalog.iceberg_catalog(), deployed.database, "samples").column("sample").to_pylist()
    return sorted(str(r) for r in rows)


def test_a_request_is_confirmed_by_the_name_twice() -> None:
    assert DeleteRequest.from_event({"sample": "S1", "confirm": "S1", "requested_by": "arn:aws:iam::1:user/a"}) == (
        DeleteRequest("S1", "arn:aws:iam::1:user/a"))
    undeclared = DeleteRequest.from_event({"sample": "S1", "confirm": "S1"})
    assert undeclared.who("req-1") == f"{UNDECLARED} (Lambda request req-1)"
    assert DeleteRequest("S1", "alice").who("req-1") == "alice (as the invocation declared it; Lambda request req-1)"
    for event in ({}, {"sample": ""}, {"sample": 3}, [], None):
        with pytest.raises(DeleteRequestError, match='"sample"'):
            DeleteRequest.from_event(event)


def test_the_delete_function_refuses_without_the_confirmation(
        lake: Deployed, handler: Callable[[str], ModuleType], lambda_context: Any) -> None:
    for event in ({"sample": "Gone"}, {"sample": "Gone", "confirm": "gone"}, {"sample": "Gone", "confirm": True}):
        with pytest.raises(DeleteRequestError, match='repeat its name as "confirm"') as refused:
            handler("delete_sample").handler(event, lambda_context)
        assert '{"sample": "Gone", "confirm": "Gone"}' in str(refused.value)
    assert _samples(lake) == ["Gone", "kept"]  # nothing removed
    assert lake.keys("incoming/") and not lake.keys("deletions/")


def test_the_delete_function_refuses_a_name_no_table_holds_with_a_did_you_mean(
        lake: Deployed, handler: Callable[[str], ModuleType], lambda_context: Any) -> None:
    with pytest.raises(SampleNotFoundError, match="no table holds a sample named 'gone': did you mean Gone"):
        handler("delete_sample").handler({"sample": "gone", "confirm": "gone"}, lambda_context)
    with pytest.raises(SampleNotFoundError, match="no table holds a sample named 'nobody'"):
        handler("delete_sample").handler({"sample": "nobody", "confirm": "nobody"}, lambda_context)
    assert _samples(lake) == ["Gone", "kept"] and not lake.keys("deletions/")


def test_the_delete_function_deletes_a_confirmed_sample_and_records_who_asked(
        lake: Deployed, handler: Callable[[str], ModuleType], lambda_context: Any) -> None:
    who = "arn:aws:iam::123456789012:user/pi"
    out = handler("delete_sample").handler({"sample": "Gone", "confirm": "Gone", "requested_by": who}, lambda_context)
    assert _samples(lake) == ["kept"]
    assert out["runs"] == [RUN] and out["rows"] == 1 and out["objects_removed"] == 2  # the upload, the report
    assert not lake.keys("incoming/") and not lake.keys("reports/")
    (audit,) = lake.keys("deletions/")
    assert out["audit"] == f"s3://{lake.bucket}/{audit}" and "Gone" not in audit
    record = json.loads(lake.get(audit))
    assert record["sample"] == "Gone" and record["rows"]["samples"] == 1
    assert record["requested_by"].startswith(who) and lambda_context.aws_request_id in record["requested_by"]
    for key in lake.keys("results/samples/"):  # no file of the table holds its row, old snapshots' included
        if key.endswith(".parquet"):
            assert "Gone" not in pq.read_table(io.BytesIO(lake.get(key))).column("sample").to_pylist(), key


def test_a_deletion_cut_short_goes_on_when_started_again(
        lake: Deployed, handler: Callable[[str], ModuleType], lambda_context: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A deletion that timed out after the tables (its Lambda's 15 minutes) is started again with the same
    request: the tables hold no row of the sample any more, but it knows the runs and uploads it had found."""
    from seqlake.base import storage
    from seqlake.lake import deletion

    real_delete = storage.delete

    def cut_short(uri: str) -> None:
        if "/incoming/" in uri:
            raise TimeoutError("Task timed out after 900.00 seconds")
        real_delete(uri)

    monkeypatch.setattr(deletion.storage, "delete", cut_short)
    with pytest.raises(TimeoutError):
        handler("delete_sample").handler({"sample": "Gone", "confirm": "Gone"}, lambda_context)
    assert _samples(lake) == ["kept"] and lake.keys("incoming/")  # the tables done, its upload not
    assert [k for k in lake.keys("deletions/") if "pending-" in k]
    monkeypatch.setattr(deletion.storage, "delete", real_delete)
    out = handler("delete_sample").handler({"sample": "Gone", "confirm": "Gone"}, lambda_context)
    assert out["runs"] == [RUN] and out["rows"] == 1
    assert not lake.keys("incoming/") and not lake.keys("reports/")
    (audit,) = lake.keys("deletions/")  # the pending record removed
    assert json.loads(lake.get(audit))["rows"]["samples"] == 1


def test_the_compact_function_rewrites_a_runs_files_into_one_and_records_it(
        lake: Deployed, handler: Callable[[str], ModuleType], lambda_context: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(lambda_context), "get_remaining_time_in_millis", lambda self: 900_000)  # a fresh start
    tbl = catalog.iceberg_catalog().load_table(iceberg.identifier(lake.database, "samples"))
    assert len(iceberg.live_files(tbl)) == 2
    out = handler("compact").handler({}, lambda_context)  # the schedule's event is not read
    assert out["compacted"] == 1 and out["files_replaced"] == 2 and not out["stopped_early"]
    tbl = catalog.iceberg_catalog().load_table(iceberg.identifier(lake.database, "samples"))
    assert len(iceberg.live_files(tbl)) == 1 and _samples(lake) == ["Gone", "kept"]
    assert out["files_removed"] == 2  # SNAPSHOT_RETENTION_DAYS 0: the replaced files' snapshots expired
    assert len(lake.keys("compactions/")) == 1


def test_the_compaction_starts_no_partition_in_its_last_minutes(
        lake: Deployed, handler: Callable[[str], ModuleType], lambda_context: Any) -> None:
    """With less than the margin left of the function's time (the fixture's context: 60 s) nothing is rewritten;
    the next invocation goes on."""
    out = handler("compact").handler({}, lambda_context)
    assert out["stopped_early"] and out["compacted"] == 0
    tbl = catalog.iceberg_catalog().load_table(iceberg.identifier(lake.database, "samples"))
    assert len(iceberg.live_files(tbl)) == 2


def test_the_templates_compaction_settings_are_the_codes(template: dict[str, Any]) -> None:
    """The retention's default, the largest partition rewritten and the margin before the timeout, as the
    template (and docs/DEPLOY.md from it) states them, are the code's."""
    resources, parameters = template["Resources"], template["Parameters"]
    assert float(parameters["SnapshotRetentionDays"]["Default"]) == compaction.KEEP_DAYS
    assert parameters["CompactionSchedule"]["Default"] == "rate(7 days)"
    props = resources["CompactFunction"]["Properties"]
    assert props["Timeout"] > 2 * COMPACTION_MARGIN_S
    assert f"{compaction.MAX_BYTES >> 20} MiB" in props["Description"]
    assert f"last {COMPACTION_MARGIN_S / 60:g} minutes" in props["Description"]
    for lid in ("DeleteSampleFunction", "CompactFunction"):  # Lambda's longest: the bound docs/DEPLOY.md states
        assert resources[lid]["Properties"]["Timeout"] == 900, lid


def test_compaction_schedule_none_keeps_the_rule_disabled(template: dict[str, Any]) -> None:
    """``CompactionSchedule=none``: the schedule rule SAM makes stays, disabled (a rule needs an expression all the
    same); any other value is the rule's expression, enabled."""
    from localcloud.deployer import Deployer

    from .conftest import rendered

    made = rendered(template)["Resources"]["CompactFunctionScheduled"]["Properties"]
    rule = {k: made[k] for k in ("ScheduleExpression", "State")}  # its target is the function's ARN: not made here
    for value, expected in (("none", ("rate(7 days)", "DISABLED")), ("cron(0 3 ? * SUN *)", ("cron(0 3 ? * SUN *)",
                                                                                              "ENABLED"))):
        resolved = Deployer(template, parameters={"Subnets": "subnet-1", "SecurityGroupIds": "sg-1",
                                                  "CompactionSchedule": value}).resolve({"R": rule})["R"]
        assert (resolved["ScheduleExpression"], resolved["State"]) == expected, value
