"""EventBridge target delivery that moto drops: Step Functions and Lambda targets.

A rule's target receives the event (or the target's ``Input`` / ``InputPath`` /
``InputTransformer`` result). A state machine target starts an execution with a random name, as
EventBridge does; a Lambda target is invoked asynchronously (:class:`LambdaRunner` retries it). The
S3 bucket's events reach the rules through moto's own EventBridge notification.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import moto.events.models as _events
from moto.stepfunctions.parser.models import stepfunctions_parser_backends
from moto.utilities.arns import parse_arn

from seqlake.localcloud import patches as _patches  # noqa: F401 - moto's version is checked first
from seqlake.localcloud.lambdas import LambdaRunner


def target_input(target: dict[str, Any], event: dict[str, Any]) -> Any:
    """What EventBridge passes to the target."""
    if target.get("Input") is not None:
        return json.loads(target["Input"])
    path = target.get("InputPath")
    if path:
        node: Any = event
        for part in path.removeprefix("$").strip(".").split("."):
            if part:
                node = node[part]
        return node
    transformer = target.get("InputTransformer")
    if transformer:
        parser: Any = getattr(_events, "EventTemplateParser")  # noqa: B009 - not in moto's __all__
        return parser.parse(
            input_template=transformer.get("InputTemplate"),
            input_paths_map=transformer.get("InputPathsMap", {}),
            # moto's parser needs ingestion-time, which its S3 notifications do not set
            event={"ingestion-time": str(event.get("time", "")), **event},
        )
    return event


class EventDelivery:
    """The hook moto's patched ``Rule.send_to_targets`` calls for Step Functions and Lambda targets."""

    def __init__(self, lambdas: LambdaRunner) -> None:
        self.lambdas = lambdas
        self.delivered: list[tuple[str, str]] = []  # (target ARN, event id)

    def __call__(self, target: dict[str, Any], event: dict[str, Any]) -> None:
        arn = parse_arn(target["Arn"])
        payload = target_input(target, event)
        body = payload if isinstance(payload, str) else json.dumps(payload, default=str)
        if arn.service == "states":
            backend = stepfunctions_parser_backends[arn.account][arn.region]
            backend.start_execution(target["Arn"], name=str(uuid.uuid4()), execution_input=body)
        elif arn.service == "lambda":
            function_name = target["Arn"].split(":")[6]
            self.lambdas(function_name, body.encode(), True)
        self.delivered.append((target["Arn"], str(event.get("id", ""))))
