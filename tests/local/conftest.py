"""Fixtures of the local cloud tests: a small app (``fixtures/app``) deployed on the local cloud."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcloud import containers
from localcloud.cloud import LocalCloud
from localcloud.state import StateDir
from seqlake.local import adapter  # noqa: F401 - imported: the local cloud runs seqlake (contract.use)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
APP = FIXTURES / "app"


@dataclass(frozen=True)
class LocalRun:
    """A finished ``seqlake local run ARGS --home HOME``."""

    args: tuple[str, ...]
    home: Path


def seqlake_command(*args: str) -> subprocess.CompletedProcess[str]:
    """``seqlake ARGS`` as a user runs it: a process of its own (a test process may hold another test's moto
    mocks), children as processes unless ARGS say ``--containers``."""
    env = {k: v for k, v in os.environ.items() if k != containers.var()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "seqlake", *args], env=env, text=True, capture_output=True,
                          timeout=900, check=False)


@pytest.fixture(scope="session")
def miseq_local_run(miseq: tuple[Path, Path], reference: Path, tmp_path_factory: pytest.TempPathFactory) -> LocalRun:
    """One ``seqlake local run`` of the real MiSeq pair, children as processes, made once for the worker:
    tests/local/test_e2e.py checks its tables against seqkit and minimap2, tests/local/test_containers.py
    against the same arguments run with ``--containers``. The two modules are one group (tests/conftest.py),
    so one worker runs both and the run is made once (each made its own: ~30 CPU s twice)."""
    args = ("local", "run", str(miseq[0]), str(miseq[1]), "--reference", str(reference), "--sample", "miseq",
            "--jobs", "2")
    home = tmp_path_factory.mktemp("miseq-local-run") / "home"
    proc = seqlake_command(*args, "--home", str(home))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return LocalRun(args, home)


@pytest.fixture(scope="module")
def fixture_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The fixture app on a running local cloud; its Batch children import ``fixture_worker``."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIXTURES), old]))
    cloud = LocalCloud(state=StateDir(tmp_path_factory.mktemp("home")), jobs=2, repo=APP, quiet=True)
    try:
        cloud.start()
        yield cloud
    finally:
        cloud.stop()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(params=["forked", "interpreter"])
def launch_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A test run twice: children forked from the fork server, and each a new interpreter (its fallback)."""
    from localcloud import launcher

    if request.param == "forked" and not launcher.fork_enabled({}):
        pytest.skip("no fork here")
    monkeypatch.setenv(launcher.FORK_VAR, "1" if request.param == "forked" else "0")
    return str(request.param)


@pytest.fixture(params=["cgroup2", "cgroup1", "rlimit"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """How the local cloud caps memory (:mod:`localcloud.memory`): the cgroup version this machine
    lets us make (the other skipped, naming the machine's: a machine has one memory hierarchy in use), and
    the rlimit it falls back to without one (made so by hiding the cgroup file system)."""
    from localcloud import memory

    if request.param != "rlimit":
        probe = memory.MemoryLimits()
        probe.close()
        if probe.mode != request.param:
            pytest.skip(f"no writable {request.param} memory cgroup here: this machine's memory cap is {probe.mode} "
                        "(cgroup2: v2 with the memory controller delegated; cgroup1: v1's memory hierarchy)")
    else:
        monkeypatch.setattr(memory, "CGROUP_ROOT", tmp_path / "no-cgroups")
    return str(request.param)
