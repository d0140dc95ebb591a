"""``seqlake process``: the core alone on local files, no cloud: plan, run the shards, merge.

The same three steps the state machine runs on AWS (plan -> array of shard workers -> commit), with
the shards on ``--jobs`` local processes instead of Batch children. The output folder has the same
layout as the bucket: ``runs/<run_id>/plan.json``, staging parts, and the Hive-partitioned tables
under ``results/<table>/run_id=<run_id>/``, plus ``summary.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from seqlake import __version__
from seqlake.base.model import RunState
from seqlake.base.params import Params, chosen_parameters

if TYPE_CHECKING:
    from seqlake.plan.reference import ReferencePin

console = Console(stderr=True)


def local_run_id(paths: list[Path], params: Params, reference: ReferencePin | None) -> str:
    """Deterministic from the inputs' identity (path, size, mtime), the parameters and the reference's
    content (its pin: a replaced reference is another run).

    The AWS app derives it from (bucket, key, ETag); locally a file's size and mtime stand in for
    its ETag without reading it whole.
    """
    h = hashlib.sha256()
    for p in paths:
        st = p.stat()
        h.update(f"{p.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    h.update(json.dumps(params.to_dict(), sort_keys=True).encode())
    if reference is not None:
        h.update(f"{reference.uri}\0{reference.key}".encode())
    return h.hexdigest()[:20]


def _run_shard(plan_uri: str, child: int) -> int:
    from seqlake.child.worker import process_child
    from seqlake.plan.childplan import load_child_plan

    process_child(load_child_plan(plan_uri, child), child)
    return child


def run_shards(plan_uri: str, n_shards: int, jobs: int, label: str = "shards") -> None:
    """Run every shard, ``jobs`` at a time, with a progress bar; the first error cancels the rest."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(label, total=n_shards)
        if jobs <= 1 or n_shards == 1:
            for shard in range(n_shards):
                _run_shard(plan_uri, shard)
                progress.advance(task)
            return
        # spawn: children must not inherit threads (rapidgzip, boto3) from this process
        ctx = multiprocessing.get_context("spawn")
        # a fresh process every 64 shards: bounded memory over runs of thousands of tiny shards
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=64) as pool:
            pending: set[Future[int]] = {pool.submit(_run_shard, plan_uri, s) for s in range(n_shards)}
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for fut in done:
                    if fut.exception() is not None:
                        for other in pending:
                            other.cancel()
                        fut.result()  # re-raise, e.g. BadInputError -> exit 65 at the CLI edge
                    progress.advance(task)


def process_command(args: argparse.Namespace) -> int:
    from seqlake.base.cpus import THREADS_VAR
    from seqlake.base.model import Sample
    from seqlake.base.naming import sample_from_filename
    from seqlake.lake.merge import merge_run
    from seqlake.plan.planner import make_plan
    from seqlake.plan.reference import index_store
    from seqlake.plan.refindex import indexed_reference
    from seqlake.reads.gzindex import index_threads

    r1 = Path(args.r1)
    r2 = Path(args.r2) if args.r2 else None
    paths = [r1] + ([r2] if r2 else [])
    sample = args.sample or sample_from_filename(r1.name)[0]
    params = Params.from_dict(chosen_parameters(args))
    out = Path(args.out).resolve()
    # pinned by its content (SHA-256) and indexed before anything else, in the user's reference cache (never
    # beside the FASTA): the run id and the index key follow from the pin, and the children only load the index
    reference = (indexed_reference(str(Path(args.reference).resolve()), params.preset, index_store(str(out)),
                                   index_threads()) if args.reference else None)
    run_id = local_run_id(paths, params, reference)
    jobs = args.jobs or os.cpu_count() or 1
    if args.threads is not None:  # the shards' processes read it, as Batch children read their job's
        os.environ[THREADS_VAR] = str(args.threads)

    t0 = time.perf_counter()
    plan = make_plan(
        run_id,
        [Sample(sample, str(r1.resolve()), str(r2.resolve()) if r2 else None)],
        out_prefix=str(out),
        reference=reference,
        params=params,
        shards=args.shards,
    )
    t_plan = time.perf_counter() - t0
    console.print(f"run [bold]{run_id}[/]: sample {sample}, {plan.array_size} shard(s), {jobs} job(s)")
    run_shards(plan.plan_uri, plan.array_size, jobs)
    t_shards = time.perf_counter() - t0 - t_plan
    totals = merge_run(plan)
    t_total = time.perf_counter() - t0
    summary: dict[str, Any] = {
        "run_id": run_id,
        "state": RunState.SUCCEEDED.value,
        "software_version": __version__,
        "inputs": [str(p.resolve()) for p in paths],
        "reference": reference.uri if reference else None,
        "reference_index": reference.index_uri if reference else None,
        "parameters": params.to_dict(),
        "shards": plan.array_size,
        "results": plan.layout.lake.results_root,
        "timings_s": {"plan": round(t_plan, 3), "shards": round(t_shards, 3), "total": round(t_total, 3)},
        "totals": totals.to_dict(),
    }
    text = json.dumps(summary, indent=2)
    (out / "summary.json").write_text(text + "\n")
    Path(plan.layout.summary).write_text(text + "\n")
    console.print(f"results in {out / 'results'} ({t_total:.1f} s)")
    return 0
