"""``LocalCloud``: moto in this process, the app deployed from ``template.yaml``, state restored.

moto runs as a threaded HTTP server on a free loopback port, so the Lambda handlers and Batch
children (separate processes) reach the same backends through ``AWS_ENDPOINT_URL``; this process's
own boto3 clients use it too. Credentials are fake and set for this process and its children only:
nothing here can reach a real AWS account.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import signal
import threading
import time
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
from rich.console import Console

from seqlake.layout import RunLayout
from seqlake.localcloud import athena, patches
from seqlake.localcloud.batch import ArrayProgress, BatchRunner
from seqlake.localcloud.deployer import ACCOUNT, REGION, Deployer
from seqlake.localcloud.events import EventDelivery, SqsEventSource
from seqlake.localcloud.lambdas import FunctionSpec, LambdaRunner
from seqlake.localcloud.launcher import Launcher
from seqlake.localcloud.packaging import ARTIFACT_BUCKET, load_template, package
from seqlake.localcloud.progress import Execution, Watcher
from seqlake.localcloud.state import NOT_RESTORED_PREFIXES, ObjectMeta, StateDir, keeps_body, user_cache_dir
from seqlake.localcloud.translate import translate
from seqlake.localcloud.warm import INIT, PRELOAD

REPO = Path(__file__).resolve().parents[3]
SRC = Path(__file__).resolve().parents[2]
#: template parameter types the local cloud fills with its own network stand-ins
_SUBNET_TYPES = ("AWS::EC2::Subnet::Id", "List<AWS::EC2::Subnet::Id>")
_SG_TYPES = ("AWS::EC2::SecurityGroup::Id", "List<AWS::EC2::SecurityGroup::Id>")
_VPC_TYPES = ("AWS::EC2::VPC::Id",)
_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # loopback transfers cannot be corrupted: skip the CRC32 pass botocore adds to every upload and
    # download by default (moto keeps its own MD5 ETags)
    "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
}
_DROPPED_ENV = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CA_BUNDLE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


#: template parameters the local cloud sets: a folder under incoming/ is quiet after 2 s (minutes on AWS)
LOCAL_PARAMETERS = {"StartQuietPeriodSeconds": "2"}

#: the wait loop's poll interval while runs are in flight (a Lambda or Batch job returning wakes it sooner)
_SLOW_POLL_SECONDS = 2.0
#: ... and while confirming that nothing is in flight any more
_QUICK_POLL_SECONDS = 0.1
#: after a wake-up, before polling: the interpreter's next transitions
_SETTLE_SECONDS = 0.05
#: while a Lambda or Batch job runs, the state machine is polled only this often unless woken
_BUSY_POLL_SECONDS = 10.0


def _function_name(task: dict[str, Any]) -> str | None:
    """The Lambda function a Task state invokes (``lambda:invoke`` or a function ARN as resource)."""
    target = str((task.get("Parameters") or {}).get("FunctionName") or task.get("Resource") or "")
    if ":lambda:" in target and ":function:" in target:
        return target.split(":")[6]  # arn:aws:lambda:region:account:function:NAME[:qualifier]
    return None


def state_machine_functions(definition: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(every function the definition invokes, those reached without passing through a Catch)."""
    called: set[str] = set()
    on_success: set[str] = set()

    def walk(machine: dict[str, Any]) -> None:
        states: dict[str, Any] = machine.get("States", {})
        for state in states.values():
            name = _function_name(state) if state.get("Type") == "Task" else None
            if name:
                called.add(name)
        todo, seen = [machine.get("StartAt")], set()
        while todo:
            current = todo.pop()
            if current in seen or current not in states:
                continue
            seen.add(current)
            state = states[current]
            name = _function_name(state) if state.get("Type") == "Task" else None
            if name:
                on_success.add(name)
            todo += [state.get("Next"), state.get("Default"), *(c.get("Next") for c in state.get("Choices", []))]
            for sub in [*state.get("Branches", []), state.get("ItemProcessor"), state.get("Iterator")]:
                if sub:
                    walk(sub)

    walk(definition)
    return called, on_success


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class LocalCloud:
    def __init__(
        self,
        *,
        state: StateDir,
        jobs: int = 2,
        repo: Path = REPO,
        console: Console | None = None,
        quiet: bool = False,
    ) -> None:
        self.state = state
        self.jobs = jobs
        self.repo = repo
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.endpoint = ""
        self.outputs: dict[str, Any] = {}
        self.bucket = ""
        self.state_machine_arn = ""
        self.database = athena.DEFAULT_DATABASE
        self._server: Any = None
        self._saved_env: dict[str, str | None] = {}
        self.lambdas: LambdaRunner | None = None
        self.batch: BatchRunner | None = None
        self.launcher: Launcher | None = None
        self._seen: set[str] = set()
        self._cfn: dict[str, Any] = {}
        self._physical: dict[str, Any] = {}
        self._old_sigterm: Any = None
        self._clients: dict[str, Any] = {}
        #: set when a Lambda or Batch job returns: the state machine may have moved (wakes :meth:`wait`)
        self._activity = threading.Event()
        self._clients_lock = threading.Lock()

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> LocalCloud:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str) -> Any:
        """One client per service for this cloud (boto3 clients are thread-safe; making one costs
        more CPU than the call the progress poll makes with it)."""
        with self._clients_lock:
            made = self._clients.get(service)
            if made is None or made.meta.endpoint_url != self.endpoint:
                made = self._clients[service] = boto3.client(service, region_name=REGION, endpoint_url=self.endpoint)
            return made

    def _set_env(self, values: dict[str, str | None]) -> None:
        for k, v in values.items():
            self._saved_env.setdefault(k, os.environ.get(k))
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def start(self) -> None:
        # moto warns that its server wants every optional dependency; flask is the one it uses here
        warnings.filterwarnings("ignore", message="When using MotoServer", category=UserWarning)
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # the interpreter logs every state failure it handles (Catch) as an error: runs report their own
        logging.getLogger("moto").setLevel(logging.CRITICAL)
        t0 = time.monotonic()
        if threading.current_thread() is threading.main_thread():
            # `kill` (SIGTERM) then unwinds like Ctrl-C: stop() kills the children this cloud started
            self._old_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        self.state.ensure()
        patches.apply_all()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # moto's state machine interpreter calls back to localhost:$MOTO_PORT for service integrations
        self._set_env(
            {
                **_FAKE_ENV,
                "AWS_ENDPOINT_URL": self.endpoint,
                "MOTO_PORT": str(port),
                # moto's EC2 backend (made for the compute environments' subnets) loads 1,300 AMIs by
                # default, a noticeable part of the start-up; none is needed, as no instance is launched
                "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
                **dict.fromkeys(_DROPPED_ENV),
            }
        )
        self._reset_moto()  # moto's backends are process-wide: a second cloud in this process starts empty
        # the fork server (Lambdas, Batch children) imports its libraries while the template deploys
        env = self.child_env()
        self.launcher = Launcher(env, preload=PRELOAD, init=INIT, server_log=self.state.logs_dir / "forkserver.log")
        self.launcher.prepare()
        self.lambdas = LambdaRunner({}, env, self.state.logs_dir, dead_letter=self._dead_letter, launcher=self.launcher)
        self.deploy()
        self.restore()
        self._seen = {e["executionArn"] for e in self._list_executions()}
        self._say(f"[dim]local cloud up in {time.monotonic() - t0:.1f} s ({self.endpoint}, state in {self.state.root})")

    def _reset_moto(self) -> None:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")  # noqa: S310 - loopback
        with urllib.request.urlopen(request, timeout=60):  # noqa: S310
            pass

    def stop(self) -> None:
        if self.batch is not None:
            self.batch.shutdown()
        if self.lambdas is not None:
            self.lambdas.close()
        if self.launcher is not None:
            self.launcher.close()
        patches.HOOKS.lambda_invoke = patches.HOOKS.batch_run = None
        patches.HOOKS.deliver = patches.HOOKS.athena_query = None
        if self._server is not None:
            self._reset_moto()  # frees the objects held in memory
            self._server.stop()
            self._server = None
        self._set_env(dict(self._saved_env))
        self._saved_env.clear()
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None

    def _say(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text)

    def child_env(self) -> dict[str, str]:
        """The environment every Lambda and Batch child starts from."""
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        path = [str(SRC), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env.update(_FAKE_ENV)
        env.update(
            {
                "AWS_ENDPOINT_URL": self.endpoint,
                "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)),
                "SEQLAKE_LOCAL": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    # ---------------------------------------------------------------- deploy
    def _network_parameters(self, template: dict[str, Any]) -> dict[str, Any]:
        specs = template.get("Parameters", {})
        wanted = {n: str(s.get("Type", "")) for n, s in specs.items()}
        if not any(t in _SUBNET_TYPES + _SG_TYPES + _VPC_TYPES for t in wanted.values()):
            return {}
        # The account's network, which a real deployment is given as parameters. Made in moto's EC2
        # backend directly (moto is pinned): through the API, moto would parse its own copy of the 1 MB
        # EC2 model to answer three calls, about half a second of every start.
        from moto.ec2.models import ec2_backends

        ec2 = ec2_backends[ACCOUNT][REGION]
        vpc = ec2.create_vpc(cidr_block="10.0.0.0/16").id
        subnet = ec2.create_subnet(vpc_id=vpc, cidr_block="10.0.0.0/24").id
        sg = ec2.create_security_group(name="seqlake-local", description="local", vpc_id=vpc).id
        out: dict[str, Any] = {}
        for name, kind in wanted.items():
            if kind in _SUBNET_TYPES:
                out[name] = [subnet] if kind.startswith("List<") else subnet
            elif kind in _SG_TYPES:
                out[name] = [sg] if kind.startswith("List<") else sg
            elif kind in _VPC_TYPES:
                out[name] = vpc
        return out

    def _translate(self, template: dict[str, Any]) -> dict[str, Any]:
        """SAM -> CloudFormation, cached by the packaged template's hash (the code zips' hashes and the
        inlined state machine are part of it) in the user's cache folder, shared by every state folder:
        importing the translator and translating take about a second of CPU."""
        digest = hashlib.sha256(
            json.dumps([importlib.metadata.version("aws-sam-translator"), template], sort_keys=True).encode()
        ).hexdigest()[:24]
        name = f"cloudformation-{digest}.json"
        folders = [user_cache_dir(), self.state.root / "cache"]
        for folder in folders:
            with contextlib.suppress(OSError, ValueError):
                result: dict[str, Any] = json.loads((folder / name).read_text())
                return result
        cfn = translate(template)
        for folder in folders:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                tmp = folder / f"{name}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps(cfn))
                tmp.replace(folder / name)
                break
            except OSError:  # a read-only home: the state folder keeps it
                continue
        return cfn

    def deploy(self) -> None:
        s3 = self.client("s3")
        s3.create_bucket(Bucket=ARTIFACT_BUCKET)
        packaged = package(
            load_template(self.repo / "template.yaml"),
            self.repo,
            lambda b, k, body: s3.put_object(Bucket=b, Key=k, Body=body),
        )
        cfn = self._translate(packaged.template)
        self._cfn = cfn
        parameters = {**self._network_parameters(cfn), **LOCAL_PARAMETERS}
        deployer = Deployer(cfn, parameters, endpoint_url=self.endpoint, clients=self.client)
        self.outputs = deployer.deploy()
        self._physical = deployer.physical
        resources = cfn["Resources"]

        def physical(kind: str) -> list[Any]:
            return [
                deployer.physical[lid] for lid, r in resources.items() if r["Type"] == kind and lid in deployer.physical
            ]

        buckets = physical("AWS::S3::Bucket")
        bridged = [
            deployer.physical[lid]
            for lid, r in resources.items()
            if r["Type"] == "AWS::S3::Bucket"
            and r.get("Properties", {}).get("NotificationConfiguration", {}).get("EventBridgeConfiguration")
        ]
        self.bucket = (bridged or buckets)[0]
        self.state_machine_arn = physical("AWS::StepFunctions::StateMachine")[0]
        databases = physical("AWS::Glue::Database")
        self.database = databases[0] if databases else athena.DEFAULT_DATABASE
        lam = self.client("lambda")
        functions: dict[str, FunctionSpec] = {}
        for lid, code_dir in packaged.code_dirs.items():
            conf = lam.get_function_configuration(FunctionName=deployer.physical[lid])
            functions[conf["FunctionName"]] = FunctionSpec(
                name=conf["FunctionName"],
                code_dir=code_dir,
                handler=conf["Handler"],
                environment=conf.get("Environment", {}).get("Variables", {}),
                timeout=int(conf.get("Timeout", 60)),
                memory=int(conf.get("MemorySize", 512)),
                arn=conf["FunctionArn"],
                dead_letter_arn=conf.get("DeadLetterConfig", {}).get("TargetArn"),
            )
        base = self.child_env()
        if self.lambdas is None:
            self.lambdas = LambdaRunner(functions, base, self.state.logs_dir, dead_letter=self._dead_letter)
        else:
            self.lambdas.functions.update(functions)
        self.batch = BatchRunner(
            self.jobs,
            base,
            self.state.logs_dir,
            on_change=self._batch_changed,
            log_sink=self._put_log,
            launcher=self.lambdas.launcher,
        )
        patches.HOOKS.lambda_invoke = self._invoke
        patches.HOOKS.batch_run = self.batch
        patches.HOOKS.deliver = EventDelivery(self.lambdas)
        patches.HOOKS.athena_query = self._athena_query
        for mapping in deployer.event_source_mappings:
            self.lambdas.add_source(SqsEventSource(self.lambdas, mapping).start())

    def override_parameter(self, name: str, value: str) -> list[str]:
        """Give template parameter ``name`` a new value in the functions' environments that ``Ref`` it
        (``sam deploy --parameter-overrides`` for this process); returns the functions changed."""
        assert self.lambdas is not None
        lam, changed = self.client("lambda"), []
        for lid, res in self._cfn["Resources"].items():
            variables = res.get("Properties", {}).get("Environment", {}).get("Variables", {})
            keys = [k for k, v in variables.items() if v == {"Ref": name}]
            if res["Type"] != "AWS::Lambda::Function" or not keys:
                continue
            fn = self._physical[lid]
            env = dict(self.lambdas.functions[fn].environment)
            env.update(dict.fromkeys(keys, value))
            lam.update_function_configuration(FunctionName=fn, Environment={"Variables": env})
            self.lambdas.update(replace(self.lambdas.functions[fn], environment=env))
            changed.append(fn)
        if not changed:
            raise ValueError(f"no function's environment refers to the template parameter {name}")
        return changed

    def _invoke(self, name: str, payload: bytes, is_async: bool) -> tuple[bytes, bool]:
        assert self.lambdas is not None
        try:
            return self.lambdas(name, payload, is_async)
        finally:
            self._activity.set()

    def _batch_changed(self, progress: ArrayProgress) -> None:
        # a job that stops wakes the state machine's .sync wait at once (patch 7) instead of its next poll
        patches.wake_sync_waiters()
        self._activity.set()

    def _put_log(self, group: str, stream: str, lines: list[str]) -> None:
        """A Batch attempt's output into CloudWatch Logs (moto), where the failure step reads its last line."""
        logs = self.client("logs")
        with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_group(logGroupName=group)
        with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_stream(logGroupName=group, logStreamName=stream)
        now = int(time.time() * 1000)
        events = [{"timestamp": now, "message": line} for line in lines if line.strip()]  # no empty events
        for i in range(0, len(events), 5000):
            logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events[i : i + 5000])

    def _dead_letter(self, spec: FunctionSpec, event: bytes, error: bytes) -> None:
        """Lambda's asynchronous dead-letter queue: the event, with the error as message attributes."""
        sqs = self.client("sqs")
        url = sqs.get_queue_url(QueueName=str(spec.dead_letter_arn).rsplit(":", 1)[-1])["QueueUrl"]
        err = json.loads(error or b"{}")
        attributes = {
            "RequestID": {"DataType": "String", "StringValue": "local"},
            "ErrorCode": {"DataType": "String", "StringValue": str(err.get("errorType", "Unhandled"))},
            "ErrorMessage": {"DataType": "String", "StringValue": str(err.get("errorMessage", ""))[:1000] or "-"},
        }
        sqs.send_message(QueueUrl=url, MessageBody=event.decode(), MessageAttributes=attributes)

    def prewarm(self) -> None:
        """Start each function's next process now (call it after the last configuration change),
        except the functions only a failed run calls: on one core their imports would take CPU from
        the shards for nothing."""
        assert self.lambdas is not None
        definition = json.loads(
            self.client("stepfunctions").describe_state_machine(stateMachineArn=self.state_machine_arn)["definition"]
        )
        called, on_success = state_machine_functions(definition)
        for name in self.lambdas.functions:
            if name not in called - on_success:
                self.lambdas.prestart_one(name)

    # ---------------------------------------------------------------- state
    def restore(self) -> None:
        """Put the saved objects and partitions back, without starting runs for them."""
        s3, glue = self.client("s3"), self.client("glue")
        existing = {b["Name"] for b in s3.list_buckets()["Buckets"]}
        patches.HOOKS.events_enabled = False
        try:
            for bucket, keys in self.state.objects().items():
                if bucket not in existing:
                    continue
                for key, meta in keys.items():
                    path = self.state.local_path(bucket, key)
                    if meta.body and not key.startswith(NOT_RESTORED_PREFIXES) and path.is_file():
                        s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
            tables = {
                (t["DatabaseName"], t["Name"])
                for db in glue.get_databases()["DatabaseList"]
                for t in glue.get_tables(DatabaseName=db["Name"])["TableList"]
            }
            for t in self.state.catalog():
                if (t.database, t.name) not in tables or not t.partitions:
                    continue
                parts = [
                    {"Values": list(p.values), "StorageDescriptor": {"Location": p.location}} for p in t.partitions
                ]
                for i in range(0, len(parts), 100):
                    glue.batch_create_partition(
                        DatabaseName=t.database, TableName=t.name, PartitionInputList=parts[i : i + 100]
                    )
        finally:
            patches.HOOKS.events_enabled = True

    def catalog(self) -> list[athena.TableDef]:
        """The Glue catalog as it is now (tables and registered partitions)."""
        glue = self.client("glue")
        out = []
        for db in glue.get_databases()["DatabaseList"]:
            for t in (
                glue.get_paginator("get_tables").paginate(DatabaseName=db["Name"]).build_full_result()["TableList"]
            ):
                sd = t.get("StorageDescriptor", {})
                parts = (
                    glue.get_paginator("get_partitions")
                    .paginate(DatabaseName=db["Name"], TableName=t["Name"])
                    .build_full_result()["Partitions"]
                )
                out.append(
                    athena.TableDef(
                        database=db["Name"],
                        name=t["Name"],
                        location=sd.get("Location", ""),
                        columns=tuple((c["Name"], c["Type"]) for c in sd.get("Columns", [])),
                        partition_keys=tuple((k["Name"], k["Type"]) for k in t.get("PartitionKeys", [])),
                        partitions=tuple(
                            athena.Partition(tuple(p["Values"]), p["StorageDescriptor"]["Location"])
                            for p in sorted(parts, key=lambda p: p["Values"])
                        ),
                    )
                )
        return out

    def persist(self) -> int:
        """Mirror the data bucket's new or changed objects and the catalog into the state folder."""
        s3 = self.client("s3")
        saved = self.state.objects()
        known = saved.setdefault(self.bucket, {})
        written = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for obj in page.get("Contents", []):
                key, etag = obj["Key"], obj["ETag"].strip('"')
                meta = ObjectMeta(etag=etag, size=int(obj["Size"]), body=keeps_body(key))
                path = self.state.local_path(self.bucket, key)
                if meta.body and (known.get(key) != meta or not path.is_file()):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_name(path.name + ".tmp")
                    s3.download_file(self.bucket, key, str(tmp))
                    tmp.replace(path)
                    written += 1
                known[key] = meta
        self.state.save_objects(saved)
        self.state.save_catalog(self.catalog())
        return written

    def _athena_query(self, sql: str, database: str) -> tuple[list[str], list[list[str | None]]]:
        self.persist()
        result = athena.query(self.state.catalog(), self.state.files_under, sql, database)
        return result.columns, result.as_text()

    # ---------------------------------------------------------------- runs
    def upload(self, path: Path, key: str, bucket: str | None = None) -> str:
        """Put a local file (one PUT: its ETag is its MD5); returns the ``s3://`` URI."""
        bucket = bucket or self.bucket
        with path.open("rb") as f:
            self.client("s3").put_object(Bucket=bucket, Key=key, Body=f)
        return f"s3://{bucket}/{key}"

    def _list_executions(self) -> list[dict[str, Any]]:
        sfn = self.client("stepfunctions")
        pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=self.state_machine_arn)
        executions: list[dict[str, Any]] = pages.build_full_result()["executions"]
        return executions

    def _busy(self) -> bool:
        assert self.lambdas is not None and self.batch is not None
        return bool(self.lambdas.pending or self.batch.active)

    def wait(self, timeout: float = 3600.0) -> list[Execution]:
        """Wait until nothing runs any more; returns the executions started since the last wait."""
        deadline = time.monotonic() + timeout
        watcher = Watcher(self, quiet=self.quiet)
        with watcher:
            quiet_polls, interval, polled = 0, 0.1, 0.0
            while quiet_polls < 2:  # two idle polls in a row: an event in flight has landed
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the local cloud was still busy after {timeout:.0f} s")
                # Each poll is a few requests through moto (the execution's whole history among them),
                # on the core the shards need. The state machine moves when a Lambda or Batch job
                # returns, and those wake this loop; while one runs, the shard bars are updated from
                # the Batch runner alone and moto is asked only every _BUSY_POLL_SECONDS.
                woke = self._activity.wait(interval)
                if woke:
                    self._activity.clear()
                    time.sleep(_SETTLE_SECONDS)  # the interpreter takes the transitions it unblocked
                busy = self._busy()
                if woke or not busy or time.monotonic() - polled > _BUSY_POLL_SECONDS:
                    running, polled = watcher.poll(), time.monotonic()
                else:
                    watcher.update_arrays()
                    running = True
                watcher.changed = False
                idle = not (running or busy)
                quiet_polls = quiet_polls + 1 if idle else 0
                interval = _QUICK_POLL_SECONDS if idle else min(_SLOW_POLL_SECONDS, interval * 1.5)
            watcher.poll()
        finished = [e for arn, e in watcher.executions.items() if arn not in self._seen]
        self._seen.update(watcher.executions)
        self.persist()
        for e in finished:
            self.state.record_run(self._run_record(e))
        return finished

    def _run_record(self, e: Execution) -> dict[str, Any]:
        status_doc: dict[str, Any] = {}
        run_id = str(e.input.get("run_id") or e.name)
        path = Path(RunLayout(str(self.state.bucket_dir(self.bucket)), run_id).status)
        if path.is_file():
            with contextlib.suppress(ValueError):
                status_doc = json.loads(path.read_text())
        return {
            "run_id": run_id,
            "execution_arn": e.arn,
            "status": e.status,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.started)),
            "seconds": round((e.stopped or time.time()) - e.started, 1),
            "inputs": [{"key": i.get("key"), "etag": i.get("etag")} for i in status_doc.get("inputs", [])],
            "reference": status_doc.get("reference"),
            "states": e.states,
            "error": e.error,
            "cause": (e.cause or "")[:2000] or None,
            "shards": sum(a.size for a in e.arrays),
            "retried": sum(a.retries for a in e.arrays),
            "failed_shards": sum(a.failed for a in e.arrays),
            "status_json": status_doc,
        }

    @contextlib.contextmanager
    def events_paused(self) -> Iterator[None]:
        patches.HOOKS.events_enabled = False
        try:
            yield
        finally:
            patches.HOOKS.events_enabled = True
