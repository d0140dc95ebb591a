"""End to end on the real paired MiSeq reads: the app's template, state machine, handlers and worker on
the local cloud, then queries from later processes (the state folder is all that survives)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.state import StateDir
from seqlake.local.commands import athena_query

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.external_data, pytest.mark.tools]


def _seqlake(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "seqlake", *args, "--home", str(home)],
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
    )


def _query(sql: str, home: Path) -> list[dict[str, Any]]:
    proc = _seqlake("local", "query", "--format", "json", sql, home=home)
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def _seqkit_stats(seqkit: str, path: Path) -> dict[str, str]:
    out = subprocess.run([seqkit, "stats", "-a", "-T", str(path)], capture_output=True, text=True, check=True).stdout
    header, values = (line.split("\t") for line in out.strip().splitlines())
    return dict(zip(header, values, strict=True))


def _minimap2_mapped(minimap2: str, reference: Path, r1: Path, r2: Path) -> dict[int, int]:
    """Reads with a primary alignment per mate, from ``minimap2 -ax sr`` (flags 0x4, 0x100, 0x800 off)."""
    sam = subprocess.run(
        [minimap2, "-ax", "sr", "-t", "2", str(reference), str(r1), str(r2)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    mapped = {1: 0, 2: 0}
    for line in sam.splitlines():
        if line.startswith("@"):
            continue
        flag = int(line.split("\t", 2)[1])
        if flag & 0x904 == 0:
            mapped[2 if flag & 0x80 else 1] += 1
    return mapped


def test_real_paired_reads_through_the_local_cloud(
    miseq: tuple[Path, Path], reference: Path, seqkit: str, minimap2: str, miseq_local_run: Any
) -> None:
    r1, r2 = miseq
    # Given the real MiSeq pair, when a user runs it on the local cloud (a process that then exits)
    home = miseq_local_run.home
    assert miseq_local_run.args[:4] == ("local", "run", str(r1), str(r2))

    # then later processes query the committed results without moto: raw QC equals seqkit stats -a
    rows = _query(
        "SELECT mate, reads, bases, min_len, max_len, q20_bases, q30_bases, gc_bases, n_bases "
        "FROM qc_summary WHERE stage = 'raw' AND sample = 'miseq' ORDER BY mate",
        home,
    )
    assert [r["mate"] for r in rows] == [1, 2]
    for row, path in zip(rows, (r1, r2), strict=True):
        expected = _seqkit_stats(seqkit, path)
        assert row["reads"] == int(expected["num_seqs"].replace(",", ""))
        assert row["bases"] == int(expected["sum_len"].replace(",", ""))
        assert (row["min_len"], row["max_len"]) == (int(expected["min_len"]), int(expected["max_len"]))
        assert round(100 * row["q20_bases"] / row["bases"], 2) == float(expected["Q20(%)"])
        assert round(100 * row["q30_bases"] / row["bases"], 2) == float(expected["Q30(%)"])
        assert round(100 * row["gc_bases"] / row["bases"], 2) == float(expected["GC(%)"])

    # and mapped reads agree with the minimap2 command line (ours align the trimmed reads: within 1 %)
    ours = {
        r["mate"]: r["mapped_reads"]
        for r in _query("SELECT mate, mapped_reads FROM qc_summary WHERE stage = 'trimmed' ORDER BY mate", home)
    }
    theirs = _minimap2_mapped(minimap2, reference, r1, r2)
    for mate in (1, 2):
        assert abs(ours[mate] - theirs[mate]) <= 0.01 * theirs[mate], (ours, theirs)
    primary = {
        r["mate"]: r["n"]
        for r in _query(
            "SELECT mate, count(*) AS n FROM alignments WHERE is_primary AND contig IS NOT NULL GROUP BY mate",
            home,
        )
    }
    assert primary == ours

    runs = _seqlake("local", "runs", home=home)
    assert runs.returncode == 0
    assert "SUCCEEDED" in runs.stdout

    # a later local cloud restores the catalog and the run's files, and starts no run again
    with LocalCloud(state=StateDir(home), quiet=True) as cloud:
        from pyiceberg.catalog.glue import GlueCatalog

        from seqlake.lake import iceberg
        from seqlake.lake.iceberg_io import FILE_IO

        glue = cloud.client("glue")
        # qc_summary is an Iceberg table: the restored metadata holds the run's commit; runs (Hive) its partition
        catalog = GlueCatalog("glue", client=glue, **{"py-io-impl": FILE_IO})
        (run_id,) = iceberg.committed_runs(catalog, cloud.database, "qc_summary")
        parts = glue.get_partitions(DatabaseName=cloud.database, TableName="runs")["Partitions"]
        assert [p["Values"] for p in parts] == [[run_id]]
        status = cloud.client("s3").get_object(Bucket=cloud.bucket, Key=f"runs/{run_id}/status.json")
        assert json.loads(status["Body"].read())
        # issue 35's bytes: the reducers' pieces of the consensus FASTA and VCF went once the run was committed (the
        # commit function's role deletes them, IAM enforced), joined under results/genomes/ (the state folder's
        # objects: results/ is not put back into moto)
        state = StateDir(home)
        keys = set(state.objects()[cloud.bucket])
        reduced = {k.rsplit("/", 1)[-1] for k in keys if k.startswith(f"runs/{run_id}/reduce/")}
        assert "region=00000.json" in reduced and not {n for n in reduced if n.endswith(".genomes")}, reduced
        genomes = [f"results/genomes/run_id={run_id}/miseq{s}" for s in (".consensus.fasta", ".vcf.gz", ".vcf.gz.tbi")]
        assert set(genomes) <= keys
        joined = {k: state.local_path(cloud.bucket, k).read_bytes() for k in genomes}
        result = athena_query(cloud, "SELECT sum(reads) AS n FROM qc_summary WHERE stage = 'raw'")
        assert result.rows == [(str(sum(r["reads"] for r in rows)),)]
        # and the commit invoked again in this later local cloud (as a retry would: the pieces are gone, and
        # results/ is not in its S3) succeeds, its files as they were
        _invoke_commit(cloud, state, run_id)
        assert {k: state.local_path(cloud.bucket, k).read_bytes() for k in genomes} == joined
        assert cloud.wait(timeout=30) == []


def _invoke_commit(cloud: LocalCloud, state: StateDir, run_id: str) -> None:
    """The commit function invoked on a finished run as the state machine invokes it (``bench/genome_scale.py
    --recommit`` does the same)."""
    import hashlib

    from seqlake.aws.request import ExecutionInput
    from seqlake.base.layout import RunLayout

    layout = RunLayout.in_bucket(cloud.bucket, run_id)
    request = (state.bucket_dir(cloud.bucket) / "runs" / run_id / "request.json").read_bytes()
    execution = ExecutionInput(run_id, cloud.bucket, layout.request, hashlib.sha256(request).hexdigest())
    plan = json.loads((state.bucket_dir(cloud.bucket) / "runs" / run_id / "plan.json").read_text())
    assert cloud.lambdas is not None
    function = next(n for n in cloud.lambdas.functions if n.endswith("CommitFunction"))
    resp = cloud.client("lambda").invoke(FunctionName=function, Payload=json.dumps({
        "execution": execution.to_dict(), "batch": None,
        "plan": {"plan_uri": layout.plan, "array_size": len(plan["children"])}}))
    assert "FunctionError" not in resp, resp["Payload"].read()[:2000]
