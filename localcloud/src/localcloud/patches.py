"""The few changes moto needs to run this app, each small and pinned to one moto version.

They touch moto's private internals, so importing this module fails on any other moto version
(``pyproject.toml`` pins it). Each patch has a stable id, the key of :data:`PATCHES`; its entry in
:mod:`.patch_registry` says what it replaces, why (with AWS's documentation), moto's upstream issue, the test
that fails without it (``tests/local/test_patch_registry.py`` runs each with that one patch off) and the
probe that says whether moto still needs it (``make moto-check``). Behaviour that is the project's own (how a
Lambda or a Batch child runs, how Athena answers) lives in the runner modules and is reached through
:data:`HOOKS`, so the patches stay mechanical. With its hook unset, each emulator patch (lambda-invoke,
batch-submit, event-targets, athena-results, sync-wait) falls back to moto's own behaviour, so ``mock_aws``
tests in the same process are unaffected.

The patches, by id:

- ``sfn-normalisation``: Step Functions service integrations: moto stubs the Pascal->camel request normalisation
  that its interpreter (ported from LocalStack) needs, so ``batch:submitJob`` fails with ``States.Runtime`` (cause
  ``'JobName'``); responses carry ``datetime`` objects that break ``DescribeExecution``.
- ``s3-ranged-get``: S3 ranged GET reads the whole object and slices it: a shard's 8 MiB read of a 300 MB object
  copied 300 MB, so ranged reads cost time in proportion to the object, not the range. Here the range is read from
  the object's buffer, and a range over 1 MiB is streamed to the client a MiB at a time, so an open-ended GET of a
  large object (a scan, a shard read to its end) does not hold the rest of the object in the server's memory.
- ``lambda-invoke``: Lambda without Docker echoes the payload: here it calls :attr:`Hooks.lambda_invoke`.
- ``batch-submit``: Batch without Docker marks every job succeeded at once: here :attr:`Hooks.batch_run` runs it. An
  array of size 1 is refused, as AWS Batch does (``size`` must be 2..10,000).
- ``event-targets``: EventBridge drops Step Functions and Lambda targets: here :attr:`Hooks.deliver` receives them.
- ``athena-results``: Athena returns no rows: here :attr:`Hooks.athena_query` answers.
- ``sync-wait``: The interpreter polls ``DescribeJobs`` every 0.5 s while a ``batch:submitJob.sync`` task waits: an
  HTTP round trip through moto each time, on the core the children need. Here the wait sleeps until
  :func:`wake_sync_waiters` is called (the Batch runner calls it when a job changes) or :data:`SYNC_POLL_SECONDS`
  pass, whichever is first.
- ``server-lookups``: The server's per-request lookups: every request lists moto's package folder (``os.listdir``
  and ~180 ``isdir`` calls) to see whether the host names a service, and every service model moto loads makes a new
  model loader, which scans botocore's data folders again. Here the folder is listed once and moto keeps one loader
  (the models themselves were already cached per service). Likewise each request matched its service's host name
  against moto's ~180 URL patterns in turn (S3 is near the end): here each host name is matched once; every backend
  lookup (``s3_backends[account]``, several a request) tested whether its service's backends were registered for a
  reset by comparing them with every other service's, as dictionaries: here a registered account's backends are
  returned at once; and every response went through flask-cors, which adds browser headers no client here reads
  (moto's ``MOTO_DISABLE_GLOBAL_CORS``).
- ``aws-limits``: AWS's limits (:mod:`.limits`; the app, seqlake say, keeps a copy), which moto does not hold the app
  to: Step Functions refuses an execution input over 262,144 bytes (``ValidationException``) and fails a Task whose
  input after ``Parameters`` is over it with ``States.DataLimitExceeded`` (moto checks each state's output and each
  task's result already), which ``States.ALL`` does not catch, as on AWS; Lambda refuses a request over 6 MB
  (synchronous) or 1 MB (asynchronous) with ``RequestEntityTooLargeException`` and fails a response over 6 MB
  (``Function.ResponseSizeTooLarge``; moto's own check already fails one over 6,000,000 bytes, slightly stricter);
  Batch's array sizes are batch-submit's, its request size batch-service-rules'. Always on: they are AWS's.
- ``s3-latency``: S3 per-request latency: with the app's latency setting set (:attr:`.contract.Settings.s3_latency_ms`;
  off by default and for the demo), every S3 request the server answers waits that long first, so that the scale
  tests and bench see the round trips a real bucket costs (the app's, seqlake's say: ``S3_SCALE_LATENCY_MS``, 20 ms).
- ``batch-describe``: Batch ``DescribeJobs`` appends the job definition's environment and ``AWS_BATCH_JOB_ID`` to
  the job's own ``containerOverrides.environment`` list each time it describes a job, and an array's children share
  their parent's overrides: every describe made every later description longer (an array job of 1,000 children
  failed with a ``Cause`` of 89 KB). Here a description is built on a copy, as AWS describes a job without changing
  it.
- ``s3-spooled-bodies``: S3 bodies on disk: moto keeps an object in a ``SpooledTemporaryFile`` (on disk past 5 MiB),
  but completing a multipart upload joins the parts in memory and holds the whole object about three times (the
  join, its ``bytes``, the full-object checksum): the local cloud's own process grew by 2.4 GB while a child
  uploaded a 634 MB minimap2 index. Here the parts are copied into a spool a MiB at a time (the checksum computed as
  they pass) that the new key adopts as its buffer; a GET of a whole object is streamed a MiB at a time, as
  s3-ranged-get streams a range; and a request's body is let go when its response is ready: Flask keeps every
  request in a reference cycle (``request.files``'s class holds the request), so each uploaded part stayed in memory
  until the garbage collector ran, which a few large allocations do not make it do (a 600 MB upload held 465 MB of
  parts). A copy (CopyObject, UploadPartCopy) read its source whole into memory and sliced it: here the source (or
  its range) is copied into a spool a MiB at a time, which the new key or part adopts. Completing one upload is one
  at a time: a client whose CompleteMultipartUpload outlasts its read timeout sends it again while the first still
  copies the parts (AWS keeps such a connection open with whitespace; botocore retries here), and the second read
  the parts the first had just closed (HTTP 500, a 10.9 GB upload failed eight times). The second now waits for the
  first and is answered as AWS answers a repeated complete: the completed object (moto's own check for a repeat,
  which a concurrent one slipped past).
- ``iam-authorization``: IAM authorization (on when the local cloud enforces IAM, :mod:`.iam`, for its server's
  requests only: ``mock_aws`` in the same process keeps moto's ``INITIAL_NO_AUTH_ACTION_COUNT``): moto checks a
  request's identity policies against ``*`` for every service but S3, SQS, IAM and STS (so a statement naming an ARN
  never applies), skips most conditions and all resource policies, and its AccessDenied names no resource. Here
  :attr:`Hooks.authorize` decides each request moto authorizes (:mod:`.policy`) and raises the service's
  AccessDenied with AWS's message (caller, action, resource, why). moto's signature check signs its parsed
  parameters in place of an empty body (a Lambda GET's are its headers): with the hook, an empty body is signed as
  the client signed it.
- ``sfn-credentials``: Step Functions service integrations are signed with fixed fake keys (``ak``/``sk``): here
  with the keys :attr:`Hooks.state_machine_credentials` gives (the state machine role's session).
- ``s3-direct-get``: A plain ``GetObject`` (signed, path-style, no query, one byte range or none, of an object in a
  bucket without a policy, CORS or logging) is answered by the local server without moto's web route (werkzeug's
  environ, Flask, moto's dispatch and serializer: about 3 ms of the server's interpreter a request, when a plan of
  10,000 samples sends 20,000 of them), with what moto decides kept: the latency (s3-latency), the signature and the
  caller's permission (iam-authorization; a signature is confirmed with the day's signing key derived once, moto's
  own check deciding whatever that does not confirm), the key's headers as moto builds them and the range as
  s3-ranged-get cuts it. Anything else (a missing key, another range, a refused caller) is moto's to answer, as
  before; a refusal is raised once, by moto's route.
- ``execution-events``: Step Functions' ``Execution Status Change`` events, which moto does not emit: when an
  execution ends (SUCCEEDED, FAILED, TIMED_OUT, ABORTED: the interpreter's ``terminated``),
  :attr:`Hooks.execution_ended` is handed the execution and the step that records its end, so that the end and its
  event are one step for a waiter (the hook puts the event on the default bus, :mod:`.hooks`).
- ``response-enrichment``: Every response of moto's generic dispatch ran a regex over its body to put the request id
  into an XML ``<RequestId>`` element, JSON bodies too (Step Functions, Batch, Lambda, Glue: none has the element),
  its lookbehind tried at every character. Here it runs only over a body that has the element; the headers get their
  request id as before. moto drew each of a request id's 52 characters with its own ``choice`` call: here in one
  ``choices`` call (the same pool and seedable generator). And moto listed a response class's functions
  (``inspect.getmembers``) on every such request to see whether the action is one: here once per class.
- ``batch-service-rules``: what Batch refuses that moto accepts (:mod:`.rules`, docs/LOCAL_CLOUD.md's table): a
  SubmitJob request over 30 KiB, a fair-share queue's job without a share identifier or scheduling priority (moto
  drops ``shareIdentifier``, ``schedulingPriorityOverride`` and a job definition's ``schedulingPriority``, kept
  here on its job definition), a timeout under 60 s, container overrides Batch refuses. moto's ``SubmitJob``
  handler is wrapped once, here, for all of them.
- ``sfn-batch-parameters``: Step Functions passes a ``batch:submitJob`` task every SubmitJob parameter; moto's
  interpreter passes only those of its own short list and drops the rest without a word (``ShareIdentifier``,
  ``SchedulingPriorityOverride``, ``PropagateTags``...), so a fair-share queue refused every submission of the
  state machine that AWS takes. Here the list is every member of botocore's SubmitJob model.
- ``batch-describe-jobs``: Batch ``DescribeJobs`` walked the backend's whole job table (``for key, job in
  self._jobs.items()``) to find the jobs asked for, while ``SubmitJob`` (batch-submit) adds to that table: the
  server answers each request on a thread of its own, so an execution's SubmitJob landing while another's ``.sync``
  task polled DescribeJobs failed the poll with ``RuntimeError: dictionary changed size during iteration`` (HTTP
  500), which ended the polling execution FAILED with ``States.Runtime`` before any ``Catch`` (see
  :mod:`.http_server` on such errors). Here each job asked for is looked up by its id (an ARN through a copy of the
  table), which also makes a poll cost the jobs asked for, not every job the cloud has run.
- ``glue-version-id``: Glue ``UpdateTable`` ignored ``VersionId``: moto replaced the table whatever version the
  caller read, so two Iceberg commits (pyiceberg's Glue catalog: read the table, write new metadata, swap the table's
  ``metadata_location`` under the version read) racing on one table both "succeeded" and one run's snapshot was
  lost. Glue refuses an update whose ``VersionId`` is not the table's current one
  (``ConcurrentModificationException``), which is what makes an Iceberg commit optimistic: here the check and the
  update are one step under a lock, as on AWS.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import functools
import hashlib
import hmac
import importlib.metadata
import importlib.util
import json
import os
import re
import string
import tempfile
import threading
import time
import types
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import botocore
import botocore.session

from localcloud import botocore_loader, contract, limits, patch_registry


def pinned_moto() -> str:
    """The moto release the patches are written against: the distribution's pin (localcloud/pyproject.toml, as
    installed), its one home."""
    for text in importlib.metadata.requires("localcloud") or []:
        pin = re.fullmatch(r"moto(\[[^\]]*\])?==([\w.]+)", text.split(";")[0].strip())
        if pin:
            return pin.group(2)
    raise RuntimeError("the localcloud distribution pins no moto release")


MOTO_VERSION = pinned_moto()


@functools.lru_cache(maxsize=64)
def signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    """SigV4's signing key of a secret key for a day (``YYYYMMDD``), region and service: four HMACs, once."""
    key = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def check_moto_version() -> None:
    found = importlib.metadata.version("moto")
    if found != MOTO_VERSION:
        raise RuntimeError(f"the local cloud patches moto {MOTO_VERSION} internals; found moto {found}")


