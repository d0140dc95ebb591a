"""A run's per-sample BAM against the command line (issue 35's "Must show"):

    python bench/bam_compare.py BAM REFERENCE [--regions N] [--preset sr]

1. ``samtools quickcheck`` of the BAM;
2. its ``.bai`` (seqlake's, from the blocks' offsets) against ``samtools index``'s of a copy: ``samtools view
   BAM region`` of N regions spread over every contig (and ``*``, the unplaced reads) byte for byte, and
   ``samtools idxstats``;
3. its primary records against ``minimap2 -ax sr | samtools sort`` of the same trimmed reads (rebuilt from the
   BAM's primary records: SEQ and QUAL, reverse-complemented back on reverse rows): name, flag, contig, POS,
   MAPQ, CIGAR, SEQ, QUAL per (name, first/second mate); the records that differ are counted by field.

Prints one JSON line. Not for amplicon-mode BAMs (their records are primer-clipped, the command line's are not).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_COMP = str.maketrans("ACGTNacgtn", "TGCANtgcan")
FIELDS = ("flag", "contig", "pos", "mapq", "cigar", "seq", "qual")


def _sam(cmd: list[str], **kw: object) -> list[list[str]]:
    out = subprocess.run(cmd, capture_output=True, check=True, text=True, **kw).stdout  # type: ignore[call-overload]
    return [line.split("\t") for line in out.splitlines() if line and not line.startswith("@")]


def _primaries(rows: list[list[str]]) -> dict[tuple[str, int], tuple[object, ...]]:
    out = {}
    for f in rows:
        flag = int(f[1])
        if flag & 0x900:
            continue
        out[(f[0], flag & 0xC0)] = (flag, f[2], int(f[3]), int(f[4]), f[5], f[9], f[10])
    return out


def _regions(samtools: str, bam: Path, n: int) -> list[str]:
    out = ["*"]
    for line in subprocess.run([samtools, "view", "-H", str(bam)], capture_output=True, check=True,
                               text=True).stdout.splitlines():
        if line.startswith("@SQ"):
            tags = dict(t.split(":", 1) for t in line.split("\t")[1:])
            name, length = tags["SN"], int(tags["LN"])
            out.append(name)
            step = max(length // n, 1)
            out += [f"{name}:{s + 1}-{min(s + 1 + 150 + s % 20_000, length)}" for s in range(0, length, step)]
    return out


def compare(bam: Path, reference: Path, regions: int, preset: str) -> dict[str, object]:
    samtools, minimap2 = shutil.which("samtools"), shutil.which("minimap2")
    if samtools is None or minimap2 is None:
        sys.exit("samtools and minimap2 must be on PATH")
    result: dict[str, object] = {"bam": str(bam), "bytes": bam.stat().st_size}
    subprocess.run([samtools, "quickcheck", "-v", str(bam)], check=True)
    result["quickcheck"] = "ok"
    with tempfile.TemporaryDirectory() as tmp:
        theirs = Path(tmp) / "theirs.bam"
        shutil.copyfile(bam, theirs)
        subprocess.run([samtools, "index", str(theirs)], check=True)
        differ = []
        asked = _regions(samtools, bam, regions)
        for region in asked:
            a = subprocess.run([samtools, "view", str(bam), region], capture_output=True, check=True).stdout
            b = subprocess.run([samtools, "view", str(theirs), region], capture_output=True, check=True).stdout
            if a != b:
                differ.append(region)
        stats = [subprocess.run([samtools, "idxstats", str(p)], capture_output=True, check=True).stdout
                 for p in (bam, theirs)]
        result["index"] = {"regions": len(asked), "differ": differ, "idxstats_equal": stats[0] == stats[1]}
        ours_rows = _sam([samtools, "view", str(bam)])
        ours = _primaries(ours_rows)
        mates: dict[str, dict[int, tuple[str, str]]] = collections.OrderedDict()
        for (name, mate), (flag, _, _, _, _, sam_seq, sam_qual) in ours.items():
            seq, qual = str(sam_seq), str(sam_qual)
            if int(flag) & 0x10:  # type: ignore[call-overload]
                seq, qual = seq.translate(_COMP)[::-1], qual[::-1]
            mates.setdefault(name, {})[mate] = (seq, qual)
        paired = all(len(m) == 2 for m in mates.values())
        fastqs = [Path(tmp) / "r1.fq", Path(tmp) / "r2.fq"] if paired else [Path(tmp) / "r.fq"]
        handles = [p.open("w") for p in fastqs]
        for name, m in mates.items():
            for h, key in zip(handles, (0x40, 0x80) if paired else (0,), strict=False):
                seq, qual = m[key]
                h.write(f"@{name}\n{seq}\n+\n{qual}\n")
        for h in handles:
            h.close()
        aligned = subprocess.run([minimap2, "-ax", preset, "-t1", str(reference), *map(str, fastqs)],
                                 capture_output=True, check=True).stdout
        sorted_sam = subprocess.run([samtools, "sort", "-O", "sam", "-"], input=aligned, capture_output=True,
                                    check=True).stdout.decode()
        cli = _primaries([line.split("\t") for line in sorted_sam.splitlines() if line and not line.startswith("@")])
    diffs: collections.Counter[str] = collections.Counter()
    examples: dict[str, object] = {}
    for key in ours.keys() | cli.keys():
        a, b = ours.get(key), cli.get(key)
        if a is None or b is None:
            diffs["missing"] += 1
            continue
        for k, name in enumerate(FIELDS):
            if a[k] != b[k]:
                diffs[name] += 1
                examples.setdefault(name, [key[0], a[k], b[k]] if name not in ("seq", "qual") else key[0])
        if a != b:
            diffs["records"] += 1
    result["primary"] = {"ours": len(ours), "cli": len(cli), "differ": dict(diffs), "examples": examples}
    result["records"] = len(ours_rows)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bam", type=Path)
    p.add_argument("reference", type=Path)
    p.add_argument("--regions", type=int, default=40)
    p.add_argument("--preset", default="sr")
    a = p.parse_args()
    print(json.dumps(compare(a.bam, a.reference, a.regions, a.preset)))


if __name__ == "__main__":
    main()
