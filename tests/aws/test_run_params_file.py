"""Run parameters per upload (issue 37 item 3): a ``params.json`` in the upload's folder sets that run's
parameters over the stack's, checked against the JSON Schema generated from ``base/params.py`` before any shard;
the primer BED it names (a key in the folder, or under ``references/``) is pinned by content in the run id."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from seqlake.base.errors import BadInputError
from seqlake.base.params import json_schema, read_params_file
from seqlake.plan.primers import content_pin

from .conftest import Deployed, execution_request, read_status
from .test_start_run import FASTQ, executions, start  # noqa: F401 - the start function, a fixture

REPO = Path(__file__).resolve().parents[2]
V3_BED = REPO / "tests" / "data" / "nCoV-2019.V3.primer.bed"


def test_the_shipped_schema_is_the_generated_one() -> None:
    shipped = json.loads((REPO / "src" / "seqlake" / "schemas" / "params.schema.json").read_text())
    assert shipped == json_schema(), "regenerate schemas/params.schema.json from seqlake.base.params.json_schema()"
    assert "primer_bed_pin" not in shipped["properties"] and "preset" in shipped["properties"]


@pytest.mark.parametrize(("text", "message"), [
    (b'{"min_length": 30,\n "preset": "nanopore"}', r"^p\.json: preset: 'nanopore' is not one of"),
    (b'{"min_lenght": 30}', r"^p\.json: the document: Additional properties are not allowed \('min_lenght'"),
    (b'{"trim": "yes"}', r"^p\.json: trim: 'yes' is not of type 'boolean'"),
    (b'{"trim": true,\n "min_length": 30,,}', r"^p\.json:2: not JSON: "),
    (b'{"coverage_bin": 7}', r"^p\.json: the coverage bin width \(7\) must divide the region size"),
])
def test_a_bad_params_file_is_one_line_naming_it(text: bytes, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        read_params_file("p.json", text)


def test_a_folders_params_json_sets_its_runs_parameters(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]  # noqa: F811 - the fixture
) -> None:
    bed = V3_BED.read_bytes()
    deployed.put("references/artic-v3/primer.bed", bed)
    deployed.put("incoming/amp1/params.json", json.dumps(
        {"primer_bed": f"s3://{deployed.bucket}/references/artic-v3/primer.bed", "min_length": 30}).encode())
    deployed.put("incoming/amp1/x_R1.fastq.gz", FASTQ)
    deployed.put("incoming/amp1/x_R2.fastq.gz", FASTQ)
    out = start(deployed.event_for("incoming/amp1/x_R2.fastq.gz"))
    assert out["status"] == "started", out
    [ex] = executions(deployed)
    parameters = execution_request(ex)["parameters"]
    assert parameters["min_length"] == 30 and parameters["primer_bed_pin"] == content_pin(bed)
    # the same reads with the BED fixed in place: a new run id
    deployed.put("references/artic-v3/primer.bed", bed.replace(b"\t410\t", b"\t411\t", 1))
    again = start(deployed.event_for("incoming/amp1/x_R2.fastq.gz"))
    assert again["status"] == "started" and again["run_id"] != out["run_id"]
    # a relative primer_bed is a key in the folder
    deployed.put("incoming/amp2/primer.bed", bed)
    deployed.put("incoming/amp2/params.json", b'{"primer_bed": "primer.bed"}')
    deployed.put("incoming/amp2/y.fastq.gz", FASTQ)
    rel = start(deployed.event_for("incoming/amp2/y.fastq.gz"))
    request = execution_request(next(e for e in executions(deployed) if e["name"] == rel["run_id"]))
    assert request["parameters"]["primer_bed"] == f"s3://{deployed.bucket}/incoming/amp2/primer.bed"


def test_a_bad_params_json_or_a_missing_bed_rejects_the_run_before_any_shard(
    deployed: Deployed, start: Callable[[dict[str, Any]], dict[str, Any]]  # noqa: F811 - the fixture
) -> None:
    deployed.put("incoming/bad1/params.json", b'{"preset": "nanopore"}')
    deployed.put("incoming/bad1/z.fastq.gz", FASTQ)
    out = start(deployed.event_for("incoming/bad1/z.fastq.gz"))
    assert out["status"] == "rejected"
    assert out["reason"].startswith(f"s3://{deployed.bucket}/incoming/bad1/params.json: preset: 'nanopore'")
    assert read_status(deployed, out["run_id"])["state"] == "REJECTED"
    deployed.put("incoming/bad2/params.json", b'{"primer_bed": "gone.bed"}')
    deployed.put("incoming/bad2/z.fastq.gz", FASTQ)
    out = start(deployed.event_for("incoming/bad2/z.fastq.gz"))
    assert out["status"] == "rejected" and "incoming/bad2/gone.bed: no such primer BED" in out["reason"]
    assert executions(deployed) == []