check_moto_version()
# before moto's imports: moto.ec2 parses the EC2 model at import time, in a session of its own
botocore_loader.share()

# moto imports below are deliberately after the version check.
# moto's classes are patched, so they are handled as ``Any``: their own annotations describe moto's
# methods, not the replacements.
import moto.athena.models as _athena  # noqa: E402
import moto.awslambda_simple.models as _lambda  # noqa: E402
import moto.backends as _backends  # noqa: E402
import moto.batch.exceptions as _batch_exc  # noqa: E402
import moto.batch.models as _batch  # noqa: E402
import moto.batch.responses as _batch_responses  # noqa: E402
import moto.batch_simple.models as _batch_simple  # noqa: E402
import moto.core.authorization as _authorization  # noqa: E402
import moto.core.base_backend as _base_backend  # noqa: E402
import moto.core.config as _config  # noqa: E402
import moto.core.exceptions as _exc  # noqa: E402
import moto.core.responses as _core_responses  # noqa: E402
import moto.core.utils as _core_utils  # noqa: E402
import moto.events.models as _events  # noqa: E402
import moto.glue.models as _glue  # noqa: E402
import moto.glue.responses as _glue_responses  # noqa: E402
import moto.iam.access_control as _access_control  # noqa: E402
import moto.moto_api._internal.moto_random as _moto_random  # noqa: E402
import moto.moto_server.werkzeug_app as _werkzeug_app  # noqa: E402
import moto.s3.exceptions as _s3_exc  # noqa: E402
import moto.s3.models as _s3  # noqa: E402
import moto.s3.responses as _s3_responses  # noqa: E402
import moto.settings as _moto_settings  # noqa: E402
import moto.stepfunctions.exceptions as _sfn_exc  # noqa: E402
import moto.stepfunctions.parser.api as _sfn_api  # noqa: E402
import moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl as _error_equals  # noqa: E402
import moto.stepfunctions.parser.asl.component.common.error_name.failure_event as _failure  # noqa: E402
import moto.stepfunctions.parser.asl.component.common.error_name.states_error_name as _states_error  # noqa: E402
import moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type as _states_error_type  # noqa: E402
import moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service as _sts  # noqa: E402
import moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_batch as _sfn_batch  # noqa: E402
import moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback as _stc  # noqa: E402
import moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task as _state_task  # noqa: E402
import moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda as _state_task_lambda  # noqa: E402
import moto.stepfunctions.parser.asl.eval.event.event_detail as _event_detail  # noqa: E402
import moto.stepfunctions.parser.asl.utils.boto_client as _sfn_boto_client  # noqa: E402
import moto.stepfunctions.parser.backend.execution as _sfn_execution  # noqa: E402
import moto.stepfunctions.parser.models as _sfn_models  # noqa: E402
from moto.core.compat import HAS_CRT  # noqa: E402
from moto.core.models import botocore_stubber as _botocore_stubber  # noqa: E402
from moto.utilities.arns import parse_arn  # noqa: E402

from localcloud import rules  # noqa: E402 - it imports moto's Batch exceptions

AthenaBackend: Any = _athena.AthenaBackend
QueryResults: Any = _athena.QueryResults
LambdaSimpleBackend: Any = _lambda.LambdaSimpleBackend
ClientException: Any = _batch_exc.ClientException
Job: Any = _batch.Job
BatchSimpleBackend: Any = _batch_simple.BatchSimpleBackend
JsonRESTError: Any = _exc.JsonRESTError
Rule: Any = _events.Rule
FakeKey: Any = _s3.FakeKey
FakeMultipart: Any = _s3.FakeMultipart
S3Backend: Any = _s3.S3Backend
S3Response: Any = _s3_responses.S3Response
StateTaskService: Any = _sts.StateTaskService
BatchResponse: Any = _batch_responses.BatchResponse
StepFunctionsParserBackend: Any = _sfn_models.StepFunctionsParserBackend
ExecutionWorkerCommunication: Any = _sfn_execution.BaseExecutionWorkerCommunication
ErrorEqualsDecl: Any = _error_equals.ErrorEqualsDecl
StateTask: Any = _state_task.StateTask
StateTaskLambda: Any = _state_task_lambda.StateTaskLambda

