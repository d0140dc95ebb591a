"""The local cloud's IAM policy evaluation (``localcloud/policy.py``): AWS's rules, on the template's own policies."""

from __future__ import annotations

from typing import Any

from localcloud.policy import conditions_met, denied_message, evaluate, wildcard_match

BUCKET = "arn:aws:s3:::data"
ROLE = "arn:aws:iam::123456789012:role/worker"
SESSION = "arn:aws:sts::123456789012:assumed-role/worker/s"
TLS = {"aws:securetransport": ["true"]}
#: the template's TLS-only bucket policy (DataBucketPolicy), resolved
TLS_ONLY = {
    "Statement": [{
        "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
        "Resource": [BUCKET, f"{BUCKET}/*"], "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }]
}
WORKER = {
    "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{BUCKET}/incoming/*", f"{BUCKET}/runs/*"]},
        {"Effect": "Allow", "Action": ["s3:PutObject"], "Resource": f"{BUCKET}/runs/*"},
        {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": BUCKET,
         "Condition": {"StringLike": {"s3:prefix": ["incoming/*", "runs/*"]}}},
    ]
}


def decide(action: str, resource: str, context: dict[str, list[str]] | None = None,
           policies: Any = (WORKER,), bucket_policy: Any = TLS_ONLY) -> Any:
    return evaluate(
        caller=SESSION, action=action, resources=[resource], context={**TLS, **(context or {})},
        identity=policies, resource_policies={BUCKET: [bucket_policy]},
        role_arn=ROLE,
    )


def test_an_allow_on_the_resource_allows_and_nothing_else_does() -> None:
    assert decide("s3:GetObject", f"{BUCKET}/incoming/a.fastq.gz").allowed
    assert decide("s3:PutObject", f"{BUCKET}/runs/r/x.parquet").allowed
    refused = decide("s3:PutObject", f"{BUCKET}/incoming/a.fastq.gz")
    assert not refused.allowed
    assert refused.why == "because no identity-based policy allows the s3:PutObject action"
    assert not decide("s3:DeleteObject", f"{BUCKET}/runs/r/x.parquet").allowed


def test_actions_match_without_case_and_resources_with_it() -> None:
    assert decide("S3:getobject", f"{BUCKET}/incoming/a").allowed
    assert not decide("s3:GetObject", f"{BUCKET}/Incoming/a").allowed
    assert wildcard_match("arn:*:s3:::b/*", "arn:aws:s3:::b/x/y")
    assert wildcard_match("arn:aws:s3:::b/runs/?/status.json", "arn:aws:s3:::b/runs/7/status.json")
    assert not wildcard_match("arn:aws:s3:::b/runs/?/status.json", "arn:aws:s3:::b/runs/77/status.json")
    assert not wildcard_match("arn:aws:s3:::b[1]", "arn:aws:s3:::b1")  # no character classes in IAM


def test_the_prefix_condition_limits_a_listing() -> None:
    assert decide("s3:ListBucket", BUCKET, {"s3:prefix": ["runs/r/staging/"]}).allowed
    assert not decide("s3:ListBucket", BUCKET, {"s3:prefix": ["results/"]}).allowed
    assert not decide("s3:ListBucket", BUCKET).allowed  # a listing without a prefix: the key is absent


def test_the_tls_only_bucket_policy_denies_plain_http_even_to_an_allowed_caller() -> None:
    insecure = decide("s3:GetObject", f"{BUCKET}/incoming/a", {"aws:securetransport": ["false"]})
    assert not insecure.allowed
    assert insecure.why == "with an explicit deny in a resource-based policy"
    assert decide("s3:GetObject", f"{BUCKET}/incoming/a").allowed


def test_every_resource_of_a_request_must_be_allowed() -> None:
    glue = {"Statement": [{"Effect": "Allow", "Action": "glue:BatchCreatePartition", "Resource": [
        "arn:aws:glue:r:1:catalog", "arn:aws:glue:r:1:database/db", "arn:aws:glue:r:1:table/db/runs"]}]}
    touched = ["arn:aws:glue:r:1:catalog", "arn:aws:glue:r:1:database/db"]
    ok = evaluate(caller=SESSION, action="glue:BatchCreatePartition", context=TLS, identity=[glue],
                  resources=[*touched, "arn:aws:glue:r:1:table/db/runs"])
    assert ok.allowed
    refused = evaluate(caller=SESSION, action="glue:BatchCreatePartition", context=TLS, identity=[glue],
                       resources=[*touched, "arn:aws:glue:r:1:table/db/sample_summary"])
    assert (refused.allowed, refused.resource) == (False, "arn:aws:glue:r:1:table/db/sample_summary")


def test_an_explicit_deny_wins_over_an_allow() -> None:
    deny = {"Statement": [{"Effect": "Deny", "Action": "s3:*", "Resource": f"{BUCKET}/incoming/*"}]}
    refused = decide("s3:GetObject", f"{BUCKET}/incoming/a", policies=(WORKER, deny))
    assert (refused.allowed, refused.why) == (False, "with an explicit deny in an identity-based policy")


def test_a_service_principal_needs_the_resource_policy_and_its_source_condition() -> None:
    queue = "arn:aws:sqs:us-east-1:1:dlq"
    rule = "arn:aws:events:us-east-1:1:rule/start"
    policy = {"Statement": [
        {"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
         "Resource": queue, "Condition": {"ArnEquals": {"aws:SourceArn": rule}}},
        {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": queue,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    ]}

    def send(caller: str, source: str) -> bool:
        return evaluate(caller=caller, action="sqs:SendMessage", resources=[queue],
                        context={**TLS, "aws:sourcearn": [source]}, resource_policies={queue: [policy]}).allowed

    assert send("events.amazonaws.com", rule)
    assert not send("events.amazonaws.com", "arn:aws:events:us-east-1:1:rule/another")
    assert not send("sns.amazonaws.com", rule)


def test_condition_operators_and_missing_keys() -> None:
    assert conditions_met({"StringEquals": {"k": ["a", "b"]}}, {"k": ["b"]})
    assert not conditions_met({"StringEquals": {"k": "a"}}, {})
    assert conditions_met({"StringEqualsIfExists": {"k": "a"}}, {})
    assert conditions_met({"StringNotLike": {"k": "a*"}}, {"k": ["ba"]})
    assert not conditions_met({"StringNotLike": {"k": "a*"}}, {"k": ["ab"]})
    assert conditions_met({"ArnLike": {"AWS:SourceArn": "arn:aws:events:*:1:rule/*"}},
                          {"aws:sourcearn": ["arn:aws:events:r:1:rule/x"]})


def test_the_message_is_aws_s() -> None:
    refused = decide("s3:PutObject", f"{BUCKET}/incoming/a")
    assert denied_message(SESSION, "s3:PutObject", refused) == (
        f"User: {SESSION} is not authorized to perform: s3:PutObject on resource: {BUCKET}/incoming/a "
        "because no identity-based policy allows the s3:PutObject action"
    )
