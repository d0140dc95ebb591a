"""The app stays inside AWS's limits (``seqlake.base.limits``) by construction, where a test can show it without
a run: what the state machine sends Batch, and the plan's array size. (The Step Functions payloads of real
runs are checked where runs are made: tests/aws/test_start_run.py, and the local cloud enforces every
limit on every run: tests/local/test_patches.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from seqlake.base import limits

REPO = Path(__file__).resolve().parents[2]
#: the longest value a JSONPath of the state machine can resolve to: an S3 URI (bucket 63, key 1,024)
_LONGEST_VALUE = "x" * (len("s3://") + 63 + 1 + 1024)
#: a substituted ARN (job queue, job definition)
_LONGEST_ARN = "arn:aws:batch:us-east-1:123456789012:job-definition/" + "x" * 128 + ":999"


def _tasks(machine: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, state in machine.get("States", {}).items():
        out.append((name, state))
        for sub in [*state.get("Branches", []), state.get("ItemProcessor") or {}, state.get("Iterator") or {}]:
            out += _tasks(sub)
    return out


def _worst_case(node: Any, key: str = "") -> Any:
    """Parameters as sent: every path or intrinsic at its longest, every ``${...}`` an ARN."""
    if isinstance(node, dict):
        return {k: _worst_case(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_worst_case(v) for v in node]
    if key.endswith(".$"):
        return _LONGEST_VALUE
    if isinstance(node, str):
        return re.sub(r"\$\{[^}]+\}", _LONGEST_ARN, node)
    return node


def test_every_submit_job_request_fits_batch_s_job_payload_limit() -> None:
    machine = json.loads((REPO / "statemachines" / "pipeline.asl.json").read_text())
    submits = [(n, s) for n, s in _tasks(machine) if "submitjob" in str(s.get("Resource", "")).lower()]
    assert submits, "the state machine submits Batch jobs"
    for name, state in submits:
        body = json.dumps(_worst_case(state.get("Parameters", {})), separators=(",", ":"))
        assert len(body.encode()) <= limits.BATCH_SUBMIT_JOB.value, (name, len(body))


def test_the_plan_never_asks_for_more_children_than_an_array_holds() -> None:
    from seqlake.plan import planner as plan

    assert limits.BATCH_ARRAY_MAX.value >= plan.MAX_SHARDS


def test_every_limit_names_its_aws_source() -> None:
    for limit in limits.ALL:
        assert limit.value > 0 and limit.what
        assert limit.source.startswith("https://docs.aws.amazon.com/"), limit
