"""A fork server for the local cloud's child processes (:mod:`.launcher` is its only client): import the
heavy libraries once, fork a process per Lambda invocation or Batch attempt.

Each child still is a process of its own (its own ``os.environ``, its own modules, its own log as stdout
and stderr, no state left by an earlier one), but it no longer pays for importing boto3, Powertools,
pyarrow, numpy, mappy and cutadapt: the server imported them before the first request, and ``fork``
shares them copy-on-write. Those imports take seconds per process, and a run starts four Lambda
invocations and one process per Batch child: without the server they would be most of the local
cloud's overhead. What to import, and what each child runs, the client says: this module imports
nothing of the application.

Only modules that read nothing from the environment at import time may be preloaded: a child's
environment is set after the fork, before it imports its own modules.

Protocol (one ``AF_UNIX`` stream socket): the client sends one JSON line per request, naming the
function to run (``"module:function"``), its ``argv``, environment, working folder and log, together
with three descriptors (``SCM_RIGHTS``): the write ends of two pipes and the child's stdin (or -1 for
/dev/null); the server forks and answers ``{"pid": N}`` once the child has put itself under the request's
limit (:func:`confine`, the first thing it does: it then runs in its cgroup from its first allocation).
The child keeps the first pipe, *done*, open for its whole life: the client sees the child end when its
read end reports EOF, whatever the cause
(return, exception, ``os._exit``, SIGKILL), and until then the pid cannot have been reused, so killing
it is safe. The server keeps the second, *status*: when it reaps the child (woken by ``SIGCHLD``) it
writes the exit code there, as :mod:`subprocess` reports it (negative: the signal that killed it), and
closes it. Reaping in the server accounts the children's CPU time to it, and to whoever waits for it.
The server exits when the socket closes, after its last child.

``python -m localcloud.forkserver FD MODULES [INIT]`` is the server side.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def available() -> bool:
    """Fork and descriptor passing exist here (not on Windows)."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(os, "register_at_fork")


@dataclass(eq=False)  # identity: a set of live children
class Forked:
    """One child of the server, watched through its end-of-life pipe; its exit code comes from the server."""

    pid: int
    _done: int
    _status: int
    #: as :attr:`subprocess.Popen.returncode`: the exit code, or minus the signal that killed the child;
    #: None until it has ended, or if the server went away before reporting it
    returncode: int | None = None
    #: one waiter at a time (the thread that runs the child, and one that kills it on shutdown)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wait(self, timeout: float | None) -> bool:
        """True once the child has ended (and :attr:`returncode` is set); False if ``timeout`` seconds
        passed first."""
        with self._lock:
            if self._done < 0:
                return True
            ready, _, _ = select.select([self._done], [], [], timeout)
            if not ready:
                return False
            read_to_end(self._done)  # the child never writes; EOF means every copy is closed
            self._done = -1
            # the server writes the code as soon as SIGCHLD wakes it; EOF alone means it died first
            ready, _, _ = select.select([self._status], [], [], STATUS_TIMEOUT)
            text = read_to_end(self._status) if ready else b""
            if not ready:
                os.close(self._status)
            self._status = -1
            self.returncode = int(text) if text.strip() else None
            return True

    def kill(self) -> None:
        """SIGKILL the child if it is still running, and wait for it."""
        if self._lock.acquire(blocking=False):
            try:  # ended but not yet waited for: its pid may be reaped and reused already
                running = self._done >= 0 and not select.select([self._done], [], [], 0)[0]
            finally:
                self._lock.release()
        else:  # another thread is waiting for it and has not seen it end
            running = self._done >= 0
        if running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.wait(None)


#: how long to wait for the server to report an ended child's exit code (it is woken by SIGCHLD)
STATUS_TIMEOUT = 30.0


def read_to_end(fd: int) -> bytes:
    """Read ``fd`` to EOF and close it."""
    parts = []
    while chunk := os.read(fd, 4096):
        parts.append(chunk)
    os.close(fd)
    return b"".join(parts)


