"""The adapter: what the local cloud (:mod:`localcloud`, which knows nothing of seqlake) must know of
this app, given to it as a :class:`~localcloud.contract.App` when this module is imported.

One of the two modules of seqlake that import both (the other is :mod:`.commands`, the ``seqlake local ...``
commands on the local cloud; the modules beside them in ``seqlake.local`` are those commands' parts). It gives
the local cloud six things of the app's:

1. **the worker entry point**: a job definition's ``seqlake ...`` command runs as :func:`seqlake.cli.run` with its
   arguments, in a child of the fork server, which preloads :data:`PRELOAD` (the handlers' and the worker's
   libraries);
2. **the bucket layout**: the bodies of ``incoming/`` (the user's FASTQ, already on the user's disk) are not
   mirrored into the state folder; ``results/`` is mirrored but not put back into moto on start (only the local
   Athena reads it); a run's ``status.json`` is where :class:`seqlake.base.layout.RunLayout` puts it; a query
   "as of" a run reads the Iceberg snapshot that run committed;
3. **the faults** a test gives: ``SEQLAKE_FAULT`` for the Batch children (:func:`worker_fault`), the line a
   container prints to have its instance reclaimed, and :class:`seqlake.base.faults.InjectedFaultError`, which
   the emulator answers as an internal error without counting it among its own;
4. **the worker image** (:data:`seqlake.local.image.IMAGE`, ``--containers``): its name, the files it is built
   from, its containers' names;
5. **the settings' names** (:data:`SETTINGS`): the environment variables seqlake's users set the local cloud with
   (``SEQLAKE_HOME``, ``SEQLAKE_CONTAINERS``, ...: the command-line options and docs name them), and the state
   folder ``./.seqlake``;
6. **the shards' job names**: the run history counts the children, retries and failures of the Batch jobs whose
   name starts ``shard``.

The progress display reads each run's line from the Step Functions execution and the Batch arrays
(:mod:`localcloud.progress`): it needs nothing of the app beyond the arrays' job names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import seqlake
from localcloud import contract
from localcloud.contract import Settings
from localcloud.errors import LocalCloudError, NoCloudError
from seqlake.base import cachedir, faults
from seqlake.base.errors import BadInputError, SeqlakeError
from seqlake.base.layout import RESULTS, RunLayout
from seqlake.local import appdir, image

if TYPE_CHECKING:  # the cloud imports moto: the commands that only read the state folder (query, runs) do not
    from localcloud.cloud import LocalCloud

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: imported once by the local cloud's fork server, for every Lambda and Batch child (besides the local cloud's
#: own): none of them reads the environment or makes a client at import time (Powertools' ``Logger``,
#: ``Tracer`` and ``Metrics`` objects, made by ``seqlake.aws.observability``, read the function's environment:
#: the handler's own module, imported in the child after its environment is set, makes them)
PRELOAD: tuple[str, ...] = (
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
    "seqlake.plan.planner",
    "seqlake.plan.planfile",
    "seqlake.plan.childplan",
    "seqlake.reads.seekindex",
    "seqlake.reads.bgzf",
    "seqlake.base.storage",
    "seqlake.plan.samplesheet",
    "seqlake.lake.tables",
    "seqlake.lake.parquet_io",
    "seqlake.commit.merge",
    "seqlake.reads.gzindex",
    # the worker (Batch children): its entry point and what a shard needs
    "seqlake.cli",
    "seqlake.child.worker_main",
    "seqlake.child.worker",
    "seqlake.child.align",
    "seqlake.child.trim",
    "seqlake.lake.qc",
    "seqlake.lake.coverage",
    "seqlake.plan.shards",
    "mappy",
    "cutadapt.adapters",
    "cutadapt.qualtrim",
    # the Iceberg commit (CommitFunction, RecordFailure's rollback, the maintenance commands): 1.8 s of imports
    # a commit paid each time. pyiceberg reads its configuration (``PYICEBERG_*``, ``~/.pyiceberg.yaml``) at
    # import; seqlake gives its catalog every property it uses, so the server's copy is the children's
    "pyiceberg.catalog.glue",
    "pyiceberg.table",
    "pyiceberg.io.pyarrow",
    "pyiceberg.manifest",
    "seqlake.lake.iceberg",
    "seqlake.lake.iceberg_io",
)


def status_key(run_id: str) -> str:
    """A run's ``status.json``, as a key of the data bucket."""
    return RunLayout.in_bucket("b", run_id).status.removeprefix("s3://b/")


