"""``start_run``: an upload under ``incoming/`` -> the run it completes -> a Step Functions execution.

Which run an object belongs to:

- ``incoming/<batch>/samplesheet.csv``, or any FASTQ in a folder that holds a ``samplesheet.csv``: the
  sheet's samples. The run starts when the sheet and every file it lists exist, so uploading the sheet
  first and the FASTQs after it (in any order) starts exactly one run, on the last file's event.
- a mate file (``x_R1.fastq.gz`` / ``x_R2.fastq.gz``, ``_1`` / ``_2``, with or without ``_001``; names as
  :func:`seqlake.samplesheet.mate_from_name` reads them): the pair, once both exist. The first mate's
  event records "waiting for mate" and returns; the second starts the run. When both events see both
  files (simultaneous uploads, or redelivery) they compute the same run id and execution name, and the
  second ``StartExecution`` is a no-op.
- any other FASTQ: a single-end run of that file.

The execution input (:class:`~seqlake.aws.request.RunRequest`) holds no timestamps, so Step Functions
itself treats a repeated start with the same name and input as idempotent; a closed execution with
that name raises ``ExecutionAlreadyExists``, which is a duplicate too.

An input that can start no run (a samplesheet that fails its checks, a FASTQ key that names no
sample) is *rejected*, and recorded like a failed run: ``runs/<run_id>/status.json`` with state
``REJECTED`` and the one-line reason (``s3://bucket/key:LINE: problem``), the run's row in the ``runs``
table and its partition there (:func:`record_rejection`). Its run id is that of the rejected object
alone (:func:`~seqlake.aws.events.run_id` over the sheet, or the FASTQ, with its ETag; the sheet's
files may not exist or may be in a bucket the function must not read), with the label the run would
have had. Every event that leads to the same bad sheet (the sheet's, its FASTQs', a redelivery)
rewrites the same record: the timestamps are the object's upload time, not the event's arrival.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import unquote_plus

from botocore.exceptions import ClientError

from seqlake import clients
from seqlake.aws.events import INCOMING, SAMPLESHEET_NAME, S3Object, kind_of, normalise_etag, run_id
from seqlake.aws.observability import logger
from seqlake.aws.request import RunRequest, store_request
from seqlake.aws.status import RunStatus, record_unsuccessful
from seqlake.errors import BadInputError
from seqlake.model import RunState, Sample
from seqlake.samplesheet import mate_from_name, parse_samplesheet

Status = Literal["started", "duplicate", "waiting", "ignored", "rejected"]
_FASTQ_EXTS = (".fastq.gz", ".fq.gz", ".fastq", ".fq")


@dataclass(frozen=True)
class StartSettings:
    state_machine_arn: str
    #: Glue database of the ``runs`` table (a rejected input gets its row there)
    database: str
    reference: str | None = None
    #: buckets besides the upload's own that samplesheets may name (``s3://`` URIs)
    allowed_buckets: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StartSettings:
        buckets = frozenset(b.strip() for b in env.get("ALLOWED_INPUT_BUCKETS", "").split(",") if b.strip())
        return cls(state_machine_arn=env["STATE_MACHINE_ARN"], database=env["GLUE_DATABASE"],
                   reference=env.get("REFERENCE_URI") or None, allowed_buckets=buckets)


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

    def __init__(self, label: str, obj: S3Object, error: BadInputError) -> None:
        super().__init__(str(error))
        self.label = label
        self.obj = obj
        self.reason = str(error)


def _head_response(bucket: str, key: str) -> dict[str, Any] | None:
    try:
        r: dict[str, Any] = clients.client("s3").head_object(Bucket=bucket, Key=key)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    return r


def head(bucket: str, key: str) -> S3Object | None:
    """The object's ETag and size, or None when it does not exist (yet)."""
    r = _head_response(bucket, key)
    if r is None:
        return None
    return S3Object(bucket, key, normalise_etag(r["ETag"]), int(r["ContentLength"]))


