"""``make fuzz``: run the fuzz targets for a while, keep every failing input, print what was run.

    python -m tests.fuzz.run [--minutes 10] [--target chunk --target span ...] [--stats fuzz-stats.json]

The targets (:mod:`tests.fuzz.checks`) take turns in rounds of ``--examples`` inputs each, drawn by
Hypothesis from the structure-aware strategies of :mod:`tests.fuzz.strategies`, until the time is up.
A failing input is shrunk by Hypothesis to a small one and kept as
``tests/data/fuzz/<target>/<sha256[:16]>.bin`` (``.bin.gz`` when large), which ``tests/fuzz/test_corpus.py`` replays in
``make test``; a failure already kept (the same target, exception type and place) is not searched for
again in this run, so the time goes to finding others. Time must stay linear in the input's size: an
input costing more CPU than ``SLOW_BASE_S + SLOW_PER_BYTE_S * bytes`` (the best of three runs) fails too, and
Hypothesis steers towards inputs that cost the most per byte (``hypothesis.target``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings, target
from hypothesis.errors import HypothesisException

from .checks import TARGETS
from .strategies import STRATEGIES

CORPUS = Path(__file__).resolve().parents[1] / "data" / "fuzz"
SLOW_BASE_S = 5.0
KEEP_PLAIN_MAX = 16 << 10
SLOW_PER_BYTE_S = 5e-6


@dataclass
class Stats:
    executions: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    #: signature -> the kept input's path
    failures: dict[str, str] = field(default_factory=dict)


def signature(target_name: str, err: BaseException) -> str:
    """Where a failure happens: the target, the exception type and the innermost seqlake frame (or the
    assertion's message with its numbers blanked): two inputs with one signature are one bug."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "/seqlake/" in f.filename]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = re.sub(r"/tmp/\S+", "<file>", str(err).splitlines()[0] if str(err) else "")
    what = re.sub(r"\d+", "N", text)[:80]
    if isinstance(err, AssertionError) or not where:
        return f"{target_name}|{type(err).__name__}|{what}"
    return f"{target_name}|{type(err).__name__}|{where}"


class Known(Exception):  # noqa: N818
    """A failure already kept: not searched for again."""


def keep(name: str, data: bytes) -> Path:
    """Write a failing input to the corpus (gzipped above ``KEEP_PLAIN_MAX``: long-line inputs
    compress to almost nothing)."""
    stem = CORPUS / name / hashlib.sha256(data).hexdigest()[:16]
    stem.parent.mkdir(parents=True, exist_ok=True)
    if len(data) > KEEP_PLAIN_MAX:
        kept = stem.with_suffix(".bin.gz")
        kept.write_bytes(gzip.compress(data, mtime=0))
    else:
        kept = stem.with_suffix(".bin")
        kept.write_bytes(data)
    return kept


def run_one(name: str, data: bytes) -> float:
    """The target's check on ``data`` in a fresh folder; the CPU seconds it took this process (not the
    wall time: on a shared machine that measures the neighbours)."""
    with tempfile.TemporaryDirectory(prefix="seqlake-fuzz-") as tmp:
        t0 = time.process_time()
        TARGETS[name](data, Path(tmp))
        return time.process_time() - t0


class OutOfTime(BaseException):
    """The run's time is up (a BaseException: Hypothesis stops at once, without shrinking)."""


def fuzz_round(name: str, examples: int, stats: Stats, known: set[str], end: float) -> None:
    failing: list[tuple[bytes, BaseException]] = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.target, Phase.shrink],
              print_blob=False)
    @given(data=STRATEGIES[name])
    def search(data: bytes) -> None:
        if time.monotonic() >= end:
            raise OutOfTime
        stats.executions[name] = stats.executions.get(name, 0) + 1
        try:
            elapsed = run_one(name, data)
            budget = SLOW_BASE_S + SLOW_PER_BYTE_S * len(data)
            if elapsed > budget:
                elapsed = min(elapsed, *(run_one(name, data) for _ in range(2)))
                if elapsed > budget:
                    raise AssertionError(f"slow: {elapsed:.1f} s for {len(data)} bytes (budget {budget:.1f} s)")
            target(elapsed / (len(data) + 1000), label="seconds per byte")
        except Exception as err:
            if signature(name, err) in known:
                return
            failing.append((data, err))
            raise

    t0 = time.perf_counter()
    try:
        search()
    except OutOfTime:
        pass
    except (Exception, HypothesisException):
        if failing:
            data, err = failing[-1]  # Hypothesis replays the shrunk input last
            sig = signature(name, err)
            known.add(sig)
            kept = keep(name, data)
            stats.failures[sig] = str(kept.relative_to(CORPUS.parents[2]))
            print(f"FAILURE {sig}\n  kept {kept} ({len(data)} bytes)\n  {type(err).__name__}: {err}",
                  flush=True)
    stats.seconds[name] = stats.seconds.get(name, 0.0) + time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), default=None)
    parser.add_argument("--examples", type=int, default=25, help="inputs per target per round")
    parser.add_argument("--stats", type=Path, default=None, help="write the counts here as JSON")
    args = parser.parse_args(argv)
    names = args.target or sorted(TARGETS)
    stats, known = Stats(), set[str]()
    end = time.monotonic() + 60 * args.minutes
    while time.monotonic() < end:
        for name in names:
            if time.monotonic() >= end:
                break
            fuzz_round(name, args.examples, stats, known, end)
            summary = {"minutes": args.minutes, "executions": stats.executions,
                       "seconds": {k: round(v, 1) for k, v in stats.seconds.items()}, "failures": stats.failures}
            print(json.dumps(summary), flush=True)
            if args.stats is not None:
                args.stats.write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
