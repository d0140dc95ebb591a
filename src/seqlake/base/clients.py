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
#: each client's credentials (its session's: the same object, refreshed as the client refreshes them)
_credentials: dict[int, Any] = {}
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
                session = _session()
                found = session.client(service, config=_config())
                _clients[key] = found
                _credentials[id(found)] = session.get_credentials()
    return found


def reset() -> None:
    """Forget every cached client (tests start moto's ``mock_aws`` after a client may have been made)."""
    with _lock:
        _clients.clear()
        _credentials.clear()
        _ranged.clear()


# ---------------------------------------------------------------- a lean ranged GET


#: a response to a ranged GET that carries the bytes asked for (the whole object when S3 ignores the range)
_GOT = (200, 206)
#: answers after which a bucket's GETs are left to botocore: a redirect or a bad request (a bucket in another
#: region than the client's, which botocore's redirector handles), a refusal (a signature this path did not
#: make as S3 wants it); an error of one object (404) or of the moment (5xx, a throttle) is not one of them
_DECLINED = frozenset({301, 307, 400, 403})
#: SHA-256 of no bytes: the payload digest botocore signs for a GET (over HTTPS too: the request has no checksum)
_EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#: header names as botocore sends them (some servers, moto among them, look some up case-sensitively)
_SENT_AS = {"range": "Range", "x-amz-content-sha256": "X-Amz-Content-SHA256", "x-amz-date": "X-Amz-Date",
            "x-amz-security-token": "X-Amz-Security-Token", "authorization": "Authorization"}
#: environment variables that send botocore's requests through a proxy (the lean GET then is not used)
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


