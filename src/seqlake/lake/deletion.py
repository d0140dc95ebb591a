"""Delete a sample everywhere (issue 36: a participant withdraws consent): its rows, its files, its objects.

:func:`delete_sample` takes a pyiceberg catalog and the lake's root, and is the same code wherever it runs (the
local state folder: ``seqlake local delete-sample``; a bucket: ``s3://bucket``). In order:

1. the runs that hold the sample and its uploaded files, read from the tables (``samples.fastq_1/2``) before
   anything is removed; a name no table holds is refused, naming the samples whose names differ only in case;
2. every Iceberg table's rows of the sample removed (:func:`seqlake.lake.iceberg.delete_sample`: files with
   other samples' rows rewritten without them, the snapshots that still list the old files expired, the files
   removed), so neither a query nor time travel reaches them;
3. the Parquet files under each table's folder that no snapshot lists and that hold a row of the sample (what a
   failed commit or an expired snapshot left): removed;
4. the objects of the sample: its uploads, its per-sample files under ``results/genomes/`` (BAM, index, VCF,
   consensus), and in each of its runs what the run staged under ``runs/<id>/`` but its ``status.json``
   (parts, slices and the plan hold or name every sample of the run) and the report folder (a run's report
   shows every sample of the run: it is removed whole, not re-rendered);
5. the records its runs keep rewritten without its name: ``status.json`` and the ``runs`` row
   (:mod:`seqlake.lake.redaction`); the runs' samplesheets (each names every sample of its run) are removed in
   step 4, with the uploads;
6. an audit record ``deletions/<time>-<sample digest>.json`` (:meth:`seqlake.base.layout.LakeLayout.deletion`):
   who, when, which tables, runs, row counts and objects; never a row of the sample.

What step 1 found is written first (``deletions/pending-<digest>.json``,
:meth:`seqlake.base.layout.LakeLayout.deletion_pending`) and removed with the audit record's writing: a deletion
cut short (a Lambda's timeout, a crash) is started again with the same name and goes on where it stopped, though
the tables hold no row of the sample any more (it knows the runs and uploads from that record).

Rows of other samples are untouched (copied as they were into the rewritten files).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow.compute as pc
import pyarrow.parquet as pq

from seqlake.base import storage
from seqlake.base.layout import (
    BAI_SUFFIX,
    BAM_SUFFIX,
    CONSENSUS_SUFFIX,
    CRAI_SUFFIX,
    CRAM_SUFFIX,
    CSI_SUFFIX,
    VCF_SUFFIX,
    LakeLayout,
    RunLayout,
)
from seqlake.lake import iceberg
from seqlake.lake.genomes import TBI_SUFFIX
from seqlake.lake.redaction import redact_run, sheet_of
from seqlake.lake.tables import BY_NAME, ICEBERG_TABLES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

#: the per-sample files of a run (``results/genomes/run_id=<id>/<sample><suffix>``, :meth:`RunLayout.sample_file`)
SAMPLE_FILE_SUFFIXES: tuple[str, ...] = (BAM_SUFFIX, BAM_SUFFIX + BAI_SUFFIX, BAM_SUFFIX + CSI_SUFFIX, CRAM_SUFFIX,
                                         CRAM_SUFFIX + CRAI_SUFFIX, VCF_SUFFIX, VCF_SUFFIX + TBI_SUFFIX,
                                         CONSENSUS_SUFFIX)
#: the column every table with per-sample rows has
SAMPLE = "sample"


class SampleNotFoundError(ValueError):
    """No table holds a row of the name (the message names the samples it may have meant)."""


@dataclass
class DeletionRecord:
    """What a deletion removed (the audit record; never a row of the sample)."""

    sample: str
    requested_by: str
    started_at: str
    finished_at: str = ""
    #: the runs that held the sample
    runs: list[str] = field(default_factory=list)
    #: table -> rows of the sample removed
    rows: dict[str, int] = field(default_factory=dict)
    #: table -> snapshots expired because they still listed a file with its rows
    expired_snapshots: dict[str, list[int]] = field(default_factory=dict)
    #: data files removed (rewritten without the sample, or its alone, or orphans holding its rows)
    files_removed: list[str] = field(default_factory=list)
    #: the sample's uploaded files, as the ``samples`` table names them
    uploads: list[str] = field(default_factory=list)
    #: other objects removed: uploads, per-sample files, staged parts, reports
    objects_removed: list[str] = field(default_factory=list)
    #: the samplesheets of its runs (each names every sample of its run): removed with its uploads
    sheets: list[str] = field(default_factory=list)
    #: the records of its runs rewritten without its name (``status.json``, the ``runs`` row)
    records_redacted: list[str] = field(default_factory=list)
    #: where this record is (``deletions/``)
    audit: str = ""

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True).encode()


def sample_tables() -> list[str]:
    """The Iceberg tables with per-sample rows."""
    return sorted(t for t in ICEBERG_TABLES if SAMPLE in BY_NAME[t].schema.names)


def _rows_of(catalog: Catalog, database: str, table: str, sample: str,
             columns: tuple[str, ...]) -> list[dict[str, object]]:
    tbl = catalog.load_table(iceberg.identifier(database, table))
    rows: list[dict[str, object]] = tbl.scan(row_filter=iceberg.sample_filter(sample),
                                             selected_fields=columns).to_arrow().to_pylist()
    return rows


def _near_names(catalog: Catalog, database: str, sample: str) -> list[str]:
    tbl = catalog.load_table(iceberg.identifier(database, "samples"))
    names = set(tbl.scan(selected_fields=(SAMPLE,)).to_arrow().column(SAMPLE).to_pylist())
    return sorted(n for n in names if isinstance(n, str) and n.casefold() == sample.casefold())


@iceberg.no_threads_left()
def delete_sample(catalog: Catalog, database: str, sample: str, lake_root: str, *, bucket_root: str,
                  requested_by: str, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> DeletionRecord:
    """Remove ``sample`` from the lake (module docstring). ``lake_root``: where this process reads and removes
    the lake's objects (``s3://bucket``, or the local folder mirroring the bucket); ``bucket_root``: the
    ``s3://bucket`` the tables' metadata names files by (the same as ``lake_root`` on AWS)."""
    record = DeletionRecord(sample, requested_by, now().isoformat(timespec="seconds"))
    lake = LakeLayout(lake_root.rstrip("/"))
    pending = lake.deletion_pending(_digest(sample))
    tables = sample_tables()
    held = {t: _rows_of(catalog, database, t, sample, (iceberg.RUN_ID,)) for t in tables}
    earlier = _pending(pending, sample)
    if not any(held.values()) and earlier is None:
        near = _near_names(catalog, database, sample)
        hint = f": did you mean {' or '.join(near)}?" if near else " (`seqlake local query` lists the samples)"
        raise SampleNotFoundError(f"no table holds a sample named {sample!r}{hint}")
    record.runs = sorted({str(r[iceberg.RUN_ID]) for rows in held.values() for r in rows})
    record.uploads = sorted({str(u) for r in _rows_of(catalog, database, "samples", sample, ("fastq_1", "fastq_2"))
                             for u in (r["fastq_1"], r["fastq_2"]) if u})
    if earlier is not None:  # a deletion cut short: what it had found before removing anything
        record.started_at = earlier.started_at
        if earlier.requested_by != requested_by:
            record.requested_by = f"{earlier.requested_by}; resumed by {requested_by}"
        record.runs = sorted({*earlier.runs, *record.runs})
        record.uploads = sorted({*earlier.uploads, *record.uploads})
        record.rows = {t: max(earlier.rows.get(t, 0), len(held[t])) for t in tables}
        record.expired_snapshots, record.files_removed = earlier.expired_snapshots, earlier.files_removed
    else:
        record.rows = {t: len(held[t]) for t in tables}
    storage.write_bytes(pending, record.to_json())

    def local(uri: str) -> str:  # a file of the tables' metadata, where this process reaches it
        return lake_root.rstrip("/") + "/" + uri.removeprefix(bucket_root.rstrip("/") + "/")

    for table in tables:
        if held[table]:
            done = iceberg.delete_sample(catalog, database, table, sample)
            record.expired_snapshots[table] = done.expired_snapshots
            record.files_removed += done.removed_files
        record.files_removed += _remove_orphans(catalog, database, table, sample, lake_root=lake_root, local=local)
        storage.write_bytes(pending, record.to_json())  # what is done so far, for a deletion cut short
    in_bucket = bucket_root.rstrip("/") + "/"
    for run_id in record.runs:  # a run's samplesheet names every sample of the run: removed with its uploads
        sheet = sheet_of(lake.run(run_id))
        if sheet is not None and sheet.startswith(in_bucket) and sheet not in record.sheets:
            record.sheets.append(sheet)
    objects = [local(u) for u in [*record.uploads, *record.sheets] if u.startswith(in_bucket)]
    for run_id in record.runs:
        run = lake.run(run_id)
        objects += [run.sample_file(sample, suffix) for suffix in SAMPLE_FILE_SUFFIXES]
        objects += _staged(run)
        objects += storage.list_uris(run.report_prefix)
    for uri in objects:
        if storage.exists(uri):
            storage.delete(uri)
            record.objects_removed.append(uri)
    for run_id in record.runs:
        record.records_redacted += redact_run(lake.run(run_id), sample, frozenset(record.uploads))
    record.finished_at = now().isoformat(timespec="seconds")
    record.audit = lake.deletion(record.finished_at, _digest(sample))
    storage.write_bytes(record.audit, record.to_json())
    storage.delete(pending)
    return record


