"""The ``.csi`` of a BAM with a contig over 2^29 bases (formats.bai, issue 35): built from synthetic records'
virtual offsets (no 512 Mb reference is aligned to), whole or joined from pieces compressed apart, it answers
``samtools view BAM region`` and ``samtools idxstats`` as ``samtools index -c``'s of the same BAM does."""

from __future__ import annotations

import itertools
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from bam_queries import same_answers

from seqlake.formats import bai, bam, bgzf, sam
from seqlake.reduce.bams import index_suffix

BIG = (1 << 29) + 10_000_000
CONTIGS = [("small", 60_000), ("big", BIG)]
REGIONS = ["small", "small:1-100", "small:16000-40000", "big", "big:1-1000", "big:100000000-100050000",
           f"big:{(1 << 29) - 5000}-{(1 << 29) + 5000}", f"big:{(1 << 29) + 16383}-{(1 << 29) + 16385}",
           f"big:{BIG - 3_000_000}-{BIG}", "big:300000000-540000000", "*"]


def _lines(rng: random.Random) -> list[str]:
    """Sorted SAM lines: reads on both contigs, dense around 2^29, some with long deletions (spanning 16 kb
    windows and bins), unmapped reads placed at their mate's position, unplaced ones at the end."""
    rows: list[tuple[int, int, str]] = []
    # a read in each small region asked (the rest are random)
    fixed = {0: 50, 1: 500, 2: 100_000_010, 3: (1 << 29) + 16_340, 4: BIG - 1000}
    for i in range(3000):
        tid = 0 if i < 400 and i not in fixed else 1
        if i in fixed:
            tid, pos = (0, fixed[i]) if i == 0 else (1, fixed[i])
        elif tid == 0:
            pos = rng.randrange(1, 59_000)
        elif i % 3 == 0:
            pos = (1 << 29) + rng.randrange(-200_000, 200_000)
        else:
            pos = rng.randrange(1, BIG - 200_000)
        seq = "".join(rng.choice("ACGT") for _ in range(60))
        cigar = "30M40000D30M" if i % 50 == 0 else "60M"
        flag, mapq = (4, 0) if i % 97 == 0 else (0, 60)
        if flag:
            cigar = "*"
        name = CONTIGS[tid][0]
        rows.append((tid, pos, f"r{i}\t{flag}\t{name}\t{pos}\t{mapq}\t{cigar}\t*\t0\t0\t{seq}\t{'I' * 60}"))
    rows.sort(key=lambda r: (r[0], r[1]))
    unplaced = [f"u{i}\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII" for i in range(7)]
    return [r[2] for r in rows] + unplaced


def _write(path: Path, records: bam.Records, pieces: int) -> None:
    depth = bai.index_depth(n for _, n in CONTIGS)
    head = "@HD\tVN:1.6\tSO:coordinate\n" + "".join(f"@SQ\tSN:{c}\tLN:{n}\n" for c, n in CONTIGS)
    header = bgzf.compress(bam.header(head, CONTIGS), eof=False)
    cuts = np.linspace(0, len(records), pieces + 1).astype(np.int64)
    body, index_pieces, at = [header], [], len(header)
    for lo, hi in itertools.pairwise(cuts.tolist()):
        part = records.take(np.arange(lo, hi, dtype=np.int64))
        raw, st = bam.encode(part)
        blocks, vs, ve = bgzf.compress_records(raw, st)
        index_pieces.append(bai.piece(part, vs, ve, depth).shifted(at))
        body.append(blocks)
        at += len(blocks)
    path.write_bytes(b"".join(body) + bgzf.EOF)
    Path(f"{path}.csi").write_bytes(bai.csi_bytes(bai.join(index_pieces), len(CONTIGS), depth))


def test_the_depth_fits_the_longest_contig() -> None:
    assert bai.index_depth([29_903, 1 << 29]) == bai.BAI_DEPTH and not bai.is_csi(bai.BAI_DEPTH)
    assert bai.index_depth([BIG]) == 6 and bai.is_csi(6)  # 2^32 holds it; 2^29 does not
    assert bai.csi_depth(1 << 32) == 7 and bai.csi_depth(30_000) == 1  # as samtools index -c picks
    assert index_suffix([("MN908947.3", 29_903)]) == ".bai" and index_suffix(CONTIGS) == ".csi"


@pytest.mark.parametrize("pieces", [1, 4])
def test_csi_answers_as_samtools_index_c(tmp_path: Path, samtools: str, pieces: int) -> None:
    records = sam.records(_lines(random.Random(pieces)), {c: i for i, (c, _) in enumerate(CONTIGS)})
    ours = tmp_path / "ours.bam"
    _write(ours, records, pieces)
    subprocess.run([samtools, "quickcheck", "-v", str(ours)], check=True)
    theirs = tmp_path / "theirs.bam"
    shutil.copyfile(ours, theirs)
    subprocess.run([samtools, "index", "-c", str(theirs)], check=True)
    assert Path(f"{theirs}.csi").exists() and not Path(f"{ours}.bai").exists()
    assert same_answers(samtools, ours, theirs, list(REGIONS)) == len(REGIONS)
    stats = [subprocess.run([samtools, "idxstats", str(p)], capture_output=True, check=True).stdout
             for p in (ours, theirs)]
    assert stats[0] == stats[1]
