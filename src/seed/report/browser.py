"""Headless Chromium over the DevTools pipe: how the HTML report is checked in a real browser and photographed.

`--remote-debugging-pipe` speaks the DevTools protocol over file descriptors 3 and 4 (NUL-separated JSON), so no
port, websocket library or driver binary is needed. Console errors and uncaught exceptions are collected as they
arrive, so a test can assert that the page rendered without any.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless browser with one page. Use as a context manager."""

    def __init__(self, executable: str | None = None, width: int = 1400, height: int = 1000, timeout: float = 30.0):
        self.executable = executable or find_chromium()
        if self.executable is None:
            raise BrowserError(f"no Chromium found (looked for {', '.join(CANDIDATES)})")
        self.size, self.timeout = (width, height), timeout
        self.errors: list[str] = []  # console errors and uncaught exceptions, as text
        self._next_id, self._buffer, self._session = 0, b"", None

    def __enter__(self) -> Browser:
        self._profile = tempfile.TemporaryDirectory(prefix="seed-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [
            self.executable,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            f"--user-data-dir={self._profile.name}",
            f"--window-size={self.size[0]},{self.size[1]}",
        ]

        def on_fds_3_and_4():  # in the child, before exec: the pipe ends where the browser expects them
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        # close_fds=False: Python's own descriptors are not inheritable (PEP 446), the two dup2 copies are
        self._proc = subprocess.Popen(
            args, preexec_fn=on_fds_3_and_4, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        target = self.send("Target.createTarget", {"url": "about:blank"}, browser=True)["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, browser=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.send("Browser.close", browser=True)
        except (BrowserError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()

    # -- protocol
    def send(self, method: str, params: dict | None = None, browser: bool = False) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if not browser:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._note_event(reply)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline or self._proc.poll() is not None:
                raise BrowserError("the browser did not answer in time (or exited)")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise BrowserError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _note_event(self, event: dict) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(details.get("exception", {}).get("description") or details.get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(params["entry"].get("text", ""))

    # -- page
    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float | None = None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise BrowserError(f"timed out waiting for {expression!r}")

    def open(self, path: Path, fragment: str = "") -> float:
        """Load a local file and wait until the page says it is ready; the seconds it took."""
        start = time.monotonic()
        url = Path(path).resolve().as_uri() + (f"#{fragment}" if fragment else "")
        self.send("Page.navigate", {"url": "about:blank"})  # a new fragment alone would not reload the page
        self.wait_for("location.href === 'about:blank' && document.readyState === 'complete'")
        self.send("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && document.body && document.body.dataset.ready === '1'")
        return time.monotonic() - start

    def screenshot(self, out: Path, full_page: bool = False) -> Path:
        params = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            width, height = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        Path(out).write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params)["data"]))
        return Path(out)
