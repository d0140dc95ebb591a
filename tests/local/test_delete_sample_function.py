"""The deployed ``DeleteSampleFunction`` (issue 36 on AWS) on the local cloud, invoked as the lab invokes it on AWS
(boto3's ``lambda.invoke`` with ``{"sample": NAME, "confirm": NAME}``): refused without the confirmation and for
an unknown name (with a "did you mean"); then no table has a row of the sample, no Parquet file in the bucket
holds one (older snapshots' files included), no object's key names it, every other sample's rows are the same,
and the audit record under ``deletions/`` says who asked. The same checks as tests/local/test_delete_sample.py
(the local command), on the template's function and its role (IAM enforced unless turned off).

Within one cloud session: the local cloud puts a committed table's data files back into its bucket only while
the cloud that wrote them runs (``results/`` is read from the state folder after), so the function runs in the
session of the runs it deletes from; ``seqlake local delete-sample`` is the command for a state folder."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from test_delete_sample import DEMO, GONE, KEPT, _reads, _rows_of

from localcloud.cloud import LocalCloud
from localcloud.state import StateDir
from seqlake.lake.deletion import sample_tables
from seqlake.local.commands import plan_samplesheet

pytestmark = [pytest.mark.e2e]
PAIRS = 300
WHO = "arn:aws:iam::123456789012:user/pi"


def _run(cloud: LocalCloud, folder: Path, samples: list[str]) -> None:
    sheet = folder / "samplesheet.csv"
    sheet.write_text("sample,fastq_1,fastq_2\n" + "".join(f"{s},{s}_R1.fastq.gz,{s}_R2.fastq.gz\n" for s in samples))
    for path, key in plan_samplesheet(sheet, cloud.state.root / "uploads"):
        cloud.upload(path, key)
    (finished,) = cloud.wait()
    assert finished.status == "SUCCEEDED", (finished.error, finished.cause)


def _invoke(cloud: LocalCloud, event: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """As the lab: one synchronous invocation; the function's error (its type) and the answer."""
    name = cloud.deployment.physical["DeleteSampleFunction"]
    answer = cloud.client("lambda").invoke(FunctionName=name, Payload=json.dumps(event).encode())
    return answer.get("FunctionError"), json.loads(answer["Payload"].read())


def _keys(cloud: LocalCloud) -> list[str]:
    pages = cloud.client("s3").get_paginator("list_objects_v2").paginate(Bucket=cloud.bucket)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_the_deployed_delete_function_deletes_a_sample_everywhere(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    _reads(first, GONE, 0, PAIRS)
    _reads(first, KEPT, PAIRS, PAIRS)
    _reads(second, GONE, 2 * PAIRS, PAIRS)  # sequenced again: its rows in two runs, older snapshots holding them
    with LocalCloud(state=StateDir(home), jobs=2, quiet=True) as cloud:
        reference = cloud.upload(DEMO / "MN908947.3.fasta", "references/MN908947.3/MN908947.3.fasta", as_admin=True)
        cloud.override_parameter("ReferenceUri", reference)
        _run(cloud, first, [GONE, KEPT])
        _run(cloud, second, [GONE])
        kept_before = _rows_of(home, KEPT)
        assert kept_before["sample_summary"] and _rows_of(home, GONE)["sample_summary"]

        error, answer = _invoke(cloud, {"sample": GONE})
        assert error and 'repeat its name as "confirm"' in answer["errorMessage"]
        error, answer = _invoke(cloud, {"sample": GONE.upper(), "confirm": GONE.upper()})
        assert error and f"did you mean {GONE}" in answer["errorMessage"]
        assert not [k for k in _keys(cloud) if k.startswith("deletions/")]  # nothing done

        error, answer = _invoke(cloud, {"sample": GONE, "confirm": GONE, "requested_by": WHO})
        assert error is None, answer
        assert len(answer["runs"]) == 2 and answer["rows"] > 0
        keys = _keys(cloud)
        assert [k for k in keys if GONE in k] == []  # no object names it: uploads, genomes, reports
        s3 = cloud.client("s3")
        for key in (k for k in keys if k.endswith(".parquet")):  # no file of the bucket holds a row of it
            table = pq.read_table(io.BytesIO(s3.get_object(Bucket=cloud.bucket, Key=key)["Body"].read()))
            if "sample" in table.column_names:
                assert GONE not in table.column("sample").to_pylist(), key
        cloud.persist()

    # the state folder the cloud left: the same
    assert _rows_of(home, GONE) == {t: [] for t in sample_tables()}
    assert _rows_of(home, KEPT) == kept_before
    bucket = StateDir(home).bucket_dir(answer["audit"].split("/")[2])
    for path in bucket.rglob("*.parquet"):
        if "sample" in pq.read_schema(path).names:
            assert GONE not in pq.read_table(path, columns=["sample"]).column("sample").to_pylist(), path
    objects = json.loads((home / "objects.json").read_text())
    assert [k for keys in objects.values() for k in keys if GONE in k] == []
    assert [str(p) for p in bucket.rglob(f"*{GONE}*")] == []
    assert not [u for u in json.loads((home / "sources.json").read_text()) if GONE in u]
    (audit,) = (bucket / "deletions").glob("*.json")
    record = json.loads(audit.read_text())
    assert record["sample"] == GONE and record["requested_by"].startswith(WHO) and record["finished_at"]
    assert record["rows"]["sample_summary"] == 2 and len(record["runs"]) == 2
    assert GONE not in audit.name
