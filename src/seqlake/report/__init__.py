"""A QC report per run: one self-contained HTML page and MultiQC custom content, from the committed tables.

Entry points: :func:`render_run` (a lake root and a run id: reads the run's status and tables, writes
``reports/<run_id>/`` and refreshes ``reports/index.html``), :func:`try_render_run` (the same, its failure
returned as a reason: the commit step and ``seqlake process`` fail the run with it) and :func:`render_report`
(tables already in hand, any output folder).
Local paths and ``s3://`` URIs alike.
"""

from seqlake.report.data import load_run_tables
from seqlake.report.html import ReportError
from seqlake.report.render import (
    Outcome,
    read_status,
    render_failed,
    render_report,
    render_run,
    report_uri,
    try_render_run,
    write_index,
)

__all__ = ["Outcome", "ReportError", "load_run_tables", "read_status", "render_failed", "render_report", "render_run",
           "report_uri", "try_render_run", "write_index"]
