"""A sample with no reads (docs/FAULTS.md, "Empty inputs"): the kinds of empty file are each a
run of zero reads with ``seqlake process``, as through the local cloud (``test_bad_input.py``'s
``empty input:`` cases), and every reader agrees they hold no record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from seqlake.base.model import Sample
from seqlake.plan.planner import make_plan
from seqlake.reads import fastq, gzindex

from .conftest import BARE_GZIP_HEADER, EMPTY_INPUTS

KINDS = list(EMPTY_INPUTS)


def _file(tmp_path: Path, kind: str) -> Path:
    body = EMPTY_INPUTS[kind]
    path = tmp_path / ("e.fastq.gz" if body else "e.fastq")
    path.write_bytes(body)
    return path


@pytest.mark.parametrize("kind", KINDS)
def test_process_makes_a_run_of_zero_reads(tmp_path: Path, kind: str) -> None:
    path = _file(tmp_path, kind)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "seqlake", "process", str(path), "--out", str(out), "--jobs", "1"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["state"] == "SUCCEEDED" and summary["shards"] == 1
    qc = pq.read_table(out / "results" / "qc_summary").to_pylist()
    assert {r["stage"] for r in qc} == {"raw", "trimmed"}
    assert all(r["reads"] == 0 and r["bases"] == 0 for r in qc)


@pytest.mark.parametrize("kind", KINDS)
def test_every_reader_sees_no_record(tmp_path: Path, kind: str) -> None:
    path = str(_file(tmp_path, kind))
    assert list(fastq.read_records(path)) == []
    assert fastq.sniff_fastq(path).records == 0
    plan = make_plan("e", [Sample("e", path)], out_prefix=str(tmp_path / "plan"))
    assert [i.records for i in plan.inputs] == [0] and plan.array_size == 1
    # no seek index for a file of no data: a zero-record span never opens one
    assert plan.inputs[0].index_uri is None
    if EMPTY_INPUTS[kind][:2] == b"\x1f\x8b":
        for threads in (1, 2):
            res = gzindex.index_gzip(path, threads=threads)
            assert (res.scan.records, res.scan.plain_size, res.index) == (0, 0, None)


def test_a_gzip_header_followed_by_anything_is_read_as_a_stream(tmp_path: Path) -> None:
    """Only the bare header is empty: a header and a cut member is a truncated stream, as before."""
    path = tmp_path / "cut.fastq.gz"
    path.write_bytes(BARE_GZIP_HEADER + b"\x03")
    with pytest.raises(fastq.BadInputError, match="truncated"):
        list(fastq.read_records(str(path)))


def test_a_bare_gzip_header_is_a_truncated_upload_not_an_empty_sample(tmp_path: Path) -> None:
    """Issue 37: the header alone (``gzip -t``: unexpected end of file) was read as a sample of no reads. Every
    reader refuses it as truncated, and ``seqlake process`` exits 65 with one line naming the file."""
    path = tmp_path / "h.fastq.gz"
    path.write_bytes(BARE_GZIP_HEADER)
    message = r"h\.fastq\.gz: gzip stream truncated before the end of the first record: the file is a gzip header"
    with pytest.raises(fastq.TruncatedStreamError, match=message):
        list(fastq.read_records(str(path)))
    with pytest.raises(fastq.TruncatedStreamError, match=message):
        fastq.sniff_fastq(str(path))
    with pytest.raises(fastq.TruncatedStreamError, match=message):
        gzindex.index_gzip(str(path), threads=1)
    proc = subprocess.run([sys.executable, "-m", "seqlake", "process", str(path), "--out", str(tmp_path / "out"),
                           "--jobs", "1"], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 65
    assert proc.stderr.strip().splitlines()[-1].startswith(f"seqlake: bad input: {path}: gzip stream truncated")
    assert not (tmp_path / "out" / "results").exists()
