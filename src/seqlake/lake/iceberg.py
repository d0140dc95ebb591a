"""The result tables as Apache Iceberg tables (format version 2): the schema, the commit, the history.

Every table of :mod:`seqlake.lake.tables` is an Iceberg table whose columns are the table's own, in
order (field ids 1..n), then ``run_id`` (n + 1), the identity partition. The data files the reducers,
the children and the merge wrote under ``results/<table>/run_id=<id>/`` hold no ``run_id`` column: it
is the partition value recorded in the manifest, which the Iceberg spec has readers project into the
missing column ("Column Projection": an identity-partitioned field absent from a file reads its
partition value), so the commit adds the files as they are, with no rewrite (:func:`data_file`).

The commit (:func:`commit_run`) is one Iceberg commit per table, each a fast append of the run's files
with the run id in the snapshot's summary (``seqlake.run-id``), retried on a conflict with another
run's commit (optimistic concurrency: the catalog swaps the metadata location only if it is still the
one the commit started from; Glue checks the table's ``VersionId``). A table that already holds the
run's snapshot is skipped, so a re-run of the commit adds nothing twice. If a table's commit fails,
:func:`rollback_run` takes the run out of the tables it had reached: their rows deleted (a
metadata-only delete: the partition's files are dropped whole), the snapshots that still list the
files expired, and the files removed, so that no query, time travel or repair reaches them.

pyiceberg runs its scans and commits on one process-wide thread pool (``ExecutorFactory``) that it never shuts
down; a thread left running makes every later fork of the process refuse (:mod:`seqlake.base.forked`: the
aligner's processes, the counting helpers), and tests, the local cloud and ``seqlake local query`` call
pyiceberg in processes that fork afterwards. So every public function here runs inside
:func:`no_threads_left`, which joins that pool's threads when the last in-process user of pyiceberg is done.

This module takes a pyiceberg catalog and never makes one: the AWS steps and the local cloud make it
(Glue, with their own clients), so the lake stays free of boto3.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from seqlake.lake.tables import ICEBERG_FORMAT_VERSION, PARTITION_KEYS, TABLES, Table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table as IcebergTable
    from pyiceberg.types import PrimitiveType

FORMAT_VERSION = ICEBERG_FORMAT_VERSION
#: the snapshot summary property naming the run a snapshot added (its audit trail and the commit's idempotence)
RUN_ID_PROPERTY = "seqlake.run-id"
#: what a snapshot did beyond the append: ``delete-sample``, ``rollback``, ``compact``
ACTION_PROPERTY = "seqlake.action"
#: conflicts with other runs' commits retried per table before the commit fails (each retry re-reads the table)
COMMIT_ATTEMPTS = 12
#: the first retry's pause; doubled each time up to :data:`MAX_BACKOFF_SECONDS`
FIRST_BACKOFF_SECONDS = 0.05
MAX_BACKOFF_SECONDS = 2.0
#: Parquet footers read at once when a run's files are added (each one ranged GET on S3)
FOOTER_READERS = 64
#: the partition column (Hive's ``run_id=<id>`` folders of the same files)
RUN_ID = PARTITION_KEYS[0][0]
#: Iceberg's first partition field id (the spec reserves 1000 and up for partition fields)
PARTITION_FIELD_ID = 1000
TABLE_PROPERTIES: dict[str, str] = {
    "format-version": str(FORMAT_VERSION),
    # what pyiceberg writes itself (deletes' rewrites, compaction) is compressed as the merge's files are
    "write.parquet.compression-codec": "zstd",
}


#: callers inside :func:`no_threads_left` now, in any thread (the pool is shut down when the last one leaves)
_pool_users = [0]
_pool_lock = threading.Lock()


@contextmanager
def no_threads_left() -> Iterator[None]:
    """Use pyiceberg inside; on leaving (when no other thread of the process is inside too) pyiceberg's
    process-wide thread pool is shut down, its threads joined, and the factory reset, so the next use starts a
    new pool and the process is left with no thread of pyiceberg's. Nests; usable as a decorator."""
    with _pool_lock:
        _pool_users[0] += 1
    try:
        yield
    finally:
        with _pool_lock:  # held while joining: a new user waits and then gets a new pool, never the dying one
            _pool_users[0] -= 1
            if _pool_users[0] == 0:
                _shut_down_pool()


