"""The ``seqlake`` command line.

Command and option names are an interface (users' scripts and the Batch job definition call them):
new ones may be added, existing ones are never renamed or removed.

Thin: parse arguments, call one core function, turn errors into one line on stderr and an exit code.
The options that several commands take are defined once here (:data:`EXECUTION_OPTIONS`, the run
parameters, the inputs), so ``process``, ``local run`` and ``local rerun`` spell, default and explain them
alike. Bad input never prints a traceback; it exits ``EXIT_BAD_INPUT`` (65), which the Batch job
definition does not retry.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from seqlake import __version__
from seqlake.base.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    BadInputError,
    SeqlakeError,
    UsageError,
)
from seqlake.base.layout import REPORTS, RESULTS, RUNS
from seqlake.base.params import PRESETS, VALUE_FLAGS, Params

Handler = Callable[[argparse.Namespace], int]


def _cmd_process(args: argparse.Namespace) -> int:
    from seqlake.process import process_command

    return process_command(args)


def _cmd_worker(args: argparse.Namespace) -> int:
    from seqlake.child.worker_main import worker_command

    return worker_command(args)


def _cmd_reduce(args: argparse.Namespace) -> int:
    from seqlake.reduce.main import reduce_command

    return reduce_command(args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from seqlake.local.commands import demo_command

    return int(demo_command(args) or 0)


def _cmd_local_run(args: argparse.Namespace) -> int:
    from seqlake.local.commands import run_command

    return int(run_command(args) or 0)


def _cmd_local_query(args: argparse.Namespace) -> int:
    from seqlake.local.commands import query_command

    return int(query_command(args) or 0)


def _cmd_local_runs(args: argparse.Namespace) -> int:
    from seqlake.local.commands import runs_command

    return int(runs_command(args) or 0)


def _cmd_local_report(args: argparse.Namespace) -> int:
    from seqlake.local.report_command import report_command

    return report_command(args)


def _cmd_local_status(args: argparse.Namespace) -> int:
    from seqlake.local.status_command import status_command

    return status_command(args)


def _cmd_local_delete_sample(args: argparse.Namespace) -> int:
    from seqlake.local.maintenance import delete_sample_command

    return delete_sample_command(args)


def _cmd_local_compact(args: argparse.Namespace) -> int:
    from seqlake.local.maintenance import compact_command

    return compact_command(args)


def _cmd_local_rerun(args: argparse.Namespace) -> int:
    from seqlake.local.rerun import rerun_command

    return rerun_command(args)


@dataclass(frozen=True)
class Option:
    """One option as every command that takes it spells, defaults and explains it."""

    flag: str
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    action: str | None = None
    default: Any = None
    choices: tuple[str, ...] | None = None

    def add_to(self, p: argparse.ArgumentParser) -> None:
        kw: dict[str, Any] = {"help": self.help, "default": self.default}
        if self.action:
            kw["action"] = self.action
        else:
            kw.update(metavar=self.metavar, type=self.type)
        if self.choices:
            kw["choices"] = self.choices
        p.add_argument(self.flag, **kw)


def _positive(text: str) -> int:
    """A whole number >= 1 (argparse turns the ValueError into a usage error naming the option)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


_positive.__name__ = "whole number >= 1"  # what argparse calls the type in its message

_DEFAULTS = Params()

