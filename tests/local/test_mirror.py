"""The state folder's objects put back into S3 when a local cloud starts (``mirror.restore``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import boto3
from moto import mock_aws

from seqlake.localcloud import mirror
from seqlake.localcloud.state import ObjectMeta, StateDir

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
