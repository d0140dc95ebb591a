"""The schemas' fast check (``seqlake.schemas.fast_check``) agrees with jsonschema."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from seqlake import schemas

GOOD: dict[str, Any] = {
    "run_id": "run-1", "bucket": "bkt", "samples": [{"sample": "s1", "r1": "s3://bkt/a.fq.gz"}],
    "inputs": [{"uri": "s3://bkt/a.fq.gz", "bucket": "bkt", "key": "a.fq.gz", "etag": "e", "size": 3}],
}
REQUESTS = [
    GOOD,
    {**GOOD, "run_id": "bad id!"},
    {**GOOD, "bucket": "b"},
    {**GOOD, "samples": []},
    {k: v for k, v in GOOD.items() if k != "inputs"},
    {**GOOD, "samples": [{"r1": "s3://bkt/a.fq.gz"}]},
    [],
]


@pytest.mark.parametrize("request_body", REQUESTS)
def test_the_run_requests_fast_check_agrees_with_jsonschema(request_body: Any) -> None:
    validator = jsonschema.Draft202012Validator(schemas.load("run_request"))
    assert schemas.fast_check("run_request")(request_body) == validator.is_valid(request_body)


def test_the_fast_check_passes_a_good_request() -> None:
    assert schemas.fast_check("run_request")(GOOD)
