"""What AWS refuses, refused here: every service-side rule the app can meet that moto does not hold it to.

The one home of these rules (docs/LOCAL_CLOUD.md's table is generated from :data:`RULES`, and
``tests/local/test_rules.py`` fails when the two differ). Each :class:`Rule` names the call it applies to,
what AWS refuses, what the local cloud answers, the AWS page (or the field report) that documents it, and
the test that shows the local cloud enforcing it. Some rules are enforced elsewhere (the payload limits of
:mod:`.patches`, the memory of :mod:`.memory`): they are listed here so that the table is complete.

The Batch rules moto does not keep are checked here, on the server's side of the request, as AWS enforces
them; moto's handlers call these checks through the patch ``batch-service-rules`` (:mod:`.patches`, with its
entry in :mod:`.patch_registry`: the one place moto is patched):

- ``SubmitJob`` to a queue with a fair-share scheduling policy without a ``shareIdentifier``, or with no
  scheduling priority (neither ``schedulingPriorityOverride`` nor the job definition's
  ``schedulingPriority``): ``ClientException`` with AWS's words. moto drops all three fields, so a job
  definition's priority is kept here, on moto's job definition, when it is registered.
- a job timeout under 60 s (``RegisterJobDefinition``, ``SubmitJob``);
- container overrides Batch refuses (an ``AWS_BATCH`` environment name, a vCPU count that is not a whole
  positive number, memory under 4 MiB);
- a job whose vCPUs and memory fit no instance type of its queue's compute environments, or more vCPUs
  than their ``maxvCpus``: on AWS such a job stays ``RUNNABLE`` until the queue's
  ``JobStateTimeLimitActions`` cancel it (or for ever, without them). Here it fails at once with the status
  reason AWS gives when the action cancels it (:func:`unschedulable`, called by :mod:`.batch`).

Instance types (vCPUs, memory, the memory Batch gives jobs on each) come from :mod:`.instances` (EC2's data as moto
records it; the app's plan reads its own copy of the same numbers).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import moto.batch.exceptions as _batch_exc

from localcloud import instances, limits

ClientException: Any = _batch_exc.ClientException

_BATCH_API = "https://docs.aws.amazon.com/batch/latest/APIReference/"
_TESTS = "tests/local/test_rules.py::"

# ---------------------------------------------------------------- AWS's words
#: boto3 issue #3158 quotes it: a fair-share queue's submission without a share identifier
NO_SHARE_IDENTIFIER = "shareIdentifier must be specified."
#: Nextflow PR #3505 quotes it: a fair-share queue's submission with no scheduling priority anywhere
NO_SCHEDULING_PRIORITY = (
    "Either schedulingPriority in job definition or schedulingPriorityOverride should be specified."
)
#: the shortest attempt timeout Batch takes (API_JobTimeout)
MIN_TIMEOUT_SECONDS = 60
#: the smallest MEMORY a container may be given, in MiB (API_ResourceRequirement)
MIN_MEMORY_MIB = 4
#: the environment variable prefix Batch keeps for itself (API_KeyValuePair)
RESERVED_ENV_PREFIX = "AWS_BATCH"
#: the status reason of a job the queue's JobStateTimeLimitActions cancelled (seqlake.aws.batch_reasons)
CANCELLED_PREFIX = "Canceled by JobStateTimeLimit action due to reason: "
JOB_RESOURCE_REQUIREMENT = "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT"
COMPUTE_ENVIRONMENT_MAX_RESOURCE = "MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE"
#: what ``optimal`` means in a compute environment (the families Batch picks from)
OPTIMAL_FAMILIES = ("c4", "m4", "r4")


@dataclass(frozen=True)
class Rule:
    """One service-side rule: a row of docs/LOCAL_CLOUD.md's table."""

    #: the IAM action of the call it applies to (``batch:SubmitJob``)
    action: str
    #: what AWS refuses
    refuses: str
    #: what the local cloud answers (AWS's words where they are known)
    answer: str
    #: the AWS documentation page, or the field report with its link
    source: str
    #: the test that shows the local cloud enforcing it (``path::name``)
    test: str


