"""The per-sample BAM a run leaves beside its VCF (reduce/bams, lake/slices): the same records, byte for byte
in ``samtools view``, whether one child aligned the sample or several (each window merged from the
children's sorted runs), ``samtools quickcheck`` passes, and its ``.bai`` answers region queries and
``idxstats`` as ``samtools index``'s does."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from seqlake import demo_data

REGIONS = ["MN908947.3", "MN908947.3:1-500", "MN908947.3:13000-13100", "MN908947.3:16380-16390",
           "MN908947.3:29500-29903", "*"]


def _bam(out: Path, *extra: str) -> Path:
    r1, r2, ref = demo_data.paths()
    subprocess.run([sys.executable, "-m", "seqlake", "process", str(r1), str(r2), "--reference", str(ref),
                    "--out", str(out), "--jobs", "2", *extra], check=True, capture_output=True)
    (bam,) = out.glob("results/genomes/run_id=*/*.bam")
    return bam


def test_one_child_or_several_give_the_same_bam(tmp_path: Path, samtools: str) -> None:
    one = _bam(tmp_path / "one")
    several = _bam(tmp_path / "several", "--reads-per-shard", "12000")  # 20,000 pairs: 4 children
    children = list(several.parents[3].glob("runs/*/staging/child=*/reads.slices"))
    assert len(children) > 1
    views = []
    for bam in (one, several):
        subprocess.run([samtools, "quickcheck", "-v", str(bam)], check=True)
        view = subprocess.run([samtools, "view", "-h", "--no-PG", str(bam)], capture_output=True, check=True)
        views.append(view.stdout)
    assert views[0] == views[1] and views[0].count(b"\n") > 30_000
    assert b"@HD\tVN:1.6\tSO:coordinate" in views[0] and b"M5:" in views[0] and b"@RG\tID:" in views[0]
    theirs = tmp_path / "theirs.bam"
    shutil.copyfile(several, theirs)
    subprocess.run([samtools, "index", str(theirs)], check=True)
    for region in REGIONS:
        want = subprocess.run([samtools, "view", str(theirs), region], capture_output=True, check=True).stdout
        assert subprocess.run([samtools, "view", str(several), region], capture_output=True,
                              check=True).stdout == want, region
    assert (subprocess.run([samtools, "idxstats", str(several)], capture_output=True, check=True).stdout
            == subprocess.run([samtools, "idxstats", str(theirs)], capture_output=True, check=True).stdout)
