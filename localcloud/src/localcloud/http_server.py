"""The local cloud's HTTP server: moto's application behind werkzeug's threaded server, with HTTP/1.1
keep-alive.

moto's ``ThreadedMotoServer`` serves with werkzeug's ``WSGIRequestHandler``, which answers every request
with ``Connection: close`` (werkzeug 3: Python's ``http.server`` cannot drain a request body it was not
read to its end, so werkzeug never keeps a connection; setting ``protocol_version = "HTTP/1.1"`` changes
nothing). Each request then costs a TCP connection, a new server thread and, after the response, up to
10 ms of that thread waiting for the client to hang up; botocore opens a new connection per request too.
Here a connection serves request after request, as S3's endpoints do: each request's body is read through
a stream limited to its ``Content-Length`` (or its chunked encoding) and whatever the application left of
it is read off before the next request line, so a connection never mistakes a body for a request. A
response without a length is sent chunked. A connection is closed when the client asks, when a response
went wrong after its headers, or after :attr:`KeepAliveHandler.idle_seconds` without a request;
:meth:`LocalServer.close_connections` closes the rest when the server stops (no old client reaches the
process-wide backends of a newer cloud through a connection kept from before).

An S3 ``CompleteMultipartUpload`` that is not answered within :attr:`KeepAliveHandler.complete_grace_seconds`
is answered as S3 answers it: ``200 OK`` and the XML declaration at once, a space every
:attr:`KeepAliveHandler.keep_alive_seconds` while the parts are joined, then the result or the ``Error``
(an error inside a 200, which botocore retries as a 500). Joining a multi-GB upload's parts outlasts
botocore's 60 s read timeout; a client that timed out retried, and s3transfer aborted the upload under the
first complete.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable
from http import HTTPStatus
from queue import Empty, Queue
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import ThreadedWSGIServer
from werkzeug.wsgi import LimitedStream

from localcloud import emulator_errors, patches

_log = logging.getLogger("werkzeug")
#: [second, its HTTP date]
_date: list[Any] = [-1, ""]


class KeepAliveHandler(MotoRequestHandler):
    """moto's request handler (its environ keeps headers with underscores), serving many requests a
    connection."""

    protocol_version = "HTTP/1.1"
    #: seconds a connection waits for its next request before the server closes it (botocore's pool reconnects)
    idle_seconds = 120.0
    #: a response's headers go out with its first bytes (one segment, not two waiting on each other's ACK)
    disable_nagle_algorithm = True
    #: seconds a CompleteMultipartUpload may take before it is answered 200 and kept alive (an error found by
    #: then, such as ``InvalidPart``, keeps its own status, as S3's checks before it starts joining do)
    complete_grace_seconds = 1.0
    #: seconds between the spaces that keep a slow CompleteMultipartUpload's connection alive
    keep_alive_seconds = 5.0
    server: LocalServer

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.forget(self.connection)

    def handle_one_request(self) -> None:
        """One request: its line waited for at most :attr:`idle_seconds`; the rest of it, and the work it
        asks for, as long as they take."""
        if not self.server.idle(self.connection):  # the server stops: no more requests here
            self.close_connection = True
            return
        self.connection.settimeout(self.idle_seconds)
        try:
            self.raw_requestline = self.rfile.readline(65537)
        except TimeoutError:
            self.close_connection = True
            return
        finally:
            self.server.busy(self.connection)
        self.connection.settimeout(None)
        if not self.raw_requestline or len(self.raw_requestline) > 65536:
            self.close_connection = True
        elif self.parse_request():
            self.run_wsgi()

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header: formatted once a second, not once a response."""
        if timestamp is not None:
            return str(super().date_time_string(timestamp))
        now = int(time.time())
        if _date[0] != now:
            _date[:] = [now, str(super().date_time_string(now))]
        return str(_date[1])

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # werkzeug decodes and styles every request's line before its logger drops it (the server logs errors only)
        if _log.isEnabledFor(logging.INFO):
            super().log_request(code, size)

    def run_wsgi(self) -> None:
        """werkzeug's ``run_wsgi`` for a connection that stays open: the body read through a limited stream
        (then its rest read off), the response's length given or its body chunked."""
        if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        direct = patches.answer_get_object(self.command, self.path, self.headers)
        if direct is not None:  # a plain GetObject: answered without the web framework (the s3-direct-get patch)
            self._answer(*direct)
            return
        self.environ = environ = self.make_environ()
        body = _request_body(environ)
        response = _Response(self)
        try:
            if _completes_an_upload(environ):
                response.run_kept_alive(self.server.app, environ)
            else:
                response.run(self.server.app, environ)
        except (ConnectionError, TimeoutError) as e:
            self.close_connection = True
            self.connection_dropped(e, environ)
            return
        except Exception as error:
            _log.exception("Error on request %s %s", self.command, self.path)
            emulator_errors.record(f"{self.command} {self.path}", error)
            if response.sent:  # the response is broken: the client must see the connection end
                self.close_connection = True
                return
            _Response(self).run(internal_error(environ, error), environ)
        if not self.close_connection and not _read_off(body):
            self.close_connection = True
        self.environ = {}  # not kept while the connection waits: it holds the request (and moto's copies of its body)

    def _answer(self, status: int, headers: dict[str, str], body: Any) -> None:
        """Send a response made without moto's application, with the request id headers moto adds."""
        request_id = _request_id()

        def app(environ: dict[str, Any], start_response: Any) -> Any:
            start_response(f"{status} {HTTPStatus(status).phrase}",
                           [*headers.items(), ("x-amzn-requestid", request_id)])
            return [body] if isinstance(body, bytes) else body

        try:
            _Response(self).run(app, {})
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def send_head(self, status: str, headers: list[tuple[str, str]]) -> bool:
        """The status line and headers, buffered (they go out with the body's first bytes); whether the body
        is sent chunked."""
        code_text, _, reason = status.partition(" ")
        code = int(code_text)
        self.send_response(code, reason)
        names = set()
        for name, value in headers:
            self.send_header(name, value)
            names.add(name.lower())
        has_body = not (self.command == "HEAD" or 100 <= code < 200 or code in (204, 304))
        chunked = has_body and "content-length" not in names and "transfer-encoding" not in names
        if chunked and self.request_version < "HTTP/1.1":
            chunked, self.close_connection = False, True  # an HTTP/1.0 client reads the body to the end
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        if self.close_connection:
            self.send_header("Connection", "close")
        self._headers_buffer.append(b"\r\n")  # ``end_headers`` would send them now
        return chunked

    def take_head(self) -> bytes:
        buffered: list[bytes] = self._headers_buffer  # http.server's buffer of the head's lines
        head = b"".join(buffered)
        buffered.clear()
        return head


