"""The local cloud: the whole app on one machine, with no AWS account and no Docker.

``template.yaml`` is packaged offline (:mod:`.packaging`), translated from SAM to CloudFormation by
aws-sam-translator (:mod:`.translate`) and created in moto by a small deployer (:mod:`.deployer`).
moto runs in this process as a threaded HTTP server on a free loopback port, so Lambda handlers and
Batch children, each a separate OS process, reach it through ``AWS_ENDPOINT_URL``. What moto does not
do is added by small, version-pinned patches (:mod:`.patches`) that call back into the runners
(:mod:`.hooks`): :mod:`.lambdas` (a fresh process per invocation), :mod:`.batch` (a process per child,
``--jobs`` at a time, the job definition's retry strategy), both started by one :mod:`.launcher`,
:mod:`.events` (EventBridge -> Lambda / Step Functions) and :mod:`.athena` (DuckDB over the registered
partitions). :mod:`.state` keeps objects, the catalog and the run history in one folder between
processes (:mod:`.mirror`); :mod:`.cloud` puts it together, one module per job.

It imports nothing of seqlake (``scripts/import_rules.py`` holds it to that): what it must know of the app it
runs (the worker's entry point, what to preload, the bucket layout, the faults a test gives) is a
:class:`.contract.App` that the app's adapter (``seqlake.local.adapter``) gives it; the ``seqlake local ...``
commands and the demo are the adapter's (``seqlake.local.commands``), and so is finding the app's template (a
checkout, the wheel's copy, or a folder the app's own setting names).

Faithful: the real template (resources, names, environment, parameters), the real state machine with
its Retry/Catch, the real handlers and worker entry point, S3 -> EventBridge rule matching (wildcards),
Batch array semantics (size 2..10,000, per-child attempts, ``evaluateOnExit``, attempt timeouts, Spot
reclaims as ``Host EC2 (instance ...) terminated.``), Glue partitions, Athena named queries.

Not emulated: IAM enforcement (policies are created, never checked), KMS, VPC networking, Lambda
reserved concurrency and memory limits, dead-letter queues of EventBridge rules, container images
(the worker runs with this interpreter), CloudWatch Logs (each Lambda invocation and Batch attempt
writes a file under ``<state>/logs/`` instead), X-Ray. Two processes must not use one state folder at
the same time.
"""
