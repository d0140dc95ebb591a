"""``start_run``: uploads under ``incoming/`` -> the runs they complete -> Step Functions executions.

How uploads become runs:

- A file in a folder of ``incoming/`` (``incoming/<batch>/...``) settles its folder: the start function
  sends one message for the folder to a FIFO queue whose delay is the quiet period, de-duplicated per
  folder and quiet period, so a burst of uploads costs one message per quiet period, not one per file.
  The queue's message (:func:`settle`) lists the folder once; while its newest object is younger than
  the quiet period it sends itself again, and once the folder is quiet it starts the folder's runs:
  the samplesheet's run when ``samplesheet.csv`` is there, else a run per pair (``x_R1`` + ``x_R2``)
  and per single FASTQ. Every object comes from that listing (ETag, size): no request per file,
  except one HEAD for each file the sheet names outside its folder (sent many at once). So a sheet of N pairs costs O(N)
  requests in all, and its FASTQs and sheet may land in any order within the quiet period: one run.
- A FASTQ directly under ``incoming/`` starts at once: a single-end run, or its pair once both mates
  exist (the first mate's event waits; the second starts the pair).

A run's id is a function of its objects (:func:`~seqlake.aws.events.run_id`), which is also the
execution's name, and the execution input holds no timestamps: a second start of the same run (a
redelivered event, a second settle message) is a duplicate, never a second run.

An input that can start no run (a samplesheet that fails its checks, a FASTQ key that names no
sample) is *rejected*, and recorded like a failed run: ``runs/<run_id>/status.json`` with state
``REJECTED`` and the one-line reason (``s3://bucket/key:LINE: problem``), the run's row in the ``runs``
table and its partition there (:func:`record_rejection`). Its run id is that of the rejected object
alone, with the label the run would have had; every settle of the same bad sheet rewrites the same
record (the timestamps are the object's upload time, not the event's arrival).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import unquote_plus

from botocore.exceptions import ClientError

from seqlake.aws.events import INCOMING, input_record, run_id, s3_object
from seqlake.aws.observability import logger
from seqlake.aws.request import RunRequest, store_request
from seqlake.aws.status import NEW_UPLOAD_ADVICE, RunStatus
from seqlake.base import clients, limits, storage
from seqlake.base.errors import BadInputError
from seqlake.base.model import ObjectRef, RunState, Sample, Step
from seqlake.base.naming import SAMPLESHEET_NAME, base_name, folder_of, kind_of, mate_from_name, partner_names
from seqlake.plan.samplesheet import read_samplesheet

Status = Literal["started", "duplicate", "waiting", "queued", "ignored", "rejected"]
#: missing files a result names (its reason counts them all): the response stays small for any sheet
WAITING_FOR_SHOWN = 100


def run_parameters(text: str) -> dict[str, Any]:
    """``RunParameters`` (a JSON object of :class:`seqlake.base.params.Params` fields), checked: a typo in a
    parameter name fails every start loudly instead of being ignored."""
    from seqlake.base.params import Params

    value = json.loads(text)
    known = {f for f in Params().to_dict() if f != "extra"}
    if not isinstance(value, dict) or set(value) - known:
        raise ValueError(f"RunParameters must be a JSON object of {sorted(known)}; got {text!r}")
    Params.from_dict(value)
    return value


@dataclass(frozen=True)
class StartSettings:
    state_machine_arn: str
    #: Glue database of the ``runs`` table (a rejected input gets its row there)
    database: str
    reference: str | None = None
    #: buckets besides the upload's own that samplesheets may name (``s3://`` URIs)
    allowed_buckets: frozenset[str] = frozenset()
    #: the FIFO queue that settles folders; None: a folder is settled at once, on each event
    settle_queue_url: str | None = None
    #: a folder starts its runs once its newest object is this old (the queue's delay)
    quiet_seconds: float = 0.0
    #: the run parameters of every run this function starts (the stack parameter ``RunParameters``)
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StartSettings:
        buckets = frozenset(b.strip() for b in env.get("ALLOWED_INPUT_BUCKETS", "").split(",") if b.strip())
        return cls(state_machine_arn=env["STATE_MACHINE_ARN"], database=env["GLUE_DATABASE"],
                   reference=env.get("REFERENCE_URI") or None, allowed_buckets=buckets,
                   parameters=run_parameters(env.get("RUN_PARAMETERS") or "{}"),
                   settle_queue_url=env.get("SETTLE_QUEUE_URL") or None,
                   quiet_seconds=float(env.get("QUIET_PERIOD_SECONDS") or 0))


@dataclass(frozen=True)
class StartResult:
    status: Status
    reason: str
    run_id: str | None = None
    execution_arn: str | None = None
    waiting_for: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "run_id": self.run_id,
                "execution_arn": self.execution_arn, "waiting_for": list(self.waiting_for)}


class _Waiting(Exception):  # noqa: N818 - a control-flow signal, not an error
    def __init__(self, missing: list[str], reason: str) -> None:
        super().__init__(reason)
        self.missing = missing
        self.reason = reason


class _Rejected(Exception):  # noqa: N818 - a control-flow signal, carrying the BadInputError's line
    """The input can start no run: ``obj`` is the object to blame (the samplesheet, or the FASTQ),
    ``label`` the readable part of the run id the run would have had."""

    def __init__(self, label: str, obj: ObjectRef, error: BadInputError) -> None:
        super().__init__(str(error))
        self.label = label
        self.obj = obj
        self.reason = str(error)


def _head(uri: str) -> ObjectRef | None:
    """The object as S3 has it now, or None when it does not exist (yet)."""
    try:
        info = storage.head(uri)
    except FileNotFoundError:
        return None
    return ObjectRef(uri, size=info.size, etag=info.etag, mtime=info.mtime)


def existing_key(obj: ObjectRef) -> ObjectRef:
    """``obj`` with the key that exists in the bucket: as given, or URL-decoded (``a+b%C3%A9`` -> ``a bé``)
    when only the decoded one exists. S3's classic notifications encode keys; EventBridge's do not."""
    if ("%" in obj.key or "+" in obj.key) and _head(obj.uri) is None:
        decoded = unquote_plus(obj.key)
        if _head(f"s3://{obj.bucket}/{decoded}") is not None:
            return s3_object(obj.bucket, decoded, obj.etag or "", obj.size)
    return obj


class Folder:
    """One listing of a folder: its objects by URI. Every object a run needs comes from here, or (a file
    a samplesheet names elsewhere) from one HEAD, remembered."""

    def __init__(self, bucket: str, folder: str, *, listed: bool = True) -> None:
        self.bucket, self.folder, self.listed = bucket, folder, listed
        listing = storage.list_folder(f"s3://{bucket}/{folder}") if listed else []
        self.objects: dict[str, ObjectRef] = {o.uri: o for o in listing}
        self._elsewhere: dict[str, ObjectRef | None] = {}

    @classmethod
    def unlisted(cls, bucket: str, folder: str) -> Folder:
        """A folder too shared to list per event (``incoming/`` itself): each object is HEADed once."""
        return cls(bucket, folder, listed=False)

    def _in_listing(self, uri: str) -> bool:
        """Whether this folder's listing says if ``uri`` exists (else it is HEADed)."""
        return uri in self.objects or (self.listed and folder_of(uri) == f"s3://{self.bucket}/{self.folder}")

    def get(self, uri: str) -> ObjectRef | None:
        if self._in_listing(uri):
            return self.objects.get(uri)  # in this folder and not listed: not there (yet)
        if uri not in self._elsewhere:
            self._elsewhere[uri] = _head(uri)
        return self._elsewhere[uri]

    def look_up(self, uris: Iterable[str]) -> None:
        """HEAD the files among ``uris`` that the listing does not cover, many at once: a sheet naming
        thousands of files in another folder or bucket costs their round trips divided by the threads,
        not added up (:meth:`get` then answers from what was found)."""
        todo = [u for u in dict.fromkeys(uris) if not self._in_listing(u) and u not in self._elsewhere]
        if len(todo) <= 1:
            return
        with ThreadPoolExecutor(max_workers=min(storage.MAX_PARALLEL_READS, len(todo))) as pool:
            self._elsewhere.update(zip(todo, pool.map(_head, todo), strict=True))

    @property
    def newest(self) -> ObjectRef | None:
        return max(self.objects.values(), key=lambda o: o.mtime or 0.0, default=None)

    @property
    def sheet(self) -> ObjectRef | None:
        return self.objects.get(f"s3://{self.bucket}/{self.folder}{SAMPLESHEET_NAME}")

    def fastqs(self) -> list[ObjectRef]:
        return sorted((o for o in self.objects.values() if kind_of(o.key) == "fastq"), key=lambda o: o.key)


