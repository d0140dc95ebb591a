"""The first-deploy smoke test (``scripts/aws-smoke.sh``, :mod:`seqlake.aws.smoke`) run against the local cloud,
as it runs against AWS: the real template deployed, one tiny upload through to an Athena query, the bucket left
empty."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

from localcloud.cloud import LocalCloud
from localcloud.state import StateDir
from seqlake.aws import smoke
from seqlake.local import smoke as local_smoke

REPO = Path(__file__).resolve().parents[2]


def test_the_smoke_test_runs_an_upload_to_an_athena_query_and_leaves_nothing(tmp_path: Path) -> None:
    with LocalCloud(state=StateDir(tmp_path / "home"), jobs=1, quiet=True) as cloud:
        target = local_smoke.target(cloud)
        rows = dict(smoke.run(target, timeout_s=local_smoke.LOCAL_TIMEOUT_SECONDS))
        assert rows["raw"] == str(2 * smoke.SMOKE_PAIRS)  # both mates of every pair, counted by Athena
        assert 0 < int(rows["trimmed"] or 0) <= 2 * smoke.SMOKE_PAIRS
        listed = cloud.client("s3").list_object_versions(Bucket=cloud.bucket)
        assert listed.get("Versions", []) == [] and listed.get("DeleteMarkers", []) == []


def test_a_run_that_does_not_succeed_fails_the_smoke_with_its_reason_and_still_tears_down(tmp_path: Path) -> None:
    """An execution that does not succeed (here: the upload's R1 is bad FASTQ) fails the smoke naming the
    execution, and the bucket is emptied all the same."""
    with LocalCloud(state=StateDir(tmp_path / "home"), jobs=1, quiet=True) as cloud:
        target = local_smoke.target(cloud)
        original = smoke.write_reads

        def not_fastq(folder: Path) -> tuple[Path, Path]:
            r1, r2 = original(folder)
            r1.write_bytes(gzip.compress(b"@r1\nACGT\n+\nII\n"))  # quality shorter than the sequence
            return r1, r2

        smoke.write_reads = not_fastq  # type: ignore[assignment]
        try:
            failed = None
            try:
                smoke.run(target, timeout_s=local_smoke.LOCAL_TIMEOUT_SECONDS)
            except smoke.SmokeError as error:
                failed = error
        finally:
            smoke.write_reads = original  # type: ignore[assignment]
        assert failed is not None and "ended FAILED" in str(failed), failed
        assert cloud.client("s3").list_object_versions(Bucket=cloud.bucket).get("Versions", []) == []


def test_the_script_refuses_to_run_without_its_arguments() -> None:
    proc = subprocess.run([str(REPO / "scripts" / "aws-smoke.sh")], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "--region, --subnets and --security-groups are required" in proc.stderr
