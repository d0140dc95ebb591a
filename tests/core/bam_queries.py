"""A BAM's index judged by what samtools answers with it: the same region queries on our file and on a copy that
``samtools index`` indexed (tests/core/test_bam_format.py, test_bam_csi.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def same_answers(samtools: str, ours: Path, theirs: Path, regions: list[str], options: tuple[str, ...] = ()) -> int:
    """Assert that ``samtools view`` (with ``options``: ``-T REF`` for a CRAM) answers each region alike with
    both files; how many answers had records."""
    answered = 0
    for region in regions:
        want = subprocess.run([samtools, "view", *options, str(theirs), region], capture_output=True,
                              check=True).stdout
        got = subprocess.run([samtools, "view", *options, str(ours), region], capture_output=True, check=True).stdout
        assert got == want, region
        answered += bool(want)
    return answered