class RangedGets:
    """``GetObject`` of a byte range for the many small reads of a plan (a sniff of each of 20,000 input
    files): signed by botocore's own S3 SigV4 signer and sent on a urllib3 pool of this object's, without
    the rest of botocore's per-call machinery (parameter validation and serialisation, endpoint rules, a
    dozen events, the response parser), which cost about 2.5 ms of CPU per small GET, measured; this path
    costs a fraction of that. It keeps what a request must be: the client's credentials (refreshed as
    botocore refreshes them), its region, and its URL for the bucket (from a presigned URL the client
    makes once per bucket: its endpoint, addressing style and rules); its ``before-send`` event, as
    botocore emits it for every request (``mock_aws`` answers there). Anything but the bytes (an error,
    a throttle, a dropped connection) goes to the client's ``get_object``: its retries, its errors."""

    _PLACEHOLDER = "seqlake-ranged-get-key"

    def __init__(self, s3: Any, credentials: Any) -> None:
        import urllib3
        from botocore.httpsession import get_cert_path

        self._s3, self._credentials = s3, credentials
        self._region = s3.meta.region_name
        self._bases: dict[str, tuple[Any, str, str]] = {}
        #: buckets whose GETs are botocore's (:data:`_DECLINED`)
        self._declined: set[str] = set()
        self._lock = threading.Lock()
        ca = os.environ.get("AWS_CA_BUNDLE") or get_cert_path(True)
        self._pools = urllib3.PoolManager(num_pools=16, maxsize=MAX_PARALLEL_REQUESTS, block=False, retries=False,
                                          timeout=urllib3.Timeout(connect=60, read=60), ca_certs=ca)
        self._events = s3.meta.events

    @staticmethod
    def usable() -> bool:
        """Not through a proxy (botocore's proxy settings are not repeated here)."""
        return not any(os.environ.get(v) for v in _PROXY_VARS)

    def _base(self, bucket: str) -> tuple[Any, str, str]:
        """The bucket's connection pool, its URL's scheme and host, and the path a key is appended to."""
        found = self._bases.get(bucket)
        if found is None:
            import urllib.parse

            url = self._s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": self._PLACEHOLDER})
            parts = urllib.parse.urlsplit(url)
            if not parts.path.endswith("/" + self._PLACEHOLDER):
                raise ValueError(f"unexpected S3 URL for bucket {bucket}: {url}")
            origin = f"{parts.scheme}://{parts.netloc}"
            found = (self._pools.connection_from_url(origin), origin, parts.path[: -len(self._PLACEHOLDER)])
            with self._lock:
                self._bases[bucket] = found
        return found

    def get(self, bucket: str, key: str, start: int, end: int) -> bytes:
        """Bytes ``start``..``end`` (inclusive) of the object, as ``get_object(Range=...)`` returns them."""
        import urllib.parse

        from botocore.awsrequest import AWSPreparedRequest

        if bucket not in self._declined:
            pool, origin, prefix = self._base(bucket)
            path = prefix + urllib.parse.quote(key, safe="/~")
            headers = self.signed(origin, path, f"bytes={start}-{end}")
            data, status = self._sent(pool, path, AWSPreparedRequest("GET", origin + path, headers, None, True))
            if data is not None:
                return data
            if status in _DECLINED:
                self._declined.add(bucket)
        # botocore's own call: its retries, its redirects and its errors
        body: bytes = self._s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end}")["Body"].read()
        return body

    def signed(self, origin: str, path: str, byte_range: str, when: datetime.datetime | None = None) -> dict[str, str]:
        """The headers of a GET of ``origin + path`` (``path`` as sent: URI-encoded) for ``byte_range``, signed
        as botocore's ``S3SigV4Auth`` signs them (the same canonical request: host, range and the ``x-amz-``
        headers, the empty body's digest) with the day's signing key derived once, not four HMACs a request."""
        import hashlib
        import hmac

        creds = self._credentials.get_frozen_credentials()
        stamp = (when or datetime.datetime.now(datetime.UTC)).strftime("%Y%m%dT%H%M%SZ")
        payload = _EMPTY_SHA256
        host = origin.split("://", 1)[1]
        headers = {"host": host, "range": byte_range, "x-amz-content-sha256": payload, "x-amz-date": stamp}
        if creds.token:
            headers["x-amz-security-token"] = creds.token
        names = ";".join(headers)  # already in sorted order
        canonical = "\n".join(["GET", path, "", *(f"{k}:{' '.join(v.split())}" for k, v in headers.items()), "",
                               names, payload])
        scope = f"{stamp[:8]}/{self._region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(signing_key(creds.secret_key, stamp[:8], self._region, "s3"), to_sign.encode(),
                             hashlib.sha256)
        headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope}, SignedHeaders={names}, "
                                    f"Signature={signature.hexdigest()}")
        del headers["host"]  # the connection sends it
        return {_SENT_AS.get(k, k): v for k, v in headers.items()}

    def _sent(self, pool: Any, path: str, prepared: Any) -> tuple[bytes | None, int | None]:
        """The body of a 200 or 206 answer (else None) and the answer's status (None: no answer)."""
        import urllib3

        for answer in self._events.emit("before-send.s3.GetObject", request=prepared):
            if answer[1] is not None:  # answered by a hook (moto's mock)
                got = answer[1]
                return (bytes(got.content) if got.status_code in _GOT else None), got.status_code
        try:
            response = pool.urlopen("GET", path, headers=dict(prepared.headers), retries=False, redirect=False,
                                    assert_same_host=False, preload_content=True)
        except urllib3.exceptions.HTTPError:
            return None, None
        return (bytes(response.data) if response.status in _GOT else None), response.status


@functools.lru_cache(maxsize=64)
def signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    """SigV4's signing key of a secret key for a day (``YYYYMMDD``), region and service: four HMACs, once."""
    import hashlib
    import hmac

    key = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


_ranged: dict[tuple[int, str | None], RangedGets] = {}


def ranged_gets() -> RangedGets | None:
    """The process's lean ranged GET (:class:`RangedGets`), None where it is not used (through a proxy)."""
    key = (os.getpid(), os.environ.get("AWS_ENDPOINT_URL"))
    found = _ranged.get(key)
    if found is None:
        if not RangedGets.usable():
            return None
        s3 = client("s3")
        with _lock:
            found = _ranged.get(key)
            if found is None:
                found = _ranged[key] = RangedGets(s3, _credentials[id(s3)])
    return found