#: the execution options: how a run is carried out here, never what it computes (the tables are the same
#: whatever their values); each command takes those that apply to it (:data:`COMMAND_OPTIONS`)
EXECUTION_OPTIONS: dict[str, Option] = {o.flag: o for o in (
    Option("--jobs", "shards processed at once, each in its own process (default: the number of CPUs)",
           "N", _positive),
    Option("--threads", "alignment processes (vCPUs) of each shard, sharing one reference index in memory "
           "(default: $SEQLAKE_THREADS, else 1; WorkerVcpus on AWS); the results are the same whatever the "
           "number", "N", _positive),
    Option("--reads-per-shard", f"reads per shard when the run is planned (default {_DEFAULTS.reads_per_shard:,}; "
           "ReadsPerShard on AWS); at most 10,000 shards", "N", _positive),
    Option("--worker-memory", "memory of each shard's Batch job in MiB, which the local cloud holds it to as ECS "
           "does (WorkerMemoryMiB on AWS; default: the template's): the reference index loaded, its alignment "
           "processes and its counts (docs/DEPLOY.md, \"Memory for a human genome\")", "MIB", _positive),
    Option("--index-memory", "memory of the index job that builds the reference's minimap2 index once, in MiB "
           "(IndexJobMemoryMiB on AWS; default: the template's)", "MIB", _positive),
    Option("--reducer-memory", "memory of each region's reducer job in MiB (ReducerMemoryMiB on AWS; default: "
           "the template's)", "MIB", _positive),
    Option("--home", "the local cloud's state folder: its bucket, catalog, logs and run history "
           "(default: $SEQLAKE_HOME, else ./.seqlake)", "DIR"),
    Option("--containers", "run each Batch attempt as a podman container of the worker image (`make image`); "
           "also set by SEQLAKE_CONTAINERS=1", action="store_true", default=False),
    Option("--no-memory-limits", "do not hold each Lambda invocation to its function's MemorySize and each Batch "
           "attempt to its job's memory, as AWS does (the default); also set by SEQLAKE_LOCAL_MEMORY_LIMITS=0",
           action="store_true", default=False),
    Option("--no-iam", "do not enforce the template's IAM roles in the local cloud (every process signs with the "
           "same keys, unchecked); also set by SEQLAKE_LOCAL_IAM=0", action="store_true", default=False),
)}

#: the run parameters (what a run computes: part of its identity, recorded in the runs table)
RUN_PARAMETERS: dict[str, Option] = {o.flag: o for o in (
    Option("--no-trim", "skip quality and adapter trimming (the trimmed stage then equals the raw one)",
           action="store_true", default=False),
    Option("--adapter", "a 3' adapter to remove (repeat for several; default: the Illumina TruSeq and Nextera "
           "adapter prefixes, as cutadapt -a)", "SEQ", action="append"),
    Option("--quality-cutoff", f"trim 3' ends below this Phred quality (cutadapt -q; default "
           f"{_DEFAULTS.quality_cutoff})", "Q", int),
    Option("--min-length", f"drop a read shorter than this after trimming, and its mate with it (cutadapt -m; "
           f"default {_DEFAULTS.min_length})", "N", int),
    Option("--primer-bed", "amplicon mode: a primer scheme BED (e.g. ARTIC V3; path or s3:// URI) whose primers "
           "are soft-clipped before variants and consensus are called (samtools ampliconclip)", "BED"),
    Option("--no-allele-counts", "count no alleles: no variants, consensus or amplicon depth (counting is most "
           "of a big genome's child CPU and spills to its disk; see the README's limits)",
           action="store_true", default=False),
    Option("--cram", "each sample's alignments as CRAM 3.0 (.cram + .crai) instead of the BAM, with the run's "
           "reference kept beside them (reference.fasta: samtools view -T reads them with it)",
           action="store_true", default=False),
    Option("--preset", "minimap2 preset to align with: sr (Illumina, the default), map-ont (Nanopore), map-hifi "
           "(PacBio HiFi), map-pb (PacBio CLR); chosen, never guessed from the reads", None, choices=PRESETS),
    # the ivar thresholds and the GFF, from their one home (base/params.py)
    *(Option(flag, f"{what} (default {getattr(_DEFAULTS, name)})", {int: "N", float: "F"}.get(kind, "FILE"), kind)
      for flag, (name, kind, what) in VALUE_FLAGS.items()),
    Option("--params", "a params.json setting this run's parameters over the options above, as a params.json "
           "beside an upload does on AWS (JSON Schema: schemas/params.schema.json; relative paths in it are "
           "relative to the file)", "FILE"),
)}

#: the Batch jobs' memory, template parameters the local cloud deploys with the values given
_JOB_MEMORY = ("--worker-memory", "--index-memory", "--reducer-memory")

#: which execution options each command that runs shards takes (the others make no sense there)
COMMAND_OPTIONS: dict[str, tuple[str, ...]] = {
    "process": ("--jobs", "--threads", "--reads-per-shard"),
    "local run": ("--jobs", "--threads", "--reads-per-shard", *_JOB_MEMORY, "--home", "--containers",
                  "--no-memory-limits", "--no-iam"),
    "local rerun": ("--jobs", "--threads", *_JOB_MEMORY, "--home", "--containers", "--no-memory-limits",
                    "--no-iam"),
}


