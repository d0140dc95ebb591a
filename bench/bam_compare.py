"""A run's per-sample BAM against the command line (issue 35's "Must show"):

    python bench/bam_compare.py BAM REFERENCE [--regions N] [--preset sr]

1. ``samtools quickcheck`` of the BAM; its header (``@HD SO:coordinate``, every ``@SQ`` with the ``M5`` of the
   reference's contig, ``@RG`` and ``@PG`` lines) and its order (records by contig and POS, the unplaced ones
   last);
2. its ``.bai`` (seqlake's, from the blocks' offsets) against ``samtools index``'s of a copy: ``samtools view
   BAM region`` of N regions spread over every contig (and ``*``, the unplaced reads) byte for byte, and
   ``samtools idxstats``;
3. its primary records against ``minimap2 -ax sr | samtools sort`` of the same trimmed reads (rebuilt from the
   BAM's primary records: SEQ and QUAL, reverse-complemented back on reverse rows): name, flag, contig, POS,
   MAPQ, CIGAR, SEQ, QUAL per (name, first/second mate); the records that differ are counted by field, and
   each once by kind: ``placed_otherwise`` (contig or POS differ: a mate placed elsewhere, e.g. a repeat copy
   chosen otherwise; ``at_mapq0`` of them with MAPQ 0 on either side), ``cigar_only`` (same place, an indel or
   clip placed otherwise), ``flag_only`` (the same alignment, the pair's flags otherwise), ``mapq_only``, and
   ``other``; the secondary and supplementary records of each side are counted.

Prints one JSON line. Not for amplicon-mode BAMs (their records are primer-clipped, the command line's are not).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_COMP = str.maketrans("ACGTNacgtn", "TGCANtgcan")
FIELDS = ("flag", "contig", "pos", "mapq", "cigar", "seq", "qual")
#: (name, 0x40 / 0x80 of the flag) -> the fields of FIELDS
Primaries = dict[tuple[str, int], tuple[object, ...]]


def _sam(cmd: list[str], **kw: object) -> list[list[str]]:
    out = subprocess.run(cmd, capture_output=True, check=True, text=True, **kw).stdout  # type: ignore[call-overload]
    return [line.split("\t") for line in out.splitlines() if line and not line.startswith("@")]


def _primaries(rows: list[list[str]]) -> Primaries:
    out: Primaries = {}
    for f in rows:
        flag = int(f[1])
        if flag & 0x900:
            continue
        out[(f[0], flag & 0xC0)] = (flag, f[2], int(f[3]), int(f[4]), f[5], f[9], f[10])
    return out


def _fasta_md5(reference: Path) -> dict[str, str]:
    """Each contig's SAM ``M5``: the MD5 of its bases, upper case, without line breaks."""
    out: dict[str, str] = {}
    name, h = None, hashlib.md5()
    with reference.open("rb") as f:
        for line in f:
            if line.startswith(b">"):
                if name is not None:
                    out[name] = h.hexdigest()
                name, h = line[1:].split()[0].decode(), hashlib.md5()
            else:
                h.update(line.strip().upper())
    if name is not None:
        out[name] = h.hexdigest()
    return out


def header_and_order(samtools: str, bam: Path, reference: Path) -> dict[str, object]:
    """The header's sort order, ``@SQ`` M5s against the reference, ``@RG``/``@PG`` lines; the records' order."""
    lines = subprocess.run([samtools, "view", "-H", "--no-PG", str(bam)], capture_output=True, check=True,
                           text=True).stdout.splitlines()
    hd = dict(t.split(":", 1) for t in lines[0].split("\t")[1:]) if lines and lines[0].startswith("@HD") else {}
    md5 = _fasta_md5(reference)
    sq = [dict(t.split(":", 1) for t in line.split("\t")[1:]) for line in lines if line.startswith("@SQ")]
    order = {t["SN"]: k for k, t in enumerate(sq)}
    unsorted, placed_after_unplaced, last = 0, 0, (-1, -1)
    with subprocess.Popen([samtools, "view", str(bam)], stdout=subprocess.PIPE, text=True) as view:
        assert view.stdout is not None
        for line in view.stdout:
            rname, pos = line.split("\t", 5)[2:4]
            if rname == "*":
                last = (len(sq), 0)
                continue
            key = (order[rname], int(pos))
            if last[0] == len(sq):
                placed_after_unplaced += 1
            elif key < last:
                unsorted += 1
            last = max(last, key)
    return {"so": hd.get("SO"), "sq": len(sq), "sq_m5_equal": sum(t.get("M5") == md5.get(t["SN"]) for t in sq),
            "read_groups": [line.split("\t")[1] for line in lines if line.startswith("@RG")],
            "programs": [line.split("\t")[1] for line in lines if line.startswith("@PG")],
            "records_out_of_order": unsorted, "placed_after_unplaced": placed_after_unplaced}


def _kind(a: tuple[object, ...], b: tuple[object, ...]) -> str:
    """Which kind of difference two primary records of one mate show (see the module docstring)."""
    differ = {name for k, name in enumerate(FIELDS) if a[k] != b[k]}
    if differ & {"contig", "pos"}:
        return "placed_otherwise"
    if differ <= {"cigar", "mapq", "flag"} and "cigar" in differ:
        return "cigar_only" if differ == {"cigar"} else "cigar_and_more"
    if differ == {"flag"}:
        return "flag_only"
    if differ == {"mapq"}:
        return "mapq_only"
    return "other"


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
    result["header_and_order"] = header_and_order(samtools, bam, reference)
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
        extra = {"ours": {"secondary": sum(int(f[1]) & 0x100 != 0 for f in ours_rows),
                          "supplementary": sum(int(f[1]) & 0x800 != 0 for f in ours_rows)}}
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
        cli_rows = [line.split("\t") for line in sorted_sam.splitlines() if line and not line.startswith("@")]
        cli = _primaries(cli_rows)
        extra["cli"] = {"secondary": sum(int(f[1]) & 0x100 != 0 for f in cli_rows),
                        "supplementary": sum(int(f[1]) & 0x800 != 0 for f in cli_rows)}
        del cli_rows, sorted_sam, aligned
    result["primary"] = diff_primaries(ours, cli)
    result["not_primary"] = extra
    result["records"] = len(ours_rows)
    return result


def diff_primaries(ours: Primaries, cli: Primaries) -> dict[str, object]:
    """The primary records of each (name, mate) that differ: counted by field and by kind, with an example."""
    diffs: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
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
            kind = _kind(a, b)
            kinds[kind] += 1
            if kind == "placed_otherwise" and 0 in (a[3], b[3]):
                kinds["placed_otherwise_at_mapq0"] += 1
            examples.setdefault(kind, [key[0], a[:5], b[:5]])
    return {"ours": len(ours), "cli": len(cli), "differ": dict(diffs), "kinds": dict(kinds), "examples": examples}


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
