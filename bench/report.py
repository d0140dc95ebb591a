"""The report: ``BENCHMARKS.md`` from the groups' rows and ratios, the input and the machine."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from harness import MB, REPEAT_BELOW_S, GroupResult, Input, Ratio, machine


def _fmt(x: float | None, spec: str) -> str:
    return "" if x is None else format(x, spec)


def _ratio_cell(r: Ratio) -> str:
    if r.value is None:
        return "n/a"
    if r.unit == "s":
        return f"{r.value:.1f} s"
    return f"{r.value:+.1f} %" if r.unit == "%" else f"{r.value:.2f}x"


def reference_summary(fasta: Path) -> str:
    """``NAME (N bp)`` of a one-sequence FASTA, as the report names the reference."""
    name, length = "?", 0
    with fasta.open() as f:
        for line in f:
            if line.startswith(">"):
                name = line[1:].split()[0] if name == "?" else name
            else:
                length += len(line.strip())
    return f"{name} ({length:,} bp)"


def _make_line(command: str) -> str:
    """The ``make`` line that runs ``command`` (``bench/run.py`` options go through ``BENCH_ARGS``)."""
    args = command.removeprefix("python bench/run.py").strip()
    return f'make bench BENCH_ARGS="{args}"   # = {command}' if args else f"make bench        # = {command}"


def _header(groups: Sequence[GroupResult], inp: Input, source: str, reference: str, command: str) -> list[str]:
    when = max(g.measured for g in groups)[:16].replace("T", " ") if groups else "?"
    return [
        "# Benchmarks",
        "",
        f"Generated {when} UTC by `bench/run.py` (see `bench/README.md`). Reproduce with:",
        "",
        "```",
        _make_line(command),
        "```",
        "",
        f"**Input**: {source}, decompressed, replicated {inp.copies}x and recompressed with `gzip -6`: "
        f"{inp.reads_per_mate:,} pairs, {inp.plain_r1 / MB:,.0f} MB + {inp.plain_r2 / MB:,.0f} MB of plain "
        f"FASTQ ({inp.r1.stat().st_size / MB:,.0f} MB + {inp.r2.stat().st_size / MB:,.0f} MB gzip). "
        f"Reference: {reference}.",
        "",
        "**Method**: every command is a separate process pinned to one core (`taskset -c 0`), except the "
        f"end-to-end rows marked both cores and the demo; rows under {REPEAT_BELOW_S:.0f} s are run 3 times and "
        "the fastest kept, the end-to-end pairs three times, interleaved, others once. Time is wall-clock around "
        "the process (start-up included, for every tool alike); MB/s is plain FASTQ per second; reads/s counts "
        "both mates; peak RSS is the largest single process of the command's tree (GNU `time`'s `%M`: "
        "`wait4` `ru_maxrss` of a process it started). "
        "Worker rows time the real entry point `python -m seqlake worker` on a one-shard plan made "
        "beforehand (not timed). The machine is small and shared (2 cores, other work running): each "
        "section gives the load average before and after it; expect some noise.",
    ]


def _load_warning(groups: Sequence[GroupResult]) -> list[str]:
    cpus = os.cpu_count() or 1
    busiest = max((max(g.load) for g in groups), default=0.0)
    if busiest <= cpus:
        return []
    return [
        "",
        f"> **Warning**: the load average reached {busiest:.1f} on {cpus} CPUs during these measurements "
        "(other jobs were running). Times are inflated, and a ratio between two rows measured minutes "
        "apart under different load is unreliable; rerun `make bench` on a quiet machine for numbers "
        "to quote.",
    ]


def _sections(groups: Sequence[GroupResult]) -> list[str]:
    lines: list[str] = []
    for g in groups:
        heading = None
        for row in g.rows:
            if row.group != heading:
                heading = row.group
                lines += [
                    "",
                    f"## {heading}",
                    "",
                    f"_Measured {g.measured[:16].replace('T', ' ')} UTC in {g.seconds:.0f} s; "
                    f"load average {g.load[0]:.2f} -> {g.load[1]:.2f}._",
                    "",
                    "| what | command | time (s) | MB/s | reads/s | peak RSS (MB) | note |",
                    "|---|---|---:|---:|---:|---:|---|",
                ]
            lines.append(
                f"| {row.label} | `{row.command}` | {_fmt(row.seconds, '.2f')} | "
                f"{_fmt(row.mb_s(), ',.0f')} | {_fmt(row.reads_s(), ',.0f')} | {_fmt(row.peak_mb, ',.0f')} | "
                f"{row.note} |"
            )
    return lines


def _ratios(groups: Sequence[GroupResult]) -> list[str]:
    """Every ratio with its target; each is computed from rows of one group, and a ratio whose group was
    measured by an earlier ``bench/run.py`` than the latest says so."""
    latest = max((g.run for g in groups), default="")
    lines = ["", "## Ratios", "", "| comparison | measured | target | met | how |", "|---|---:|---|---|---|"]
    for g in groups:
        earlier = f" (**an earlier run**: {g.measured[:16].replace('T', ' ')} UTC)" if g.run != latest else ""
        for r in g.ratios:
            met = {None: "", True: "yes", False: "**no**"}[r.met]
            lines.append(f"| {r.label} | {_ratio_cell(r)} | {r.target} | {met} | {r.how}{earlier} |")
    return lines


def render(groups: Sequence[GroupResult], inp: Input, source: str, reference: Path, command: str,
           extra: Sequence[str] = ()) -> str:
    """The whole report: header, load warning, one section per group, the ratios, ``extra`` sections
    (the scale runs), the machine."""
    lines = _header(groups, inp, source, reference_summary(reference), command)
    lines += _load_warning(groups) + _sections(groups) + _ratios(groups) + list(extra)
    lines += ["", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in machine().items()]
    return "\n".join(lines) + "\n"