def _add_execution_options(p: argparse.ArgumentParser, command: str) -> None:
    for flag in COMMAND_OPTIONS[command]:
        EXECUTION_OPTIONS[flag].add_to(p)


def _add_home(p: argparse.ArgumentParser) -> None:
    EXECUTION_OPTIONS["--home"].add_to(p)


def _add_run_parameters(p: argparse.ArgumentParser) -> None:
    """The run parameters ``process`` and ``local run`` take, with the same names."""
    for option in RUN_PARAMETERS.values():
        option.add_to(p)


def _add_run_id(p: argparse.ArgumentParser, *, whose: str = "the run's") -> None:
    """RUN_ID of `local report`, `local status` and `local rerun`: a whole id or its start, found alike."""
    p.add_argument("run_id", metavar="RUN_ID", help=f"{whose} id, or the start of it (see `seqlake local runs`)")


_FASTQ = "FASTQ file: plain, gzip, BGZF, bz2 or xz (told apart by its first bytes, not its name)"
_R2 = "mate 2 of a paired-end sample (omit for single-end reads)"
_REFERENCE = "reference FASTA (or a minimap2 .mmi index) to align the trimmed reads to; without it, no alignment"
_SAMPLE = "sample name (default: from the R1 file name, e.g. x for x_R1.fastq.gz)"
_SAMPLESHEET = ("a CSV with the columns sample,fastq_1[,fastq_2] (paths relative to the sheet), instead of "
                "R1 [R2]; several rows of one sample are its lanes")


def _add_inputs(p: argparse.ArgumentParser) -> None:
    """The reads of a run: R1 [R2] of one sample, or a samplesheet; a reference; a sample name."""
    p.add_argument("r1", metavar="R1", nargs="?", default=None, help=_FASTQ)
    p.add_argument("r2", metavar="R2", nargs="?", default=None, help=_R2)
    p.add_argument("--samplesheet", default=None, metavar="CSV", help=_SAMPLESHEET)
    p.add_argument("--reference", default=None, metavar="FASTA", help=_REFERENCE)
    p.add_argument("--sample", default=None, metavar="NAME", help=_SAMPLE)


_DESCRIPTION = """\
Turn FASTQ files into a queryable data lake: read QC before and after trimming, alignments to a
reference and coverage, as Parquet tables you can query with SQL. The same app runs on AWS (an upload
to the bucket starts a run) and on this machine as a local cloud (`seqlake demo`, `seqlake local`)."""

_EPILOG = f"""\
examples:
  seqlake demo
  seqlake local run sample_R1.fastq.gz sample_R2.fastq.gz --reference ref.fasta
  seqlake local query --named qc_overview
  seqlake process sample_R1.fastq.gz sample_R2.fastq.gz --reference ref.fasta --out out/

exit codes (every command): {EXIT_OK} success, {EXIT_BAD_INPUT} bad input (the message names the file and
line, or the argument, and what is wrong), {EXIT_USAGE} a command line that does not parse, {EXIT_FAILURE}
any other failure."""


