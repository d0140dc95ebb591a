"""Every bad-input message counts records from 1, as it counts lines: record N holds lines 4N-3..4N.

The messages come from every reader that rejects a file: the streaming reader, the plan-time sniff and
count, the gzip index pass (a cut stream), the mate check, and a shard's worker (defects the plan's sample
did not see).
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest
from test_edge_files import CASES

from seqlake.base.errors import BadInputError
from seqlake.base.model import Sample
from seqlake.child import worker
from seqlake.plan.planner import make_plan
from seqlake.reads import fastq

_RECORD = re.compile(r"\brecord (\d+)(?: \(line (\d+)\))?")


def numbering_problems(err: BadInputError) -> list[str]:
    """Where a record number in ``err``'s line is not the 1-based record of the line it names."""
    text, found = str(err), []
    for m in _RECORD.finditer(text):
        line = int(m.group(2)) if m.group(2) else err.line
        if line is not None and int(m.group(1)) != (line - 1) // 4 + 1:
            found.append(f"record {m.group(1)} for line {line}: {text}")
    return found


def rejection(make: object) -> BadInputError:
    with pytest.raises(BadInputError) as info:
        make()  # type: ignore[operator]
    return info.value


ERRORS = [c for c in CASES if c.error is not None]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c.path)
def test_readers_count_records_from_one(edge: Path, case: object, tmp_path: Path) -> None:
    path = str(edge / case.path)  # type: ignore[attr-defined]
    for make in (lambda: list(fastq.read_records(path)), lambda: fastq.sniff_fastq(path),
                 lambda: make_plan("edge", [Sample("s", path)], out_prefix=str(tmp_path))):
        assert numbering_problems(rejection(make)) == []


def test_a_file_cut_inside_a_record_names_it_from_one(tmp_path: Path) -> None:
    path = tmp_path / "cut.fastq"
    path.write_bytes(b"@r1\nACGT\n+\nIIII\n@r2\nAC")
    err = rejection(lambda: list(fastq.read_records(str(path))))
    assert "record 2 (line 5)" in str(err)
    assert numbering_problems(rejection(lambda: fastq.sniff_fastq(str(path)))) == []


def test_a_cut_gzip_stream_names_its_last_whole_record_from_one(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(b"@r%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(3000)), mtime=0)
    path = tmp_path / "cut.fastq.gz"
    path.write_bytes(data[: len(data) // 2])
    err = rejection(lambda: make_plan("cut", [Sample("s", str(path))], out_prefix=str(tmp_path / "out")))
    m = re.search(r"after record (\d+) \(line (\d+)\), the last complete record", str(err))
    assert m is not None, str(err)
    assert int(m.group(2)) == 4 * int(m.group(1))


def test_mates_and_shards_count_records_from_one(tmp_path: Path) -> None:
    """A mate name that differs in the 34th record, found by the shard's worker (the plan sampled less)."""
    r1, r2 = tmp_path / "x_R1.fastq", tmp_path / "x_R2.fastq"
    names = [f"read{i}" for i in range(40)]
    r1.write_text("".join(f"@{n}/1\nACGTACGTAC\n+\nIIIIIIIIII\n" for n in names))
    r2.write_text("".join(f"@{n}/2\nACGTACGTAC\n+\nIIIIIIIIII\n" for n in names))
    plan = make_plan("mates", [Sample("x", str(r1), str(r2))], out_prefix=str(tmp_path / "out"), shards=2)
    st = r2.stat()  # silent corruption: same size and mtime, so the plan still fits
    r2.write_bytes(r2.read_bytes().replace(b"@read33/2", b"@reaX33/2"))
    os.utime(r2, ns=(st.st_atime_ns, st.st_mtime_ns))
    err = rejection(lambda: worker.process_child(plan, 1))
    assert err.line == 4 * 33 + 1 and "(record 34)" in str(err)
    assert numbering_problems(err) == []