def _run_parameters(settings: StartSettings, label: str, obj: ObjectRef, folder: Folder) -> dict[str, Any]:
    """The run's parameters: the stack's (``RunParameters``), overridden by a ``params.json`` in the upload's
    folder (checked against its JSON Schema; relative paths are keys in that folder), with the primer BED
    pinned by its content as it is now (one GET: adding, removing or changing the BED is another run id; a BED
    fixed in place a new one). A params.json or a BED that is wrong rejects the input, naming the file and what
    is wrong (and its line)."""
    from seqlake.base.params import PARAMS_FILE, read_params_file, resolve_paths
    from seqlake.plan.primers import with_primer_pin

    parameters = dict(settings.parameters)
    prefix = f"s3://{folder.bucket}/{folder.folder}"
    params_file = folder.get(prefix + PARAMS_FILE) if folder.listed else None
    if params_file is not None:
        try:
            chosen = read_params_file(params_file.uri, storage.read_bytes(params_file.uri))
        except BadInputError as err:
            raise _Rejected(label, params_file, err) from err
        parameters.update(resolve_paths(chosen, prefix))
        bed = parameters.get("primer_bed")
        if isinstance(bed, str) and storage.is_s3(bed):
            bucket = storage.split_s3(bed)[0]
            if bucket != folder.bucket and bucket not in settings.allowed_buckets:
                raise _Rejected(label, params_file, BadInputError(
                    params_file.uri, f"primer_bed {bed}: bucket {bucket} is neither this one nor in "
                    "AllowedInputBuckets"))
    try:
        return with_primer_pin(parameters)
    except BadInputError as err:
        raise _Rejected(label, params_file or obj, err) from err


