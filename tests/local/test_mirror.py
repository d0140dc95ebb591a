"""The state folder's objects put back into S3 when a local cloud starts (``mirror.restore``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import boto3
from moto import mock_aws

from localcloud import mirror
from localcloud.state import ObjectMeta, StateDir

MIB = 1024 * 1024


def _multipart_etag(data: bytes, part: int) -> str:
    digests = b"".join(hashlib.md5(data[i:i + part]).digest() for i in range(0, len(data), part))
    return f"{hashlib.md5(digests).hexdigest()}-{-(-len(data) // part)}"


@mock_aws
def test_objects_come_back_streamed_with_the_etags_they_were_saved_with(tmp_path: Path) -> None:
    """An object uploaded in parts (a reference index) is put back in the same parts, so its ETag is the
    saved one; a single PUT's object in one PUT, from its file."""
    state = StateDir(tmp_path)
    bucket = "seqlake-restore"
    bodies = {"reference-indexes/k/index.mmi": bytes(range(256)) * (36 * 4096 + 1),  # 9 MiB + 256: 2 parts
              "references/r/r.fa": b">c\nACGT\n"}
    etags = {"reference-indexes/k/index.mmi": _multipart_etag(bodies["reference-indexes/k/index.mmi"], 8 * MIB),
             "references/r/r.fa": hashlib.md5(bodies["references/r/r.fa"]).hexdigest()}
    for key, body in bodies.items():
        path = state.local_path(bucket, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    state.save_objects({bucket: {k: ObjectMeta(etags[k], len(bodies[k]), body=True) for k in bodies}})
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    mirror.restore(state, lambda name: boto3.client(name, region_name="us-east-1"))
    for key, body in bodies.items():
        got = s3.get_object(Bucket=bucket, Key=key)
        assert (got["ETag"].strip('"'), got["Body"].read()) == (etags[key], body), key


@mock_aws
def test_an_object_the_app_deleted_leaves_the_state_folder_and_one_never_put_back_stays(tmp_path: Path) -> None:
    """``mirror.persist`` with the keys the cloud has had in its bucket: one deleted since (a sample's deletion,
    a rolled-back commit) is dropped from ``objects.json``, its file and its upload's source; a committed data
    file that was never put back into the bucket (``results/`` is read from the state folder) stays."""
    state = StateDir(tmp_path)
    bucket = "seqlake-persist"
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    clients = lambda name: boto3.client(name, region_name="us-east-1")  # noqa: E731
    old = "results/qc/run_id=old/part-0.parquet"  # an earlier session's: in the state folder, not in the bucket
    state.local_path(bucket, old).parent.mkdir(parents=True)
    state.local_path(bucket, old).write_bytes(b"old")
    state.save_objects({bucket: {old: ObjectMeta(hashlib.md5(b"old").hexdigest(), 3, body=True)}})
    upload, report = "incoming/b/x_R1.fastq.gz", "reports/r/index.html"
    for key in (upload, report):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    state.record_source(f"s3://{bucket}/{upload}", tmp_path / "x_R1.fastq.gz")
    seen: set[str] = set()
    mirror.persist(state, clients, bucket, seen)
    assert set(state.objects()[bucket]) == {old, upload, report} and state.local_path(bucket, report).is_file()
    for key in (upload, report):
        s3.delete_object(Bucket=bucket, Key=key)
    mirror.persist(state, clients, bucket, seen)
    assert set(state.objects()[bucket]) == {old} and state.local_path(bucket, old).is_file()
    assert not state.local_path(bucket, report).exists() and state.sources() == {}
