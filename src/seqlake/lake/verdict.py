"""A QC verdict per genome: ``sample_summary.qc_status`` (``pass`` / ``warn`` / ``fail``) and ``qc_reasons``.

The checks and their defaults (run parameters, :class:`seqlake.base.params.Params`) follow ncov-tools'
summary flags (``qc_pass`` of its ``summary_qc.tsv``), as labs running ARTIC / nf-core/viralrecon read them:

- genome completeness, the consensus's called bases over the reference's length (``consensus.pct_called``,
  ncov-tools ``genome_completeness``): below ``qc_fail_called_pct`` (50 %) fails (INCOMPLETE_GENOME), below
  ``qc_warn_called_pct`` (90 %) warns (PARTIAL_GENOME);
- frameshifts: PASS indels whose length is not a multiple of 3, in a CDS of the run's GFF (anywhere without
  one), warn (POSSIBLE_FRAMESHIFT_INDELS: ncov-tools counts ivar's indels that are not triplets);
- ambiguity: more than ``qc_max_ambiguous`` (5) IUPAC codes in the consensus warn (EXCESS_AMBIGUITY);
- a mixed sample: ``qc_mixed_alleles`` (10) or more SNV alleles at a frequency in [``qc_mixed_min_fraction``,
  ``qc_mixed_max_fraction``] (0.05-0.95) where the depth is at least ``qc_mixed_min_depth`` (50) and ivar's
  Fisher test passes (not sequencing error) warn (ncov-tools' POSSIBLE_MIXTURE; its mixture report compares
  samples, seqlake looks within one: two genomes in one library leave their differences at the mixture's
  proportions; the real ARTIC MiSeq pair of the tests, one genome, has 6 such alleles at 5-31 %, PCR and
  primer-site noise, which 10 leaves out, where two genomes differ at dozens of places);
- a negative control (``sample_summary.control_type``) with more than ``qc_negative_max_pct_10x`` (1 %) of the
  reference at >= 10x fails: the plate is contaminated (ncov-tools' negative control report gives the covered
  fraction; seqlake fails above 1 %, so that a control with a few amplicons through fails). A negative control is
  not held to the completeness, frameshift, ambiguity or mixture checks (it should have no genome).

The genome's signals are counted by the reducers, region by region, with the consensus's numbers
(:func:`genome_signals`, added up as ``CONSENSUS_SUMS``); the commit decides (:func:`verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seqlake.base.params import Params
from seqlake.lake.annotate import frameshift

PASS, WARN, FAIL = "pass", "warn", "fail"
#: ``control_type`` of a negative control (the samplesheet's ``control``: ``negative``, or ``true``)
NEGATIVE = "negative"


@dataclass(frozen=True)
class VerdictParams:
    """The verdict's thresholds (see the module docstring)."""

    fail_called_pct: float = 50.0
    warn_called_pct: float = 90.0
    max_ambiguous: int = 5
    mixed_min_depth: int = 50
    mixed_min_fraction: float = 0.05
    mixed_max_fraction: float = 0.95
    mixed_alleles: int = 10
    negative_max_pct_10x: float = 1.0

    @classmethod
    def of(cls, p: Params) -> VerdictParams:
        return cls(p.qc_fail_called_pct, p.qc_warn_called_pct, p.qc_max_ambiguous, p.qc_mixed_min_depth,
                   p.qc_mixed_min_fraction, p.qc_mixed_max_fraction, p.qc_mixed_alleles, p.qc_negative_max_pct_10x)


def genome_signals(rows: Mapping[str, Sequence[Any]], first: int, annotated: bool,
                   params: VerdictParams) -> tuple[int, int]:
    """(frameshift indels, mixed-sample alleles) among ``variants`` rows ``first..`` (see the module
    docstring); with a GFF (``annotated``) a frameshift is one whose ``aa_change`` says ``fs``."""
    shifts = mixed = 0
    for i in range(first, len(rows["pos"])):
        kind = rows["type"][i]
        if kind == "snv":
            mixed += int("pv" not in rows["filters"][i] and rows["depth"][i] >= params.mixed_min_depth
                         and params.mixed_min_fraction <= rows["alt_fraction"][i] <= params.mixed_max_fraction)
        elif rows["pass"][i] and frameshift(kind, rows["ref"][i], rows["alt"][i]):
            change = rows["aa_change"][i] if annotated else None
            shifts += int(not annotated or (change is not None and "fs" in change))
    return shifts, mixed


@dataclass(frozen=True)
class Genome:
    """What the verdict reads of one sample (the commit's sums over its contigs)."""

    reference_length: int
    #: None without allele counts (no consensus): the checks that need one are not made
    called: int | None
    ambiguous: int
    frameshift_indels: int
    mixed_alleles: int
    pct_genome_10x: float | None
    control_type: str | None


def verdict(g: Genome, params: VerdictParams) -> tuple[str, str | None]:
    """``(qc_status, qc_reasons)``: the worst of the checks' outcomes, and each failed check's reason
    (``; ``-separated, the failing ones first), None when all pass."""
    fails: list[str] = []
    warns: list[str] = []
    if g.control_type == NEGATIVE:
        pct = g.pct_genome_10x or 0.0
        if pct > params.negative_max_pct_10x:
            fails.append(f"negative control: {pct:.2f}% of the genome at >= 10x (above "
                         f"{params.negative_max_pct_10x:g}%): contamination")
        return (FAIL if fails else PASS), ("; ".join(fails) or None)
    if g.called is not None and g.reference_length:
        pct = 100.0 * g.called / g.reference_length
        if pct < params.fail_called_pct:
            fails.append(f"incomplete genome: {pct:.1f}% called (below {params.fail_called_pct:g}%)")
        elif pct < params.warn_called_pct:
            warns.append(f"partial genome: {pct:.1f}% called (below {params.warn_called_pct:g}%)")
        if g.frameshift_indels:
            warns.append(f"possible frameshift: {g.frameshift_indels} PASS indel(s) not a multiple of 3 long")
        if g.ambiguous > params.max_ambiguous:
            warns.append(f"excess ambiguity: {g.ambiguous} IUPAC codes (above {params.max_ambiguous})")
        if g.mixed_alleles >= params.mixed_alleles:
            warns.append(f"possible mixture: {g.mixed_alleles} alleles at {params.mixed_min_fraction:g}-"
                         f"{params.mixed_max_fraction:g} with depth >= {params.mixed_min_depth}")
    status = FAIL if fails else WARN if warns else PASS
    return status, "; ".join(fails + warns) or None
