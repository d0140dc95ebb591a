"""The suite's slowest tests, written by the suite into the README's development section (issue 39).

``pytest --slowest-into README.md tests`` (``make test`` passes it; the folder named, or pytest does not know
the option) sums each test's setup, call and teardown seconds as the session's reports arrive (with xdist, in
the controlling process) and, when the whole session passed, rewrites the block between :data:`BEGIN` and
:data:`END` with the :data:`COUNT` slowest. The block is kept stable, so that ``make test`` in a clean clone
leaves ``git status`` clean run after run: it is rewritten only when it no longer says what the run measured
(:func:`stale`), not whenever a time moved by a second.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path

import pytest

#: the option naming the file whose block is rewritten
OPTION = "--slowest-into"
#: how many tests the block names
COUNT = 20
BEGIN = "<!-- slowest tests: written by `make test` (tests/slowest_tests.py), not by hand -->"
END = "<!-- end of the slowest tests -->"
#: a written time is kept while the new one is within this fraction of it (or within :data:`SLACK_SECONDS`)
TOLERANCE = 0.3
SLACK_SECONDS = 3.0
_ROW = re.compile(r"^\| (?P<seconds>\d+) \| `(?P<test>.+)` \|$")


def block(slowest: list[tuple[str, float]]) -> str:
    """The block: a table of the tests and their seconds (whole seconds: a tenth would change every run)."""
    rows = [f"| {math.ceil(seconds)} | `{test.replace('|', '/')}` |" for test, seconds in slowest]
    return "\n".join([BEGIN, "", "| seconds | test |", "|---:|---|", *rows, "", END])


def written(text: str) -> dict[str, float] | None:
    """The tests and seconds the block in ``text`` names (None: no block there)."""
    if BEGIN not in text or END not in text:
        return None
    inside = text[text.index(BEGIN) : text.index(END)]
    return {m["test"]: float(m["seconds"]) for line in inside.splitlines() if (m := _ROW.match(line))}


def stale(old: dict[str, float], new: list[tuple[str, float]]) -> bool:
    """The written block no longer says what this run measured: a test of the first three quarters of the new
    list is not in it, one of it fell out of the new list and a quarter beyond, or a time moved by more
    than :data:`TOLERANCE` (and :data:`SLACK_SECONDS`). Tests near the cut change places from run to run."""
    names = [test.replace("|", "/") for test, _ in new]
    seconds = dict(zip(names, (s for _, s in new), strict=True))
    if any(name not in old for name in names[: COUNT * 3 // 4]) or len(old) != min(COUNT, len(new)):
        return True
    if any(name not in seconds for name in old):  # fell beyond the measured list itself
        return True
    return any(abs(math.ceil(seconds[name]) - was) > max(SLACK_SECONDS, TOLERANCE * was) for name, was in old.items())


class SlowestTests:
    """The plugin :func:`register` adds: each test's seconds, and the block rewritten after a green session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus != 0 or not self.seconds:  # a red or empty run measures nothing worth keeping
            return
        ranked = sorted(self.seconds.items(), key=lambda item: -item[1])
        text = self.path.read_text()
        old = written(text)
        if old is None:
            raise pytest.UsageError(f"{self.path} has no block of the slowest tests ({BEGIN} ... {END})")
        # the candidates beyond the block: a test of the block just past the cut is not 'fallen out'
        if not stale(old, ranked[: COUNT + COUNT // 4]):
            return
        self.path.write_text(text[: text.index(BEGIN)] + block(ranked[:COUNT]) + text[text.index(END) + len(END) :])


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(OPTION, metavar="FILE", default=None,
                     help="after a green session, write its slowest tests into FILE's marked block")


def register(config: pytest.Config) -> None:
    """Add the plugin when the option names a file (in the controlling process only: xdist's workers report
    to it)."""
    target = config.getoption(OPTION)
    if target and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SlowestTests(Path(target)), "slowest-tests")