def _shut_down_pool() -> None:
    from pyiceberg.utils.concurrent import ExecutorFactory

    pool, ExecutorFactory._instance = ExecutorFactory._instance, None
    if pool is not None and ExecutorFactory._instance_pid == os.getpid():  # a forked child's copy has no threads
        pool.shutdown(wait=True)


def iceberg_type(arrow_type: pa.DataType) -> PrimitiveType:
    """The Iceberg type a column's Arrow type reads as (Iceberg has no 8- or 16-bit integers: ``int``)."""
    from pyiceberg import types as it

    if pa.types.is_string(arrow_type):
        return it.StringType()
    if pa.types.is_int64(arrow_type):
        return it.LongType()
    if pa.types.is_integer(arrow_type):
        return it.IntegerType()
    if pa.types.is_float64(arrow_type):
        return it.DoubleType()
    if pa.types.is_boolean(arrow_type):
        return it.BooleanType()
    if pa.types.is_timestamp(arrow_type):
        return it.TimestamptzType() if arrow_type.tz else it.TimestampType()
    raise TypeError(f"no Iceberg type for {arrow_type}")


def iceberg_schema(table: Table) -> Schema:
    """The table's columns (ids 1..n, in order) and ``run_id`` last. Every field is optional: Athena does not
    hold Iceberg's ``required`` and a required field would refuse a file written before the column existed."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, StringType

    fields = [NestedField(i, c.name, iceberg_type(c.type), required=False, doc=c.doc)
              for i, c in enumerate(table.columns, start=1)]
    fields.append(NestedField(len(fields) + 1, RUN_ID, StringType(), required=False, doc="the run's id"))
    return Schema(*fields)


#: Glue (Hive DDL) column types -> Iceberg types, as Glue reads a table's columns when it creates its Iceberg table
_GLUE_TO_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "smallint": pa.int16(), "tinyint": pa.int8(),
    "double": pa.float64(), "boolean": pa.bool_(), "timestamp": pa.timestamp("us", tz="UTC"),
}


def schema_from_glue_columns(columns: Sequence[Mapping[str, Any]]) -> Schema:
    """An Iceberg schema of Glue columns (``[{"Name", "Type", "Comment"}]``), ids 1..n in order, all optional."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    return Schema(*[NestedField(i, str(c["Name"]), iceberg_type(_GLUE_TO_ARROW[str(c["Type"])]), required=False,
                                doc=c.get("Comment"))
                    for i, c in enumerate(columns, start=1)])


def partition_spec(schema: Schema) -> PartitionSpec:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    source = schema.find_field(RUN_ID).field_id
    return PartitionSpec(PartitionField(source, PARTITION_FIELD_ID, IdentityTransform(), RUN_ID))


def identifier(database: str, table: str) -> tuple[str, str]:
    return (database, table)


@no_threads_left()
def ensure_table(catalog: Catalog, database: str, table: Table, location: str, *, create: bool = True) -> IcebergTable:
    """The table, created (format 2, partitioned by ``run_id``) when the catalog has none and ``create``
    (else ``NoSuchTableError``: the commit never makes a table the template owns). A table created without
    the partition (Glue's ``OpenTableFormatInput`` makes an unpartitioned one) gets it added once."""
    from pyiceberg.exceptions import NoSuchTableError

    ident = identifier(database, table.name)
    try:
        tbl = catalog.load_table(ident)
    except NoSuchTableError:
        if not create:
            raise
        schema = iceberg_schema(table)
        return catalog.create_table(ident, schema, location=location.rstrip("/"),
                                    partition_spec=partition_spec(schema), properties=TABLE_PROPERTIES)
    def add_partition() -> IcebergTable:
        current = catalog.load_table(ident)  # re-read: another run's first commit may have added it meanwhile
        if not any(f.name == RUN_ID for f in current.spec().fields):
            with current.update_spec() as spec:
                spec.add_identity(RUN_ID)
        return current  # the commit updated it in place: no second read

    if not any(f.name == RUN_ID for f in tbl.spec().fields):
        tbl = _with_retries(f"partition {table.name}", add_partition)  # two runs' first commits race here too
    return tbl


