"""EventBridge events (S3's ``Object Created``, Step Functions' ``Execution Status Change``), the objects
of a run, and the deterministic run id.

A run is identified by its input objects: ``run_id = <name>-<16 hex digits of sha256 over the bucket,
the sorted keys and their ETags>``. Every delivery of the same upload (EventBridge delivers at least
once; R1's and R2's events both lead to the same pair) computes the same id, which is also the Step
Functions execution name, so a duplicate start is a no-op. Re-uploading a file changes its ETag and
so starts a new run; the old run's results stay.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.data_classes import S3EventBridgeNotificationEvent

from seqlake.aws.schemas import EXECUTION_STATUS_CHANGE, S3_OBJECT_CREATED
from seqlake.base.errors import BadInputError
from seqlake.base.model import ObjectRef, normalise_etag
from seqlake.base.naming import strip_fastq_suffix

INCOMING = "incoming/"
#: Step Functions execution names: 1-80 characters of ``[0-9A-Za-z_-]``.
_NAME_MAX = 80
_UNSAFE = re.compile(r"[^0-9A-Za-z_-]+")


def s3_object(bucket: str, key: str, etag: str = "", size: int = 0) -> ObjectRef:
    """The object ``s3://bucket/key`` as a run sees it."""
    return ObjectRef(f"s3://{bucket}/{key}", size=size, etag=normalise_etag(etag))


def input_record(obj: ObjectRef) -> dict[str, Any]:
    """An object as the run request's ``inputs`` (and ``status.json``) list it."""
    return {"uri": obj.uri, "bucket": obj.bucket, "key": obj.key, "etag": obj.etag or "", "size": obj.size}


def object_from_event(event: dict[str, Any]) -> ObjectRef:
    """The object of an EventBridge ``Object Created`` event from S3, its key as the event spells it.

    S3's classic notifications URL-encode keys (a space becomes ``+``); whether a key in an event is
    encoded is settled against the bucket by :func:`seqlake.aws.start.existing_key`, not guessed here.
    """
    check_event(event)
    ev = S3EventBridgeNotificationEvent(event)
    obj = ev.detail.object
    # the raw key: Powertools' ``obj.key`` URL-decodes, which would turn a literal "+" into a space
    return s3_object(ev.detail.bucket.name, str(event["detail"]["object"]["key"]), obj.etag or "", obj.size or 0)


class BadEventError(BadInputError, ValueError):
    """An event that is not an S3 ``Object Created`` event of the shape this app reads: the "file" is
    the event (its id), the place is the field (a JSON path)."""


def check_event(event: Any) -> None:
    """Raise :class:`BadEventError` naming the first field of ``event`` that breaks
    :data:`~seqlake.aws.schemas.S3_OBJECT_CREATED` (the schema the start handler validates with)."""
    _check(event, S3_OBJECT_CREATED, "an S3 Object Created event")


def _check(event: Any, schema: dict[str, Any], what: str) -> None:
    import jsonschema

    where = f"EventBridge event {event.get('id', '?') if isinstance(event, dict) else '?'}"
    validator = jsonschema.Draft202012Validator(schema)
    kind = (["source"], ["detail-type"])  # another kind of event is said first, whatever else is wrong

    def order(e: Any) -> tuple[bool, list[Any]]:
        return list(e.absolute_path)[:1] not in kind, list(e.absolute_path)

    for err in sorted(validator.iter_errors(event), key=order):
        field = ".".join(str(p) for p in err.absolute_path) or "(the event)"
        if list(err.absolute_path)[:1] in kind:
            raise BadEventError(where, f"not {what}: field {field}: {err.message}")
        raise BadEventError(where, f"field {field}: {err.message}")


def slug(text: str, maxlen: int = 40) -> str:
    """A readable execution-name-safe prefix (``sample_1.fastq.gz`` -> ``sample_1``)."""
    s = _UNSAFE.sub("-", strip_fastq_suffix(text)).strip("-_")
    return (s or "run")[:maxlen].rstrip("-_") or "run"


