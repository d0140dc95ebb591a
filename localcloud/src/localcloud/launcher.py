"""Starting the local cloud's child processes: one way for a Lambda invocation and a Batch attempt alike.

The caller says what to run as a :class:`Program`: a Python function named ``"module:function"``, called
with no arguments in a process of its own with ``sys.argv``, the environment, the working folder and the
log (stdout and stderr) the program names, exactly as ``python -m`` would run it; or any other command,
which is always a new process. The :class:`Launcher` decides how the process is made: forked from a fork
server (:mod:`.forkserver`) that imported the heavy libraries once, where ``fork`` exists and
``LOCALCLOUD_FORK_SERVER`` is not ``0``; otherwise a new interpreter, ``python -m`` this module. Either way
the caller gets a :class:`Child` to feed (stdin), wait for and kill.

This module and its fork server import nothing else: what to preload and what to run are given.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from localcloud import forkserver

#: the setting: ``0`` starts every child as a new interpreter even where ``fork`` exists
FORK_VAR = "LOCALCLOUD_FORK_SERVER"
#: how a new interpreter learns its :attr:`Program.confine` (removed before the function runs)
CONFINE_VAR = "LOCALCLOUD_LAUNCH_CONFINE"


#: How a new process is put under its limit before its first instruction (``python -I -S -c`` this, then
#: READY_FD CGROUP_PROCS DATA_BYTES ARGV...): it joins its cgroup and sets its rlimit, then ``exec``s the
#: program, which so starts inside both. Moving a process into a cgroup after it started leaves what it
#: allocated before charged to the cgroup it came from (cgroup v1 does not move charges with a process): a
#: job that allocated 32 MiB at once was charged 24 MiB. The readiness pipe is closed by the ``exec`` (or
#: carries why it failed), so the caller's first look at the cgroup sees the program in it.
_CONFINE_AND_EXEC = """
import os, resource, sys
ready, procs, data, argv = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
os.set_inheritable(ready, False)
try:
    if procs:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    if data:
        resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    os.execvp(argv[0], argv)
except OSError as err:
    os.write(ready, f"{argv[0]}: {err}".encode())
    os._exit(127)
"""


def fork_enabled(env: dict[str, str] | None = None) -> bool:
    """Fork children from a server: ``fork`` exists here and :data:`FORK_VAR` is not ``0``."""
    return forkserver.available() and (os.environ if env is None else env).get(FORK_VAR, "1") != "0"


@dataclass(frozen=True)
class Program:
    """What one child process runs."""

    #: ``sys.argv`` of a function (``argv[0]`` is the name it sees), or the command line of any other program
    argv: list[str]
    env: dict[str, str]
    cwd: str
    log_path: Path
    #: ``"module:function"`` to call in the child (returns its exit code, or None for 0); None: ``argv``
    #: is a command of its own, started as a new process
    target: str | None = None
    #: the log is appended to, not truncated
    append_log: bool = False
    #: the child's stdin is a pipe the caller writes once (:meth:`Child.send`); otherwise /dev/null
    takes_input: bool = False
    #: the limit the child puts itself under before it runs (:func:`.forkserver.confine`; None: none)
    confine: dict[str, Any] | None = None


class Child(Protocol):
    """A started child process."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None:
        """The exit code, or minus the signal that killed it; None until it has ended (or if unknown)."""

    def send(self, data: bytes) -> None:
        """Write ``data`` to the child's stdin and close it (a child that already ended is no error)."""

    def wait(self, timeout: float | None) -> bool:
        """True once the child has ended; False if ``timeout`` seconds passed first."""

    def kill(self) -> None:
        """SIGKILL the child if it still runs, and wait for it."""


@dataclass(eq=False)
class Popened:
    """A :class:`subprocess.Popen` as a :class:`Child`."""

    proc: subprocess.Popen[bytes]
    pid: int = field(init=False)
    returncode: int | None = None

    def __post_init__(self) -> None:
        self.pid = self.proc.pid

    def send(self, data: bytes) -> None:
        _send(self.proc.stdin.fileno() if self.proc.stdin else -1, data)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def wait(self, timeout: float | None) -> bool:
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        self.proc.kill()
        self.returncode = self.proc.wait()


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    with contextlib.suppress(BrokenPipeError):  # the child ended without reading: its outcome says why
        while view and fd >= 0:
            view = view[os.write(fd, view) :]