@no_threads_left()
def ensure_tables(catalog: Catalog, database: str, table_root: Callable[[str], str],
                  tables: Iterable[Table] = TABLES) -> dict[str, IcebergTable]:
    return {table.name: ensure_table(catalog, database, table, table_root(table.name)) for table in tables}


def data_file(tbl: IcebergTable, path: str, run_id: str) -> DataFile:
    """The manifest entry of a Parquet file as written (no rewrite): its column statistics mapped to the
    table's field ids by name, ``run_id`` the partition value. ``ValueError`` when its columns do not fit the
    table's schema (a column of another type, a column the table lacks)."""
    from pyiceberg.io.pyarrow import (
        _check_pyarrow_schema_compatible,
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    input_file = tbl.io.new_input(path)
    with input_file.open() as stream:
        metadata = pq.read_metadata(stream)
    schema = tbl.schema()
    _check_pyarrow_schema_compatible(schema, metadata.schema.to_arrow_schema(), format_version=2)
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=metadata,
        stats_columns=compute_statistics_plan(schema, tbl.metadata.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
        partition=Record(run_id), file_size_in_bytes=len(input_file), sort_order_id=None,
        spec_id=tbl.metadata.default_spec_id, equality_ids=None, key_metadata=None,
        **statistics.to_serialized_dict(),
    )


def run_snapshot(tbl: IcebergTable, run_id: str) -> int | None:
    """The id of the snapshot that added ``run_id`` to the table, if one is in its history."""
    for snap in tbl.snapshots():
        if snap.summary is not None and snap.summary.get(RUN_ID_PROPERTY) == run_id \
                and snap.summary.get(ACTION_PROPERTY) is None:
            return snap.snapshot_id
    return None


def _with_retries(what: str, attempt: Callable[[], Any], attempts: int = COMMIT_ATTEMPTS) -> Any:
    """Run ``attempt`` until it does not conflict with another commit; the last conflict is raised.

    A conflict is the catalog refusing the commit (``CommitFailedException``) or pyiceberg's own check, on its
    internal retry, that nothing its filter might match was added or deleted meanwhile
    (``ValidationException``). That check reads column statistics only: ``run_id`` is a partition, with no
    statistics in the files, so a rollback's ``run_id == X`` "might match" every other run's append, and any
    run committing during a rollback failed it. ``attempt`` reads the table afresh each time."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    pause = FIRST_BACKOFF_SECONDS
    for n in range(1, attempts + 1):
        try:
            return attempt()
        except (CommitFailedException, ValidationException):
            if n == attempts:
                raise
            time.sleep(pause)
            pause = min(pause * 2, MAX_BACKOFF_SECONDS)
    raise AssertionError(what)  # pragma: no cover - the loop returns or raises


@no_threads_left()
def append_run(catalog: Catalog, database: str, table: str, run_id: str, paths: Sequence[str], *,
               loaded: IcebergTable | None = None) -> int:
    """One Iceberg commit adding the run's files to ``table``; returns its snapshot id (the one already
    there when the table holds the run: a commit run twice adds nothing twice). ``loaded``: the table as
    just read (:func:`ensure_table`), for the first attempt."""
    ident = identifier(database, table)
    entries: list[DataFile] = []
    fresh = [loaded] if loaded is not None else []

    def attempt() -> int:
        # re-read on every attempt but a first given one: another run may have committed
        tbl = fresh.pop() if fresh else catalog.load_table(ident)
        done = run_snapshot(tbl, run_id)
        if done is not None:
            return done
        current = tbl.current_snapshot()
        if current is not None and _may_hold_run(tbl, run_id):  # its append expired by another run's rollback
            return current.snapshot_id
        if len(entries) != len(paths):  # each file's footer read once, in parallel (a 1,000-child run's parts)
            with ThreadPoolExecutor(max(1, min(FOOTER_READERS, len(paths)))) as pool:
                entries[:] = pool.map(lambda path: data_file(tbl, path, run_id), paths)
        with tbl.transaction() as tx:
            if tx.table_metadata.name_mapping() is None:
                # files without field ids are read by name: the mapping is the table's, recorded once
                tx.set_properties({"schema.name-mapping.default":
                                   tx.table_metadata.schema().name_mapping.model_dump_json()})
            with tx.update_snapshot(snapshot_properties={RUN_ID_PROPERTY: run_id}).fast_append() as append:
                for entry in entries:
                    append.append_data_file(entry)
        snap = tbl.current_snapshot()  # the commit updated ``tbl`` to the catalog's answer
        assert snap is not None
        return snap.snapshot_id

    return int(_with_retries(f"{table} {run_id}", attempt))


@dataclass
class CommitOutcome:
    #: table -> the snapshot that added the run
    snapshots: dict[str, int] = field(default_factory=dict)


@no_threads_left()
def commit_run(catalog: Catalog, database: str, run_id: str, files: Mapping[str, Sequence[str]], *,
               before_table: Callable[[str, int], None] | None = None,
               loaded: Mapping[str, IcebergTable] | None = None) -> CommitOutcome:
    """Add the run's files to each table (``files``: table -> file URIs, in commit order), one Iceberg commit
    per table. On any error the tables already committed are rolled back (:func:`rollback_run`) and the
    error raised. ``before_table(table, committed_so_far)`` is the tests' hook to fail it between tables;
    ``loaded``: tables just read, each used for its first attempt."""
    outcome = CommitOutcome()
    try:
        for table, paths in files.items():
            if before_table is not None:
                before_table(table, len(outcome.snapshots))
            outcome.snapshots[table] = append_run(catalog, database, table, run_id, paths,
                                                  loaded=(loaded or {}).get(table))
    except BaseException:
        rollback_run(catalog, database, run_id, list(outcome.snapshots))
        raise
    return outcome


def live_files(tbl: IcebergTable) -> set[str]:
    """Every data file any snapshot still in the table's history references."""
    live: set[str] = set()
    for snap in tbl.snapshots():
        for manifest in snap.manifests(tbl.io):
            for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
                live.add(entry.data_file.file_path)
    return live