def run_id(label: str, objects: list[ObjectRef], parameters: Mapping[str, Any] | None = None) -> str:
    """Deterministic run id: ``<slug(label)>-<sha256(bucket, sorted (key, etag)[, parameters])[:16]>``.

    The label only makes the id readable; identity comes from the hash, which covers every input
    object (a samplesheet run includes the sheet itself) and the run's parameters when any are set
    (the same files processed with other parameters are another run; with none set, the id is the
    objects' alone).
    """
    if not objects:
        raise ValueError("a run needs at least one input object")
    h = hashlib.sha256()
    for o in sorted(objects, key=lambda o: (o.bucket, o.key)):
        h.update(f"{o.bucket}\0{o.key}\0{o.etag or ''}\n".encode())
    if parameters:
        h.update(json.dumps(dict(parameters), sort_keys=True, separators=(",", ":")).encode())
    rid = f"{slug(label)}-{h.hexdigest()[:16]}"
    assert len(rid) <= _NAME_MAX
    return rid


# ------------------------------------------------------------------------ Step Functions execution ends
#: Step Functions puts this event on the account's default bus when a Standard execution's status changes
EXECUTION_STATUS_SOURCE: str = EXECUTION_STATUS_CHANGE["properties"]["source"]["const"]
EXECUTION_STATUS_DETAIL_TYPE: str = EXECUTION_STATUS_CHANGE["properties"]["detail-type"]["const"]
#: how an execution can end other than SUCCEEDED (the backstop rule's ``detail.status``)
UNSUCCESSFUL_ENDS: tuple[str, ...] = tuple(
    EXECUTION_STATUS_CHANGE["properties"]["detail"]["properties"]["status"]["enum"])


def execution_status_detail(*, execution_arn: str, state_machine_arn: str, name: str, status: str,
                            start: datetime, stop: datetime | None, execution_input: str,
                            output: str | None, error: str | None, cause: str | None) -> dict[str, Any]:
    """The ``detail`` of an ``Execution Status Change`` event as AWS writes it: dates in epoch
    milliseconds, the input and output as JSON text (``output`` only for SUCCEEDED), ``error`` and
    ``cause`` null unless the execution failed (or StopExecution gave them)."""

    def ms(t: datetime | None) -> int | None:
        return None if t is None else int(t.timestamp() * 1000)

    return {
        "executionArn": execution_arn, "stateMachineArn": state_machine_arn, "name": name, "status": status,
        "startDate": ms(start), "stopDate": ms(stop),
        "input": execution_input, "output": output,
        "inputDetails": {"included": True}, "outputDetails": {"included": True} if output is not None else None,
        "error": error, "cause": cause,
    }


def execution_status_event(detail: dict[str, Any], *, account: str, region: str, event_id: str,
                           time: datetime) -> dict[str, Any]:
    """The whole event a rule's target receives, around :func:`execution_status_detail`."""
    return {
        "version": "0", "id": event_id, "detail-type": EXECUTION_STATUS_DETAIL_TYPE,
        "source": EXECUTION_STATUS_SOURCE, "account": account,
        "time": time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "region": region,
        "resources": [detail["executionArn"]], "detail": detail,
    }


@dataclass(frozen=True)
class ExecutionEnd:
    """An execution that ended, as its ``Execution Status Change`` event tells it."""

    execution_arn: str
    status: str
    started: datetime
    stopped: datetime | None
    #: the execution's input (JSON text): the run's :class:`~seqlake.aws.request.ExecutionInput`
    execution_input: str
    error: str | None
    cause: str | None

    @classmethod
    def from_event(cls, event: Any) -> ExecutionEnd:
        """Parse ``event``; :class:`BadEventError` names the first field that breaks
        :data:`~seqlake.aws.schemas.EXECUTION_STATUS_CHANGE`."""
        _check(event, EXECUTION_STATUS_CHANGE, "a Step Functions Execution Status Change event")
        d = event["detail"]

        def at(ms: int | None) -> datetime | None:
            return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)

        started = at(d["startDate"])
        assert started is not None  # the schema requires it
        return cls(d["executionArn"], d["status"], started, at(d.get("stopDate")), d["input"],
                   d.get("error"), d.get("cause"))

    @property
    def seconds(self) -> float | None:
        """How long the execution ran (None without a stop date)."""
        return None if self.stopped is None else (self.stopped - self.started).total_seconds()
