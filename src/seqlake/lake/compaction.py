"""Compaction and retention of the Iceberg tables (issue 36): a run's many small files rewritten into one per
table, snapshots older than the retention expired and the files no snapshot lists any more removed.

A run adds one file per child or region to a table (a 1,000-child run: 1,000 ``alignments`` files); a query
opens each. :func:`compact` rewrites each run's partition of each table that has at least ``min_files`` files
into one (:func:`seqlake.lake.iceberg.compact_run`: the rows read into Arrow and written again, one Iceberg
overwrite), then expires the snapshots committed more than ``keep_days`` ago (never the current one) and
removes the files only they listed (:func:`seqlake.lake.iceberg.expire_older_than`), so the replaced small
files go once the retention has passed (time travel reaches back that far).

Bounded: a partition larger than ``max_bytes`` is left as it is (its rows would be in memory at once), and no
partition is started after ``deadline`` (a Lambda's 15 minutes; the next run goes on where this one stopped).
What it did is returned, and written under ``compactions/`` (:meth:`seqlake.base.layout.LakeLayout.compaction`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from seqlake.base import storage
from seqlake.base.layout import LakeLayout
from seqlake.lake import iceberg
from seqlake.lake.tables import ICEBERG_TABLES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

#: a run's partition with fewer files is left alone
MIN_FILES = 2
#: the largest partition rewritten (its rows are read into memory at once): 256 MiB of Parquet
MAX_BYTES = 256 << 20
#: snapshots younger than this are kept (time travel reaches back this far); older ones expire
KEEP_DAYS = 7.0


@dataclass
class CompactionRecord:
    """What one compaction did."""

    started_at: str
    finished_at: str = ""
    #: table -> runs whose partition was rewritten into one file
    compacted: dict[str, list[str]] = field(default_factory=dict)
    #: small files replaced (removed once the snapshots listing them expire)
    files_replaced: int = 0
    #: table -> runs left as they were: their partition is larger than ``max_bytes``
    too_large: dict[str, list[str]] = field(default_factory=dict)
    #: table -> snapshots expired (older than the retention)
    expired_snapshots: dict[str, int] = field(default_factory=dict)
    files_removed: int = 0
    #: the deadline came before every partition was looked at
    stopped_early: bool = False

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True).encode()


def _partitions(catalog: Catalog, database: str, table: str) -> dict[str, tuple[int, int]]:
    """run -> (files, bytes) of the table's current snapshot."""
    tbl = catalog.load_table(iceberg.identifier(database, table))
    snap = tbl.current_snapshot()
    out: dict[str, tuple[int, int]] = {}
    if snap is None:
        return out
    for manifest in snap.manifests(tbl.io):
        for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
            run = str(entry.data_file.partition[0])
            files, size = out.get(run, (0, 0))
            out[run] = (files + 1, size + entry.data_file.file_size_in_bytes)
    return out


@iceberg.no_threads_left()
def compact(catalog: Catalog, database: str, lake_root: str, *, keep_days: float = KEEP_DAYS,
            max_bytes: int = MAX_BYTES, min_files: int = MIN_FILES, deadline: float | None = None,
            tables: Iterable[str] = ICEBERG_TABLES,
            now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> CompactionRecord:
    """Compact every Iceberg table's runs, then apply the retention (module docstring); the record is written
    under ``lake_root``'s ``compactions/``. ``deadline``: a ``time.monotonic()`` after which no partition starts."""
    started = now()
    record = CompactionRecord(started.isoformat(timespec="seconds"))
    for table in sorted(tables):
        for run, (files, size) in sorted(_partitions(catalog, database, table).items()):
            if files < min_files:
                continue
            if size > max_bytes:
                record.too_large.setdefault(table, []).append(run)
                continue
            if deadline is not None and time.monotonic() > deadline:
                record.stopped_early = True
                break
            done = iceberg.compact_run(catalog, database, table, run, min_files=min_files)
            if done.replaced:
                record.compacted.setdefault(table, []).append(run)
                record.files_replaced += len(done.replaced)
        older_than_ms = int((started.timestamp() - keep_days * 86400) * 1000)
        expired, removed = iceberg.expire_older_than(catalog, database, table, older_than_ms)
        if expired:
            record.expired_snapshots[table] = len(expired)
        record.files_removed += len(removed)
    record.finished_at = now().isoformat(timespec="seconds")
    storage.write_bytes(LakeLayout(lake_root.rstrip("/")).compaction(record.finished_at), record.to_json())
    return record
