"""Bench rows of issue 35 (the per-sample BAM), side by side as ratios of CPU seconds in the same run:

1. The BAM: seqlake's child + reducer + the commit's join (the whole path from FASTQ to ``<sample>.bam`` and its
   index; allele counts off, so the reducer's part is depth, coverage and the BAM pieces) against ``minimap2 -ax
   sr -t 1 | samtools sort -@ 0`` and ``samtools index`` of the same trimmed reads (taken from seqlake's BAM
   beforehand, untimed: ``samtools collate | samtools fastq``); target: at least as fast (>= 1.0x). The child
   does more than align (QC before and after trimming, trimming, the ``alignments`` table, coverage), so this
   is an upper bound of the BAM's own cost.
2. The full child against ``minimap2 -ax sr -t 1`` on the raw reads (the SAM to /dev/null); target >= 0.95x.
3. Two rows that say what the targets ask of the child (not targets themselves):
   - the floor: the child's aligner alone (``mappy.seqlake_map_batch``, its index loaded before the clock
     starts, the rows' column buffers returned and nothing else done) on the same trimmed pairs, against
     ``minimap2 -ax sr -t 1`` on them: the share of the command line's time the child spends before it does
     anything but align;
   - the same work by the tools a lab would chain: ``fastp -w 1`` (QC before and after trimming, adapter and
     quality trimming; plain FASTQ out), then ``minimap2 -ax sr -t 1 | samtools sort`` and ``samtools index`` of
     what fastp kept, against seqlake's child + reducers + join.

The child runs under the worker's process settings (:func:`seqlake.child.worker_main.child_process_settings`:
Arrow's allocator, the C heap's thresholds), as ``seqlake worker`` runs it.

CPU seconds (user + system of this process and its children), best of ``--repeat``, the rows interleaved: on
a shared machine the wall clock measures the neighbours. ``SEQLAKE_THREADS=1``: one alignment process. Usage::

    python bench/bam.py R1.fastq.gz R2.fastq.gz REFERENCE.fasta [--repeat 3] [--json OUT.json]

``make bench`` runs it as its ``bam`` group (bench/cases.py) on the MiSeq pair replicated (each replica's read
names its own: equal names would make the reducers' mates rule pair the replicas' reads), which reads the
``--json`` numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqlake.child.worker_main import child_process_settings

child_process_settings()  # before pyarrow's import below: Arrow reads its allocator's variable then

from seqlake.base import storage  # noqa: E402
from seqlake.base.layout import BAM_SUFFIX  # noqa: E402
from seqlake.base.model import Sample  # noqa: E402
from seqlake.base.params import Params  # noqa: E402
from seqlake.child import worker  # noqa: E402
from seqlake.child.align import SR_MAX_FRAG_LEN  # noqa: E402
from seqlake.lake.regions import plan_reduce  # noqa: E402
from seqlake.lake.staging import ChildManifest  # noqa: E402
from seqlake.plan.planner import make_plan  # noqa: E402
from seqlake.plan.refindex import indexed_reference  # noqa: E402
from seqlake.reduce.bams import write_bams  # noqa: E402
from seqlake.reduce.reducer import reduce_region  # noqa: E402

BAM_TARGET = 1.0
#: pairs per call of the floor row (about a child's chunk)
FLOOR_CHUNK = 4096
CHILD_TARGET = 0.95


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(run: Callable[[], object]) -> float:
    t0 = cpu()
    run()
    return cpu() - t0


def seqlake_bam(plan: Any) -> dict[str, float]:
    """The child, every reducer, and the commit's join of the BAMs: CPU seconds of each."""
    child = timed(lambda: worker.process_child(plan, 0))
    t0 = cpu()
    rp = plan_reduce(plan)
    assert rp is not None
    for r in range(len(rp.reducers)):
        reduce_region(plan, r, rp)
    reducer = cpu() - t0
    m = ChildManifest.from_json(storage.read_bytes(plan.layout.manifest(0)))
    groups = {s.sample: s.read_groups for s in m.shards}
    join = timed(lambda: write_bams(plan, rp, m.reference_md5, m.software, groups))
    return {"child": child, "reducer": reducer, "join": join, "ours": child + reducer + join}


