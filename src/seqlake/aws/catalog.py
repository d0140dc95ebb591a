"""Glue partitions: a committed run becomes visible to Athena in one step, and only then.

``BatchCreatePartition`` registers ``run_id=<id>`` in every table after all of the run's files are in
place (the commit step calls this last). A partition that already exists (a re-run of the commit)
is not an error. A failed run gets a partition in ``runs`` only: its row says why it failed, and the
result tables never show a failed run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from seqlake.base import clients
from seqlake.base.layout import LakeLayout
from seqlake.lake.tables import BY_NAME, PARTITION_KEYS


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
