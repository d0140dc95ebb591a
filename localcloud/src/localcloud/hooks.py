"""What moto calls back into (:data:`.patches.HOOKS`): Lambda invocations, Batch submissions, event
delivery and Athena queries go to the local runners; a Batch attempt's log goes to CloudWatch Logs, a
failed asynchronous event to its function's dead-letter queue, and an execution's end to the default
event bus (:class:`ExecutionEnds`). Every returning Lambda or Batch job and every execution's end sets
:attr:`Hooks.activity`, which wakes the wait loop."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from moto.events.models import events_backends

from localcloud import patches
from localcloud.aws_texts import EXECUTION_STATUS_DETAIL_TYPE, EXECUTION_STATUS_SOURCE, execution_status_detail
from localcloud.batch import ArrayProgress, BatchRunner
from localcloud.events import EventDelivery, ServiceAllowed
from localcloud.lambdas import FunctionSpec, LambdaRunner

#: service name -> a client of the local cloud
Clients = Callable[[str], Any]
#: (role ARN, service name) -> a client signed as that role
RoleClients = Callable[[str, str], Any]
#: (sql, database) -> (columns, rows as text)
AthenaQuery = Callable[[str, str], tuple[list[str], list[list[str | None]]]]


class Hooks:
    def __init__(self, clients: Clients, role_clients: RoleClients | None = None) -> None:
        self.clients = clients
        #: what stands in for an AWS service acts as the role AWS would use (the Batch instances' for
        #: container logs, the function's for its dead letters); without it, as this process
        self.role_clients = role_clients or (lambda role, service: clients(service))
        #: the Batch instances' role (the ECS agent's: it writes the containers' logs)
        self.instance_role = ""
        #: whether an AWS service may act on a resource for a source (resource policies; None: not checked)
        self.service_allowed: ServiceAllowed | None = None
        self.lambdas: LambdaRunner | None = None
        #: set when a Lambda or Batch job returns: the state machine may have moved
        self.activity = threading.Event()
        self.execution_ends = ExecutionEnds(self.activity)

    def install(self, lambdas: LambdaRunner, batch: BatchRunner, athena_query: AthenaQuery) -> None:
        self.lambdas = lambdas
        patches.HOOKS.lambda_invoke = self.invoke
        patches.HOOKS.batch_run = batch
        patches.HOOKS.deliver = EventDelivery(lambdas, self.service_allowed)
        patches.HOOKS.athena_query = athena_query
        patches.HOOKS.execution_ended = self.execution_ends

    def uninstall(self) -> None:
        """Take this cloud's hooks out; a local cloud started after it in this process keeps its own."""
        if patches.HOOKS.lambda_invoke == self.invoke:
            patches.HOOKS.lambda_invoke = patches.HOOKS.batch_run = None
            patches.HOOKS.deliver = patches.HOOKS.athena_query = patches.HOOKS.execution_ended = None

    def invoke(self, name: str, payload: bytes, is_async: bool) -> tuple[bytes, bool]:
        assert self.lambdas is not None
        try:
            return self.lambdas(name, payload, is_async)
        finally:
            self.activity.set()

    def batch_changed(self, progress: ArrayProgress) -> None:
        # a job that stops wakes the state machine's .sync wait at once (the sync-wait patch) instead of its next poll
        patches.wake_sync_waiters()
        self.activity.set()

    def put_log(self, group: str, stream: str, lines: list[str]) -> None:
        """A Batch attempt's output into CloudWatch Logs (moto), where the failure step reads its last line."""
        platform = self.clients("logs")
        with contextlib.suppress(platform.exceptions.ResourceAlreadyExistsException):
            platform.create_log_group(logGroupName=group)  # made by the template (awslogs creates none)
        logs = self.role_clients(self.instance_role, "logs")
        with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_stream(logGroupName=group, logStreamName=stream)
        now = int(time.time() * 1000)
        events = [{"timestamp": now, "message": line} for line in lines if line.strip()]  # no empty events
        for i in range(0, len(events), 5000):
            logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events[i : i + 5000])

    def dead_letter(self, spec: FunctionSpec, event: bytes, error: bytes) -> None:
        """Lambda's asynchronous dead-letter queue: the event, with the error as message attributes."""
        # Lambda sends to the queue by its ARN, as the function's role: its URL is looked up as this process
        url = self.clients("sqs").get_queue_url(QueueName=str(spec.dead_letter_arn).rsplit(":", 1)[-1])["QueueUrl"]
        sqs = self.role_clients(spec.role, "sqs")
        err = json.loads(error or b"{}")
        attributes = {
            "RequestID": {"DataType": "String", "StringValue": "local"},
            "ErrorCode": {"DataType": "String", "StringValue": str(err.get("errorType", "Unhandled"))},
            "ErrorMessage": {"DataType": "String", "StringValue": str(err.get("errorMessage", ""))[:1000] or "-"},
        }
        sqs.send_message(QueueUrl=url, MessageBody=event.decode(), MessageAttributes=attributes)


class ExecutionEnds:
    """Step Functions' ``Execution Status Change`` event of each execution that ends, put on its account's
    default bus as AWS puts it (source ``aws.states``; the detail as :func:`.aws_texts.execution_status_detail`
    writes it), so that the rules matching it deliver it through the real path (:mod:`.events`).

    Only ends (AWS also reports RUNNING, which no rule of the app reads). An end counts as :attr:`pending`
    from before its execution's status is final until its event is handed to the rules' targets (a Lambda
    target is then pending in the Lambda runner): a waiter never sees an ended execution whose event is
    still to come."""

    def __init__(self, activity: threading.Event) -> None:
        self.activity = activity
        self._pending = 0
        self._lock = threading.Lock()
        #: (execution ARN, status) of each event put
        self.emitted: list[tuple[str, str]] = []

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def __call__(self, execution: Any, record_end: Callable[[], None]) -> None:
        with self._lock:
            self._pending += 1
        try:
            record_end()
            self.put(execution)
        finally:
            with self._lock:
                self._pending -= 1
            self.activity.set()

    def put(self, execution: Any) -> None:
        status = str(execution.exec_status.value)
        output = json.dumps(execution.output, separators=(",", ":")) if status == "SUCCEEDED" else None
        # (moto's StopExecution drops the error and cause it is given: an ABORTED end has neither here)
        error, cause = execution.error or None, execution.cause or None
        detail = execution_status_detail(
            execution_arn=execution.exec_arn, state_machine_arn=execution.state_machine_arn, name=execution.name,
            status=status, start=execution.start_date, stop=execution.stop_date,
            execution_input=json.dumps(execution.input_data, separators=(",", ":")), output=output,
            error=error, cause=cause)
        # no "Time": moto stamps its events with a number, which its own targets' templates expect
        entry = {"Source": EXECUTION_STATUS_SOURCE, "DetailType": EXECUTION_STATUS_DETAIL_TYPE,
                 "Detail": json.dumps(detail), "Resources": [execution.exec_arn]}
        try:
            events_backends[execution.account_id][execution.region_name].put_events([entry])
        except Exception:  # moto was reset meanwhile (another cloud in this process): the bus is gone
            logging.getLogger(__name__).warning("could not put the end of %s on the event bus", execution.exec_arn,
                                                exc_info=True)
            return
        self.emitted.append((str(execution.exec_arn), status))


@contextlib.contextmanager
def events_paused() -> Iterator[None]:
    """S3 events are not delivered meanwhile (objects put back, or put without starting a run)."""
    patches.HOOKS.events_enabled = False
    try:
        yield
    finally:
        patches.HOOKS.events_enabled = True
