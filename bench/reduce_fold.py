"""A reducer's fold of one sample's allele counts over one window, as the number of children grows.

    python bench/reduce_fold.py --window 1000000 --children 2 8 32

Each child's ``alleles`` rows cover 90 % of the window (as at 30x over a few children); they are folded and
merged as :func:`seqlake.reduce.reducer.reduce_region` does (``_fold_early``, then the table's merger), each
number of children in a process of its own, whose peak RSS is printed beside the merged table's size: the
state should be about one merged window whatever the number of children.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from seqlake.lake.positions import dictionary_column  # noqa: E402
from seqlake.lake.tables import ALLELE_COUNT_COLUMNS, ALLELES  # noqa: E402
from seqlake.reduce import reducer as reduce  # noqa: E402


def child_table(window: int, seed: int) -> pa.Table:
    pos = np.flatnonzero(np.random.default_rng(seed).random(window) < 0.9).astype(np.int64)
    cols = {"sample": dictionary_column(np.zeros(len(pos), np.int32), ["s"]),
            "contig": dictionary_column(np.zeros(len(pos), np.int32), ["chr1"]), "pos": pa.array(pos)}
    for c in ALLELE_COUNT_COLUMNS:
        cols[c.name] = pa.array(np.full(len(pos), 3, dtype=np.int64)).cast(c.type)
    return pa.table(cols, schema=ALLELES.schema)


def fold(window: int, children: int) -> None:
    pieces: list[pa.Table] = []
    for c in range(children):
        pieces.append(child_table(window, c))
        reduce._fold_early("alleles", pieces)
    merged = reduce.merger("alleles")(pieces)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"| {window:,} | {children} | {merged.nbytes / 1e6:,.0f} | {peak:,.0f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--window", type=int, default=1_000_000)
    p.add_argument("--children", type=int, nargs="+", default=[2, 8, 32])
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        fold(args.window, args.children[0])
        return
    print("| window (bases) | children | merged (MB) | peak RSS (MB) |\n|---:|---:|---:|---:|", flush=True)
    for k in args.children:
        subprocess.run([sys.executable, __file__, "--one", "--window", str(args.window), "--children", str(k)],
                       check=True)


if __name__ == "__main__":
    main()
