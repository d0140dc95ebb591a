"""A run's per-sample BAM against the command line (issue 35's "Must show"):

    python bench/bam_compare.py BAM REFERENCE [--regions N] [--preset sr]

1. ``samtools quickcheck`` of the BAM; its header (``@HD SO:coordinate``, every ``@SQ`` with the ``M5`` of the
   reference's contig, ``@RG`` and ``@PG`` lines) and its order (records by contig and POS, the unplaced ones
   last);
2. its ``.bai`` (seqlake's, from the blocks' offsets) against ``samtools index``'s of a copy: ``samtools view
   BAM region`` of N regions spread over every contig (and ``*``, the unplaced reads) byte for byte, and
   ``samtools idxstats``;
3. its primary records against ``minimap2 -ax sr | samtools sort`` of the same trimmed reads (rebuilt from the
   BAM by ``samtools collate | samtools fastq -F 0x900``, which turns reverse rows back), both sides sorted by
   name (``samtools sort -n``) and walked side by side, so memory stays flat whatever the BAM's size: name,
   flag, contig, POS, MAPQ, CIGAR, SEQ, QUAL per (name, first/second mate); the records that differ are
   counted by field, and each once by kind: ``placed_otherwise`` (contig or POS differ: a mate placed
   elsewhere, e.g. a repeat copy chosen otherwise; ``at_mapq0`` of them with MAPQ 0 on either side),
   ``cigar_only`` (same place, an indel or clip placed otherwise), ``flag_only`` (the same alignment, the
   pair's flags otherwise), ``mapq_only``, and ``other``; the secondary and supplementary records of each side
   are counted.

Prints one JSON line. Not for amplicon-mode BAMs (their records are primer-clipped, the command line's are not).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

FIELDS = ("flag", "contig", "pos", "mapq", "cigar", "seq", "qual")
#: (name, 0x40 / 0x80 of the flag) -> the fields of FIELDS
Primaries = dict[tuple[str, int], tuple[object, ...]]


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
        # the same trimmed reads, as sequenced (reverse rows turned back), one pair's mates in each file
        fq = {k: Path(tmp) / f"{k}.fq" for k in ("r1", "r2", "r0")}
        subprocess.run(f"{samtools} collate -u -O {bam} {tmp}/collate | {samtools} fastq -n -F 0x900 -1 {fq['r1']} "
                       f"-2 {fq['r2']} -0 {fq['r0']} -s /dev/null - 2>/dev/null", shell=True, check=True)
        reads = [fq["r1"], fq["r2"]] if fq["r1"].stat().st_size else [fq["r0"]]
        cli_bam = Path(tmp) / "cli.bam"
        subprocess.run(f"{minimap2} -ax {preset} -t1 {reference} {' '.join(map(str, reads))} 2>/dev/null | "
                       f"{samtools} view -1 -o {cli_bam} -", shell=True, check=True)
        result["not_primary"] = {side: {kind: int(subprocess.run(
            [samtools, "view", "-c", "-f", flag, str(path)], capture_output=True, check=True, text=True).stdout)
            for kind, flag in (("secondary", "0x100"), ("supplementary", "0x800"))}
            for side, path in (("ours", bam), ("cli", cli_bam))}
        result["records"] = int(subprocess.run([samtools, "view", "-c", str(bam)], capture_output=True, check=True,
                                               text=True).stdout)
        result["primary"] = diff_primaries(*(_by_name(samtools, path, tmp) for path in (bam, cli_bam)))
    return result


def _by_name(samtools: str, bam: Path, tmp: str) -> Iterator[tuple[str, Primaries]]:
    """A BAM's primary records grouped by name, in ``samtools sort -n`` order: (name, its mates' fields)."""
    cmd = (f"{samtools} view -u -F 0x900 {bam} | {samtools} sort -n -m 1G -T {tmp}/sort-{bam.stem} -O SAM "
           "--no-PG - 2>/dev/null")
    with subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, text=True) as view:
        assert view.stdout is not None
        name: str | None = None
        group: Primaries = {}
        for line in view.stdout:
            if line.startswith("@"):
                continue
            f = line.rstrip("\n").split("\t", 11)
            if f[0] != name:
                if name is not None:
                    yield name, group
                name, group = f[0], {}
            flag = int(f[1])
            group[(f[0], flag & 0xC0)] = (flag, f[2], int(f[3]), int(f[4]), f[5], f[9], f[10])
        if name is not None:
            yield name, group
    if view.returncode:
        raise subprocess.CalledProcessError(view.returncode, cmd)


class _Differ:
    """The counts of the primary records that differ, mate by mate (see the module docstring)."""

    def __init__(self) -> None:
        self.fields: collections.Counter[str] = collections.Counter()
        self.kinds: collections.Counter[str] = collections.Counter()
        self.examples: dict[str, object] = {}

    def compare(self, ours: Primaries, cli: Primaries) -> None:
        for key in ours.keys() | cli.keys():
            a, b = ours.get(key), cli.get(key)
            if a is None or b is None:
                self.fields["missing"] += 1
                continue
            for k, field in enumerate(FIELDS):
                if a[k] != b[k]:
                    self.fields[field] += 1
                    self.examples.setdefault(field, [key[0], a[k], b[k]] if field not in ("seq", "qual") else key[0])
            if a != b:
                self.fields["records"] += 1
                kind = _kind(a, b)
                self.kinds[kind] += 1
                if kind == "placed_otherwise" and 0 in (a[3], b[3]):
                    self.kinds["placed_otherwise_at_mapq0"] += 1
                self.examples.setdefault(kind, [key[0], a[:5], b[:5]])


def diff_primaries(ours: Iterator[tuple[str, Primaries]], cli: Iterator[tuple[str, Primaries]]) -> dict[str, object]:
    """The primary records of each (name, mate) that differ: counted by field and by kind, with an example.
    Both sides come sorted by name in the same order, so they are walked side by side: only names met on one
    side and not yet on the other are held (none when both hold the same reads)."""
    differ = _Differ()
    counts = {"ours": 0, "cli": 0}
    held: dict[str, dict[str, Primaries]] = {"ours": {}, "cli": {}}
    for left, right in itertools.zip_longest(ours, cli):
        if left is not None and right is not None and left[0] == right[0]:
            counts["ours"] += len(left[1])
            counts["cli"] += len(right[1])
            differ.compare(left[1], right[1])
            continue
        for side, other, got in (("ours", "cli", left), ("cli", "ours", right)):
            if got is None:
                continue
            counts[side] += len(got[1])
            if got[0] in held[other]:
                pair = {side: got[1], other: held[other].pop(got[0])}
                differ.compare(pair["ours"], pair["cli"])
            else:
                held[side][got[0]] = got[1]
    differ.fields["missing"] += sum(len(g) for side in held.values() for g in side.values())
    if not differ.fields["missing"]:
        del differ.fields["missing"]
    return {**counts, "differ": dict(differ.fields), "kinds": dict(differ.kinds), "examples": differ.examples}

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
