"""The local cloud's HTTP server (``localcloud/http_server.py``): connections kept alive, safely."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator

import pytest

from localcloud import patches
from localcloud.http_server import LocalServer


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    patches.apply_all()
    made = LocalServer("127.0.0.1", 0)
    thread = threading.Thread(target=made.serve_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        made.shutdown()
        made.close_connections()
        made.server_close()
        thread.join()


def _connect(server: LocalServer) -> http.client.HTTPConnection:
    host, port = server.server_address[:2]
    return http.client.HTTPConnection(host, port, timeout=30)


def _get(conn: http.client.HTTPConnection, path: str, **kw: object) -> http.client.HTTPResponse:
    conn.request("GET", path, **kw)  # type: ignore[arg-type]
    answer = conn.getresponse()
    answer.read()
    return answer


def test_one_connection_serves_request_after_request(server: LocalServer) -> None:
    conn = _connect(server)
    first = _get(conn, "/moto-api/data.json")
    sock = conn.sock
    assert first.status == 200 and first.getheader("Connection") != "close"
    for _ in range(3):
        assert _get(conn, "/moto-api/data.json").status == 200
    assert conn.sock is sock  # not reconnected: http.client opens a new socket after a close
    conn.close()


def test_a_body_left_unread_is_not_taken_for_the_next_request(server: LocalServer) -> None:
    conn = _connect(server)
    # a path no service answers: the application never reads the body, which looks like a request
    body = b"GET /moto-api/data.json HTTP/1.1\r\nHost: x\r\n\r\n" * 2000
    conn.request("POST", "/moto-api/no-such-thing", body=body)
    answer = conn.getresponse()
    answer.read()
    assert answer.status == 404
    conn.request("POST", "/moto-api/no-such-thing", body=b"x" * 100, headers={"Transfer-Encoding": "chunked"},
                 encode_chunked=True)
    chunked = conn.getresponse()
    chunked.read()
    assert chunked.status == 404
    # the next request on the connection is answered as itself (404), not as the body's first line (200)
    assert _get(conn, "/moto-api/no-such-thing").status == 404
    assert _get(conn, "/moto-api/data.json").status == 200
    conn.close()


def test_a_client_that_asks_to_close_is_answered_then_closed(server: LocalServer) -> None:
    conn = _connect(server)
    answer = _get(conn, "/moto-api/data.json", headers={"Connection": "close"})
    assert answer.status == 200 and answer.getheader("Connection") == "close"
    assert answer.will_close


def test_no_request_is_served_on_a_kept_connection_after_the_server_stops() -> None:
    patches.apply_all()
    stopping = LocalServer("127.0.0.1", 0)
    thread = threading.Thread(target=stopping.serve_forever, daemon=True)
    thread.start()
    conn = _connect(stopping)
    assert _get(conn, "/moto-api/data.json").status == 200
    stopping.shutdown()
    stopping.close_connections()
    stopping.server_close()
    thread.join()
    conn.request("GET", "/moto-api/data.json")
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        conn.getresponse()
