"""The run request: the Step Functions execution input, built by ``start_run``.

It holds only what identifies the run (its objects and their ETags), never a timestamp: Step
Functions treats a second ``StartExecution`` with the same name *and the same input* as idempotent,
and the execution's own start time is available to the state machine as ``$$.Execution.StartTime``.
Its JSON Schema is ``schemas/run_request.schema.json`` beside this module's handlers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seqlake.model import Sample


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


#: JSON Schema of the execution input (validated by the plan handler)
RUN_REQUEST_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["run_id", "bucket", "samples", "inputs"],
    "properties": {
        "run_id": {"type": "string", "pattern": "^[0-9A-Za-z_-]{1,80}$"},
        "bucket": {"type": "string", "minLength": 3, "maxLength": 63},
        "samples": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sample", "r1"],
                "properties": {
                    "sample": {"type": "string", "minLength": 1},
                    "r1": {"type": "string", "pattern": "^s3://"},
                    "r2": {"type": ["string", "null"], "pattern": "^s3://"},
                },
            },
        },
        "inputs": {"type": "array", "items": {"type": "object", "required": ["uri", "etag"]}},
        "samplesheet": {"type": ["string", "null"]},
        "reference": {"type": ["string", "null"]},
        "parameters": {"type": "object"},
    },
}
