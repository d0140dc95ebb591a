"""The local cloud's own failures, counted: an exception inside the emulator fails the test that met it.

A request whose handling raises is answered as the service answers an internal error (HTTP 500: Lambda's
``ServiceException``, Batch's ``ServerException``, S3's ``InternalError``; :func:`.http_server.internal_error`),
because moto's Step Functions interpreter and the app's Retry and Catch rules need that answer. But a client
retries such an error, so an emulator's race or bug would be retried away and a test would pass over it. So
each one is also recorded here (and written to the state folder's ``logs/emulator-errors.log``), and the tests
fail on any: ``tests/conftest.py`` takes the records after every test and fails the test if there are any, and
sets :data:`STRICT_VAR` so that an app's command the tests run as a process fails at its cloud's stop.

An error a test raises inside the emulator on purpose is a :class:`.errors.InjectedFaultError` (or one of the app's
:attr:`.contract.App.injected_errors`): it is answered the same way and not counted.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from localcloud import contract
from localcloud.errors import InjectedFaultError

#: set (to 1) in the environment: a local cloud that recorded an emulator error fails when it stops
STRICT_VAR = "LOCALCLOUD_EMULATOR_ERRORS_FATAL"


@dataclass(frozen=True)
class EmulatorError:
    request: str  # e.g. "POST /v1/describejobs"
    error: str  # "RuntimeError: dictionary changed size during iteration"

    def __str__(self) -> str:
        return f"{self.request}: {self.error}"


class EmulatorFailedError(RuntimeError):
    """The local cloud answered requests with internal errors of its own (:data:`STRICT_VAR` is set)."""


_lock = threading.Lock()
_errors: list[EmulatorError] = []
_log: list[Path] = []


def counted(error: BaseException) -> bool:
    """Whether ``error`` is the emulator's own (not one a test injected on purpose)."""
    return not isinstance(error, (InjectedFaultError, *contract.app().injected_errors))


def record(request: str, error: BaseException) -> None:
    """Count ``error`` (raised while answering ``request``) unless a test injected it on purpose."""
    if not counted(error):
        return
    found = EmulatorError(request, f"{type(error).__name__}: {error}")
    with _lock:
        _errors.append(found)
        log = _log[-1] if _log else None
    if log is not None:
        try:
            with log.open("a") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {found}\n")
        except OSError:  # the state folder went away (a test's temporary folder): the count above still holds
            pass


def log_to(path: Path) -> None:
    """Also write each error to ``path`` (the running cloud's state folder)."""
    with _lock:
        _log[:] = [path]


def stop_logging(path: Path) -> None:
    """No more to ``path`` (a cloud stops), unless a newer cloud in this process writes to another."""
    with _lock:
        if _log == [path]:
            _log.clear()


def take() -> list[EmulatorError]:
    """The errors recorded since the last call, forgotten."""
    with _lock:
        taken = list(_errors)
        _errors.clear()
    return taken


def check_strict() -> None:
    """With :data:`STRICT_VAR` set, raise :class:`EmulatorFailedError` naming the errors recorded (and forget them)."""
    if os.environ.get(STRICT_VAR, "") in ("", "0"):
        return
    errors = take()
    if errors:
        raise EmulatorFailedError(f"the local cloud failed {len(errors)} request(s) itself: "
                             + "; ".join(str(e) for e in errors[:5]))
