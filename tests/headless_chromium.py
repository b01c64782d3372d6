"""Headless Chromium for the report's test: open a page over the DevTools protocol, collect its
console errors and outside requests, evaluate JavaScript in it, and take a screenshot."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
# Safety limits so a broken browser fails the test instead of hanging it; the test waits for
# states (the port file, the load event), never for a fixed time.
STARTUP_LIMIT_S = 60.0
COMMAND_LIMIT_S = 60.0


@dataclass
class PageSession:
    socket: Any
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    _next_id: int = 0

    def _record(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.console_errors.append(json.dumps(params.get("args")))
        elif method == "Runtime.exceptionThrown":
            self.console_errors.append(json.dumps(params.get("exceptionDetails")))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.console_errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self.socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self._record(message)

    def wait_for(self, event: str) -> None:
        while True:
            message = json.loads(self.socket.recv())
            self._record(message)
            if message.get("method") == event:
                return

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")


@contextmanager
def open_page(url: str) -> Iterator[PageSession]:
    """Start Chromium, load `url` in its page, and hand back the session after the load event."""
    import websocket  # the dev extra's websocket-client

    assert CHROMIUM is not None
    # Chromium's helper processes may still write to the profile as it is removed.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [CHROMIUM, *FLAGS, "--remote-debugging-port=0", "--remote-allow-origins=*",
             f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port = _debugging_port(Path(profile), process)
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list").read())
            page = next(t for t in targets if t["type"] == "page")
            socket = websocket.create_connection(
                page["webSocketDebuggerUrl"], timeout=COMMAND_LIMIT_S, suppress_origin=True
            )
            try:
                session = PageSession(socket)
                for domain in ("Runtime", "Log", "Network", "Page"):
                    session.call(f"{domain}.enable")
                session.call("Emulation.setDeviceMetricsOverride", width=1200, height=900,
                             deviceScaleFactor=1, mobile=False)
                session.call("Page.navigate", url=url)
                session.wait_for("Page.loadEventFired")
                yield session
            finally:
                socket.close()
        finally:
            process.terminate()
            process.wait(timeout=COMMAND_LIMIT_S)


def _debugging_port(profile: Path, process: subprocess.Popen[bytes]) -> int:
    """Chromium writes the port it picked into DevToolsActivePort once it listens."""
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before listening")
        if port_file.exists():
            lines = port_file.read_text().splitlines()
            if lines and lines[0].isdigit():
                return int(lines[0])
        time.sleep(0.05)
    raise RuntimeError("chromium did not open its DevTools port")


def screenshot(url: str, output: Path, width: int = 1200, height: int = 2400) -> None:
    """Chromium's own `--screenshot` of the page, as a user would take it."""
    assert CHROMIUM is not None
    # Chromium's helper processes may still write to the profile as it is removed.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={output}",
             f"--window-size={width},{height}", url],
            check=True,
            capture_output=True,
            timeout=120,
        )
