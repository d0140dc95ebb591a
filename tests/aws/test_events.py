"""The EventBridge rule's pattern on real-shaped S3 events (moto's matcher), event parsing, run ids."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto.events.models import EventPattern

from seqlake.aws.events import INCOMING, object_from_event, run_id, s3_object
from seqlake.base.naming import FASTQ_SUFFIXES, SAMPLESHEET_NAME, folder_of, kind_of

from .conftest import Resolver, load_event

BUCKET = "seqlake-dev-123456789012-us-east-1"


def rule_pattern(template: dict[str, Any]) -> EventPattern:
    ev = template["Resources"]["StartRunFunction"]["Properties"]["Events"]["InputUploaded"]["Properties"]
    pattern = Resolver(template, {"DataBucket": BUCKET})(ev["Pattern"])
    return EventPattern.load(json.dumps(pattern))


def with_key(key: str, bucket: str = BUCKET) -> dict[str, Any]:
    ev = load_event("s3-object-created-single.json")
    ev["detail"]["object"]["key"] = key
    ev["detail"]["bucket"]["name"] = bucket
    return ev


@pytest.mark.parametrize(
    "name",
    [
        "s3-object-created-single.json",
        "s3-object-created-r1.json",
        "s3-object-created-r2.json",
        "s3-object-created-samplesheet.json",
    ],
)
def test_sample_events_match_the_rule(template: dict[str, Any], name: str) -> None:
    assert rule_pattern(template).matches_event(load_event(name))


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("incoming/a.fastq.gz", True),
        ("incoming/deep/er/a_R1_001.fq.gz", True),
        ("incoming/a.fastq", True),
        ("incoming/b/a.fq", True),
        ("incoming/batch/samplesheet.csv", True),
        # the OR trap: a prefix-only or suffix-only match must not start anything
        ("other/a.fastq.gz", False),
        ("incoming/notes.txt", False),
        ("results/qc_summary/run_id=x/part-0.parquet", False),
        ("runs/x/staging/a.fastq.gz", False),
        ("incoming/samplesheet.csv", False),
        ("incoming/batch/samplesheet.csv.bak", False),
    ],
)
def test_rule_is_prefix_and_suffix(template: dict[str, Any], key: str, expected: bool) -> None:
    assert rule_pattern(template).matches_event(with_key(key)) is expected


def test_rule_ignores_other_buckets_and_events(template: dict[str, Any]) -> None:
    pattern = rule_pattern(template)
    assert not pattern.matches_event(with_key("incoming/a.fastq.gz", bucket="someone-else"))
    deleted = with_key("incoming/a.fastq.gz")
    deleted["detail-type"] = "Object Deleted"
    assert not pattern.matches_event(deleted)


def test_object_from_event() -> None:
    obj = object_from_event(load_event("s3-object-created-r2.json"))
    assert obj == s3_object(BUCKET, "incoming/run42/demo_R2.fastq.gz", "4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b-2", 2991059)
    assert folder_of(obj.key) == "incoming/run42/" and obj.name == "demo_R2.fastq.gz"
    assert kind_of(obj.key) == "fastq" and kind_of("incoming/x/samplesheet.csv") == "samplesheet"
    with pytest.raises(ValueError, match="not an S3 Object Created event"):
        object_from_event({**load_event("s3-object-created-r2.json"), "detail-type": "Object Deleted"})


def test_keys_are_taken_as_spelled() -> None:
    ev = with_key("incoming/my run/résumé+1.fastq.gz")
    assert object_from_event(ev).key == "incoming/my run/résumé+1.fastq.gz"


def test_run_id_is_deterministic_and_content_addressed() -> None:
    r1 = s3_object(BUCKET, "incoming/x_R1.fastq.gz", "aa", 10)
    r2 = s3_object(BUCKET, "incoming/x_R2.fastq.gz", "bb", 10)
    a = run_id("x", [r1, r2])
    assert a == run_id("x", [r2, r1])  # either mate's event computes the same id
    assert a.startswith("x-") and len(a) == len("x-") + 16
    assert a != run_id("x", [r1, s3_object(BUCKET, r2.key, "cc", 10)])  # new content, new run
    assert run_id("a b/c*d" * 20, [r1]).replace("-", "").replace("_", "").isalnum()
    assert len(run_id("n" * 200, [r1])) <= 80


def test_rule_wildcards_are_the_names_naming_accepts(template: dict[str, Any]) -> None:
    """The rule lets through exactly the FASTQ suffixes and the samplesheet name of seqlake.base.naming."""
    ev = template["Resources"]["StartRunFunction"]["Properties"]["Events"]["InputUploaded"]["Properties"]
    wildcards = [w["wildcard"] for w in ev["Pattern"]["detail"]["object"]["key"]]
    assert sorted(wildcards) == sorted(
        [f"{INCOMING}*{suffix}" for suffix in FASTQ_SUFFIXES] + [f"{INCOMING}*/{SAMPLESHEET_NAME}"]
    )
    for suffix in FASTQ_SUFFIXES:
        assert kind_of(f"x{suffix}") == "fastq"
        assert rule_pattern(template).matches_event(with_key(f"incoming/x{suffix}"))
