"""Every file in tests/data/edge/ and its expected outcome at the reader level.

Each case names the file's defect, the compression sniffed from its magic bytes, and either the record
count or the error: 1-based line (the record's first line for a file that ends inside a record, the
offending line otherwise) and a fragment of the message. The reader is checked three ways: streaming the
whole file (``read_records``), the plan-time sniff of the first records (``sniff_fastq``: also the
Phred+64 rule) and the planner's count (``make_plan``: record counts, or the same rejection).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from seqlake.base.errors import BadInputError
from seqlake.base.model import Sample
from seqlake.plan.planner import make_plan
from seqlake.reads import fastq


@dataclass(frozen=True)
class Case:
    path: str
    compression: str
    records: int | None = None
    line: int | None = None
    error: str | None = None
    #: rejected at plan time only (encoding), the stream itself parses
    phred64: bool = False


LEN = "Length of sequence and qualities differ"

CASES = [
    # Cock et al. 2010 error cases (Biopython Tests/Quality)
    Case("biopython/error_long_qual.fastq", "plain", line=16, error=LEN),
    Case("biopython/error_no_qual.fastq", "plain", line=4, error=LEN),
    Case("biopython/error_short_qual.fastq", "plain", line=12, error=LEN),
    Case("biopython/error_trunc_at_plus.fastq", "plain", line=17, error="ends inside a record"),
    Case("biopython/error_trunc_at_qual.fastq", "plain", line=17, error="ends inside a record"),
    Case("biopython/error_trunc_in_plus.fastq", "plain", line=17, error="ends inside a record"),
    Case("biopython/error_trunc_in_qual.fastq", "plain", line=20, error=LEN),
    Case("biopython/example.fastq", "plain", records=3),
    Case("biopython/example.fastq.bgz", "bgzf", records=3),
    Case("biopython/example_dos.fastq", "plain", records=3),
    Case("biopython/illumina_full_range_original_illumina.fastq", "plain", records=2, phred64=True),
    Case("biopython/sanger_full_range_original_sanger.fastq", "plain", records=2),
    Case("biopython/solexa_example.fastq", "plain", records=5, phred64=True),
    Case("biopython/zero_length.fastq", "plain", records=5),
    # cutadapt tests/data
    Case("cutadapt/casava.fastq", "plain", records=2),
    Case("cutadapt/dos.fastq", "plain", records=3),
    Case("cutadapt/empty.fastq", "plain", records=0),
    Case("cutadapt/format-error.fastq", "plain", line=4, error=LEN),
    Case("cutadapt/illumina64.fastq", "plain", records=20, phred64=True),
    Case("cutadapt/interleaved.fastq", "plain", records=10),
    Case("cutadapt/multiblock.fastq.bz2", "bz2", records=3),
    Case("cutadapt/multiblock.fastq.gz", "gzip", records=3),
    Case("cutadapt/paired-swapped.1.fastq", "plain", records=4),
    Case("cutadapt/paired-truncated.1.fastq", "plain", records=3),
    Case("cutadapt/paired-truncated.2.fastq", "plain", records=3),
    Case("cutadapt/paired.1.fastq", "plain", records=5),
    Case("cutadapt/paired.2.fastq", "plain", records=5),
    Case("cutadapt/s_1_sequence.txt.gz", "gzip", records=2),
    Case("cutadapt/small.fastq.xz", "xz", records=3),
    Case("cutadapt/withplus.fastq", "plain", line=3, error="Sequence descriptions don't match"),
]


def test_every_edge_file_has_a_case(edge: Path) -> None:
    on_disk = {str(p.relative_to(edge)) for p in edge.rglob("*") if p.is_file()}
    assert on_disk == {c.path for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.path)
def test_reader_outcome(edge: Path, case: Case) -> None:
    path = str(edge / case.path)
    assert fastq.sniff_compression((edge / case.path).read_bytes()[:32]) == case.compression
    if case.error is None:
        assert sum(1 for _ in fastq.read_records(path)) == case.records
        return
    with pytest.raises(BadInputError) as info:
        list(fastq.read_records(path))
    err = info.value
    assert (err.path, err.line) == (path, case.line)
    assert case.error in err.message
    assert str(err).startswith(f"{path}:{case.line}: ")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.path)
def test_sniff_outcome(edge: Path, case: Case) -> None:
    path = str(edge / case.path)
    if case.error is None and not case.phred64:
        sniff = fastq.sniff_fastq(path)
        assert (sniff.compression, sniff.records, sniff.complete) == (case.compression, case.records, True)
        return
    with pytest.raises(BadInputError) as info:
        fastq.sniff_fastq(path)
    if case.phred64:
        assert "Phred+64" in info.value.message
        assert "seqtk seq -Q64 -V" in info.value.message
    else:
        assert info.value.line == case.line


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.path)
def test_plan_outcome(edge: Path, case: Case, tmp_path: Path) -> None:
    path = str(edge / case.path)
    run = lambda: make_plan("edge", [Sample("s", path)], out_prefix=str(tmp_path))  # noqa: E731
    if case.error is None and not case.phred64:
        plan = run()
        assert plan.inputs[0].records == case.records
        assert plan.inputs[0].compression == case.compression
        assert plan.array_size == 1
        return
    with pytest.raises(BadInputError) as info:
        run()
    if case.phred64:
        assert "Phred+64" in info.value.message
    else:
        # the planner's line count and dnaio agree on where a truncated record starts
        assert info.value.line == case.line


@pytest.mark.parametrize(
    ("r1", "r2", "message"),
    [
        ("paired.1.fastq", "paired-truncated.2.fastq", "has 5 records"),
        ("paired-truncated.1.fastq", "paired.2.fastq", "has 3 records"),
        ("paired-swapped.1.fastq", "paired.2.fastq", "has 4 records"),
    ],
)
def test_paired_counts_differ_at_plan_time(edge: Path, tmp_path: Path, r1: str, r2: str,
                                           message: str) -> None:
    p1, p2 = str(edge / "cutadapt" / r1), str(edge / "cutadapt" / r2)
    with pytest.raises(BadInputError) as info:
        make_plan("pairs", [Sample("s", p1, p2)], out_prefix=str(tmp_path))
    text = str(info.value)
    assert p1 in text
    assert p2 in text
    assert message in text


def test_truncated_pair_is_a_valid_pair(edge: Path, tmp_path: Path) -> None:
    d = edge / "cutadapt"
    plan = make_plan("ok", [Sample("s", str(d / "paired-truncated.1.fastq"),
                                         str(d / "paired-truncated.2.fastq"))], out_prefix=str(tmp_path))
    assert [i.records for i in plan.inputs] == [3, 3]


def test_swapped_mates_rejected_with_line(edge: Path) -> None:
    d = edge / "cutadapt"
    r1 = list(fastq.read_records(str(d / "paired-swapped.1.fastq")))[:3]
    r2 = list(fastq.read_records(str(d / "paired.2.fastq")))[:3]
    with pytest.raises(BadInputError) as info:
        fastq.check_mates(r1, r2, "swapped.1", "paired.2")
    # record 1 of R1 is read3, of R2 read2
    assert (info.value.line, info.value.record) == (5, 1)
    assert "read2/2" in info.value.message
    assert "read3/1" in info.value.message
