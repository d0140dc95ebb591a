"""What the local cloud asks of the app it runs: :class:`App`, given by the app's adapter.

The local cloud knows SAM, Step Functions, Batch, Lambda, EventBridge, S3, Glue, Athena and IAM, and nothing of
the app it deploys. The few things it must know of one are an :class:`App`: the worker's entry point (a job
definition's command that names it runs as that function in a child of the fork server, not as a new
interpreter), the modules the fork server preloads, the bucket layout (which objects' bodies are not mirrored,
which are not put back on start, where a run's status document is), the environment variable the Batch children
are given a fault by, the exceptions a test raises inside the emulator on purpose, the worker's container image
(:class:`WorkerImage`), the names of the environment variables its users set the local cloud with
(:class:`Settings`), which Batch arrays a run's history counts as its shards and what the progress display
calls their children, the stack name the template is deployed as, and the Glue database queries default to.

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
class WorkerImage:
    """The app's worker image: what ``--containers`` runs a Batch attempt as, and the files it is built from.

    The local cloud tags it with a digest of those files (:func:`.containers.image_ref`), so that it finds the
    image of the checkout it runs from; the app's build names the image the same way. The files are
    :attr:`files` and every file under :attr:`tree` but those with a path part in :attr:`excluded_parts` or
    ending in one of :attr:`excluded_suffixes` (the build's ignore file keeps the same ones out)."""

    #: the image's name, without its tag (the digest)
    name: str
    #: the folder the image is built from (the build context): the app's checkout
    root: Path
    #: files of the build context, relative to :attr:`root`
    files: tuple[str, ...]
    #: a folder, relative to :attr:`root`, whose files are all in the build context but the excluded ones
    tree: str
    #: a file under :attr:`tree` with one of these names in its path is not (``__pycache__``, say)
    excluded_parts: tuple[str, ...] = ()
    #: nor one with a path part that ends in one of these (``.egg-info``, say)
    excluded_suffixes: tuple[str, ...] = ()
    #: what the name of an attempt's container starts with (the job id and attempt follow)
    container_prefix: str = "localcloud-"
    #: podman's settings for the runs, relative to :attr:`root`, unless ``CONTAINERS_CONF`` names others
    #: (``""``: podman's own)
    podman_conf: str = ""
    #: the command that builds it, said when the image of the checkout is not built
    build_command: str = ""


@dataclass(frozen=True)
class Settings:
    """The environment variables a user sets the local cloud with, and its default state folder: the app names
    them for its own users (its documentation and command-line options say them); by default, the local
    cloud's own names. Each is read in the process that runs the cloud (or the command), which has the app."""

    #: the state folder, unless the command is given one
    home: str = "LOCALCLOUD_HOME"
    #: the state folder when neither the command nor :attr:`home` names one (relative: to the working folder)
    default_home: str = ".localcloud"
    #: ``1``: Batch attempts run as containers of the app's :class:`WorkerImage`
    containers: str = "LOCALCLOUD_CONTAINERS"
    #: ``0``: no memory limits on Lambda invocations and Batch attempts
    memory_limits: str = "LOCALCLOUD_MEMORY_LIMITS"
    #: ``0``: IAM not enforced
    iam: str = "LOCALCLOUD_IAM"
    #: milliseconds every S3 request waits before it is answered (the ``s3-latency`` patch; unset: none)
    s3_latency_ms: str = "LOCALCLOUD_S3_LATENCY_MS"


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
    #: the worker's container image (``None``: Batch attempts run as processes only)
    worker_image: WorkerImage | None = None
    #: the names of the environment variables its users set the local cloud with
    settings: Settings = field(default_factory=Settings)
    #: the job-name prefix of the Batch arrays (or single jobs) a run's history counts as its shards: their
    #: children, retries and failures (``""``: every job the run submitted)
    shard_jobs: str = ""
    #: what the progress display calls a Batch array's children, by the array's job-name prefix (the first
    #: prefix that matches; none: ``children``)
    array_units: Mapping[str, str] = field(default_factory=dict)
    #: the CloudFormation stack the template is deployed as: the resources the template does not name are
    #: named after it (``<stack>-<logical id>``, as CloudFormation names them), and so are the local cloud's
    #: own roles (``<stack>-platform``, ``<stack>-user``) and the sessions of every role it assumes
    stack: str = "localcloud"
    #: the Glue database a query's unqualified table names resolve to when the query names none (Athena's
    #: ``QueryExecutionContext``), and the one a template that makes no Glue database is given
    #: (Athena's own default: ``default``)
    database: str = "default"


GENERIC = App()
_current: list[App] = [GENERIC]


def use(app: App) -> None:
    """Make ``app`` the one this process's local clouds run."""
    _current[0] = app


def app() -> App:
    """The app this process's local clouds run (:data:`GENERIC` until :func:`use`)."""
    return _current[0]
