"""EventBridge S3 events, the objects of a run, and the deterministic run id.

A run is identified by its input objects: ``run_id = <name>-<16 hex digits of sha256 over the bucket,
the sorted keys and their ETags>``. Every delivery of the same upload (EventBridge delivers at least
once; R1's and R2's events both lead to the same pair) computes the same id, which is also the Step
Functions execution name, so a duplicate start is a no-op. Re-uploading a file changes its ETag and
so starts a new run; the old run's results stay.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.data_classes import S3EventBridgeNotificationEvent

FASTQ_SUFFIXES: tuple[str, ...] = (".fastq.gz", ".fq.gz", ".fastq", ".fq")
SAMPLESHEET_NAME = "samplesheet.csv"
INCOMING = "incoming/"
#: Step Functions execution names: 1-80 characters of ``[0-9A-Za-z_-]``.
_NAME_MAX = 80
_UNSAFE = re.compile(r"[^0-9A-Za-z_-]+")


@dataclass(frozen=True)
class S3Object:
    bucket: str
    key: str
    etag: str = ""
    size: int = 0

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def folder(self) -> str:
        """The key's folder with a trailing slash (``incoming/batch1/``)."""
        return self.key[: len(self.key) - len(self.name)]

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri, "bucket": self.bucket, "key": self.key, "etag": self.etag, "size": self.size}


def object_from_event(event: dict[str, Any]) -> S3Object:
    """The object of an EventBridge ``Object Created`` event from S3, its key as the event spells it.

    S3's classic notifications URL-encode keys (a space becomes ``+``); whether a key in an event is
    encoded is settled against the bucket by :func:`seqlake.aws.start.existing_key`, not guessed here.
    """
    ev = S3EventBridgeNotificationEvent(event)
    if ev.source != "aws.s3" or ev.detail_type != "Object Created":
        raise ValueError(f"not an S3 Object Created event: source={ev.source!r} "
                         f"detail-type={ev.detail_type!r}")
    obj = ev.detail.object
    # the raw key: Powertools' ``obj.key`` URL-decodes, which would turn a literal "+" into a space
    return S3Object(bucket=ev.detail.bucket.name, key=str(event["detail"]["object"]["key"]),
                    etag=normalise_etag(obj.etag or ""), size=obj.size or 0)


def normalise_etag(etag: str) -> str:
    """ETags without quotes: S3's API quotes them, EventBridge events do not."""
    return etag.strip('"')


def kind_of(key: str) -> str:
    """``fastq``, ``samplesheet`` or ``other`` (by name: the EventBridge rule already filtered by it)."""
    name = key.rsplit("/", 1)[-1]
    if name == SAMPLESHEET_NAME:
        return "samplesheet"
    if name.lower().endswith(FASTQ_SUFFIXES):
        return "fastq"
    return "other"


def slug(text: str, maxlen: int = 40) -> str:
    """A readable execution-name-safe prefix (``sample_1.fastq.gz`` -> ``sample_1``)."""
    for suffix in FASTQ_SUFFIXES:
        if text.lower().endswith(suffix):
            text = text[: -len(suffix)]
            break
    s = _UNSAFE.sub("-", text).strip("-_")
    return (s or "run")[:maxlen].rstrip("-_") or "run"


def run_id(label: str, objects: list[S3Object]) -> str:
    """Deterministic run id: ``<slug(label)>-<sha256(bucket, sorted (key, etag))[:16]>``.

    The label only makes the id readable; identity comes from the hash, which covers every input
    object (a samplesheet run includes the sheet itself).
    """
    if not objects:
        raise ValueError("a run needs at least one input object")
    h = hashlib.sha256()
    for o in sorted(objects, key=lambda o: (o.bucket, o.key)):
        h.update(f"{o.bucket}\0{o.key}\0{o.etag}\n".encode())
    rid = f"{slug(label)}-{h.hexdigest()[:16]}"
    assert len(rid) <= _NAME_MAX
    return rid