def mappy_alone(index: str, r1: Path, r2: Path) -> Callable[[], object]:
    """The floor row's work: every pair of ``r1``/``r2`` through the child's aligner as the child calls it
    (``mappy.seqlake_map_batch``, a chunk of pairs per call, its rows as column buffers) and nothing else: no
    table built (the aligner is loaded here, before the clock starts)."""
    import dnaio
    import mappy

    aligner = mappy.Aligner(index, preset="sr", n_threads=1)
    buf = mappy.ThreadBuffer()
    with dnaio.open(r1, file2=r2) as reads:
        pairs = [(a.name.split()[0], a.sequence, b.sequence) for a, b in reads]
    chunks = [list(zip(*pairs[k : k + FLOOR_CHUNK], strict=True)) for k in range(0, len(pairs), FLOOR_CHUNK)]

    def run() -> int:
        rows = 0
        for names, s1, s2 in chunks:
            rows += len(mappy.seqlake_map_batch(aligner, names, s1, s2, SR_MAX_FRAG_LEN, buf)["mate"])
        return rows

    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("r1")
    ap.add_argument("r2")
    ap.add_argument("reference")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="also write the CPU seconds here")
    args = ap.parse_args(argv)
    os.environ["SEQLAKE_THREADS"] = "1"
    for tool in ("minimap2", "samtools"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} must be on PATH")
    work = Path(tempfile.mkdtemp(prefix="seqlake-bench-bam-"))
    try:
        reference = str(work / Path(args.reference).name)  # samtools writes a .fai beside what it reads
        shutil.copyfile(args.reference, reference)
        pinned = indexed_reference(args.reference)  # the reference index, built and cached once, not timed
        params = Params(allele_counts=False)
        plans = [make_plan(f"b{k}", [Sample("s", args.r1, args.r2)], out_prefix=str(work / f"run{k}"),
                           reference=pinned, shards=1, params=params) for k in range(args.repeat + 1)]
        seqlake_bam(plans[0])  # a first run (imports, caches) whose BAM gives the trimmed reads; not timed
        bam = storage.read_bytes(plans[0].layout.sample_file("s", BAM_SUFFIX))
        (work / "ours.bam").write_bytes(bam)
        trimmed = [work / "t1.fq", work / "t2.fq"]
        subprocess.run(f"samtools collate -u -O {work}/ours.bam {work}/collate | samtools fastq -n -F 0x900 "
                       f"-1 {trimmed[0]} -2 {trimmed[1]} -0 /dev/null -s /dev/null - 2>/dev/null", shell=True,
                       check=True)
        pairs = sum(1 for _ in trimmed[0].open()) // 4
        theirs_cmd = (f"minimap2 -ax sr -t 1 {reference} {trimmed[0]} {trimmed[1]} 2>/dev/null | samtools sort -@ 0 "
                      f"-o {work}/theirs.bam - 2>/dev/null && samtools index {work}/theirs.bam")
        mm2_cmd = f"minimap2 -ax sr -t 1 {reference} {args.r1} {args.r2} > /dev/null 2>&1"
        mm2_trimmed_cmd = f"minimap2 -ax sr -t 1 {reference} {trimmed[0]} {trimmed[1]} > /dev/null 2>&1"
        floor = mappy_alone(pinned.index_uri, trimmed[0], trimmed[1])
        chain_cmd = (f"fastp -w 1 -i {args.r1} -I {args.r2} -o {work}/f1.fq -O {work}/f2.fq -j {work}/fastp.json "
                     f"-h {work}/fastp.html 2>/dev/null && minimap2 -ax sr -t 1 {reference} {work}/f1.fq {work}/f2.fq "
                     f"2>/dev/null | samtools sort -@ 0 -o {work}/chain.bam - 2>/dev/null "
                     f"&& samtools index {work}/chain.bam")
        rows: dict[str, list[float]] = {}
        for k in range(args.repeat):  # interleaved: each repeat runs every row once
            for key, value in seqlake_bam(plans[k + 1]).items():
                rows.setdefault(key, []).append(value)
            rows.setdefault("theirs", []).append(timed(lambda: subprocess.run(theirs_cmd, shell=True, check=True)))
            rows.setdefault("minimap2", []).append(timed(lambda: subprocess.run(mm2_cmd, shell=True, check=True)))
            rows.setdefault("mappy_alone", []).append(timed(floor))
            rows.setdefault("minimap2_trimmed", []).append(
                timed(lambda: subprocess.run(mm2_trimmed_cmd, shell=True, check=True)))
            if shutil.which("fastp") is not None:  # the chain's row needs fastp; the targets' rows do not
                rows.setdefault("chain", []).append(
                    timed(lambda: subprocess.run(chain_cmd, shell=True, check=True)))
            shutil.rmtree(work / f"run{k + 1}", ignore_errors=True)
        sizes = {"ours_bytes": len(bam), "theirs_bytes": (work / "theirs.bam").stat().st_size}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {k: min(v) for k, v in rows.items()}
    bam_ratio = best["theirs"] / best["ours"]
    child_ratio = best["minimap2"] / best["child"]
    floor_ratio = best["minimap2_trimmed"] / best["mappy_alone"]
    chain_ratio = best["chain"] / best["ours"] if "chain" in best else None
    out = {**best, "runs": rows, "repeat": args.repeat, "trimmed_pairs": pairs, **sizes, "bam_ratio": bam_ratio,
           "child_ratio": child_ratio, "floor_ratio": floor_ratio, "chain_ratio": chain_ratio,
           "child_budget": best["minimap2"] / CHILD_TARGET - best["mappy_alone"],
           "bam_target": BAM_TARGET, "child_target": CHILD_TARGET}
    if args.json is not None:
        args.json.write_text(json.dumps(out))
    print(f"| row | CPU s (best of {args.repeat}) | ratio | target | met |\n|---|---|---|---|---|")
    print(f"| seqlake child (full worker, one shard, allele counts off) | {best['child']:.2f} | | | |")
    print(f"| seqlake reducers (depth, coverage, BAM pieces) | {best['reducer']:.2f} | | | |")
    print(f"| seqlake commit's join of the BAM and its index | {best['join']:.2f} | | | |")
    print(f"| seqlake: FASTQ to the sorted, indexed BAM (child + reducers + join) | {best['ours']:.2f} | | | |")
    print(f"| minimap2 -ax sr -t 1, samtools sort -@ 0, samtools index (same {pairs:,} trimmed pairs) | "
          f"{best['theirs']:.2f} | {bam_ratio:.2f}x | >= {BAM_TARGET:.2f}x | {bam_ratio >= BAM_TARGET} |")
    print(f"| minimap2 -ax sr -t 1 (raw reads) against the child | {best['minimap2']:.2f} | {child_ratio:.2f}x | "
          f">= {CHILD_TARGET:.2f}x | {child_ratio >= CHILD_TARGET} |")
    print(f"| the child's aligner alone on the trimmed pairs (mappy.seqlake_map_batch: the child's floor) | "
          f"{best['mappy_alone']:.2f} | | | |")
    print(f"| minimap2 -ax sr -t 1 on the same trimmed pairs, against the aligner alone | "
          f"{best['minimap2_trimmed']:.2f} | "
          f"{floor_ratio:.2f}x | | |")
    if chain_ratio is not None:
        print(f"| fastp -w 1, minimap2 -ax sr -t 1, samtools sort -@ 0, samtools index (the tools' chain), against "
              f"child + reducers + join | {best['chain']:.2f} | {chain_ratio:.2f}x | | |")
    print(f"the {CHILD_TARGET:.2f}x target leaves the child {out['child_budget']:.2f} CPU s for all but mapping")
    print(f"BAM bytes: seqlake {sizes['ours_bytes']:,}, samtools sort {sizes['theirs_bytes']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