def _add_process(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    process = sub.add_parser(
        "process", help="process local FASTQ files into Parquet, without any cloud",
        description="Plan, process each shard in parallel (QC, trimming, QC again, alignment) and merge, on "
                    f"this machine. --out DIR becomes a lake laid out as the bucket: the tables under "
                    f"DIR/{RESULTS}/<table>/run_id=<id>/, the report at DIR/{REPORTS}/<id>/index.html, the run's "
                    f"plan and summary under DIR/{RUNS}/<id>/.")
    _add_inputs(process)
    process.add_argument("--out", required=True, metavar="DIR",
                         help=f"the lake to write: tables in DIR/{RESULTS}/<table>/, the report in DIR/{REPORTS}/ "
                              "(created if missing; other runs already there stay)")
    process.add_argument("--shards", type=_positive, default=None, metavar="N",
                         help="cut the input into exactly N shards, whatever --reads-per-shard says (process "
                              "only: a deployed stack plans by ReadsPerShard)")
    _add_execution_options(process, "process")
    _add_run_parameters(process)
    process.set_defaults(func=_cmd_process)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seqlake", description=_DESCRIPTION, epilog=_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"seqlake {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo", help="run the whole app on the local cloud over bundled data and print query results",
        description="Upload a bundled, simulated SARS-CoV-2 paired-end library (20,000 pairs) to the local "
                    "cloud, follow the run state by state, then print the results of the named queries. "
                    "No AWS account and no Docker needed; the results stay in the state folder for "
                    "`seqlake local query`.")
    EXECUTION_OPTIONS["--jobs"].add_to(demo)
    demo.add_argument("--reads-per-shard", type=_positive, default=5000, metavar="N",
                      help="reads per shard when the run is planned (default %(default)s: the 20,000 bundled "
                           "pairs become 4 shards)")
    _add_home(demo)
    EXECUTION_OPTIONS["--containers"].add_to(demo)
    EXECUTION_OPTIONS["--no-memory-limits"].add_to(demo)
    EXECUTION_OPTIONS["--no-iam"].add_to(demo)
    demo.set_defaults(func=_cmd_demo)

    _add_process(sub)

    worker = sub.add_parser(
        "worker", help="process one shard of a planned run (what each AWS Batch child runs)",
        description="Process one shard of a run's plan and write its Parquet parts. AWS Batch runs this in "
                    "each child of the run's array job; you rarely run it by hand.")
    worker.add_argument("--plan", default=None, metavar="URI",
                        help="the run's plan.json, a local path or s3:// URI (default: $SEQLAKE_PLAN_URI)")
    worker.add_argument("--shard", type=int, default=None, metavar="I",
                        help="the shard to process, from 0 (default: $AWS_BATCH_JOB_ARRAY_INDEX, else 0)")
    worker.set_defaults(func=_cmd_worker)

    reduce = sub.add_parser(
        "reduce", help="merge one region of every child of a run (what each reducer of the reduce step runs)",
        description="Merge one region of the reference across every child of a run and write that region's "
                    "coverage and low_coverage rows and its summary. AWS Batch runs this in each child of the "
                    "run's reduce array job; you rarely run it by hand.")
    reduce.add_argument("--plan", default=None, metavar="URI",
                        help="the run's plan.json, a local path or s3:// URI (default: $SEQLAKE_PLAN_URI)")
    reduce.add_argument("--region", type=int, default=None, metavar="I",
                        help="the region to reduce, from 0 (default: $AWS_BATCH_JOB_ARRAY_INDEX, else 0)")
    reduce.set_defaults(func=_cmd_reduce)
    _add_local_commands(sub)
    return parser


def _add_local_commands(sub: Any) -> None:
    """``seqlake local ...``."""
    local = sub.add_parser(
        "local", help="the local cloud: run the real app on this machine, query its results",
        description="The local cloud runs the app's real template, state machine, Lambda handlers and Batch "
                    "children on this machine (in-process moto, DuckDB for Athena). Its state lives in one "
                    "folder (--home), so later commands see earlier runs.")
    lsub = local.add_subparsers(dest="local_command", required=True, metavar="COMMAND")
    run = lsub.add_parser(
        "run", help="upload FASTQ files (or a samplesheet) to the local bucket and run the pipeline",
        description="Upload the reads to the local bucket, as a lab would upload to S3, and wait for the "
                    "run to end. Give R1 [R2] for one sample, or --samplesheet for several. The same "
                    "objects and reference are processed once: a second call reports the earlier run; "
                    "changed files are a new upload, hence a new run.")
    _add_inputs(run)
    _add_execution_options(run, "local run")
    _add_run_parameters(run)
    run.set_defaults(func=_cmd_local_run)
    query = lsub.add_parser(
        "query", help="query the local results with SQL (Athena's dialect, answered by DuckDB)",
        description="Query the tables of the committed runs. Give the SQL, or --named for one of the app's "
                    "named queries. Only committed runs are visible, as on Athena.")
    query.add_argument("sql", metavar="SQL", nargs="?", default=None,
                       help='the query, e.g. "SELECT sample, stage, reads FROM qc_summary"')
    query.add_argument("--named", default=None, metavar="NAME",
                       help="run a named query instead, e.g. qc_overview (an unknown name lists the known ones)")
    query.add_argument("--format", choices=("table", "csv", "json"), default="table",
                       help="how the rows are printed (default: %(default)s)")
    query.add_argument("--as-of-run", default=None, metavar="RUN_ID",
                       help="time travel: read the result tables as they were when run RUN_ID committed (Athena: "
                            "FOR VERSION AS OF that run's snapshot id)")
    _add_home(query)
    query.set_defaults(func=_cmd_local_query)
    runs = lsub.add_parser(
        "runs", help="list past runs: state, attempts, timings, shards, reads, and the reason of a failure",
        description="List the runs of this local cloud, oldest first, one line per run (a re-run is an "
                    "attempt of its run), with rejected samplesheets.")
    _add_home(runs)
    runs.set_defaults(func=_cmd_local_runs)
    report = lsub.add_parser(
        "report", help="print the path of a run's QC report (an HTML file that opens offline)",
        description="Print the path of a run's QC report, an HTML file that opens offline in any browser "
                    "(and that MultiQC reads); render it first if the run has none yet. --open also opens it.")
    _add_run_id(report)
    report.add_argument("--open", action="store_true", help="also open the report in the default web browser")
    _add_home(report)
    report.set_defaults(func=_cmd_local_report)
    rerun = lsub.add_parser(
        "rerun", help="finish a failed run: only the shards that failed are computed again",
        description="Start a failed run again under its own id: the children that finished keep their work, "
                    "the others run, and the commit writes the same tables as a run that never failed. A run "
                    "that failed on bad input is not re-run (it would read the same bytes): fix the file and "
                    "run it again, a new upload starts a new run; an input changed since the run read it "
                    "starts a new run too.")
    _add_run_id(rerun, whose="the failed run's")
    _add_execution_options(rerun, "local rerun")
    rerun.set_defaults(func=_cmd_local_rerun)
    status = lsub.add_parser(
        "status", help="one run: its state and reason, the states it went through, its shards, timings and report",
        description="One run as its status.json and the local cloud's records tell it: state and reason, "
                    "each attempt (execution) with the states it went through, shards done, failed and "
                    "retried, timings, reads, and where its report is.")
    _add_run_id(status)
    _add_home(status)
    status.set_defaults(func=_cmd_local_status)
    delete = lsub.add_parser(
        "delete-sample", help="delete a sample everywhere: its rows in every table, its files and objects",
        description="Remove every row of the sample from every table (older snapshots that still hold them "
                    "expired, their files removed), its uploads, its BAM, VCF and consensus, what its runs "
                    "staged and their reports; other samples' rows are unchanged. An audit record (who, when, "
                    "what; not the data) is written under deletions/. Run it while no local run is running.")
    delete.add_argument("sample", metavar="NAME", help="the sample's name, as in sample_summary")
    delete.add_argument("--yes", action="store_true", help="yes, remove it for good (required)")
    _add_home(delete)
    delete.set_defaults(func=_cmd_local_delete_sample)
    compact = lsub.add_parser(
        "compact", help="compact the tables: each run's small files into one, old snapshots expired",
        description="Rewrite each run's files of each table into one file (partitions up to 256 MiB), then "
                    "expire the snapshots older than --keep-days and remove the files only they listed. Run it "
                    "while no local run is running.")
    compact.add_argument("--keep-days", type=float, default=None, metavar="DAYS",
                         help="keep the snapshots of the last DAYS days for time travel (default: 7)")
    _add_home(compact)
    compact.set_defaults(func=_cmd_local_compact)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args)
    except BadInputError as err:
        print(f"seqlake: bad input: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UsageError as err:
        print(f"seqlake: usage: {err} (see `seqlake {args.command} --help`)", file=sys.stderr)
        return EXIT_USAGE
    except SeqlakeError as err:
        print(f"seqlake: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as err:  # a full disk, a lost connection: the system says what, in one line
        print(f"seqlake: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


def run() -> NoReturn:
    """The ``seqlake`` command: :func:`main`, then exit without tearing the interpreter down.

    Every command has closed its files, stopped its children and flushed its output by the time
    :func:`main` returns; what is left is the interpreter freeing moto's and botocore's object graphs
    one by one, seconds of work after a local cloud run whose result nobody sees. Tests call
    :func:`main` and keep the normal exit.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a closed pipe (`seqlake local query ... | head`): nothing left to say
            code = code or EXIT_FAILURE
    os._exit(code)


if __name__ == "__main__":
    run()
