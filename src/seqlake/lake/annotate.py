"""What each variant does to the protein: its CDS, codons and amino acids as ``ivar variants -g`` writes them,
and an ``aa_change`` such as ``S:N501Y``.

The five ivar columns follow ivar 1.3.1 (``call_variants.cpp``, ``ref_seq.cpp``, ``parse_gff.cpp``,
``allele_functions.cpp``) allele for allele:

- an SNV (N included) gets one value per ``CDS`` line of the GFF holding its position, in the file's order
  (ivar writes a row per line: SARS-CoV-2's ORF1a and ORF1ab overlap for 13,218 bases); seqlake keeps one row
  per allele and joins the values with ``,``. Outside every CDS: null (ivar NA).
- ``gene`` is the line's ``ID`` attribute (ivar GFF_FEATURE).
- each SNV is annotated alone, against the reference's other bases (ivar does not combine two SNVs of one
  codon): the codon starts ``phase + 3 * trunc((pos - start - phase) / 3)`` bases after the CDS's start; the
  reference codon has N for a base outside the CDS, the alternate codon the reference's bases there (ivar
  checks the bounds of the first only).
- amino acids by the standard code; a codon with any base other than A/C/G/T is ``X``; a stop is ``*``.
- indels: ivar writes NA in all five columns, and so does seqlake; ``aa_change`` names their effect.

Where seqlake and ivar 1.3.1 differ: ivar ignores the CDS's contig and strand (seqlake matches the contig,
and on a ``-`` strand CDS reads the codon reverse-complemented from the CDS's end); ivar's ``EditPosition``
attributes are not read.

``aa_change`` (seqlake's own; one per CDS line, joined with ``,`` like the others), the protein named by the
line's ``gene`` attribute (else ``Name``, else ``ID``) and codons numbered from 1 across the lines of one ID:
- SNV: ``S:N501Y`` (synonymous ``S:L5L``, a new stop ``S:Q493*``, a lost one ``ORF8:*122Q``);
- a deletion whose length is a multiple of 3: ``S:H69_V70del`` (the codons its bases touch, translated before
  and after, less the amino acids both keep at either end; ``S:E156_R158delinsG`` when one changes; on a ``-``
  strand CDS, or one the deletion leaves, the codons it touches), else a frameshift ``ORF6:F22fs`` (the codon
  of its first deleted base);
- an insertion of a multiple of 3 bases: ``S:R214_D215insEPE`` between two codons, ``S:S514delinsSR`` inside
  one (the codon and the inserted bases translated), else a frameshift ``ORF6:K23fs`` (the codon after the
  anchor base).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from seqlake.plan.gff import Cds

#: the columns :func:`annotate` adds to ``variants`` rows
ANNOTATION_COLUMNS = ("gene", "ref_codon", "ref_aa", "alt_codon", "alt_aa", "aa_change")
#: a contig's bases ``[start, stop)`` (0-based), upper case; ``N`` where the contig has none
Bases = Callable[[int, int], bytes]

_BASES = "TCAG"
_AMINO = "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
CODE = {a + b + c: _AMINO[16 * i + 4 * j + k] for i, a in enumerate(_BASES) for j, b in enumerate(_BASES)
        for k, c in enumerate(_BASES)}
_COMPLEMENT = str.maketrans("ACGTN", "TGCAN")


def amino_acid(codon: str) -> str:
    """ivar's ``codon2aa``: the standard code, ``X`` for a codon with any base other than A/C/G/T."""
    return CODE.get(codon.upper(), "X")