def _snapshot_files(tbl: IcebergTable, snapshot_id: int) -> set[str]:
    snap = tbl.snapshot_by_id(snapshot_id)
    if snap is None:
        return set()
    return {e.data_file.file_path for m in snap.manifests(tbl.io)
            for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True)}


@no_threads_left()
def expire_referencing(catalog: Catalog, ident: tuple[str, str], paths: set[str]) -> list[int]:
    """Expire every snapshot (but the current one) that lists one of ``paths``; returns their ids."""
    def attempt() -> list[int]:
        tbl = catalog.load_table(ident)
        current = tbl.current_snapshot()
        doomed = [s.snapshot_id for s in tbl.snapshots()
                  if (current is None or s.snapshot_id != current.snapshot_id)
                  and _snapshot_files(tbl, s.snapshot_id) & paths]
        if doomed:
            tbl.maintenance.expire_snapshots().by_ids(doomed).commit()
        return doomed

    return list(_with_retries(f"expire {ident}", attempt))


@no_threads_left()
def remove_unreferenced(tbl: IcebergTable, candidates: Iterable[str]) -> list[str]:
    """Delete those of ``candidates`` no snapshot references any more; returns them."""
    live = live_files(tbl)
    removed = []
    for path in sorted(set(candidates) - live):
        tbl.io.delete(path)
        removed.append(path)
    return removed


@no_threads_left()
def rollback_run(catalog: Catalog, database: str, run_id: str, tables: Iterable[str]) -> list[str]:
    """Take ``run_id`` out of ``tables``: its rows deleted (whole files: the partition), the snapshots that
    list its files expired, the files removed. Returns the tables it was in. Idempotent."""
    rolled: list[str] = []
    for table in tables:
        ident = identifier(database, table)
        tbl = catalog.load_table(ident)
        added = run_snapshot(tbl, run_id)
        paths = _snapshot_files(tbl, added) - _snapshot_files(tbl, _parent(tbl, added)) if added else set()
        if not paths:
            continue

        def delete(ident: tuple[str, str] = ident) -> None:
            catalog.load_table(ident).delete(run_filter(run_id),
                                              snapshot_properties={RUN_ID_PROPERTY: run_id,
                                                                   ACTION_PROPERTY: "rollback"})

        _with_retries(f"rollback {table}", delete)
        expire_referencing(catalog, ident, paths)
        remove_unreferenced(catalog.load_table(ident), paths)
        rolled.append(table)
    return rolled


