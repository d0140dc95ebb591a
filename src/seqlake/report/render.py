"""Where reports are written, and the calls that write them.

A lake root (``s3://bucket``, or a local folder with the same layout: the local cloud's bucket folder,
``seqlake process --out``) holds ``results/<table>/run_id=<id>/``, ``runs/<id>/status.json`` and, from
here, ``reports/<id>/`` (``index.html``, the MultiQC ``*_mqc.json`` files, ``report.json``) and
``reports/index.html`` listing every report. The same code runs on local paths and S3 URIs.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from seqlake.base import storage
from seqlake.base.layout import LakeLayout, RunLayout
from seqlake.base.model import RunState
from seqlake.report.data import build_report, load_run_tables
from seqlake.report.html import failed_page, index_page, run_page, section
from seqlake.report.multiqc import custom_content

log = logging.getLogger(__name__)

#: one run's page in its report folder
PAGE = "index.html"
#: what the index lists about a run, beside its page
ENTRY = "report.json"
SUCCEEDED = RunState.SUCCEEDED.value
#: states with no results to show: the run gets a short page with its reason
UNSUCCESSFUL = (RunState.FAILED.value, RunState.REJECTED.value, "TIMED_OUT", "ABORTED")


def report_dir(root: str, run_id: str) -> str:
    return RunLayout(root, run_id).report_prefix.rstrip("/")


def report_uri(root: str, run_id: str) -> str:
    """The run's page: ``<root>/reports/<run_id>/index.html`` (:class:`seqlake.base.layout.RunLayout`)."""
    return RunLayout(root, run_id).report


def _content_type(name: str) -> str:
    return "text/html; charset=utf-8" if name.endswith(".html") else "application/json"


def _write(uri: str, body: bytes) -> None:
    """Write one file; on S3 with its content type, so a pre-signed URL opens the page in the browser."""
    if storage.is_s3(uri):
        bucket, key = storage.split_s3(uri)
        storage.s3_client().put_object(Bucket=bucket, Key=key, Body=body, ContentType=_content_type(uri))
    else:
        storage.write_bytes(uri, body)


def _write_all(out_dir: str, files: Iterable[tuple[str, bytes]]) -> list[str]:
    uris = []
    for name, body in files:
        uri = storage.join(out_dir, name)
        _write(uri, body)
        uris.append(uri)
    return uris


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(run_id: str, state: str, status: dict[str, Any], samples: int | None, reads: int | None) -> bytes:
    doc = {"run_id": run_id, "state": state, "samples": samples, "reads": reads,
           "finished_at": status.get("finished_at") or _now(), "reason": status.get("reason"), "rendered_at": _now()}
    return json.dumps(doc, default=str).encode()


def render_report(run_id: str, tables: dict[str, pa.Table], out_dir: str,
                  status: dict[str, Any] | None = None) -> list[str]:
    """Write a committed run's page, MultiQC files and index entry into ``out_dir``; their URIs, page first."""
    report = section("tables", lambda: build_report(run_id, tables), run_id)
    reads = sum(r.reads for r in report.rows)
    files = itertools.chain([(PAGE, run_page(report).encode())], custom_content(report),
                            [(ENTRY, _entry(run_id, SUCCEEDED, status or {}, len(report.samples), reads))])
    return _write_all(out_dir, files)


def render_failed(run_id: str, status: dict[str, Any], out_dir: str) -> list[str]:
    """Write the short page of a run that did not succeed (state and reason from its ``status.json``)."""
    samples = status.get("samples")
    files = [(PAGE, failed_page(run_id, status).encode()),
             (ENTRY, _entry(run_id, str(status.get("state")), status, len(samples) if samples else None,
                            status.get("reads")))]
    return _write_all(out_dir, files)


def read_status(root: str, run_id: str) -> dict[str, Any] | None:
    """The run's ``status.json`` (``summary.json`` where ``seqlake process`` made the run), if any."""
    layout = RunLayout(root, run_id)
    for uri in (layout.status, layout.summary):
        try:
            doc: dict[str, Any] = json.loads(storage.read_bytes(uri))
        except FileNotFoundError:
            continue
        return doc
    return None


def render_run(root: str, run_id: str, status: dict[str, Any] | None = None) -> str:
    """Render one run of the lake at ``root`` and refresh the index; the URI of the run's page.

    ``status``: the run's status document (default: read from ``runs/<id>/status.json``). A run in a
    state of :data:`UNSUCCESSFUL` gets the short page; any other (succeeded, or being committed) the
    full report from its committed tables.
    """
    status = status if status is not None else (read_status(root, run_id) or {})
    out_dir = report_dir(root, run_id)
    if status.get("state") in UNSUCCESSFUL:
        render_failed(run_id, status, out_dir)
    else:
        render_report(run_id, load_run_tables(LakeLayout(root).results_root, run_id), out_dir, status)
    write_index(root)
    return report_uri(root, run_id)


@dataclass(frozen=True)
class Outcome:
    """What became of a run's report: its page's URI, or why there is none."""

    uri: str | None
    error: str | None = None


def try_render_run(root: str, run_id: str, status: dict[str, Any] | None = None) -> Outcome:
    """:func:`render_run`, its failure returned as the reason (``Outcome.error``) rather than raised: the
    caller fails its run with that reason (the commit step, ``seqlake process``: a run never says SUCCEEDED
    without its report)."""
    try:
        return Outcome(render_run(root, run_id, status))
    except Exception as err:  # any failure, reported rather than raised
        log.warning("the report of run %s failed to render", run_id, exc_info=True)
        return Outcome(None, f"{type(err).__name__}: {err}")


def write_index(root: str) -> str:
    """Rewrite ``reports/index.html`` from every run's ``report.json`` (newest first); its URI.

    Each render rewrites it from the listing, so two runs committed at once both appear once the
    later of them has written it.
    """
    entries = [json.loads(storage.read_bytes(u)) for u in storage.list_uris(LakeLayout(root).reports_root)
               if storage.basename(u) == ENTRY]
    entries.sort(key=lambda e: str(e.get("finished_at") or ""), reverse=True)
    uri = LakeLayout(root).reports_index
    _write(uri, index_page(entries).encode())
    return uri
