"""Samplesheets (nf-core sample,fastq_1,fastq_2) and mate names."""

from __future__ import annotations

from pathlib import Path

import pytest

from seqlake.base.errors import BadInputError
from seqlake.base.model import Sample
from seqlake.base.naming import mate_from_name, sample_from_filename
from seqlake.plan.samplesheet import parse_samplesheet, read_samplesheet

HEADER = "sample,fastq_1,fastq_2\n"


def test_relative_paths_and_single_end(tmp_path: Path) -> None:
    sheet = tmp_path / "batch" / "samplesheet.csv"
    sheet.parent.mkdir()
    sheet.write_text(HEADER + "A,a_R1.fastq.gz,a_R2.fastq.gz\n\nB,sub/b.fq,\n")
    base = sheet.parent.resolve()
    assert read_samplesheet(str(sheet)) == [
        Sample("A", str(base / "a_R1.fastq.gz"), str(base / "a_R2.fastq.gz")),
        Sample("B", str(base / "sub" / "b.fq"), None),
    ]


def test_s3_sheet() -> None:
    text = HEADER + "A,a_1.fq.gz,s3://bk/other/a_2.fq.gz\n"
    assert parse_samplesheet(text, "s3://bk/incoming/b1/samplesheet.csv") == [
        Sample("A", "s3://bk/incoming/b1/a_1.fq.gz", "s3://bk/other/a_2.fq.gz")]
    foreign = HEADER + "A,s3://elsewhere/a.fq.gz,\n"
    assert parse_samplesheet(foreign, "s3://bk/in/s.csv", allow_other_buckets=True)[0].r1 == \
        "s3://elsewhere/a.fq.gz"


def test_other_buckets_only_those_allowed() -> None:
    text = HEADER + "A,s3://ok/a.fq.gz,\nB,s3://bk/b.fq.gz,\nC,s3://not-listed/c.fq.gz,\n"
    with pytest.raises(BadInputError) as info:
        parse_samplesheet(text, "s3://bk/in/samplesheet.csv", allow_other_buckets=frozenset({"ok", "also"}))
    assert str(info.value) == ("s3://bk/in/samplesheet.csv:4: 's3://not-listed/c.fq.gz' is in bucket "
                               "'not-listed', which is not in AllowedInputBuckets (also, ok)")
    # an empty list allows none, as False does
    with pytest.raises(BadInputError, match="other buckets are not allowed"):
        parse_samplesheet(text, "s3://bk/in/samplesheet.csv", allow_other_buckets=frozenset())
    ok = parse_samplesheet(text.rsplit("C,", 1)[0], "s3://bk/in/samplesheet.csv", allow_other_buckets={"ok"})
    assert [s.r1 for s in ok] == ["s3://ok/a.fq.gz", "s3://bk/b.fq.gz"]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("sample,fastq_2\nA,a.fq\n", 1, "missing column 'fastq_1'"),
        ("", 1, "empty"),
        (HEADER, 2, "no samples"),
        (HEADER + "A,a.fq,\nB,b.fq,\nA,c_1.fq,c_2.fq\n", 4, "sample 'A' mixes paired-end and single-end rows "
         "(first on line 2)"),
        (HEADER + "A,a.fq,\nB,a.fq,\n", 3, "already listed on line 2"),
        ("sample,fastq_1,fastq_2,control\nA,a.fq,,maybe\n", 2, "control must be negative, positive, true or false"),
        ("sample,fastq_1,fastq_2,control\nA,a.fq,,true\nB,b.fq,,yes\n", 3, "control must be negative, positive"),
        ("sample,fastq_1,fastq_2,lane\nA,a.fq,,L1\n", 2, "lane must be a positive integer"),
        (HEADER + "A B,a.fq,\n", 2, "column sample"),
        (HEADER + "A,,\n", 2, "column fastq_1"),
        (HEADER + "A,a.bam,\n", 2, "column fastq_1"),
        (HEADER + "A,a.fq,b.txt\n", 2, "column fastq_2"),
        (HEADER + "A,../a.fq,\n", 2, "'..'"),
        (HEADER + "A,s3://bk/x/../a.fq,\n", 2, "'..'"),
        (HEADER + "A,/abs/a.fq,\n", 2, "a local absolute path in a sheet in S3"),
        (HEADER + "A,s3://other/a.fq,\n", 2, "bucket 'other'"),
        (HEADER + "A,a.fq,a.fq\n", 2, "same file"),
        (HEADER + "A,a.fq\n", 2, "2 fields"),
    ],
)
def test_errors_name_sheet_and_line(text: str, line: int, fragment: str) -> None:
    sheet = "s3://bk/in/samplesheet.csv"
    with pytest.raises(BadInputError) as info:
        parse_samplesheet(text, sheet)
    assert (info.value.path, info.value.line) == (sheet, line)
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a_R1_001.fastq.gz", ("a", 1)),
        ("a_R2.fq", ("a", 2)),
        ("s1_1.fastq", ("s1", 1)),
        ("s1_2.fq.gz", ("s1", 2)),
        ("NA12878_S1_L001_R2_001.fastq.gz", ("NA12878", 2)),
        ("incoming/x/SRR1.1.fastq.gz", ("SRR1", 1)),
        ("reads.fastq.gz", ("reads", None)),
        ("notes.txt", None),
        ("a_R3.fastq", ("a_R3", None)),
    ],
)
def test_mate_from_name(name: str, expected: tuple[str, int | None] | None) -> None:
    assert mate_from_name(name) == expected


def test_sample_from_filename() -> None:
    assert sample_from_filename("x_R2_001.fastq.gz") == ("x", 2)
    assert sample_from_filename("run7.txt.gz") == ("run7", None)


def test_a_local_sheet_takes_absolute_paths_and_s3_uris(tmp_path: Path) -> None:
    """nf-core sheets often name their FASTQs by absolute path or s3:// URI (issue 37: both were refused)."""
    sheet = tmp_path / "samplesheet.csv"
    text = HEADER + f"A,{tmp_path}/runs/a_R1.fq,{tmp_path}/runs/a_R2.fq\nB,s3://lab-bucket/b.fq.gz,\n"
    samples = parse_samplesheet(text, str(sheet))
    assert [(s.name, s.r1, s.r2) for s in samples] == [
        ("A", f"{tmp_path}/runs/a_R1.fq", f"{tmp_path}/runs/a_R2.fq"), ("B", "s3://lab-bucket/b.fq.gz", None)]
    with pytest.raises(BadInputError, match=r"'\.\.'"):
        parse_samplesheet(HEADER + f"A,{tmp_path}/../a.fq,\n", str(sheet))


def test_process_reads_a_sheet_of_absolute_paths(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from seqlake.demo_data import paths

    r1, r2, _ = paths()
    (tmp_path / "elsewhere").mkdir()
    sheet = tmp_path / "elsewhere" / "samplesheet.csv"
    sheet.write_text(HEADER + f"demo,{r1},{r2}\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "seqlake", "process", "--samplesheet", str(sheet), "--out", str(out),
                           "--jobs", "1", "--no-trim"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "summary.json").read_text())["samples"] == ["demo"]
