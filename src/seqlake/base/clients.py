"""The one AWS client factory of every process: Lambdas, Batch children, the local cloud, the tools.

Clients are made on first use (never at import time) and shared within a process; the cache is keyed
on the process id and the endpoint, so a forked child makes its own and a changed ``AWS_ENDPOINT_URL``
(how the local cloud's processes reach its moto server) gets a new one.

One configuration for all: adaptive retries absorb the throttling that thousands of Batch children
hitting S3 and the Batch API at once cause, and the connection pool is as large as the widest fan-out
of parallel requests in this code (:data:`MAX_PARALLEL_REQUESTS`), so no thread waits for a socket.
Timestamps are read by :func:`parse_timestamp` (botocore's result, without dateutil for the two forms S3
sends): S3 answers every object request with a ``Last-Modified`` header, and botocore parsed each with
dateutil's general parser, about a tenth of a small ranged GET's CPU in the client.
"""

from __future__ import annotations

import datetime
import functools
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


_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                        "Dec"), start=1)}


def parse_timestamp(value: Any) -> datetime.datetime:
    """A response's timestamp as botocore reads it (``botocore.utils.parse_timestamp``: the same value and
    time zone object), an HTTP date (``Tue, 01 Dec 2026 22:30:00 GMT``, RFC 7231's fixed form, S3's
    ``Last-Modified``) or an ISO 8601 time in UTC (a listing's ``2026-12-01T22:30:00.000Z``) read directly;
    anything else by botocore."""
    from botocore.utils import parse_timestamp as botocore_parse

    if isinstance(value, str):
        try:
            if len(value) == 29 and value[3:5] == ", " and value.endswith(" GMT"):
                return datetime.datetime(int(value[12:16]), _MONTHS[value[8:11]], int(value[5:7]), int(value[17:19]),
                                         int(value[20:22]), int(value[23:25]), tzinfo=_zone(_HTTP_DATE))
            if value.endswith("Z") and value[10:11] == "T":
                return datetime.datetime.fromisoformat(value[:-1]).replace(tzinfo=_zone(_ISO_UTC))
        except (KeyError, ValueError):
            pass  # not that form after all: botocore's reading
    parsed: datetime.datetime = botocore_parse(value)
    return parsed


_HTTP_DATE = "Sat, 01 Jan 2000 00:00:00 GMT"
_ISO_UTC = "2000-01-01T00:00:00Z"


@functools.cache
def _zone(example: str) -> Any:
    """The time zone botocore gives a timestamp of ``example``'s form (dateutil's: ``tzutc`` for GMT, and for
    ``Z`` its ``tzlocal`` where the local zone is named UTC)."""
    from botocore.utils import parse_timestamp as botocore_parse

    return botocore_parse(example).tzinfo


def _session() -> Any:
    """A boto3 session whose clients read timestamps with :func:`parse_timestamp` (botocore's documented
    ``ResponseParserFactory.set_parser_defaults``)."""
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)
    return boto3.session.Session(botocore_session=core)


def client(service: str) -> Any:
    """The process's client for ``service`` (honours ``AWS_ENDPOINT_URL`` and the region variables)."""
    key = (os.getpid(), service, os.environ.get("AWS_ENDPOINT_URL"))
    found = _clients.get(key)
    if found is None:
        with _lock:
            found = _clients.get(key)
            if found is None:
                found = _session().client(service, config=_config())
                _clients[key] = found
    return found


def reset() -> None:
    """Forget every cached client (tests start moto's ``mock_aws`` after a client may have been made)."""
    with _lock:
        _clients.clear()
