"""Bench rows of issue 23 (allele counts, variants, consensus), side by side as ratios of CPU seconds.

1. The child with allele counting against the same child without (``Params.allele_counts``): the full
   worker (QC, trimming, alignment, coverage, parts) over one shard, one alignment process; target:
   counting adds <= 15 % of the child's CPU. Counting's CPU is clocked inside the child itself (every call
   that exists only to count: the chunks' rows and reads into the counts, the staging tables made and
   written), as a share of that same run's CPU, the median over ``--child-repeat`` runs: a loaded machine
   slows both alike, where the difference of two whole runs measured its neighbours more than counting.
   The children without counting are run interleaved, and their best CPU seconds shown beside.
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
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


class CountingClock:
    """CPU seconds spent counting inside a child run (see the module docstring), and in the write of the
    child's positions object (which holds the allele tables beside depth and coverage)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.positions = 0.0

    def timed(self, call: Callable[..., Any], bucket: str = "seconds") -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                setattr(self, bucket, getattr(self, bucket) + time.process_time() - t0)
        return run


@contextlib.contextmanager
def counting_clock() -> Iterator[CountingClock]:
    """The child's counting calls clocked while inside: each aligned chunk into a sample's counts
    (``AlleleAccumulator.add``: the chunk's BAM records, which the child makes counting or not, are not
    counting), the staging tables (``allele_tables``); and the write of the positions object apart (its
    allele share is the difference between runs with and without counting)."""
    clock = CountingClock()
    aligning = worker._Aligning  # the calls the child makes only when it counts
    saved = worker.AlleleAccumulator.add, aligning.allele_tables, worker.write_positions
    worker.AlleleAccumulator.add = clock.timed(saved[0])  # type: ignore[method-assign]
    aligning.allele_tables = clock.timed(saved[1])  # type: ignore[method-assign]
    worker.write_positions = clock.timed(saved[2], "positions")
    try:
        yield clock
    finally:
        worker.AlleleAccumulator.add, aligning.allele_tables = saved[:2]  # type: ignore[method-assign]
        worker.write_positions = saved[2]


def child_runs(plans: dict[bool, Any], repeat: int) -> dict[str, Any]:
    """The child without and with counting, interleaved ``repeat`` times: CPU seconds of each run (this
    process: one alignment process runs in it) and, with counting, the counting's seconds inside it (the
    calls that only count, plus the positions object's write beyond its median without counting)."""
    runs: dict[bool, list[float]] = {False: [], True: []}
    inside: list[float] = []
    writes: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeat):
        for on in (False, True):
            with counting_clock() as clock:
                t0 = time.process_time()
                worker.process_child(plans[on], 0)
                runs[on].append(time.process_time() - t0)
            writes[on].append(clock.positions)
            if on:
                inside.append(clock.seconds)
    extra_write = max(0.0, statistics.median(writes[True]) - statistics.median(writes[False]))
    counting = [c + extra_write for c in inside]
    shares = [c / t for c, t in zip(counting, runs[True], strict=True)]
    return {"child_without": min(runs[False]), "child_with": min(runs[True]), "counting": statistics.median(counting),
            "counting_share": statistics.median(shares), "shares": shares, "positions_write_extra": extra_write,
            "subtracted_share": (min(runs[True]) - min(runs[False])) / min(runs[True])}


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
        pinned = indexed_reference(args.reference)  # the reference index, built and cached once, not timed
        plans = {on: make_plan(f"v{int(on)}", samples, out_prefix=str(work / str(on)), reference=pinned,
                               shards=1, params=Params(allele_counts=on)) for on in (False, True)}
        worker.process_child(plans[False], 0)  # a first child (its imports and caches), not timed
        child = child_runs(plans, args.child_repeat)
        plan = plans[True]
        rp = plan_reduce(plan)
        # the reducer of the genome's one region: it calls the variants and the consensus (and finishes the
        # depth and coverage, which the path without calling would do too: an upper bound on calling's cost)
        calling = best(args.repeat, lambda: reduce_region(plan, 0, rp))
        ours = child["counting"] + calling
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
    share = child["counting_share"]
    if args.json is not None:
        args.json.write_text(json.dumps({**child, "ours": ours, "theirs": theirs, "child_repeat": args.child_repeat,
                                         "counting_target": COUNTING_TARGET, "path_target": PATH_TARGET}))
    print("| row | CPU s | ratio | target | met |\n|---|---|---|---|---|")
    print(f"| child without allele counts (best) | {child['child_without']:.2f} | | | |")
    print(f"| child with allele counts (best) | {child['child_with']:.2f} | | | |")
    print(f"| counting inside the child (median) | {child['counting']:.3f} | counting adds {100 * share:.1f} % of "
          f"the child's CPU (runs: {', '.join(f'{100 * x:.1f}' for x in child['shares'])}; the difference of the "
          f"best runs: {100 * child['subtracted_share']:.1f} %) | <= {100 * COUNTING_TARGET:.0f} % | "
          f"{share <= COUNTING_TARGET} |")
    print(f"| seqlake: counting + the region's reducer (calling, depth, coverage) | {ours:.2f} | | | |")
    print(f"| samtools sort, mpileup, ivar variants (same aligned reads) | {theirs:.2f} | {theirs / ours:.1f}x | "
          f">= {PATH_TARGET:.0f}x | {theirs / ours >= PATH_TARGET} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
