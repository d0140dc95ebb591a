"""``LocalCloud``: moto in this process, the app deployed from ``template.yaml``, state restored.

It puts together what the modules beside it do, one job each: moto's lifecycle (:mod:`.moto_server`),
the environment (:mod:`.environment`), the deployment and its parameter overrides (:mod:`.deployment`),
the callbacks moto makes (:mod:`.hooks`), the state folder's mirror (:mod:`.mirror`), and the wait for
runs (:mod:`.waiting`, reported by :mod:`.progress`). The Lambda and Batch runners share one
:class:`.launcher.Launcher` for their processes. Credentials are fake and set for this process and its
children only: nothing here can reach a real AWS account.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from rich.console import Console

from localcloud import athena, contract, deployment, emulator_errors, hooks, iam, mirror
from localcloud.batch import BatchRunner
from localcloud.deployment import Deployment
from localcloud.environment import SavedEnv, child_env, process_env
from localcloud.errors import LocalCloudError
from localcloud.events import SqsEventSource
from localcloud.lambdas import LambdaRunner
from localcloud.launcher import Launcher
from localcloud.moto_server import MotoServer
from localcloud.progress import Execution, Watcher
from localcloud.state import StateDir
from localcloud.waiting import largest_payload, run_record, wait_idle
from localcloud.warm import INIT, preload


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class LocalCloud:
    def __init__(
        self,
        *,
        state: StateDir,
        jobs: int = 2,
        repo: Path | None = None,
        console: Console | None = None,
        quiet: bool = False,
        parameters: Mapping[str, str] | None = None,
        app: contract.App | None = None,
    ) -> None:
        """``repo``: the folder of ``template.yaml`` and what it refers to (default: the app's,
        :attr:`.contract.App.app_dir`); ``parameters``: template parameters deployed with other values
        (``--parameter-overrides``); ``app``: what the local cloud must know of the app (:mod:`.contract`; default
        the one the app's adapter gave :func:`.contract.use`)."""
        if app is not None:
            contract.use(app)
        self.state = state
        self.jobs = jobs
        given = contract.app().app_dir
        if repo is None and given is None:
            raise LocalCloudError("no app to deploy: give the folder of its template.yaml")
        self.repo = repo or given()  # type: ignore[misc]
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.parameters = dict(parameters or {})
        self.endpoint = ""
        self.outputs: dict[str, Any] = {}
        self.bucket = ""
        self.state_machine_arn = ""
        self.database = athena.default_database()
        self.launcher: Launcher | None = None
        self.lambdas: LambdaRunner | None = None
        self.batch: BatchRunner | None = None
        self._moto = MotoServer()
        self._env = SavedEnv()
        #: who may do what: each role's session, the platform's (this process), the user's (``iam.py``)
        self.iam = iam.LocalIam(iam.enforced())
        self._hooks = hooks.Hooks(self.client, self.iam.client)
        self._deployment: Deployment | None = None
        self._watcher: Watcher | None = None
        self._old_sigterm: Any = None
        self._clients: dict[str, Any] = {}
        #: the data bucket's keys this cloud has mirrored (one gone since was deleted: :func:`.mirror.persist`)
        self._in_bucket: set[str] = set()
        self._clients_lock = threading.Lock()

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> LocalCloud:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str) -> Any:
        """One client per service for this cloud (boto3 clients are thread-safe; making one costs
        more CPU than the call the progress poll makes with it), signed as the platform role (the keys are
        given, not read: boto3's default session keeps the first keys it read, another cloud's)."""
        with self._clients_lock:
            made = self._clients.get(service)
            if made is None or made.meta.endpoint_url != self.endpoint:
                made = self._clients[service] = self.iam.client(iam.role_arn(iam.platform_role()), service)
            return made

    @property
    def deployment(self) -> Deployment:
        """What the template made (after :meth:`start`)."""
        assert self._deployment is not None, "the local cloud is not started"
        return self._deployment

    def user_client(self, service: str) -> Any:
        """A client signed as the lab member who runs the app's commands (seqlake's
        ``seqlake local``, say; the template's LabMemberPolicy):
        the commands' uploads, queries and reads go through it."""
        if not self.iam.enforce:
            return self.client(service)
        return self.iam.client(iam.role_arn(iam.user_role()), service)

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            # a cloud that failed half-way stops what it started (the moto server's threads, the fork server,
            # the environment it set): left running, they outlive the error in this process, and a later
            # fork here refuses to fork beside the server's threads
            with contextlib.suppress(Exception):
                self.stop()
            raise

    def _start(self) -> None:
        t0 = time.monotonic()
        if threading.current_thread() is threading.main_thread():
            # `kill` (SIGTERM) then unwinds like Ctrl-C: stop() kills the children this cloud started
            self._old_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        self.state.ensure()
        emulator_errors.log_to(self.state.logs_dir / "emulator-errors.log")
        self.endpoint = self._moto.start()
        self._env.set(process_env(self.endpoint, self._moto.port))
        self._moto.reset()  # moto's backends are process-wide: a second cloud in this process starts empty
        self.iam.start(self.endpoint)  # this process's keys become the platform role's; children get their roles'
        with self._clients_lock:
            self._clients.clear()
        # the fork server (Lambdas, Batch children) imports its libraries while the template deploys
        env = child_env(self.endpoint)
        self.launcher = Launcher(env, preload=preload(), init=INIT, server_log=self.state.logs_dir / "forkserver.log")
        self.launcher.prepare()
        self.lambdas = LambdaRunner(
            {}, env, self.state.logs_dir, dead_letter=self._hooks.dead_letter, launcher=self.launcher,
            credentials=self.iam.env,
        )
        self.deploy()
        self.restore()
        self._watcher = Watcher(
            self.client("stepfunctions"), self.state_machine_arn, self._arrays, self.console, quiet=self.quiet
        )
        self._say(f"[dim]local cloud up in {time.monotonic() - t0:.1f} s ({self.endpoint}, state in {self.state.root})")

    @contextlib.contextmanager
    def batch_environment(self, extra: Mapping[str, str]) -> Iterator[None]:
        """``extra`` in the environment of the Batch children started meanwhile (the local Batch runner's base
        environment; on AWS it would be ``environment`` entries of a job definition revision): how a test gives
        the app's worker a fault (the adapter's ``worker_fault``)."""
        assert self.batch is not None
        before = self.batch.base_env
        self.batch.base_env = {**before, **extra}
        try:
            yield
        finally:
            self.batch.base_env = before

    def stop(self) -> None:
        if self.batch is not None:
            self.batch.shutdown()
        if self.lambdas is not None:
            self.lambdas.close()
        if self.launcher is not None:
            self.launcher.close()
        self._hooks.uninstall()
        self.iam.stop()
        self._moto.stop()
        self._env.restore()
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None
        emulator_errors.stop_logging(self.state.logs_dir / "emulator-errors.log")
        emulator_errors.check_strict()  # the tests' setting: an internal error of the emulator fails the command

    def _say(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text)

    # ---------------------------------------------------------------- deploy
    def deploy(self) -> None:
        assert self.lambdas is not None and self.launcher is not None
        d = self._deployment = deployment.deploy(self.repo, self.client, self.endpoint, self.state.root / "cache",
                                                     self.parameters)
        self.outputs, self.bucket, self.state_machine_arn, self.database = (
            d.outputs, d.bucket, d.state_machine_arn, d.database,
        )
        self.lambdas.functions.update(d.functions)
        self.iam.resource_policies = d.resource_policies
        self.iam.add_user(d.physical.get(iam.USER_POLICY))
        self._hooks.instance_role = deployment.instance_role(d)
        if self.iam.enforce:
            self._hooks.service_allowed = self.iam.service_allows
        self.batch = BatchRunner(
            self.jobs,
            child_env(self.endpoint),
            self.state.logs_dir,
            on_change=self._hooks.batch_changed,
            log_sink=self._hooks.put_log,
            launcher=self.launcher,
            credentials=self.iam.env,
        )
        self._hooks.install(self.lambdas, self.batch, self._athena_query)
        for mapping in d.event_source_mappings:
            self.lambdas.add_source(SqsEventSource(self.lambdas, mapping).start())

    def override_parameter(self, name: str, value: str) -> list[str]:
        """Give template parameter ``name`` a new value in the functions' environments that ``Ref`` it
        (``sam deploy --parameter-overrides`` for this process); returns the functions changed."""
        assert self.lambdas is not None and self._deployment is not None
        return deployment.override_parameter(self._deployment, self.lambdas, self.client("lambda"), name, value)

    def prewarm(self) -> None:
        """Start each function's next process now (call it after the last configuration change),
        except the functions only a failed run calls (RecordFailure, the backstop): on one core their
        imports would take CPU from the shards for nothing."""
        assert self.lambdas is not None
        definition = json.loads(
            self.client("stepfunctions").describe_state_machine(stateMachineArn=self.state_machine_arn)["definition"]
        )
        called, on_success = deployment.state_machine_functions(definition)
        on_failure_only = called - on_success | deployment.execution_end_functions(self.deployment)
        for name in self.lambdas.functions:
            if name not in on_failure_only:
                self.lambdas.prestart_one(name)

    # ---------------------------------------------------------------- state
    def restore(self) -> None:
        """Put the saved objects and partitions back, without starting runs for them."""
        mirror.restore(self.state, self.client)
        self._in_bucket = {key for key, _, _ in mirror.bucket_objects(self.bucket)}

    def catalog(self) -> list[athena.TableDef]:
        """The Glue catalog as it is now (tables and registered partitions)."""
        return mirror.catalog(self.client)

    def persist(self) -> int:
        """Mirror the data bucket's new or changed objects and the catalog into the state folder."""
        return mirror.persist(self.state, self.client, self.bucket, self._in_bucket)

    def _athena_query(self, sql: str, database: str) -> tuple[list[str], list[list[str | None]]]:
        self.persist()
        result = self.state.query(sql, database)
        return result.columns, result.as_text()

    # ---------------------------------------------------------------- runs
    def upload(self, path: Path, key: str, bucket: str | None = None, *, as_admin: bool = False) -> str:
        """Put a local file (one PUT: its ETag is its MD5); returns the ``s3://`` URI. As the lab member
        (:meth:`user_client`), or with ``as_admin`` as the stack's administrator, who sets up what the
        template's parameters name (a reference: ``ReferenceUri``)."""
        bucket = bucket or self.bucket
        s3 = self.client("s3") if as_admin else self.user_client("s3")
        with path.open("rb") as f:
            s3.put_object(Bucket=bucket, Key=key, Body=f)
        self.state.record_source(f"s3://{bucket}/{key}", path.resolve())
        return f"s3://{bucket}/{key}"

    def _arrays(self) -> dict[str, Any]:
        return dict(self.batch.progress) if self.batch is not None else {}

    def _busy(self) -> bool:
        assert self.lambdas is not None and self.batch is not None
        return bool(self.lambdas.pending or self.batch.active or self._hooks.execution_ends.pending)

    def wait(self, timeout: float | None = None) -> list[Execution]:
        """Wait until nothing runs any more; returns the executions started since the last wait. By default
        as long as that takes: a run is bounded by its state machine's timeouts (``BatchStepTimeoutSeconds``,
        each attempt's duration, each Lambda's), as on AWS; a fixed hour here stopped a 1.5 Gb run
        (3,774 s) while its last reducer ran."""
        assert self._watcher is not None
        finished = wait_idle(self._watcher, self._busy, self._hooks.activity, timeout)
        self.persist()
        for e in finished:
            payload = largest_payload(self.client("stepfunctions"), e.arn)
            self.state.record_run(run_record(self.state, self.bucket, e, payload))
        return finished

    def events_paused(self) -> AbstractContextManager[None]:
        """S3 events are not delivered meanwhile."""
        return hooks.events_paused()