RULES: tuple[Rule, ...] = (
    Rule("batch:SubmitJob", "a job for a queue with a fair-share scheduling policy without `shareIdentifier`",
         f"`ClientException: {NO_SHARE_IDENTIFIER}`",
         _BATCH_API + "API_SubmitJob.html (shareIdentifier); boto3 issue 3158 for the message",
         _TESTS + "test_fair_share_queue_refuses_a_job_without_a_share_identifier"),
    Rule("batch:SubmitJob", "a job for a fair-share queue with neither `schedulingPriorityOverride` nor the job "
         "definition's `schedulingPriority`",
         f"`ClientException: {NO_SCHEDULING_PRIORITY}`",
         "https://github.com/nextflow-io/nextflow/pull/3505 (the message); "
         + _BATCH_API + "API_SubmitJob.html (schedulingPriorityOverride)",
         _TESTS + "test_fair_share_queue_refuses_a_job_without_a_scheduling_priority"),
    Rule("batch:SubmitJob", f"`arrayProperties.size` outside {limits.BATCH_ARRAY_MIN.value}.."
         f"{limits.BATCH_ARRAY_MAX.value:,}", "`ClientException` (`localcloud/batch.py`, patch `batch-submit`)",
         limits.BATCH_ARRAY_MAX.source,
         "tests/local/test_patches.py::test_batch_refuses_arrays_over_ten_thousand_and_requests_over_30_kib"),
    Rule("batch:SubmitJob", f"a request over {limits.BATCH_SUBMIT_JOB.value:,} bytes",
         "`ClientException` (patch `batch-service-rules`)", limits.BATCH_SUBMIT_JOB.source,
         "tests/local/test_patches.py::test_batch_refuses_arrays_over_ten_thousand_and_requests_over_30_kib"),
    Rule("batch:SubmitJob", f"`timeout.attemptDurationSeconds` under {MIN_TIMEOUT_SECONDS}",
         "`ClientException`", _BATCH_API + "API_JobTimeout.html",
         _TESTS + "test_timeouts_under_a_minute_are_refused"),
    Rule("batch:RegisterJobDefinition", f"`timeout.attemptDurationSeconds` under {MIN_TIMEOUT_SECONDS}",
         "`ClientException`", _BATCH_API + "API_JobTimeout.html",
         _TESTS + "test_timeouts_under_a_minute_are_refused"),
    Rule("batch:SubmitJob", f"container overrides with an environment name starting `{RESERVED_ENV_PREFIX}`, "
         f"a `VCPU` that is not a whole number >= 1, a `MEMORY` under {MIN_MEMORY_MIB} MiB",
         "`ClientException`",
         _BATCH_API + "API_KeyValuePair.html; " + _BATCH_API + "API_ResourceRequirement.html",
         _TESTS + "test_container_overrides_batch_refuses_are_refused"),
    Rule("batch:SubmitJob", "a job whose vCPUs and memory fit no instance type of its queue's compute "
         "environments (or more vCPUs than their `maxvCpus`): on AWS it stays `RUNNABLE` until the queue's "
         "`JobStateTimeLimitActions` cancel it, for ever without them",
         f"the job fails at once: `{CANCELLED_PREFIX}{JOB_RESOURCE_REQUIREMENT}` "
         f"(or `{COMPUTE_ENVIRONMENT_MAX_RESOURCE}`) and what did not fit",
         "https://docs.aws.amazon.com/batch/latest/userguide/troubleshooting.html#job_stuck_in_runnable",
         _TESTS + "test_a_job_no_instance_type_can_hold_fails_with_the_reason"),
    Rule("batch:SubmitJob", "a container over its `MEMORY`", "exit 137, "
         "`OutOfMemoryError: Container killed due to memory usage` (`localcloud/memory.py`)",
         _BATCH_API + "API_ResourceRequirement.html",
         "tests/local/test_memory.py"),
    Rule("states:StartExecution", f"an execution input over {limits.SFN_PAYLOAD.value:,} bytes",
         "`ValidationException` (patch `aws-limits`)", limits.SFN_PAYLOAD.source,
         "tests/local/test_patches.py::test_step_functions_refuses_an_execution_input_over_the_limit"),
    Rule("states:StartExecution", f"a state's input or output over {limits.SFN_PAYLOAD.value:,} bytes",
         "`States.DataLimitExceeded`, which `States.ALL` does not catch (patch `aws-limits`)",
         limits.SFN_PAYLOAD.source,
         "tests/local/test_patches.py::test_data_limit_is_caught_only_when_named"),
    Rule("lambda:InvokeFunction", f"a request over {limits.LAMBDA_SYNC_REQUEST.value:,} bytes "
         f"(synchronous) or {limits.LAMBDA_ASYNC_REQUEST.value:,} (asynchronous)",
         "`RequestEntityTooLargeException` (patch `aws-limits`)", limits.LAMBDA_SYNC_REQUEST.source,
         "tests/local/test_patches.py::test_lambda_refuses_requests_over_its_limits"),
    Rule("lambda:InvokeFunction", f"a response over {limits.LAMBDA_RESPONSE.value:,} bytes",
         "`Function.ResponseSizeTooLarge` (patch `aws-limits`)", limits.LAMBDA_RESPONSE.source,
         "tests/local/test_patches.py::test_lambda_response_over_the_limit_is_a_function_error"),
    Rule("lambda:InvokeFunction", "a function over its `MemorySize`",
         "`Runtime.OutOfMemory` (`localcloud/memory.py`)",
         "https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html",
         "tests/local/test_memory.py"),
)


