"""Where each seqlake row of BENCHMARKS.md spends its CPU: a sampled profile per row, by library.

    python bench/profile.py                      # every row, on what `bench/run.py` left in bench/work
    python bench/profile.py --rows qc,worker_full

Each row's command runs once under ``perf record`` (the whole process tree: a child's alignment
processes too), pinned to one core as the bench runs it, or on two cores for the 2-vCPU rows; then
``perf report --sort dso`` says which shared object every sample was in, grouped by library. The
interpreter's share is the Python code itself (ours and the libraries'); ``py-spy``, when installed,
splits it by function (``--python``). Needs ``perf`` (Debian: ``linux-perf``) and a run of
``bench/run.py`` first (its inputs and its one-shard plans). Prints a Markdown table per row and writes
them to ``bench/work/profile.md``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PATHS_PY = BENCH / "paths.py"

#: shared objects, by the library they belong to (first match wins)
LIBRARIES = (
    ("minimap2 (mappy)", r"^mappy\."),
    ("Python interpreter (Python code)", r"^libpython|^python3"),
    ("numpy", r"_multiarray_umath|openblas|^_umath|numpy"),
    ("gzip (ISA-L, zlib, rapidgzip)", r"isal|libz\.|zlib|rapidgzip|libdeflate"),
    ("Arrow and Parquet", r"arrow|parquet"),
    ("cutadapt (compiled)", r"^_align\.|_kmer_finder|qualtrim|cutadapt"),
    ("dnaio", r"dnaio|^_core\."),
    ("kernel", r"kernel"),
    ("libc", r"^libc\.|^ld-linux|libm\.|libstdc"),
)


@dataclass(frozen=True)
class Case:
    key: str
    what: str
    argv: tuple[str, ...]
    #: cores the command may use (1: pinned like the bench's one-core rows)
    cores: int = 1
    env: tuple[tuple[str, str], ...] = ()
    #: a one-shard plan the worker runs (its staging is removed first: a finished child exits at once)
    plan: Path | None = None


def cases(work: Path, copies: int) -> list[Case]:
    # the bench names an input by its source and copies (input-x100, input-<source hash>-x1): the newest
    built = sorted(work.glob(f"input*-x{copies}"), key=lambda p: p.stat().st_mtime)
    inp = built[-1] if built else work / f"input-x{copies}"
    r1, bgzf = inp / "R1.fastq.gz", inp / "R1.bgzf.fastq.gz"
    py = sys.executable

    def worker(key: str, what: str, cores: int = 1) -> Case:
        plans = sorted((work / "out" / key / "runs").glob("*/plan.json"))
        plan = plans[0] if plans else None
        argv = (py, "-m", "seqlake", "worker", "--plan", str(plan), "--shard", "0")
        env = (("SEQLAKE_THREADS", str(cores)),) if cores > 1 else ()
        return Case(key, what, argv, cores, env, plan)

    return [
        Case("qc", "QC library on R1", (py, str(PATHS_PY), "qc", str(r1))),
        worker("worker_qc", "worker, QC-only path, R1"),
        Case("index", "gzip index pass on R1", (py, str(PATHS_PY), "index", str(r1))),
        Case("index2", "gzip index pass on R1, a job of 2 vCPUs", (py, str(PATHS_PY), "index", str(r1)), 2,
             (("SEQLAKE_THREADS", "2"),)),
        Case("bgzf_count", "BGZF counting pass on R1", (py, str(PATHS_PY), "bgzf-count", str(bgzf)), 1,
             (("SEQLAKE_THREADS", "1"),)),
        worker("worker_trim", "worker, QC + trim, paired"),
        worker("worker_align", "worker, QC + align (--no-trim), paired"),
        worker("worker_full", "worker, full path, paired"),
        worker("child_small", "worker, full path, a shard of 1,000 pairs"),
        worker("child_t2", "worker, full path, paired, a job of 2 vCPUs", cores=2),
    ]


def profile(case: Case, folder: Path) -> tuple[float, dict[str, float], list[tuple[float, str]]]:
    """Run ``case`` under perf: (samples' share per library, top symbols outside the interpreter)."""
    if case.plan is not None:
        shutil.rmtree(case.plan.parent / "staging", ignore_errors=True)
    data = folder / f"{case.key}.data"
    pin = ["taskset", "-c", ",".join(str(c) for c in range(case.cores))]
    env = {**os.environ, **dict(case.env)}
    subprocess.run(["perf", "record", "-q", "-F", "999", "-o", str(data), "--", *pin, *case.argv],
                   check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds, by_dso = _report(data, "dso")
    libraries: dict[str, float] = collections.Counter()
    for share, dso in by_dso:
        libraries[_library(dso)] += share
    symbols = [(share, sym) for share, sym in _report(data, "dso,sym", 1.0)[1] if share >= 1.0][:12]
    return seconds, dict(libraries), symbols


def _report(data: Path, sort: str, limit: float = 0.0) -> tuple[float, list[tuple[float, str]]]:
    """CPU seconds sampled (the cpu-clock event count, in ns) and (share, name) rows sorted by ``sort``."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", sort, "--stdio", "-g", "none",
                          "--percent-limit", str(limit)], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(.*\S)", line)
        if m and not line.lstrip().startswith("#"):
            rows.append((float(m.group(1)), re.sub(r"\s+", " ", m.group(2))))
    count = re.search(r"# Event count \(approx\.\): (\d+)", out)
    return (int(count.group(1)) / 1e9 if count else 0.0), rows


def _library(dso: str) -> str:
    name = dso.rsplit(maxsplit=1)[-1] if dso else dso
    for library, pattern in LIBRARIES:
        if re.search(pattern, name):
            return library
    return "other: " + name


def render(case: Case, seconds: float, libraries: dict[str, float], symbols: Sequence[tuple[float, str]]) -> str:
    lines = [f"### {case.what} (`{case.key}`)", "",
             f"{seconds:.1f} CPU seconds sampled; `{' '.join(Path(a).name if os.sep in a else a for a in case.argv)}`"
             + (f", {case.cores} cores" if case.cores > 1 else ", one core"), "",
             "| library | share of CPU |", "|---|---:|"]
    ranked = sorted(libraries.items(), key=lambda kv: -kv[1])
    lines += [f"| {lib} | {share:.1f} % |" for lib, share in ranked if share >= 0.5]
    small = sum(share for _, share in ranked if share < 0.5)
    if small:
        lines.append(f"| the rest (each under 0.5 %) | {small:.1f} % |")
    lines += ["", "Hottest symbols outside the interpreter's own code: " + "; ".join(
        f"{sym.replace('[.] ', '')} {share:.1f} %" for share, sym in symbols if "libpython" not in sym)[:600], ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=BENCH / "work")
    ap.add_argument("--rows", default=None, help="comma-separated row keys (default: all)")
    ap.add_argument("--copies", type=int, default=100, help="the input the bench built (bench/run.py --copies)")
    args = ap.parse_args(argv)
    if shutil.which("perf") is None:
        print("bench/profile.py needs perf (Debian: apt-get install linux-perf)", file=sys.stderr)
        return 2
    wanted = set(args.rows.split(",")) if args.rows else None
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases(args.work, args.copies):
            if wanted is not None and case.key not in wanted:
                continue
            if case.plan is None and "worker" in case.argv:
                print(f"{case.key}: no plan in {args.work}/out (run bench/run.py first)", file=sys.stderr)
                continue
            text = render(case, *profile(case, Path(tmp)))
            print(text, flush=True)
            out.append(text)
    (args.work / "profile.md").write_text("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