#: (function name, payload, asynchronous) -> (response payload, failed)
LambdaHook = Callable[[str, bytes, bool], tuple[bytes, bool]]
#: (array parent or single job, its children: empty for a single job) -> None; runs them in the background
BatchHook = Callable[[Job, list[Job]], None]
#: (target as stored by PutTargets, event, the rule's ARN) -> None
DeliverHook = Callable[[dict[str, Any], dict[str, Any], str], None]
#: (SQL, default database) -> (column names, rows as text or None); raises ValueError on a bad query
AthenaHook = Callable[[str, str], tuple[list[str], list[list[str | None]]]]
#: (moto's IAM request, the resource moto names) -> None; raises the service's AccessDenied
AuthorizeHook = Callable[[Any, str], None]
#: () -> (access key, secret key, session token) of the state machine's role, or None
CredentialsHook = Callable[[], tuple[str, str, str] | None]
#: (moto's ending execution, the step that sets its final status) -> None; runs the step, then emits the event
ExecutionEndedHook = Callable[[Any, Callable[[], None]], None]


@dataclass
class Hooks:
    lambda_invoke: LambdaHook | None = None
    batch_run: BatchHook | None = None
    deliver: DeliverHook | None = None
    athena_query: AthenaHook | None = None
    authorize: AuthorizeHook | None = None
    #: the port of the server whose requests :attr:`authorize` decides (``mock_aws`` requests stay moto's)
    authorized_port: int | None = None
    state_machine_credentials: CredentialsHook | None = None
    execution_ended: ExecutionEndedHook | None = None
    #: False while state is restored: re-creating objects must not start runs again
    events_enabled: bool = True
    applied: set[str] = field(default_factory=set)


HOOKS = Hooks()
_lock = threading.Lock()


# ---------------------------------------------------------------- Step Functions normalisation
_boto_models: dict[str, Any] = {}


def _operation_model(service: str, action: str) -> Any:
    """botocore's model of ``service``'s operation ``action`` (snake_case, as the interpreter names it)."""
    if service not in _boto_models:
        model = botocore.session.get_session().get_service_model(service)
        _boto_models[service] = (model, {botocore.xform_name(op): op for op in model.operation_names})
    model, operations = _boto_models[service]
    op = operations.get(action)
    return model.operation_model(op) if op else None


def _stringify_datetimes(node: Any) -> None:
    items: Any = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in list(items):
        if isinstance(v, datetime.datetime):
            node[k] = v.isoformat()
        else:
            _stringify_datetimes(v)


def _normalise_parameters(
    self: Any,
    parameters: dict[str, Any],
    boto_service_name: str | None = None,
    service_action_name: str | None = None,
) -> None:
    om = _operation_model(
        self._get_boto_service_name(boto_service_name), self._get_boto_service_action(service_action_name)
    )
    if om is not None and om.input_shape is not None:
        self._to_boto_request(parameters, om.input_shape)


def _normalise_response(
    self: Any, response: Any, boto_service_name: str | None = None, service_action_name: str | None = None
) -> None:
    om = _operation_model(
        self._get_boto_service_name(boto_service_name), self._get_boto_service_action(service_action_name)
    )
    if om is not None and om.output_shape is not None:
        self._from_boto_response(response, om.output_shape)
    _stringify_datetimes(response)


def _patch_sfn_normalisation() -> None:
    StateTaskService._normalise_parameters = _normalise_parameters
    StateTaskService._normalise_response = _normalise_response


# ---------------------------------------------------------------- S3 ranged GET
_ranged = threading.local()


class _KeyView:
    """Bytes-like view of an object's buffer: moto's range handler takes ``len()`` and one slice."""

    def __init__(self, key: FakeKey) -> None:
        self.key = key

    def __len__(self) -> int:
        return int(self.key.size)

    def __getitem__(self, s: slice) -> _KeyRange:
        start, stop, _ = s.indices(len(self))
        return _KeyRange(self.key, start, max(start, stop))

    def __bytes__(self) -> bytes:
        return bytes(self[0 : len(self)])


class _KeyRange:
    """A range of an object's buffer, read in chunks as the response is sent: an open-ended GET of a
    large object (a scan, a shard read to its end) holds one chunk in memory, not the whole rest."""

    CHUNK = 1 << 20

    def __init__(self, key: FakeKey, start: int, stop: int) -> None:
        self.key, self.start, self.stop = key, start, stop

    def __len__(self) -> int:
        return self.stop - self.start

    def _read(self, at: int, n: int) -> bytes:
        with self.key.lock:
            self.key._value_buffer.seek(at)
            data: bytes = self.key._value_buffer.read(n)
        return data

    def __iter__(self) -> Iterator[bytes]:
        at = self.start
        while at < self.stop:
            chunk = self._read(at, min(self.CHUNK, self.stop - at))
            if not chunk:
                return
            at += len(chunk)
            yield chunk

    def __bytes__(self) -> bytes:
        return self._read(self.start, len(self))


_original_value = FakeKey.value
_original_get_object = S3Response.get_object
_original_range = S3Response._handle_range_header


def _streamed(size: int) -> bool:
    """Whether a body of ``size`` bytes is sent a MiB at a time: past a MiB, and only to a server's client.
    ``mock_aws`` in this process (botocore's stubber) takes bytes only, and it may run while a local cloud
    runs or after one stopped (the patches stay applied for the process's life)."""
    return size > _KeyRange.CHUNK and not _botocore_stubber.enabled


def _value(self: FakeKey) -> Any:
    if getattr(_ranged, "on", False):
        return _KeyView(self)
    return _original_value.fget(self)


def _get_object(self: S3Response) -> Any:
    rng = self.headers.get("range") or ""
    # a single range, or the whole object (s3-spooled-bodies); moto answers several ranges from the whole value
    _ranged.on = (rng.startswith("bytes=") and "," not in rng) or not rng
    try:
        status, headers, body = _original_get_object(self)
    finally:
        _ranged.on = False
    if isinstance(body, _KeyView) and not rng:  # the whole object (a range is cut by moto's handler, next)
        whole = body[0 : len(body)]
        # streamed by the local cloud's server
        body = iter(whole) if HOOKS.lambda_invoke is not None and _streamed(len(whole)) else bytes(whole)
    return status, headers, body


def _handle_range_header(self: S3Response, request: Any, headers: dict[str, Any], content: Any) -> Any:
    status, headers, body = _original_range(self, request, headers, content)
    if isinstance(body, _KeyView):  # a range moto answers with the whole object
        body = body[0 : len(body)]
    if isinstance(body, _KeyRange):
        # small: bytes, as moto sends them; large: streamed by the server (Content-Length is set)
        body = iter(body) if _streamed(len(body)) else bytes(body)
    return status, headers, body


def _patch_s3_ranged_get() -> None:
    FakeKey.value = property(_value, _original_value.fset)
    S3Response.get_object = _get_object
    S3Response._handle_range_header = _handle_range_header


# ---------------------------------------------------------------- S3 bodies spooled to disk
class _Spool:
    """A completed multipart upload's body in a temporary file like moto's own key buffers (on disk past
    moto's buffer size), which the new key adopts instead of being given the whole object as ``bytes``."""

    def __init__(self) -> None:
        self.file: Any = tempfile.SpooledTemporaryFile(max_size=_moto_settings.get_s3_default_key_buffer_size())  # noqa: SIM115
        self.size = 0

    def __len__(self) -> int:
        return self.size


