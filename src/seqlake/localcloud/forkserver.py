"""A fork server for local Lambda invocations: import the heavy libraries once, fork a process per event.

Each invocation still gets a process of its own (its own ``os.environ``, its own ``app`` module, no state
left by an earlier event), but it no longer pays for importing boto3, Powertools, pyarrow and numpy: the
server imported them before the first event, and ``fork`` shares them copy-on-write. On one core that was
most of the local cloud's overhead: four invocations per run at 1-2.5 s of imports each.

Only modules that read nothing from the environment at import time are preloaded: Powertools' ``Logger``,
``Tracer`` and ``Metrics`` objects (``seqlake.aws.observability``) read the function's environment when
they are made, so the handler's own module, imported in the child after its environment is set, makes them.

Protocol (one ``AF_UNIX`` stream socket): the client sends one JSON line per invocation together with
the write end of a pipe (``SCM_RIGHTS``); the server forks, the child keeps that write end open for its
whole life, the server answers ``{"pid": N}``. The client sees the child end when the pipe's read end
reports EOF, whatever the cause (return, exception, ``os._exit``, SIGKILL). The server reaps its children
(so their CPU time is accounted to it, and to whoever waits for it) and exits when the socket closes,
after its last child.

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
from collections.abc import Callable
from dataclasses import dataclass
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
)

#: the services the handlers make clients for: their models are parsed once, in the server
WARM_SERVICES: tuple[str, ...] = ("s3", "stepfunctions", "glue", "batch", "logs", "sts")


def available() -> bool:
    """Fork and descriptor passing exist here (not on Windows)."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(os, "register_at_fork")


@dataclass(eq=False)  # identity: a set of live children
class Forked:
    """One child of the server, watched through its end-of-life pipe."""

    pid: int
    _done: int

    def wait(self, timeout: float | None) -> bool:
        """True once the child has ended; False if ``timeout`` seconds passed first."""
        if self._done < 0:
            return True
        ready, _, _ = select.select([self._done], [], [], timeout)
        if not ready:
            return False
        while os.read(self._done, 4096):  # the child never writes; EOF means every copy is closed
            pass
        os.close(self._done)
        self._done = -1
        return True

    def kill(self) -> None:
        if self._done >= 0:  # still running: the pid cannot have been reused yet
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.wait(None)


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
        """Fork a child that runs :func:`_run_child` on ``request``."""
        done_r, done_w = os.pipe()
        try:
            with self._lock:
                socket.send_fds(self._sock, [json.dumps(request).encode() + b"\n"], [done_w])
                os.close(done_w)
                done_w = -1
                reply = json.loads(self._read_line())
        except BaseException:
            os.close(done_r)
            raise
        finally:
            if done_w >= 0:
                os.close(done_w)
        if "error" in reply:
            os.close(done_r)
            raise OSError(f"the Lambda fork server could not fork: {reply['error']}")
        return Forked(int(reply["pid"]), done_r)

    def _read_line(self) -> bytes:
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise OSError(f"the Lambda fork server exited (code {self._proc.poll()})")
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
def _reap(children: set[int], block: bool) -> None:
    while children:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)


def serve(sock: socket.socket, child: Callable[[dict[str, Any]], int]) -> None:
    """Fork ``child(request)`` for each request until the socket closes; then wait for the children."""
    children: set[int] = set()
    buffer, fds = b"", []
    while True:
        ready, _, _ = select.select([sock], [], [], 1.0)
        _reap(children, block=False)
        if not ready:
            continue
        data, new_fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
        fds.extend(new_fds)
        if not data:
            break
        buffer += data
        while b"\n" in buffer and fds:
            line, _, buffer = buffer.partition(b"\n")
            done = fds.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                pid = os.fork()
            except OSError as err:
                os.close(done)
                sock.sendall(json.dumps({"error": str(err)}).encode() + b"\n")
                continue
            if pid == 0:  # the child: keeps `done` open until it ends
                code = 1
                try:
                    sock.close()
                    code = child(json.loads(line))
                finally:
                    os._exit(code)
            os.close(done)
            children.add(pid)
            sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    for fd in fds:
        os.close(fd)
    _reap(children, block=True)


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
    from seqlake.localcloud.lambdas import run_child

    serve(socket.socket(fileno=fd), run_child)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
