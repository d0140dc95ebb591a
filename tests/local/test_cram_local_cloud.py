"""``--cram`` through the local cloud: the template's state machine, the reducers as Batch jobs (pysam in the
worker), the commit as a Lambda that only frames and copies (no pysam in its layers), each role held to its
IAM policy: the run SUCCEEDS, leaves ``<sample>.cram`` + ``.crai`` and ``reference.fasta`` + ``.fai`` and no
BAM, and ``samtools view -T reference.fasta`` gives the records ``seqlake process`` writes into the BAM
(tests/core/test_sample_cram.py compares them field by field)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import seqlake_command
from seqlake import demo_data


def test_a_cram_run_on_the_local_cloud(tmp_path: Path, samtools: str) -> None:
    r1, r2, reference = demo_data.paths()
    home = tmp_path / "home"
    proc = seqlake_command("local", "run", str(r1), str(r2), "--reference", str(reference), "--cram", "--jobs", "2",
                           "--home", str(home))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (genomes,) = home.glob("s3/*/results/genomes/run_id=*")
    names = sorted(p.name for p in genomes.iterdir())
    assert names == ["demo.consensus.fasta", "demo.cram", "demo.cram.crai", "demo.vcf.gz", "demo.vcf.gz.tbi",
                     "reference.fasta", "reference.fasta.fai"]
    crm, ref = genomes / "demo.cram", genomes / "reference.fasta"
    subprocess.run([samtools, "quickcheck", "-v", str(crm)], check=True)
    assert ref.read_bytes() == reference.read_bytes()  # the demo FASTA's lines are samtools' 60 bases
    out = tmp_path / "process"
    bam_run = seqlake_command("process", str(r1), str(r2), "--reference", str(reference), "--out", str(out),
                              "--jobs", "2")
    assert bam_run.returncode == 0, bam_run.stderr[-3000:]
    (bam,) = out.glob("results/genomes/run_id=*/demo.bam")
    view = subprocess.run([samtools, "view", "--no-PG", "-T", str(ref), str(crm)], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    theirs = subprocess.run([samtools, "view", "--no-PG", str(bam)], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    assert ["\t".join(f for f in x.split("\t") if not f.startswith("MD:Z:")) for x in view] == theirs
    assert len(theirs) > 30_000
    region = subprocess.run([samtools, "view", "-c", "-T", str(ref), str(crm), "MN908947.3:10000-10100"],
                            capture_output=True, text=True, check=True).stdout
    assert int(region) > 100