class _Checksum:
    """moto's ``compute_checksum`` (the same algorithms and fallbacks) over data given in pieces."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm
        self._crc = 0
        self._hash: Any = None
        if algorithm == "SHA1":
            self._hash = hashlib.sha1(usedforsecurity=False)
        elif algorithm not in ("CRC32", "CRC32C", "CRC64NVME"):
            self._hash = hashlib.sha256(usedforsecurity=False)
        self._crt = algorithm == "CRC64NVME" and HAS_CRT
        self._crc32c = algorithm == "CRC32C" and importlib.util.find_spec("crc32c") is not None

    def update(self, data: bytes) -> None:
        if self._hash is not None:
            self._hash.update(data)
        elif self._crt:
            self._crc = importlib.import_module("awscrt.checksums").crc64nvme(data, self._crc)
        elif self._crc32c:
            self._crc = importlib.import_module("crc32c").crc32c(data, self._crc)
        else:  # CRC32, and moto's fallback for CRC32C and CRC64NVME without their libraries
            self._crc = binascii.crc32(data, self._crc)

    def digest(self) -> bytes:
        if self._hash is not None:
            return bytes(self._hash.digest())
        return self._crc.to_bytes(8 if self._crt else 4, "big")


def key_chunks(key: FakeKey) -> Iterator[bytes]:
    """An object's (or a part's) body a MiB at a time, read from its buffer."""
    at = 0
    while True:
        with key.lock:
            key._value_buffer.seek(at)
            chunk: bytes = key._value_buffer.read(_KeyRange.CHUNK)
        if not chunk:
            return
        at += len(chunk)
        yield chunk


def _complete_multipart(self: Any, body: Iterator[tuple[int, str]]) -> tuple[_Spool, str, tuple[str, str, int]]:
    """moto's ``FakeMultipart.complete`` (same checks, ETag and checksum), the parts copied into a spool a
    MiB at a time instead of joined in memory."""
    algorithm: str = self.metadata.get("x-amz-checksum-algorithm") or "CRC64NVME"
    kind: str = self.metadata.get("x-amz-checksum-type") or (
        "FULL_OBJECT" if algorithm == "CRC64NVME" else "COMPOSITE")
    spool, md5s, part_sums, whole = _Spool(), bytearray(), bytearray(), _Checksum(algorithm)
    last, count = None, 0
    try:
        for number, etag in body:
            part = self.parts.get(number)
            if part is None or part.etag.replace('"', "") != etag.replace('"', ""):
                raise _s3_exc.InvalidPart()
            if last is not None and last.contentsize < _moto_settings.S3_UPLOAD_PART_MIN_SIZE:
                raise _s3_exc.EntityTooSmall()
            md5s.extend(bytes.fromhex(part.etag.replace('"', "")))
            own = _Checksum(algorithm)
            for chunk in key_chunks(part):
                spool.file.write(chunk)
                spool.size += len(chunk)
                (own if kind == "COMPOSITE" else whole).update(chunk)
            part_sums.extend(own.digest())
            last, count = part, count + 1
        if count == 0:
            raise _s3_exc.MalformedXML()
    except BaseException:
        spool.file.close()
        raise
    if kind == "COMPOSITE":
        combined = _Checksum(algorithm)
        combined.update(bytes(part_sums))
        checksum = (kind, base64.b64encode(combined.digest()).decode(), count)
    else:
        checksum = (kind, base64.b64encode(whole.digest()).decode(), 1)
    return spool, f"{hashlib.md5(bytes(md5s), usedforsecurity=False).hexdigest()}-{count}", checksum


def _spool_of(key: FakeKey, start: int, stop: int) -> _Spool:
    """Bytes ``[start, stop)`` of an object's buffer copied into a spool a MiB at a time."""
    spool, at = _Spool(), start
    while at < stop:
        with key.lock:
            key._value_buffer.seek(at)
            chunk: bytes = key._value_buffer.read(min(_KeyRange.CHUNK, stop - at))
        if not chunk:
            break
        spool.file.write(chunk)
        spool.size += len(chunk)
        at += len(chunk)
    return spool


class _CopySource:
    """A copy's source key whose ``value`` (moto's copy reads it whole, as ``bytes``) is a spool of its body
    instead, which the new key adopts (:func:`_set_value`)."""

    def __init__(self, key: FakeKey) -> None:
        self._key = key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._key, name)

    @property
    def value(self) -> _Spool:
        return _spool_of(self._key, 0, int(self._key.size))


_original_copy_object = S3Backend.copy_object


def _copy_object(self: Any, src_key: FakeKey, *args: Any, **kwargs: Any) -> None:
    _original_copy_object(self, _CopySource(src_key), *args, **kwargs)


def _upload_part_copy(  # noqa: PLR0917 - moto's signature
    self: Any, dest_bucket_name: str, multipart_id: str, part_id: int, src_bucket_name: str, src_key_name: str,
    src_version_id: str | None, start_byte: int | None, end_byte: int | None,
) -> FakeKey:
    """moto's ``upload_part_copy``, the range copied into a spool a MiB at a time instead of sliced from
    the whole object read into memory."""
    multipart = self.get_bucket(dest_bucket_name).multiparts[multipart_id]
    key = self.get_object(src_bucket_name, src_key_name, version_id=src_version_id)
    size = int(key.size)
    start, stop = (0, size) if start_byte is None else (start_byte, min(size, (end_byte or 0) + 1))
    return multipart.set_part(part_id, _spool_of(key, start, stop))


def _set_value(self: FakeKey, new_value: Any) -> None:
    if not isinstance(new_value, _Spool):
        _original_value.fset(self, new_value)
        return
    old, self._value_buffer = self._value_buffer, new_value.file  # adopted, not copied
    old.close()
    self.contentsize = new_value.size


_original_key_response = S3Response.key_response


def _key_response(self: S3Response, request: Any, full_url: str, headers: Any) -> Any:
    try:
        return _original_key_response(self, request, full_url, headers)
    finally:  # the request's body (werkzeug's cache of it, moto's copies): not kept by a cycle
        for name in ("_cached_data", "data"):
            request.__dict__.pop(name, None)
        self.body = self.raw_body = b""


_original_complete_upload = S3Backend.complete_multipart_upload
#: one lock per upload being completed (:func:`_complete_upload`), dropped once it is complete (a request that
#: comes later finds the object made)
_completing: dict[str, threading.Lock] = {}
_completing_guard = threading.Lock()


def _complete_upload(self: Any, bucket_name: str, multipart_id: str, body: Iterator[tuple[int, str]]) -> Any:
    """moto's ``complete_multipart_upload``, one request of an upload at a time; a request that waited for
    another's completion gets the object it made (a repeated complete, as on AWS)."""
    with _completing_guard:
        lock = _completing.setdefault(multipart_id, threading.Lock())
    with lock:
        bucket = self.get_bucket(bucket_name)
        if multipart_id not in bucket.multiparts:
            done = next((k for k in bucket.keys.values()
                         if k.multipart is not None and k.multipart.id == multipart_id), None)
            if done is not None:
                return done
        key = _original_complete_upload(self, bucket_name, multipart_id, body)
    with _completing_guard:
        if multipart_id not in bucket.multiparts:
            _completing.pop(multipart_id, None)
    return key


def _patch_s3_spooled_bodies() -> None:
    FakeMultipart.complete = _complete_multipart
    S3Backend.complete_multipart_upload = _complete_upload
    S3Backend.copy_object = _copy_object
    S3Backend.upload_part_copy = _upload_part_copy
    FakeKey.value = property(FakeKey.value.fget, _set_value)
    S3Response.key_response = _key_response


# ---------------------------------------------------------------- Lambda invoke
_original_invoke: Any = LambdaSimpleBackend.invoke


def _invoke(  # noqa: PLR0917 - moto's signature
    self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
) -> bytes | None:
    if HOOKS.lambda_invoke is None:
        echoed: bytes | None = _original_invoke(self, function_name, qualifier, body, headers, response_headers)
        return echoed
    fn = self.get_function(function_name, qualifier)
    payload = body if isinstance(body, bytes) else (body or "").encode()
    is_async = (headers or {}).get("X-Amz-Invocation-Type") == "Event"
    check_lambda_request(payload, is_async)
    result, failed = HOOKS.lambda_invoke(fn.function_name, payload, is_async)
    too_large = lambda_response_too_large(result)
    if too_large is not None:
        result, failed = too_large, True
    if failed:
        response_headers["x-amz-function-error"] = "Unhandled"
    return result


def _patch_lambda_invoke() -> None:
    LambdaSimpleBackend.invoke = _invoke


# ---------------------------------------------------------------- Batch submit
_original_submit: Any = BatchSimpleBackend.submit_job


def _submit_job(  # noqa: PLR0917 - moto's signature
    self: Any,
    job_name: str,
    job_def_id: str,
    job_queue: str,
    array_properties: dict[str, Any],
    depends_on: list[dict[str, str]] | None = None,
    container_overrides: dict[str, Any] | None = None,
    eks_properties_override: dict[str, Any] | None = None,
    timeout: dict[str, int] | None = None,
    parameters: dict[str, str] | None = None,
    tags: dict[str, str] | None = None,
) -> tuple[str, str, str]:
    size = (array_properties or {}).get("size")
    if size is not None and not limits.BATCH_ARRAY_MIN.value <= int(size) <= limits.BATCH_ARRAY_MAX.value:
        raise ClientException(
            f"Array size {size} is outside {limits.BATCH_ARRAY_MIN.value}..{limits.BATCH_ARRAY_MAX.value}"
            " (a job of one is a plain job)"
        )
    if HOOKS.batch_run is None:
        submitted: tuple[str, str, str] = _original_submit(
            self,
            job_name,
            job_def_id,
            job_queue,
            array_properties,
            depends_on,
            container_overrides,
            eks_properties_override,
            timeout,
            parameters,
            tags,
        )
        return submitted
    job_def = self.get_job_definition(job_def_id)
    if job_def is None:
        raise ClientException(f"Job definition {job_def_id} does not exist")
    queue = self.get_job_queue(job_queue)
    if queue is None:
        raise ClientException(f"Job queue {job_queue} does not exist")

    def make(props: dict[str, Any], job_id: str | None = None) -> Job:
        job = Job(
            job_name,
            job_def,
            queue,
            self,
            log_backend=self.logs_backend,
            container_overrides=container_overrides,
            eks_properties_override=eks_properties_override,
            depends_on=depends_on,
            all_jobs=self._jobs,
            timeout=timeout,
            array_properties=props,
            provided_job_id=job_id,
            parameters=parameters,
            tags=tags if job_id is None else None,
        )
        job.status = "RUNNABLE"
        self.backend._jobs[job.job_id] = job
        return job

    parent = make(array_properties or {})
    children = [make({"statusSummary": {}, "index": i}, f"{parent.job_id}:{i}") for i in range(int(size or 0))]
    parent._child_jobs = children or None
    HOOKS.batch_run(parent, children)
    return job_name, parent.job_id, parent.arn


