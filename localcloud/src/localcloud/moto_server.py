"""moto's lifecycle: a threaded HTTP server in this process on a free loopback port, so the Lambda handlers
and Batch children (separate processes) reach the same backends through ``AWS_ENDPOINT_URL``. The server is
moto's application served as :mod:`.http_server` serves it (connections kept alive), in place of moto's
``ThreadedMotoServer``."""

from __future__ import annotations

import logging
import threading
import urllib.request
import warnings
from typing import Any, ClassVar

from localcloud import patches


class MotoServer:
    #: the server started last in this process: moto's backends (process-wide) hold its cloud's deployment
    _newest: ClassVar[MotoServer | None] = None

    def __init__(self) -> None:
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""
        self.port = 0

    def start(self) -> str:
        """Start moto (patched) and empty its backends; returns the endpoint URL."""
        # moto warns that its server wants every optional dependency; flask is the one it uses here
        warnings.filterwarnings("ignore", message="When using MotoServer", category=UserWarning)
        from localcloud.http_server import LocalServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # the interpreter logs every state failure it handles (Catch) as an error: runs report their own
        logging.getLogger("moto").setLevel(logging.CRITICAL)
        patches.apply_all()
        self._server = LocalServer("127.0.0.1", 0)
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-server", daemon=True)
        self._thread.start()
        host, self.port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{self.port}"
        MotoServer._newest = self
        return self.endpoint

    def reset(self) -> None:
        """Empty moto's backends: they are process-wide, so a second cloud in this process starts empty."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")  # noqa: S310 - loopback
        with urllib.request.urlopen(request, timeout=60):  # noqa: S310
            pass

    def stop(self) -> None:
        if self._server is not None:
            if MotoServer._newest is self:  # else the backends are a newer cloud's, started meanwhile
                self.reset()  # frees the objects held in memory
                MotoServer._newest = None
            self._server.shutdown()  # no new connection
            self._server.close_connections()  # nor a request on one kept open
            self._server.server_close()
            if self._thread is not None:
                self._thread.join()
            self._server = self._thread = None