def run_snapshot(table: Any, run_id: str) -> int | None:
    """The Iceberg snapshot that run ``run_id`` committed to ``table`` (the local ``--as-of-run``)."""
    from seqlake.lake.iceberg import run_snapshot as snapshot

    return snapshot(table, run_id)


#: the environment variables seqlake's users set the local cloud with (``seqlake local run``'s options set the
#: same: ``--home``, ``--containers``, ``--no-memory-limits``, ``--no-iam``), and its default state folder
SETTINGS = Settings(
    home="SEQLAKE_HOME",
    default_home=".seqlake",
    containers="SEQLAKE_CONTAINERS",
    memory_limits="SEQLAKE_LOCAL_MEMORY_LIMITS",
    iam="SEQLAKE_LOCAL_IAM",
    # the scale bench's and tests' S3 latency (base.limits.S3_SCALE_LATENCY_MS)
    s3_latency_ms="SEQLAKE_LOCAL_S3_LATENCY_MS",
)

APP = contract.App(
    worker_command="seqlake",
    worker_main="seqlake.cli:run",
    preload=PRELOAD,
    app_dir=appdir.app_dir,
    cache_dir=cachedir.user_cache_dir,
    metadata_only_prefixes=("incoming/",),
    not_restored_prefixes=(f"{RESULTS}/",),
    status_key=status_key,
    run_snapshot=run_snapshot,
    fault_var=faults.WORKER_VAR,
    reclaim_marker=faults.RECLAIM_MARKER,
    injected_errors=(faults.InjectedFaultError,),
    # the package's parent folder (locally it stands in for the Lambda layer), and the variable that tells the
    # app's code it runs on the local cloud
    pythonpath=(str(Path(seqlake.__file__).resolve().parents[1]),),
    child_env={"SEQLAKE_LOCAL": "1"},
    worker_image=image.IMAGE,
    settings=SETTINGS,
    # the shards' array and a single shard's job (the state machine's JobNames: shards-<run>, shard-<run>), not
    # the index job's or the reducers'
    shard_jobs="shard",
    # the progress display's word for an array's children: the reducers' job (reduce-<run>) reduces regions,
    # the others are shards (the JobNames: seqlake.aws.steps.JOB_NAME_PREFIX)
    array_units={"reduce-": "regions", "": "shards"},
    # the stack the template is deployed as locally: the functions' and state machine's names start with it,
    # and the local cloud's roles and sessions are named after it (their ARNs are in docs/GRANTS.md, the
    # grants sweep's, and in the AccessDenied messages a user reads)
    stack="seqlake-local",
    # the template's GlueDatabaseName default: where a query's unqualified table names resolve
    database="seqlake",
)
contract.use(APP)


def local_cloud(**kwargs: Any) -> LocalCloud:
    """A local cloud of this app (the arguments are :class:`~localcloud.cloud.LocalCloud`'s)."""
    from localcloud.cloud import LocalCloud

    return LocalCloud(app=APP, **kwargs)


def worker_fault(cloud: LocalCloud, spec: str) -> AbstractContextManager[None]:
    """``SEQLAKE_FAULT=spec`` for the Batch children the cloud starts meanwhile (a typo fails here, loudly)."""
    assert faults.from_env(faults.WORKER_VAR, {faults.WORKER_VAR: spec})
    extra: Mapping[str, str] = {faults.WORKER_VAR: spec}
    return cloud.batch_environment(extra)


#: what a user is told of a state folder with no cloud in it (the local cloud's own message names no command)
NO_CLOUD = ("no local cloud here: run `seqlake demo` or `seqlake local run` first, or give --home "
            f"(or ${SETTINGS.home}) the folder of one")


def app_errors(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """A ``seqlake local`` command with the local cloud's errors as seqlake's: a state folder with no cloud is bad
    input (exit 65, the folder named), any other error of the local cloud's a :class:`SeqlakeError` (exit 1)."""

    @functools.wraps(command)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return command(*args, **kwargs)
        except NoCloudError as err:
            raise BadInputError(err.path, NO_CLOUD) from err
        except LocalCloudError as err:
            raise SeqlakeError(str(err)) from err

    return wrapped
