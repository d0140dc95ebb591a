"""The QC verdict's rules (seqlake.lake.verdict); the end-to-end verdicts of a mixed library, a frameshift and a
contaminated negative control are in tests/core/test_variants.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from seqlake.base.metadata import control_type, parse_control
from seqlake.lake.verdict import Genome, VerdictParams, genome_signals, verdict

GOOD = Genome(29903, 29000, 0, 0, 0, 97.0, None)
P = VerdictParams()


@pytest.mark.parametrize(("genome", "status", "reason"), [
    (GOOD, "pass", None),
    (replace(GOOD, called=14000), "fail", "incomplete genome: 46.8% called (below 50%)"),
    (replace(GOOD, called=26000), "warn", "partial genome: 86.9% called (below 90%)"),
    (replace(GOOD, frameshift_indels=1), "warn", "possible frameshift: 1 PASS indel(s) not a multiple of 3 long"),
    (replace(GOOD, ambiguous=6), "warn", "excess ambiguity: 6 IUPAC codes (above 5)"),
    (replace(GOOD, mixed_alleles=10), "warn", "possible mixture: 10 alleles at 0.05-0.95 with depth >= 50"),
    (replace(GOOD, mixed_alleles=9), "pass", None),
    (replace(GOOD, called=0, pct_genome_10x=1.3, control_type="negative"), "fail",
     "negative control: 1.30% of the genome at >= 10x (above 1%): contamination"),
    (replace(GOOD, called=0, pct_genome_10x=0.4, control_type="negative"), "pass", None),
    (replace(GOOD, called=28000, control_type="positive"), "pass", None),
    (replace(GOOD, called=None), "pass", None),  # no consensus (no allele counts): nothing to hold it to
])
def test_verdict_rules(genome: Genome, status: str, reason: str | None) -> None:
    assert verdict(genome, P) == (status, reason)


def test_failures_come_before_warnings() -> None:
    status, reasons = verdict(replace(GOOD, called=1000, frameshift_indels=2), P)
    assert status == "fail" and reasons is not None and reasons.startswith("incomplete genome")
    assert reasons.endswith("possible frameshift: 2 PASS indel(s) not a multiple of 3 long")


def test_signals_count_frameshifts_and_intermediate_alleles() -> None:
    rows = {"pos": [10, 20, 30, 40, 50], "type": ["snv", "snv", "snv", "ins", "del"],
            "ref": ["A", "A", "A", "A", "ACGT"], "alt": ["G", "G", "G", "AT", "A"],
            "filters": ["ft", "ft;pv", "PASS", "PASS", "PASS"], "pass": [False, False, True, True, True],
            "depth": [100, 100, 30, 100, 100], "alt_fraction": [0.1, 0.1, 0.5, 0.9, 0.9],
            "aa_change": [None, None, None, "S:K3fs", "S:A4del"]}
    # the first allele counts (pv passes at depth 100), the second fails ivar's test, the third is too shallow;
    # the insertion is a frameshift, the 3-base deletion is not
    assert genome_signals(rows, 0, True, P) == (1, 1)
    assert genome_signals(rows, 0, False, P) == (1, 1)
    assert genome_signals({**rows, "aa_change": [None] * 5}, 0, True, P) == (0, 1)  # outside every CDS


def test_control_is_read_as_its_kind() -> None:
    assert [control_type(v) for v in ("negative", "Positive", "TRUE", "false", "")] == \
        ["negative", "positive", "negative", None, None]
    assert [parse_control(v) for v in ("negative", "positive", "true", "false", "")] == [True, True, True, False, None]
    with pytest.raises(ValueError, match="negative, positive, true or false"):
        control_type("yes")
