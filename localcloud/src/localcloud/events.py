"""Event delivery that moto drops: EventBridge's Step Functions and Lambda targets, and SQS event sources.

A rule's target receives the event (or the target's ``Input`` / ``InputPath`` /
``InputTransformer`` result). A state machine target starts an execution with a random name, as
EventBridge does; a Lambda target is invoked asynchronously (:class:`LambdaRunner` retries it). The
S3 bucket's events reach the rules through moto's own EventBridge notification.

An SQS event source mapping (:class:`SqsEventSource`) polls its queue as Lambda does: batches of
visible messages (a FIFO queue's delay and message groups as moto keeps them), the function invoked
synchronously with an SQS event, the batch's messages deleted on success except those it reports in
``batchItemFailures``. A failed message comes back after :data:`SqsEventSource.RETRY_SECONDS` instead
of the queue's visibility timeout (minutes on AWS), and after the queue's ``maxReceiveCount`` moto
moves it to the dead-letter queue.

A source serves the queue its deployment made, not whatever queue has that name later: moto's backends
are process-wide, so after a moto reset (another local cloud started in this process) a queue of the same
name belongs to the new deployment, whose functions have their own configuration (their parameter
overrides). A source whose queue is gone stops.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import moto.events.models as _events
from moto.sqs.models import sqs_backends
from moto.stepfunctions.parser.models import stepfunctions_parser_backends
from moto.utilities.arns import parse_arn

from localcloud import patches as _patches  # noqa: F401 - moto's version is checked first
from localcloud.lambdas import LambdaRunner


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


#: (AWS service principal, action, resource ARN, source ARN) -> whether the resource's policy allows it
ServiceAllowed = Callable[[str, str, str, str], bool]
#: EventBridge's service principal: it invokes a Lambda target and sends to a target's dead-letter queue
EVENTS = "events.amazonaws.com"


class EventDelivery:
    """The hook moto's patched ``Rule.send_to_targets`` calls for Step Functions and Lambda targets.

    With ``allowed`` (the local cloud enforcing IAM), EventBridge acts as AWS's service principal: a Lambda
    target is invoked only if the function's resource policy (its ``AWS::Lambda::Permission``) lets
    ``events.amazonaws.com`` do so for this rule (``aws:SourceArn``); an event it may not deliver goes to the
    target's ``DeadLetterConfig`` queue, if that queue's policy lets EventBridge send for this rule, and is
    dropped otherwise, as on AWS. A state machine target would need the target's role, which the app has none of.
    """

    def __init__(self, lambdas: LambdaRunner, allowed: ServiceAllowed | None = None) -> None:
        self.lambdas = lambdas
        self.allowed = allowed
        self.delivered: list[tuple[str, str]] = []  # (target ARN, event id)
        #: (target ARN, event id, where it went instead: a dead-letter queue's ARN, or "" when dropped)
        self.undelivered: list[tuple[str, str, str]] = []

    def __call__(self, target: dict[str, Any], event: dict[str, Any], rule_arn: str = "") -> None:
        arn = parse_arn(target["Arn"])
        payload = target_input(target, event)
        body = payload if isinstance(payload, str) else json.dumps(payload, default=str)
        if arn.service == "states":
            backend = stepfunctions_parser_backends[arn.account][arn.region]
            backend.start_execution(target["Arn"], name=str(uuid.uuid4()), execution_input=body)
        elif arn.service == "lambda":
            if self.allowed is not None and not self.allowed(EVENTS, "lambda:InvokeFunction", target["Arn"], rule_arn):
                self._dead_letter(target, event, rule_arn)
                return
            function_name = target["Arn"].split(":")[6]
            self.lambdas(function_name, body.encode(), True)
        self.delivered.append((target["Arn"], str(event.get("id", ""))))

    def _dead_letter(self, target: dict[str, Any], event: dict[str, Any], rule_arn: str) -> None:
        """EventBridge's dead letter of an event it could not deliver: the event, with why as attributes."""
        queue = str((target.get("DeadLetterConfig") or {}).get("Arn") or "")
        if queue and self.allowed is not None and self.allowed(EVENTS, "sqs:SendMessage", queue, rule_arn):
            q = parse_arn(queue)
            attributes = {
                "RULE_ARN": {"DataType": "String", "StringValue": rule_arn},
                "TARGET_ARN": {"DataType": "String", "StringValue": str(target["Arn"])},
                "ERROR_CODE": {"DataType": "String", "StringValue": "NO_PERMISSIONS"},
            }
            sqs_backends[q.account][q.region].send_message(
                q.resource_id, json.dumps(event, default=str), message_attributes=attributes
            )
        else:
            queue = ""
        self.undelivered.append((str(target["Arn"]), str(event.get("id", "")), queue))


