"""The dashboard against a scheduler driven directly (no gRPC, no processes): what its
snapshot says about workers, jobs, the allocation and shares, and what its HTTP endpoints
(served by the real uvicorn server, in threads) let readers and logged-in users do."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client", reason="/metrics needs the cluster extra")
import httpx
from cluster_procs import SHOCK
from test_cluster_jobbook import _service, _submit
from test_cluster_state import DrivenWorker, _plan, _start_round

from shock.cluster.dashboard import snapshot as snapshot_module
from shock.cluster.dashboard.app import Dashboard, DashboardServer, start_dashboard
from shock.cluster.dashboard.snapshot import Timeline, take_snapshot
from shock.cluster.runtime.messages import Progress, Started
from shock.cluster.runtime.runtime import Runtime
from shock.cluster.users import User, Users, hash_token

TOKENS = {"alice": "alice-token", "bob": "bob-token", "root": "root-token"}
USERS = Users((
    User("alice", 3.0, hash_token(TOKENS["alice"])),
    User("bob", 1.0, hash_token(TOKENS["bob"])),
    User("root", 1.0, hash_token(TOKENS["root"]), admin=True),
))  # fmt: skip


def _running(scheduler: Runtime) -> tuple[int, int]:
    """alice's job runs on the one GPU, bob's waits: (alice's job, bob's job)."""
    worker = DrivenWorker(scheduler)
    alices, bobs = _submit(scheduler, "alice", steps=1000), _submit(scheduler, "bob")
    scheduler.start(scheduler.request, ())
    scheduler.intake()
    _start_round(scheduler, _plan(alices, bobs))
    (launch,) = worker.launched()
    worker.report(launch.run_id, alices, Started(step=0))
    worker.report(launch.run_id, alices, Progress(step=250))
    return alices, bobs


def test_the_snapshot_shows_the_worker_its_busy_gpu_the_jobs_and_the_allocation(
    tmp_path: Path,
) -> None:
    scheduler = _service(tmp_path / "state")
    alices, bobs = _running(scheduler)
    snapshot = take_snapshot(scheduler)

    (worker,) = snapshot["workers"]
    assert worker["gpus"] == 1 and worker["alive"] and worker["gpu_jobs"] == [alices]
    jobs = {job["id"]: job for job in snapshot["jobs"]}
    assert jobs[alices]["state"] == "running" and jobs[alices]["user"] == "alice"
    assert jobs[alices]["step"] == 250 and jobs[alices]["progress"] == pytest.approx(0.25)
    assert jobs[alices]["gpus"] == [{"worker": worker["id"], "gpus": [0]}]
    assert jobs[bobs]["state"] == "queued" and jobs[bobs]["gpus"] == []
    assert snapshot["allocation"] == [{"job_id": alices, "worker": worker["id"], "gpus": [0]}]
    assert snapshot["round"] == 1
    assert snapshot["totals"] == {"gpus": 1, "gpus_busy": 1, "queued": 1, "running": 1,
                                  "jobs": 2}  # fmt: skip


def test_the_snapshot_keeps_every_active_job_and_only_the_newest_ended_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_module, "ENDED_SHOWN", 2)
    scheduler = _service(tmp_path / "state")
    job_ids = [_submit(scheduler, "alice") for _ in range(5)]
    for job_id in job_ids[1:4]:
        scheduler.cancel("alice", False, job_id)
    snapshot = take_snapshot(scheduler)
    assert [job["id"] for job in snapshot["jobs"]] == [job_ids[0], *job_ids[2:]]
    assert snapshot["totals"]["jobs"] == 5 and snapshot["totals"]["queued"] == 2


def test_the_timeline_keeps_only_its_newest_samples(tmp_path: Path) -> None:
    scheduler = _service(tmp_path / "state")
    timeline = Timeline(limit=3)
    for queued in range(5):
        if queued:
            _submit(scheduler, "alice")
        timeline.add(take_snapshot(scheduler))
    assert [sample["queued"] for sample in timeline.samples()] == [2, 3, 4]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Runtime, DashboardServer]]:
    scheduler = _service(tmp_path / "state")
    server = start_dashboard(Dashboard(scheduler, USERS), "127.0.0.1", 0)
    try:
        yield scheduler, server
    finally:
        server.stop()


def _client(server: DashboardServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30)


def test_the_page_its_assets_and_the_json_endpoints_are_served(
    served: tuple[Runtime, DashboardServer],
) -> None:
    scheduler, server = served
    alices, _ = _running(scheduler)
    with _client(server) as client:
        page = client.get("/")
        assert page.status_code == 200 and "/static/dashboard.js" in page.text
        for asset in ("/static/dashboard.js", "/static/dashboard.css"):
            assert client.get(asset).status_code == 200
        state = client.get("/api/state").json()
        assert [job["state"] for job in state["jobs"] if job["id"] == alices] == ["running"]
        server_dashboard_samples = client.get("/api/timeline").json()["samples"]
        assert server_dashboard_samples and "gpus_busy" in server_dashboard_samples[-1]


def test_metrics_are_served_in_prometheus_text_format_without_a_token(
    served: tuple[Runtime, DashboardServer],
) -> None:
    from prometheus_client import parser
    scheduler, server = served
    _running(scheduler)
    with _client(server) as client:
        scraped = client.get("/metrics")
        assert client.post("/metrics").status_code == 405  # read-only
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parser.text_string_to_metric_families(scraped.text)
        for sample in family.samples
    }
    assert samples[("shock_workers", (("state", "alive"),))] == 1
    assert samples[("shock_gpus", (("gpu_type", "v100"), ("state", "busy")))] == 1
    assert samples[("shock_gpus", (("gpu_type", "v100"), ("state", "idle")))] == 0
    assert samples[("shock_jobs", (("state", "running"), ("user", "alice")))] == 1
    assert samples[("shock_jobs", (("state", "queued"), ("user", "bob")))] == 1
    assert samples[("shock_queue_length", ())] == 1
    assert samples[("shock_user_gpus", (("user", "alice"),))] == 1
    assert samples[("shock_user_share", (("user", "alice"), ("window", "now")))] == 1.0
    assert samples[("shock_user_fair_share", (("user", "bob"), ("window", "now")))] == 0.5
    assert samples[("shock_round", ())] == 1
    assert ("shock_rounds_total", ()) in samples and ("shock_decision_seconds_total", ()) in samples


def test_reading_needs_no_token_but_cancelling_does(
    served: tuple[Runtime, DashboardServer],
) -> None:
    scheduler, server = served
    alices, _ = _running(scheduler)
    with _client(server) as client:
        assert client.get("/api/state").status_code == 200
        refused = client.post(f"/api/jobs/{alices}/cancel")
        assert refused.status_code == 401
        wrong = client.post(f"/api/jobs/{alices}/cancel", headers=_bearer("not-a-token"))
        assert wrong.status_code == 401
        assert client.post("/api/login", headers=_bearer("not-a-token")).status_code == 401
    assert take_snapshot(scheduler)["jobs"][alices]["state"] == "running"


def test_a_user_cancels_their_own_job_but_not_anothers_and_an_admin_any(
    served: tuple[Runtime, DashboardServer],
) -> None:
    scheduler, server = served
    alices, bobs = _running(scheduler)
    with _client(server) as client:
        login = client.post("/api/login", headers=_bearer(TOKENS["bob"]))
        assert login.json() == {"user": "bob", "admin": False}
        refused = client.post(f"/api/jobs/{alices}/cancel", headers=_bearer(TOKENS["bob"]))
        assert refused.status_code == 403 and "belongs to alice" in refused.json()["error"]
        own = client.post(f"/api/jobs/{bobs}/cancel", headers=_bearer(TOKENS["bob"]))
        assert own.status_code == 200 and own.json()["state"] == "cancelled"
        again = client.post(f"/api/jobs/{bobs}/cancel", headers=_bearer(TOKENS["bob"]))
        assert again.status_code == 409
        missing = client.post("/api/jobs/99/cancel", headers=_bearer(TOKENS["root"]))
        assert missing.status_code == 404
        by_admin = client.post(f"/api/jobs/{alices}/cancel", headers=_bearer(TOKENS["root"]))
        assert by_admin.status_code == 200
    states = {job["id"]: job for job in take_snapshot(scheduler)["jobs"]}
    assert states[alices]["state"] == states[bobs]["state"] == "cancelled"
    assert "cancelled by root" in states[alices]["message"]


def test_a_token_in_the_url_or_a_cookie_logs_nobody_in(
    served: tuple[Runtime, DashboardServer],
) -> None:
    scheduler, server = served
    alices, _ = _running(scheduler)
    with _client(server) as client:
        in_url = client.post(f"/api/jobs/{alices}/cancel?token={TOKENS['root']}")
        in_cookie = client.post(f"/api/jobs/{alices}/cancel",
                                headers={"Cookie": f"token={TOKENS['root']}"})  # fmt: skip
        assert in_url.status_code == in_cookie.status_code == 401


def test_requests_naming_another_host_are_refused(
    served: tuple[Runtime, DashboardServer],
) -> None:
    _, server = served
    with _client(server) as client:
        rebound = client.get("/api/state", headers={"Host": f"evil.example:{server.port}"})
        assert rebound.status_code == 421
        assert client.get("/api/state", headers={"Host": f"localhost:{server.port}"}).is_success


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_listening_on_every_address_it_answers_to_any_host_name(tmp_path: Path) -> None:
    server = start_dashboard(Dashboard(_service(tmp_path / "state"), USERS), "0.0.0.0", 0)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as client:
            named = client.get("/api/state", headers={"Host": f"scheduler.lab:{server.port}"})
            assert named.is_success and named.json()["jobs"] == []
    finally:
        server.stop()


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_serve_refuses_a_dashboard_port_that_is_not_one(tmp_path: Path, port: str) -> None:
    done = subprocess.run(
        [*SHOCK, "serve", "--state-dir", str(tmp_path / "state"), "--port", "0",
         "--dashboard", port], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--dashboard" in done.stderr and "0 to 65535" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