def _patch_batch_submit() -> None:
    BatchSimpleBackend.submit_job = _submit_job


# ---------------------------------------------------------------- EventBridge targets
_original_send = Rule.send_to_targets
_DELIVERED_SERVICES = ("states", "lambda")


def _send_to_targets(self: Rule, original_event: dict[str, Any], transform_input: bool = True) -> None:
    # a scheduled rule (no pattern: moto's empty pattern matches every event) fires on its schedule only, which
    # the local cloud never does; a disabled rule delivers nothing
    if self.scheduled_expression or self.state != "ENABLED":
        return
    if not HOOKS.events_enabled or not self.event_pattern.matches_event(original_event):
        return
    ours = [t for t in self.targets if parse_arn(t["Arn"]).service in _DELIVERED_SERVICES]
    if HOOKS.deliver is not None:
        for target in ours:
            HOOKS.deliver(target, original_event, self.arn)
    saved, self.targets = self.targets, [t for t in self.targets if t not in ours]
    try:
        _original_send(self, original_event, transform_input)
    finally:
        self.targets = saved


def _patch_event_targets() -> None:
    Rule.send_to_targets = _send_to_targets


# ---------------------------------------------------------------- Athena results
_original_results = AthenaBackend._store_predefined_query_results


def _store_query_results(self: AthenaBackend, exec_id: str) -> None:
    if HOOKS.athena_query is None or exec_id in self.query_results or self.query_results_queue:
        _original_results(self, exec_id)
        return
    execution = self.executions[exec_id]
    sql = execution.query
    for value in execution.execution_parameters or []:  # Athena substitutes the literal text for each '?'
        sql = sql.replace("?", value, 1)
    database = (execution.context or {}).get("Database") or contract.app().database
    try:
        columns, rows = HOOKS.athena_query(sql, database)
    except ValueError as err:
        raise JsonRESTError("InvalidRequestException", str(err)) from None
    header = [{"Data": [{"VarCharValue": c} for c in columns]}]
    body = [{"Data": [{} if v is None else {"VarCharValue": v} for v in row]} for row in rows]
    info = [{"Name": c, "Label": c, "Type": "varchar"} for c in columns]
    self.query_results[exec_id] = QueryResults(rows=header + body, column_info=info)


def _patch_athena() -> None:
    AthenaBackend._store_predefined_query_results = _store_query_results


# ---------------------------------------------------------------- .sync waits woken by Batch
#: the longest a waiting ``.sync`` task sleeps without being woken (moto polls every 0.5 s)
SYNC_POLL_SECONDS = 5.0
_sync_cond = threading.Condition()
_sync_generation = 0
_sync_seen = threading.local()


def wake_sync_waiters() -> None:
    """Something a ``.sync`` task may wait for changed: let every waiting task poll now."""
    global _sync_generation  # noqa: PLW0603 - one counter shared by the waiting interpreter threads
    with _sync_cond:
        _sync_generation += 1
        _sync_cond.notify_all()


def _sync_sleep(seconds: float) -> None:
    """Sleep until woken or :data:`SYNC_POLL_SECONDS`; a wake-up that came after this thread's last
    poll (between its check and this sleep) returns at once, so none is lost. Without a Batch runner
    nothing would wake it: moto's own interval then."""
    if HOOKS.batch_run is None:
        _real_sleep(seconds)
        return
    with _sync_cond:
        seen = getattr(_sync_seen, "generation", -1)
        _sync_cond.wait_for(lambda: _sync_generation != seen, timeout=max(seconds, SYNC_POLL_SECONDS))
        _sync_seen.generation = _sync_generation


SyncCallbackModule: Any = _stc
_real_time = SyncCallbackModule.time
_real_sleep = _real_time.sleep


class _SyncTime:
    """``time`` as the callback module sees it: its one ``sleep`` (the .sync poll) is :func:`_sync_sleep`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_real_time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        _sync_sleep(seconds)


def _patch_sync_wait() -> None:
    SyncCallbackModule.time = _SyncTime()


# ---------------------------------------------------------------- per-request lookups
_list_of_moto_modules = _backends.list_of_moto_modules
_core_utils_module: Any = _core_utils  # its create_loader is imported from moto.core.loaders, not exported
_create_moto_loader = _core_utils_module.create_loader


@functools.cache
def _moto_modules() -> tuple[str, ...]:
    return tuple(_list_of_moto_modules())


@functools.cache
def _moto_loader() -> Any:
    return _create_moto_loader()


_werkzeug_app_module: Any = _werkzeug_app
DomainDispatcherApplication: Any = _werkzeug_app.DomainDispatcherApplication
_original_backend_for_host = DomainDispatcherApplication.get_backend_for_host


#: host name -> moto's service for it (or None): moto's URL patterns are fixed at import, and the host names
#: asked about are few (a service and region each, from the request's signature)
_backend_of_host: dict[str, Any] = {}


def _backend_for_host(self: Any, host: str | None) -> Any:
    if host is None:
        return None
    if host not in _backend_of_host:
        _backend_of_host[host] = _original_backend_for_host(self, host)
    return _backend_of_host[host]


BackendDict: Any = _base_backend.BackendDict
_original_backend_dict_item = BackendDict.__getitem__


def _backend_dict_item(self: Any, account_id: str) -> Any:
    # an account's backends are made and registered for a reset together, and a reset forgets both
    found = dict.get(self, account_id)
    return found if found is not None else _original_backend_dict_item(self, account_id)


def _patch_server_lookups() -> None:
    _backends.list_of_moto_modules = _moto_modules  # the server calls it through the module
    _core_utils_module.create_loader = _moto_loader
    DomainDispatcherApplication.get_backend_for_host = _backend_for_host
    BackendDict.__getitem__ = _backend_dict_item
    _werkzeug_app_module.DISABLE_GLOBAL_CORS = True  # read when a service's application is made


# ---------------------------------------------------------------- AWS's limits
_failure_mod: Any = _failure
_states_error_mod: Any = _states_error
_event_detail_mod: Any = _event_detail
_sfn_api_mod: Any = _sfn_api
_DATA_LIMIT: Any = _states_error_type.StatesErrorNameType.StatesStatesDataLimitExceeded
_STATES_ALL: Any = _states_error_type.StatesErrorNameType.StatesALL


def payload_bytes(value: Any) -> int:
    """A payload's size as Step Functions counts it: its JSON text in UTF-8 (a string as it is)."""
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(text.encode("utf-8"))


def _data_limit_failure(env: Any, state: str, what: str, size: int) -> Exception:
    error = _DATA_LIMIT.to_name()
    cause = (
        f"The state/task '{state}' has {what} of {size} bytes, over the {limits.SFN_PAYLOAD.value}-byte "
        "limit of a state's input or output."
    )
    details = _event_detail_mod.EventDetails(
        taskFailedEventDetails=_sfn_api_mod.TaskFailedEventDetails(error=error, cause=cause)
    )
    exception: Exception = _failure_mod.FailureEventException(
        failure_event=_failure_mod.FailureEvent(
            env=env,
            error_name=_states_error_mod.StatesErrorName(typ=_DATA_LIMIT),
            event_type=_sfn_api_mod.HistoryEventType.TaskFailed,
            event_details=details,
        )
    )
    return exception