def existing_key(obj: S3Object) -> S3Object:
    """``obj`` with the key that exists in the bucket: as given, or URL-decoded (``a+b%C3%A9`` -> ``a bé``)
    when only the decoded one exists. S3's classic notifications encode keys; EventBridge's do not."""
    if ("%" in obj.key or "+" in obj.key) and head(obj.bucket, obj.key) is None:
        decoded = unquote_plus(obj.key)
        if head(obj.bucket, decoded) is not None:
            return replace(obj, key=decoded)
    return obj


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def partner_keys(key: str) -> tuple[str, int | None, list[str]]:
    """``(sample, mate, candidate keys of the other mate)`` for a FASTQ key.

    The other mate has the same name with ``R1``<->``R2`` (or ``1``<->``2``) swapped in the mate token
    that :func:`~seqlake.samplesheet.mate_from_name` recognised, and any of the FASTQ extensions (R1 as
    ``.fastq.gz`` with R2 as ``.fq.gz`` is unusual but legal).
    """
    folder, _, name = key.rpartition("/")
    parsed = mate_from_name(name)
    if parsed is None:
        raise BadInputError(key, "not a FASTQ file name (.fastq, .fq, optionally .gz)")
    sample, mate = parsed
    if mate is None:
        return sample, None, []
    other = 2 if mate == 1 else 1
    stem = next(name[: -len(e)] for e in _FASTQ_EXTS if name.endswith(e))
    ext = name[len(stem):]
    # the mate token is the last R1/_1 occurrence before the optional _001 and the extension
    candidates: list[str] = []
    for token, swapped in ((f"R{mate}", f"R{other}"), (f"_{mate}", f"_{other}"), (f".{mate}", f".{other}")):
        pos = stem.rfind(token)
        if pos < 0:
            continue
        new_stem = stem[:pos] + swapped + stem[pos + len(token):]
        if mate_from_name(new_stem + ext) == (sample, other):
            candidates += [new_stem + e for e in (ext, *[x for x in _FASTQ_EXTS if x != ext])]
            break
    prefix = f"{folder}/" if folder else ""
    return sample, mate, [prefix + c for c in candidates]


def _fastq_request(obj: S3Object, settings: StartSettings) -> RunRequest:
    try:
        sample, mate, partners = partner_keys(obj.key)
    except BadInputError as err:
        # the reason names the object as the other rejections do: s3://bucket/key
        raise _Rejected(obj.name, obj, BadInputError(obj.uri, err.message)) from err
    me = head(obj.bucket, obj.key)
    if me is None:
        raise _Waiting([obj.uri], "the object of the event no longer exists")
    if mate is None:
        objects = [me]
        samples = (Sample(sample, me.uri),)
    else:
        partner = next((o for o in (head(obj.bucket, k) for k in partners) if o is not None), None)
        if partner is None:
            raise _Waiting([f"s3://{obj.bucket}/{partners[0]}"], f"waiting for mate {3 - mate} of {sample}")
        r1, r2 = (me, partner) if mate == 1 else (partner, me)
        objects = [r1, r2]
        samples = (Sample(sample, r1.uri, r2.uri),)
    return RunRequest(
        run_id=run_id(sample, objects), bucket=obj.bucket, samples=samples,
        inputs=tuple(o.to_dict() for o in objects), reference=settings.reference)


def _sheet_label(sheet_key: str) -> str:
    """The readable part of a samplesheet run's id: the sheet's folder (``incoming/batch7/...``)."""
    return sheet_key.rstrip("/").rsplit("/", 2)[-2] if sheet_key.count("/") >= 2 else "samplesheet"


def _sheet_samples(sheet: S3Object, settings: StartSettings) -> list[Sample]:
    """The sheet's samples, checked: UTF-8, the schema, and every ``s3://`` path in an allowed bucket."""
    text = clients.client("s3").get_object(Bucket=sheet.bucket, Key=sheet.key)["Body"].read()
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInputError(sheet.uri, f"not UTF-8 text: {err}") from err
    return parse_samplesheet(decoded, sheet.uri, allow_other_buckets=settings.allowed_buckets)


def _sheet_uris(samples: list[Sample]) -> list[str]:
    return [u for s in samples for u in (s.r1, s.r2) if u is not None]


def _sheet_request(sheet_key: str, bucket: str, settings: StartSettings) -> RunRequest:
    sheet = head(bucket, sheet_key)
    if sheet is None:
        raise _Waiting([f"s3://{bucket}/{sheet_key}"], "the samplesheet no longer exists")
    try:
        samples = _sheet_samples(sheet, settings)
    except BadInputError as err:
        raise _Rejected(_sheet_label(sheet_key), sheet, err) from err
    objects = [sheet]
    missing: list[str] = []
    for uri in _sheet_uris(samples):
        o = head(*_split(uri))
        if o is None:
            missing.append(uri)
        else:
            objects.append(o)
    if missing:
        raise _Waiting(missing, f"waiting for {len(missing)} file(s) of samplesheet {sheet.uri}")
    return RunRequest(
        run_id=run_id(_sheet_label(sheet_key), objects), bucket=bucket,
        samples=tuple(samples),
        inputs=tuple(o.to_dict() for o in objects), samplesheet=sheet.uri, reference=settings.reference)