# ---------------------------------------------------------------- instance types
def instance_types() -> dict[str, tuple[int, int]]:
    """Every instance type of :mod:`.instances` -> (vCPUs, installed memory MiB)."""
    return {t.name: (t.vcpus, t.memory_mib) for t in instances.instance_types().values()}


def expand(instance_types_given: Iterable[str]) -> list[str]:
    """A compute environment's ``instanceTypes`` as instance types: a family is all its sizes, ``optimal``
    the families Batch picks from."""
    return [t.name for t in _expand(instance_types_given)]


def _expand(instance_types_given: Iterable[str]) -> list[instances.InstanceType]:
    names = [f for given in instance_types_given for f in (OPTIMAL_FAMILIES if given == "optimal" else (given,))]
    return instances.expand(names)


# ---------------------------------------------------------------- the checks
def _resources(requirements: Iterable[dict[str, Any]] | None) -> dict[str, str]:
    return {str(r.get("type", "")).upper(): str(r.get("value", "")) for r in requirements or []}


def check_timeout(timeout: dict[str, Any] | None) -> None:
    seconds = (timeout or {}).get("attemptDurationSeconds")
    if seconds is not None and int(seconds) < MIN_TIMEOUT_SECONDS:
        raise ClientException(
            f"timeout.attemptDurationSeconds {seconds} is under the minimum of {MIN_TIMEOUT_SECONDS} seconds"
        )


def check_container_overrides(overrides: dict[str, Any] | None) -> None:
    overrides = overrides or {}
    for variable in overrides.get("environment") or []:
        name = str(variable.get("name", ""))
        if name.startswith(RESERVED_ENV_PREFIX):
            raise ClientException(
                f"Environment variable {name}: names starting with {RESERVED_ENV_PREFIX} are reserved for "
                "variables that Batch sets"
            )
    asked = _resources(overrides.get("resourceRequirements"))
    if "VCPU" in asked and not (asked["VCPU"].isdigit() and int(asked["VCPU"]) >= 1):
        raise ClientException(f"VCPU {asked['VCPU']!r}: jobs on EC2 take a whole number of vCPUs, at least 1")
    if "MEMORY" in asked and not (asked["MEMORY"].isdigit() and int(asked["MEMORY"]) >= MIN_MEMORY_MIB):
        raise ClientException(f"MEMORY {asked['MEMORY']!r}: at least {MIN_MEMORY_MIB} MiB")


def check_fair_share(queue: Any, job_definition: Any, body: dict[str, Any]) -> None:
    """A queue with a scheduling policy takes a job only with a share identifier and a priority."""
    if queue is None or not getattr(queue, "schedule_policy", None):
        return
    if not body.get("shareIdentifier"):
        raise ClientException(NO_SHARE_IDENTIFIER)
    if body.get("schedulingPriorityOverride") is None and scheduling_priority(job_definition) is None:
        raise ClientException(NO_SCHEDULING_PRIORITY)


def scheduling_priority(job_definition: Any) -> int | None:
    value = getattr(job_definition, "localcloud_scheduling_priority", None)
    return None if value is None else int(value)


def job_resources(job: Any) -> tuple[int, int]:
    """A job's (vCPUs, memory MiB): the job definition's, the submit-time overrides winning."""
    props = job.job_definition.container_properties or {}
    given = {"VCPU": str(props.get("vcpus") or 1), "MEMORY": str(props.get("memory") or 0)}
    given.update(_resources(props.get("resourceRequirements")))
    given.update(_resources((job.container_overrides or {}).get("resourceRequirements")))
    return int(float(given["VCPU"])), int(float(given["MEMORY"]))