def _sheet_label(sheet_key: str) -> str:
    """The readable part of a samplesheet run's id: the sheet's folder (``incoming/batch7/...``)."""
    return sheet_key.rstrip("/").rsplit("/", 2)[-2] if sheet_key.count("/") >= 2 else "samplesheet"


def _sheet_request(folder: Folder, sheet: ObjectRef, settings: StartSettings) -> RunRequest:
    try:
        samples = read_samplesheet(sheet.uri, allow_other_buckets=settings.allowed_buckets)
    except BadInputError as err:
        raise _Rejected(_sheet_label(sheet.key), sheet, err) from err
    objects = [sheet]
    missing: list[str] = []
    folder.look_up(u for s in samples for u in s.uris)
    for uri in (u for s in samples for u in s.uris):
        o = folder.get(uri)
        if o is None:
            missing.append(uri)
        else:
            objects.append(o)
    if missing:
        raise _Waiting(missing, f"waiting for {len(missing)} file(s) of samplesheet {sheet.uri}")
    parameters = _run_parameters(settings, _sheet_label(sheet.key), sheet, folder)
    return RunRequest(
        run_id=run_id(_sheet_label(sheet.key), objects, parameters), bucket=sheet.bucket,
        samples=tuple(samples), inputs=tuple(input_record(o) for o in objects), samplesheet=sheet.uri,
        reference=settings.reference, parameters=parameters)


def _fastq_request(folder: Folder, obj: ObjectRef, settings: StartSettings) -> RunRequest:
    """The run of one FASTQ: single-end, or its pair once the other mate is in the folder."""
    parsed = mate_from_name(obj.name)
    if parsed is None:
        raise _Rejected(obj.name, obj, BadInputError(obj.uri, "not a FASTQ file name (.fastq, .fq, optionally .gz)"))
    sample, mate = parsed
    if mate is None:
        parameters = _run_parameters(settings, sample, obj, folder)
        return RunRequest(run_id=run_id(sample, [obj], parameters), bucket=obj.bucket,
                          samples=(Sample(sample, obj.uri),), inputs=(input_record(obj),),
                          reference=settings.reference, parameters=parameters)
    prefix = f"s3://{obj.bucket}/{folder_of(obj.key)}"
    candidates = [prefix + name for name in partner_names(obj.name)]
    partner = next((p for p in map(folder.get, candidates) if p is not None), None)
    if partner is None:
        raise _Waiting(candidates[:1], f"waiting for mate {3 - mate} of {sample}")
    r1, r2 = (obj, partner) if mate == 1 else (partner, obj)
    parameters = _run_parameters(settings, sample, obj, folder)
    return RunRequest(run_id=run_id(sample, [r1, r2], parameters), bucket=obj.bucket,
                      samples=(Sample(sample, r1.uri, r2.uri),), inputs=(input_record(r1), input_record(r2)),
                      reference=settings.reference, parameters=parameters)