def build_request(obj: S3Object, settings: StartSettings) -> RunRequest:
    """The run that ``obj``'s arrival completes; raises ``_Waiting`` when files are still missing."""
    kind = kind_of(obj.key)
    if kind == "samplesheet":
        return _sheet_request(obj.key, obj.bucket, settings)
    sheet_key = obj.folder + SAMPLESHEET_NAME
    # a FASTQ beside a samplesheet belongs to the sheet's run, not to a run of its own
    if obj.folder != INCOMING and head(obj.bucket, sheet_key) is not None:
        return _sheet_request(sheet_key, obj.bucket, settings)
    return _fastq_request(obj, settings)


def _as_uploaded(obj: S3Object) -> tuple[S3Object, datetime]:
    """``obj`` with the ETag and size S3 has for it, and when it was uploaded (now, if it is gone)."""
    r = _head_response(obj.bucket, obj.key)
    if r is None:
        return obj, datetime.now(UTC)
    uploaded: datetime = r["LastModified"]
    return replace(obj, etag=normalise_etag(r["ETag"]), size=int(r["ContentLength"])), uploaded


def rejection_status(label: str, obj: S3Object, reason: str, uploaded: datetime) -> RunStatus:
    """The record of a rejected input: a function of the object and the reason only, so every
    delivery of its event writes the same document."""
    status = RunStatus(
        run_id=run_id(label, [obj]), state=RunState.REJECTED.value, bucket=obj.bucket, samples=[],
        inputs=[obj.to_dict()],
        samplesheet=obj.uri if kind_of(obj.key) == "samplesheet" else None, started_at=uploaded.isoformat(),
        failed_step="Start", error=BadInputError.__name__, reason=reason)
    status.finish(now=uploaded)
    return status


def record_rejection(label: str, obj: S3Object, reason: str, database: str) -> RunStatus:
    """``status.json``, the ``runs`` row and its partition for an input that starts no run."""
    described, uploaded = _as_uploaded(obj)
    status = rejection_status(label, described, reason, uploaded)
    record_unsuccessful(status, database)
    return status


def execution_arn(state_machine_arn: str, name: str) -> str:
    return state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"


def start_execution(request: RunRequest, state_machine_arn: str) -> tuple[bool, str]:
    """``(started, execution arn)``; a second start of the same run is not an error.

    Step Functions answers a repeated start of a *running* execution (same name, same input) with
    success, so the handler looks first: an existing execution is a duplicate. Two events racing past
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
    # the request grows with the run; the execution input is its URI and digest (a few hundred bytes)
    body = json.dumps(store_request(request).to_dict(), sort_keys=True, separators=(",", ":"))
    try:
        r = sfn.start_execution(stateMachineArn=state_machine_arn, name=request.run_id, input=body)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
        return False, arn
    return True, str(r["executionArn"])


def start_run(obj: S3Object, settings: StartSettings) -> StartResult:
    """Start the run that ``obj`` completes, or say why not (waiting, duplicate, ignored, rejected)."""
    if not obj.key.startswith(INCOMING) or kind_of(obj.key) == "other":
        return StartResult("ignored", f"{obj.uri} is not a FASTQ or samplesheet under {INCOMING}")
    obj = existing_key(obj)
    try:
        request = build_request(obj, settings)
    except _Waiting as w:
        logger.info("waiting for inputs", extra={"missing": w.missing, "trigger": obj.uri})
        return StartResult("waiting", w.reason, waiting_for=tuple(w.missing))
    except _Rejected as rejected:
        # nothing can start: the sheet or name is wrong; the reason is the one line users see
        logger.warning("input rejected", extra={"reason": rejected.reason, "trigger": obj.uri})
        status = record_rejection(rejected.label, rejected.obj, rejected.reason, settings.database)
        logger.info("rejection recorded", extra={"run_id": status.run_id, "status_uri": status.status_uri})
        return StartResult("rejected", rejected.reason, status.run_id)
    logger.append_keys(run_id=request.run_id)
    started, arn = start_execution(request, settings.state_machine_arn)
    if not started:
        logger.info("duplicate event: the run was already started", extra={"execution_arn": arn})
        return StartResult("duplicate", "the run was already started", request.run_id, arn)
    logger.info("run started", extra={"execution_arn": arn, "samples": [s.name for s in request.samples]})
    return StartResult("started", "all inputs present", request.run_id, arn)
