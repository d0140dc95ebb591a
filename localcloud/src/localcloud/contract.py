"""What the local cloud asks of the app it runs: :class:`App`, given by the app's adapter.

The local cloud knows SAM, Step Functions, Batch, Lambda, EventBridge, S3, Glue, Athena and IAM, and nothing of
the app it deploys. The few things it must know of one are an :class:`App`: the worker's entry point (a job
definition's command that names it runs as that function in a child of the fork server, not as a new
interpreter), the modules the fork server preloads, the bucket layout (which objects' bodies are not mirrored,
which are not put back on start, where a run's status document is), the environment variable the Batch children
are given a fault by, and the exceptions a test raises inside the emulator on purpose.

The app's adapter makes one and hands it over with :func:`use` before it starts a cloud (the process has one
app, as it has one set of moto backends). Without one the local cloud runs any template of the same shape with
:data:`GENERIC`: no worker entry point, every body mirrored and restored, no status documents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _no_snapshot(table: Any, run_id: str) -> int | None:
    return None


@dataclass(frozen=True)
class App:
    #: a job definition command whose first word is this (or ``python -m <it>``) runs as :attr:`worker_main`
    worker_command: str = ""
    #: ``"module:function"``: the worker's entry point (it reads ``sys.argv``)
    worker_main: str = ""
    #: modules the fork server imports once for all its children, besides the local cloud's own
    preload: tuple[str, ...] = ()
    #: where the app's template and the folders it names are (``None``: the caller gives the folder)
    app_dir: Callable[[], Path] | None = None
    #: the folder of files derived from others that any state folder may share (``None``: the local cloud's own)
    cache_dir: Callable[[], Path] | None = None
    #: key prefixes whose bodies are not mirrored into the state folder (their metadata is)
    metadata_only_prefixes: tuple[str, ...] = ()
    #: key prefixes mirrored but not put back into moto on start (only the local Athena reads them, from the
    #: state folder); an Iceberg table's own ``/metadata/`` under them is put back
    not_restored_prefixes: tuple[str, ...] = ()
    #: a run's status document's key in the bucket, from the execution's run id (``None``: runs have none)
    status_key: Callable[[str], str] | None = None
    #: the Iceberg snapshot that a run (by id) committed to a table, for queries "as of" a run
    run_snapshot: Callable[[Any, str], int | None] = _no_snapshot
    #: the environment variable that gives a Batch child a fault (forwarded into containers too)
    fault_var: str = ""
    #: the line a container's PID 1 prints when a test asks the runner to reclaim its instance
    reclaim_marker: str = ""
    #: folders on every Lambda and Batch child's ``PYTHONPATH`` (locally they stand in for the Lambda layer)
    pythonpath: tuple[str, ...] = ()
    #: variables every Lambda and Batch child gets besides the local cloud's (credentials, endpoint)
    child_env: Mapping[str, str] = field(default_factory=dict)
    #: exceptions a test raises inside the emulator on purpose: answered as an internal error, not counted
    injected_errors: tuple[type[BaseException], ...] = field(default=())


GENERIC = App()
_current: list[App] = [GENERIC]


def use(app: App) -> None:
    """Make ``app`` the one this process's local clouds run."""
    _current[0] = app


def app() -> App:
    """The app this process's local clouds run (:data:`GENERIC` until :func:`use`)."""
    return _current[0]