def _pending(uri: str, sample: str) -> DeletionRecord | None:
    """The record a deletion of ``sample`` cut short left (:meth:`LakeLayout.deletion_pending`), if any."""
    if not storage.exists(uri):
        return None
    found = DeletionRecord(**json.loads(storage.read_bytes(uri)))
    return found if found.sample == sample else None


def _digest(sample: str) -> str:
    """A short name for the record's key that does not spell the sample (the record names it inside)."""
    return hashlib.sha256(sample.encode()).hexdigest()[:12]


def _holds(uri: str, sample: str) -> bool:
    """Whether a Parquet file has a row of ``sample`` (only its ``sample`` column is read)."""
    with storage.open_read(uri) as f:
        pf = pq.ParquetFile(f)
        if SAMPLE not in pf.schema_arrow.names:
            return False
        column = pf.read(columns=[SAMPLE]).column(SAMPLE)
    return bool(pc.any(pc.equal(column.cast("string"), sample)).as_py())


def _remove_orphans(catalog: Catalog, database: str, table: str, sample: str, *, lake_root: str,
                    local: Callable[[str], str]) -> list[str]:
    """The table folder's Parquet files no snapshot lists that hold a row of ``sample``: removed."""
    tbl = catalog.load_table(iceberg.identifier(database, table))
    live = {local(p) for p in iceberg.live_files(tbl)}
    folder = LakeLayout(lake_root.rstrip("/")).table_root(table)
    removed = []
    for uri in _parquet_under(folder):
        if uri not in live and _holds(uri, sample):
            storage.delete(uri)
            removed.append(uri)
    return removed


def _parquet_under(prefix: str) -> Iterable[str]:
    return sorted(u for u in storage.list_uris(prefix) if u.endswith(".parquet"))


def _staged(run: RunLayout) -> list[str]:
    """What the run staged under ``runs/<id>/`` (the children's and reducers' parts, BAM-record slices, the plan
    naming the inputs: all of it holds or names the run's samples), but its ``status.json`` (its state and
    counts). Those parts serve only a re-run of the run, and expire with ``runs/`` anyway."""
    keep = {run.status, run.summary}
    return [u for u in storage.list_uris(run.prefix) if u not in keep]
