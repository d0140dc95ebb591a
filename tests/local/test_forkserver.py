"""The fork server: a process per Lambda invocation or Batch attempt, forked from one that imported the libraries.

Its children here run the local Lambda's child side (:mod:`localcloud.lambda_runtime`), as the
launcher asks the server to: a function named ``module:function`` with ``sys.argv``, the event on stdin."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from localcloud import forkserver
from localcloud.lambda_runtime import TARGET

pytestmark = pytest.mark.skipif(not forkserver.available(), reason="no fork here")

HANDLER = """
import os, sys, time
def handler(event, context):
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("exit"):
        os._exit(event["exit"])
    print("log line of", os.environ["WHO"])
    return {"who": os.environ["WHO"], "pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(),
            "preloaded": "json" in sys.modules, "app_modules": sorted(m for m in sys.modules if m == "app")}
"""


def _request(tmp_path: Path, n: int, who: str, event: dict[str, Any]) -> dict[str, Any]:
    code = tmp_path / "code"
    if not code.is_dir():  # written once: rewriting it while an earlier child imports it races
        code.mkdir()
        (code / "app.py").write_text(HANDLER)
    return {
        "target": TARGET,
        "argv": ["lambda", str(code), "app.handler", str(tmp_path / f"result-{n}.json")],
        "env": {"WHO": who, "PATH": os.environ.get("PATH", "")},
        "cwd": str(code),
        "log_path": str(tmp_path / f"log-{n}.txt"),
        "append": True,
        "event": json.dumps(event),
    }


def _spawn(server: forkserver.ForkServer, request: dict[str, Any]) -> forkserver.Forked:
    """A child for ``request``, its event written to its stdin."""
    stdin_r, stdin_w = os.pipe()
    try:
        child = server.spawn(request, stdin=stdin_r)
    finally:
        os.close(stdin_r)
    os.write(stdin_w, request["event"].encode())
    os.close(stdin_w)
    return child


@pytest.fixture
def server(tmp_path: Path) -> Any:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    srv = forkserver.ForkServer(env, preload=("json",), log_path=tmp_path / "server.log")
    yield srv
    srv.close()


def test_each_request_is_its_own_process_with_its_own_environment(server: Any, tmp_path: Path) -> None:
    children = [_spawn(server, _request(tmp_path, n, who, {})) for n, who in enumerate(["a", "b", "a"])]
    assert all(c.wait(60) for c in children)
    assert [c.returncode for c in children] == [0, 0, 0]
    results = [json.loads((tmp_path / f"result-{n}.json").read_text())["result"] for n in range(3)]
    assert [r["who"] for r in results] == ["a", "b", "a"]
    assert len({r["pid"] for r in results}) == 3
    assert {r["pid"] for r in results} == {c.pid for c in children}
    assert len({r["ppid"] for r in results}) == 1 and results[0]["ppid"] != os.getpid()  # the server forked them
    assert all(r["preloaded"] and r["cwd"] == str(tmp_path / "code") for r in results)
    assert (tmp_path / "log-1.txt").read_text() == "log line of b\n"  # stdout is the invocation's log


def test_a_killed_or_exiting_child_is_seen_to_end(server: Any, tmp_path: Path) -> None:
    sleeper = _spawn(server, _request(tmp_path, 0, "a", {"sleep": 60}))
    assert not sleeper.wait(0.2)
    t0 = time.monotonic()
    sleeper.kill()
    assert sleeper.wait(0) and time.monotonic() - t0 < 10
    assert sleeper.returncode == -signal.SIGKILL  # as subprocess reports a killed child
    assert not (tmp_path / "result-0.json").exists()
    quitter = _spawn(server, _request(tmp_path, 1, "a", {"exit": 3}))
    assert quitter.wait(60)
    assert quitter.returncode == 3
    assert not (tmp_path / "result-1.json").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(sleeper.pid, 0)  # reaped by the server, not left a zombie


def test_close_stops_the_server(tmp_path: Path) -> None:
    srv = forkserver.ForkServer({"PATH": os.environ.get("PATH", "")}, preload=())
    proc = srv._proc
    srv.close()
    assert proc.returncode == 0
    with pytest.raises(OSError):
        _spawn(srv, _request(tmp_path, 0, "a", {}))


def test_an_import_error_is_the_invocations_error(server: Any, tmp_path: Path) -> None:
    req = _request(tmp_path, 0, "a", {})
    (tmp_path / "code" / "app.py").write_text("raise ImportError('no such library')\n")
    child = _spawn(server, req)
    assert child.wait(60) and child.returncode == 0
    out = json.loads((tmp_path / "result-0.json").read_text())
    assert out["errorType"] == "ImportError" and out["errorMessage"] == "no such library"
    assert "ImportError: no such library" in Path(req["log_path"]).read_text()


def test_the_server_ignores_ctrl_c(server: Any, tmp_path: Path) -> None:
    assert _spawn(server, _request(tmp_path, 0, "a", {})).wait(60)  # up and serving
    assert os.getpgid(server._proc.pid) != os.getpgid(0)  # a terminal's Ctrl-C does not reach it
    os.kill(server._proc.pid, signal.SIGINT)  # nor does a direct one: the parent handles interrupts
    child = _spawn(server, _request(tmp_path, 1, "b", {}))
    assert child.wait(60)
    assert json.loads((tmp_path / "result-1.json").read_text())["result"]["who"] == "b"
