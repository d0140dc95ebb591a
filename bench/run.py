"""seqlake benchmarks: side by side with seqkit, fastp, minimap2 and gzip, in one run, on one core.

    python bench/run.py          # full run: a few hundred MB of input, 30-45 minutes -> BENCHMARKS.md
    python bench/run.py --quick  # smoke test: small input, 1-2 minutes -> bench/work/BENCHMARKS-quick.md
    python bench/run.py --skip e2e,shards   # leave out the long groups no issue-13 target needs

The input is a paired-end library decompressed, replicated ``--copies`` times and recompressed with
``gzip -6``, cached in ``bench/work/`` (git-ignored). By default it is the real MiSeq reads the test
suite compares on (AGPL, so kept outside the repository: ``$SEQLAKE_EXTERNAL_DATA``, by default
``shared/data`` beside the checkout); ``--reads R1 R2`` takes any other pair, and ``--quick`` falls back
to the bundled demo reads when the MiSeq reads are absent. The reference is the bundled MN908947.3.

``harness.py`` runs and measures, ``cases.py`` says what is compared with what, ``report.py`` writes the
report. A row whose tool or seqlake piece is missing is skipped with a note; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import genome_scale
import localcloud_requests
import plan_scale
import reduce
import region_index
import scale
from cases import GROUP_NAMES, groups
from harness import (
    BENCH,
    REPO,
    Ctx,
    GroupResult,
    Inputs,
    Row,
    Source,
    build_input,
    fresh,
    load_results,
    save_results,
    warm,
)
from report import render

MISEQ_READS = ("subsample1_R1.fastq.gz", "subsample1_R2.fastq.gz")
MISEQ = "the real MiSeq SARS-CoV-2 ARTIC reads (2x220 bp, `subsample1` of connor-lab/ncov2019-artic-nf)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small input (seconds): a smoke test of the harness")
    ap.add_argument("--reads", nargs=2, type=Path, default=None, metavar=("R1", "R2"),
                    help="paired FASTQ to build the input from (default: the MiSeq reads)")
    ap.add_argument("--copies", type=int, default=None, help="replicate the reads N times (default 100; quick 2)")
    ap.add_argument("--shard-counts", default=None, help="shard counts to plan and merge (default 1000,10000)")
    ap.add_argument("--only", default=None,
                    help=f"rerun only these groups ({','.join(GROUP_NAMES)}; none = rewrite the report)")
    ap.add_argument("--skip", default="",
                    help="groups not to run (and not to report; e.g. e2e: no issue-13 target depends on it)")
    ap.add_argument("--out", type=Path, default=None, help="report path (default BENCHMARKS.md; quick: bench/work)")
    ap.add_argument("--work", type=Path, default=BENCH / "work", help="cache and scratch folder")
    ap.add_argument("--no-taskset", action="store_true", help="do not pin to CPU 0")
    ap.add_argument("--repeat", type=int, default=None, help="runs of rows under 5 s, best kept (default 3)")
    ap.add_argument("--quiet-load", type=float, default=1.5,
                    help="wait (up to 10 minutes) before each group until the 1-minute load average is below "
                         "this (default 1.5; 0: do not wait)")
    args = ap.parse_args(argv)
    if set((args.only or "").split(",")) - {*GROUP_NAMES, "none", ""}:
        ap.error(f"--only takes a comma list of {', '.join(GROUP_NAMES)}, or none (rewrite the report)")
    if set(args.skip.split(",")) - {*GROUP_NAMES, ""}:
        ap.error(f"--skip takes a comma list of {', '.join(GROUP_NAMES)}")
    return args


def source_reads(args: argparse.Namespace) -> Source | None:
    """The reads to build the input from: ``--reads``, else the MiSeq reads, else (quick) the demo reads."""
    if args.reads:
        return Source.files(*args.reads)
    external = Path(os.environ.get("SEQLAKE_EXTERNAL_DATA") or REPO.parent / "shared" / "data")
    r1, r2 = (external / "sarscov2_artic_miseq" / name for name in MISEQ_READS)
    if r1.is_file() and r2.is_file():
        return Source(r1, r2, MISEQ)
    if args.quick:
        from seqlake import demo_data

        d1, d2, _ = demo_data.paths()
        return Source(d1, d2, "the bundled demo reads (simulated, 2x150 bp)", "demo")
    print(f"bench: the MiSeq reads are not in {r1.parent} (set SEQLAKE_EXTERNAL_DATA, or give --reads R1 R2)",
          file=sys.stderr)
    return None


def reference_copy(work: Path, fasta: Path) -> Path:
    """The reference, copied into the work folder (the rows read it from there, whatever the package's
    folder)."""
    copy = work / "reference" / fasta.name
    if not copy.exists() or copy.stat().st_size != fasta.stat().st_size:
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fasta, copy)
    return copy


def wait_for_quiet(threshold: float, limit_s: float = 600.0) -> None:
    """Wait until the 1-minute load average is below ``threshold`` (or ``limit_s`` passed): a group
    measured while earlier work still loads the machine is slower for reasons of its own."""
    deadline = time.monotonic() + limit_s
    while threshold > 0 and os.getloadavg()[0] >= threshold and time.monotonic() < deadline:
        print(f"bench: waiting for the load average ({os.getloadavg()[0]:.2f}) to fall below {threshold}",
              file=sys.stderr)
        time.sleep(15)


def run_groups(ctx: Ctx, inputs: Inputs, names: set[str], shard_counts: tuple[int, ...],
               stored: dict[str, GroupResult], started: str, quiet_load: float = 0.0) -> None:
    """Run the chosen groups in report order; each replaces its stored result, the others' are kept.
    ``started``: when this invocation started (the report tells the groups of the latest run apart)."""
    for name, run in groups(shard_counts).items():
        if name not in names:
            continue
        wait_for_quiet(quiet_load)
        n_rows, n_ratios = len(ctx.rows), len(ctx.ratios)
        measured, load0, t0 = datetime.now(UTC).isoformat(), os.getloadavg()[0], time.perf_counter()
        try:
            run(ctx, inputs)
        except Exception as err:  # one broken group must not lose the other groups' numbers
            print(f"group {name} failed: {type(err).__name__}: {err}", file=sys.stderr)
            ctx.rows.append(Row(name, f"group {name}", "", note=f"failed: {type(err).__name__}: {err}"))
        stored[name] = GroupResult(name, measured, (load0, os.getloadavg()[0]), time.perf_counter() - t0,
                                   ctx.rows[n_rows:], ctx.ratios[n_ratios:], started)


def main(argv: Sequence[str] | None = None) -> int:
    # the checkout's own code, in this process and in every measured child, installed or not
    sys.path.insert(0, str(REPO / "src"))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    from seqlake import demo_data

    args = parse_args(argv)
    source = source_reads(args)
    if source is None:
        return 2
    if shutil.which("gzip") is None:
        print("bench: gzip is needed to build the input", file=sys.stderr)
        return 2
    copies = args.copies or (2 if args.quick else 100)
    counts = tuple(int(x) for x in (args.shard_counts or ("10,50" if args.quick else "1000,10000")).split(","))
    skip = set(args.skip.split(","))
    names = set((args.only or ",".join(GROUP_NAMES)).split(",")) - skip
    out_md = args.out or (args.work / "BENCHMARKS-quick.md" if args.quick else REPO / "BENCHMARKS.md")
    work = args.work.resolve()
    logs = fresh(work / "logs")
    ctx = Ctx(work=work, quick=args.quick, taskset=not args.no_taskset and shutil.which("taskset") is not None,
              env=dict(os.environ), logs=logs, reference=reference_copy(work, demo_data.reference_path()),
              repeat=args.repeat or (1 if args.quick else 3))

    inputs = Inputs(work, source, build_input(work, source, copies))
    warm([inputs.main.r1, inputs.main.r2])
    print(f"input: {inputs.main.reads_per_mate:,} pairs, {inputs.main.plain_total / 1e6:,.0f} MB plain; logs in {logs}")
    results_path = work / "-".join(filter(None, ["results", "quick" if args.quick else "full", source.tag,
                                                 f"x{copies}.json"]))
    stored = load_results(results_path)
    run_groups(ctx, inputs, names, counts, stored, datetime.now(UTC).isoformat(),
               quiet_load=0.0 if args.quick else args.quiet_load)
    save_results(results_path, stored)

    command = "python bench/run.py" + (f" --reads {args.reads[0].name} {args.reads[1].name}" if args.reads else "")
    command += "" if args.copies is None else f" --copies {copies}"
    command += " --quick" if args.quick else ""
    command += f" --skip {args.skip}" if args.skip else ""
    report = render([stored[n] for n in GROUP_NAMES if n in stored and n not in skip], inputs.main, source.description,
                    ctx.reference, command,
                    extra=[] if args.quick else [*scale.section(work), *reduce.section(work),
                                                 *region_index.section(work), *genome_scale.section(work),
                                                 *plan_scale.section(work), *localcloud_requests.section(work)])
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(report)
    print()
    print(report)
    print(f"wrote {out_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