def _checked_parameters(original: Callable[[Any, Any], dict[str, Any]]) -> Callable[[Any, Any], dict[str, Any]]:
    def _eval_parameters(self: Any, env: Any) -> dict[str, Any]:
        parameters = original(self, env)
        # a Lambda task's effective input is its Payload; a service task's, its request parameters
        payload = parameters.get("Payload", parameters) if isinstance(self, StateTaskLambda) else parameters
        size = payload_bytes(payload)
        if size > limits.SFN_PAYLOAD.value:
            raise _data_limit_failure(env, self.name, "an input after Parameters", size)
        return parameters

    return _eval_parameters


_original_error_equals = ErrorEqualsDecl._eval_body


def _error_equals_not_all_limit(self: Any, env: Any) -> None:
    """``States.ALL`` does not match ``States.DataLimitExceeded`` (AWS: a terminal error); a Catch or
    Retry that names it does. (AWS's ``States.ALL`` does not match ``States.Runtime`` either; here it still
    does, because moto reports its own internal errors as ``States.Runtime``, which on AWS would be
    other, catchable errors.)"""
    error_name = env.stack[-1]
    if getattr(error_name, "typ", None) == _DATA_LIMIT and all(
        getattr(n, "typ", None) == _STATES_ALL for n in self.error_names
    ):
        env.stack.pop()
        env.stack.append(False)
        return
    _original_error_equals(self, env)


_original_start_execution = StepFunctionsParserBackend.start_execution


def _start_execution(self: Any, state_machine_arn: str, name: Any = None, execution_input: Any = None,
                     trace_header: Any = None) -> Any:
    size = payload_bytes(execution_input or "{}")
    if size > limits.SFN_PAYLOAD.value:
        raise _sfn_exc.ValidationException(
            f"1 validation error detected: Value at 'input' failed to satisfy constraint: Member must have "
            f"length less than or equal to {limits.SFN_PAYLOAD.value} (got {size} bytes)"
        )
    return _original_start_execution(self, state_machine_arn, name, execution_input, trace_header)


class RequestEntityTooLargeError(JsonRESTError):  # type: ignore[misc]
    code = 413

    def __init__(self, message: str) -> None:
        super().__init__("RequestEntityTooLargeException", message)


def check_lambda_request(payload: bytes, is_async: bool) -> None:
    limit = limits.LAMBDA_ASYNC_REQUEST if is_async else limits.LAMBDA_SYNC_REQUEST
    if len(payload) > limit.value:
        kind = "Invoke (Event)" if is_async else "Invoke"
        raise RequestEntityTooLargeError(f"Request must be smaller than {limit.value} bytes for the {kind} operation")


def lambda_response_too_large(result: bytes) -> bytes | None:
    """Lambda's error payload for a response over the limit, or None when it fits."""
    if len(result) <= limits.LAMBDA_RESPONSE.value:
        return None
    return json.dumps({
        "errorType": "Function.ResponseSizeTooLarge",
        "errorMessage": f"Response payload size ({len(result)} bytes) exceeded maximum allowed payload size "
                        f"({limits.LAMBDA_RESPONSE.value} bytes).",
    }).encode()


def _patch_limits() -> None:
    StateTask._eval_parameters = _checked_parameters(StateTask._eval_parameters)
    StateTaskLambda._eval_parameters = _checked_parameters(StateTaskLambda._eval_parameters)
    ErrorEqualsDecl._eval_body = _error_equals_not_all_limit
    StepFunctionsParserBackend.start_execution = _start_execution


# ---------------------------------------------------------------- S3 latency
_original_s3_setup = S3Response.setup_class
_sleep = time.sleep


def s3_latency_var() -> str:
    """The setting's name (the app's): milliseconds every S3 request waits before it is answered (unset or 0: none)."""
    return contract.app().settings.s3_latency_ms


def s3_latency_seconds() -> float:
    return max(0.0, float(os.environ.get(s3_latency_var()) or 0)) / 1000


def _s3_setup_class(self: Any, request: Any, full_url: str | None = None, headers: Any = None) -> None:
    # every S3 request (bucket, key, or either) sets its response up here once, on its own server thread
    delay = s3_latency_seconds()
    if delay:
        _sleep(delay)
    _original_s3_setup(self, request, full_url, headers)


def _patch_s3_latency() -> None:
    S3Response.setup_class = _s3_setup_class


# ---------------------------------------------------------------- Batch describe without mutation
_original_container_property = Job._get_container_property


def _container_property(self: Any, p: str, default: Any) -> Any:
    if p != "environment":
        return _original_container_property(self, p, default)
    overrides = self.container_overrides
    self.container_overrides = {**overrides, "environment": list(overrides.get("environment") or [])}
    try:
        return _original_container_property(self, p, [])
    finally:
        self.container_overrides = overrides


def _patch_batch_describe() -> None:
    Job._get_container_property = _container_property


# ---------------------------------------------------------------- IAM authorization
IAMRequestBase: Any = _access_control.IAMRequestBase
ActionAuthenticatorMixin: Any = _authorization.ActionAuthenticatorMixin
_original_authenticate = ActionAuthenticatorMixin._authenticate_and_authorize_action


def _authorized_here(response: Any) -> bool:
    """Whether a request came to the server whose port :attr:`Hooks.authorized_port` names (the local
    cloud's; its clients say 127.0.0.1, moto's interpreter localhost), not to ``mock_aws`` in this process.
    While ``mock_aws`` is active nothing is enforced: it has taken moto's process-wide backends over (and
    its clients, sent to the local endpoint by ``AWS_ENDPOINT_URL``, sign with its own fake keys)."""
    if _botocore_stubber.enabled:
        return False
    host, _, port = str(response.headers.get("Host") or "").rpartition(":")
    expected = HOOKS.authorized_port
    return expected is not None and port == str(expected) and host in ("127.0.0.1", "localhost")


def _authenticate_and_authorize_action(self: Any, iam_request_cls: Any, resource: str = "*") -> None:
    authorize = HOOKS.authorize
    if authorize is None or not _authorized_here(self):
        _original_authenticate(self, iam_request_cls, resource)
        return
    # moto's own steps (``INITIAL_NO_AUTH_ACTION_COUNT`` reached): the key looked up, the signature checked;
    # then the decision is the hook's
    if self.headers.get("X-Amz-Target") in ActionAuthenticatorMixin.PUBLIC_OPERATIONS:
        return
    refused = getattr(_replayed, "error", None)
    if refused is not None:  # the direct answer's check refused this request (s3-direct-get): the same error, once
        _replayed.error = None
        raise refused
    query = urllib.parse.urlparse(self.uri).query
    iam_request = iam_request_cls(
        account_id=self.current_account, method=self.method, path=self.raw_path + (f"?{query}" if query else ""),
        data=self.data, body=self.raw_body, headers=self.headers, action=_iam_action_name(self, iam_request_cls),
    )
    iam_request.check_signature()
    authorize(iam_request, resource)


def _iam_action_name(response: Any, iam_request_cls: Any) -> str:
    """The action a request is authorized as. moto 5.2.6 names every request by its API operation (its service
    router's match), where 5.2.5 took S3's from the ``Action`` its S3 response sets just before authorizing, from
    its table of IAM's names: ``ListObjectsV2`` is IAM's ``s3:ListBucket``, ``HeadObject`` ``s3:GetObject``,
    ``CreateMultipartUpload`` ``s3:PutObject`` (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html)."""
    data: Any = getattr(response, "data", None)
    if issubclass(iam_request_cls, _access_control.S3IAMRequest) and hasattr(data, "get"):
        named = data.get("Action")
        if isinstance(named, str) and named:
            return named
    action: str = response._get_action()
    return action


_original_aws_request = IAMRequestBase._create_aws_request


def _create_aws_request(self: Any) -> Any:
    """The request as the client signed it: moto signs its parsed parameters in place of an empty body
    (for a Lambda GET, the request's headers), so every such request failed its signature check. (A
    query-protocol POST's parameters are its form body, which moto signs from them correctly.)"""
    if HOOKS.authorize is None or self._body or self._method not in ("GET", "HEAD", "DELETE"):
        return _original_aws_request(self)
    saved, self._data = self._data, b""
    try:
        return _original_aws_request(self)
    finally:
        self._data = saved


def _patch_iam_authorization() -> None:
    ActionAuthenticatorMixin._authenticate_and_authorize_action = _authenticate_and_authorize_action
    IAMRequestBase._create_aws_request = _create_aws_request


