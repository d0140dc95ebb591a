"""The local cloud: the whole app on one machine, with no AWS account and no Docker.

``template.yaml`` is packaged offline (:mod:`.packaging`), translated from SAM to CloudFormation by
aws-sam-translator (:mod:`.translate`) and created in moto by a small deployer (:mod:`.deployer`).
moto runs in this process as a threaded HTTP server, so Lambda handlers and Batch children, each a
separate OS process, reach it through ``AWS_ENDPOINT_URL``. What moto does not do is added by small,
version-pinned patches (:mod:`.patches`) that call back into the runners: :mod:`.lambdas`,
:mod:`.batch`, :mod:`.events` and :mod:`.athena`. :mod:`.state` keeps results between processes.
"""
