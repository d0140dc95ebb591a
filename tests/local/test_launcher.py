"""The launcher: a child runs the function it is told to, as ``python -m`` would, forked or as a new interpreter."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud import forkserver
from localcloud.launcher import Launcher, Program, fork_enabled

#: a module of the test's own: the launcher knows nothing of it until a program names it
PROGRAM = """
import os, sys
def main():
    data = sys.stdin.read()
    print("argv", sys.argv, "cwd", os.getcwd(), "who", os.environ["WHO"], "stdin", data)
    return int(os.environ.get("EXIT", "0"))
def sleep():
    import time
    time.sleep(60)
"""


@pytest.fixture(params=["forked", "interpreter"])
def launcher(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Launcher]:
    if request.param == "forked" and not fork_enabled({}):
        pytest.skip("no fork here")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "told_program.py").write_text(PROGRAM)
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join([str(tmp_path / "lib"), *sys.path])}
    made = Launcher(env, fork=request.param == "forked", server_log=tmp_path / "server.log")
    yield made
    made.close()


def _program(tmp_path: Path, n: int, target: str, **env: str) -> Program:
    return Program(
        argv=["told", "a", "b"],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join([str(tmp_path / "lib"), *sys.path]),
             **env},
        cwd=str(tmp_path),
        log_path=tmp_path / "logs" / f"{n}.log",
        target=target,
        takes_input=True,
    )


def test_the_child_runs_the_named_function_with_its_argv_environment_folder_input_and_log(
    launcher: Launcher, tmp_path: Path
) -> None:
    children = [launcher.start(_program(tmp_path, n, "told_program:main", WHO=who, EXIT=str(n)))
                for n, who in enumerate(["x", "y"])]
    for n, child in enumerate(children):
        child.send(f"input {n}".encode())
    assert all(c.wait(60) for c in children)
    assert [c.returncode for c in children] == [0, 1]
    assert (tmp_path / "logs" / "1.log").read_text() == (
        f"argv ['told', 'a', 'b'] cwd {tmp_path} who y stdin input 1\n"
    )


def test_a_child_that_runs_out_of_time_is_killed(launcher: Launcher, tmp_path: Path) -> None:
    child = launcher.start(_program(tmp_path, 0, "told_program:sleep", WHO="z"))
    assert not child.wait(0.2)
    child.kill()
    assert child.wait(0) and child.returncode == -signal.SIGKILL


def test_a_command_is_a_new_process_whatever_the_mode(launcher: Launcher, tmp_path: Path) -> None:
    program = Program(["sh", "-c", "echo $WHO; exit 3"], {"WHO": "w"}, str(tmp_path), tmp_path / "cmd.log")
    child = launcher.start(program)
    assert child.wait(60) and child.returncode == 3
    assert (tmp_path / "cmd.log").read_text() == "w\n"


def test_a_limited_command_runs_under_its_rlimit_from_its_first_instruction(launcher: Launcher, tmp_path: Path) -> None:
    """A command under a limit is started inside it (joined and limited, then ``exec``'d): what it allocates
    from its start is within it, and a command that cannot start fails to start, as without a limit."""
    limit = 256 << 20
    program = Program(["sh", "-c", "ulimit -d; exit 4"], {"PATH": os.environ.get("PATH", "")}, str(tmp_path),
                      tmp_path / "cmd.log", confine={forkserver.LIMIT_DATA: limit})
    child = launcher.start(program)
    assert child.wait(60) and child.returncode == 4
    assert (tmp_path / "cmd.log").read_text() == f"{limit >> 10}\n"  # sh's ulimit -d: KiB
    missing = Program(["no-such-command-here"], {"PATH": "/usr/bin:/bin"}, str(tmp_path), tmp_path / "missing.log",
                      confine={forkserver.LIMIT_DATA: limit})
    with pytest.raises(OSError, match="no-such-command-here"):
        launcher.start(missing)