# ---------------------------------------------------------------- Step Functions' credentials
_boto_client_module: Any = _sfn_boto_client
_real_boto3 = _boto_client_module.boto3


class _StateMachineBoto3:
    """``boto3`` as moto's interpreter module sees it: its one ``client`` call signs with the keys of
    :attr:`Hooks.state_machine_credentials` (moto's fixed ``ak``/``sk`` without the hook)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_real_boto3, name)

    @staticmethod
    def client(*args: Any, **kwargs: Any) -> Any:
        keys = HOOKS.state_machine_credentials() if HOOKS.state_machine_credentials is not None else None
        if keys is not None:
            kwargs.update(aws_access_key_id=keys[0], aws_secret_access_key=keys[1], aws_session_token=keys[2])
        return _real_boto3.client(*args, **kwargs)


def _patch_sfn_credentials() -> None:
    _boto_client_module.boto3 = _StateMachineBoto3()



# ---------------------------------------------------------------- an object's GET answered directly
#: request headers a GET may carry and still be answered by :func:`answer_get_object` (anything else, such as a
#: condition, a checksum mode, a customer key or a CORS origin, goes to moto)
_PLAIN_GET_HEADERS = frozenset({
    "host", "authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "range", "user-agent",
    "accept-encoding", "accept", "amz-sdk-invocation-id", "amz-sdk-request", "content-length", "connection"})
#: the error the direct answer's authorization raised, raised again where moto authorizes the same request
_replayed = threading.local()


def answer_get_object(method: str, path: str, headers: Any) -> tuple[int, dict[str, str], Any] | None:
    """The answer to a plain ``GetObject`` (one byte range or none, path-style, no query, signed), or None for
    moto to answer. What moto's route to the same answer costs (werkzeug's environ, Flask's routing and
    request context, moto's dispatch, its response serializer; about 3 ms of the server's one interpreter a
    request) is skipped; what it decides is not: the latency (s3-latency), the signature and the caller's
    permission, as moto checks them with :attr:`Hooks.authorize` (iam-authorization), the key's headers as moto
    builds them, and the range as s3-ranged-get cuts it. An object moto would answer otherwise (a missing key, a
    bucket with a policy, CORS or logging, an archived or deleted version, a range it would refuse) goes to
    moto; so does a refused request, whose error moto then raises (once: :data:`_replayed`)."""
    found = _plain_object(method, path, headers) if "s3-direct-get" in HOOKS.applied else None
    if found is None:
        return None
    account, resource, key, span = found
    iam_request = _access_control.S3IAMRequest(account_id=account, method="GET", path=path, data={}, body=b"",
                                                headers=headers, action="GetObject")
    try:
        if not _signed_as_claimed(iam_request, path, headers):
            iam_request.check_signature()  # moto's own check decides what this one could not confirm
        assert HOOKS.authorize is not None
        HOOKS.authorize(iam_request, resource)
    except Exception as refused:
        _replayed.error = refused
        return None
    delay = s3_latency_seconds()  # after the checks: a refused request waits once, in moto's route
    if delay:
        _sleep(delay)
    answer = {} if key.version_id == "null" else {"x-amz-version-id": key.version_id}
    answer.update({**key.response_dict, **key.metadata, "Accept-Ranges": "bytes"})
    start, stop, ranged = span
    if ranged:
        answer["content-range"] = f"bytes {start}-{stop - 1}/{key.size}"
        answer["content-length"] = str(stop - start)
    piece = _KeyView(key)[start:stop]
    return 206 if ranged else 200, answer, bytes(piece) if stop - start <= _KeyRange.CHUNK else iter(piece)


def _signed_as_claimed(iam_request: Any, path: str, headers: Any) -> bool:
    """Whether a plain GET's signature is the one moto's check computes (botocore's S3 SigV4 over the signed
    headers, the path as sent, no query, the payload digest the request names), with the day's signing key
    derived once per key, region and day, not four HMACs a request. False means only "not confirmed here":
    moto's check then decides, so this can accept no request moto's would refuse."""
    authorization = str(headers.get("Authorization"))
    signed = _between(authorization, "SignedHeaders=", ",").split(";")
    stamp = str(headers.get("X-Amz-Date") or "")
    if "x-amz-content-sha256" not in signed or len(stamp) < 8 or any(headers.get_all(n, [None])[1:] for n in signed):
        return False
    values = [headers.get(name) for name in signed]
    if None in values or signed != sorted(signed):
        return False
    scope = _between(authorization, "Credential=", ",").split("/", 1)[1]
    day, region, service, _ = scope.split("/")
    if day != stamp[:8]:
        return False
    lines = [f"{name}:{' '.join(str(v).split())}" for name, v in zip(signed, values, strict=True)]
    canonical = "\n".join(["GET", path, "", *lines, "", ";".join(signed), str(headers.get("X-Amz-Content-SHA256"))])
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    secret = iam_request._access_key.create_credentials().secret_key
    key = signing_key(secret, day, region, service)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, _between(authorization, "Signature=", ","))


def _between(text: str, start: str, end: str) -> str:
    """What follows ``start`` in ``text`` up to ``end`` (or its end), as moto reads the ``Authorization`` header."""
    return text.partition(start)[2].partition(end)[0].strip()


def _plain_object(method: str, path: str, headers: Any) -> tuple[str, str, Any, tuple[int, int, bool]] | None:
    """For a plain GET (:func:`answer_get_object`) of an object moto would serve as it is: the account, the
    object's ARN, its key and the span asked for; None for anything else."""
    names = {str(k).lower() for k in headers}
    plain = (method == "GET" and "?" not in path and HOOKS.authorize is not None and names <= _PLAIN_GET_HEADERS
             and headers.get("Content-Length", "0") == "0"
             and str(headers.get("Authorization")).startswith("AWS4-HMAC-SHA256 ")
             and _authorized_here(types.SimpleNamespace(headers=headers)))
    signer = _ACCESS_KEY.search(str(headers.get("Authorization"))) if plain else None
    bucket_name, _, key_name = urllib.parse.unquote(path).lstrip("/").partition("/")
    if signer is None or not key_name:
        return None
    from moto.iam.models import get_account_id_from
    from moto.utilities.utils import get_partition

    account = os.environ.get("MOTO_ACCOUNT_ID") or get_account_id_from(signer.group(1))
    bucket = _s3.s3_backends[account][get_partition(signer.group(2))].buckets.get(bucket_name)
    if bucket is None or bucket.policy or bucket.cors or bucket.logging:
        return None
    key = bucket.keys.get(key_name)
    if not isinstance(key, FakeKey) or key.storage_class != "STANDARD":
        return None
    span = _one_range(headers.get("Range"), key.size)
    if span is None:
        return None
    return account, f"arn:{bucket.partition}:s3:::{bucket_name}/{key_name}", key, span


#: the access key and region of a SigV4 ``Authorization`` header
_ACCESS_KEY = re.compile(r"Credential=([^/]+)/[^/]*/([^/]+)/")


def _one_range(value: Any, size: int) -> tuple[int, int, bool] | None:
    """The half-open span to send and whether it is a range (206): ``bytes=a-b`` or ``bytes=a-`` as moto cuts
    them, no range the whole object (200); None for any other range, for moto to answer or refuse."""
    if not value:
        return 0, size, False
    text = str(value)
    if not text.startswith("bytes=") or "," in text:
        return None
    first, dash, last = text[6:].partition("-")
    if not dash or not first.isdigit() or (last and not last.isdigit()):
        return None
    start = int(first)
    stop = min(size, int(last) + 1) if last else size
    if start >= stop:
        return None
    return start, stop, True

# ---------------------------------------------------------------- execution status change events
_original_terminated = ExecutionWorkerCommunication.terminated


def _terminated(self: Any) -> None:
    ended = HOOKS.execution_ended
    if ended is None:
        _original_terminated(self)
        return
    ended(self.execution, lambda: _original_terminated(self))


def _patch_execution_events() -> None:
    ExecutionWorkerCommunication.terminated = _terminated

# ---------------------------------------------------------------- a response's request id put in once
_core_responses_module: Any = _core_responses
BaseResponse: Any = _core_responses.BaseResponse
_original_enrich = BaseResponse._enrich_response
#: what moto's regex finds the request id between (its lookbehind and lookahead)
_REQUEST_ID_ELEMENT = "<RequestId>"


