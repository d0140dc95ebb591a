"""One child's peak memory against the genome's size: the same simulated pairs' count over references of
different sizes, one child each (the allele counts spill to the child's disk past a row budget).

    nice -n 15 python bench/child_memory.py --reference ref-4M-5.fa --reads reads-4M-5-400000 --pairs 100000
    nice -n 15 python bench/child_memory.py --reference ref-100M-5.fa --reads reads-100M-5-300000 --pairs 100000
    nice -n 15 python bench/child_memory.py ... --src /work/main/src       # the same child as main runs it

(``bench/genome_scale.py`` writes those references and ``<reads>_R1.fastq.gz`` / ``_R2``.) The first
``--pairs`` pairs are copied into ``--work``; the reference is indexed once (cached in ``--work``, not
measured); a plan of one child (one shard, no trimming, the default parameters otherwise) is written; then the
child runs in a fresh interpreter as ``seqlake worker`` runs it (``process_child``, one alignment thread, so
one process holds everything), from the source tree ``--src``, under ``/usr/bin/time -v`` and with
``RLIMIT_DATA`` at ``--limit-mib`` (7,680 MiB: the child job's memory; the local cloud caps Batch children
the same way where it has no cgroup), so a child that would need more fails with ``MemoryError`` instead of
starving the machine. Prints one JSON line: peak RSS, CPU and wall seconds, exit code, the positions object's
size and allele rows. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _copy_pairs(reads: str, pairs: int, work: Path) -> tuple[Path, Path]:
    out = []
    for mate in (1, 2):
        target = work / f"{Path(reads).name}-{pairs}_R{mate}.fastq.gz"
        if not target.exists():
            with gzip.open(f"{reads}_R{mate}.fastq.gz", "rb") as src, gzip.open(target, "wb", compresslevel=1) as dst:
                dst.writelines(itertools.islice(src, 4 * pairs))
        out.append(target)
    return out[0], out[1]


def _plan(reference: str, r1: Path, r2: Path, lake: Path) -> str:
    sys.path.insert(0, str(REPO / "src"))
    from seqlake.base.model import Sample
    from seqlake.base.params import Params
    from seqlake.plan.planner import make_plan
    from seqlake.plan.refindex import indexed_reference

    os.environ["SEQLAKE_REF_CACHE"] = str(lake.parent / "refcache")
    plan = make_plan("bench", [Sample("s", str(r1), str(r2))], out_prefix=str(lake),
                     reference=indexed_reference(reference), params=Params(trim=False), shards=1)
    return plan.plan_uri


def _child(plan_uri: str, limit_mib: int) -> None:
    """The child, in this process (run under /usr/bin/time by :func:`main`)."""
    limit = limit_mib << 20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    from seqlake.child import worker
    from seqlake.plan.planfile import load_plan

    manifest = worker.process_child(load_plan(plan_uri), 0)
    rows: dict[str, int] = {}
    for tables in manifest.positions.values():
        for name, extent in tables.items():
            rows[name] = rows.get(name, 0) + extent.rows
    size = Path(load_plan(plan_uri).layout.positions(0)).stat().st_size
    print(json.dumps({"rows": rows, "positions_bytes": size}))


def _measure(plan_uri: str, src: str, limit_mib: int, tmp: Path) -> dict[str, Any]:
    """The child in a fresh interpreter, its scratch (and spilled runs) in ``tmp``."""
    env = {**os.environ, "PYTHONPATH": src, "SEQLAKE_THREADS": "1", "TMPDIR": str(tmp)}
    cmd = ["/usr/bin/time", "-v", sys.executable, __file__, "--child", plan_uri, "--limit-mib", str(limit_mib)]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    err = out.stderr.splitlines()

    def field(name: str) -> str:
        return next(line.rsplit(": ", 1)[-1] for line in err if name in line)

    wall = field("Elapsed (wall clock)")
    minutes, _, seconds = wall.rpartition(":")
    result: dict[str, Any] = {
        "exit": out.returncode,
        "peak_rss_mib": round(int(field("Maximum resident set size")) / 1024, 1),
        "cpu_seconds": round(float(field("User time (seconds)")) + float(field("System time (seconds)")), 1),
        "seconds": round(float(minutes or 0) * 60 + float(seconds), 1),
    }
    if out.returncode == 0:
        result.update(json.loads(out.stdout.strip().splitlines()[-1]))
    else:
        result["error"] = next((line for line in reversed(err) if "Error" in line), err[-1] if err else "")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference")
    ap.add_argument("--reads", help="the reads' path before _R1.fastq.gz / _R2.fastq.gz")
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "work" / "child-memory")
    ap.add_argument("--src", default=str(REPO / "src"), help="the source tree the child runs")
    ap.add_argument("--limit-mib", type=int, default=7_680)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.limit_mib)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    r1, r2 = _copy_pairs(args.reads, args.pairs, args.work)
    lake = args.work / f"lake-{time.time_ns()}"
    plan_uri = _plan(args.reference, r1, r2, lake)
    (lake / "tmp").mkdir()
    result = {"reference": Path(args.reference).name, "pairs": args.pairs, "src": args.src,
              "load": Path("/proc/loadavg").read_text().split()[:3],
              **_measure(plan_uri, args.src, args.limit_mib, lake / "tmp")}
    shutil.rmtree(lake, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
