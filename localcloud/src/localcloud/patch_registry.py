"""Every moto patch of the local cloud in one table: what it replaces, why, where AWS documents the behaviour it
restores, moto's own issue or pull request, the test that fails without it, and the probe that says whether
moto still needs it.

This module imports neither moto nor the rest of the local cloud: ``make moto-check`` reads it (and
:mod:`.moto_probes`) from a scratch virtualenv holding the newest moto on PyPI, where :mod:`.patches` would
refuse to import. The patches themselves live in :mod:`.patches`, keyed by the same ids.

Kinds of patch:

- ``moto``: moto answers otherwise than AWS (or far slower than it must): a bug of moto's own, with its
  ready-to-send upstream report here (``docs/moto-upstream.md`` is generated from it);
- ``emulator``: the local cloud puts its own behaviour where moto has none by design (running a Lambda's
  handler, a Batch child, an Athena query): not moto's bug, never sent upstream, kept while the probe finds
  moto's stand-in behaviour;
- ``speed``: moto answers right but costs the local cloud's one interpreter per request what a run of 10,000
  children cannot pay; reported upstream as a performance issue where the cost is moto's (not the local
  server's own short cut, ``s3-direct-get``).

A patch is switched off for one process by naming it in ``LOCALCLOUD_MOTO_PATCHES_OFF`` (comma-separated ids):
only ``tests/local/test_patch_registry.py`` does, to show that each patch's test fails without it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: ids of patches :func:`localcloud.patches.apply_all` leaves out in this process (a test's switch)
DISABLED_VAR = "LOCALCLOUD_MOTO_PATCHES_OFF"
#: the test module whose tests the registry names
TESTS = "tests/local/test_patches.py"


@dataclass(frozen=True)
class Patch:
    #: stable name (the key of :data:`localcloud.patches.PATCHES`); never renumbered
    id: str
    kind: str  # "moto" | "emulator" | "speed"
    #: moto's functions (or module attributes) the patch replaces, as ``module:Class.attribute``
    replaces: tuple[str, ...]
    #: what AWS does that moto does not (or what the local cloud adds), in a sentence or two
    why: str
    #: where AWS documents that behaviour (or, for a speed patch, where the cost was measured)
    source: str
    #: moto's issue or pull request about it ("" when none was found: then :attr:`report` is ready to file)
    upstream: str
    #: tests of :data:`TESTS` that fail with this patch off (``tests/local/test_patch_registry.py`` shows it)
    tests: tuple[str, ...]
    #: the ready-to-send upstream report (title, then body) for kinds "moto" and "speed"; "" for "emulator"
    report: str = ""


PATCHES: tuple[Patch, ...] = (
    Patch(
        id="sfn-normalisation", kind="moto",
        replaces=("moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service:"
                  "StateTaskService._normalise_parameters",
                  "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service:"
                  "StateTaskService._normalise_response"),
        why="Step Functions passes a service integration's PascalCase Parameters to the service API (SubmitJob's "
            "JobName as jobName). moto's interpreter (ported from LocalStack) stubs the normalisation, so "
            "batch:submitJob fails with States.Runtime (cause 'JobName'), and its responses keep datetime "
            "objects that break DescribeExecution.",
        source="https://docs.aws.amazon.com/step-functions/latest/dg/connect-batch.html",
        upstream="",
        tests=("test_sfn_batch_sync_integration_and_athena",),
        report="""\
Step Functions: service integrations (e.g. arn:aws:states:::batch:submitJob.sync) fail with States.Runtime