class ForkServer:
    """The client side: starts the server process and asks it for children."""

    def __init__(
        self, env: dict[str, str], preload: tuple[str, ...] = (), init: str | None = None, log_path: Path | None = None
    ) -> None:
        """``preload``: modules the server imports once; ``init``: ``"module:function"`` it calls first."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        log = log_path.open("ab") if log_path else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno()), ",".join(preload), init or ""],
                pass_fds=[theirs.fileno()],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                # its own session: a Ctrl-C at the terminal is the parent's to handle (it kills the children)
                start_new_session=True,
            )
        finally:
            theirs.close()
            if not isinstance(log, int):
                log.close()
        self._sock = ours
        self._lock = threading.Lock()
        self._buffer = b""

    def spawn(self, request: dict[str, Any], stdin: int = -1) -> Forked:
        """Fork a child that runs ``request`` (:func:`run_program`), reading ``stdin`` (a descriptor the
        caller keeps; -1: /dev/null)."""
        done_r, done_w = os.pipe()
        status_r, status_w = os.pipe()
        theirs = [done_w, status_w]
        sent = [*theirs, stdin] if stdin >= 0 else theirs
        try:
            with self._lock:
                message = json.dumps({**request, "stdin": stdin >= 0}).encode() + b"\n"
                socket.send_fds(self._sock, [message], sent)
                for fd in theirs:
                    os.close(fd)
                theirs = []
                reply = json.loads(self._read_line())
        except BaseException:
            os.close(done_r)
            os.close(status_r)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        if "error" in reply:
            os.close(done_r)
            os.close(status_r)
            raise OSError(f"the fork server could not fork: {reply['error']}")
        return Forked(int(reply["pid"]), done_r, status_r)

    def _read_line(self) -> bytes:
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise OSError(f"the fork server exited (code {self._proc.poll()})")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def close(self) -> None:
        """Stop taking requests; the server exits after its last child (killed by the caller if need be)."""
        with self._lock:
            self._sock.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


# ------------------------------------------------------------------------------------------ server side
#: descriptors every request brings: the child's end-of-life pipe, then the server's exit-status pipe
#: (and a third, the child's stdin, when the request says ``"stdin": true``)
FDS_PER_REQUEST = 2


def _reap(children: dict[int, int], block: bool) -> None:
    """Collect ended children and write each one's exit code to its status pipe."""
    while children:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            return
        fd = children.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):  # the client may have gone
                os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
            os.close(fd)
    for fd in children.values():
        os.close(fd)
    children.clear()


def serve(sock: socket.socket, child: Callable[[dict[str, Any]], int]) -> None:
    """Fork ``child(request)`` for each request until the socket closes; then wait for the children."""
    children: dict[int, int] = {}  # pid -> the write end of its status pipe
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    # SIGCHLD wakes the select below at once: a child's exit code is reported when it ends
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w)
    buffer, fds = b"", []
    while True:
        ready, _, _ = select.select([sock.fileno(), wake_r], [], [], 1.0)
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 4096):
                    pass
        _reap(children, block=False)
        if sock.fileno() not in ready:
            continue
        data, new_fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
        fds.extend(new_fds)
        if not data:
            break
        buffer += data
        while b"\n" in buffer:
            line, _, rest = buffer.partition(b"\n")
            request = json.loads(line)
            wanted = FDS_PER_REQUEST + (1 if request.get("stdin") else 0)
            if len(fds) < wanted:
                break
            buffer = rest
            done, status, *stdin = fds[:wanted]
            del fds[:wanted]
            request["stdin_fd"] = stdin[0] if stdin else -1
            _fork(
                sock, child, request, done=done, status=status, children=children,
                server_fds=(wake_r, wake_w, *fds),
            )
    for fd in fds:
        os.close(fd)
    _reap(children, block=True)


