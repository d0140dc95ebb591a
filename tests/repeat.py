"""``make test-repeat``: run tests N times and name every test that failed in any run (issue 39).

A test that fails one run in ten passes a single ``make test`` nine times in ten: only repetition shows it.
Each run is a pytest session of its own (its own local clouds, cgroups and temporary folders), one after
the other; each writes a JUnit XML report, and the failures and errors of all runs are counted per test.
``python -m tests.repeat --times N [PYTEST ARGS...]``; exit status 1 if any test failed once.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

#: of a failure's message, printed under its run
MESSAGE_CHARS = 600


def failures(report: Path) -> dict[str, str]:
    """The tests a JUnit XML report says failed or erred, as ``file::name``-like ids (classname::name), each
    with its failure's message (the assertion pytest reports: what a flaky test saw, the one time it failed)."""
    if not report.is_file():
        return {}
    found = {}
    for case in ET.parse(report).iter("testcase"):
        outcome = case.find("failure")
        if outcome is None:
            outcome = case.find("error")
        if outcome is not None:
            found[f"{case.get('classname', '')}::{case.get('name', '')}"] = outcome.get("message", "")
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.repeat", description=__doc__.split("\n\n")[0])
    parser.add_argument("--times", type=int, default=10, help="how many runs (default 10)")
    args, pytest_args = parser.parse_known_args(argv)
    failed: Counter[str] = Counter()
    red_runs = 0
    with tempfile.TemporaryDirectory(prefix="seqlake-repeat-") as folder:
        for run in range(1, args.times + 1):
            report = Path(folder) / f"run-{run}.xml"
            started = time.monotonic()
            code = subprocess.run([sys.executable, "-m", "pytest", "-q", "--no-header", "-p", "no:cacheprovider",
                                   f"--junitxml={report}", *pytest_args],
                                  check=False, stdout=subprocess.DEVNULL).returncode
            names = failures(report)
            failed.update(names.keys())
            red_runs += code != 0
            print(f"run {run}/{args.times}: exit {code}, {len(names)} failed, {time.monotonic() - started:.0f} s",
                  flush=True)
            for name, message in names.items():
                print(f"  {name}: {message[:MESSAGE_CHARS]}", flush=True)
    for name, count in failed.most_common():
        print(f"FAILED {count}/{args.times}: {name}")
    if red_runs and not failed:
        print(f"{red_runs} run(s) ended red with no failed test (collection or session error)")
    verdict = "every test passed every run" if not red_runs else f"{len(failed)} test(s) failed once or more"
    print(f"{args.times} runs: {verdict}")
    return 1 if red_runs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
