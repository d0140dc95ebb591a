"""Bench rows of issue 23 (allele counts, variants, consensus), side by side as ratios of CPU seconds.

The reducers count alleles from the children's sorted records (docs/INTERNALS.md, "Counting from records"):
the child makes the same BAM records whether a run counts or not, so the counting's cost is the reducer's.

1. Where counting costs: the child with allele counts against the same child without (``Params.allele_counts``;
   the full worker over one shard, one alignment process, interleaved ``--child-repeat`` times, best of each),
   and the region's reducer with and without (best of ``--repeat``). Counting's CPU is the reducer's difference
   plus the child's (each floored at 0), as a share of child + reducer with counting; target: <= 15 %.
2. seqlake's path from aligned reads to variants (the reducer with counting: it counts from the records, merges,
   calls, and finishes depth and coverage, an upper bound; plus the child's difference) against ``samtools
   sort | samtools mpileup -aa -A -x -B -d 0 -Q 0 | ivar variants`` over the same reads aligned by ``minimap2
   -ax sr`` (its SAM written beforehand, not timed); target >= 5x.

CPU seconds (user + system of this process and its children): on a shared machine the wall clock measures the
neighbours. Usage::

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
from typing import Any

from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.child import worker
from seqlake.lake.regions import plan_reduce
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference
from seqlake.reduce.reducer import reduce_region

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


def child_runs(plans: dict[bool, Any], repeat: int) -> dict[str, float]:
    """The child without and with counting, interleaved ``repeat`` times: the best CPU seconds of each (this
    process: one alignment process runs in it)."""
    runs: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeat):
        for on in (False, True):
            t0 = cpu()
            worker.process_child(plans[on], 0)
            runs[on].append(cpu() - t0)
    return {"child_without": min(runs[False]), "child_with": min(runs[True])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("r1")
    ap.add_argument("r2")
    ap.add_argument("reference")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child-repeat", type=int, default=7, help="runs of the child with and without counting")
    ap.add_argument("--json", type=Path, default=None, help="also write the CPU seconds here")
    args = ap.parse_args(argv)
    os.environ.setdefault("SEQLAKE_THREADS", "1")
    work = Path(tempfile.mkdtemp(prefix="seqlake-bench-variants-"))
    try:
        samples = [Sample("s", args.r1, args.r2)]
        # samtools and ivar write a .fai beside the FASTA they read: a copy here, not the caller's file
        reference = str(work / Path(args.reference).name)
        shutil.copyfile(args.reference, reference)
        pinned = indexed_reference(args.reference)  # the reference index, built and cached once, not timed
        plans = {on: make_plan(f"v{int(on)}", samples, out_prefix=str(work / str(on)), reference=pinned,
                               shards=1, params=Params(allele_counts=on)) for on in (False, True)}
        worker.process_child(plans[False], 0)  # a first child (its imports and caches), not timed
        child = child_runs(plans, args.child_repeat)
        # the reducer of the genome's one region on each run's child output: with counting it counts from the
        # records and calls the variants and the consensus; both finish the depth and coverage
        reducer = {on: best(args.repeat, lambda on=on: reduce_region(plans[on], 0, plan_reduce(plans[on])))
                   for on in (False, True)}
        in_child = max(0.0, child["child_with"] - child["child_without"])
        counting = in_child + max(0.0, reducer[True] - reducer[False])
        ours = in_child + reducer[True]
        sam = work / "aligned.sam"
        with sam.open("wb") as out:
            subprocess.run(["minimap2", "-t", "1", "-ax", "sr", reference, args.r1, args.r2], stdout=out,
                           stderr=subprocess.DEVNULL, check=True)
        pipeline = (f"samtools sort -@ 0 -o {work}/s.bam {sam} 2>/dev/null && samtools mpileup -aa -A -x -B -d 0 "
                    f"-Q 0 -f {reference} {work}/s.bam 2>/dev/null | ivar variants -p {work}/ivar -t 0.03 "
                    f"-q 20 -m 10 -r {reference} > /dev/null")
        theirs = best(args.repeat, lambda: subprocess.run(["bash", "-c", pipeline], check=True))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    share = counting / (child["child_with"] + reducer[True])
    if args.json is not None:
        args.json.write_text(json.dumps({**child, "reducer_without": reducer[False], "reducer_with": reducer[True],
                                         "counting": counting, "counting_share": share, "shares": [share],
                                         "ours": ours, "theirs": theirs, "child_repeat": args.child_repeat,
                                         "counting_target": COUNTING_TARGET, "path_target": PATH_TARGET}))
    print("| row | CPU s | ratio | target | met |\n|---|---|---|---|---|")
    print(f"| child without allele counts (best) | {child['child_without']:.2f} | | | |")
    print(f"| child with allele counts (best) | {child['child_with']:.2f} | | | |")
    print(f"| the region's reducer without / with allele counts (best) | {reducer[False]:.2f} / "
          f"{reducer[True]:.2f} | | | |")
    print(f"| counting: the reducer's and the child's differences | {counting:.3f} | counting adds "
          f"{100 * share:.1f} % of child + reducer | <= {100 * COUNTING_TARGET:.0f} % | {share <= COUNTING_TARGET} |")
    print(f"| seqlake: the reducer counting and calling (with the child's difference) | {ours:.2f} | | | |")
    print(f"| samtools sort, mpileup, ivar variants (same aligned reads) | {theirs:.2f} | {theirs / ours:.1f}x | "
          f">= {PATH_TARGET:.0f}x | {theirs / ours >= PATH_TARGET} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