moto 5.2.6 (and 5.2.5). `StateTaskService._normalise_parameters` and `_normalise_response` are no-ops in moto's copy of
the LocalStack interpreter, so a Task state `arn:aws:states:::batch:submitJob.sync` with
`Parameters: {"JobName": "x", "JobQueue": "...", "JobDefinition": "..."}` calls `submit_job(JobName=...)`
with PascalCase keys and the execution fails with `States.Runtime`, cause `'JobName'`. On AWS the
parameters are the API's members (https://docs.aws.amazon.com/step-functions/latest/dg/connect-batch.html).
Expected: the Pascal-to-camel conversion LocalStack does (botocore's operation model's input shape), and
datetimes in the integration's response rendered as strings (DescribeExecution otherwise fails to
serialise them). A fix that works here: look up botocore's operation model for (service, action) and call
the existing `_to_boto_request` / `_from_boto_response` with its input/output shape.
"""),
    Patch(
        id="s3-ranged-get", kind="moto",
        replaces=("moto.s3.models:FakeKey.value", "moto.s3.responses:S3Response.get_object",
                  "moto.s3.responses:S3Response._handle_range_header"),
        why="A ranged GET costs S3 the range. moto reads the whole object into memory and slices it, so a "
            "shard's 8 MiB read of a 300 MB object copied 300 MB; here the range is read from the key's buffer "
            "and a range over 1 MiB is streamed a MiB at a time.",
        source="https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html#API_GetObject_RequestSyntax",
        upstream="",
        tests=("test_s3_ranged_get_reads_only_the_range",),
        report="""\
S3: a ranged GetObject reads the whole object into memory

moto 5.2.6 (and 5.2.5). `S3Response.get_object` takes `key.value` (the whole body as bytes, read from the key's
SpooledTemporaryFile) and `_handle_range_header` slices it, so `get_object(Range="bytes=0-999")` of a
300 MB object reads and copies 300 MB. Its cost grows with the object, not the range; many ranged reads of a
large object (a reader seeking through it) are quadratic. Expected: read only the range from the key's
buffer (seek + read), and stream a large body rather than materialise it
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html). Reproduce: put a 100 MB object and
time 100 GETs of `bytes=0-9`.
"""),
    Patch(
        id="s3-spooled-bodies", kind="moto",
        replaces=("moto.s3.models:FakeMultipart.complete", "moto.s3.models:S3Backend.complete_multipart_upload",
                  "moto.s3.models:S3Backend.copy_object", "moto.s3.models:S3Backend.upload_part_copy",
                  "moto.s3.models:FakeKey.value (setter)", "moto.s3.responses:S3Response.key_response"),
        why="S3 holds objects of up to 5 TB. moto joins a multipart upload's parts in memory (the object about "
            "three times), reads a copy's source whole, keeps each request body alive in a reference cycle "
            "until a garbage collection, and lets a repeated CompleteMultipartUpload race the first (HTTP 500): "
            "a 634 MB index upload grew the process by 2.4 GB. Here the parts and copies go through a spool a "
            "MiB at a time and a repeated complete gets the object, as on AWS.",
        source="https://docs.aws.amazon.com/AmazonS3/latest/API/API_CompleteMultipartUpload.html",
        upstream="https://github.com/getmoto/moto/pull/7437",
        tests=("test_s3_bodies_stay_on_disk", "test_s3_copies_stay_on_disk",
               "test_a_repeated_complete_waits_and_gets_the_object"),
        report="""\
S3: CompleteMultipartUpload and copies hold whole objects in memory; a repeated complete fails with 500

