"""A deleted sample's name taken out of its runs' records (``seqlake.lake.redaction``): the rest kept as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from seqlake.base import storage
from seqlake.base.layout import RunLayout
from seqlake.lake.parquet_io import to_arrow, write_table
from seqlake.lake.redaction import DELETED_SAMPLE, DELETED_UPLOAD, redact_run, redacted, sheet_of
from seqlake.lake.tables import BY_NAME

GONE, KEPT = "gone", "kept"
UP = "s3://b/incoming/x/gone_R1.fastq.gz"
OTHER = "s3://b/incoming/x/kept_R1.fastq.gz"


def _status() -> dict[str, object]:
    return {"state": "FAILED", "samples": [GONE, KEPT], "samplesheet": "s3://b/incoming/x/samplesheet.csv",
            "inputs": [{"uri": UP, "key": "incoming/x/gone_R1.fastq.gz", "size": 5},
                       {"uri": OTHER, "key": "incoming/x/kept_R1.fastq.gz", "size": 6}],
            "reason": "incoming/x/gone_R1.fastq.gz, line 8: quality shorter than the sequence",
            "totals": {GONE: {"reads": 1}, KEPT: {"reads": 2}}, "failed_sample": GONE, "reads": 3}


def test_a_record_loses_the_name_and_its_uploads_and_keeps_the_rest() -> None:
    clean = redacted(_status(), GONE, frozenset({UP}))
    assert clean == {"state": "FAILED", "samples": [KEPT], "samplesheet": "s3://b/incoming/x/samplesheet.csv",
                     "inputs": [{"deleted": DELETED_UPLOAD},
                                {"uri": OTHER, "key": "incoming/x/kept_R1.fastq.gz", "size": 6}],
                     "reason": f"{DELETED_UPLOAD}, line 8: quality shorter than the sequence",
                     "totals": {KEPT: {"reads": 2}}, "failed_sample": DELETED_SAMPLE, "reads": 3}
    assert GONE not in json.dumps(clean)
    assert redacted(_status(), "nobody", frozenset()) == _status()  # nothing of another name changes


def test_a_runs_status_and_row_are_rewritten_and_its_sheet_named(tmp_path: Path) -> None:
    run = RunLayout(str(tmp_path), "r1")
    status = _status()
    storage.write_bytes(run.status, json.dumps(status).encode())
    row = {f.name: [None] for f in BY_NAME["runs"].schema}
    row.update({"state": ["FAILED"], "samples": [f"{GONE},{KEPT}"], "inputs": [json.dumps(status["inputs"])],
                "reason": [status["reason"]], "reads": [3]})
    write_table(run.result_file("runs"), to_arrow("runs", row))
    assert sheet_of(run) == "s3://b/incoming/x/samplesheet.csv"
    assert redact_run(run, GONE, frozenset({UP})) == [run.status, run.result_file("runs")]
    assert GONE not in storage.read_bytes(run.status).decode()
    (got,) = pq.read_table(run.result_file("runs")).to_pylist()
    assert got["samples"] == KEPT and got["reads"] == 3 and got["state"] == "FAILED"
    assert GONE not in got["inputs"] and OTHER in got["inputs"] and GONE not in got["reason"]
    assert redact_run(run, GONE, frozenset({UP})) == []  # done once: nothing left to rewrite
