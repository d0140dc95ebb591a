"""The result tables as Iceberg tables (issue 36): a run's files added as written, one commit per table,
concurrent runs both landing, a commit failing between two tables leaving nothing reachable, the newest
run per sample, a schema update reading old rows as NULL, time travel.

pyiceberg's own Glue catalog against moto's Glue (in-process), the warehouse a local folder: the real
catalog protocol (metadata location swapped by UpdateTable), the real manifests and files."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyiceberg")

from moto import mock_aws

from seqlake.base import storage
from seqlake.lake import iceberg
from seqlake.lake.tables import BY_NAME, SAMPLE_SUMMARY

DB = "seqlake"


@pytest.fixture(params=["s3", "file"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Glue (moto) with the warehouse in a bucket (through :mod:`seqlake.lake.iceberg_io`) or a folder."""
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    # Glue's optimistic check of UpdateTable's VersionId, which moto lacks (localcloud/patches.py, patch 19)
    from localcloud import patches

    patches.apply_all()
    from seqlake.base import clients
    from seqlake.lake.iceberg_io import FILE_IO

    clients.reset()
    with mock_aws():
        import boto3
        from pyiceberg.catalog.glue import GlueCatalog

        glue = boto3.client("glue", region_name="us-east-1")
        glue.create_database(DatabaseInput={"Name": DB})
        if request.param == "s3":
            boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="lake")
            _LAKE["root"] = "s3://lake"
        else:
            _LAKE["root"] = f"file://{tmp_path}"
        yield GlueCatalog("glue", client=glue, **{"py-io-impl": FILE_IO})
    clients.reset()


#: where the test's lake is: s3://lake or file://<tmp_path> (set by the catalog fixture)
_LAKE = {"root": ""}


def _root(tmp_path: Path, table: str) -> str:
    return f"{_LAKE['root']}/results/{table}"


def _storage_uri(uri: str) -> str:
    return uri.removeprefix("file://")


def exists(uri: str) -> bool:
    return storage.exists(_storage_uri(uri))


def read(uri: str) -> bytes:
    return storage.read_bytes(_storage_uri(uri))


def write_part(tmp_path: Path, table: str, run_id: str, rows: dict[str, list[Any]], name: str = "part-0") -> str:
    """A run's file as the merge writes it: the table's Parquet schema, no run_id column, under run_id=<id>/."""
    schema = BY_NAME[table].schema
    n = len(next(iter(rows.values())))
    cols = {f.name: pa.array(rows.get(f.name, [None if f.nullable else _zero(f.type)] * n), f.type) for f in schema}
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pydict(cols, schema=schema.with_metadata(None)), sink, compression="zstd")
    uri = f"{_LAKE['root']}/results/{table}/run_id={run_id}/{name}.parquet"
    storage.write_bytes(_storage_uri(uri), sink.getvalue())
    return uri


def _zero(t: pa.DataType) -> Any:
    """A value for a non-nullable column the test does not care about."""
    if pa.types.is_string(t):
        return ""
    if pa.types.is_boolean(t):
        return False
    if pa.types.is_timestamp(t):
        return 0
    return 0


def summary_rows(tmp_path: Path, run_id: str, samples: list[str], reads: int) -> str:
    return write_part(tmp_path, "sample_summary", run_id, {"sample": samples, "read_pairs_raw": [reads] * len(samples)})


def test_files_added_as_written_run_id_from_the_partition(catalog: Any, tmp_path: Path) -> None:
    tbl = iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    assert tbl.format_version == 2
    path = summary_rows(tmp_path, "r1", ["a", "b"], 10)
    before = read(path)
    iceberg.commit_run(catalog, DB, "r1", {"sample_summary": [path]})
    rows = iceberg.scan(catalog, DB, "sample_summary").select(["sample", "read_pairs_raw", "run_id"]).to_pylist()
    assert sorted(rows, key=lambda r: r["sample"]) == [
        {"sample": "a", "read_pairs_raw": 10, "run_id": "r1"}, {"sample": "b", "read_pairs_raw": 10, "run_id": "r1"}]
    # no rewrite: the table's one data file is the merge's own, byte for byte
    files = iceberg.catalog_files(catalog, DB, "sample_summary")
    assert files == {path}
    assert read(path) == before
    # a commit run again adds nothing twice
    iceberg.commit_run(catalog, DB, "r1", {"sample_summary": [path]})
    assert iceberg.scan(catalog, DB, "sample_summary").num_rows == 2


