"""A fork server for the local cloud's Lambda invocations and Batch children: import the heavy libraries
once, fork a process per event or per job attempt.

Each invocation and each attempt still gets a process of its own (its own ``os.environ``, its own
``app`` module, its own log as stdout and stderr, no state left by an earlier one), but it no longer pays
for importing boto3, Powertools, pyarrow, numpy, mappy and cutadapt: the server imported them before the
first request, and ``fork`` shares them copy-on-write. Those imports take seconds per process, and a
run starts four Lambda invocations and one process per Batch child: without the server they would be
most of the local cloud's overhead.

A Batch child runs the worker's real entry point, :func:`seqlake.cli.run` with the container's
arguments, exactly what ``python -m seqlake ...`` runs after its imports (:func:`run_command`).

Only modules that read nothing from the environment at import time are preloaded: Powertools' ``Logger``,
``Tracer`` and ``Metrics`` objects (``seqlake.aws.observability``) read the function's environment when
they are made, so the handler's own module, imported in the child after its environment is set, makes them.

Protocol (one ``AF_UNIX`` stream socket): the client sends one JSON line per request together with the
write ends of two pipes (``SCM_RIGHTS``); the server forks and answers ``{"pid": N}``. The child keeps
the first, *done*, open for its whole life: the client sees the child end when its read end reports EOF,
whatever the cause (return, exception, ``os._exit``, SIGKILL), and until then the pid cannot have been
reused, so killing it is safe. The server keeps the second, *status*: when it reaps the child (woken by
``SIGCHLD``) it writes the exit code there, as :mod:`subprocess` reports it (negative: the signal that
killed it), and closes it. Reaping in the server accounts the children's CPU time to it, and to whoever
waits for it. The server exits when the socket closes, after its last child.

``python -m seqlake.localcloud.forkserver FD`` is the server side.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
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

#: imported once by the server; none of them reads the environment or makes a client at import time
PRELOAD: tuple[str, ...] = (
    "boto3",
    "botocore.session",
    "botocore.client",
    "jsonschema",
    "fastjsonschema",
    "numpy",
    "pyarrow",
    "pyarrow.parquet",
    "pyarrow.compute",
    "dnaio",
    "isal.igzip",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.tracing.tracer",
    "aws_lambda_powertools.utilities.validation",
    "aws_lambda_powertools.utilities.typing",
    "aws_lambda_powertools.utilities.data_classes",
    "seqlake.plan",
    "seqlake.storage",
    "seqlake.samplesheet",
    "seqlake.tables",
    "seqlake.parquet_io",
    "seqlake.merge",
    "seqlake.gzindex",
    # the worker (Batch children): its entry point and what a shard needs
    "seqlake.cli",
    "seqlake.worker_main",
    "seqlake.worker",
    "seqlake.align",
    "seqlake.trim",
    "seqlake.qc",
    "seqlake.coverage",
    "seqlake.shards",
    "mappy",
    "cutadapt.adapters",
    "cutadapt.qualtrim",
)

#: the services the handlers make clients for: their models are parsed once, in the server
WARM_SERVICES: tuple[str, ...] = ("s3", "stepfunctions", "glue", "batch", "logs", "sts", "sqs")


def available() -> bool:
    """Fork and descriptor passing exist here (not on Windows)."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(os, "register_at_fork")


def enabled() -> bool:
    """Use the fork server: it is available and ``SEQLAKE_FORK_SERVER`` is not ``0``."""
    return available() and os.environ.get("SEQLAKE_FORK_SERVER", "1") != "0"


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
            _drain(self._done)  # the child never writes; EOF means every copy is closed
            self._done = -1
            # the server writes the code as soon as SIGCHLD wakes it; EOF alone means it died first
            ready, _, _ = select.select([self._status], [], [], STATUS_TIMEOUT)
            text = _drain(self._status) if ready else b""
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


def _drain(fd: int) -> bytes:
    """Read ``fd`` to EOF and close it."""
    parts = []
    while chunk := os.read(fd, 4096):
        parts.append(chunk)
    os.close(fd)
    return b"".join(parts)


class ForkServer:
    """The client side: starts the server process and asks it for children."""

    def __init__(self, env: dict[str, str], preload: tuple[str, ...] = PRELOAD, log_path: Path | None = None) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        log = log_path.open("ab") if log_path else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "seqlake.localcloud.forkserver", str(theirs.fileno()), ",".join(preload)],
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

    def spawn(self, request: dict[str, Any]) -> Forked:
        """Fork a child that serves ``request``: ``{"kind": "lambda", ...}`` runs
        :func:`seqlake.localcloud.lambdas.run_child`, ``{"kind": "command", ...}`` :func:`run_command`."""
        done_r, done_w = os.pipe()
        status_r, status_w = os.pipe()
        theirs = [done_w, status_w]
        try:
            with self._lock:
                socket.send_fds(self._sock, [json.dumps(request).encode() + b"\n"], theirs)
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
#: descriptors a request brings: the child's end-of-life pipe, then the server's exit-status pipe
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
        while b"\n" in buffer and len(fds) >= FDS_PER_REQUEST:
            line, _, buffer = buffer.partition(b"\n")
            done, status = fds[:FDS_PER_REQUEST]
            del fds[:FDS_PER_REQUEST]
            _fork(
                sock, child, json.loads(line), done=done, status=status, children=children,
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
    try:
        pid = os.fork()
    except OSError as err:
        os.close(done)
        os.close(status)
        sock.sendall(json.dumps({"error": str(err)}).encode() + b"\n")
        return
    if pid == 0:  # the child: keeps `done` open until it ends, and none of the server's own descriptors
        code = 1
        try:
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
    os.close(done)
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


def redirect_output(log_path: str, append: bool) -> None:
    """This (forked) process's stdin from /dev/null, stdout and stderr into ``log_path``."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    log = os.open(log_path, flags, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    # new text streams on the redirected descriptors: the inherited objects may not write to fd 1 and 2
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115


def run_command(request: dict[str, Any]) -> int:
    """A Batch child's whole life: ``python -m seqlake ARGS`` with the job's environment, in ``cwd``,
    stdout and stderr into the attempt's log. Runs the same :func:`seqlake.cli.run` that
    ``python -m seqlake`` runs, which exits the process."""
    os.environ.clear()
    os.environ.update(request["env"])
    redirect_output(request["log_path"], append=False)
    os.chdir(request["cwd"])
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a new interpreter
    sys.argv = [sys.argv[0], *request["args"]]
    from seqlake.cli import run

    run()


def _serve_request(request: dict[str, Any]) -> int:
    kind = request.get("kind", "lambda")
    if kind == "command":
        return run_command(request)
    from seqlake.localcloud.lambdas import run_child

    return run_child(request)


def _preload(modules: list[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as err:  # a missing optional library only costs the child its import
            print(f"forkserver: could not preload {name}: {err}", file=sys.stderr)


def main(argv: list[str]) -> int:
    fd, modules = int(argv[0]), [m for m in (argv[1] if len(argv) > 1 else "").split(",") if m]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles interrupts (and closes the server)
    from seqlake.localcloud import botocore_loader

    botocore_loader.share()
    _preload(modules)
    botocore_loader.warm(WARM_SERVICES)
    serve(socket.socket(fileno=fd), _serve_request)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # without tearing the interpreter down: freeing pyarrow's, numpy's and botocore's objects one by one
    # is slow work nobody needs, and the parent waits for the server to end
    os._exit(code)
