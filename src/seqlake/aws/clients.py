"""boto3 clients made on first use (never at import time) and shared within one process.

boto3 honours ``AWS_ENDPOINT_URL`` (how the local cloud's subprocesses reach its moto server) and the
usual region variables. ``reset()`` drops the cache (tests switch endpoints between cases).
"""

from __future__ import annotations

import functools
from typing import Any

import boto3
from botocore.config import Config

#: adaptive retries absorb throttling when thousands of shards hit the same API
_CONFIG = Config(retries={"max_attempts": 8, "mode": "adaptive"})


@functools.cache
def client(service: str) -> Any:
    return boto3.client(service, config=_CONFIG)


def reset() -> None:
    client.cache_clear()
