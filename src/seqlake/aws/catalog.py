"""The Glue catalog: the run's Iceberg commits to the result tables, and the ``runs`` table's partitions.

The result tables are Iceberg tables (:mod:`seqlake.lake.iceberg`): :func:`commit_results` adds the files the
commit published under ``results/<table>/run_id=<id>/`` to each, one Iceberg commit per table through
pyiceberg's Glue catalog (Glue swaps a table's ``metadata_location`` only at the version the commit read),
and takes the run out of every table again if one fails. :func:`rollback_results` does that for a commit
that died without unwinding (the failure step calls it).

``runs`` is a Hive table: ``BatchCreatePartition`` registers ``run_id=<id>`` after the run's row is
written, last (a partition that already exists, a re-run of the commit, is not an error). A failed run
gets a partition in ``runs`` only: its row says why it failed, and the result tables never show it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from seqlake.base import clients, storage
from seqlake.base.layout import LakeLayout
from seqlake.lake.tables import BY_NAME, PARTITION_KEYS

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from seqlake.lake.iceberg import CommitOutcome


class CatalogError(RuntimeError):
    """Glue refused to register a partition for a reason other than "already exists"."""


def partition_input(table: str, location_root: str, run_id: str) -> dict[str, Any]:
    """The ``PartitionInput`` of ``run_id=<id>`` with the table's own storage descriptor."""
    t = BY_NAME[table]
    ti = t.glue_table_input(location=f"{location_root}{table}/")
    sd = dict(ti["StorageDescriptor"])
    sd["Location"] = f"{location_root}{table}/run_id={run_id}/"
    assert [k for k, _ in PARTITION_KEYS] == ["run_id"]
    return {"Values": [run_id], "StorageDescriptor": sd, "Parameters": {"classification": "parquet"}}


def register_run(database: str, bucket: str, run_id: str, tables: Iterable[str]) -> list[str]:
    """Register the run's partition in each table; return the tables that now have it."""
    glue = clients.client("glue")
    root = LakeLayout(f"s3://{bucket}").results_root
    done: list[str] = []
    for table in tables:
        r = glue.batch_create_partition(DatabaseName=database, TableName=table,
                                        PartitionInputList=[partition_input(table, root, run_id)])
        errors = [e for e in r.get("Errors", [])
                  if e.get("ErrorDetail", {}).get("ErrorCode") != "AlreadyExistsException"]
        if errors:
            detail = errors[0].get("ErrorDetail", {})
            raise CatalogError(f"{database}.{table} run_id={run_id}: {detail.get('ErrorCode')}: "
                               f"{detail.get('ErrorMessage')}")
        done.append(table)
    return done


def iceberg_catalog() -> Catalog:
    """pyiceberg's Glue catalog on this process's Glue client, its files through :mod:`seqlake.base.storage`."""
    from pyiceberg.catalog.glue import GlueCatalog

    from seqlake.lake.iceberg_io import FILE_IO

    return GlueCatalog("glue", client=clients.client("glue"), **{"py-io-impl": FILE_IO})


def run_files(bucket: str, run_id: str, table: str) -> list[str]:
    """The Parquet files the commit published for the run into ``table`` (one listing)."""
    prefix = f"{LakeLayout(f's3://{bucket}').results_root}{table}/run_id={run_id}/"
    return [uri for uri in storage.list_uris(prefix) if uri.endswith(".parquet")]


def commit_results(database: str, bucket: str, run_id: str, tables: Iterable[str], *,
                   before_table: Callable[[str, int], None] | None = None) -> CommitOutcome:
    """Add the run's published files to each Iceberg table, one commit per table; all tables or none."""
    from seqlake.lake import iceberg

    catalog = iceberg_catalog()
    root = LakeLayout(f"s3://{bucket}").results_root
    tables = list(tables)
    with iceberg.no_threads_left():  # one pyiceberg thread pool for the whole commit, joined at its end
        loaded = {  # the template's tables are made unpartitioned by Glue: run_id is added once
            table: iceberg.ensure_table(catalog, database, BY_NAME[table], f"{root}{table}", create=False)
            for table in tables}
        files = {table: run_files(bucket, run_id, table) for table in tables}
        return iceberg.commit_run(catalog, database, run_id, files, before_table=before_table, loaded=loaded)


def rollback_results(database: str, run_id: str, tables: Iterable[str]) -> list[str]:
    """Take the run out of the Iceberg tables a commit that died had reached; returns those tables."""
    from seqlake.lake import iceberg

    return iceberg.rollback_run(iceberg_catalog(), database, run_id, tables)


def discard_run_files(database: str, bucket: str, run_id: str, tables: Iterable[str]) -> list[str]:
    """Remove what a failed commit published under ``results/<table>/run_id=<id>/`` that no snapshot of the
    table lists (after :func:`rollback_results`: all of it): the files of the tables its commit never reached
    are in no table, but a crawler, a Hive table over ``results/`` or a repair would still find them. Their
    staged copies under ``runs/`` stay, so a re-run publishes them again. Returns the removed URIs."""
    from seqlake.lake import iceberg

    catalog = iceberg_catalog()
    removed: list[str] = []
    for table in tables:
        published = run_files(bucket, run_id, table)
        if published:
            tbl = catalog.load_table(iceberg.identifier(database, table))
            removed += iceberg.remove_unreferenced(tbl, published)
    return removed