def _uploaded(obj: ObjectRef) -> tuple[ObjectRef, datetime]:
    """``obj`` as S3 has it (ETag, size) and when it was uploaded (now, if it is gone)."""
    described = obj if obj.mtime is not None else _head(obj.uri)
    if described is None or described.mtime is None:
        return obj, datetime.now(UTC)
    return described, datetime.fromtimestamp(described.mtime, UTC)


def rejection_status(label: str, obj: ObjectRef, reason: str, uploaded: datetime) -> RunStatus:
    """The record of a rejected input: a function of the object and the reason only, so every
    delivery of its event writes the same document."""
    status = RunStatus(
        run_id=run_id(label, [obj]), state=RunState.REJECTED.value, bucket=obj.bucket, samples=[],
        inputs=[input_record(obj)],
        samplesheet=obj.uri if kind_of(obj.key) == "samplesheet" else None, started_at=uploaded.isoformat(),
        failed_step=Step.START.value, error=BadInputError.__name__, reason=f"{reason}; {NEW_UPLOAD_ADVICE}",
        bad_input=True)
    status.finish(now=uploaded)
    return status


def record_rejection(label: str, obj: ObjectRef, reason: str, database: str) -> RunStatus:
    """``status.json``, the ``runs`` row and its partition for an input that starts no run."""
    from seqlake.aws.runs_row import record_unsuccessful  # pyarrow: only a rejection needs it

    described, uploaded = _uploaded(obj)
    status = rejection_status(label, described, reason, uploaded)
    record_unsuccessful(status, database)
    return status


def execution_arn(state_machine_arn: str, name: str) -> str:
    return state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"


def execution_input(request: RunRequest) -> str:
    """The execution's input: the request grows with the run, so it goes to ``runs/<id>/request.json``
    and the input is its URI and digest (a few hundred bytes), as compact JSON with sorted keys (the
    same run, the same text)."""
    return json.dumps(store_request(request).to_dict(), sort_keys=True, separators=(",", ":"))


def start_execution(request: RunRequest, state_machine_arn: str) -> tuple[bool, str]:
    """``(started, execution arn)``; a second start of the same run is not an error.

    Step Functions answers a repeated start of a *running* execution (same name, same input) with
    success, so the handler looks first: an existing execution is a duplicate. Two starts racing past
    that look both get success from StartExecution and one execution still exists.
    """
    sfn = clients.client("stepfunctions")
    arn = execution_arn(state_machine_arn, request.run_id)
    try:
        sfn.describe_execution(executionArn=arn)
        return False, arn
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ExecutionDoesNotExist":
            raise
    try:
        r = sfn.start_execution(stateMachineArn=state_machine_arn, name=request.run_id, input=execution_input(request))
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
        return False, arn
    return True, str(r["executionArn"])


def _start(build: Callable[[], RunRequest], settings: StartSettings, trigger: str) -> StartResult:
    """Build one run's request and start it, or say why not."""
    try:
        request = build()
    except _Waiting as w:
        logger.info("waiting for inputs", extra={"missing": w.missing[:20], "trigger": trigger})
        return StartResult("waiting", w.reason, waiting_for=tuple(w.missing[:WAITING_FOR_SHOWN]))
    except _Rejected as rejected:
        # nothing can start: the sheet or name is wrong; the reason is the one line users see
        logger.warning("input rejected", extra={"reason": rejected.reason, "trigger": trigger})
        status = record_rejection(rejected.label, rejected.obj, rejected.reason, settings.database)
        logger.info("rejection recorded", extra={"run_id": status.run_id, "status_uri": status.status_uri})
        return StartResult("rejected", str(status.reason), status.run_id)
    started, arn = start_execution(request, settings.state_machine_arn)
    if not started:
        logger.info("duplicate: the run was already started", extra={"run_id": request.run_id, "execution_arn": arn})
        return StartResult("duplicate", "the run was already started", request.run_id, arn)
    logger.info("run started", extra={"run_id": request.run_id, "execution_arn": arn, "samples": len(request.samples)})
    return StartResult("started", "all inputs present", request.run_id, arn)


