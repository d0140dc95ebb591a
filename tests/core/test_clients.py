"""The process's AWS clients (``base/clients.py``)."""

from __future__ import annotations

import botocore.utils
import pytest

from seqlake.base import clients

TIMESTAMPS = [
    "Tue, 01 Dec 2026 22:30:00 GMT",  # S3's Last-Modified
    "Sun, 06 Nov 1994 08:49:37 GMT",
    "2026-12-01T22:30:00.000Z",  # a listing's LastModified
    "2026-12-01T22:30:00Z",
    "2026-12-01T22:30:00.123456Z",
    "2026-12-01T22:30:00+01:00",  # not the fast forms: botocore's reading
    "1764628200",
    1764628200.5,
    "Tue, 01 Xyz 2026 22:30:00 GMT",
]


@pytest.mark.parametrize("value", TIMESTAMPS)
def test_timestamps_read_as_botocore_reads_them(value: object) -> None:
    try:
        expected = botocore.utils.parse_timestamp(value)
    except ValueError:
        with pytest.raises(ValueError):
            clients.parse_timestamp(value)
        return
    found = clients.parse_timestamp(value)
    assert found == expected and type(found.tzinfo) is type(expected.tzinfo)


def test_clients_read_timestamps_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.reset()
    try:
        made = clients.client("s3")
        # the endpoint's parser reads each response (made from the session's factory)
        parser = made._endpoint._response_parser_factory.create_parser("rest-xml")
        assert parser._timestamp_parser is clients.parse_timestamp
    finally:
        clients.reset()


@pytest.mark.parametrize("origin", ["https://bucket.s3.us-east-1.amazonaws.com", "http://127.0.0.1:4566"])
@pytest.mark.parametrize("token", [None, "session-token"])
def test_a_ranged_get_is_signed_as_botocore_signs_it(origin: str, token: str | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`clients.RangedGets.signed` gives the headers botocore's S3 SigV4 signer gives the same GET (the
    signature too), with or without a session token, over HTTPS and HTTP."""
    import datetime
    import types
    import urllib.parse

    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    when = datetime.datetime(2026, 12, 2, 2, 5, 9, tzinfo=datetime.UTC)
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    fake_client = types.SimpleNamespace(meta=types.SimpleNamespace(region_name="eu-west-2", events=None))
    gets = clients.RangedGets(fake_client, creds)
    path = "/" + urllib.parse.quote("incoming/run 1/s0001_R1+x~ü.fastq.gz", safe="/~")
    ours = gets.signed(origin, path, "bytes=0-1048575", when)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when.replace(tzinfo=None))
    request = AWSRequest(method="GET", url=origin + path, headers={"Range": "bytes=0-1048575"})
    botocore.auth.S3SigV4Auth(creds.get_frozen_credentials(), "s3", "eu-west-2").add_auth(request)
    assert ours == dict(request.headers.items())


class _Objects:
    """A small S3-like HTTP/1.1 server on a loopback port (keep-alive): ranged GETs of ``objects``
    (``/bucket/key``), each request recorded with its connection; ``status`` answers a path otherwise, a
    path in ``chunked`` has a body without a length, one in ``closing`` ends its connection after the answer
    (saying so), one in ``dropping`` too (silently, as a server closes a connection kept idle too long)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        import http.server
        import threading

        self.objects, self.status = objects, dict[str, int]()
        self.chunked, self.closing, self.dropping = set[str](), set[str](), set[str]()
        self.seen: list[tuple[int, str, dict[str, str]]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner.seen.append((self.client_address[1], self.path, dict(self.headers.items())))
                status = owner.status.get(self.path)
                if status is not None:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                first, _, last = self.headers["Range"].removeprefix("bytes=").partition("-")
                body = owner.objects[self.path][int(first):int(last) + 1]
                self.send_response(206)
                if self.path in owner.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.write(b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body))
                    return
                self.send_header("Content-Length", str(len(body)))
                if self.path in owner.closing:
                    self.send_header("Connection", "close")
                self.close_connection = self.path in owner.closing | owner.dropping
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"


def test_many_ranged_gets_go_out_signed_on_kept_connections_and_leave_the_rest_to_botocore(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`clients.RangedGets.get_many` over a real socket: each range's bytes in order, as signed by
    botocore's S3 signer (the Host header as signed), on at most ``connections`` connections kept open; None
    (for :meth:`~clients.RangedGets.get`) for an error, an answer without a length, and every GET of a bucket
    that refused one; a connection the server ended is replaced (a request sent on one it ended silently is
    sent again on a new one)."""
    import datetime

    import boto3
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials

    data = bytes(range(256)) * 8
    server = _Objects({f"/b/k{i}": data[i:] for i in range(12)} | {"/other/x": data})
    try:
        server.status.update({"/b/k3": 404, "/other/x": 403})
        server.chunked.add("/b/k5")
        server.closing.add("/b/k7")
        server.dropping.add("/b/k1")
        creds = Credentials("AKIDEXAMPLE", "secret", None)
        s3 = boto3.session.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                                   region_name="eu-west-2").client(
            "s3", endpoint_url=server.endpoint, config=Config(s3={"addressing_style": "path"}))
        gets = clients.RangedGets(s3, creds)
        wanted = [("b", f"k{i}", i, i + 99) for i in range(12)] + [("other", "x", 0, 9), ("other", "x", 5, 9)]
        got = gets.get_many(wanted, connections=3)
        assert got == [None if i in (3, 5) else data[2 * i:2 * i + 100] for i in range(12)] + [None, None]
        assert "other" in gets._declined
        paths = [path for _, path, _ in server.seen]
        assert sorted(p for p in paths if p != "/other/x") == sorted(f"/b/k{i}" for i in range(12))  # each once
        assert 1 <= paths.count("/other/x") <= 2  # both in flight at once, or the second left to botocore
        assert gets.get_many([("other", "x", 0, 9)]) == [None] and len(server.seen) == len(paths)
        # three connections at once, one more after each the server ended (two) and the unread body
        assert len({connection for connection, _, _ in server.seen}) == 6
        _, path, headers = server.seen[paths.index("/b/k2")]
        when = datetime.datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
        monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when)
        expected = AWSRequest(method="GET", url=server.endpoint + path, headers={"Range": "bytes=2-101"})
        botocore.auth.S3SigV4Auth(creds.get_frozen_credentials(), "s3", "eu-west-2").add_auth(expected)
        assert headers["Authorization"] == expected.headers["Authorization"]
        assert headers["Host"] == server.endpoint.removeprefix("http://")
    finally:
        server.server.shutdown()