def test_a_file_that_does_not_fit_the_schema_is_refused(catalog: Any, tmp_path: Path) -> None:
    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    sink = io.BytesIO()
    pq.write_table(pa.table({"sample": ["a"], "no_such_column": [1]}), sink)
    uri = f"{_LAKE['root']}/results/sample_summary/run_id=bad/p.parquet"
    storage.write_bytes(_storage_uri(uri), sink.getvalue())
    with pytest.raises(ValueError, match="no_such_column"):
        iceberg.commit_run(catalog, DB, "bad", {"sample_summary": [uri]})
    assert iceberg.scan(catalog, DB, "sample_summary").num_rows == 0


def test_two_runs_committing_at_once_both_land(catalog: Any, tmp_path: Path) -> None:
    """Without patch 19 (moto's UpdateTable ignoring VersionId) 4 of these 6 runs were lost."""
    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    runs = [f"r{i}" for i in range(6)]
    paths = {r: summary_rows(tmp_path, r, [f"s-{r}"], 1) for r in runs}
    barrier = threading.Barrier(len(runs))
    errors: list[BaseException] = []

    def commit(run: str) -> None:
        try:
            barrier.wait()
            iceberg.commit_run(catalog, DB, run, {"sample_summary": [paths[run]]})
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=commit, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    got = sorted(iceberg.scan(catalog, DB, "sample_summary").column("run_id").to_pylist())
    assert got == runs


def test_a_commit_failing_between_two_tables_leaves_nothing_reachable(catalog: Any, tmp_path: Path) -> None:
    for name in ("sample_summary", "qc_summary"):
        iceberg.ensure_table(catalog, DB, BY_NAME[name], _root(tmp_path, name))
    iceberg.commit_run(catalog, DB, "good", {"sample_summary": [summary_rows(tmp_path, "good", ["a"], 5)]})
    failed = summary_rows(tmp_path, "failed", ["a"], 7)
    qc = write_part(tmp_path, "qc_summary", "failed", {"sample": ["a"], "mate": [1], "stage": ["raw"], "reads": [7]})

    class CrashError(RuntimeError):
        pass

    def crash_at_second(table: str, committed: int) -> None:
        if committed == 1:
            raise CrashError(table)

    with pytest.raises(CrashError):
        iceberg.commit_run(catalog, DB, "failed", {"sample_summary": [failed], "qc_summary": [qc]},
                           before_table=crash_at_second)
    # no query, no time travel, no listing reaches the failed run's file: it is gone
    assert iceberg.scan(catalog, DB, "sample_summary").column("run_id").to_pylist() == ["good"]
    tbl = catalog.load_table((DB, "sample_summary"))
    with iceberg.no_threads_left():  # pyiceberg used directly: its threads joined after (as seqlake's own uses)
        for snap in tbl.snapshots():
            assert "failed" not in tbl.scan(snapshot_id=snap.snapshot_id).to_arrow().column("run_id").to_pylist()
    assert not exists(failed)
    assert iceberg.scan(catalog, DB, "qc_summary").num_rows == 0