@dataclass(eq=False)
class _ForkedChild:
    """A child of the fork server, with the write end of its stdin pipe."""

    forked: forkserver.Forked
    stdin: int
    pid: int = field(init=False)

    def __post_init__(self) -> None:
        self.pid = self.forked.pid

    @property
    def returncode(self) -> int | None:
        return self.forked.returncode

    def send(self, data: bytes) -> None:
        if self.stdin >= 0:
            _send(self.stdin, data)
            os.close(self.stdin)
            self.stdin = -1

    def wait(self, timeout: float | None) -> bool:
        return self.forked.wait(timeout)

    def kill(self) -> None:
        self.forked.kill()
        if self.stdin >= 0:
            os.close(self.stdin)
            self.stdin = -1


class Launcher:
    """Makes the child processes: forked from one server (started on first use), or new interpreters."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        fork: bool | None = None,
        preload: tuple[str, ...] = (),
        init: str | None = None,
        server_log: Path | None = None,
    ) -> None:
        #: the fork server's environment, modules it imports once and ``"module:function"`` it calls first
        self._env, self._preload, self._init, self._server_log = env, preload, init, server_log
        self.forks = fork_enabled() if fork is None else fork
        self._server: forkserver.ForkServer | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def starts_cold(self) -> bool:
        """A child pays for its own imports (a new interpreter): worth starting ahead of its work."""
        return not self.forks

    def prepare(self) -> None:
        """Start the fork server now (nothing without one): its imports overlap whatever comes next."""
        if self.forks:
            self._fork_server()

    def _fork_server(self) -> forkserver.ForkServer:
        with self._lock:
            if self._closed:
                raise RuntimeError("the launcher is closed")
            if self._server is None:
                if self._server_log is not None:
                    self._server_log.parent.mkdir(parents=True, exist_ok=True)
                self._server = forkserver.ForkServer(
                    self._env, preload=self._preload, init=self._init, log_path=self._server_log
                )
            return self._server

    def start(self, program: Program) -> Child:
        """Start ``program``; raises :class:`OSError` (or :class:`RuntimeError` once closed) if it cannot."""
        program.log_path.parent.mkdir(parents=True, exist_ok=True)
        if program.target is not None and self.forks:
            return self._fork(program)
        argv = program.argv if program.target is None else [sys.executable, "-m", __name__, program.target,
                                                             *program.argv]
        env = program.env
        spec = program.confine or {}
        if spec and program.target is not None:  # the peak file, written when the function returns
            env = {**env, CONFINE_VAR: json.dumps(spec)}
        joins = bool(spec.get(forkserver.JOIN_CGROUP) or spec.get(forkserver.LIMIT_DATA))
        ready_r, ready_w = os.pipe() if joins else (-1, -1)
        if joins:  # the limit applied before the program's first instruction: see _CONFINE_AND_EXEC
            argv = [sys.executable, "-I", "-S", "-c", _CONFINE_AND_EXEC, str(ready_w),
                    spec.get(forkserver.JOIN_CGROUP) or "", str(spec.get(forkserver.LIMIT_DATA) or 0), *argv]
        try:
            with program.log_path.open("ab" if program.append_log else "wb") as log:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE if program.takes_input else subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=program.cwd,
                    pass_fds=(ready_w,) if joins else (),
                )
        finally:
            if joins:
                os.close(ready_w)
        if joins:
            # EOF once the program itself runs, in its cgroup (or the wrapper failed: its reason)
            error = forkserver.read_to_end(ready_r)
            if error:
                proc.wait()
                raise OSError(error.decode(errors="replace"))
        return Popened(proc)

    def _fork(self, program: Program) -> Child:
        stdin_r, stdin_w = os.pipe() if program.takes_input else (-1, -1)
        request = {
            "target": program.target,
            "argv": program.argv,
            "env": program.env,
            "cwd": program.cwd,
            "log_path": str(program.log_path),
            "append": program.append_log,
            "confine": program.confine,
        }
        try:
            forked = self._fork_server().spawn(request, stdin=stdin_r)
        except BaseException:
            if stdin_w >= 0:
                os.close(stdin_w)
            raise
        finally:
            if stdin_r >= 0:
                os.close(stdin_r)
        return _ForkedChild(forked, stdin_w)

    def close(self) -> None:
        """Stop the fork server (after its last child; the callers kill theirs first)."""
        with self._lock:
            self._closed, server, self._server = True, self._server, None
        if server is not None:
            server.close()


def main(argv: list[str]) -> int:
    """A new interpreter's side: ``python -m localcloud.launcher MODULE:FUNCTION ARGV0 ARGS...``."""
    target, sys.argv = argv[0], argv[1:]
    # its cgroup and rlimit were applied before this interpreter started (_CONFINE_AND_EXEC)
    spec = json.loads(os.environ.pop(CONFINE_VAR, "null"))
    try:
        code = forkserver.resolve(target)()
    finally:
        forkserver.write_peak(spec)
    return 0 if code is None else int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
