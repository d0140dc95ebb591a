"""JSON Schemas of the handlers' inputs (Powertools ``validate``): a malformed event fails loudly at
the edge, before any logic runs."""

from __future__ import annotations

from typing import Any

from seqlake.aws.request import RUN_REQUEST_SCHEMA

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
                           "properties": {"name": {"type": "string"}}},
                "object": {"type": "object", "required": ["key"],
                           "properties": {"key": {"type": "string"}}},
            },
        },
    },
}

_PLAN_SUMMARY: dict[str, Any] = {
    "type": "object",
    "required": ["plan_uri", "array_size"],
    "properties": {
        "plan_uri": {"type": ["string", "null"]},
        "array_size": {"type": "integer", "minimum": 0, "maximum": 10000},
        "needs_index": {"type": "boolean"},
        "request_uri": {"type": ["string", "null"]},
    },
}
_BATCH = {"type": ["object", "null"], "properties": {"job_id": {"type": ["string", "null"]}}}

PLAN_INPUT: dict[str, Any] = {
    "type": "object",
    "required": ["request"],
    "properties": {"request": RUN_REQUEST_SCHEMA, "execution_arn": {"type": "string"},
                   "started_at": {"type": "string"}},
}

COMMIT_INPUT: dict[str, Any] = {
    "type": "object",
    "required": ["request", "plan"],
    "properties": {
        "request": RUN_REQUEST_SCHEMA,
        "plan": {**_PLAN_SUMMARY,
                 "properties": {**_PLAN_SUMMARY["properties"], "plan_uri": {"type": "string"}}},
        "batch": _BATCH,
        "execution_arn": {"type": "string"},
        "started_at": {"type": "string"},
    },
}

FAILURE_INPUT: dict[str, Any] = {
    "type": "object",
    "required": ["request", "error"],
    "properties": {
        "request": RUN_REQUEST_SCHEMA,
        "plan": {"type": ["object", "null"]},
        "batch": _BATCH,
        "error": {"type": "object", "properties": {"Error": {"type": "string"}, "Cause": {"type": "string"}}},
        "execution_arn": {"type": "string"},
        "started_at": {"type": "string"},
    },
}