def test_without_the_rollback_the_failed_run_would_stay(catalog: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above fails without :func:`iceberg.rollback_run`: here it is switched off."""
    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    monkeypatch.setattr(iceberg, "rollback_run", lambda *a, **k: [])
    failed = summary_rows(tmp_path, "failed", ["a"], 7)

    def crash(table: str, committed: int) -> None:
        if committed == 1:
            raise RuntimeError(table)

    with pytest.raises(RuntimeError):
        iceberg.commit_run(catalog, DB, "failed", {"sample_summary": [failed], "qc_summary": []}, before_table=crash)
    assert iceberg.scan(catalog, DB, "sample_summary").column("run_id").to_pylist() == ["failed"]


def test_a_new_column_is_a_schema_update_old_rows_read_null(catalog: Any, tmp_path: Path) -> None:
    from pyiceberg.types import StringType

    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    old = summary_rows(tmp_path, "old", ["a"], 1)
    iceberg.commit_run(catalog, DB, "old", {"sample_summary": [old]})
    tbl = catalog.load_table((DB, "sample_summary"))
    with iceberg.no_threads_left(), tbl.update_schema() as update:
        update.add_column("lab_note", StringType(), doc="a column added after the first run")
    rows = iceberg.scan(catalog, DB, "sample_summary").select(["sample", "lab_note"]).to_pylist()
    assert rows == [{"sample": "a", "lab_note": None}]
    assert exists(old)  # no rewrite
    assert iceberg.catalog_files(catalog, DB, "sample_summary") == {old}


def test_time_travel_reads_the_table_as_of_a_run(catalog: Any, tmp_path: Path) -> None:
    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    iceberg.commit_run(catalog, DB, "r1", {"sample_summary": [summary_rows(tmp_path, "r1", ["a"], 1)]})
    first = iceberg.commit_run(catalog, DB, "r1", {"sample_summary": []}).snapshots["sample_summary"]
    iceberg.commit_run(catalog, DB, "r2", {"sample_summary": [summary_rows(tmp_path, "r2", ["a"], 2)]})
    assert iceberg.scan(catalog, DB, "sample_summary").num_rows == 2
    assert iceberg.scan(catalog, DB, "sample_summary", snapshot_id=first).column("run_id").to_pylist() == ["r1"]



def test_a_deleted_sample_leaves_no_row_no_snapshot_and_no_file(catalog: Any, tmp_path: Path) -> None:
    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    shared = summary_rows(tmp_path, "r1", ["gone", "kept"], 1)  # a file with both samples' rows
    alone = summary_rows(tmp_path, "r2", ["gone"], 2)  # a file of its rows alone
    other = summary_rows(tmp_path, "r3", ["kept"], 3)
    for run, path in (("r1", shared), ("r2", alone), ("r3", other)):
        iceberg.commit_run(catalog, DB, run, {"sample_summary": [path]})
    kept_before = iceberg.scan(catalog, DB, "sample_summary").filter(
        pa.compute.equal(pa.compute.field("sample"), "kept")).sort_by("run_id")
    done = iceberg.delete_sample(catalog, DB, "sample_summary", "gone")
    after = iceberg.scan(catalog, DB, "sample_summary").sort_by("run_id")
    assert "gone" not in after.column("sample").to_pylist()
    assert after.equals(kept_before)  # every other row identical
    assert set(done.removed_files) == {shared, alone} and not exists(shared) and not exists(alone)
    # no snapshot left to time-travel to reads the sample
    tbl = catalog.load_table((DB, "sample_summary"))
    with iceberg.no_threads_left():
        for snap in tbl.snapshots():
            assert "gone" not in tbl.scan(snapshot_id=snap.snapshot_id).to_arrow().column("sample").to_pylist()
    # and no file in the table's folder holds a row of it
    files = [u for u in storage.list_uris(_storage_uri(_root(tmp_path, "sample_summary"))) if u.endswith(".parquet")]
    for uri in files:
        assert "gone" not in pq.read_table(io.BytesIO(storage.read_bytes(uri))).column("sample").to_pylist(), uri


def test_compaction_rewrites_a_runs_parts_into_one_file_and_retention_removes_them(catalog: Any,
                                                                                    tmp_path: Path) -> None:
    import time

    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    parts = [write_part(tmp_path, "sample_summary", "r1", {"sample": [f"s{i}"], "read_pairs_raw": [i]},
                        name=f"child={i:05d}") for i in range(4)]
    iceberg.commit_run(catalog, DB, "r1", {"sample_summary": parts})
    before = iceberg.scan(catalog, DB, "sample_summary").sort_by("sample")
    done = iceberg.compact_run(catalog, DB, "sample_summary", "r1")
    assert done.files_before == 4 and sorted(done.replaced) == sorted(parts)
    assert len(iceberg.catalog_files(catalog, DB, "sample_summary")) == 1
    assert iceberg.scan(catalog, DB, "sample_summary").sort_by("sample").equals(before)
    # the small files stay for time travel until retention expires the snapshots listing them
    assert all(exists(p) for p in parts)
    expired, removed = iceberg.expire_older_than(catalog, DB, "sample_summary", int(time.time() * 1000) + 1)
    assert expired and sorted(removed) == sorted(parts) and not any(exists(p) for p in parts)
    assert iceberg.scan(catalog, DB, "sample_summary").sort_by("sample").equals(before)


def test_first_commits_racing_on_a_table_glue_made_unpartitioned_all_land(catalog: Any, tmp_path: Path) -> None:
    """Glue's OpenTableFormatInput makes the table unpartitioned: each run's commit adds the run_id partition
    if it is missing, and runs doing it at once conflicted (a faults test's concurrent runs failed one with
    'Glue detected concurrent update') until the spec update was retried like the append."""
    columns = BY_NAME["sample_summary"].glue_table_input("X")["StorageDescriptor"]["Columns"]
    catalog.create_table((DB, "sample_summary"), iceberg.schema_from_glue_columns(columns),
                         location=_root(tmp_path, "sample_summary"), properties=iceberg.TABLE_PROPERTIES)
    runs = [f"r{i}" for i in range(4)]
    paths = {r: summary_rows(tmp_path, r, [f"s-{r}"], 1) for r in runs}
    barrier = threading.Barrier(len(runs))
    errors: list[BaseException] = []

    def commit(run: str) -> None:
        try:
            barrier.wait()
            iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"), create=False)
            iceberg.commit_run(catalog, DB, run, {"sample_summary": [paths[run]]})
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=commit, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(iceberg.scan(catalog, DB, "sample_summary").column("run_id").to_pylist()) == runs


def test_a_rollback_keeps_the_runs_committed_after_the_failed_one(catalog: Any, tmp_path: Path) -> None:
    """A run that commits while another's commit has died (before its rollback) is in every snapshot the rollback
    expires (they all list the failed run's file): it must still count as committed, once, after the rollback."""
    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    iceberg.commit_run(catalog, DB, "before", {"sample_summary": [summary_rows(tmp_path, "before", ["a"], 1)]})
    iceberg.commit_run(catalog, DB, "failed", {"sample_summary": [summary_rows(tmp_path, "failed", ["a"], 2)]})
    later = summary_rows(tmp_path, "later", ["b"], 3)
    iceberg.commit_run(catalog, DB, "later", {"sample_summary": [later]})
    assert iceberg.rollback_run(catalog, DB, "failed", ["sample_summary"]) == ["sample_summary"]
    assert iceberg.committed_runs(catalog, DB, "sample_summary") == ["before", "later"]
    # a commit of the later run made again (a retried step) adds nothing twice
    iceberg.commit_run(catalog, DB, "later", {"sample_summary": [later]})
    assert sorted(iceberg.scan(catalog, DB, "sample_summary").column("run_id").to_pylist()) == ["before", "later"]


def test_no_thread_of_pyiceberg_outlives_a_scan_or_a_commit(catalog: Any, tmp_path: Path) -> None:
    """pyiceberg keeps one process-wide thread pool (``ExecutorFactory``) once a scan or a commit used it; a
    thread left running makes every later fork of the process refuse (``seqlake.base.forked``: the aligner's
    processes, the counting helpers), so every in-process use of pyiceberg here joins its threads when done."""
    from seqlake.base import forked

    before = threading.active_count()
    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    iceberg.commit_run(catalog, DB, "r1", {"sample_summary": [summary_rows(tmp_path, "r1", ["a", "b"], 10)]})
    assert iceberg.scan(catalog, DB, "sample_summary").num_rows == 2
    iceberg.delete_sample(catalog, DB, "sample_summary", "a")
    assert threading.active_count() == before, forked.other_threads()
    if before == 1:  # no other thread of the test process: the fork guard lets a helper fork
        forked.fork_helper("a helper after pyiceberg", lambda: None).join()


def test_compaction_rewrites_a_runs_files_into_one_and_the_retention_removes_the_small_ones(
        catalog: Any, tmp_path: Path) -> None:
    import datetime as dt

    from seqlake.lake import compaction

    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    parts = [write_part(tmp_path, "sample_summary", "r1", {"sample": [f"s{i}"], "read_pairs_raw": [i]}, f"part-{i}")
             for i in range(3)]
    iceberg.commit_run(catalog, DB, "r1", {"sample_summary": parts})
    alone = summary_rows(tmp_path, "r2", ["x"], 9)  # a run of one file: nothing to compact
    iceberg.commit_run(catalog, DB, "r2", {"sample_summary": [alone]})
    before = iceberg.scan(catalog, DB, "sample_summary").sort_by("sample")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    record = compaction.compact(catalog, DB, _storage_uri(_LAKE["root"]), keep_days=0, tables=["sample_summary"],
                                now=lambda: later)
    assert record.compacted == {"sample_summary": ["r1"]} and record.files_replaced == 3
    assert iceberg.scan(catalog, DB, "sample_summary").sort_by("sample").equals(before)  # the same rows
    files = iceberg.catalog_files(catalog, DB, "sample_summary")
    assert len(files) == 2 and alone in files  # r1's three files are one now
    assert record.expired_snapshots and not any(exists(p) for p in parts)  # retention 0: the small files gone
    written = storage.list_uris(_storage_uri(f"{_LAKE['root']}/compactions"))
    assert len(written) == 1 and json.loads(read(written[0]))["files_replaced"] == 3


def test_a_rollback_raced_by_another_runs_commit_lands(catalog: Any, tmp_path: Path) -> None:
    """pyiceberg's delete checks that no file its filter might match was added meanwhile, by column statistics;
    ``run_id`` is a partition, not a column with statistics, so any run's append between the rollback's read of
    the table and its commit looked like a conflict (``ValidationException``: a failed run's rows stayed visible,
    seen in tests/faults). The rollback reads the table again and lands."""
    iceberg.ensure_table(catalog, DB, SAMPLE_SUMMARY, _root(tmp_path, "sample_summary"))
    iceberg.commit_run(catalog, DB, "before", {"sample_summary": [summary_rows(tmp_path, "before", ["a"], 1)]})
    iceberg.commit_run(catalog, DB, "failed", {"sample_summary": [summary_rows(tmp_path, "failed", ["a"], 2)]})
    racing = summary_rows(tmp_path, "racing", ["b"], 3)
    load, loads, raced = catalog.load_table, [], []

    def load_then_race(ident: Any) -> Any:
        tbl = load(ident)
        loads.append(ident)
        if len(loads) == 2:  # the read the delete starts from: another run commits right after it
            raced.append(True)
            iceberg.commit_run(catalog, DB, "racing", {"sample_summary": [racing]})
        return tbl

    catalog.load_table = load_then_race
    try:
        assert iceberg.rollback_run(catalog, DB, "failed", ["sample_summary"]) == ["sample_summary"]
    finally:
        del catalog.load_table
    assert raced
    assert sorted(iceberg.scan(catalog, DB, "sample_summary").column("run_id").to_pylist()) == ["before", "racing"]
