"""Forked helper processes that report how they ended.

A helper forked to count or to align beside its parent must not fail in silence: whatever it raises,
it sends the exception (pickled; its text when it cannot be pickled) and its formatted traceback to the
parent through a pipe, then leaves with exit status 1. The parent, joining it, re-raises that exception
with a note naming the helper, its exit status and the helper's traceback (cutadapt's parallel runners
do the same: a worker sends ``("exception", e, traceback)`` and the main process re-raises it). A helper
that ends without a word with a non-zero status, or is killed by a signal, is a :class:`HelperError`
naming the status.

Forking copies only the calling thread; a lock another thread held at that moment stays held forever in
the child. So :func:`fork_helper` refuses to fork unless this thread is the process's only Python thread
(:func:`can_fork`); callers that may run on a thread choose their threaded way instead.
"""

from __future__ import annotations

import os
import pickle
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

#: exit status of a helper that raised
HELPER_FAILED = 1
#: bytes of a report at most: under a pipe's capacity (64 KiB on Linux), so writing it never waits for a
#: parent that is itself waiting on the helper's other pipes
REPORT_MAX = 48 << 10


class HelperError(RuntimeError):
    """A helper process ended badly without telling why (killed by a signal, or a non-zero exit)."""


def other_threads() -> list[str]:
    """Names of the Python threads running besides this one."""
    me = threading.current_thread()
    return [t.name for t in threading.enumerate() if t is not me]


def can_fork() -> bool:
    """Whether this process may fork now: it can, and no other thread runs."""
    return hasattr(os, "fork") and not other_threads()


def require_single_thread(what: str) -> None:
    """Raise RuntimeError naming the other threads when any runs (``what`` is about to fork)."""
    others = other_threads()
    if others:
        raise RuntimeError(f"{what}: cannot fork while other threads run ({', '.join(others)}): a lock one of "
                           "them holds would stay held in the forked process")


@dataclass
class Helper:
    """A forked helper process and the read end of the pipe its report comes through."""

    pid: int
    name: str
    report_fd: int
    #: the helper has been waited for (join and reap may both be called: the second does nothing)
    ended: bool = False

    def join(self) -> None:
        """Wait for the helper to end; re-raise its exception, or HelperError for a bad exit."""
        if self.ended:
            return
        report = self._read_report()
        code = self._wait()
        if report:
            raise _reraised(report, self.name, self.pid, code)
        if code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"ended with exit status {code}"
            raise HelperError(f"{self.name} (pid {self.pid}) {how}")

    def reap(self) -> BaseException | None:
        """Wait for the helper to end while the parent fails for its own reason: the helper's
        exception, if it raised one, is returned (to be attached), never raised."""
        if self.ended:
            return None
        report = self._read_report()
        code = self._wait()
        return _reraised(report, self.name, self.pid, code) if report else None

    def _read_report(self) -> bytes:
        chunks = []
        try:
            while chunk := os.read(self.report_fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(self.report_fd)
        return b"".join(chunks)

    def _wait(self) -> int:
        self.ended = True
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def fork_helper(name: str, work: Callable[[], None]) -> Helper:
    """Run ``work`` in a forked process named ``name`` (in messages); join the returned Helper.

    The helper leaves with ``os._exit``: it never runs the parent's exit handlers nor flushes its
    buffers twice; 0 when ``work`` returned, :data:`HELPER_FAILED` after reporting what it raised.
    """
    require_single_thread(name)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the helper: coverage does not follow a fork)
        code = 0
        try:
            os.close(r)
            work()
        except BaseException as err:
            code = HELPER_FAILED
            _send_report(w, err)
        finally:
            os._exit(code)
    os.close(w)
    return Helper(pid, name, r)


def _send_report(fd: int, err: BaseException) -> None:  # pragma: no cover  (in a helper)
    text = "".join(traceback.format_exception(err))
    try:
        payload = pickle.dumps((err, text))
        pickle.loads(payload)  # noqa: S301 - our own bytes; an exception whose constructor takes other arguments fails here
    except Exception:
        payload = pickle.dumps((HelperError(f"{type(err).__name__}: {err}"), text))
    if len(payload) > REPORT_MAX:  # fits in the pipe at once: the helper never blocks on an unread pipe
        payload = pickle.dumps((HelperError(f"{type(err).__name__}: {str(err)[:1000]}"), text[-(REPORT_MAX // 2):]))
    view = memoryview(payload)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass  # the parent is gone: nobody is left to tell


def _reraised(report: bytes, name: str, pid: int, code: int) -> BaseException:
    err: BaseException
    text: str
    err, text = pickle.loads(report)  # noqa: S301  (written by our own forked helper)
    err.add_note(f"raised in {name} (pid {pid}, exit status {code}); its traceback:\n{text.rstrip()}")
    return err