class SqsEventSource:
    """One ``AWS::Lambda::EventSourceMapping`` of an SQS queue, polled in a thread of this process."""

    #: how often an empty queue is looked at (a delayed message becomes visible without a notification)
    POLL_SECONDS = 0.2
    #: a failed message is visible again after this (AWS: the queue's visibility timeout)
    RETRY_SECONDS = 1

    def __init__(self, lambdas: LambdaRunner, mapping: dict[str, Any]) -> None:
        self.lambdas = lambdas
        self.queue_arn = str(mapping["EventSourceArn"])
        arn = parse_arn(self.queue_arn)
        self.account, self.region, self.queue_name = arn.account, arn.region, arn.resource_id
        self.function = str(mapping["FunctionName"]).split(":function:")[-1].split(":")[0]
        self.batch_size = int(mapping.get("BatchSize") or 10)
        self.partial = "ReportBatchItemFailures" in (mapping.get("FunctionResponseTypes") or [])
        self.batches = 0
        #: the queue this mapping polls: the one of this name when the source is made (or first seen)
        self._queue: Any = self._current_queue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"sqs-source-{self.queue_name}")

    def start(self) -> SqsEventSource:
        self._thread.start()
        return self

    def _backend(self) -> Any:
        return sqs_backends[self.account][self.region]

    def _current_queue(self) -> Any:
        """The queue of this name in moto now (None: not made yet, or gone after a moto reset)."""
        try:
            return self._backend().get_queue(self.queue_name)
        except Exception:
            return None

    def _own_queue(self) -> Any:
        """This mapping's queue, if it still exists; None if not (yet)."""
        queue = self._current_queue()
        if self._queue is None:
            self._queue = queue
        return queue if queue is not None and queue is self._queue else None

    @property
    def orphaned(self) -> bool:
        """This mapping's queue is gone: a queue of its name, if any, is another deployment's."""
        return self._queue is not None and self._own_queue() is None

    @property
    def pending(self) -> int:
        """Messages in the queue: visible, delayed, or being handled."""
        queue = self._own_queue()
        return len(queue._messages) if queue is not None else 0

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _record(self, m: Any) -> dict[str, Any]:
        attributes = {
            "ApproximateReceiveCount": str(m.approximate_receive_count),
            "SentTimestamp": str(m.sent_timestamp),
            "SenderId": str(m.sender_id),
            "ApproximateFirstReceiveTimestamp": str(m.approximate_first_receive_timestamp),
        }
        if m.group_id:
            attributes["MessageGroupId"] = m.group_id
        if m.deduplication_id:
            attributes["MessageDeduplicationId"] = m.deduplication_id
        return {
            "messageId": m.id,
            "receiptHandle": m.receipt_handle,
            "body": m.body,
            "attributes": attributes,
            "messageAttributes": {},
            "md5OfBody": m.body_md5,
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.region,
        }

    def _run(self) -> None:
        while not self._stopped.is_set():
            if self.orphaned:
                return
            if not self.poll():
                self._stopped.wait(self.POLL_SECONDS)

    def poll(self) -> bool:
        """Hand one batch of this mapping's visible messages to its function; False if there was none."""
        queue = self._own_queue()
        if queue is None:  # not made yet, or gone (and any queue of its name is another deployment's)
            return False
        backend = self._backend()
        try:
            messages = backend.receive_message(self.queue_name, self.batch_size, 0, queue.visibility_timeout)
        except Exception:  # moto was reset meanwhile
            return False
        if not messages:
            return False
        self.batches += 1
        event = {"Records": [self._record(m) for m in messages]}
        out, failed = self.lambdas.invoke(self.function, json.dumps(event).encode())
        failures = {m.id for m in messages} if failed else self._reported_failures(out)
        with contextlib.suppress(Exception):  # moto was reset meanwhile: the messages are gone
            for m in messages:
                if m.id in failures:
                    backend.change_message_visibility(self.queue_name, m.receipt_handle, self.RETRY_SECONDS)
                else:
                    backend.delete_message(self.queue_name, m.receipt_handle)
        return True

    def _reported_failures(self, out: bytes) -> set[str]:
        if not self.partial:
            return set()
        response = json.loads(out or b"null")
        items = response.get("batchItemFailures", []) if isinstance(response, dict) else []
        return {str(i["itemIdentifier"]) for i in items}