def _enrich_response(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
    """moto's ``_enrich_response`` (the status as text, a new ``x-amzn-requestid``, the id put into the body's
    ``<RequestId>`` element), its regex run only over a body that has the element: moto ran it over every
    body of its generic dispatch, JSON too (Step Functions, Batch, Lambda, Glue), and its lookbehind is tried
    at every character, so a ``DescribeJobs`` of an array job or an execution's history cost in proportion
    to its size for nothing."""
    if isinstance(body, str) and _REQUEST_ID_ELEMENT in body:
        enriched: tuple[dict[str, str], Any] = _original_enrich(headers, body)
        return enriched
    if "status" in headers:
        headers["status"] = str(headers["status"])
    _core_responses_module.gen_amzn_requestid_long(headers)
    return headers, body


MotoRandom: Any = _moto_random.MotoRandom


def _random_string(self: Any, length: int = 20, include_digits: bool = True, lower_case: bool = False) -> str:
    """moto's ``get_random_string`` (the same pool, from moto's seedable generator) drawn in one ``choices``
    call, not one ``choice`` a character: every response's 52-character request id cost 52 calls."""
    pool = string.ascii_letters + (string.digits if include_digits else "")
    drawn = "".join(self.choices(pool, k=length))
    return drawn.lower() if lower_case else drawn


_original_method_names = _core_utils.method_names_from_class


@functools.cache
def _method_names(clazz: type) -> frozenset[str]:
    """A response class's function names, listed once per class: moto listed them (``inspect.getmembers``
    over the class and its bases) on every request its generic dispatch answered, to see whether the
    action is one. The classes are fixed once the patches are applied (they replace methods, never add
    an action)."""
    return frozenset(_original_method_names(clazz))


def _patch_response_enrichment() -> None:
    BaseResponse._enrich_response = staticmethod(_enrich_response)
    MotoRandom.get_random_string = _random_string
    _core_responses_module.method_names_from_class = _method_names


# ---------------------------------------------------------------- Batch DescribeJobs looks its jobs up
BatchBackend: Any = _batch.BatchBackend


def _describe_jobs(self: Any, jobs: list[str] | None) -> list[dict[str, Any]]:
    """The jobs named by id (one lookup each) or by ARN, each described once, in the order asked; every job
    when none is named, as moto answers. Never a walk over the live job table while another request's
    SubmitJob adds to it."""
    table = self._jobs
    if not jobs:
        return [job.describe() for job in table.copy().values()]
    found: dict[str, Any] = {}
    by_arn: dict[str, Any] | None = None
    for name in jobs:
        job = table.get(name)
        if job is None:
            by_arn = by_arn if by_arn is not None else {j.arn: j for j in table.copy().values()}
            job = by_arn.get(name)
        if job is not None:
            found.setdefault(job.job_id, job)
    return [job.describe() for job in found.values()]


def _patch_batch_describe_jobs() -> None:
    BatchBackend.describe_jobs = _describe_jobs


# ---------------------------------------------------------------- Batch's service-side rules
_original_submit_job = BatchResponse.submit_job
_original_register_job_definition = BatchResponse.register_job_definition


def _request_body(response: Any) -> tuple[bytes, dict[str, Any]]:
    raw = response.body
    data = raw if isinstance(raw, bytes) else str(raw or "").encode()
    parsed = json.loads(data or b"{}")
    return data, parsed if isinstance(parsed, dict) else {}


def _batch_submit_job(self: Any) -> Any:
    """moto's ``SubmitJob`` handler (moto 5.2.6 names it by the API operation), wrapped once: what Batch refuses
    before it takes a job, the request's size (:data:`limits.BATCH_SUBMIT_JOB`) and the rules of
    :mod:`.rules` (a fair-share queue's share identifier and priority, timeouts, container overrides)."""
    data, body = _request_body(self)
    if len(data) > limits.BATCH_SUBMIT_JOB.value:
        raise ClientException(
            f"SubmitJob request of {len(data)} bytes is over the {limits.BATCH_SUBMIT_JOB.value}-byte job payload limit"
        )
    rules.check_submit(self.batch_backend, body)
    return _original_submit_job(self)


def _batch_register_job_definition(self: Any) -> Any:
    """moto's ``RegisterJobDefinition`` handler: the timeout rule first, and the ``schedulingPriority`` moto drops
    kept on its job definition, which :func:`rules.check_fair_share` reads."""
    _, body = _request_body(self)
    rules.check_register(body)
    answer = _original_register_job_definition(self)
    rules.keep_scheduling_priority(self.batch_backend, answer, body)
    return answer


def _patch_batch_service_rules() -> None:
    BatchResponse.submit_job = _batch_submit_job
    BatchResponse.register_job_definition = _batch_register_job_definition


# ---------------------------------------------------------------- Step Functions passes every SubmitJob parameter
def submit_job_parameters() -> set[str]:
    """Every parameter of Batch's ``SubmitJob`` as a state machine names it (PascalCase), from botocore's model."""
    model = _operation_model("batch", "submit_job")
    return {name[0].upper() + name[1:] for name in model.input_shape.members}


def _patch_sfn_batch_parameters() -> None:
    # a set moto's interpreter filters every batch:submitJob task's Parameters through
    _sfn_batch._SUPPORTED_API_PARAM_BINDINGS["submitjob"] |= submit_job_parameters()


# ---------------------------------------------------------------- glue-version-id: Glue UpdateTable's VersionId
_glue_update_lock = threading.Lock()
GlueBackend: Any = _glue.GlueBackend
GlueResponse: Any = _glue_responses.GlueResponse
_original_glue_update = GlueBackend.update_table


def _update_table_at_version(self: Any, database_name: str, table_name: str, table_input: dict[str, Any],
                             version_id: str | None = None) -> None:
    with _glue_update_lock:
        if version_id is not None:
            current = str(self.get_table(database_name, table_name)._current_version)
            if version_id != current:
                raise JsonRESTError("ConcurrentModificationException",
                                    f"Table {database_name}.{table_name} was updated: version {version_id} is not "
                                    f"the current version {current}")
        _original_glue_update(self, database_name, table_name, table_input)


def _glue_update_table_response(self: Any) -> Any:
    table_input = self._get_param("TableInput")
    self.glue_backend.update_table(self._get_param("DatabaseName"), table_input.get("Name"), table_input,
                                   version_id=self._get_param("VersionId"))
    return _core_responses.EmptyResult()


def _patch_glue_version_id() -> None:
    GlueBackend.update_table = _update_table_at_version
    GlueResponse.update_table = _glue_update_table_response


PATCHES: dict[str, Callable[[], None]] = {
    "sfn-normalisation": _patch_sfn_normalisation,
    "s3-ranged-get": _patch_s3_ranged_get,
    "lambda-invoke": _patch_lambda_invoke,
    "batch-submit": _patch_batch_submit,
    "event-targets": _patch_event_targets,
    "athena-results": _patch_athena,
    "sync-wait": _patch_sync_wait,
    "server-lookups": _patch_server_lookups,
    "aws-limits": _patch_limits,
    "s3-latency": _patch_s3_latency,
    "batch-describe": _patch_batch_describe,
    "s3-spooled-bodies": _patch_s3_spooled_bodies,
    "iam-authorization": _patch_iam_authorization,
    "sfn-credentials": _patch_sfn_credentials,
    "execution-events": _patch_execution_events,
    "response-enrichment": _patch_response_enrichment,
    "batch-describe-jobs": _patch_batch_describe_jobs,
    "batch-service-rules": _patch_batch_service_rules,
    "sfn-batch-parameters": _patch_sfn_batch_parameters,
    "glue-version-id": _patch_glue_version_id,
    "s3-direct-get": lambda: None,  # applied means on: the local server asks answer_get_object first
}
# one table of patches: the registry's ids are these, no more and no fewer
if set(PATCHES) != set(patch_registry.BY_ID):
    raise RuntimeError(f"patches and patch_registry disagree on: {sorted(set(PATCHES) ^ set(patch_registry.BY_ID))}")


def apply_all() -> None:
    """Apply every patch once (idempotent) and switch moto to its Docker-free backends. The patches
    :data:`.patch_registry.DISABLED_VAR` names are left out (a test's switch, never set otherwise)."""
    off = patch_registry.disabled()
    with _lock:
        _config.default_user_config["batch"] = {"use_docker": False}
        _config.default_user_config["lambda"] = {"use_docker": False}
        _config.default_user_config["stepfunctions"] = {"execute_state_machine": True}
        for name, patch in PATCHES.items():
            if name not in HOOKS.applied and name not in off:
                patch()
                HOOKS.applied.add(name)
