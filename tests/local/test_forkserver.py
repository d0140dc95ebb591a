"""The fork server: a process per Lambda invocation or Batch attempt, forked from one that imported the libraries."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from seqlake.localcloud import forkserver
from seqlake.localcloud.lambdas import run_child

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
        "env": {"WHO": who, "PATH": os.environ.get("PATH", "")},
        "code_dir": str(code),
        "handler": "app.handler",
        "result_file": str(tmp_path / f"result-{n}.json"),
        "log_path": str(tmp_path / f"log-{n}.txt"),
        "event": json.dumps(event),
    }


@pytest.fixture
def server(tmp_path: Path) -> Any:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    srv = forkserver.ForkServer(env, preload=("json",), log_path=tmp_path / "server.log")
    yield srv
    srv.close()


def test_each_request_is_its_own_process_with_its_own_environment(server: Any, tmp_path: Path) -> None:
    children = [server.spawn(_request(tmp_path, n, who, {})) for n, who in enumerate(["a", "b", "a"])]
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
    sleeper = server.spawn(_request(tmp_path, 0, "a", {"sleep": 60}))
    assert not sleeper.wait(0.2)
    t0 = time.monotonic()
    sleeper.kill()
    assert sleeper.wait(0) and time.monotonic() - t0 < 10
    assert sleeper.returncode == -signal.SIGKILL  # as subprocess reports a killed child
    assert not (tmp_path / "result-0.json").exists()
    quitter = server.spawn(_request(tmp_path, 1, "a", {"exit": 3}))
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
        srv.spawn(_request(tmp_path, 0, "a", {}))


def test_run_child_reports_an_import_error_as_the_invocations_error(tmp_path: Path) -> None:
    req = _request(tmp_path, 0, "a", {})
    (Path(req["code_dir"]) / "app.py").write_text("raise ImportError('no such library')\n")
    pid = os.fork()
    if pid == 0:  # run_child redirects this process's stdout and environment: do it in a child
        code = 1
        try:
            code = run_child(req)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    out = json.loads(Path(req["result_file"]).read_text())
    assert out["errorType"] == "ImportError" and out["errorMessage"] == "no such library"
    assert "ImportError: no such library" in Path(req["log_path"]).read_text()


def test_the_server_ignores_ctrl_c(server: Any, tmp_path: Path) -> None:
    assert server.spawn(_request(tmp_path, 0, "a", {})).wait(60)  # up and serving
    assert os.getpgid(server._proc.pid) != os.getpgid(0)  # a terminal's Ctrl-C does not reach it
    os.kill(server._proc.pid, signal.SIGINT)  # nor does a direct one: the parent handles interrupts
    child = server.spawn(_request(tmp_path, 1, "b", {}))
    assert child.wait(60)
    assert json.loads((tmp_path / "result-1.json").read_text())["result"]["who"] == "b"
