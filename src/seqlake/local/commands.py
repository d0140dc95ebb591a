"""The ``seqlake local ...`` and ``seqlake demo`` commands (``seqlake.cli`` calls these).

``local run`` uploads the way a user uploads to the real bucket, and the app does the rest:

- R1 [R2]: ``incoming/<sample>/<sample>_R1<ext>`` (and ``_R2``): the folder starts the run once quiet.
- ``--samplesheet``: the sheet, as ``incoming/<sheet>-<hash>/samplesheet.csv`` with its paths made
  relative, and its FASTQs beside it: the folder starts exactly one run once quiet.
- ``--reference``: the FASTA goes to ``references/<name>/`` and the stack parameter ``ReferenceUri``
  is overridden for this process (what ``sam deploy --parameter-overrides`` does on AWS).

A second ``local run`` of the same files (same keys and MD5 ETags) and reference is recognised from the
run history and not run again: on AWS its deterministic run id would make it a no-op too.
``local query`` needs no moto: it reads the saved catalog and Parquet in the state folder.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from localcloud import athena, containers, memory
from localcloud.state import StateDir, md5_file
from seqlake.base.cpus import available_cpus
from seqlake.base.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, BadInputError, SeqlakeError, UsageError
from seqlake.base.model import RunState
from seqlake.base.naming import fastq_suffix, key_safe_sample_name
from seqlake.base.params import Params, chosen_parameters
from seqlake.local.adapter import app_errors, local_cloud
from seqlake.local.appdir import queries_dir

_GZIP_MAGIC = b"\x1f\x8b"
_EXAMPLE = 'seqlake local query "SELECT * FROM qc_summary"'
#: rows of each named query the demo prints
DEMO_ROWS = 12


def _state(args: argparse.Namespace) -> StateDir:
    return StateDir(getattr(args, "home", None))


def _ext(path: Path) -> str:
    suffix = fastq_suffix(path.name)
    if suffix is not None:
        return suffix.lower()
    with path.open("rb") as f:
        return ".fastq.gz" if f.read(2) == _GZIP_MAGIC else ".fastq"


def sample_name(path: Path) -> str:
    """``reads_R1.fastq.gz`` -> ``reads``: the sample the app's start function will read from the name."""
    return key_safe_sample_name(path.name)


def _check_file(path: Path, what: str = "") -> Path:
    """A file the user named: bad input (exit 65) when it is not there, before anything starts."""
    if not path.is_file():
        raise BadInputError(str(path), "no such file" + (f" ({what})" if what else ""))
    return path


def _reference_key(reference: Path) -> str:
    return f"references/{sample_name(reference) or 'reference'}/{reference.name}"


#: (local file, key in the bucket), in upload order
Uploads = list[tuple[Path, str]]


def plan_reads(r1: Path, r2: Path | None, sample: str | None) -> Uploads:
    name = sample or sample_name(r1)
    folder = f"incoming/{name}/"
    if r2 is None:
        return [(r1, f"{folder}{name}{_ext(r1)}")]
    return [(r1, f"{folder}{name}_R1{_ext(r1)}"), (r2, f"{folder}{name}_R2{_ext(r2)}")]