def run_filter(run_id: str) -> str:
    """The row filter of one run (a run id is letters, digits and dashes: nothing to escape)."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    return f"{RUN_ID} == '{run_id}'"


def _parent(tbl: IcebergTable, snapshot_id: int | None) -> int:
    snap = tbl.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    return snap.parent_snapshot_id if snap is not None and snap.parent_snapshot_id is not None else -1


@no_threads_left()
def scan(catalog: Catalog, database: str, table: str, snapshot_id: int | None = None) -> pa.Table:
    """The table's rows at its current snapshot (or at ``snapshot_id``: time travel), as Arrow."""
    tbl = catalog.load_table(identifier(database, table))
    return tbl.scan(snapshot_id=snapshot_id).to_arrow()


@no_threads_left()
def catalog_files(catalog: Catalog, database: str, table: str) -> set[str]:
    """The data files the table's current snapshot reads."""
    tbl = catalog.load_table(identifier(database, table))
    snap = tbl.current_snapshot()
    return _snapshot_files(tbl, snap.snapshot_id) if snap is not None else set()


def _current_runs(tbl: IcebergTable) -> set[str]:
    """The runs whose rows the table's current snapshot reads (the ``run_id`` partition of its files)."""
    snap = tbl.current_snapshot()
    if snap is None:
        return set()
    return {str(e.data_file.partition[0]) for m in snap.manifests(tbl.io)
            for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True)}


def _may_hold_run(tbl: IcebergTable, run_id: str) -> bool:
    """Whether the current snapshot may read a file of ``run_id``: only the manifests whose ``run_id`` bounds
    (the manifest list's partition summaries) take it in are read, so that a commit's check costs one
    manifest list, not every manifest of the table's history."""
    snap = tbl.current_snapshot()
    if snap is None:
        return False
    spec_ids = {spec.spec_id: spec for spec in tbl.specs().values()}
    for manifest in snap.manifests(tbl.io):
        spec = spec_ids.get(manifest.partition_spec_id)
        at = next((i for i, f in enumerate(spec.fields) if f.name == RUN_ID), None) if spec else None
        summary = manifest.partitions[at] if at is not None and manifest.partitions and \
            at < len(manifest.partitions) else None
        if summary is not None and summary.lower_bound is not None and summary.upper_bound is not None \
                and not summary.lower_bound.decode() <= run_id <= summary.upper_bound.decode():
            continue
        if any(str(e.data_file.partition[at if at is not None else 0]) == run_id
               for e in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True)):
            return True
    return False


@no_threads_left()
def committed_runs(catalog: Catalog, database: str, table: str) -> list[str]:
    """The runs the table's current state holds, in commit order: those whose append is in the table's history
    and was not rolled back since (a run with no rows counts: its commit is there), and those whose rows the
    current snapshot reads although their append snapshot was expired (a rollback expires every snapshot that
    lists the failed run's files, those of runs committed after it too): after the others, by run id."""
    tbl = catalog.load_table(identifier(database, table))
    if tbl.current_snapshot() is None:
        return []
    added: dict[str, None] = {}
    for snap in sorted(tbl.snapshots(), key=lambda s: (s.timestamp_ms, s.sequence_number or 0)):
        if snap.summary is None or snap.summary.get(RUN_ID_PROPERTY) is None:
            continue
        run = str(snap.summary.get(RUN_ID_PROPERTY))
        action = snap.summary.get(ACTION_PROPERTY)
        if action == "rollback":
            added.pop(run, None)
        elif action is None:
            added[run] = None
    return [*added, *sorted(_current_runs(tbl) - added.keys())]


def sample_filter(sample: str) -> str:
    """The row filter of one sample (quoted as pyiceberg's filter grammar quotes a string: '' for ')."""
    return "sample == '" + sample.replace("'", "''") + "'"


