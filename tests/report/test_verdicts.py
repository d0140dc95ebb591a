"""The report's QC verdicts section: worst first, each reason shown, nothing without verdicts."""

from __future__ import annotations

from seqlake.report.verdicts import verdict_rows, verdict_section


def test_the_verdicts_are_listed_worst_first_with_their_reasons() -> None:
    summary = [
        {"sample": "a", "qc_status": "pass", "qc_reasons": None, "control_type": None, "pct_genome_10x": 99.1},
        {"sample": "ntc", "qc_status": "fail", "control_type": "negative", "pct_genome_10x": 1.3,
         "qc_reasons": "negative control: 1.30% of the genome at >= 10x (above 1%): contamination"},
        {"sample": "b", "qc_status": "warn", "qc_reasons": "possible mixture: 48 alleles at 0.05-0.95 with depth >= 50",
         "control_type": None, "pct_genome_10x": 97.0},
        {"sample": "old", "qc_status": None},  # a run committed before verdicts: not listed
    ]
    rows = verdict_rows(summary)
    assert [r["sample"] for r in rows] == ["ntc", "b", "a"]
    html = verdict_section(rows)
    assert html.startswith("<section id=\"verdicts\"><h2>QC verdicts</h2>")
    assert "1 fail, 1 warn, 1 pass" in html
    assert html.index(">ntc<") < html.index(">b<") < html.index(">a<")
    assert "contamination" in html and "possible mixture: 48 alleles" in html and "&gt;= 10x" in html
    assert verdict_section(verdict_rows([{"sample": "x", "qc_status": None}])) == ""