moto 5.2.6 (and 5.2.5). `FakeMultipart.complete` joins every part into one bytes object (then the key copies it and the
checksum reads it again), so completing a 600 MB upload takes ~1.8 GB; `copy_object` and
`upload_part_copy` read the source's whole value and slice it. A client whose CompleteMultipartUpload
times out sends it again (botocore retries) while the first still joins: the second reads parts the first
has closed and gets HTTP 500. On AWS a repeated complete of a completed upload returns the object
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_CompleteMultipartUpload.html). Expected: copy parts
into the new key's SpooledTemporaryFile a chunk at a time (checksums updated as they pass), and serialise
completes per upload id. Related refactoring: https://github.com/getmoto/moto/pull/7437.
"""),
    Patch(
        id="lambda-invoke", kind="emulator",
        replaces=("moto.awslambda_simple.models:LambdaSimpleBackend.invoke",),
        why="Lambda runs the function's handler. moto without Docker echoes the payload; here the local cloud "
            "runs the real handler in a process of its own (Hooks.lambda_invoke), with Lambda's request and "
            "response size limits.",
        source="https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html",
        upstream="",
        tests=("test_lambda_invoke_runs_the_real_handler",)),
    Patch(
        id="batch-submit", kind="emulator",
        replaces=("moto.batch_simple.models:BatchSimpleBackend.submit_job",),
        why="Batch runs a job's container and refuses an array size outside 2..10,000. moto without Docker "
            "marks every job SUCCEEDED at once and accepts an array of one; here the local cloud runs each "
            "child (Hooks.batch_run) and refuses the sizes AWS refuses.",
        source="https://docs.aws.amazon.com/batch/latest/APIReference/API_ArrayProperties.html",
        upstream="",
        tests=("test_batch_submit_runs_children_and_refuses_array_of_one",)),
    Patch(
        id="event-targets", kind="emulator",
        replaces=("moto.events.models:Rule.send_to_targets",),
        why="EventBridge delivers to Step Functions and Lambda targets as the target's principal allows. The "
            "local cloud delivers them itself (Hooks.deliver: an execution started, an asynchronous "
            "invocation with its retries and dead-letter queue, the Lambda permission checked). A scheduled "
            "rule (CompactFunction's) matches no event (moto's empty pattern matched every one: each upload "
            "started a compaction) and is never fired locally; a disabled rule delivers nothing.",
        source="https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-targets.html",
        upstream="https://github.com/getmoto/moto/issues/8452",
        tests=("test_event_rule_delivers_only_matching_uploads",
               "test_a_scheduled_or_disabled_rule_is_delivered_no_event")),
    Patch(
        id="athena-results", kind="emulator",
        replaces=("moto.athena.models:AthenaBackend._store_predefined_query_results",),
        why="Athena answers the SQL. moto returns no rows (or rows queued in advance); here DuckDB answers over "
            "the registered partitions' Parquet files (Hooks.athena_query).",
        source="https://docs.aws.amazon.com/athena/latest/APIReference/API_GetQueryResults.html",
        upstream="",
        tests=("test_sfn_batch_sync_integration_and_athena",)),
    Patch(
        id="sync-wait", kind="emulator",
        replaces=("moto.stepfunctions.parser.asl.component.state.exec.state_task.service."
                  "state_task_service_callback:time",),
        why="A .sync task waits for its job. moto's interpreter polls DescribeJobs every 0.5 s through HTTP, on "
            "the cores the children need; here the wait sleeps until the Batch runner says a job changed.",
        source="https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html#connect-sync",
        upstream="",
        tests=("test_sync_wait_is_woken_by_batch_and_never_misses_a_wake",)),
    Patch(
        id="server-lookups", kind="speed",
        replaces=("moto.backends:list_of_moto_modules", "moto.core.utils:create_loader",
                  "moto.moto_server.werkzeug_app:DomainDispatcherApplication.get_backend_for_host",
                  "moto.core.base_backend:BackendDict.__getitem__",
                  "moto.moto_server.werkzeug_app:DISABLE_GLOBAL_CORS"),
        why="moto's server repeats per request what is fixed once it runs: it lists its package folder (~180 "
            "isdir calls), makes a new botocore model loader, matches the host against ~180 URL patterns, "
            "compares every service's backends as dictionaries on each backend lookup, and adds CORS headers.",
        source="docs/LOCAL_CLOUD.md, the section on its overhead over the app run without it (measured with "
               "getrusage per process)",
        upstream="",
        tests=("test_server_lookups_list_moto_once_and_keep_one_loader",
               "test_server_lookups_match_a_host_once_and_find_registered_backends_at_once"),
        report="""\
Server mode: per-request work that could be done once (module listing, loader, host match, backend lookup)

