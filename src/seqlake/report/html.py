"""The report's HTML pages: one self-contained file per run, a short page for a failed run, the index.

Tables are written here as plain HTML (they read without JavaScript); the plots are drawn in the
browser by ``assets/report.js`` from the data embedded in the page, so a page holds numbers, not
pictures. Each matrix is quantized to one or two bytes a value and base64-encoded: the page's size
grows by a fixed amount per sample, whatever the values.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from html import escape
from importlib import resources
from typing import Any, TypeVar

import numpy as np

from seqlake import __version__
from seqlake.base import faults
from seqlake.report.data import SUMMARY_COLUMNS, Matrix, Plot, Report, TrimRow, format_value
from seqlake.report.verdicts import verdict_section

#: how each plot's values are stored: (codec, scale). ``u8``/``u16``: value * scale rounded;
#: ``log16``: ln(1 + value) * scale (depths span 0 to 1e6). The largest code stands for "no value".
CODECS: dict[str, tuple[str, float]] = {
    "cycle-quality": ("u16", 100.0),
    "cycle-composition": ("u8", 2.0),
    "length-dist": ("u16", 100.0),
    "read-quality-dist": ("u16", 100.0),
    "base-quality-dist": ("u16", 100.0),
    "coverage": ("log16", 4096.0),
    "amplicon-depth": ("log16", 4096.0),
}
#: a plot with no entry above (a section added later): ln(1 + value) in 16 bits holds 0 to ~8.9e6 to within
#: 0.025 %, so any non-negative count or depth reads back as drawn
DEFAULT_CODEC: tuple[str, float] = ("log16", 4096.0)


T = TypeVar("T")


class ReportError(RuntimeError):
    """A section of the page could not be built: names the section and why (the run fails with it)."""

    def __init__(self, section: str, cause: BaseException) -> None:
        super().__init__(f"report section {section!r} failed: {type(cause).__name__}: {cause}")
        self.section = section


def section(section_id: str, build: Callable[[], T], run_id: str | None = None) -> T:
    """One section's HTML (or a plot's data), any failure of it raised as :class:`ReportError` naming the
    section (and the test-only ``SEQLAKE_REPORT_FAULT`` fired here: :func:`seqlake.base.faults.fail_report_section`)."""
    try:
        faults.fail_report_section(section_id, run_id)
        return build()
    except ReportError:
        raise
    except Exception as err:
        raise ReportError(section_id, err) from err


def encode(matrix: Matrix, codec: str, scale: float) -> dict[str, Any]:
    """A samples x points matrix as the page's script decodes it (NaN: no value)."""
    dtype, missing = (np.uint8, 255) if codec == "u8" else (np.dtype("<u2"), 65535)
    scaled = np.log1p(np.maximum(matrix, 0)) * scale if codec == "log16" else matrix * scale
    codes = np.where(np.isnan(scaled), missing, np.clip(np.rint(np.nan_to_num(scaled)), 0, missing - 1))
    rows, cols = matrix.shape
    return {"codec": codec, "scale": scale, "rows": rows, "cols": cols,
            "data": base64.b64encode(codes.astype(dtype).tobytes()).decode()}


def _asset(name: str) -> str:
    return resources.files("seqlake.report").joinpath("assets", name).read_text(encoding="utf-8")


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        # no favicon request: the page makes no request at all
        "<link rel=\"icon\" href=\"data:,\">"
        f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head>\n"
        f"<body>\n{body}\n<footer>seqlake {escape(__version__)}</footer>\n</body></html>\n"
    )


