"""The run request and the execution input that points at it.

The request (:class:`RunRequest`: samples, input objects with ETags, reference, parameters) grows
with the run (a thousand samples make a few hundred KB), so it is not the execution input: the
start function writes it to ``runs/<id>/request.json`` and starts the execution with an
:class:`ExecutionInput` of four fields (run id, bucket, the request's URI and SHA-256). Every state's
payload stays the same size whatever the run's, far below Step Functions' 256 KiB limit.

Neither holds a timestamp: Step Functions treats a second ``StartExecution`` with the same name *and
the same input* as idempotent, and the execution's own start time is ``$$.Execution.StartTime``.
The request's JSON Schema is ``schemas/run_request.schema.json``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from seqlake import schemas
from seqlake.base import storage
from seqlake.base.errors import BadInputError
from seqlake.base.layout import RunLayout
from seqlake.base.model import Sample


@dataclass(frozen=True)
class RunRequest:
    run_id: str
    bucket: str
    samples: tuple[Sample, ...]
    #: every input object: {uri, bucket, key, etag, size}; a samplesheet run lists the sheet too
    inputs: tuple[dict[str, Any], ...]
    samplesheet: str | None = None
    reference: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def out_prefix(self) -> str:
        """Where ``runs/`` and ``results/`` live: the bucket the inputs arrived in."""
        return f"s3://{self.bucket}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "bucket": self.bucket,
            "samples": [s.to_dict() for s in self.samples],
            "inputs": list(self.inputs),
            "samplesheet": self.samplesheet,
            "reference": self.reference,
            "parameters": dict(self.parameters),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunRequest:
        return cls(
            run_id=d["run_id"],
            bucket=d["bucket"],
            samples=tuple(Sample.from_dict(s) for s in d["samples"]),
            inputs=tuple(d.get("inputs", ())),
            samplesheet=d.get("samplesheet"),
            reference=d.get("reference"),
            parameters=dict(d.get("parameters") or {}),
        )

    @property
    def layout(self) -> RunLayout:
        return RunLayout.in_bucket(self.bucket, self.run_id)

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class ExecutionInput:
    """The Step Functions execution input: where the run's request is, and its digest."""

    run_id: str
    bucket: str
    request_uri: str
    request_sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "bucket": self.bucket, "request_uri": self.request_uri,
                "request_sha256": self.request_sha256}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExecutionInput:
        return cls(d["run_id"], d["bucket"], d["request_uri"], d["request_sha256"])

    def load(self) -> RunRequest:
        """The request, checked against its digest (an overwritten request.json is not this run's)."""
        data = storage.read_bytes(self.request_uri)
        digest = hashlib.sha256(data).hexdigest()
        if digest != self.request_sha256:
            raise ValueError(f"{self.request_uri} has SHA-256 {digest}, the execution expects {self.request_sha256}")
        request = parse_request(data, self.request_uri)
        if request.run_id != self.run_id:
            raise ValueError(f"{self.request_uri} is the request of run {request.run_id}, not {self.run_id}")
        return request


def parse_request(data: bytes, uri: str) -> RunRequest:
    """The request in ``data`` (read from ``uri``), checked against its schema; BadInputError naming the
    line and column of bad JSON, or the field that breaks the schema."""
    import jsonschema

    try:
        body = json.loads(data)
    except UnicodeDecodeError as err:
        raise BadInputError(uri, f"not UTF-8 text at byte {err.start}") from None
    except json.JSONDecodeError as err:
        raise BadInputError(uri, f"not JSON: {err.msg} (column {err.colno})", line=err.lineno) from None
    if schemas.fast_check("run_request")(body):
        return RunRequest.from_dict(body)
    validator = jsonschema.Draft202012Validator(schemas.load("run_request"))
    for problem in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
        field = ".".join(str(p) for p in problem.absolute_path) or "(the request)"
        raise BadInputError(uri, f"field {field}: {problem.message[:300]}")
    return RunRequest.from_dict(body)


def store_request(request: RunRequest) -> ExecutionInput:
    """Write ``runs/<id>/request.json`` (the same bytes for the same request, so a repeated start is
    idempotent) and return the execution input that points at it."""
    data = request.to_json()
    uri = request.layout.request
    storage.write_bytes(uri, data)
    return ExecutionInput(request.run_id, request.bucket, uri, hashlib.sha256(data).hexdigest())
