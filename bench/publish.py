"""The commit's publication of the Batch jobs' parts, beside what the commit reads anyway: on the local cloud
with S3 latency on, the time to copy N staged parts into their result partition (``storage.copy_many``, as
``commit.merge`` publishes them) and the time to read N manifests (``storage.read_many``, as the commit reads
every child's), side by side as a ratio.

    python bench/publish.py --parts 1000 --latency-ms 20 --out bench/work/publish-1000.json

A run of 1,000 children has 1,000 alignments parts (and two reducer parts per region); the parts here
have the size of that run's (``--part-bytes``), the manifests theirs (``--manifest-bytes``). Best of
``--repeat``, each on fresh keys.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

LATENCY_VAR = "SEQLAKE_LOCAL_S3_LATENCY_MS"


def _put_quietly(bucket: str, objects: dict[str, bytes]) -> None:
    """Objects into moto's backend directly (no events, no latency): the setup is not measured."""
    from moto.s3.models import s3_backends

    from localcloud.deployer import ACCOUNT

    backend = s3_backends[ACCOUNT]["aws"]
    for key, body in objects.items():
        backend.put_object(bucket, key, body, disable_notification=True)


def run(parts: int, part_bytes: int, manifest_bytes: int, latency_ms: int, repeat: int) -> dict[str, Any]:
    from localcloud.state import StateDir
    from seqlake.base import storage
    from seqlake.base.layout import RunLayout, child_name
    from seqlake.local.adapter import local_cloud

    os.environ[LATENCY_VAR] = "0"
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="seqlake-publish-") as home, \
            local_cloud(state=StateDir(home), jobs=1, quiet=True) as cloud:
        for attempt in range(repeat):
            run = RunLayout.in_bucket(cloud.bucket, f"publish-bench-{attempt}")
            key = lambda uri: uri.removeprefix(f"s3://{cloud.bucket}/")  # noqa: E731
            names = [child_name(c) for c in range(parts)]
            _put_quietly(cloud.bucket, {key(run.staged_part("alignments", n)): os.urandom(part_bytes) for n in names})
            _put_quietly(cloud.bucket, {key(run.manifest(c)): os.urandom(manifest_bytes) for c in range(parts)})
            os.environ[LATENCY_VAR] = str(latency_ms)
            try:
                t0 = time.monotonic()
                read = sum(1 for _, data in storage.read_many(run.manifest(c) for c in range(parts)) if data)
                t1 = time.monotonic()
                copied = storage.copy_many((run.staged_part("alignments", n), run.published_part("alignments", n),
                                            part_bytes) for n in names)
                t2 = time.monotonic()
            finally:
                os.environ[LATENCY_VAR] = "0"
            assert read == copied == parts
            listed = storage.list_sizes(run.partition("alignments"))
            assert len(listed) == parts and set(listed.values()) == {part_bytes}
            best["read_seconds"] = min(best.get("read_seconds", 1e9), t1 - t0)
            best["publish_seconds"] = min(best.get("publish_seconds", 1e9), t2 - t1)
    return {"parts": parts, "part_bytes": part_bytes, "manifest_bytes": manifest_bytes, "latency_ms": latency_ms,
            "repeat": repeat, **{k: round(v, 3) for k, v in best.items()},
            "publish_over_read": round(best["publish_seconds"] / best["read_seconds"], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--parts", type=int, default=1000, help="staged parts (a run's children)")
    parser.add_argument("--part-bytes", type=int, default=9000, help="size of each part")
    parser.add_argument("--manifest-bytes", type=int, default=6000, help="size of each manifest")
    parser.add_argument("--latency-ms", type=int, default=20, help="per-request S3 latency of the local cloud")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    parser.add_argument("--out", type=Path, default=None, help="also write the result here as JSON")
    args = parser.parse_args()
    result = run(args.parts, args.part_bytes, args.manifest_bytes, args.latency_ms, args.repeat)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
