"""The dashboard in a real headless Chromium, driven over the DevTools protocol: a real
`shock serve --dashboard`, a real worker, a tiny real job submitted with `shock submit`; the
page shows it running on the worker's GPU and then done, without a console error."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cluster_procs import SHOCK, Processes, free_port, job_command_options, query, wait_for

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client", reason="the dashboard's /metrics needs the cluster extra")
httpx = pytest.importorskip("httpx")
sync_client = pytest.importorskip("websockets.sync.client")

pytestmark = pytest.mark.slow

TOKEN = "dashboard-test-token"
JOB = ["--job-type", "LM (batch size 20)", "--steps", "200"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class DevTools:
    """One page of a browser over the DevTools protocol; keeps the events it has read."""

    socket: Any
    events: list[dict[str, Any]] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        self.socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == call_id:
                assert "error" not in message, f"{method}: {message['error']}"
                return dict(message.get("result", {}))
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def errors(self) -> list[dict[str, Any]]:
        """Exceptions, console.error calls and error log entries (failed loads, say)."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown" or (
                method == "Runtime.consoleAPICalled" and params.get("type") == "error"
            ) or (method == "Log.entryAdded" and params["entry"]["level"] == "error"):
                found.append(event)
        return found


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[DevTools]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    profile = tmp_path / "chromium-profile"
    process = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", "--remote-debugging-port=0",
         "about:blank"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "chromium.log").open("wb"),
        start_new_session=True,
    )  # fmt: skip
    try:
        active = profile / "DevToolsActivePort"
        wait_for(lambda: len(_lines(active)) >= 2, 60, "Chromium's DevTools port")
        port = _lines(active)[0]
        pages: list[dict[str, Any]] = []

        def page_listed() -> bool:
            listed = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
            pages[:] = [target for target in listed if target["type"] == "page"]
            return bool(pages)

        wait_for(page_listed, 60, "Chromium's page")
        with sync_client.connect(pages[0]["webSocketDebuggerUrl"], max_size=None) as socket:
            tools = DevTools(socket)
            for domain in ("Runtime", "Log", "Page"):
                tools.call(f"{domain}.enable")
            yield tools
    finally:
        process.kill()
        process.wait(timeout=30)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _start_service(tmp: Path, dashboard_port: int) -> tuple[Processes, str, Path]:
    procs = Processes(tmp / "logs")
    port = free_port()
    state_dir, address = tmp / "state", f"127.0.0.1:{port}"
    env = {"SHOCK_TOKEN": TOKEN}
    procs.start("serve", [
        *SHOCK, "serve", "--state-dir", str(state_dir), "--port", str(port), "--policy", "fifo",
        "--round-length", "4", "--heartbeat", "0.5", "--dashboard", str(dashboard_port),
    ], env)  # fmt: skip
    procs.start("worker", [
        *SHOCK, "worker", "--scheduler", address, "--gpus", "1", "--gpu-type", "v100",
        "--simulated", "--heartbeat", "0.5", "--checkpoint-every", "1",
        "--log-dir", str(tmp / "worker-logs"), *job_command_options(),
    ], env)  # fmt: skip
    wait_for(lambda: bool(query(state_dir, "SELECT 1 FROM workers")), 120, "the worker")
    return procs, address, state_dir


def test_the_page_shows_a_submitted_job_running_then_done(
    tmp_path: Path, browser: DevTools
) -> None:
    dashboard_port = free_port()
    procs, address, _ = _start_service(tmp_path, dashboard_port)
    try:
        url = f"http://127.0.0.1:{dashboard_port}/"
        wait_for(lambda: _answers(url), 120, "the dashboard")
        browser.call("Page.navigate", url=url)
        wait_for(lambda: browser.evaluate("document.readyState") == "complete", 60, "the page")
        wait_for(lambda: browser.evaluate(_WORKER_ROWS) == 1, 60, "the worker on the page")

        job_id = _submit(address, *JOB)

        seen: list[str] = []

        def state_is(wanted: str) -> bool:
            state = browser.evaluate(_job_cell(job_id, "state"))
            if state and (not seen or seen[-1] != state):
                seen.append(state)
            return bool(state == wanted)

        wait_for(lambda: state_is("running"), 180, f"job {job_id} running on the page")
        # While it runs, its worker's one GPU shows it.
        held = browser.evaluate("[...document.querySelectorAll('#workers .gpu.held')]"
                                ".map((gpu) => gpu.textContent)")  # fmt: skip
        assert held == [str(job_id)] or state_is("done"), held
        wait_for(lambda: state_is("done"), 300, f"job {job_id} done on the page")
        assert seen[0] in ("queued", "running") and seen[-2:] == ["running", "done"], seen
        progress = browser.evaluate(_job_cell(job_id, "progress"))
        assert progress == "200 / 200", progress
        # The time series is drawn (utilisation and queue), and the job's user has a share.
        wait_for(lambda: browser.evaluate("document.querySelectorAll('#chart polyline').length")
                 == 2, 60, "the utilisation and queue chart")  # fmt: skip
        assert browser.evaluate("[...document.querySelectorAll('#shares tbody tr')]"
                                ".map((row) => row.dataset.user)") == ["admin"]  # fmt: skip
        assert browser.errors() == []

        # Read-only without a token: a running job has no cancel button until one logs in.
        long_job = _submit(address, "--job-type", "ResNet-18 (batch size 32)", "--steps",
                           str(10**7))  # fmt: skip
        wait_for(lambda: browser.evaluate(_job_cell(long_job, "state")) == "running", 180,
                 f"job {long_job} running on the page")  # fmt: skip
        assert browser.evaluate("document.querySelectorAll('button.cancel').length") == 0
        browser.evaluate(f"document.getElementById('token').value = {json.dumps(TOKEN)};"
                         "document.querySelector('#login button').click()")  # fmt: skip
        wait_for(lambda: browser.evaluate(_CANCEL_BUTTONS) == [str(long_job)], 60,
                 "a cancel button for the running job once logged in")  # fmt: skip
        assert browser.evaluate("document.getElementById('viewer-name').textContent") == (
            "admin (admin)"
        )
        assert browser.evaluate("document.getElementById('token').value") == ""
        browser.evaluate(f"document.querySelector('#jobs tr[data-job-id=\"{long_job}\"] "
                         "button.cancel').click()")  # fmt: skip
        wait_for(lambda: browser.evaluate(_job_cell(long_job, "state")) == "cancelled", 60,
                 f"job {long_job} cancelled on the page")  # fmt: skip
        assert browser.evaluate(_CANCEL_BUTTONS) == []
        assert browser.errors() == []
    finally:
        procs.stop_all()


def _submit(address: str, *args: str) -> int:
    submitted = subprocess.run(
        [*SHOCK, "submit", *args, "--scheduler", address], capture_output=True, text=True,
        timeout=120, env={**os.environ, "SHOCK_TOKEN": TOKEN},
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    return int(submitted.stdout.strip().splitlines()[-1])


_WORKER_ROWS = "document.querySelectorAll('#workers tbody tr').length"
_CANCEL_BUTTONS = ("[...document.querySelectorAll('#jobs tr:has(button.cancel)')]"
                   ".map((row) => row.dataset.jobId)")  # fmt: skip


def _job_cell(job_id: int, cell: str) -> str:
    return (f"document.querySelector('#jobs tr[data-job-id=\"{job_id}\"] td.{cell}')"
            "?.textContent ?? null")  # fmt: skip


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=10).status_code == 200
    except httpx.TransportError:
        return False
