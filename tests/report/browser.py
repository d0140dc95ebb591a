"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No driver binary and no websocket library: Chromium reads commands on fd 3 and writes replies and
events on fd 4, each a JSON message ended by a NUL byte. Enough for the report tests: open a page
with the network blocked, collect console errors, exceptions and every request the page makes,
evaluate an expression, take a screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: what this machine needs for a headless start (no sandbox as root, no background requests)
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio",
    # every host name fails to resolve: nothing can leave the machine, whatever the page asks for
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
#: requests that are allowed: the page itself and inline data
LOCAL_SCHEMES = ("file:", "data:", "about:")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@dataclass
class PageLoad:
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    #: URLs the page asked for other than itself and inline data
    requests: list[str] = field(default_factory=list)


class Browser:
    def __init__(self, executable: str, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self._executable = executable
        try:
            self._launch()
        except TimeoutError:
            # a start that never answers (seen once on a loaded 2-core machine, every report test of the module
            # then erroring at setup) is the machine's, not the report's: one fresh launch, then the error
            self._shutdown()
            self._launch()

    def _launch(self) -> None:
        self._profile = tempfile.mkdtemp(prefix="seqlake-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def move_fds() -> None:
            # in the child: its command pipe on fd 3, its reply pipe on fd 4 (copied aside first, in case
            # either already is 3 or 4); dup2 makes them inheritable, every other descriptor closes on exec
            commands, replies = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self.proc = subprocess.Popen(
            [self._executable, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # close_fds would close fds 3 and 4 after preexec_fn made them; Python's own are close-on-exec
            preexec_fn=move_fds, close_fds=False,  # noqa: PLW1509
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise TimeoutError("no message from Chromium")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium closed its pipe (exit code {self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, session=self.session, **params)

    def wait_for(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read_message(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def open(self, url: str, viewport: tuple[int, int] = (1280, 900)) -> PageLoad:
        """Load ``url`` offline; what went wrong while it loaded and drew itself."""
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.page(f"{domain}.enable")
        self.page("Network.emulateNetworkConditions", offline=True, latency=0, downloadThroughput=0,
                  uploadThroughput=0)
        self.page("Emulation.setDeviceMetricsOverride", width=viewport[0], height=viewport[1], deviceScaleFactor=1,
                  mobile=False)
        self.page("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        self.evaluate("new Promise(r => requestAnimationFrame(() => r(true)))")
        load = PageLoad()
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                load.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                load.console_errors.append(params["entry"].get("text", ""))
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                load.exceptions.append(str(details.get("exception", {}).get("description", details.get("text"))))
            elif method == "Network.requestWillBeSent":
                request_url = params["request"]["url"]
                if not request_url.startswith(LOCAL_SCHEMES):
                    load.requests.append(request_url)
        self.events.clear()
        return load

    def evaluate(self, expression: str) -> Any:
        reply = self.page("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"evaluate failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """The whole page (not only the viewport) as a PNG."""
        width, height = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        data = self.page("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close")
        self._shutdown()

    def _shutdown(self) -> None:
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
