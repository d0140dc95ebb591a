"""What a reference's index costs: the index job's build and a child's load, by reference size.

For each size, a random reference (seeded; ``--contigs`` sequences) is pinned and indexed with the ``sr``
preset as ``seqlake process`` does before it plans (:func:`seqlake.plan.refindex.indexed_reference`: SHA-256, the
contigs' MD5s from the streamed FASTA, the minimap2 index), then loaded as a child loads it (the index
and its contigs JSON), each step in a process of its own so that its peak RSS is its own. Prints a
Markdown table and a linear extrapolation of the build's peak to GRCh38's 3.1 Gb::

    python bench/reference_index.py --sizes 100,300 --out bench/work/reference-index.json

Random sequence is the costly case for the index (nearly every minimizer distinct); a real genome's
repeats make its index smaller, not its minimizer count. Nothing is asserted; times are this machine's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GRCH38_BASES = 3_100_000_000

#: runs in a process of its own: a step and its peak RSS (ru_maxrss is in KiB on Linux)
_STEP = """
import json, resource, sys, time
from seqlake.plan import reference, refindex
step, fasta, store, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
t0 = time.perf_counter()
if step == "build":
    pin = refindex.indexed_reference(fasta, "sr", store, threads)
else:
    import mappy
    pin = reference.pin_reference(fasta, "sr", store)
    aligner = mappy.Aligner(reference.local_index(pin), preset="sr")
    contigs = reference.load_contigs(pin)
seconds = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
size = Path(reference.local_index(pin)).stat().st_size
print(json.dumps({"seconds": round(seconds, 2), "peak_rss": rss, "index_bytes": size}))
"""


def random_fasta(path: Path, bases: int, contigs: int, seed: int = 11) -> None:
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    with path.open("wb") as f:
        for c in range(contigs):
            seq = letters[rng.integers(0, 4, bases // contigs)].tobytes()
            f.write(f">c{c}\n".encode() + b"\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + b"\n")


def step(name: str, fasta: Path, store: Path, threads: int) -> dict[str, float]:
    code = "from pathlib import Path\n" + _STEP
    out = subprocess.run([sys.executable, "-c", code, name, str(fasta), str(store), str(threads)],
                         check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100", help="reference sizes in Mb, comma-separated")
    parser.add_argument("--contigs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="the index job's vCPUs (SEQLAKE_THREADS)")
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="seqlake-refbench-") as tmp:
        for mb in (int(x) for x in args.sizes.split(",")):
            bases = mb * 1_000_000
            fasta = Path(tmp, f"r{mb}.fa")
            random_fasta(fasta, bases, args.contigs)
            store = Path(tmp, f"store{mb}")
            build = step("build", fasta, store, args.threads)
            load = step("load", fasta, store, args.threads)
            rows.append({"mb": mb, "bases": bases, "build": build, "load": load})
            fasta.unlink()
    print(f"reference index, sr preset, random sequence in {args.contigs} contigs, {args.threads} thread(s); "
          f"load {Path('/proc/loadavg').read_text().split()[0]}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| reference (Mb) | build (s) | build peak RSS (MB) | bytes/base | .mmi (MB) | load (s) "
          "| load peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        b, ld = r["build"], r["load"]
        print(f"| {r['mb']} | {b['seconds']} | {b['peak_rss'] / 1e6:.0f} | {b['peak_rss'] / r['bases']:.2f} "
              f"| {b['index_bytes'] / 1e6:.0f} | {ld['seconds']} | {ld['peak_rss'] / 1e6:.0f} |")
    if len(rows) >= 2:
        x = np.array([r["bases"] for r in rows], dtype=float)
        y = np.array([r["build"]["peak_rss"] for r in rows], dtype=float)
        slope, intercept = np.polyfit(x, y, 1)
        print(f"\nbuild peak = {slope:.2f} bytes/base x bases + {intercept / 1e6:.0f} MB: "
              f"GRCh38 (3.1 Gb) extrapolates to {(slope * GRCH38_BASES + intercept) / 2**30:.1f} GiB")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