def _trunc3(n: int) -> int:
    """``n / 3`` as C divides integers (towards zero), as ivar computes the codon's start."""
    return -(-n // 3) if n < 0 else n // 3


@dataclass(frozen=True)
class _Codon:
    """One codon of a CDS line holding a position: its number in the protein and its 0-based bases."""

    number: int
    #: 0-based contig positions of the codon's three bases, in the codon's order (reversed on ``-``)
    at: tuple[int, int, int]


def codon_at(cds: Cds, pos: int) -> _Codon:
    """The codon of ``cds`` that ivar's rule places 1-based ``pos`` in."""
    if cds.reverse:
        k = _trunc3(cds.end - cds.phase - pos)
        last = cds.end - cds.phase - 3 * k - 1  # 0-based first base read on the minus strand
        return _Codon(cds.codons_before + k + 1, (last, last - 1, last - 2))
    k = _trunc3(pos - (cds.start + cds.phase))
    first = cds.start - 1 + cds.phase + 3 * k
    return _Codon(cds.codons_before + k + 1, (first, first + 1, first + 2))


def _read(bases: Bases, at: Sequence[int], reverse: bool) -> str:
    lo, hi = min(at), max(at) + 1
    if lo < 0:
        return "NNN"
    got = bases(lo, hi).decode().ljust(hi - lo, "N")
    text = "".join(got[p - lo] for p in at)
    return text.translate(_COMPLEMENT) if reverse else text


def ref_codon(cds: Cds, codon: _Codon, bases: Bases) -> str:
    """The reference codon, N for a base outside the CDS (ivar's first ``get_codon``)."""
    text = _read(bases, codon.at, cds.reverse)
    return "".join(b if cds.start - 1 <= p <= cds.end - 1 else "N" for b, p in zip(text, codon.at, strict=True))


def alt_codon(cds: Cds, codon: _Codon, pos: int, alt: str, bases: Bases) -> str:
    """The codon with ``alt`` at 1-based ``pos`` and the reference elsewhere (ivar's second ``get_codon``)."""
    text = list(_read(bases, codon.at, cds.reverse))
    if pos - 1 in codon.at:
        text[codon.at.index(pos - 1)] = alt.translate(_COMPLEMENT) if cds.reverse else alt
    return "".join(text)


class CdsIndex:
    """A GFF's CDS lines per contig, found by position (sorted starts, and the longest line: the lines that
    can hold a position start within that length before it), answered in the file's order."""

    def __init__(self, cds: Sequence[Cds]) -> None:
        self.by_contig: dict[str, list[tuple[int, int, Cds]]] = {}
        for order, c in enumerate(cds):
            self.by_contig.setdefault(c.contig, []).append((c.start, order, c))
        self.starts: dict[str, list[int]] = {}
        self.longest: dict[str, int] = {}
        for contig, lines in self.by_contig.items():
            lines.sort(key=lambda x: (x[0], x[1]))
            self.starts[contig] = [s for s, _, _ in lines]
            self.longest[contig] = max(c.end - c.start + 1 for _, _, c in lines)

    def holding(self, contig: str, pos: int) -> list[Cds]:
        """The CDS lines holding 1-based ``pos``, in the GFF's order."""
        lines = self.by_contig.get(contig)
        if not lines:
            return []
        starts = self.starts[contig]
        lo = bisect.bisect_left(starts, pos - self.longest[contig] + 1)
        hi = bisect.bisect_right(starts, pos)
        found = [(order, c) for _, order, c in lines[lo:hi] if c.end >= pos]
        return [c for _, c in sorted(found, key=lambda x: x[0])]


def _snv(cds: Cds, pos: int, alt: str, bases: Bases) -> tuple[str, str, str, str, str]:
    codon = codon_at(cds, pos)
    ref, changed = ref_codon(cds, codon, bases), alt_codon(cds, codon, pos, alt, bases)
    ref_aa, alt_aa = amino_acid(ref), amino_acid(changed)
    return ref, ref_aa, changed, alt_aa, f"{cds.gene}:{ref_aa}{codon.number}{alt_aa}"


def _named(cds: Cds, pos: int, bases: Bases) -> str:
    """``N501``: the reference amino acid and number of the codon holding 1-based ``pos``."""
    codon = codon_at(cds, pos)
    return f"{amino_acid(ref_codon(cds, codon, bases))}{codon.number}"


def _deletion(cds: Cds, first: int, last: int, bases: Bases) -> str:
    """The effect of deleting 1-based bases ``first..last`` (clipped to the CDS) on the protein."""
    lo, hi = max(first, cds.start), min(last, cds.end)
    if (last - first + 1) % 3:
        return f"{cds.gene}:{_named(cds, hi if cds.reverse else lo, bases)}fs"
    a, b = (hi, lo) if cds.reverse else (lo, hi)
    first_codon, last_codon = codon_at(cds, a), codon_at(cds, b)
    if not cds.reverse and lo == first and hi == last:
        # the touched codons before and after, translated; the amino acids both keep at either end are not
        # named (a deletion across codon boundaries often removes whole amino acids: S:H69_V70del)
        start, stop = first_codon.at[0], last_codon.at[2] + 1
        ref = bases(start, stop).decode()
        kept = ref[: first - 1 - start] + ref[last - start :]
        old = [amino_acid(ref[i : i + 3]) for i in range(0, len(ref), 3)]
        new = [amino_acid(kept[i : i + 3]) for i in range(0, len(kept), 3)]
        numbers = list(range(first_codon.number, last_codon.number + 1))
        while new and old and new[0] == old[0]:
            new, old, numbers = new[1:], old[1:], numbers[1:]
        while new and old and new[-1] == old[-1]:
            new, old, numbers = new[:-1], old[:-1], numbers[:-1]
        if not old:  # nothing changes (a deletion inside one amino acid's synonymous codons cannot): name it
            return f"{cds.gene}:{_named(cds, a, bases)}del"
        span = f"{old[0]}{numbers[0]}" + (f"_{old[-1]}{numbers[-1]}" if len(old) > 1 else "")
        return f"{cds.gene}:{span}{'delins' + ''.join(new) if new else 'del'}"
    if first_codon.number == last_codon.number:
        return f"{cds.gene}:{_named(cds, a, bases)}del"
    return f"{cds.gene}:{_named(cds, a, bases)}_{_named(cds, b, bases)}del"


def _insertion(cds: Cds, anchor: int, inserted: str, bases: Bases) -> str:
    """The effect of inserting ``inserted`` after 1-based ``anchor`` on the protein."""
    after = anchor if cds.reverse else anchor + 1
    if len(inserted) % 3 or not cds.start <= anchor < cds.end:
        return f"{cds.gene}:{_named(cds, after, bases)}fs"
    before_pos, after_pos = (anchor + 1, anchor) if cds.reverse else (anchor, anchor + 1)
    seq = inserted.upper()[::-1].translate(_COMPLEMENT) if cds.reverse else inserted.upper()
    if codon_at(cds, before_pos).number != codon_at(cds, after_pos).number:  # between two codons
        aas = "".join(amino_acid(seq[i : i + 3]) for i in range(0, len(seq), 3))
        return f"{cds.gene}:{_named(cds, before_pos, bases)}_{_named(cds, after_pos, bases)}ins{aas}"
    # inside a codon: the codon becomes 1 + len / 3 codons (HGVS delins)
    codon = codon_at(cds, after_pos)
    ref = ref_codon(cds, codon, bases)
    cut = codon.at.index(before_pos - 1) + 1
    new = ref[:cut] + seq + ref[cut:]
    aas = "".join(amino_acid(new[i : i + 3]) for i in range(0, len(new), 3))
    return f"{cds.gene}:{_named(cds, after_pos, bases)}delins{aas}"


def annotate(rows: dict[str, list[Any]], first: int, contig: str, index: CdsIndex, bases: Bases) -> None:
    """Add :data:`ANNOTATION_COLUMNS` to the ``variants`` rows ``first..`` of ``rows`` (all on ``contig``;
    1-based ``pos``, VCF-style ``ref`` / ``alt``, ``type``), as the module docstring says."""
    for c in ANNOTATION_COLUMNS:
        rows.setdefault(c, [None] * first)
    for i in range(first, len(rows["pos"])):
        pos, ref, alt, kind = rows["pos"][i], rows["ref"][i], rows["alt"][i], rows["type"][i]
        ivar: list[tuple[str, ...]] = []
        changes: list[str] = []
        if kind == "snv":
            for cds in index.holding(contig, pos):
                *five, change = _snv(cds, pos, alt, bases)
                ivar.append((cds.feature_id, *five))
                changes.append(change)
        elif kind == "del":
            first_deleted, last_deleted = pos + 1, pos + len(ref) - 1
            seen = {id(c): c for p in (first_deleted, last_deleted) for c in index.holding(contig, p)}
            changes = [_deletion(c, first_deleted, last_deleted, bases) for c in seen.values()]
        else:
            changes = [_insertion(c, pos, alt[1:], bases) for c in index.holding(contig, pos + 1)
                       if c.start <= pos + 1 <= c.end]
        values = [",".join(v) for v in zip(*ivar, strict=True)] if ivar else [None] * 5
        for c, v in zip(ANNOTATION_COLUMNS, [*values, ",".join(changes) or None], strict=True):
            rows[c].append(v)


def frameshift(kind: str, ref: str, alt: str) -> bool:
    """An indel whose length is not a multiple of 3."""
    return kind != "snv" and (len(alt) - len(ref)) % 3 != 0
