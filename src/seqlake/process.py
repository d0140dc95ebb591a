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
from seqlake.base import storage
from seqlake.base.errors import EXIT_FAILURE, BadInputError, UsageError
from seqlake.base.model import RunState, Sample
from seqlake.base.params import Params, chosen_parameters

if TYPE_CHECKING:
    from seqlake.plan.reference import ReferencePin

console = Console(stderr=True)


def local_run_id(paths: list[Path], params: Params, reference: ReferencePin | None,
                 remote: tuple[str, ...] = ()) -> str:
    """Deterministic from the inputs' identity (path, size, mtime), the parameters (with the primer BED's
    content, ``primer_bed_pin``) and the reference's content (its pin: a replaced reference is another run).

    The AWS app derives it from (bucket, key, ETag); locally a file's size and mtime stand in for
    its ETag without reading it whole; ``remote``: the ``s3://`` inputs a local sheet names, as ``uri\0etag``.
    """
    h = hashlib.sha256()
    for r in remote:
        h.update(f"{r}\n".encode())
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
    here = jobs <= 1 or n_shards == 1
    # shards run here fork their aligners, which no other thread may see: no refresh thread then
    with Progress(*columns, console=console, transient=False, auto_refresh=not here) as progress:
        task = progress.add_task(label, total=n_shards)
        if here:
            for shard in range(n_shards):
                _run_shard(plan_uri, shard)
                progress.advance(task)
                progress.refresh()
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


def _input_file(path: str, what: str) -> Path:
    """A file the user named, checked before any work starts: bad input (exit 65) when it is not there."""
    p = Path(path)
    if not p.is_file():
        raise BadInputError(path, f"no such file ({what})" if not p.exists() else f"not a file ({what})")
    return p


def samples_of(args: argparse.Namespace) -> tuple[list[Sample], list[Path]]:
    """The run's samples and the local files they read (the samplesheet first, when there is one)."""
    from seqlake.base.naming import SAMPLESHEET_NAME, sample_from_filename
    from seqlake.plan.samplesheet import read_samplesheet

    if bool(args.samplesheet) == bool(args.r1):
        raise UsageError("give R1 [R2] or --samplesheet CSV" if not args.r1 else
                         "give either R1 [R2] or --samplesheet, not both")
    if args.samplesheet:
        if args.sample:
            raise UsageError("--sample names the sample of R1 [R2]; a samplesheet names its own")
        sheet = _input_file(args.samplesheet, "--samplesheet")
        samples = read_samplesheet(str(sheet.resolve()))
        uris = [uri for s in samples for uri in s.uris]
        files = [sheet] + [_input_file(uri, f"listed in {args.samplesheet}") for uri in uris if not storage.is_s3(uri)]
        return samples, files
    r1 = _input_file(args.r1, "R1")
    if r1.name.lower().endswith(".csv") or r1.name == SAMPLESHEET_NAME:
        raise BadInputError(args.r1, "this is a samplesheet, not a FASTQ file: give it as --samplesheet "
                            f"{args.r1}")
    r2 = _input_file(args.r2, "R2") if args.r2 else None
    sample = args.sample or sample_from_filename(r1.name)[0]
    files = [r1] + ([r2] if r2 else [])
    return [Sample(sample, str(r1.resolve()), str(r2.resolve()) if r2 else None)], files


def remote_inputs(samples: list[Sample], sheet: str | None) -> tuple[str, ...]:
    """The ``s3://`` inputs a local samplesheet names, each checked to exist (65 otherwise) and pinned by its
    ETag (``uri\0etag``: part of the run id, as a local file's size and mtime are)."""
    out = []
    for uri in (u for s in samples for u in s.uris if storage.is_s3(u)):
        try:
            out.append(f"{uri}\0{storage.head(uri).etag}")
        except FileNotFoundError:
            raise BadInputError(uri, f"no such object (listed in {sheet})") from None
    return tuple(out)


def _write_summary(out: Path, run_id: str, summary: dict[str, Any]) -> None:
    """The run's ``summary.json``, under ``runs/<run_id>/`` and (the latest run's) at the top of ``out``."""
    from seqlake.base.layout import RunLayout

    text = json.dumps(summary, indent=2) + "\n"
    run_summary = Path(RunLayout(str(out), run_id).summary)
    run_summary.parent.mkdir(parents=True, exist_ok=True)
    run_summary.write_text(text)
    (out / "summary.json").write_text(text)


