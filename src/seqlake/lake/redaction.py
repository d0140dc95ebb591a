"""A deleted sample's name taken out of the records its runs keep (issue 36: a participant withdraws consent).

A run keeps, past its staged parts, a record of what it was: ``runs/<id>/status.json`` and its row in the
``runs`` table (a Hive table: one Parquet file a run). Both list the run's inputs (the uploads' keys, which
usually spell the sample's name) and the samples; the run's samplesheet, an upload of its own, has a line
per file of every sample. :func:`redact_run` rewrites the first two without the sample: its name dropped from the
samples, each of its uploads replaced by :data:`DELETED_UPLOAD` (its place kept: the run had that many
inputs), any text quoting one of its uploads (a reason naming a bad file) with the quote replaced. The rest of
each record (state, counts, times, the other samples) stays. The run's samplesheet is not rewritten: writing
under ``incoming/`` is an upload, which starts a run; :mod:`seqlake.lake.deletion` removes it (:func:`sheet_of`)
as it removes the run's report.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from seqlake.base import storage
from seqlake.base.layout import RunLayout
from seqlake.lake.parquet_io import write_table
from seqlake.lake.tables import RUNS

#: what stands where an upload of a deleted sample was listed, or its name as a value
DELETED_UPLOAD = "<an upload of a deleted sample>"
DELETED_SAMPLE = "<a deleted sample>"


def redacted(value: Any, sample: str, uploads: frozenset[str]) -> Any:
    """``value`` (a JSON document) without ``sample``: list items equal to its name dropped, mappings keyed by it
    dropped, an input entry (``{"uri": ...}``) of one of ``uploads`` replaced, text quoting an upload's URI or
    key with the quote replaced."""
    return _redacted(value, sample, uploads, _quoted(uploads))


def _redacted(value: Any, sample: str, uploads: frozenset[str], keys: list[str]) -> Any:
    if isinstance(value, dict):
        if str(value.get("uri", "")) in uploads or str(value.get("key", "")) in keys:
            return {"deleted": DELETED_UPLOAD}
        return {k: _redacted(v, sample, uploads, keys) for k, v in value.items() if k != sample}
    if isinstance(value, list):
        return [_redacted(v, sample, uploads, keys) for v in value if v != sample]
    if isinstance(value, str):
        if value == sample:
            return DELETED_SAMPLE
        for quote in keys:
            value = value.replace(quote, DELETED_UPLOAD)
        return value
    return value


def _quoted(uploads: frozenset[str]) -> list[str]:
    """The ways a text may quote an upload: its URI, then its key (longest first: the URI contains the key)."""
    out = set(uploads)
    out |= {u.split("/", 3)[3] for u in uploads if u.startswith("s3://") and u.count("/") >= 3}
    return sorted(out, key=len, reverse=True)


def sheet_of(run: RunLayout) -> str | None:
    """The ``s3://`` URI of the run's samplesheet, as its ``status.json`` names it (None: a run of uploads)."""
    if not storage.exists(run.status):
        return None
    sheet = json.loads(storage.read_bytes(run.status)).get("samplesheet")
    return sheet if isinstance(sheet, str) and sheet.startswith("s3://") else None


def redact_run(run: RunLayout, sample: str, uploads: frozenset[str]) -> list[str]:
    """Rewrite the run's ``status.json`` and its ``runs`` row without ``sample`` (module docstring); returns
    what was rewritten."""
    rewritten: list[str] = []
    if storage.exists(run.status):
        status = json.loads(storage.read_bytes(run.status))
        clean = redacted(status, sample, uploads)
        if clean != status:
            storage.write_bytes(run.status, json.dumps(clean, indent=1, sort_keys=True).encode())
            rewritten.append(run.status)
    row_file = run.result_file(RUNS.name)
    if storage.exists(row_file) and _redact_runs_row(row_file, sample, uploads):
        rewritten.append(row_file)
    return rewritten


def _redact_runs_row(uri: str, sample: str, uploads: frozenset[str]) -> bool:
    with storage.open_read(uri) as f:
        table = pq.read_table(f)
    columns = {}
    for name in table.column_names:
        values = table.column(name).to_pylist()
        if name == "samples":
            values = [None if v is None else ",".join(s for s in v.split(",") if s != sample) for v in values]
        elif pa.types.is_string(table.schema.field(name).type):
            values = [None if v is None else _redact_text(v, sample, uploads) for v in values]
        columns[name] = values
    clean = pa.Table.from_pydict(columns, schema=table.schema)
    if clean.equals(table):
        return False
    write_table(uri, clean)
    return True


def _redact_text(text: str, sample: str, uploads: frozenset[str]) -> str:
    """A column's text: a JSON document redacted as one, other text with the uploads' quotes replaced."""
    try:
        doc = json.loads(text)
    except ValueError:
        return str(redacted(text, sample, uploads))
    if not isinstance(doc, dict | list):
        return str(redacted(text, sample, uploads))
    clean = redacted(doc, sample, uploads)
    return text if clean == doc else json.dumps(clean, sort_keys=True)
