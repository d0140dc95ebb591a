"""The seqlake code paths that ``bench/run.py`` times, one small function each, run as a child process.

``python bench/paths.py PATH ARGS...`` runs one path and prints one JSON line (what it did: counts, the plan
URI) on stdout. ``run.py`` starts it under ``taskset -c 0`` and measures wall time and peak RSS from the
outside, exactly as it measures seqkit, fastp and minimap2. Exit code 3 means "a piece of seqlake this path
needs does not exist (yet)": run.py then skips the row with a note instead of failing.

Paths:
  qc FILE                         the QC library alone: record-aligned chunks -> vectorised QC (with a
                                  shard child's allocator settings, seqlake.child.heap)
  index FILE                      the gzip indexing pass the planner runs (records, checkpoints, seek index)
  bgzf-count FILE                 the BGZF counting pass the planner runs instead (records, checkpoints)
  plan OUT R1 [R2] [--reference FA] [--no-trim] [--shards N]
                                  make_plan: validation + index pass + shard boundaries -> plan.json
  shards PLAN [--jobs J]          every shard of a plan, on J processes (setup for merge; no timing claim)
  merge PLAN                      merge_run: check the manifests, add up the aggregates, write the tables
The worker itself is timed through its real entry point, ``python -m seqlake worker --plan P --shard 0``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

EXIT_MISSING = 3


def _missing(what: str, err: Exception) -> int:
    print(json.dumps({"missing": what, "error": f"{type(err).__name__}: {err}"}))
    return EXIT_MISSING


def api(module: str, name: str) -> Any:
    """``seqlake.<module>.<name>``, imported when a path runs: a piece still being written skips one row."""
    try:
        return getattr(importlib.import_module(f"seqlake.{module}"), name)
    except AttributeError as err:
        raise ImportError(f"seqlake.{module} has no {name}") from err


def path_qc(args: argparse.Namespace) -> dict[str, Any]:
    api("child.heap", "keep_freed_memory")()  # the allocator settings of a shard child, where the library runs
    chunks = api("reads.fastq", "iter_file_chunk_lines")(args.file)
    s = api("lake.qc", "summarize")(api("lake.qc", "qc_chunks")(chunks, args.file))
    return {"reads": s["reads"], "bases": s["bases"], "q30_bases": s["q30_bases"]}


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of this process (start-up included), of its main thread, and of its child
    processes (the gzip pass's counting process on 2-3 vCPUs, the BGZF pass's counting processes on
    every vCPU but one)."""
    t = os.times()
    return {"process": round(t.user + t.system, 3), "main_thread": round(time.thread_time(), 3),
            "children": round(t.children_user + t.children_system, 3)}


def path_index(args: argparse.Namespace) -> dict[str, Any]:
    res = api("reads.gzindex", "index_gzip")(args.file)
    scan = res.scan
    return {
        "plain_size": getattr(scan, "plain_size", None),
        "records": getattr(scan, "records", None),
        "index_bytes": len(res.index or b""),
        "cpu_s": cpu_seconds(),
    }


def path_bgzf_count(args: argparse.Namespace) -> dict[str, Any]:
    scan = api("reads.bgzf", "count_records")(args.file)
    return {"plain_size": scan.plain_size, "records": scan.records, "checkpoints": len(scan.checkpoints),
            "cpu_s": cpu_seconds()}


def path_plan(args: argparse.Namespace) -> dict[str, Any]:
    params_cls, sample_inputs = api("base.params", "Params"), api("base.model", "Sample")
    r1 = str(Path(args.r1).resolve())
    r2 = str(Path(args.r2).resolve()) if args.r2 else None
    reference = str(Path(args.reference).resolve()) if args.reference else None
    chosen = {"preset": args.preset, "quality_cutoff": args.quality_cutoff}
    params = params_cls(trim=not args.no_trim, **{k: v for k, v in chosen.items() if v is not None})
    # pinned and indexed before the plan, as seqlake process does (the shards only load the index)
    pinned = api("plan.refindex", "indexed_reference")(reference, params.preset) if reference else None
    key = json.dumps([r1, r2, reference, params.to_dict(), args.shards], sort_keys=True)
    run_id = "bench-" + hashlib.sha256(key.encode()).hexdigest()[:12]
    plan = api("plan.planner", "make_plan")(
        run_id,
        [sample_inputs("bench", r1, r2)],
        out_prefix=str(Path(args.out).resolve()),
        reference=pinned,
        params=params,
        shards=args.shards,
    )
    return {"plan_uri": plan.plan_uri, "shards": plan.array_size}


def _run_shards(plan_uri: str, shards: range) -> int:
    plan = api("plan.planfile", "load_plan")(plan_uri)
    process_child = api("child.worker", "process_child")
    for shard in shards:
        process_child(plan, shard)
    return len(shards)


def path_shards(args: argparse.Namespace) -> dict[str, Any]:
    n = api("plan.planfile", "load_plan")(args.plan).array_size
    jobs = max(1, min(args.jobs, n))
    if jobs == 1:
        return {"shards": _run_shards(args.plan, range(n))}
    # setup for the merge measurement, not itself a claim: spread the shards over a few processes
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(jobs) as pool:
        done = sum(pool.starmap(_run_shards, [(args.plan, range(k, n, jobs)) for k in range(jobs)]))
    return {"shards": done, "jobs": jobs}


def path_merge(args: argparse.Namespace) -> dict[str, Any]:
    totals = api("commit.merge", "merge_run")(api("plan.planfile", "load_plan")(args.plan))
    to_dict = getattr(totals, "to_dict", None)
    return {"totals": to_dict() if callable(to_dict) else str(totals)}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="path", required=True)
    for name in ("qc", "index", "bgzf-count"):
        p = sub.add_parser(name)
        p.add_argument("file")
    p = sub.add_parser("plan")
    p.add_argument("out")
    p.add_argument("r1")
    p.add_argument("r2", nargs="?", default=None)
    p.add_argument("--reference", default=None)
    p.add_argument("--no-trim", action="store_true")
    p.add_argument("--preset", default=None, help="minimap2 preset (a run parameter; default sr)")
    p.add_argument("--quality-cutoff", type=int, default=None)
    p.add_argument("--shards", type=int, default=None)
    for name in ("shards", "merge"):
        p = sub.add_parser(name)
        p.add_argument("plan")
        if name == "shards":
            p.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    return ap


PATHS = {
    "qc": path_qc,
    "index": path_index,
    "bgzf-count": path_bgzf_count,
    "plan": path_plan,
    "shards": path_shards,
    "merge": path_merge,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = PATHS[args.path](args)
    except ImportError as err:
        # a module or function another helper is still writing: not a benchmark failure
        return _missing(args.path, err)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
