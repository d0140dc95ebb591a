"""The one AWS client factory of every process: Lambdas, Batch children, the local cloud, the tools.

Clients are made on first use (never at import time) and shared within a process; the cache is keyed
on the process id and the endpoint, so a forked child makes its own and a changed ``AWS_ENDPOINT_URL``
(how the local cloud's processes reach its moto server) gets a new one.

One configuration for all: adaptive retries absorb the throttling that thousands of Batch children
hitting S3 and the Batch API at once cause, and the connection pool is as large as the widest fan-out
of parallel requests in this code (:data:`MAX_PARALLEL_REQUESTS`), so no thread waits for a socket.
"""

from __future__ import annotations

import os
import threading
from typing import Any

#: the most requests one process sends at once (the commit's parallel reads); the pool matches it
MAX_PARALLEL_REQUESTS = 64
#: attempts per request (the first and up to 7 retries) under botocore's adaptive retry mode
MAX_ATTEMPTS = 8

_clients: dict[tuple[int, str, str | None], Any] = {}
_lock = threading.Lock()


def _config() -> Any:
    from botocore.config import Config

    return Config(retries={"max_attempts": MAX_ATTEMPTS, "mode": "adaptive"},
                  max_pool_connections=MAX_PARALLEL_REQUESTS)


def client(service: str) -> Any:
    """The process's client for ``service`` (honours ``AWS_ENDPOINT_URL`` and the region variables)."""
    key = (os.getpid(), service, os.environ.get("AWS_ENDPOINT_URL"))
    found = _clients.get(key)
    if found is None:
        with _lock:
            found = _clients.get(key)
            if found is None:
                import boto3

                found = boto3.session.Session().client(service, config=_config())
                _clients[key] = found
    return found


def reset() -> None:
    """Forget every cached client (tests start moto's ``mock_aws`` after a client may have been made)."""
    with _lock:
        _clients.clear()
