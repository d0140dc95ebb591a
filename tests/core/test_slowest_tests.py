"""The slowest tests' block in the README: written by the suite after a green run, kept stable across runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowest_tests import BEGIN, COUNT, END, SlowestTests, block, stale, written

README = Path(__file__).resolve().parents[2] / "README.md"


def _ranked(factor: float = 1.0, shift: int = 0) -> list[tuple[str, float]]:
    return [(f"tests/t.py::test_{i + shift}[a|b]", factor * (200.0 - 5 * i)) for i in range(COUNT + 5)]


def _finish(path: Path, ranked: list[tuple[str, float]], status: int = 0) -> None:
    plugin = SlowestTests(path)
    for test, seconds in ranked:
        plugin.pytest_runtest_logreport(pytest.TestReport(test, ("t.py", 0, test), {}, "passed", None, "call",
                                                          duration=seconds))
    plugin.pytest_sessionfinish(pytest.Session.__new__(pytest.Session), status)


def test_the_readme_has_the_block() -> None:
    assert written(README.read_text()) is not None


def test_a_green_run_writes_the_block_and_a_like_run_leaves_it_as_it_is(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{BEGIN}\n{END}\n\nafter\n")
    _finish(readme, _ranked())
    first = readme.read_text()
    rows = written(first)
    assert rows is not None and len(rows) == COUNT and rows["tests/t.py::test_0[a/b]"] == 200
    assert first.startswith("# x\n\n") and first.endswith("\n\nafter\n") and block(_ranked()[:COUNT]) in first
    _finish(readme, _ranked(factor=1.1))  # every time 10 % longer, the same ranking: kept
    assert readme.read_text() == first
    _finish(readme, _ranked(factor=2.0), status=1)  # a red run: nothing written
    assert readme.read_text() == first
    _finish(readme, _ranked(factor=2.0))  # twice as long: rewritten
    rows = written(readme.read_text())
    assert rows is not None and rows["tests/t.py::test_0[a/b]"] == 400


def test_the_block_is_stale_when_the_ranking_changes_beyond_its_tail() -> None:
    old = written(block(_ranked()[:COUNT]))
    assert old is not None
    assert not stale(old, _ranked())
    assert not stale(old, [*_ranked()[:COUNT - 1], ("tests/t.py::test_new", 1.0), *_ranked()[COUNT - 1:]])
    assert stale(old, _ranked(shift=10))  # a new test among the first three quarters
