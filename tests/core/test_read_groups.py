"""The per-sample BAM's read groups (lake/readgroups, issue 35): one per sample and lane, from the samplesheet's
rows and from the Illumina read names, each record's ``RG`` naming its group; held to samtools (``view -H``,
``view -c -r`` per group equal to the reads of each lane)."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from seqlake import demo_data
from seqlake.formats import bam
from seqlake.lake.readgroups import ReadGroup, ShardGroups, read_group


def test_a_lanes_group_has_the_flowcell_and_lane_of_its_names() -> None:
    g = read_group("s", {}, {"instrument": "M1", "run": "7", "flowcell": "HFC", "lane": "2"}, "sr")
    assert g == ReadGroup("s.HFC.2", "s", "s", "ILLUMINA", "HFC.2")
    assert g.header_line() == "@RG\tID:s.HFC.2\tSM:s\tLB:s\tPL:ILLUMINA\tPU:HFC.2"
    # the samplesheet's lane and library win; no lane and no Illumina name: the sample's group of no lane
    assert read_group("s", {"lane": "3", "library": "L7"}, {"flowcell": "HFC", "lane": "2"}, "sr") == ReadGroup(
        "s.HFC.3", "s", "L7", "ILLUMINA", "HFC.3")
    assert read_group("s", {"lane": "4"}, {}, "map-ont") == ReadGroup("s.4", "s", "s", "ONT", "")
    assert read_group("s", {}, {}, "sr").header_line() == "@RG\tID:s\tSM:s\tLB:s\tPL:ILLUMINA"
    assert ReadGroup.from_json(g.to_json()) == g


def test_a_batchs_reads_each_in_their_lanes_group() -> None:
    groups = ShardGroups("s", {}, "sr")
    one = pa.array([f"M1:7:HFC:1:1101:{i}:9" for i in range(5)])
    ids, codes = groups.of(one)
    assert ids == ["s.HFC.1"] and codes.tolist() == [0] * 5
    mixed = pa.chunked_array([pa.array(["M1:7:HFC:1:1:2:3", "M1:7:HFC:2:1:2:3", "odd name", "M1:7:HFC:1:5:6:7",
                                        "M1:3:1:2:3#0/1"])])
    ids, codes = groups.of(mixed)
    assert [ids[c] for c in codes.tolist()] == ["s.HFC.1", "s.HFC.2", "s", "s.HFC.1", "s.M1.3"]
    assert list(groups.seen) == ["s.HFC.1", "s.HFC.2", "s", "s.M1.3"]
    # the samplesheet's lane over names of two lanes: one group
    ids, codes = ShardGroups("s", {"lane": "5"}, "sr").of(mixed)
    assert [ids[c] for c in codes.tolist()] == ["s.HFC.5", "s.HFC.5", "s.5", "s.HFC.5", "s.M1.5"]
    assert ShardGroups("s", {}, "sr").of(pa.array(["SRR1.1", "SRR1.2"]))[0] == ["s"]
    tag = bam.coded_tag("RG", ["a", "bb"], np.array([1, 0, 1]))
    assert tag.rows() == [b"RGZbb\0", b"RGZa\0", b"RGZbb\0"]


def _fastq(path: Path, records: list[list[str]]) -> None:
    path.write_bytes(gzip.compress("".join("".join(r) for r in records).encode(), mtime=0))


def _renamed(records: list[list[str]], flowcell: str, lane: int) -> list[list[str]]:
    """Demo records (``SIM:1:FC:1:1:1:<n> ...``) named as read on ``flowcell``'s ``lane``."""
    out = []
    for head, seq, plus, qual in records:
        name, comment = head[1:].split(" ", 1)
        f = name.split(":")
        out.append([f"@{f[0]}:{f[1]}:{flowcell}:{lane}:{f[4]}:{f[5]}:{f[6]} {comment}", seq, plus, qual])
    return out


def test_the_bam_has_a_read_group_per_sample_and_lane(tmp_path: Path, samtools: str) -> None:
    r1, r2, ref = demo_data.paths()
    mates = []
    for p in (r1, r2):
        lines = gzip.decompress(p.read_bytes()).decode().splitlines(keepends=True)
        mates.append([lines[i : i + 4] for i in range(0, 4 * 3000, 4)])
    # sample a: two samplesheet rows (lanes 1 and 2 of flowcell FA), the second with a `library` and a lane
    # column; sample b: one FASTQ pair of two lanes concatenated (FB 3 then FB 4), in several shards
    parts = {"a1": (0, 800, "FA", 1), "a2": (800, 1500, "FA", 2), "b3": (1500, 2200, "FB", 3),
             "b4": (2200, 3000, "FB", 4)}
    for key, (lo, hi, fc, lane) in parts.items():
        for m, recs in enumerate(mates, 1):
            _fastq(tmp_path / f"{key}_{m}.fq.gz", _renamed(recs[lo:hi], fc, lane))
    for m in (1, 2):
        (tmp_path / f"b_{m}.fq.gz").write_bytes(b"".join((tmp_path / f"b{lane}_{m}.fq.gz").read_bytes()
                                                         for lane in (3, 4)))
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("sample,fastq_1,fastq_2,lane,library\na,a1_1.fq.gz,a1_2.fq.gz,,\n"
                     "a,a2_1.fq.gz,a2_2.fq.gz,2,libA2\nb,b_1.fq.gz,b_2.fq.gz,,\n")
    out = tmp_path / "lake"
    subprocess.run([sys.executable, "-m", "seqlake", "process", "--samplesheet", str(sheet), "--reference",
                    str(ref), "--out", str(out), "--no-trim", "--reads-per-shard", "500", "--jobs", "2"],
                   check=True, capture_output=True)
    want = {"a": {"a.FA.1": (800, "LB:a\tPL:ILLUMINA\tPU:FA.1"), "a.FA.2": (700, "LB:libA2\tPL:ILLUMINA\tPU:FA.2")},
            "b": {"b.FB.3": (700, "LB:b\tPL:ILLUMINA\tPU:FB.3"), "b.FB.4": (800, "LB:b\tPL:ILLUMINA\tPU:FB.4")}}
    for sample, groups in want.items():
        (path,) = out.glob(f"results/genomes/run_id=*/{sample}.bam")
        subprocess.run([samtools, "quickcheck", "-v", str(path)], check=True)
        head = subprocess.run([samtools, "view", "-H", str(path)], capture_output=True, check=True, text=True).stdout
        rgs = [line for line in head.splitlines() if line.startswith("@RG")]
        assert rgs == [f"@RG\tID:{rg}\tSM:{sample}\t{rest}" for rg, (_, rest) in groups.items()]
        total = 0
        for rg, (pairs, _) in groups.items():
            # primary records: every read of the lane (no trimming: none is dropped), in its group
            n = subprocess.run([samtools, "view", "-c", "-F", "0x900", "-r", rg, str(path)], capture_output=True,
                               check=True, text=True).stdout
            assert int(n) == 2 * pairs, (sample, rg)
            total += int(n)
        assert int(subprocess.run([samtools, "view", "-c", "-F", "0x900", str(path)], capture_output=True,
                                  check=True, text=True).stdout) == total
