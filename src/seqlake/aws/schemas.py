"""JSON Schemas of the handlers' inputs (Powertools ``validate``): a malformed event fails loudly at
the edge, before any logic runs."""

from __future__ import annotations

from typing import Any

S3_OBJECT_CREATED: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["source", "detail-type", "detail"],
    "properties": {
        "source": {"const": "aws.s3"},
        "detail-type": {"const": "Object Created"},
        "detail": {
            "type": "object",
            "required": ["bucket", "object"],
            "properties": {
                "bucket": {"type": "object", "required": ["name"],
                           "properties": {"name": {"type": "string", "minLength": 1}}},
                "object": {"type": "object", "required": ["key"],
                           "properties": {"key": {"type": "string", "minLength": 1},
                                          "etag": {"type": "string"},
                                          "size": {"type": "integer", "minimum": 0}}},
            },
        },
    },
}

#: Step Functions' ``Execution Status Change`` event of an execution that ended unsuccessfully (the shape:
#: :func:`seqlake.aws.events.execution_status_detail`)
EXECUTION_STATUS_CHANGE: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["source", "detail-type", "detail"],
    "properties": {
        "source": {"const": "aws.states"},
        "detail-type": {"const": "Step Functions Execution Status Change"},
        "detail": {
            "type": "object",
            "required": ["executionArn", "status", "startDate", "input"],
            "properties": {
                "executionArn": {"type": "string", "minLength": 1},
                "status": {"enum": ["FAILED", "TIMED_OUT", "ABORTED"]},
                "startDate": {"type": "integer"},
                "stopDate": {"type": ["integer", "null"]},
                "input": {"type": "string"},
                "error": {"type": ["string", "null"]},
                "cause": {"type": ["string", "null"]},
            },
        },
    },
}

#: the execution input (:class:`seqlake.aws.request.ExecutionInput`): four fields, whatever the run's size
EXECUTION_INPUT: dict[str, Any] = {
    "type": "object",
    "required": ["run_id", "bucket", "request_uri", "request_sha256"],
    "additionalProperties": False,
    "properties": {
        "run_id": {"type": "string", "pattern": "^[0-9A-Za-z_-]{1,80}$"},
        "bucket": {"type": "string", "minLength": 3, "maxLength": 63},
        "request_uri": {"type": "string", "pattern": "^s3://"},
        "request_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
    },
}

_PLAN_SUMMARY: dict[str, Any] = {
    "type": "object",
    "required": ["plan_uri", "array_size"],
    "properties": {
        "plan_uri": {"type": ["string", "null"]},
        "array_size": {"type": "integer", "minimum": 0, "maximum": 10000},
        "needs_index": {"type": "boolean"},
        "index_job_uri": {"type": ["string", "null"]},
        "todo_uri": {"type": ["string", "null"]},
    },
}

_BATCH = {"type": ["object", "null"], "properties": {"job_id": {"type": ["string", "null"]}}}

_COMMON = {"execution_arn": {"type": "string"}, "execution_name": {"type": "string"}, "started_at": {"type": "string"}}

PLAN_INPUT: dict[str, Any] = {
    "type": "object",
    "required": ["execution"],
    "properties": {"execution": EXECUTION_INPUT, "reduce": {"type": "boolean"}, **_COMMON},
}

COMMIT_INPUT: dict[str, Any] = {
    "type": "object",
    "required": ["execution", "plan"],
    "properties": {"execution": EXECUTION_INPUT, "plan": _PLAN_SUMMARY, "batch": _BATCH, **_COMMON},
}

FAILURE_INPUT: dict[str, Any] = {
    "type": "object",
    "required": ["execution", "error", "failed_step"],
    "properties": {
        "execution": EXECUTION_INPUT,
        "plan": {"type": ["object", "null"]},
        "batch": _BATCH,
        "failed_step": {"type": "string"},
        "error": {"type": "object", "properties": {"Error": {"type": "string"}, "Cause": {"type": "string"}}},
        **_COMMON,
    },
}
