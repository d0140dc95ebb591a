"""A GFF3 of the reference's coding sequences (``--gff``): read and checked when the run is planned.

Only the ``CDS`` lines are kept, in file order, each one a :class:`Cds` as ``ivar variants -g`` (1.3.1,
``parse_gff.cpp``) reads it: columns 1, 4, 5, 7 and 8 (contig, 1-based start and end, strand, phase) and the
attributes, split at ``;`` and at the first ``=`` without URL-decoding. A CDS of several lines (SARS-CoV-2's
ORF1ab, whose ribosomal slippage reads base 13,468 twice) is several features with one ``ID``: ivar annotates
each line on its own, and so does seqlake; the codon numbers of a later line continue those of the earlier
ones (:attr:`Cds.codons_before`). Lines after ``##FASTA`` are sequence, not features.

A line that is not GFF3 (fewer than 9 tab-separated columns, a start or end that is not a number, a start
after its end, a contig the reference does not have, an end past the contig, a phase other than 0, 1, 2)
is bad input naming the file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from seqlake.base import storage
from seqlake.base.errors import BadInputError, decoded_text


@dataclass(frozen=True)
class Cds:
    """One ``CDS`` line of a GFF3."""

    contig: str
    #: 1-based, inclusive (GFF3 columns 4 and 5)
    start: int
    end: int
    reverse: bool
    phase: int
    #: the ``ID`` attribute: ivar's GFF_FEATURE (empty when the line has none, as ivar writes it)
    feature_id: str
    #: what ``aa_change`` names the protein by: the ``gene`` attribute, else ``Name``, else ``ID``
    gene: str
    #: codons of the earlier lines with the same ID (the codon numbers of this line continue them)
    codons_before: int = 0

    @property
    def codons(self) -> int:
        """Whole codons of the line after its phase."""
        return (self.end - self.start + 1 - self.phase) // 3


def _attributes(text: str) -> dict[str, str]:
    """ivar's attribute split: ``key=value`` pairs between ``;``, the value after the first ``=``."""
    out: dict[str, str] = {}
    for item in text.split(";"):
        key, _, value = item.partition("=")
        if key and value:
            out[key.strip()] = value
    return out


def _problem(cols: list[str], contigs: Mapping[str, int] | None) -> str | None:
    """What is wrong with a CDS line's columns, if anything."""
    contig, start_text, end_text, strand, phase_text = cols[0], cols[3], cols[4], cols[6], cols[7]
    if not (start_text.isdigit() and end_text.isdigit()):
        return f"CDS start {start_text!r} and end {end_text!r} must be whole numbers"
    start, end = int(start_text), int(end_text)
    if start < 1 or end < start:
        return f"CDS end {end} is before its start {start} (1-based, inclusive)"
    if phase_text not in {"0", "1", "2"} or strand not in {"+", "-", ".", "?"}:
        return f"CDS phase {phase_text!r} is not 0, 1 or 2, or strand {strand!r} is not +, - or ."
    if contigs is None or end <= contigs.get(contig, -1):
        return None
    if contig not in contigs:
        return f"contig {contig!r} is not in the reference"
    return f"CDS end {end} is past the end of {contig} ({contigs[contig]} bases)"


def parse_gff(uri: str, text: str, contigs: Mapping[str, int] | None) -> tuple[Cds, ...]:
    """The CDS lines of a GFF3's text (see the module docstring); ``contigs`` (name -> length) checks them."""
    out: list[Cds] = []
    codons: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("##FASTA"):
            break
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.rstrip("\r").split("\t")
        if len(cols) < 9:
            raise BadInputError(uri, f"not a GFF3 line: {len(cols)} tab-separated columns, 9 expected", line=number)
        if cols[2] != "CDS":
            continue
        problem = _problem(cols, contigs)
        if problem:
            raise BadInputError(uri, problem, line=number)
        contig, start, end, strand, phase_text = cols[0], int(cols[3]), int(cols[4]), cols[6], cols[7]
        attrs = _attributes(cols[8])
        feature_id = attrs.get("ID", "")
        gene = attrs.get("gene") or attrs.get("Name") or feature_id or f"CDS{start}"
        cds = Cds(contig, start, end, strand == "-", int(phase_text), feature_id, gene,
                  codons.get(feature_id, 0) if feature_id else 0)
        if feature_id:
            codons[feature_id] = cds.codons_before + cds.codons
        out.append(cds)
    return tuple(out)


def check_gff_bytes(uri: str, data: bytes, contigs: Mapping[str, int] | None) -> tuple[Cds, ...]:
    """A GFF3's bytes decoded and checked against the reference's contigs (the plan checks the bytes it pins)."""
    return parse_gff(uri, decoded_text(uri, data, "GFF3"), contigs)


def load_gff(uri: str, contigs: Mapping[str, int] | None) -> tuple[Cds, ...]:
    """Read and check a GFF3 (a local path or ``s3://`` URI) against the reference's contigs."""
    return check_gff_bytes(uri, storage.read_bytes(uri), contigs)
