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
from collections.abc import Mapping, Sequence
from typing import Any

#: the most requests one process sends at once (the commit's parallel reads); the pool matches it
MAX_PARALLEL_REQUESTS = 64
#: attempts per request (the first and up to 7 retries) under botocore's adaptive retry mode
MAX_ATTEMPTS = 8
#: requests :meth:`RangedGets.get_many` keeps in flight by default (a small GET waits a round trip, 20-50 ms on
#: S3, for well under a millisecond of the client's CPU: 16 keep hundreds a second going)
MANY_CONNECTIONS = 16
#: seconds an answer of :meth:`RangedGets.get_many` may take (botocore's default read timeout)
_READ_TIMEOUT = 60.0

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
        ca = self._ca = os.environ.get("AWS_CA_BUNDLE") or get_cert_path(True)
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

    def get_many(self, ranges: Sequence[tuple[str, str, int, int]], connections: int = MANY_CONNECTIONS,
                 ) -> list[bytes | None]:
        """The bytes of each ``(bucket, key, start, end)`` (``end`` inclusive), in order, as :meth:`get` gives
        them, ``connections`` requests in flight: sent from this thread on connections it keeps open (an
        event loop, not a thread per request: for thousands of small GETs threads cost more CPU than the
        requests, in switches and in contention for the interpreter). Each request is made and signed as
        :meth:`get` makes it, its ``before-send`` emitted. None for a range not answered with its bytes (an
        error, a redirect, a dropped connection, a response without a length; or a loop already running in
        this thread): the caller's to ask again by :meth:`get` (botocore's retries, redirects and errors)."""
        import asyncio

        got: list[bytes | None] = [None] * len(ranges)
        if ranges:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # no loop runs in this thread: ours can
                asyncio.run(self._fetch_all(ranges, got, max(1, connections)))
        return got

    async def _fetch_all(self, ranges: Sequence[tuple[str, str, int, int]], got: list[bytes | None],
                         connections: int) -> None:
        """Fill ``got`` with what ``connections`` connections' worth of requests answer with the bytes."""
        import asyncio

        taken = iter(range(len(ranges)))

        async def worker() -> None:
            kept: dict[str, _Connection] = {}
            try:
                for i in taken:
                    got[i] = await self._fetch_one(*ranges[i], kept)
            finally:
                for connection in kept.values():
                    connection.close()

        await asyncio.gather(*(worker() for _ in range(min(connections, len(ranges)))))

    async def _fetch_one(self, bucket: str, key: str, start: int, end: int,
                         kept: dict[str, _Connection]) -> bytes | None:
        """One range's bytes on a kept connection (None: left to :meth:`get`)."""
        import urllib.parse

        from botocore.awsrequest import AWSPreparedRequest

        if bucket in self._declined:
            return None
        _, origin, prefix = self._base(bucket)
        path = prefix + urllib.parse.quote(key, safe="/~")
        headers = self.signed(origin, path, f"bytes={start}-{end}")
        for answer in self._events.emit("before-send.s3.GetObject",
                                        request=AWSPreparedRequest("GET", origin + path, headers, None, True)):
            if answer[1] is not None:  # answered by a hook (moto's mock)
                return self._took(bucket, answer[1].status_code, bytes(answer[1].content))
        for _ in range(2):  # a kept connection the server closed meanwhile: once more on a new one
            connection = kept.get(origin)
            if connection is None or connection.closed:
                connection = kept[origin] = _Connection(origin, self._ssl_context)
            reused = connection.answered > 0
            status, body = await connection.get(path, headers)
            if status is not None:
                return self._took(bucket, status, body)
            if not reused:
                break
        return None


    def _took(self, bucket: str, status: int, body: bytes) -> bytes | None:
        """The body of an answer that carries the bytes; else None (and a bucket :data:`_DECLINED` is left to
        botocore from now on)."""
        if status in _GOT:
            return body
        if status in _DECLINED:
            self._declined.add(bucket)
        return None

    @functools.cached_property
    def _ssl_context(self) -> Any:
        import ssl

        return ssl.create_default_context(cafile=self._ca)

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


class _Connection:
    """One kept-alive HTTP/1.1 connection of :meth:`RangedGets.get_many` (TLS for an ``https`` origin)."""

    def __init__(self, origin: str, ssl_context: Any) -> None:
        import urllib.parse

        parts = urllib.parse.urlsplit(origin)
        secure = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port or (443 if secure else 80)
        #: the Host header as the request was signed (with the port when the URL names one)
        self._netloc = parts.netloc
        self._ssl = ssl_context if secure else None
        self._streams: tuple[Any, Any] | None = None
        self.closed = False
        #: answers read on this connection
        self.answered = 0

    async def get(self, path: str, headers: Mapping[str, str]) -> tuple[int | None, bytes]:
        """The answer's status and body: 0 for an answer whose body this reader cannot tell the end of, None
        for no answer (the connection dropped or timed out); the connection is closed after either."""
        import asyncio

        try:
            async with asyncio.timeout(_READ_TIMEOUT):
                return await self._exchange(path, headers)
        except (OSError, EOFError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                TimeoutError):
            self.close()
            return None, b""

    async def _exchange(self, path: str, headers: Mapping[str, str]) -> tuple[int | None, bytes]:
        import asyncio

        if self._streams is None:
            self._streams = await asyncio.open_connection(self._host, self._port, ssl=self._ssl,
                                                          server_hostname=self._host if self._ssl else None)
        reader, writer = self._streams
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {self._netloc}\r\nAccept-Encoding: identity\r\n{lines}\r\n"
                     .encode())
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        version, status = head[0].split(" ", 2)[:2]
        fields = {name.strip().lower(): value.strip() for name, _, value in (h.partition(":") for h in head[1:] if h)}
        length = fields.get("content-length")
        if not version.startswith("HTTP/1.") or length is None or not length.isdigit() or \
                "transfer-encoding" in fields:
            self.close()  # a body whose end this reader does not know: the connection cannot be reused
            return 0, b""
        body = await reader.readexactly(int(length))
        self.answered += 1
        if fields.get("connection", "").lower() == "close" or version == "HTTP/1.0":
            self.close()
        return int(status), body

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None
        self.closed = True


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
