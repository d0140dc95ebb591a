"""Fixtures of the local cloud tests: a small app (``fixtures/app``) deployed on the local cloud."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from seqlake.localcloud.cloud import LocalCloud
from seqlake.localcloud.state import StateDir

FIXTURES = Path(__file__).resolve().parent / "fixtures"
APP = FIXTURES / "app"


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
    from seqlake.localcloud import launcher

    if request.param == "forked" and not launcher.fork_enabled({}):
        pytest.skip("no fork here")
    monkeypatch.setenv(launcher.FORK_VAR, "1" if request.param == "forked" else "0")
    return str(request.param)
