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
starving the machine. Its ``TMPDIR`` (where the child's scratch goes: :func:`seqlake.lake.parquet_io.local_tmp`,
the sorted runs of :class:`seqlake.lake.slices.SliceSorter` spilled past their budget, the objects before their
upload) is sampled every ``--sample-seconds`` for its largest size, against the input's gzipped bytes
(``--pairs 0``: the reads as they are, not copied). Prints one JSON line: peak RSS, CPU and wall seconds, exit
code, the peak scratch, the objects the child wrote. ``--profile OUT.prof`` runs the child under cProfile
instead, clocked by the process's CPU time (its CPU is then cProfile's too), and adds where its CPU went: by
function (own time) and by seqlake step (cumulative). Nothing is asserted.

    nice -n 15 python bench/child_memory.py --reference ref-100M-5.fa --reads reads-100M-5-2000000-seed23 --pairs 0
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
    if not pairs:
        return Path(f"{reads}_R1.fastq.gz"), Path(f"{reads}_R2.fastq.gz")
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


def _child(plan_uri: str, limit_mib: int, profile: str | None) -> None:
    """The child, in this process (run under /usr/bin/time by :func:`main`)."""
    limit = limit_mib << 20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    from seqlake.child import worker
    from seqlake.plan.planfile import load_plan

    plan = load_plan(plan_uri)
    if profile:
        # bench/profile.py, on the path as this script's folder, would shadow the standard library's (cProfile's)
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
        import cProfile

        with cProfile.Profile(time.process_time) as prof:  # CPU, not wall: the machine is shared
            manifest = worker.process_child(plan, 0)
        prof.dump_stats(profile)
    else:
        manifest = worker.process_child(plan, 0)
    objects = {}
    for name in ("positions", "reads_slices", "manifest"):
        path = Path(getattr(plan.layout, name)(0))
        if path.is_file():
            objects[name] = path.stat().st_size
    if manifest.alignments is not None:
        objects["alignments"] = Path(plan.layout.alignments_part(0)).stat().st_size
    print(json.dumps({"objects_bytes": objects, "coverage_rows": manifest.coverage_rows}))


def where_cpu_went(prof: str, top: int = 25) -> dict[str, Any]:
    """A cProfile dump as (1) the functions with the most own time and (2) seqlake's functions by cumulative
    time (the steps: a step's time holds its callees'), each with its share of the whole."""
    import pstats

    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in stats.values())

    def name(key: tuple[str, int, str]) -> str:
        path, line, func = key
        if path == "~":
            return func
        short = path.split("/site-packages/")[-1].split("/src/")[-1]
        return f"{short}:{line}({func})"

    own = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    steps = sorted(((k, v) for k, v in stats.items() if "/seqlake/" in k[0] and "/src/" in k[0]),
                   key=lambda kv: -kv[1][3])[:top]
    return {"profiled_cpu_seconds": round(total, 1),
            "own": [[name(k), round(v[2], 1), round(100 * v[2] / total, 1)] for k, v in own],
            "seqlake_cumulative": [[name(k), round(v[3], 1), round(100 * v[3] / total, 1)] for k, v in steps]}


def _measure(plan_uri: str, src: str, limit_mib: int, tmp: Path, every: float,
             profile: str | None = None) -> dict[str, Any]:
    """The child in a fresh interpreter, its scratch (and spilled runs) in ``tmp``, sampled every ``every`` s."""
    env = {**os.environ, "PYTHONPATH": src, "SEQLAKE_THREADS": "1", "TMPDIR": str(tmp)}
    cmd = ["/usr/bin/time", "-v", sys.executable, __file__, "--child", plan_uri, "--limit-mib", str(limit_mib)]
    if profile:
        cmd += ["--profile", profile]
    from harness import FolderBytes  # bench/ is this script's folder

    with FolderBytes(tmp, every) as scratch:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    stdout, stderr = proc.stdout, proc.stderr
    err = stderr.splitlines()

    def field(name: str) -> str:
        return next(line.rsplit(": ", 1)[-1] for line in err if name in line)

    wall = field("Elapsed (wall clock)")
    minutes, _, seconds = wall.rpartition(":")
    result: dict[str, Any] = {
        "exit": proc.returncode,
        "scratch_peak_bytes": int(scratch.peak), "scratch_samples": scratch.samples,
        "peak_rss_mib": round(int(field("Maximum resident set size")) / 1024, 1),
        "cpu_seconds": round(float(field("User time (seconds)")) + float(field("System time (seconds)")), 1),
        "seconds": round(float(minutes or 0) * 60 + float(seconds), 1),
    }
    if proc.returncode == 0:
        result.update(json.loads(stdout.strip().splitlines()[-1]))
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
    ap.add_argument("--sample-seconds", type=float, default=0.5, help="how often the child's TMPDIR is measured")
    ap.add_argument("--profile", help="run the child under cProfile, its stats to this file, and say where the "
                                      "CPU went")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.limit_mib, args.profile)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    r1, r2 = _copy_pairs(args.reads, args.pairs, args.work)
    lake = args.work / f"lake-{time.time_ns()}"
    plan_uri = _plan(args.reference, r1, r2, lake)
    (lake / "tmp").mkdir()
    result = {"reference": Path(args.reference).name, "pairs": args.pairs, "src": args.src,
              "input_gz_bytes": r1.stat().st_size + r2.stat().st_size,
              "load": Path("/proc/loadavg").read_text().split()[:3],
              **_measure(plan_uri, args.src, args.limit_mib, lake / "tmp", args.sample_seconds, args.profile)}
    result["scratch_over_input"] = round(result["scratch_peak_bytes"] / result["input_gz_bytes"], 3)
    result["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    if args.profile and result["exit"] == 0:
        result["where_cpu_went"] = where_cpu_went(args.profile)
    shutil.rmtree(lake, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
