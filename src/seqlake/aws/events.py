"""EventBridge S3 events, the objects of a run, and the deterministic run id.

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
from typing import Any

from aws_lambda_powertools.utilities.data_classes import S3EventBridgeNotificationEvent

from seqlake.aws.schemas import S3_OBJECT_CREATED
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
    import jsonschema

    where = f"EventBridge event {event.get('id', '?') if isinstance(event, dict) else '?'}"
    validator = jsonschema.Draft202012Validator(S3_OBJECT_CREATED)
    for err in sorted(validator.iter_errors(event), key=lambda e: list(e.absolute_path)):
        field = ".".join(str(p) for p in err.absolute_path) or "(the event)"
        if list(err.absolute_path)[:1] in (["source"], ["detail-type"]):
            raise BadEventError(where, f"not an S3 Object Created event: field {field}: {err.message}")
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
