"""How uploads become runs on the local cloud, with the app's own template: a folder's FASTQs uploaded
before its samplesheet (as ``aws s3 sync`` may) start exactly one run, the sheet's, once the folder is
quiet; the settle queue's event source is what the wait loop waits for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.state import StateDir
from seqlake.base.layout import RunLayout

pytestmark = [pytest.mark.e2e]


def _fastq(path: Path, name: str) -> Path:
    path.write_text("".join(f"@{name}.{i}\nACGTACGTAC\n+\nIIIIIIIIII\n" for i in range(4)))
    return path


def test_fastqs_before_their_sheet_start_one_run(tmp_path: Path) -> None:
    cloud = LocalCloud(state=StateDir(tmp_path / "home"), quiet=True)
    cloud.start()
    try:
        folder = "incoming/sync-first/"
        for i in range(2):
            for mate in (1, 2):
                name = f"s{i}_R{mate}.fastq"
                cloud.upload(_fastq(tmp_path / name, f"s{i}"), folder + name)
        sheet = tmp_path / "samplesheet.csv"
        sheet.write_text("sample,fastq_1,fastq_2\n" + "".join(f"S{i},s{i}_R1.fastq,s{i}_R2.fastq\n" for i in range(2)))
        cloud.upload(sheet, folder + "samplesheet.csv")
        finished = cloud.wait(timeout=300)
        [run] = finished
        assert run.status == "SUCCEEDED" and run.name.startswith("sync-first-"), run.cause
        status = json.loads(Path(RunLayout(str(cloud.state.bucket_dir(cloud.bucket)), run.name).status).read_text())
        assert status["samples"] == ["S0", "S1"]
        assert cloud.lambdas is not None and cloud.lambdas.pending == 0  # the settle queue is empty too
        sfn = cloud.client("stepfunctions")
        assert len(sfn.list_executions(stateMachineArn=cloud.state_machine_arn)["executions"]) == 1
        assert json.loads((tmp_path / "home" / "runs.json").read_text())[0]["run_id"] == run.name
    finally:
        cloud.stop()