moto 5.2.6 (and 5.2.5), ThreadedMotoServer. Each request: `DomainDispatcherApplication.get_backend_for_host` calls
`list_of_moto_modules()` (an `os.listdir` of moto's package and ~180 `isdir`), then matches the host against
every service's URL patterns in turn; every service model load calls `create_loader()`, which scans
botocore's data folders again; `BackendDict.__getitem__` compares the service's backends with every other
registered service's (dict equality) to decide whether to register them for a reset. In a server answering
thousands of small requests this is a few ms of CPU each. Suggested: cache the module list and the loader
(functools.cache), memoise host -> service, and return an already-registered account's backends directly.
"""),
    Patch(
        id="aws-limits", kind="moto",
        replaces=("moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task:"
                  "StateTask._eval_parameters",
                  "moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda:"
                  "StateTaskLambda._eval_parameters",
                  "moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl:"
                  "ErrorEqualsDecl._eval_body",
                  "moto.stepfunctions.parser.models:StepFunctionsParserBackend.start_execution"),
        why="AWS refuses an execution input over 262,144 bytes and fails a Task whose input after Parameters is "
            "over it with States.DataLimitExceeded (which States.ALL does not catch); Lambda refuses requests "
            "over 6 MB / 1 MB. moto holds none of these (Batch's SubmitJob size: batch-service-rules).",
        source="https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html",
        upstream="",
        tests=("test_step_functions_refuses_an_execution_input_over_the_limit",
               "test_data_limit_is_caught_only_when_named"),
        report="""\
Step Functions: payload limits not enforced (execution input, task input)

moto 5.2.6 (and 5.2.5). `start_execution` accepts an input of any size; AWS refuses one over 262,144 bytes with
ValidationException (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html). A Task
whose input after Parameters exceeds it runs; AWS fails it with States.DataLimitExceeded, which a
`States.ALL` Catch does not catch (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html).
Reproduce: start an execution with
`json.dumps({"pad": "x" * 300_000})` as input: it starts.
"""),
    Patch(
        id="s3-latency", kind="emulator",
        replaces=("moto.s3.responses:S3Response.setup_class",),
        why="S3 answers a small request in ~20 ms; moto at once. With the app's latency setting set "
            "(Settings.s3_latency_ms: the scale tests and bench) every S3 request waits that long first, so "
            "round trips cost what a bucket costs.",
        source="https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html",
        upstream="",
        tests=("test_s3_latency_delays_every_request_when_set",)),
    Patch(
        id="batch-describe", kind="moto",
        replaces=("moto.batch.models:Job._get_container_property",),
        why="DescribeJobs leaves a job as it is. moto appends the job definition's environment and "
            "AWS_BATCH_JOB_ID to the job's own containerOverrides on every describe (an array's children share "
            "their parent's), so each description grew: an array of 1,000 children failed with an 89 KB cause.",
        source="https://docs.aws.amazon.com/batch/latest/APIReference/API_DescribeJobs.html",
        upstream="",
        tests=("test_batch_submit_runs_children_and_refuses_array_of_one",),
        report="""\
Batch: DescribeJobs appends the environment to the job's containerOverrides on every call

moto 5.2.6 (and 5.2.5). `Job._get_container_property("environment", ...)` extends
`self.container_overrides["environment"]` in place with the job definition's environment and `AWS_BATCH_JOB_ID`,
so every `describe_jobs` of the same
job returns a longer `container.environment` (duplicates of every variable), and an array job's children,
which share the parent's overrides, grow together. Reproduce: submit a job with
`containerOverrides={"environment": [{"name": "A", "value": "1"}]}`, call `describe_jobs` three times:
`A` appears three times. Expected: describing a job does not change it
(https://docs.aws.amazon.com/batch/latest/APIReference/API_DescribeJobs.html); build the list on a copy.
"""),
    Patch(
        id="iam-authorization", kind="moto",
        replaces=("moto.core.authorization:ActionAuthenticatorMixin._authenticate_and_authorize_action",
                  "moto.iam.access_control:IAMRequestBase._create_aws_request"),
        why="IAM evaluates identity and resource policies against the request's resources, with conditions, and "
            "AccessDenied names caller, action and resource. moto checks identity policies against '*' for most "
            "services, skips most conditions and every resource policy but S3's, signs a GET's headers in "
            "place of its empty body (a Lambda GET always fails its signature check), and since 5.2.6 names S3's "
            "actions by the API operation (ListObjectsV2 for IAM's s3:ListBucket), so no S3 policy matches them.",
        source="https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html",
        upstream="",
        tests=("test_iam_authorization_decides_the_local_servers_requests",
               "test_iam_authorization_sees_a_policy_change_at_once"),
        report="""\
IAM auth: a signed GET without a body fails the signature check; S3 actions named by API operation (5.2.6)

moto 5.2.6 (and 5.2.5) with authentication on (INITIAL_NO_AUTH_ACTION_COUNT reached).
`IAMRequestBase._create_aws_request` builds the request to sign from `self._data` when there is no body; for a
rest-json GET (Lambda's
GetFunction) `_data` holds the parsed parameters/headers, so the signature moto computes is never the
client's and every such request is refused with SignatureDoesNotMatch. Expected: an empty body is signed as
empty, as SigV4 signs it (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html).
Since 5.2.6, `ActionAuthenticatorMixin._authenticate_and_authorize_action` names the action by
`_get_action()`, now the service router's operation name: for S3 that is the API's name (`ListObjectsV2`,
`HeadObject`, `CreateMultipartUpload`), not the IAM action the S3 response sets in `data["Action"]` just before
(`s3:ListBucket`, `s3:GetObject`, `s3:PutObject`; 5.2.5 took that one), so with authentication on a policy
allowing s3:ListBucket no longer allows a listing
(https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
Also: identity policies are checked against resource '*' for every service but S3/SQS/IAM/STS, so a
statement naming an ARN never applies
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
"""),
    Patch(
        id="sfn-credentials", kind="emulator",
        replaces=("moto.stepfunctions.parser.asl.utils.boto_client:boto3",),
        why="A state machine's service integrations run as its role. moto signs them with fixed keys ak/sk; here "
            "with the state machine role's session (Hooks.state_machine_credentials), so IAM decides them.",
        source="https://docs.aws.amazon.com/step-functions/latest/dg/procedure-create-iam-role.html",
        upstream="",
        tests=("test_state_machine_integrations_sign_as_its_role",)),
    Patch(
        id="s3-direct-get", kind="speed",
        replaces=("(none: localcloud.http_server answers a plain GetObject before moto's route)",),
        why="A plain signed GetObject is answered without werkzeug's environ, Flask and moto's dispatch and "
            "serializer (about 3 ms of the server's interpreter each, 20,000 of them for a plan of 10,000 "
            "samples), keeping moto's signature check, the IAM decision, the key's headers and the range cut.",
        source="docs/LOCAL_CLOUD.md#how-it-works (measured: about a third of moto's route's CPU a request)",
        upstream="",
        tests=("test_a_plain_get_object_is_answered_directly_as_moto_answers_it",)),
    Patch(
        id="execution-events", kind="moto",
        replaces=("moto.stepfunctions.parser.backend.execution:BaseExecutionWorkerCommunication.terminated",),
        why="Step Functions puts an 'Execution Status Change' event on the default bus when an execution ends; "
            "moto emits none. Here the end is handed to Hooks.execution_ended, which puts the event (the app's "
            "backstop rule records executions that ended unrecorded from it).",
        source="https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html",
        upstream="",
        tests=("test_an_execution_end_is_put_on_the_default_bus_as_aws_reports_it",),
        report="""\
Step Functions: no "Step Functions Execution Status Change" events on the default event bus

moto 5.2.6 (and 5.2.5). AWS puts an event (source `aws.states`, detail-type `Step Functions Execution Status Change`,
detail with executionArn, stateMachineArn, status, startDate, stopDate, input, output, error, cause) on the
default bus whenever a Standard execution changes status
(https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html). moto emits none, so a
rule on it never fires. Reproduce: a rule with pattern `{"source": ["aws.states"]}` and an SQS target; run
any execution to its end: the queue stays empty. Suggested: put the event from
`BaseExecutionWorkerCommunication.terminated` (SUCCEEDED, FAILED, TIMED_OUT, ABORTED).
"""),
    Patch(
        id="response-enrichment", kind="speed",
        replaces=("moto.core.responses:BaseResponse._enrich_response",
                  "moto.moto_api._internal.moto_random:MotoRandom.get_random_string",
                  "moto.core.responses:method_names_from_class"),
        why="Every response of moto's generic dispatch ran a lookbehind regex over its whole body for a "
            "<RequestId> element (JSON bodies too), drew a request id's 52 characters with 52 choice() calls "
            "and listed the response class's functions with inspect.getmembers: per request, in proportion to "
            "the body's size for the first.",
        source="docs/LOCAL_CLOUD.md, the section on its overhead over the app run without it (a DescribeJobs of an "
               "array job: its cost grew "
               "with the array)",
        upstream="",
        tests=("test_a_response_is_searched_for_its_request_id_element_only_when_it_has_one",
               "test_a_random_string_is_drawn_in_one_call_from_moto_s_generator",
               "test_a_response_class_s_actions_are_listed_once"),
        report="""\
core: per-response regex over JSON bodies, per-character random draws, per-request getmembers

moto 5.2.6 (and 5.2.5). `BaseResponse._enrich_response` runs `re.sub(r"(?<=<RequestId>).*(?=</RequestId>)", ...)` over
every body of the generic dispatch, JSON ones too (which have no such element): a large DescribeJobs or
GetExecutionHistory costs in proportion to its size. `get_random_string` calls `choice` once per character
(52 calls per request id). `method_names_from_class` (inspect.getmembers over the class and its bases) runs
on every request to check the action. Suggested: search only bodies containing "<RequestId>", draw with one
`choices(pool, k=length)` (same seedable generator), and cache the method names per class.
"""),
    Patch(
        id="batch-describe-jobs", kind="moto",
        replaces=("moto.batch.models:BatchBackend.describe_jobs",),
        why="DescribeJobs answers while other requests submit jobs. moto walks the live job table while a "
            "concurrent SubmitJob (another server thread) adds to it: RuntimeError 'dictionary changed size "
            "during iteration', HTTP 500, and a polling .sync execution FAILED before any Catch.",
        source="https://docs.aws.amazon.com/batch/latest/APIReference/API_DescribeJobs.html",
        upstream="",
        tests=("test_describe_jobs_answers_while_another_request_submits_a_job",),
        report="""\
Batch: describe_jobs iterates the live job table; a concurrent submit_job makes it fail (server mode)

moto 5.2.6 (and 5.2.5), ThreadedMotoServer. `BatchBackend.describe_jobs` does
`for key, job in self._jobs.items()` to find the jobs asked for, while `submit_job` on another request thread
inserts into `self._jobs`: the describe
fails with `RuntimeError: dictionary changed size during iteration` (HTTP 500). Step Functions' .sync
integration polls DescribeJobs, so two executions (one submitting, one polling) fail each other
intermittently. Suggested: look each requested job up by id (`self._jobs.get(job_id)`), falling back to an
ARN lookup over a copy of the table; this also makes a poll cost the jobs asked for.
"""),
    Patch(
        id="batch-service-rules", kind="moto",
        replaces=("moto.batch.responses:BatchResponse.submit_job",
                  "moto.batch.responses:BatchResponse.register_job_definition"),
        why="Batch refuses a fair-share queue's job without a share identifier or a scheduling priority, a timeout "
            "under 60 s, container overrides it cannot run, a SubmitJob request over 30 KiB. moto drops "
            "shareIdentifier, schedulingPriorityOverride and a job definition's schedulingPriority and accepts all "
            "of these; no run of the app would have finished on AWS although every local run did (issue 34). The "
            "checks are localcloud.rules' (docs/LOCAL_CLOUD.md's table).",
        source="https://docs.aws.amazon.com/batch/latest/APIReference/API_SubmitJob.html",
        upstream="",
        tests=("test_batch_holds_a_fair_share_queue_to_its_share_identifier_and_priority",
               "test_batch_refuses_arrays_over_ten_thousand_and_requests_over_30_kib"),
        report="""\
Batch: fair-share scheduling fields dropped; SubmitJob without a share identifier or priority accepted

moto 5.2.6 (and 5.2.5). `submit_job` ignores `shareIdentifier` and `schedulingPriorityOverride`, and
`register_job_definition` drops `schedulingPriority`, so none of them appears in DescribeJobs /
DescribeJobDefinitions. A job submitted to a queue with a scheduling policy (fair share) without a share
identifier is accepted; AWS answers `ClientException: shareIdentifier must be specified.`, and without a
priority anywhere `ClientException: Either schedulingPriority in job definition or schedulingPriorityOverride
should be specified.` (https://docs.aws.amazon.com/batch/latest/APIReference/API_SubmitJob.html; the message as
reported in https://github.com/nextflow-io/nextflow/pull/3505). moto also accepts a `timeout.attemptDurationSeconds`
under 60 (https://docs.aws.amazon.com/batch/latest/APIReference/API_JobTimeout.html) and a request over the 30 KiB
job payload limit (https://docs.aws.amazon.com/batch/latest/userguide/service_limits.html). Reproduce: create a
scheduling policy and a queue with it, register a job definition, submit a job without `shareIdentifier`: it
is accepted.
"""),
    Patch(
        id="sfn-batch-parameters", kind="moto",
        replaces=("moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_batch:"
                  "_SUPPORTED_API_PARAM_BINDINGS",),
        why="Step Functions passes a batch:submitJob task every SubmitJob parameter. moto's interpreter filters "
            "them through a short list of its own and drops the rest without a word (ShareIdentifier, "
            "SchedulingPriorityOverride, PropagateTags, EcsPropertiesOverride...), so the state machine's "
            "submission to a fair-share queue lost its share identifier and was refused.",
        source="https://docs.aws.amazon.com/step-functions/latest/dg/connect-batch.html",
        upstream="",
        tests=("test_a_state_machines_submit_job_passes_every_parameter",),
        report="""\
Step Functions: batch:submitJob drops ShareIdentifier, SchedulingPriorityOverride and other SubmitJob parameters

moto 5.2.6 (and 5.2.5). `state_task_service_batch._SUPPORTED_API_PARAM_BINDINGS["submitjob"]` lists ten parameters
(ArrayProperties, ContainerOverrides, DependsOn, JobDefinition, JobName, JobQueue, Parameters, RetryStrategy,
Timeout, Tags); every other parameter of a Task `arn:aws:states:::batch:submitJob(.sync)` is dropped before the
call, silently. Step Functions passes the API's parameters
(https://docs.aws.amazon.com/step-functions/latest/dg/connect-batch.html), so a state machine that submits to a
fair-share queue with `ShareIdentifier` works on AWS. Suggested: take the members of botocore's SubmitJob input
shape. Reproduce: a Task with `"ShareIdentifier": "a"` to a queue with a scheduling policy fails once moto checks
share identifiers (or: the submitted job's `shareIdentifier` is absent).
"""),
    Patch(
        id="glue-version-id", kind="moto",
        replaces=("moto.glue.models:GlueBackend.update_table", "moto.glue.responses:GlueResponse.update_table"),
        why="Glue's UpdateTable with a VersionId succeeds only while that version is the table's current one "
            "(ConcurrentModificationException otherwise): an Iceberg commit through Glue swaps the table's "
            "metadata_location under the version it read. moto ignores VersionId, so two racing commits both "
            "succeed and one run's snapshot is lost (6 runs committed at once: 2 landed).",
        source="https://docs.aws.amazon.com/glue/latest/webapi/API_UpdateTable.html",
        upstream="",
        tests=("test_glue_update_table_is_refused_at_a_version_that_is_not_the_current_one",),
        report="""\
Glue: update_table ignores VersionId (no optimistic concurrency; Iceberg commits through Glue lose snapshots)

moto 5.2.6. `GlueResponse.update_table` drops the request's `VersionId` and `GlueBackend.update_table` replaces the
table whatever version the caller read. On AWS, UpdateTable with a `VersionId` that is not the table's current
version fails with `ConcurrentModificationException`
(https://docs.aws.amazon.com/glue/latest/webapi/API_UpdateTable.html). Iceberg catalogs (pyiceberg's and Iceberg's
GlueCatalog) rely on it for their optimistic commit: with moto, two commits racing on one table both succeed and
the first one's snapshot is lost. Suggested: pass `VersionId` to the backend and compare it with the table's
`_current_version` under a lock before `table.update`.
"""),
)

BY_ID: dict[str, Patch] = {p.id: p for p in PATCHES}


def disabled() -> frozenset[str]:
    """The patch ids this process leaves out (:data:`DISABLED_VAR`); an unknown id is an error, not a no-op."""
    named = frozenset(filter(None, (s.strip() for s in os.environ.get(DISABLED_VAR, "").split(","))))
    unknown = named - BY_ID.keys()
    if unknown:
        raise ValueError(f"{DISABLED_VAR} names no patch: {', '.join(sorted(unknown))}")
    return named


def upstream_reports_markdown() -> str:
    """``docs/moto-upstream.md``: each patch whose bug is moto's own, as a report ready to file."""
    lines = ["# moto: reports ready to send upstream", "",
             "Generated from `localcloud/src/localcloud/patch_registry.py` by `make docs` (do not edit by hand). Each",
             "is a behaviour of moto the local cloud patches (`localcloud/src/localcloud/patches.py`, same id);",
             "`make moto-check` says which are still needed on the newest moto.", ""]
    for p in PATCHES:
        if not p.report:
            continue
        title, _, body = p.report.partition("\n")
        lines += [f"## {p.id}: {title}", "", f"Upstream: {p.upstream or 'none found; to file'}", "",
                  body.strip(), ""]
    return "\n".join(lines)