def _request_id() -> str:
    """A request id as moto makes one (``gen_amzn_requestid_long``)."""
    from moto.utilities.aws_headers import gen_amzn_requestid_long

    return gen_amzn_requestid_long()


class _Response:
    """One WSGI response on a kept connection: its head sent with its first bytes, its body chunked when it
    has no length."""

    def __init__(self, handler: KeepAliveHandler) -> None:
        self.handler = handler
        #: the status line and headers are on the wire
        self.sent = False
        self.chunked = False
        self._pending: tuple[str, list[tuple[str, str]]] | None = None

    def start_response(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if exc_info and self.sent:
            raise exc_info[1].with_traceback(exc_info[2])
        self._pending = (status, headers)
        return self.write

    def write(self, data: bytes) -> None:
        head = b""
        if not self.sent:
            assert self._pending is not None, "write() before start_response"
            self.sent = True
            self.chunked = self.handler.send_head(*self._pending)
            head = self.handler.take_head()
        if self.chunked and data:
            data = b"%x\r\n%b\r\n" % (len(data), data)
        if len(data) < 1 << 16:  # a small response is one write: its headers and its body
            if head or data:
                self.handler.wfile.write(head + data)
        else:
            self.handler.wfile.write(head)
            self.handler.wfile.write(data)

    def run(self, app: Any, environ: dict[str, Any]) -> None:
        answer: Iterable[bytes] = app(environ, self.start_response)
        try:
            for data in answer:
                self.write(data)
            if not self.sent:
                self.write(b"")
            if self.chunked:
                self.handler.wfile.write(b"0\r\n\r\n")
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()

    def run_kept_alive(self, app: Any, environ: dict[str, Any]) -> None:
        """The application's answer as it is if it comes within the grace; else ``200 OK`` at once, a space
        every :attr:`KeepAliveHandler.keep_alive_seconds`, then the answer's body (an error's too) after the
        XML declaration already sent."""
        answers: Queue[tuple[str, list[tuple[str, str]], bytes] | None] = Queue(maxsize=1)
        threading.Thread(target=_answer_whole, args=(app, environ, answers), daemon=True,
                         name="complete-multipart-upload").start()
        try:
            answer = answers.get(timeout=self.handler.complete_grace_seconds)
        except Empty:
            pass
        else:
            if answer is None:
                raise RuntimeError("CompleteMultipartUpload failed")  # run_wsgi answers 500
            status, headers, data = answer
            self.start_response(status, headers)
            self.write(data)
            if self.chunked:
                self.handler.wfile.write(b"0\r\n\r\n")
            return
        self.start_response("200 OK", [("Content-Type", "application/xml")])
        self.write(_XML_DECLARATION)
        while True:
            try:
                answer = answers.get(timeout=self.handler.keep_alive_seconds)
                break
            except Empty:
                self.write(b" ")
        body = _INTERNAL_ERROR if answer is None else answer[2]
        if body.startswith(b"<?xml"):
            body = body.partition(b"?>")[2].lstrip()
        self.write(body or _INTERNAL_ERROR)
        if self.chunked:
            self.handler.wfile.write(b"0\r\n\r\n")


def _completes_an_upload(environ: dict[str, Any]) -> bool:
    """The request is S3's CompleteMultipartUpload (``POST /bucket/key?uploadId=``, signed for ``s3``)."""
    query = environ.get("QUERY_STRING", "")
    return (environ.get("REQUEST_METHOD") == "POST" and ("uploadId=" in query)
            and _signing_name(environ.get("HTTP_AUTHORIZATION", "")) == "s3")


#: the start of a slow CompleteMultipartUpload's body, sent with its 200 (botocore parses what follows as XML:
#: spaces may come after the declaration, never before it)
_XML_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>\n'
#: S3's answer to a request that failed inside the service (the application raised)
_INTERNAL_ERROR = (b"<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try "
                   b"again.</Message></Error>")


#: the error a service answers when a request failed inside it (HTTP 500), by the name a request is signed for
#: (its credential scope); any other JSON service's is the common ``InternalFailure``
_SERVICE_ERRORS = {"lambda": "ServiceException", "batch": "ServerException", "s3": "InternalError"}
#: services whose clients read an error from a query protocol's XML ``ErrorResponse`` (the rest, but S3, read JSON)
_QUERY_SERVICES = frozenset({"iam", "sts", "sns", "cloudformation", "ec2"})


def internal_error(environ: dict[str, Any], error: Exception) -> Any:
    """The answer to a request whose handling raised ``error``, as the service answers an internal error: HTTP 500
    with a request id and the service's error code, so that a client names it. Step Functions needs both: its
    interpreter reads the request id of a failed service integration (an HTML 500 without one raised
    ``KeyError('RequestId')`` there, which failed the execution with ``States.Runtime`` past every ``Catch``),
    and a named error such as ``Lambda.ServiceException`` or ``Batch.ServerException`` is one its Retry and
    Catch rules match, as on AWS. The message names the exception, for whoever reads the run's error."""
    service = _signing_name(environ.get("HTTP_AUTHORIZATION", ""))
    code = _SERVICE_ERRORS.get(service, "InternalFailure")
    message = f"the local cloud failed to answer the request: {type(error).__name__}: {error}"
    request_id = _request_id()
    headers = [("x-amzn-requestid", request_id), ("x-amz-request-id", request_id)]
    if service == "s3":
        body = (f"<Error><Code>{code}</Code><Message>{_xml_text(message)}</Message>"
                f"<RequestId>{request_id}</RequestId></Error>").encode()
        headers.append(("Content-Type", "application/xml"))
    elif service in _QUERY_SERVICES:
        body = (f"<ErrorResponse><Error><Type>Receiver</Type><Code>{code}</Code><Message>{_xml_text(message)}"
                f"</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>").encode()
        headers.append(("Content-Type", "text/xml"))
    else:
        body = json.dumps({"__type": code, "message": message}).encode()
        headers += [("Content-Type", "application/json"), ("x-amzn-errortype", code)]

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("500 Internal Server Error", [*headers, ("Content-Length", str(len(body)))])
        return [body]

    return app


def _signing_name(authorization: str) -> str:
    """The service a SigV4 ``Authorization`` header was signed for (``Credential=KEY/DATE/REGION/SERVICE/...``)."""
    scope = authorization.partition("Credential=")[2].partition(",")[0].split("/")
    return scope[3] if len(scope) > 3 else ""


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _answer_whole(app: Any, environ: dict[str, Any], answers: Queue[tuple[str, list[tuple[str, str]], bytes] | None]
                  ) -> None:
    """Run the application on the request and put its status, headers and whole body in ``answers`` (None if
    it raised)."""
    try:
        started: list[Any] = []
        body = app(environ, lambda status, headers, exc_info=None: started.extend((status, headers)))
        try:
            data = b"".join(body)
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
        answers.put((started[0], started[1], data))
    except Exception as error:
        _log.exception("Error on CompleteMultipartUpload %s", environ.get("PATH_INFO"))
        emulator_errors.record(f"POST {environ.get('PATH_INFO')} (CompleteMultipartUpload)", error)
        answers.put(None)


def _request_body(environ: dict[str, Any]) -> Any:
    """The request's body as the application reads it: limited to its ``Content-Length`` (werkzeug's server
    hands the socket's file over whole) or dechunked; marked limited, so the application reads it as it is."""
    stream = environ["wsgi.input"]
    if not environ.get("wsgi.input_terminated"):  # not chunked (werkzeug dechunks it then)
        try:
            length = max(0, int(environ.get("CONTENT_LENGTH") or 0))
        except ValueError:
            length = 0
        stream = environ["wsgi.input"] = LimitedStream(stream, length)
        environ["wsgi.input_terminated"] = True
    return stream


def _read_off(body: Any) -> bool:
    """Read what the application left of the request's body; False if it cannot be (the connection must close)."""
    try:
        while body.read(1 << 20):
            pass
    except Exception:  # a malformed chunked body: the connection cannot go on
        return False
    return True


class LocalServer(ThreadedWSGIServer):
    """werkzeug's threaded server (a thread per connection) with moto's application, keeping track of the
    connections waiting for their next request."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port, DomainDispatcherApplication(create_backend_app), handler=KeepAliveHandler)
        self._waiting: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopping = False

    def idle(self, connection: socket.socket) -> bool:
        """``connection`` waits for its next request; False when the server stops (close it instead)."""
        with self._lock:
            if not self._stopping:
                self._waiting.add(connection)
            return not self._stopping

    def busy(self, connection: socket.socket) -> None:
        with self._lock:
            self._waiting.discard(connection)

    forget = busy

    def close_connections(self) -> None:
        """No connection serves another request: those waiting for one end now (their threads see the end
        and return), the others after the response they are sending."""
        with self._lock:
            self._stopping = True
            waiting, self._waiting = self._waiting, set()
        for connection in waiting:
            with contextlib.suppress(OSError):  # closed meanwhile
                connection.shutdown(socket.SHUT_RDWR)
