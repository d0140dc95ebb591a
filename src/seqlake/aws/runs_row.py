"""The run's row in the ``runs`` table: one Parquet file in the run's ``runs`` partition
(:meth:`seqlake.base.layout.RunLayout.result_file`), from a :class:`~seqlake.aws.status.RunStatus`.

Apart from :mod:`seqlake.aws.status` because it needs pyarrow, which the plan Lambda does without.
"""

from __future__ import annotations

from seqlake.aws import catalog
from seqlake.aws.status import RunStatus, write_status
from seqlake.base.layout import RunLayout
from seqlake.lake.parquet_io import to_arrow, write_table
from seqlake.lake.tables import RUNS


def runs_row_uri(bucket: str, run_id: str) -> str:
    return RunLayout.in_bucket(bucket, run_id).result_file(RUNS.name)


def write_runs_row(status: RunStatus) -> str:
    """Write the run's ``runs`` row as one Parquet file and return its URI."""
    row = status.runs_row()
    uri = runs_row_uri(status.bucket, status.run_id)
    write_table(uri, to_arrow(RUNS.name, {k: [v] for k, v in row.items()}))
    return uri


def record_unsuccessful(status: RunStatus, database: str) -> None:
    """What a failed or rejected run leaves: ``status.json``, the ``runs`` row, then the run's
    partition in ``runs`` only (no result table ever shows it).

    Idempotent: the files are rewritten in place and an existing partition is not an error, so a retry
    or a redelivered event leaves the same state.
    """
    status.partitions = [RUNS.name]
    write_status(status)
    write_runs_row(status)
    catalog.register_run(database, status.bucket, status.run_id, [RUNS.name])
