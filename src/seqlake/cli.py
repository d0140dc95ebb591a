"""The ``seqlake`` command line (DESIGN section 5: names may grow, never change).

Thin: parse arguments, call one core function, turn errors into one line on stderr and an exit code.
Bad input never prints a traceback; it exits ``EXIT_BAD_INPUT`` (65), which the Batch job definition
does not retry.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from seqlake import __version__
from seqlake.errors import EXIT_BAD_INPUT, EXIT_FAILURE, BadInputError, SeqlakeError

Handler = Callable[[argparse.Namespace], int]


def _cmd_process(args: argparse.Namespace) -> int:
    from seqlake.process import process_command

    return process_command(args)


def _cmd_worker(args: argparse.Namespace) -> int:
    from seqlake.worker_main import worker_command

    return worker_command(args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from seqlake.localcloud.commands import demo_command

    return int(demo_command(args) or 0)


def _cmd_local_run(args: argparse.Namespace) -> int:
    from seqlake.localcloud.commands import run_command

    return int(run_command(args) or 0)


def _cmd_local_query(args: argparse.Namespace) -> int:
    from seqlake.localcloud.commands import query_command

    return int(query_command(args) or 0)


def _cmd_local_runs(args: argparse.Namespace) -> int:
    from seqlake.localcloud.commands import runs_command

    return int(runs_command(args) or 0)


def _add_local_state(p: argparse.ArgumentParser) -> None:
    p.add_argument("--home", default=None, metavar="DIR",
                   help="local cloud state folder (default: $SEQLAKE_HOME or ./.seqlake)")


def _add_containers(p: argparse.ArgumentParser) -> None:
    p.add_argument("--containers", action="store_true",
                   help="run each Batch attempt as a podman container of the worker image (`make image`); "
                        "also set by SEQLAKE_CONTAINERS=1")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seqlake", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"seqlake {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="the whole app on the local cloud over bundled data; prints query results")
    demo.add_argument("--jobs", type=int, default=2, help="Batch children run at once (default 2)")
    demo.add_argument("--reads-per-shard", type=int, default=5000, metavar="N",
                      help="planning target (default 5000: the 20,000 bundled pairs fan out to 4 shards)")
    _add_local_state(demo)
    _add_containers(demo)
    demo.set_defaults(func=_cmd_demo)

    process = sub.add_parser("process", help="the core alone on local files: plan, shards, merge, Parquet")
    process.add_argument("r1", help="FASTQ (plain, gzip, BGZF, bz2, xz; detected from the bytes)")
    process.add_argument("r2", nargs="?", default=None, help="mate 2 of a paired-end sample")
    process.add_argument("--reference", default=None, metavar="FA", help="reference FASTA (or .mmi) to align to")
    process.add_argument("--sample", default=None, help="sample name (default: from the file name)")
    process.add_argument("--out", required=True, metavar="DIR", help="output folder (Hive-partitioned Parquet)")
    process.add_argument("--shards", type=int, default=None, help="number of shards (default: from reads per shard)")
    process.add_argument("--jobs", type=int, default=None, help="shards run at once (default: number of CPUs)")
    process.add_argument("--no-trim", action="store_true", help="skip quality and adapter trimming")
    process.set_defaults(func=_cmd_process)

    worker = sub.add_parser("worker", help="the AWS Batch child entry point (reads SEQLAKE_PLAN_URI, "
                                           "AWS_BATCH_JOB_ARRAY_INDEX)")
    worker.add_argument("--plan", default=None, help="plan URI (default: $SEQLAKE_PLAN_URI)")
    worker.add_argument("--shard", type=int, default=None,
                        help="shard index (default: $AWS_BATCH_JOB_ARRAY_INDEX or 0)")
    worker.set_defaults(func=_cmd_worker)

    local = sub.add_parser("local", help="the local cloud: the real app on this machine")
    lsub = local.add_subparsers(dest="local_command", required=True)
    run = lsub.add_parser("run", help="upload FASTQ to the local bucket and run the pipeline")
    run.add_argument("r1", nargs="?", default=None)
    run.add_argument("r2", nargs="?", default=None)
    run.add_argument("--reference", default=None, metavar="FA")
    run.add_argument("--sample", default=None)
    run.add_argument("--samplesheet", default=None, metavar="CSV")
    run.add_argument("--jobs", type=int, default=2, help="Batch children run at once (default 2)")
    run.add_argument("--reads-per-shard", type=int, default=None, metavar="N",
                     help="planning target: the template parameter ReadsPerShard (default: the template's)")
    _add_local_state(run)
    _add_containers(run)
    run.set_defaults(func=_cmd_local_run)
    query = lsub.add_parser("query", help="Athena SQL over the local results (DuckDB)")
    query.add_argument("sql", nargs="?", default=None)
    query.add_argument("--named", default=None, metavar="NAME", help="a query from queries/NAME.sql")
    query.add_argument("--format", choices=("table", "csv", "json"), default="table")
    _add_local_state(query)
    query.set_defaults(func=_cmd_local_query)
    runs = lsub.add_parser("runs", help="past runs: state, counts, timings")
    _add_local_state(runs)
    runs.set_defaults(func=_cmd_local_runs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args)
    except BadInputError as err:
        print(f"seqlake: bad input: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SeqlakeError as err:
        print(f"seqlake: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


def run() -> NoReturn:
    """The ``seqlake`` command: :func:`main`, then exit without tearing the interpreter down.

    Every command has closed its files, stopped its children and flushed its output by the time
    :func:`main` returns; what is left is the interpreter freeing moto's and botocore's object graphs
    one by one, which took 2-3 s after a local cloud run (0.7 s after merely importing moto's EC2
    models) for nothing. Tests call :func:`main` and keep the normal exit.
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
