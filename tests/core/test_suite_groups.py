"""The suite's units of work (``unit_of`` in tests/conftest.py): a module, or a group of modules sharing a
fixture (``GROUPS``), runs whole in one xdist worker, and the units spread over both workers.

A small suite laid out like this one (the fault suite's modules that share its local cloud, and plain
modules) is run with ``make test``'s options and this repository's tests/conftest.py; each test records the
worker that ran it. xdist's own ``xdist_group`` mark had stopped working (pytest 9), which no test noticed:
the fault suite's runs, and every module's fixtures, were made in both workers.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import GROUPS, unit_of

REPO = Path(__file__).resolve().parents[2]
PLAIN_MODULES = 6


def _suite_args() -> list[str]:
    """``SUITE_ARGS`` of the Makefile, the options ``make test`` runs the suite with."""
    for line in (REPO / "Makefile").read_text().splitlines():
        if line.startswith("SUITE_ARGS :="):
            return shlex.split(line.split(":=", 1)[1])
    raise AssertionError("no SUITE_ARGS in the Makefile")


def test_every_group_names_a_test_module() -> None:
    for prefix in GROUPS:
        assert (REPO / prefix).is_file(), f"GROUPS names {prefix}, which is not in the repository"


def test_a_unit_runs_in_one_worker_and_the_units_in_both(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the rootdir: node ids as in this repository
    (tmp_path / "tests" / "faults").mkdir(parents=True)
    (tmp_path / "tests" / "core").mkdir()
    for name in ("conftest.py", "slowest_tests.py"):  # the suite's conftest and the plugin it imports
        shutil.copyfile(REPO / "tests" / name, tmp_path / "tests" / name)
    record = tmp_path / "ran.txt"
    tests = "".join(f"def test_{i}():\n    _ran(__name__)\n" for i in range(3))
    body = (
        "import os, time\n"
        "def _ran(name):\n"
        "    time.sleep(0.1)\n"
        f"    with open({str(record)!r}, 'a') as f:\n"
        "        f.write(f\"{os.environ['PYTEST_XDIST_WORKER']} {name}\\n\")\n"
    ) + tests
    grouped = [p for p, g in GROUPS.items() if g == "faults_cloud"]
    assert len(grouped) >= 2
    for module in grouped:
        (tmp_path / module).write_text(body)
    for i in range(PLAIN_MODULES):  # more than the group's tests: the worker that ran the group takes some
        (tmp_path / "tests" / "core" / f"test_plain{i}.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-m", "pytest", *_suite_args(), "-q", "-p", "no:cacheprovider", "tests"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    workers: dict[str, set[str]] = {}
    for line in record.read_text().splitlines():
        worker, module = line.split()
        workers.setdefault(module, set()).add(worker)
    assert len(workers) == len(grouped) + PLAIN_MODULES, workers
    assert all(len(w) == 1 for w in workers.values()), f"a module's tests ran in both workers: {workers}"
    in_group = set().union(*(w for m, w in workers.items() if not m.startswith("test_plain")))
    assert len(in_group) == 1, f"the group's modules ran in {sorted(in_group)}"
    assert set().union(*workers.values()) == {"gw0", "gw1"}, f"the units should spread over both workers: {workers}"


def test_a_unit_is_a_group_or_a_module() -> None:
    assert unit_of("tests/faults/test_faults.py::test_x[a::b]") == "faults_cloud"
    assert unit_of("tests/faults/test_bad_input.py::test_y") == "faults_cloud"
    assert unit_of("tests/faults/test_hooks.py::test_grammar") == "tests/faults/test_hooks.py"