def _folder_runs(folder: Folder, settings: StartSettings, only: ObjectRef | None = None) -> list[StartResult]:
    """Start the folder's runs: the sheet's, or (no sheet) each pair's and single file's; with ``only``,
    just the run ``only`` belongs to."""
    sheet = folder.sheet
    trigger = only.uri if only is not None else f"s3://{folder.bucket}/{folder.folder}"
    if sheet is not None:
        return [_start(lambda: _sheet_request(folder, sheet, settings), settings, trigger)]
    if only is not None:
        me = folder.get(only.uri)
        if me is None:
            return [StartResult("waiting", "the object of the event no longer exists", waiting_for=(only.uri,))]
        return [_start(lambda: _fastq_request(folder, me, settings), settings, trigger)]
    results: list[StartResult] = []
    done: set[str] = set()
    for fq in folder.fastqs():
        if fq.uri in done:
            continue
        result = _start(functools.partial(_fastq_request, folder, fq, settings), settings, fq.uri)
        results.append(result)
        done.add(fq.uri)
        if result.run_id is not None and result.status in ("started", "duplicate"):
            # the pair's other mate belongs to the same run
            done.update(p for p in (f"s3://{fq.bucket}/{folder.folder}{n}" for n in partner_names(fq.name)))
    return results


# ---------------------------------------------------------------- the settle queue
def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def send_settle(bucket: str, folder: str, settings: StartSettings, marker: str) -> None:
    """One message for the folder: its group is the folder (one settle at a time per folder) and its
    de-duplication ID the folder and ``marker``, so the same marker within SQS's 5 minutes is one message."""
    assert settings.settle_queue_url is not None
    clients.client("sqs").send_message(
        QueueUrl=settings.settle_queue_url,
        MessageBody=json.dumps({"bucket": bucket, "folder": folder}),
        MessageGroupId=_digest(bucket, folder)[:64],
        MessageDeduplicationId=_digest(bucket, folder, marker)[:64],
    )


def _window(quiet_seconds: float) -> float:
    """The de-duplication window: the quiet period, within SQS's de-duplication interval."""
    return max(1.0, min(quiet_seconds, float(limits.SQS_DEDUPLICATION_SECONDS.value)))


def event_marker(now: float, quiet_seconds: float) -> str:
    """The de-duplication marker of an upload's event: its window. Events of one window make one
    message; that message is delivered a quiet period after it was sent, so after every upload of its
    window, and no upload goes unseen."""
    return f"event-{int(now // _window(quiet_seconds))}"


def again_marker(now: float, quiet_seconds: float) -> str:
    """The marker of a settle's "look again": the window it will be delivered in. Settles of a folder
    still receiving uploads that look again in the same window make one message (a burst that lasts T
    costs about 2 T / quiet period settles, not one per window squared)."""
    return f"again-{int((now + quiet_seconds) // _window(quiet_seconds))}"


def settle(bucket: str, folder: str, settings: StartSettings, now: float | None = None) -> list[StartResult]:
    """A folder's settle message: start its runs if it is quiet, else look again a quiet period later."""
    now = time.time() if now is None else now
    listing = Folder(bucket, folder)
    newest = listing.newest
    if newest is None:
        return []
    age = now - (newest.mtime or 0.0)
    if settings.settle_queue_url is not None and age < settings.quiet_seconds:
        send_settle(bucket, folder, settings, again_marker(now, settings.quiet_seconds))
        logger.info("folder not quiet yet", extra={"folder": folder, "newest": newest.key, "age_s": round(age, 1)})
        return [StartResult("queued", f"the folder's newest object is {age:.1f} s old")]
    return _folder_runs(listing, settings)


def start_run(obj: ObjectRef, settings: StartSettings, now: float | None = None) -> StartResult:
    """An upload's event: settle its folder (queued, or at once without a queue), or start the run of a
    file directly under ``incoming/``."""
    if not obj.key.startswith(INCOMING) or kind_of(obj.key) == "other":
        return StartResult("ignored", f"{obj.uri} is not a FASTQ or samplesheet under {INCOMING}")
    obj = existing_key(obj)
    folder = folder_of(obj.key)
    if folder != INCOMING and settings.settle_queue_url is not None:
        send_settle(obj.bucket, folder, settings, event_marker(time.time() if now is None else now,
                                                                settings.quiet_seconds))
        return StartResult("queued", f"settling {folder} once it is quiet for {settings.quiet_seconds:g} s")
    if folder == INCOMING:
        if base_name(obj.key) == SAMPLESHEET_NAME:
            return StartResult("ignored", f"a samplesheet belongs in a folder of {INCOMING}")
        return _folder_runs(Folder.unlisted(obj.bucket, folder), settings, only=obj)[0]
    return _folder_runs(Folder(obj.bucket, folder), settings, only=obj)[0]