def plan_samplesheet(sheet: Path, staging: Path) -> Uploads:
    """The sheet (its local paths made relative, written under ``staging``) first, then its FASTQs."""
    rows = list(csv.DictReader(io.StringIO(sheet.read_text(encoding="utf-8-sig"))))
    if not rows or not {"sample", "fastq_1"} <= set(rows[0]):
        raise SeqlakeError(f"{sheet}:1: a samplesheet needs the columns sample,fastq_1[,fastq_2]")
    files: dict[str, Path] = {}
    out_rows = []
    for row in rows:
        new = dict(row)
        for col in ("fastq_1", "fastq_2"):
            value = (row.get(col) or "").strip()
            if not value or value.startswith("s3://"):
                continue
            local = _check_file((sheet.parent / value).resolve(), f"{col} of sample {row['sample']}")
            # one flat folder: a FASTQ in a subfolder would not be beside the sheet
            name = local.name if files.get(local.name, local) == local else f"{row['sample']}_{local.name}"
            files[name] = local
            new[col] = name
        out_rows.append(new)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(out_rows)
    body = buf.getvalue().encode()
    label = re.sub(r"[^0-9A-Za-z_.-]+", "-", sheet.stem).strip("-.") or "samplesheet"
    folder = f"incoming/{label}-{hashlib.sha256(body).hexdigest()[:8]}/"
    sheet_path = staging / folder / "samplesheet.csv"
    sheet_path.parent.mkdir(parents=True, exist_ok=True)
    sheet_path.write_bytes(body)
    return [
        (sheet_path, f"{folder}samplesheet.csv"),
        *((path, folder + name) for name, path in files.items()),
    ]


#: the parameters ``seqlake local run`` sets (a run with other values of these is another run)
_CHOSEN_PARAMETERS = ("trim", "adapters", "quality_cutoff", "min_length", "preset", "allele_counts",
                      "primer_bed_pin")


def _same(ran: Any, wanted: Any) -> bool:
    """A recorded parameter equals the wanted one (a tuple recorded as a JSON list too)."""
    return bool(ran == wanted or (isinstance(ran, list | tuple) and list(ran) == list(wanted or [])))