@dataclass
class SampleDeletion:
    """What :func:`delete_sample` did to one table."""

    table: str
    #: the data files that held the sample's rows (rewritten without them, or dropped whole), now removed
    removed_files: list[str] = field(default_factory=list)
    #: the snapshots expired because they still listed one of those files
    expired_snapshots: list[int] = field(default_factory=list)
    #: the delete's snapshot (None: the table held no row of the sample)
    snapshot: int | None = None


@no_threads_left()
def delete_sample(catalog: Catalog, database: str, table: str, sample: str) -> SampleDeletion:
    """Remove every row of ``sample`` from ``table`` so that no byte of it stays reachable or stored: an Iceberg
    delete (files with other samples' rows rewritten without it, files of its rows alone dropped), then every
    older snapshot that still lists one of the replaced files expired, then those files removed. Other rows are
    untouched (copied as they were into the rewritten files)."""
    ident = identifier(database, table)
    before = catalog_files(catalog, database, table)
    outcome = SampleDeletion(table)

    def delete() -> None:
        catalog.load_table(ident).delete(sample_filter(sample),
                                          snapshot_properties={ACTION_PROPERTY: "delete-sample"})

    _with_retries(f"delete {sample} from {table}", delete)
    replaced = before - catalog_files(catalog, database, table)
    if not replaced:
        return outcome
    current = catalog.load_table(ident).current_snapshot()
    outcome.snapshot = current.snapshot_id if current is not None else None
    outcome.expired_snapshots = expire_referencing(catalog, ident, replaced)
    outcome.removed_files = remove_unreferenced(catalog.load_table(ident), replaced)
    return outcome


@dataclass
class Compaction:
    """What :func:`compact_run` did to one run's partition of a table."""

    table: str
    run_id: str
    files_before: int = 0
    #: the files rewritten into one (removed once no snapshot lists them: :func:`expire_older_than`)
    replaced: list[str] = field(default_factory=list)


@no_threads_left()
def compact_run(catalog: Catalog, database: str, table: str, run_id: str, *, min_files: int = 2) -> Compaction:
    """Rewrite a run's partition of ``table`` into one file when it has at least ``min_files`` (a run's many
    small parts: one per child or region); the rows are the same, the commit one Iceberg overwrite. Memory: the
    partition's rows (a run's share of one table, read into Arrow once)."""
    ident = identifier(database, table)
    tbl = catalog.load_table(ident)
    outcome = Compaction(table, run_id)
    snap = tbl.current_snapshot()
    if snap is None:
        return outcome
    files = [e.data_file.file_path for m in snap.manifests(tbl.io)
             for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True)
             if e.data_file.partition[0] == run_id]
    outcome.files_before = len(files)
    if len(files) < min_files:
        return outcome

    def rewrite() -> None:
        current = catalog.load_table(ident)
        rows = current.scan(row_filter=run_filter(run_id)).to_arrow()
        current.overwrite(rows, overwrite_filter=run_filter(run_id),
                          snapshot_properties={RUN_ID_PROPERTY: run_id, ACTION_PROPERTY: "compact"})

    _with_retries(f"compact {table} {run_id}", rewrite)
    outcome.replaced = files
    return outcome


@no_threads_left()
def expire_older_than(catalog: Catalog, database: str, table: str, older_than_ms: int) -> tuple[list[int], list[str]]:
    """Retention: expire the snapshots committed before ``older_than_ms`` (never the current one), then remove
    the data files no remaining snapshot lists. Returns the expired snapshots and the removed files."""
    ident = identifier(database, table)
    tbl = catalog.load_table(ident)
    current = tbl.current_snapshot()
    doomed = [s.snapshot_id for s in tbl.snapshots()
              if s.timestamp_ms < older_than_ms and (current is None or s.snapshot_id != current.snapshot_id)]
    if not doomed:
        return [], []
    files = set().union(*(_snapshot_files(tbl, s) for s in doomed))
    tbl.maintenance.expire_snapshots().by_ids(doomed).commit()
    return doomed, remove_unreferenced(catalog.load_table(ident), files)