def run_params(args: argparse.Namespace, reference: str | None) -> Params:
    """The run's parameters from the command line (``--params FILE`` over the options); a primer BED read and
    checked now (65 with file:line) and
    pinned by its content (``primer_bed_pin``: part of the run id)."""
    from seqlake.base.params import read_local_params_file
    from seqlake.plan.primers import with_primer_pin

    chosen = chosen_parameters(args)
    if args.reads_per_shard is not None:
        chosen["reads_per_shard"] = args.reads_per_shard
    if getattr(args, "params", None):  # a params.json over the options, as beside an upload on AWS
        chosen.update(read_local_params_file(args.params))
    if chosen.get("primer_bed"):
        chosen["primer_bed"] = str(Path(chosen["primer_bed"]).resolve())
    return Params.from_dict(with_primer_pin(chosen, reference))


def process_command(args: argparse.Namespace) -> int:
    from seqlake.base.cpus import THREADS_VAR, available_cpus
    from seqlake.commit.merge import merge_run
    from seqlake.plan.planner import make_plan
    from seqlake.plan.reference import check_reference, index_store
    from seqlake.plan.refindex import indexed_reference
    from seqlake.reads.gzindex import index_threads
    from seqlake.report import try_render_run

    samples, files = samples_of(args)
    remote = remote_inputs(samples, args.samplesheet)
    out = Path(args.out).resolve()
    reference_path = str(_input_file(args.reference, "--reference").resolve()) if args.reference else None
    if reference_path is not None:
        check_reference(reference_path)
    params = run_params(args, reference_path)
    # pinned by its content (SHA-256) and indexed before anything else, in the user's reference cache (never
    # beside the FASTA): the run id and the index key follow from the pin, and the children only load the index
    reference = (indexed_reference(reference_path, params.preset, index_store(str(out)), index_threads())
                 if reference_path is not None else None)
    run_id = local_run_id(files, params, reference, remote)
    jobs = args.jobs or available_cpus()
    if args.threads is not None:  # the shards' processes read it, as Batch children read their job's
        os.environ[THREADS_VAR] = str(args.threads)

    names = sorted({s.name for s in samples})
    summary: dict[str, Any] = {
        "run_id": run_id,
        "state": RunState.FAILED.value,
        "software_version": __version__,
        "inputs": [str(p.resolve()) for p in files],
        "samples": names,
        "reference": reference.uri if reference else None,
        "reference_index": reference.index_uri if reference else None,
        "parameters": params.to_dict(),
    }
    t0 = time.perf_counter()
    try:
        plan = make_plan(run_id, samples, out_prefix=str(out), reference=reference, params=params,
                         shards=args.shards)
        t_plan = time.perf_counter() - t0
        console.print(f"run [bold]{run_id}[/]: {len(names)} sample(s) ({', '.join(names[:5])}"
                      f"{', ...' if len(names) > 5 else ''}), {plan.array_size} shard(s), {jobs} job(s)")
        run_shards(plan.plan_uri, plan.array_size, jobs)
        t_shards = time.perf_counter() - t0 - t_plan
        totals = merge_run(plan)
    except BadInputError as err:  # the failed run is recorded with its reason, as the stack records it
        _write_summary(out, run_id, {**summary, "bad_input": True, "reason": str(err)})
        raise
    t_total = time.perf_counter() - t0
    summary = {
        **summary,
        "state": RunState.SUCCEEDED.value,
        "shards": plan.array_size,
        "results": plan.layout.lake.results_root,
        "timings_s": {"plan": round(t_plan, 3), "shards": round(t_shards, 3), "total": round(t_total, 3)},
        "totals": totals.to_dict(),
    }
    report = try_render_run(str(out), run_id, summary)
    if report.error is not None:
        # a run never says SUCCEEDED without its report: recorded FAILED with the reason, exit 1
        reason = f"the run's report could not be rendered: {report.error}"
        failed = {**summary, "state": RunState.FAILED.value, "failed_step": "Report", "reason": reason}
        _write_summary(out, run_id, failed)
        try_render_run(str(out), run_id, failed)  # the failed run's short page and its line in the runs page
        console.print(f"[red]run {run_id} failed[/]: {reason}", soft_wrap=True, highlight=False)
        return EXIT_FAILURE
    _write_summary(out, run_id, {**summary, "report_uri": report.uri})
    console.print(f"tables in {plan.layout.lake.results_root} ({t_total:.1f} s)", soft_wrap=True)
    console.print(f"report: {report.uri}", soft_wrap=True)
    tables = f"{plan.layout.lake.results_root}sample_summary/*/*.parquet"
    console.print(f"query them with any Parquet reader, e.g. DuckDB: SELECT * FROM read_parquet('{tables}', "  # noqa: S608 - shown, not run
                  "hive_partitioning = true)", soft_wrap=True, highlight=False)
    return 0
