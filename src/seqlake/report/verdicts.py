"""The report's first section: each genome's QC verdict (``sample_summary.qc_status`` and ``qc_reasons``,
seqlake.lake.verdict), the failures first, so that a lab sees which genomes not to publish before any plot.

Self-contained: one function of the ``sample_summary`` rows to one HTML section (empty without verdicts: a run
without a reference has none), called once by :func:`seqlake.report.html.run_page`.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

#: the order the verdicts are listed in (worst first)
ORDER = {"fail": 0, "warn": 1, "pass": 2}


def verdict_rows(sample_summary: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The samples with a verdict, worst first, then by name: sample, control type, status, reasons."""
    rows = [{"sample": r["sample"], "control_type": r.get("control_type"), "qc_status": r["qc_status"],
             "qc_reasons": r.get("qc_reasons"), "pct_genome_10x": r.get("pct_genome_10x")}
            for r in sample_summary if r.get("qc_status")]
    return sorted(rows, key=lambda r: (ORDER.get(r["qc_status"], 3), r["sample"]))


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def verdict_section(rows: Sequence[dict[str, Any]]) -> str:
    """The section (empty when no sample has a verdict)."""
    if not rows:
        return ""
    counts = {s: sum(r["qc_status"] == s for r in rows) for s in ORDER}
    body = "".join(
        f"<tr data-sample=\"{escape(r['sample'])}\" class=\"verdict-{escape(r['qc_status'])}\">"
        f"<td>{escape(r['sample'])}</td><td>{escape(r['control_type'] or '')}</td>"
        f"<td><b>{escape(r['qc_status'].upper())}</b></td>"
        f"<td>{_pct(r['pct_genome_10x'])}</td>"
        f"<td>{escape(r['qc_reasons'] or '')}</td></tr>" for r in rows)
    return ("<section id=\"verdicts\"><h2>QC verdicts</h2><p class=\"desc\">"
            f"{counts['fail']} fail, {counts['warn']} warn, {counts['pass']} pass: genome completeness, "
            "frameshifts, ambiguity, mixture and negative controls, after ncov-tools' flags (docs/TABLES.md, "
            "\"The QC verdict\").</p><div class=\"table-wrap\"><table class=\"sortable per-sample\" "
            "id=\"verdict-table\"><thead><tr><th>Sample</th><th>Control</th><th>Verdict</th><th>% genome "
            f">= 10x</th><th>Why</th></tr></thead><tbody>{body}</tbody></table></div></section>\n")