@functools.cache
def _sizes(given: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """The (vCPUs, memory MiB Batch gives jobs) of a compute environment's instance types, once per list (an
    array of 10,000 children asks 10,000 times)."""
    return tuple(sorted({(t.vcpus, t.job_memory_mib) for t in _expand(given)}))


def unschedulable(job: Any) -> str | None:
    """The status reason a job gets on AWS when no compute environment of its queue can ever run it (None if
    one can): its vCPUs and memory fit no instance type, or its vCPUs exceed every ``maxvCpus``."""
    vcpus, memory_mib = job_resources(job)
    environments = list(getattr(job.job_queue, "environments", None) or [])
    if not environments:
        return None
    fits_instance = fits_max = False
    largest: tuple[int, int] = (0, 0)
    for environment in environments:
        resources = getattr(environment, "compute_resources", None) or {}
        sizes = _sizes(tuple(resources.get("instanceTypes") or []))
        if not sizes:  # unmanaged, or types moto does not know: nothing to say
            return None
        largest = max([largest, *sizes])
        if any(v >= vcpus and m >= memory_mib for v, m in sizes):
            fits_instance = True
            if int(resources.get("maxvCpus") or 0) >= vcpus:
                fits_max = True
    if not fits_instance:
        return (f"{CANCELLED_PREFIX}{JOB_RESOURCE_REQUIREMENT} (local cloud: {vcpus} vCPUs and {memory_mib} MiB "
                f"fit no instance type of the compute environments; their largest has {largest[0]} vCPUs and "
                f"{largest[1]} MiB)")
    if not fits_max:
        return (f"{CANCELLED_PREFIX}{COMPUTE_ENVIRONMENT_MAX_RESOURCE} (local cloud: {vcpus} vCPUs exceed the "
                "compute environments' maxvCpus)")
    return None


# ---------------------------------------------------------------- what moto's handlers call
# The handlers are wrapped once, in the moto patch registry (patch ``batch-service-rules`` of
# :mod:`.patches`, which also checks the request's size): these are the checks they run.
def check_submit(backend: Any, body: dict[str, Any]) -> None:
    """A ``SubmitJob`` request's body (camelCase, as Batch takes it) against the rules above."""
    check_timeout(body.get("timeout"))
    check_container_overrides(body.get("containerOverrides"))
    queue = backend.get_job_queue(str(body.get("jobQueue", "")))
    job_definition = backend.get_job_definition(str(body.get("jobDefinition", "")))
    check_fair_share(queue, job_definition, body)


def check_register(body: dict[str, Any]) -> None:
    """A ``RegisterJobDefinition`` request's body against the rules above."""
    check_timeout(body.get("timeout"))


def keep_scheduling_priority(backend: Any, answer: str, body: dict[str, Any]) -> None:
    """moto drops a job definition's ``schedulingPriority``: kept on moto's job definition that ``answer`` (moto's
    response to the registration) names, for :func:`check_fair_share`."""
    made = backend.get_job_definition(json.loads(answer)["jobDefinitionArn"])
    if made is not None:
        made.localcloud_scheduling_priority = body.get("schedulingPriority")


# ---------------------------------------------------------------- the table in docs/LOCAL_CLOUD.md
TABLE_BEGIN = "<!-- BEGIN GENERATED rules table: python -m localcloud.rules -->"
TABLE_END = "<!-- END GENERATED rules table -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def granted_actions(template: dict[str, Any]) -> list[str]:
    """Every IAM action the template's roles and policies grant: the calls the app's functions, jobs, state
    machine and lab users make (SAM's ``LambdaInvokePolicy`` is ``lambda:InvokeFunction``)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("Effect") == "Deny":  # a guard (TLS only, say), not a call
                return
            for key, value in node.items():
                if key == "AssumeRolePolicyDocument":  # who may take a role, not what it calls
                    continue
                if key == "Action":
                    for action in value if isinstance(value, list) else [value]:
                        if isinstance(action, str) and re.fullmatch(r"[a-z0-9-]+:[A-Za-z]+", action):
                            found.add(action)
                elif key == "LambdaInvokePolicy":
                    found.add("lambda:InvokeFunction")
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(template.get("Resources", {}))
    return sorted(found, key=str.lower)


def table(template: dict[str, Any]) -> str:
    """The markdown between the markers: the rules, then every call of the app with no rule."""
    lines = ["| call | AWS refuses | the local cloud answers | source | test |", "|---|---|---|---|---|"]
    lines += [f"| `{r.action}` | {_cell(r.refuses)} | {_cell(r.answer)} | {_cell(r.source)} | `{r.test}` |"
              for r in RULES]
    ruled = {r.action for r in RULES}
    unruled = [a for a in granted_actions(template) if a not in ruled]
    lines += ["", "Calls the app makes (the actions `template.yaml` grants) with no rule of their own here: moto's "
              "checks of the request's shape (botocore's model) only: " + ", ".join(f"`{a}`" for a in unruled) + "."]
    return "\n".join([TABLE_BEGIN, *lines, TABLE_END])


def render(doc: str, template: dict[str, Any]) -> str:
    start, stop = doc.index(TABLE_BEGIN), doc.index(TABLE_END) + len(TABLE_END)
    return doc[:start] + table(template) + doc[stop:]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the table in docs/LOCAL_CLOUD.md (``--check``: exit 1 if it is out of date)."""
    import sys

    from localcloud.packaging import load_template

    args = sys.argv[1:] if argv is None else argv
    root = Path.cwd()  # the docs live in a checkout only: run from its root
    doc_path = root / "docs" / "LOCAL_CLOUD.md"
    doc = doc_path.read_text()
    new = render(doc, load_template(root / "template.yaml"))
    if "--check" in args:
        if new != doc:
            print(f"{doc_path}: the rules table is out of date: python -m localcloud.rules", file=sys.stderr)
            return 1
        return 0
    doc_path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