def _script_json(doc: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(doc, separators=(",", ":")).replace("</", "<\\/")


def _plot_doc(plot: Plot) -> dict[str, Any]:
    codec, scale = CODECS.get(plot.id, DEFAULT_CODEC)
    return {
        "id": plot.id, "title": plot.title, "kind": plot.kind, "xlabel": plot.xlabel, "ylabel": plot.ylabel,
        "logY": plot.log_y, "yMax": plot.y_max, "wide": plot.wide,
        "panels": [{"title": p.title, "x": p.x,
                    "series": {name: encode(m, codec, scale) for name, m in p.series.items()}} for p in plot.panels],
    }


def _summary_table(report: Report) -> str:
    head = "".join(f"<th title=\"{escape(c.doc)}\">{escape(c.title)}</th>" for c in SUMMARY_COLUMNS)
    rows = []
    for r in report.rows:
        cells = []
        for c in SUMMARY_COLUMNS:
            v = getattr(r, c.key)
            exact = "" if v is None else repr(v)  # the number itself, for sorting and checking
            cells.append(f"<td data-col=\"{c.key}\" data-v=\"{exact}\">"
                         f"{format_value(v, c.fmt)}</td>")
        rows.append(f"<tr data-sample=\"{escape(r.sample)}\"><td>{escape(r.sample)}</td>{''.join(cells)}</tr>")
    return (f"<table class=\"sortable per-sample\" id=\"summary-table\"><thead><tr><th>Sample</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


_TRIM_PARTS: tuple[tuple[str, str], ...] = (
    ("kept", "bases kept"), ("quality", "quality-trimmed"), ("adapter", "adapter-trimmed"),
    ("short", "in reads too short"),
)


def _trim_bar(t: TrimRow) -> str:
    removed = (t.bases_quality_trimmed, t.bases_adapter_trimmed, t.bases_too_short)
    parts = (max(0, t.bases_in - sum(removed)), *removed)
    total = sum(parts) or 1
    spans = "".join(f"<span class=\"{cls}\" style=\"width:{100 * n / total:.3f}%\" title=\"{label}: {n:,}\"></span>"
                    for (cls, label), n in zip(_TRIM_PARTS, parts, strict=True))
    return f"<div class=\"bar\">{spans}</div>"


def _trimming_section(report: Report) -> str:
    if not report.trimming:
        return ("<section id=\"trimming\"><h2>Trimming</h2><p class=\"desc\">This run was not trimmed."
                "</p></section>")
    heads = (("Sample", ""), ("Mate", ""), ("Reads in", "raw reads"),
             ("Adapter", "reads from which an adapter was removed"),
             ("Too short", "reads (pairs) removed by the minimum length filter"), ("Reads out", "reads kept"),
             ("Bases in", "raw bases"), ("Quality bp", "bases removed by quality trimming"),
             ("Adapter bp", "bases removed with adapters"), ("Short bp", "bases removed with reads too short"),
             ("Bases", "kept and removed, as a share of the raw bases"))
    rows = []
    for t in report.trimming:
        nums = (t.reads_in, t.reads_adapter_trimmed, t.reads_too_short, t.reads_out, t.bases_in,
                t.bases_quality_trimmed, t.bases_adapter_trimmed, t.bases_too_short)
        cells = "".join(f"<td data-v=\"{n}\">{n:,}</td>" for n in nums)
        rows.append(f"<tr data-sample=\"{escape(t.sample)}\"><td>{escape(t.sample)}</td><td data-v=\"{t.mate}\">"
                    f"R{t.mate}</td>{cells}<td>{_trim_bar(t)}</td></tr>")
    keys = "".join(f"<i class=\"{cls}\"></i>{label}" for cls, label in _TRIM_PARTS)
    return (
        "<section id=\"trimming\"><h2>Trimming</h2><p class=\"desc\">What quality and adapter trimming and the "
        "minimum length filter removed, per sample and mate (a pair is removed when either mate is too short)."
        f"</p><p class=\"keys\">{keys}</p>"
        "<div class=\"table-wrap\"><table class=\"sortable per-sample\" id=\"trimming-table\"><thead><tr>"
        + "".join(f"<th title=\"{doc}\">{h}</th>" for h, doc in heads)
        + f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _rows_table(table_id: str, columns: list[tuple[str, str]], rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{escape(title)}</th>" for _, title in columns)
    body = "".join(
        f"<tr data-sample=\"{escape(str(r['sample']))}\">"
        + "".join(f"<td>{escape(f'{r[k]:.3g}' if isinstance(r[k], float) else str(r[k]))}</td>" for k, _ in columns)
        + "</tr>" for r in rows)
    return (f"<div class=\"table-wrap\"><table class=\"sortable per-sample\" id=\"{table_id}\"><thead><tr>{head}"
            f"</tr></thead><tbody>{body}</tbody></table></div>")


def _genomes_section(report: Report) -> str:
    """The consensus summary and the PASS variants (runs with a reference)."""
    if not report.consensus:
        return ""
    consensus = _rows_table("consensus-table", [
        ("sample", "Sample"), ("contig", "Contig"), ("length", "Length"), ("n_bases", "N"),
        ("ambiguous_bases", "Mixed"), ("pct_called", "Called %")], report.consensus)
    variants = _rows_table("variants-table", [
        ("sample", "Sample"), ("contig", "Contig"), ("pos", "Pos"), ("ref", "Ref"), ("alt", "Alt"), ("type", "Type"),
        ("depth", "Depth"), ("alt_count", "Alt reads"), ("alt_fraction", "Fraction")], report.variants)
    return ("<section id=\"genomes\"><h2>Consensus and variants</h2><p class=\"desc\">Consensus genomes (ivar "
            "consensus semantics) and the variants that PASS (ivar variants semantics; the variants table and each "
            f"sample's VCF have every allele at >= 3 %).</p>{consensus}{variants}</section>")


def _figure(plot: Plot) -> str:
    chosen = " Chosen sample: <b class=\"chosen-sample\"></b>." if plot.kind == "components" else ""
    panels = "".join(f"<div class=\"panel\"><h3>{escape(p.title)}</h3><div class=\"plot\" data-panel=\"{i}\"></div>"
                     "</div>" for i, p in enumerate(plot.panels))
    note = f"<p class=\"note\">{escape(plot.note)}</p>" if plot.note else ""
    wide = " wide" if plot.wide else ""
    return (f"<section class=\"figure{wide}\" id=\"plot-{plot.id}\"><h2>{escape(plot.title)}</h2>"
            f"<p class=\"desc\">{escape(plot.description)}{chosen}</p><div class=\"panels\">{panels}</div>"
            f"<div class=\"legend\"></div>{note}</section>")


def _meta(items: list[tuple[str, Any]]) -> str:
    return "".join(f"<span>{escape(k)} <b>{escape(str(v))}</b></span>" for k, v in items if v not in (None, ""))


def _run_meta(report: Report) -> list[tuple[str, Any]]:
    run = report.run
    reads = sum(r.reads for r in report.rows)
    started = run.get("started_at")
    return [
        ("samples", f"{len(report.samples):,}"), ("raw reads", f"{reads:,}"),
        ("reference", run.get("reference")), ("started", started.strftime("%Y-%m-%d %H:%M UTC") if started else None),
        ("duration", f"{run['duration_s']:.0f} s" if run.get("duration_s") is not None else None),
        ("shards", run.get("shards")), ("software", run.get("software_version")),
    ]


def run_page(report: Report) -> str:
    """The report of a committed run; :class:`ReportError` names the section that could not be built."""
    rid = report.run_id
    figures = [section(f"plot-{p.id}", partial(_figure, p), rid) for p in report.plots]
    plots = [section(f"plot-{p.id}", partial(_plot_doc, p), rid) for p in report.plots]
    data = {"samples": report.samples, "plots": plots}
    options = "".join(f"<option>{escape(s)}</option>" for s in report.samples)
    nav = "".join(f"<a href=\"#plot-{p.id}\">{escape(p.title)}</a>" for p in report.plots)
    summary = section("summary", lambda: (
        "<section id=\"summary\"><h2>Samples</h2><p class=\"desc\">Per sample, both mates added up; click a row "
        "to show that sample in the plots, a heading to sort.</p>"
        f"<div class=\"table-wrap\">{_summary_table(report)}</div></section>\n"), rid)
    trimming = section("trimming", lambda: _trimming_section(report), rid)
    genomes = section("genomes", lambda: _genomes_section(report), rid)
    verdicts = section("verdicts", lambda: verdict_section(report.verdicts), rid)
    body = (
        f"<header><h1>seqlake run {escape(report.run_id)} <span class=\"state SUCCEEDED\">SUCCEEDED</span></h1>"
        f"<div class=\"meta\">{_meta(_run_meta(report))}</div></header>\n"
        f"<nav><a href=\"../index.html\">all runs</a><a href=\"#summary\">Summary</a>{nav}<a href=\"#trimming\">"
        "Trimming</a><span class=\"choose\">plots show <select id=\"sample-choice\" aria-label=\"sample\">"
        f"{options}</select> <input id=\"sample-filter\" type=\"search\" placeholder=\"filter samples\" "
        "aria-label=\"filter samples\"></span></nav>\n<main>\n"
        + verdicts
        + summary
        + "\n".join(figures)
        + f"\n{trimming}\n{genomes}\n</main>\n"
        "<noscript><p>The plots need JavaScript; the tables above do not.</p></noscript>\n"
        f"<script type=\"application/json\" id=\"report-data\">{_script_json(data)}</script>\n"
        f"<script>{_asset('report.js')}</script>"
    )
    return _page(f"seqlake run {report.run_id}", body)


#: the fields of status.json a failed run's page shows, in order
FAILURE_FIELDS: tuple[tuple[str, str], ...] = (
    ("state", "State"), ("reason", "Reason"), ("failed_step", "Failed step"), ("failed_shard", "Failed shard"),
    ("error", "Error"), ("samples", "Samples"), ("started_at", "Started"), ("finished_at", "Finished"),
    ("log_stream", "Log stream"), ("execution_arn", "Execution"),
)


def failed_page(run_id: str, status: dict[str, Any]) -> str:
    """A short page for a run that did not succeed: its state and why."""
    state = str(status.get("state", "UNKNOWN"))
    items = []
    for key, label in FAILURE_FIELDS:
        value = status.get(key)
        if value in (None, "", []):
            continue
        text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        items.append(f"<dt>{escape(label)}</dt><dd>{escape(text)}</dd>")
    body = (f"<header><h1>seqlake run {escape(run_id)} <span class=\"state {escape(state)}\">{escape(state)}</span>"
            "</h1></header>\n<nav><a href=\"../index.html\">all runs</a></nav>\n<main><section id=\"failure\">"
            f"<h2>This run has no results</h2><dl class=\"failure\">{''.join(items)}</dl></section></main>")
    return _page(f"seqlake run {run_id}: {state}", body)


def _when(text: Any) -> str:
    """An ISO 8601 time as ``2026-11-30 10:00:05 UTC`` (the text as it is if it is not one)."""
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return str(text or "")
    return (t.astimezone(UTC) if t.tzinfo else t).strftime("%Y-%m-%d %H:%M:%S UTC")


def index_page(entries: list[dict[str, Any]]) -> str:
    """The list of runs beside their report folders (newest first)."""
    rows = []
    for e in entries:
        rid, state = escape(str(e.get("run_id", ""))), escape(str(e.get("state", "")))
        reads = e.get("reads")
        reason = str(e.get("reason") or "").splitlines()[0][:160] if e.get("reason") else ""
        rows.append(f"<tr><td><a href=\"{rid}/index.html\">{rid}</a></td><td><span class=\"state {state}\">{state}"
                    f"</span></td><td>{escape(_when(e.get('finished_at')))}</td>"
                    f"<td class=\"num\">{e.get('samples') or ''}</td>"
                    f"<td class=\"num\">{'' if reads is None else f'{reads:,}'}</td>"
                    f"<td>{escape(reason)}</td></tr>")
    body = ("<header><h1>seqlake runs</h1></header>\n<main><section><table class=\"runs\"><thead><tr><th>Run</th>"
            "<th>State</th><th>Finished</th><th class=\"num\">Samples</th><th class=\"num\">Raw reads</th>"
            "<th>Reason</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section></main>")
    return _page("seqlake runs", body)