def _fork(
    sock: socket.socket,
    child: Callable[[dict[str, Any]], int],
    request: dict[str, Any],
    *,
    done: int,
    status: int,
    children: dict[int, int],
    server_fds: tuple[int, ...],
) -> None:
    """Fork one child for ``request`` and tell the client its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    stdin = int(request.get("stdin_fd", -1))
    confined_r, confined_w = os.pipe()
    try:
        pid = os.fork()
    except OSError as err:
        for fd in (done, status, stdin, confined_r, confined_w):
            if fd >= 0:
                os.close(fd)
        sock.sendall(json.dumps({"error": str(err)}).encode() + b"\n")
        return
    if pid == 0:  # the child: keeps `done` open until it ends, and none of the server's own descriptors
        code = 1
        try:
            # under its limit first: what it touches before joining its cgroup stays charged to the server's
            # (cgroup v1 does not move charges with a process); then the server may say it started
            os.close(confined_r)
            try:
                confine(request.get("confine"))
            finally:
                os.close(confined_w)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (status, *server_fds, *children.values()):
                os.close(fd)
            sock.close()
            code = child(request)
        except SystemExit as exit_:  # ends as an interpreter would: sys.exit(), argparse's exits
            code = _exit_code(exit_.code)
        except BaseException:
            traceback.print_exc()  # as an interpreter prints an uncaught exception, exit code 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)
    os.close(confined_w)
    read_to_end(confined_r)  # EOF: the child is under its limit (or died trying: its exit code says so)
    os.close(done)
    if stdin >= 0:
        os.close(stdin)
    children[pid] = status
    sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _exit_code(code: object) -> int:
    """The exit code ``SystemExit(code)`` gives an interpreter."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def redirect_output(log_path: str, append: bool, stdin: int = -1) -> None:
    """This (forked) process's stdin from ``stdin`` (or /dev/null), stdout and stderr into ``log_path``."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    log = os.open(log_path, flags, 0o644)
    source = stdin if stdin >= 0 else os.open(os.devnull, os.O_RDONLY)
    os.dup2(source, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(source)
    # new text streams on the redirected descriptors: the inherited objects may not write to fd 1 and 2
    sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115


#: what a request's ``"confine"`` may ask of its child (the caller's memory limit, :mod:`.memory`): join
#: a cgroup (the path of its ``cgroup.procs``) and, when it ends, write the cgroup's resident memory (bytes:
#: the sum of the ``memory.stat`` counters named) to a file; or limit its data segment (bytes) and, when it
#: ends, write its peak resident memory (KiB, its own or a child's, whichever is larger) to a file
JOIN_CGROUP = "cgroup_procs"
RESIDENT_FILE = "resident_file"
RESIDENT_COUNTERS = "resident_counters"
LIMIT_DATA = "rlimit_data"
PEAK_FILE = "peak_file"


def confine(spec: dict[str, Any] | None) -> None:
    """Put this process under the limit ``spec`` names: its children inherit the cgroup (and the rlimit)."""
    if not spec:
        return
    if spec.get(JOIN_CGROUP):
        Path(spec[JOIN_CGROUP]).write_text(str(os.getpid()))
    if spec.get(LIMIT_DATA):
        limit = int(spec[LIMIT_DATA])
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def write_peak(spec: dict[str, Any] | None) -> None:
    """At the child's end: its peak resident memory, or its cgroup's resident memory, where ``spec`` asks."""
    if spec and spec.get(RESIDENT_FILE):
        # the caller samples the cgroup from outside; a child that runs for a few milliseconds (forked, its
        # libraries already loaded) may start and end between two samples, so it takes the last one itself
        stat = Path(spec[JOIN_CGROUP]).with_name("memory.stat")
        with contextlib.suppress(OSError, ValueError):
            counters = dict(line.split(" ", 1) for line in stat.read_text().splitlines())
            resident = sum(int(counters.get(name, 0)) for name in spec[RESIDENT_COUNTERS])
            Path(spec[RESIDENT_FILE]).write_text(str(resident))
    if spec and spec.get(PEAK_FILE):
        # VmHWM, not ru_maxrss: a new interpreter's ru_maxrss keeps the peak of the process it was forked from
        status = Path("/proc/self/status").read_text() if Path("/proc/self/status").is_file() else ""
        own = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
        Path(spec[PEAK_FILE]).write_text(str(max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)))


def run_program(request: dict[str, Any]) -> int:
    """A child's whole life, as ``python -m`` would run the function (already under the request's limit:
    :func:`_fork`): its environment, its log as stdout and stderr, its working folder and ``sys.argv``, then
    ``module:function()``."""
    os.environ.clear()
    os.environ.update(request["env"])
    redirect_output(request["log_path"], append=bool(request.get("append")), stdin=int(request.get("stdin_fd", -1)))
    os.chdir(request["cwd"])
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a new interpreter
    sys.argv = list(request["argv"])
    try:
        code = resolve(request["target"])()
    finally:
        write_peak(request.get("confine"))
    return 0 if code is None else int(code)


def resolve(target: str) -> Callable[[], Any]:
    """The function ``"module:function"`` names, its module imported."""
    module, _, name = target.partition(":")
    function: Callable[[], Any] = getattr(importlib.import_module(module), name)
    return function


def _preload(modules: list[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as err:  # a missing optional library only costs the child its import
            print(f"forkserver: could not preload {name}: {err}", file=sys.stderr)


def main(argv: list[str]) -> int:
    fd, modules = int(argv[0]), [m for m in (argv[1] if len(argv) > 1 else "").split(",") if m]
    init = argv[2] if len(argv) > 2 else ""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles interrupts (and closes the server)
    if init:
        resolve(init)()
    _preload(modules)
    serve(socket.socket(fileno=fd), run_program)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # without tearing the interpreter down: freeing pyarrow's, numpy's and botocore's objects one by one
    # is slow work nobody needs, and the parent waits for the server to end
    os._exit(code)
