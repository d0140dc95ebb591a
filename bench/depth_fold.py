"""A child's depth accumulator alone, as a child over a big genome folds it: 2 M pairs' aligned blocks (4 M blocks
of 150 bp) spread over 100 Mb, in batches of the child's ``ALIGN_BATCH_ROWS`` rows. Prints the CPU seconds of
the folding and the runs of the profile it ends with::

    taskset -c 0 python bench/depth_fold.py [--blocks 4000000] [--genome 100000000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from seqlake.child.worker import ALIGN_BATCH_ROWS
from seqlake.lake.depth import DepthAccumulator

READ = 150


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=4_000_000)
    ap.add_argument("--genome", type=int, default=100_000_000)
    ap.add_argument("--batch", type=int, default=ALIGN_BATCH_ROWS)
    args = ap.parse_args(argv)
    starts = np.random.default_rng(1).integers(0, args.genome - READ, args.blocks)
    ends = starts + READ
    acc = DepthAccumulator()
    t0 = time.process_time()
    for a in range(0, args.blocks, args.batch):
        acc.add_blocks({"chr": (starts[a : a + args.batch], ends[a : a + args.batch])})
    runs = len(acc.profiles["chr"])
    print(f"{args.blocks:,} blocks over {args.genome:,} bases in batches of {args.batch:,}: "
          f"{time.process_time() - t0:.1f} CPU s, {runs:,} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
