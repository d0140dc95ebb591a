"""The GFF reader and the annotation's rules on known SARS-CoV-2 mutations (the comparison with ivar variants -g
allele for allele is in tests/core/test_variants.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from seqlake.base.errors import BadInputError
from seqlake.lake.annotate import CODE, CdsIndex, amino_acid, annotate
from seqlake.plan.gff import Cds, parse_gff

TESTS = Path(__file__).resolve().parents[1]
GFF = TESTS / "data" / "MN908947.3.cds.gff3"
REFERENCE = TESTS.parent / "src" / "seqlake" / "demo_data" / "MN908947.3.fasta"


@pytest.fixture(scope="module")
def genome() -> str:
    return "".join(REFERENCE.read_text().split("\n")[1:]).upper()


def _bases(genome: str) -> Any:
    return lambda lo, hi: genome[max(lo, 0) : hi].encode()


def _rows(*variants: tuple[int, str, str, str]) -> dict[str, list[Any]]:
    return {"pos": [v[0] for v in variants], "ref": [v[1] for v in variants], "alt": [v[2] for v in variants],
            "type": [v[3] for v in variants]}


def test_the_hand_written_gff_is_the_genomes_coding_sequences(genome: str) -> None:
    """Each line of tests/data/MN908947.3.cds.gff3 starts with ATG (ORF1ab's second line continues the first
    after the slippage), its protein ends at a stop codon and has none inside."""
    cds = parse_gff(str(GFF), GFF.read_text(), {"MN908947.3": len(genome)})
    assert [c.gene for c in cds] == ["ORF1ab", "ORF1ab", "ORF1a", "S", "ORF3a", "E", "M", "ORF6", "ORF7a", "ORF7b",
                                     "ORF8", "N", "ORF10"]
    orf1ab = ""
    for c in cds:
        seq = genome[c.start - 1 : c.end]
        protein = "".join(amino_acid(seq[i : i + 3]) for i in range(0, len(seq) - 2, 3))
        if c.gene == "ORF1ab":
            orf1ab += protein
            continue
        assert len(seq) % 3 == 0 and seq[:3] == "ATG" and protein.index("*") == len(protein) - 1, c
    assert orf1ab.startswith("M") and orf1ab.index("*") == len(orf1ab) - 1  # 7,096 amino acids with the stop
    assert len(orf1ab) == 7097
    assert cds[1].codons_before == 4401  # the second line's codons continue the first's


def test_known_mutations_are_named(genome: str) -> None:
    delta_69_70 = (21764, genome[21763:21770], genome[21763], "del")
    delta_157_158 = (22028, genome[22027:22034], genome[22027], "del")
    rows = _rows((23063, "A", "T", "snv"), (23403, "A", "G", "snv"), delta_69_70,
                 (27383, "T", "TN", "ins"), (28881, "G", "A", "snv"), delta_157_158,
                 (100, "A", "C", "snv"), (27972, "C", "T", "snv"))
    annotate(rows, 0, "MN908947.3", CdsIndex(parse_gff(str(GFF), GFF.read_text(), None)), _bases(genome))
    assert rows["aa_change"][:3] == ["S:N501Y", "S:D614G", "S:H69_V70del"]
    assert rows["aa_change"][3].startswith("ORF6:") and rows["aa_change"][3].endswith("fs")
    assert rows["aa_change"][4] == "N:R203K"
    assert rows["aa_change"][5] == "S:E156_R158delinsG"  # Delta's S:E156G + F157/R158 deletion, one allele
    assert rows["aa_change"][6] is None and rows["gene"][6] is None  # 5' UTR
    assert rows["aa_change"][7] == "ORF8:Q27*"  # B.1.1.7's stop in ORF8
    assert (rows["gene"][0], rows["ref_codon"][0], rows["ref_aa"][0], rows["alt_codon"][0], rows["alt_aa"][0]) == \
        ("S", "AAT", "N", "TAT", "Y")
    assert rows["gene"][2] is None  # indels: NA in ivar's five columns


def test_a_minus_strand_cds_reads_the_codon_reverse_complemented() -> None:
    genome = "CC" + "TTA" + "GCC" + "CAT" + "GG"  # + strand; the - strand CDS 3..11 reads ATG GGC TAA
    cds = Cds("c", 3, 11, True, 0, "g1", "g1")
    rows = _rows((8, "C", "A", "snv"))  # the middle codon (bases 8, 7, 6 complemented): GGC -> TGC (G -> C)
    annotate(rows, 0, "c", CdsIndex([cds]), _bases(genome))
    assert (rows["ref_codon"][0], rows["alt_codon"][0], rows["aa_change"][0]) == ("GGC", "TGC", "g1:G2C")
    rows = _rows((10, "A", "G", "snv"))  # ATG -> ACG
    annotate(rows, 0, "c", CdsIndex([cds]), _bases(genome))
    assert rows["aa_change"][0] == "g1:M1T"


@pytest.mark.parametrize(("line", "message"), [
    ("MN908947.3\tNCBI\tCDS\t266", "9 expected"),
    ("MN908947.3\tNCBI\tCDS\tx\t300\t.\t+\t0\tID=a", "must be whole numbers"),
    ("MN908947.3\tNCBI\tCDS\t300\t266\t.\t+\t0\tID=a", "before its start"),
    ("MN908947.3\tNCBI\tCDS\t266\t300\t.\t+\t3\tID=a", "phase '3'"),
    ("chr1\tNCBI\tCDS\t266\t300\t.\t+\t0\tID=a", "contig 'chr1' is not in the reference"),
    ("MN908947.3\tNCBI\tCDS\t266\t40000\t.\t+\t0\tID=a", "past the end of MN908947.3"),
])
def test_a_bad_gff_line_is_named(line: str, message: str) -> None:
    with pytest.raises(BadInputError) as caught:
        parse_gff("x.gff", "##gff-version 3\n" + line + "\n", {"MN908947.3": 29903})
    assert str(caught.value).startswith("x.gff:2: ") and message in str(caught.value)


def test_the_genetic_code_has_64_codons_and_3_stops() -> None:
    assert len(CODE) == 64 and sorted(k for k, v in CODE.items() if v == "*") == ["TAA", "TAG", "TGA"]
    assert amino_acid("ANG") == "X"


def test_a_bad_gff_is_rejected_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from seqlake.base.model import Sample
    from seqlake.base.params import Params
    from seqlake.plan.planner import make_plan
    from seqlake.plan.refindex import indexed_reference

    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path / "refcache"))
    gff = tmp_path / "genes.gff3"
    gff.write_text("##gff-version 3\nMN908947.3\tNCBI\tCDS\t21563\t25384\t.\t+\t0\tID=S\n"
                   "MN908947.3\tNCBI\tCDS\t29558\t39674\t.\t+\t0\tID=ORF10\n")
    reads = tmp_path / "r.fastq"
    reads.write_text("@r1\nACGT\n+\nIIII\n")
    with pytest.raises(BadInputError) as caught:
        make_plan("bad", [Sample("s", str(reads))], out_prefix=str(tmp_path / "lake"),
                  reference=indexed_reference(str(REFERENCE)), params=Params(gff=str(gff)))
    assert str(caught.value) == f"{gff}:3: CDS end 39674 is past the end of MN908947.3 (29903 bases)"
    assert not (tmp_path / "lake").exists()