def previous_run(state: StateDir, uploads: Uploads, reference_key: str | None,
                 parameters: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A succeeded run of exactly these objects (key and MD5 ETag), reference and parameters, if any."""
    wanted = {(key, md5_file(path)) for path, key in uploads}
    wanted_params = Params.from_dict(parameters or {}).to_dict()
    # the options' parameters, and any other a --params file set (the BED by its pin, not its path)
    compared = set(_CHOSEN_PARAMETERS) | (set(parameters or {}) - {"primer_bed"})
    runs: list[dict[str, Any]] = state.runs()
    for run in reversed(runs):
        inputs = {(i.get("key"), i.get("etag")) for i in run.get("inputs") or []}
        ref = run.get("reference") or ""
        same_ref = str(ref).endswith("/" + reference_key) if reference_key else not ref
        ran_with = (run.get("status_json") or {}).get("parameters") or {}
        same_params = all(_same(ran_with.get(k, wanted_params[k]), wanted_params[k]) for k in compared)
        if run.get("status") == "SUCCEEDED" and inputs == wanted and same_ref and same_params:
            found: dict[str, Any] = run
            return found
    return None


def _wide(console: Console) -> Console:
    """Tables printed into a pipe or file keep their full width (rich would wrap them at 80 columns)."""
    return console if console.is_terminal else Console(file=console.file, width=200)


_FAILED, _REJECTED = RunState.FAILED.value, RunState.REJECTED.value
#: run states shown in red (TIMED_OUT is an execution status, not a run state)
_RED = (_FAILED, "TIMED_OUT", _REJECTED)
_REJECTED_SQL = f"SELECT run_id, started_at, inputs, reason FROM runs WHERE state = '{_REJECTED}'"  # noqa: S608 - a constant


def rejected_runs(state: StateDir) -> list[dict[str, Any]]:
    """Inputs the start function rejected (a bad samplesheet: no execution, so not in the run history),
    from the ``runs`` table's ``REJECTED`` rows, as run history entries."""
    if not state.exists():
        return []
    try:
        result = state.query(_REJECTED_SQL)
    except ValueError:  # no runs table yet
        return []
    return [
        {
            "run_id": run_id,
            "status": _REJECTED,
            "started": started.strftime("%Y-%m-%dT%H:%M:%SZ") if started else "",
            "inputs": json.loads(inputs or "[]"),
            "error": "BadInputError",
            "cause": reason,
        }
        for run_id, started, inputs, reason in result.rows
    ]


def all_runs(state: StateDir) -> list[dict[str, Any]]:
    """The run history and the rejected inputs, oldest first."""
    return sorted([*state.runs(), *rejected_runs(state)], key=lambda r: str(r.get("started", "")))


_S3_URI = re.compile(r"(s3://[^\s:;,|()]+)(:\d+)?")


def name_local_files(text: str, sources: dict[str, str]) -> str:
    """``text`` (a failure's reason) with each ``s3://`` URI that was uploaded from a local file
    followed by that file: the user finds the file they gave, the line number is the same."""
    def named(m: re.Match[str]) -> str:
        uri, line = m.group(1), m.group(2) or ""
        return f"{uri}{line} ({sources[uri]}{line})" if uri in sources else m.group(0)

    return _S3_URI.sub(named, text)


def _error_cell(run: dict[str, Any], sources: dict[str, str]) -> str:
    if not run.get("error"):
        return ""
    cause = (run.get("cause") or "").splitlines()[0][:300] if run.get("cause") else ""
    return name_local_files(f"{run['error']}: {cause}", sources)


def by_run(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per run, in the order the runs first started: its latest execution's record, with
    ``attempts`` (how many executions it had: a re-run is another attempt of the same run)."""
    latest: dict[str, dict[str, Any]] = {}
    attempts: dict[str, int] = {}
    for r in records:
        run_id = str(r["run_id"])
        attempts[run_id] = attempts.get(run_id, 0) + 1
        latest[run_id] = r if run_id not in latest else {**r, "started": latest[run_id].get("started", "")}
    return [{**r, "attempts": attempts[run_id]} for run_id, r in latest.items()]


#: the columns of `local runs`; reads are counted over every mate (a pair is two reads)
RUNS_COLUMNS = ("run", "state", "attempts", "started (UTC)", "seconds", "shards", "retried", "reads (all mates)",
                "error")


def print_runs(console: Console, runs: list[dict[str, Any]], sources: dict[str, str] | None = None) -> None:
    table = Table(title="runs", title_justify="left")
    numeric = ("attempts", "seconds", "shards", "retried", "reads (all mates)")
    for col in RUNS_COLUMNS:
        table.add_column(col, justify="right" if col in numeric else "left")
    for r in by_run(runs):
        doc = r.get("status_json") or {}
        reads = doc.get("reads", (doc.get("counts") or {}).get("reads", ""))
        colour = "green" if r["status"] == "SUCCEEDED" else "red" if r["status"] in _RED else ""
        table.add_row(
            r["run_id"],
            f"[{colour}]{r['status']}[/]" if colour else r["status"],
            str(r["attempts"]),
            str(r.get("started", "")).replace("T", " ").rstrip("Z"),
            f"{r.get('seconds', '')}",
            str(r.get("shards", "")),
            str(r.get("retried", "")),
            "" if reads is None or reads == "" else f"{reads:,}" if isinstance(reads, int) else str(reads),
            _error_cell(r, sources or {}),
        )
    _wide(console).print(table)


def _print_reports(console: Console, state: StateDir, finished: list[Any]) -> None:
    """Each finished run's report (a file that opens offline in any browser)."""
    from seqlake.local.report_command import local_report_path

    for e in finished:
        run_id = str(e.input.get("run_id") or e.name)
        page = local_report_path(state, run_id)
        if page is not None:
            console.print(f"report of run [bold]{run_id}[/]: {page}", soft_wrap=True)


#: the template parameter each execution option sets for the local deployment, as ``sam deploy
#: --parameter-overrides`` sets it on AWS (option's dest -> parameter): ``--threads`` is WorkerVcpus, which the
#: job definition gives each child as its vCPUs and ``SEQLAKE_THREADS``; the memory options are the Batch
#: jobs' ``MEMORY``, which the local Batch holds each attempt to (``memory.MemoryLimits.cap``)
CLOUD_PARAMETERS = {
    "threads": "WorkerVcpus",
    "worker_memory": "WorkerMemoryMiB",
    "index_memory": "IndexJobMemoryMiB",
    "reducer_memory": "ReducerMemoryMiB",
}


def cloud_parameters(args: argparse.Namespace) -> dict[str, str]:
    """Template parameters the execution options given set for the deployment (:data:`CLOUD_PARAMETERS`)."""
    return {parameter: str(getattr(args, dest)) for dest, parameter in CLOUD_PARAMETERS.items()
            if getattr(args, dest, None) is not None}


def jobs_of(args: argparse.Namespace) -> int:
    """``--jobs``, else the number of CPUs (what ``process`` does too)."""
    return int(args.jobs or available_cpus())


#: what to do after a bad-input failure, in the local cloud's words (the reason says it in S3's)
NEW_UPLOAD_HINT = "fix the file, then `seqlake local run` it again: that is the new upload, hence a new run"


def outcome(console: Console, state: StateDir, finished: list[Any]) -> int:
    """The exit code of commands that waited for runs: 0 when all succeeded, 65 when one failed on bad
    input (with what to do about it), 1 otherwise."""
    from seqlake.aws.status import failed_on_bad_input

    failed = [e for e in finished if e.status != "SUCCEEDED"]
    if not failed:
        return EXIT_OK
    bad = [e for e in failed if failed_on_bad_input(_status_doc(state, str(e.input.get("run_id") or e.name)))]
    if bad:
        console.print(f"[yellow]bad input[/]: {NEW_UPLOAD_HINT}")
        return EXIT_BAD_INPUT
    return EXIT_FAILURE


def _status_doc(state: StateDir, run_id: str) -> dict[str, Any]:
    for record in reversed(state.runs()):
        if record.get("run_id") == run_id:
            doc: dict[str, Any] = record.get("status_json") or {}
            return doc
    return {}


def pinned_parameters(args: argparse.Namespace, reference: Path | None) -> dict[str, Any]:
    """The run parameters the command line sets; a primer BED read and checked before any upload (65 with
    file:line) and pinned by its content, so "already processed" and the run id both see a BED added, removed
    or changed."""
    from seqlake.base.params import read_local_params_file
    from seqlake.plan.primers import with_primer_pin

    parameters = chosen_parameters(args)
    if getattr(args, "params", None):  # checked before any upload; deployed as the stack's RunParameters
        parameters.update(read_local_params_file(args.params))
    if parameters.get("primer_bed"):
        parameters["primer_bed"] = str(_check_file(Path(parameters["primer_bed"]), "--primer-bed").resolve())
    return with_primer_pin(parameters, str(reference) if reference else None)


@app_errors
def run_command(args: argparse.Namespace) -> int:
    # imported here, not at the top: `local query` and `local runs` must not pay for importing moto (iam does)
    from localcloud import iam
    from seqlake.plan.samplesheet import read_samplesheet

    containers.require(args.containers)
    memory.apply_flag(args.no_memory_limits)
    iam.require(getattr(args, "no_iam", False))
    if not args.samplesheet and not args.r1:
        raise UsageError("give R1 [R2] or --samplesheet CSV")
    if args.samplesheet and args.r1:
        raise UsageError("give either R1 [R2] or --samplesheet, not both")
    state = _state(args)
    console = Console(stderr=True)
    if args.samplesheet:
        sheet = _check_file(Path(args.samplesheet), "--samplesheet")
        read_samplesheet(str(sheet.resolve()))  # its errors name the user's file and line, before any upload
        uploads = plan_samplesheet(sheet, state.root / "uploads")
    else:
        r2 = _check_file(Path(args.r2), "R2") if args.r2 else None
        uploads = plan_reads(_check_file(Path(args.r1), "R1"), r2, args.sample)
    reference = _check_file(Path(args.reference), "--reference") if args.reference else None
    if reference is not None:
        from seqlake.plan.reference import check_reference

        check_reference(str(reference))
    parameters = pinned_parameters(args, reference)
    done = previous_run(state, uploads, _reference_key(reference) if reference else None, parameters)
    if done is not None:
        # the same objects would get the same run id: on AWS, StartExecution would say ExecutionAlreadyExists
        console.print(
            f"already processed as run [bold]{done['run_id']}[/] ({done.get('started')}); "
            "see `seqlake local runs` and `seqlake local query`"
        )
        return EXIT_OK
    with local_cloud(state=state, jobs=jobs_of(args), console=console, parameters=cloud_parameters(args)) as cloud:
        if reference is not None:
            cloud.override_parameter("ReferenceUri", cloud.upload(reference, _reference_key(reference), as_admin=True))
        if args.reads_per_shard is not None:
            cloud.override_parameter("ReadsPerShard", str(args.reads_per_shard))
        if parameters:
            cloud.override_parameter("RunParameters", json.dumps(parameters, sort_keys=True))
        cloud.prewarm()
        for path, key in uploads:
            cloud.upload(path, key)
        console.print(f"uploaded {len(uploads)} object(s) to s3://{cloud.bucket}/{uploads[0][1].rsplit('/', 1)[0]}/")
        finished = cloud.wait()
    if not finished:
        keys = {key for _, key in uploads}
        rejected = [r for r in rejected_runs(state) if keys & {i.get("key") for i in r["inputs"]}]
        if rejected:
            print_runs(console, rejected, state.sources())
            return EXIT_BAD_INPUT
        console.print("[yellow]no run started (see the state folder's logs/lambda/)[/]")
        return EXIT_FAILURE
    print_runs(console, [r for r in state.runs() if r["run_id"] in {e.input.get("run_id") for e in finished}],
               state.sources())
    _print_reports(console, state, finished)
    return outcome(console, state, finished)


def named_query_sql(name: str) -> str:
    path = queries_dir() / f"{name}.sql"
    if not path.is_file():
        known = sorted(p.stem for p in queries_dir().glob("*.sql"))
        raise BadInputError(f"--named {name}", f"no such named query (known: {', '.join(known) or 'none'})")
    return path.read_text()


def _json_value(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    return athena.text(v)


def print_result(result: athena.Result, fmt: str, title: str | None = None, max_rows: int | None = None) -> None:
    if fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows([["" if v is None else athena.text(v) for v in row] for row in result.rows])
        return
    if fmt == "json":
        rows = [dict(zip(result.columns, (_json_value(v) for v in row), strict=True)) for row in result.rows]
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
        return
    table = Table(title=title, title_justify="left")
    for col in result.columns:
        table.add_column(col, overflow="fold")
    shown = result.rows if max_rows is None else result.rows[:max_rows]
    for row in shown:
        table.add_row(*["[dim]NULL[/]" if v is None else _cell(v) for v in row])
    if len(shown) < len(result.rows):
        table.caption = f"{len(result.rows) - len(shown)} more row(s)"
    _wide(Console()).print(table)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return athena.text(v)


@app_errors
def query_command(args: argparse.Namespace) -> int:
    if bool(args.sql) == bool(args.named):
        raise UsageError('give a query ("SQL") or --named NAME')
    sql = named_query_sql(args.named) if args.named else args.sql
    state = _state(args)
    state.require()
    try:
        result = state.query(sql, as_of_run=args.as_of_run)
    except ValueError as err:  # the SQL does not parse, or names a table or column that is not there
        raise BadInputError("SQL", " ".join(str(err).split())) from None
    print_result(result, args.format)
    return EXIT_OK


@app_errors
def runs_command(args: argparse.Namespace) -> int:
    state = _state(args)
    runs = all_runs(state)
    if not runs:
        Console(stderr=True).print("no runs yet")
        return EXIT_OK
    print_runs(Console(), runs, state.sources())
    return EXIT_OK


def _named_queries(cloud: Any) -> list[tuple[str, str]]:
    """(name, SQL) of the named queries the template deployed, else ``queries/*.sql``."""
    a = cloud.user_client("athena")
    workgroup = cloud.outputs.get("AthenaWorkGroupName")
    ids = a.list_named_queries(**({"WorkGroup": workgroup} if workgroup else {})).get("NamedQueryIds", [])
    out = [(q["Name"], q["QueryString"]) for q in (a.get_named_query(NamedQueryId=i)["NamedQuery"] for i in ids)]
    if not out:
        out = [(p.stem, p.read_text()) for p in sorted(queries_dir().glob("*.sql"))]
    return sorted(out)


def athena_query(cloud: Any, sql: str, workgroup: str | None = None) -> athena.Result:
    """One query through the local Athena API (StartQueryExecution -> GetQueryResults), as the lab member,
    in the stack's workgroup unless ``workgroup`` names another (``primary`` has no results location)."""
    a = cloud.user_client("athena")
    workgroup = workgroup or cloud.outputs.get("AthenaWorkGroupName")
    kw: dict[str, Any] = {"QueryString": sql, "QueryExecutionContext": {"Database": cloud.database}}
    if workgroup:
        kw["WorkGroup"] = workgroup
    qid = a.start_query_execution(**kw)["QueryExecutionId"]
    while a.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]["State"] in (
        "QUEUED",
        "RUNNING",
    ):
        time.sleep(0.05)
    rows = a.get_paginator("get_query_results").paginate(QueryExecutionId=qid).build_full_result()["ResultSet"]["Rows"]
    columns = [c.get("VarCharValue", "") for c in rows[0]["Data"]] if rows else []
    return athena.Result(columns, [tuple(c.get("VarCharValue") for c in r["Data"]) for r in rows[1:]])


@app_errors
def demo_command(args: argparse.Namespace) -> int:
    from localcloud import iam

    containers.require(args.containers)
    memory.apply_flag(args.no_memory_limits)
    iam.require(getattr(args, "no_iam", False))
    try:
        from seqlake.demo_data import paths
    except ImportError as err:
        raise SeqlakeError(f"the bundled demo data is missing: {err}") from None
    r1, r2, reference = paths()
    console = Console(stderr=True)
    t0 = time.monotonic()
    console.rule("[bold]seqlake demo: the whole app on the local cloud")
    with local_cloud(state=_state(args), jobs=jobs_of(args), console=console) as cloud:
        cloud.override_parameter("ReferenceUri", cloud.upload(reference, _reference_key(reference), as_admin=True))
        # a few shards, so the demo shows the array job fanning out (2,000,000 reads per shard otherwise)
        cloud.override_parameter("ReadsPerShard", str(args.reads_per_shard))
        cloud.prewarm()
        uploads = plan_reads(r1, r2, "demo")
        uploaded = [cloud.upload(path, key) for path, key in uploads]
        console.print(
            f"uploaded {', '.join(u.rsplit('/', 1)[-1] for u in uploaded)} -> s3://{cloud.bucket}/incoming/demo/"
        )
        finished = cloud.wait()
        if not finished:
            console.print("[red]no run started[/] (see the state folder's logs/lambda/)")
            return EXIT_FAILURE
        workgroup = cloud.outputs.get("AthenaWorkGroupName")
        failed_queries: list[str] = []
        for name, sql in _named_queries(cloud):
            try:
                result = athena_query(cloud, sql, workgroup)
            except Exception as err:
                console.print(f"[red]query {name} failed:[/] {err}")
                failed_queries.append(name)
                continue
            print_result(result, "table", title=f"{name}", max_rows=DEMO_ROWS)
    _print_reports(console, _state(args), finished)
    console.print(
        f"[bold]done in {time.monotonic() - t0:.1f} s.[/] Results stay in {_state(args).root}/: try "
        f"[cyan]{_EXAMPLE}[/] or [cyan]seqlake local runs[/]"
    )
    if failed_queries:  # the demo promised every named query's result: exit 1, naming the ones that failed
        console.print(f"[red]{len(failed_queries)} named quer{'y' if len(failed_queries) == 1 else 'ies'} failed[/]: "
                      f"{', '.join(failed_queries)}")
        return EXIT_FAILURE
    return EXIT_OK if all(e.status == "SUCCEEDED" for e in finished) else EXIT_FAILURE
