"""Bench rows of issue 23 (allele counts, variants, consensus), side by side as ratios of CPU seconds.

1. The child with allele counting against the same child without (``Params.allele_counts``): the full
   worker (QC, trimming, alignment, coverage, parts) over one shard, one alignment process; target:
   counting adds <= 15 % of the child's CPU.
2. seqlake's path from aligned reads to variants (the counting the child adds, then the region reducer that
   merges the counts and calls them, with its depth and coverage work too) against ``samtools sort |
   samtools mpileup -aa -A -x -B -d 0 -Q 0 | ivar variants``
   over the same reads aligned by ``minimap2 -ax sr`` (its SAM written beforehand, not timed); target >= 5x.

CPU seconds (user + system of this process and its children), best of ``--repeat`` runs: on a shared
machine the wall clock measures the neighbours. Usage::

    python bench/variants.py R1.fastq.gz R2.fastq.gz REFERENCE.fasta [--repeat 3] [--json OUT.json]

``make bench`` runs it as its ``variants`` group (bench/cases.py), which reads the ``--json`` numbers.
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

from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.child import worker
from seqlake.lake.reduce import reduce_region
from seqlake.lake.regions import plan_reduce
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference

COUNTING_TARGET = 0.15
PATH_TARGET = 5.0


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def best(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        t0 = cpu()
        run()
        times.append(cpu() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("r1")
    ap.add_argument("r2")
    ap.add_argument("reference")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="also write the CPU seconds here")
    args = ap.parse_args(argv)
    os.environ.setdefault("SEQLAKE_THREADS", "1")
    work = Path(tempfile.mkdtemp(prefix="seqlake-bench-variants-"))
    try:
        samples = [Sample("s", args.r1, args.r2)]
        pinned = indexed_reference(args.reference)  # the reference index, built and cached once, not timed
        plans = {on: make_plan(f"v{int(on)}", samples, out_prefix=str(work / str(on)), reference=pinned,
                               shards=1, params=Params(allele_counts=on)) for on in (False, True)}
        worker.process_child(plans[False], 0)  # a first child (its imports and caches), not timed
        child = {on: best(args.repeat, lambda on=on: worker.process_child(plans[on], 0)) for on in (False, True)}
        plan = plans[True]
        rp = plan_reduce(plan)
        # the reducer of the genome's one region: it calls the variants and the consensus (and finishes the
        # depth and coverage, which the path without calling would do too: an upper bound on calling's cost)
        calling = best(args.repeat, lambda: reduce_region(plan, 0, rp))
        ours = child[True] - child[False] + calling
        sam = work / "aligned.sam"
        with sam.open("wb") as out:
            subprocess.run(["minimap2", "-t", "1", "-ax", "sr", args.reference, args.r1, args.r2], stdout=out,
                           stderr=subprocess.DEVNULL, check=True)
        pipeline = (f"samtools sort -@ 0 -o {work}/s.bam {sam} 2>/dev/null && samtools mpileup -aa -A -x -B -d 0 "
                    f"-Q 0 -f {args.reference} {work}/s.bam 2>/dev/null | ivar variants -p {work}/ivar -t 0.03 "
                    f"-q 20 -m 10 -r {args.reference} > /dev/null")
        theirs = best(args.repeat, lambda: subprocess.run(["bash", "-c", pipeline], check=True))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    share = (child[True] - child[False]) / child[True]
    if args.json is not None:
        args.json.write_text(json.dumps({"child_without": child[False], "child_with": child[True], "ours": ours,
                                         "theirs": theirs, "counting_target": COUNTING_TARGET,
                                         "path_target": PATH_TARGET}))
    print("| row | CPU s | ratio | target | met |\n|---|---|---|---|---|")
    print(f"| child without allele counts | {child[False]:.2f} | | | |")
    print(f"| child with allele counts | {child[True]:.2f} | counting {100 * share:.1f} % of the child | "
          f"<= {100 * COUNTING_TARGET:.0f} % | {share <= COUNTING_TARGET} |")
    print(f"| seqlake: counting + the region's reducer (calling, depth, coverage) | {ours:.2f} | | | |")
    print(f"| samtools sort, mpileup, ivar variants (same aligned reads) | {theirs:.2f} | {theirs / ours:.1f}x | "
          f">= {PATH_TARGET:.0f}x | {theirs / ours >= PATH_TARGET} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
