"""The dashboard's web app (Starlette) and its server (uvicorn, in a thread of `shock serve`).

Reading is open to whoever reaches the address (127.0.0.1 by default). Cancelling needs a
user's token in the `Authorization: Bearer` header of the POST: never in a URL or a cookie,
so another site cannot make a logged-in browser cancel anything (it cannot set the header).
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from shock.cluster.dashboard.metrics import metrics_registry, render
from shock.cluster.dashboard.snapshot import Timeline, take_snapshot
from shock.cluster.runtime.errors import NotFoundError, PermissionError_, PreconditionError
from shock.cluster.runtime.runtime import Runtime
from shock.cluster.users import User, Users
from shock.core.errors import InputError

STATIC = Path(__file__).parent / "static"
SAMPLE_EVERY_S = 2.0
_log = logging.getLogger(__name__)
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


@dataclass
class Dashboard:
    scheduler: Runtime
    users: Users
    timeline: Timeline = field(default_factory=Timeline)
    metrics: CollectorRegistry = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = metrics_registry(self.scheduler)

    def sample(self) -> None:
        self.timeline.add(take_snapshot(self.scheduler))

    def caller(self, request: Request) -> User | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.users.identify(token.strip())


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def build_app(
    dashboard: Dashboard, allowed_hosts: tuple[str, ...] | None = _LOCAL_HOSTS
) -> _LocalOnly:
    """The app; `allowed_hosts`: the names requests may address it by (None: any)."""

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=_NO_CACHE)

    async def state(request: Request) -> Response:
        # Off the event loop: the scheduler's lock may be busy for a moment.
        snapshot = await run_in_threadpool(take_snapshot, dashboard.scheduler)
        return JSONResponse(snapshot, headers=_NO_CACHE)

    async def metrics(request: Request) -> Response:
        body = await run_in_threadpool(render, dashboard.metrics)
        return Response(body, media_type=CONTENT_TYPE_LATEST, headers=_NO_CACHE)

    async def timeline(request: Request) -> Response:
        return JSONResponse({"samples": dashboard.timeline.samples()}, headers=_NO_CACHE)

    async def login(request: Request) -> Response:
        user = dashboard.caller(request)
        if user is None:
            return _refuse(401, "no user has this token")
        return JSONResponse({"user": user.name, "admin": user.admin})

    async def cancel(request: Request) -> Response:
        user = dashboard.caller(request)
        if user is None:
            return _refuse(401, "log in with a user token to cancel jobs")
        try:
            job_id = int(request.path_params["job_id"])
        except ValueError:
            return _refuse(400, "a job id is a number")
        try:
            status = await run_in_threadpool(
                dashboard.scheduler.cancel, user.name, user.admin, job_id
            )
        except PermissionError_ as exc:
            return _refuse(403, str(exc))
        except NotFoundError as exc:
            return _refuse(404, str(exc))
        except PreconditionError as exc:
            return _refuse(409, str(exc))
        return JSONResponse({"job_id": status.job_id, "state": status.state})

    app = Starlette(routes=[
        Route("/", index),
        Route("/api/state", state),
        Route("/api/timeline", timeline),
        Route("/metrics", metrics),
        Route("/api/login", login, methods=["POST"]),
        Route("/api/jobs/{job_id}/cancel", cancel, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])  # fmt: skip
    return _LocalOnly(app, allowed_hosts)


_NO_CACHE = {"Cache-Control": "no-store"}


class _LocalOnly:
    """Refuses requests whose Host header names another site (DNS rebinding)."""

    def __init__(self, app: Starlette, hosts: tuple[str, ...] | None) -> None:
        self.app, self.hosts = app, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.hosts is not None:
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in self.hosts:
                response = _refuse(421, f"this dashboard answers on {', '.join(self.hosts)}")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


@dataclass
class DashboardServer:
    """A running dashboard: its address, and how to stop it."""

    host: str
    port: int
    _stop: threading.Event
    _threads: tuple[threading.Thread, ...]
    _server: object

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def stop(self) -> None:
        self._stop.set()
        self._server.should_exit = True  # type: ignore[attr-defined]
        for thread in self._threads:
            thread.join(timeout=5)


def start_dashboard(dashboard: Dashboard, host: str, port: int) -> DashboardServer:
    """Serve the dashboard from threads of this process; returns once it listens."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror})",
                         field="--dashboard") from exc  # fmt: skip
    sock.listen(128)  # connections wait in the backlog until uvicorn takes the socket
    bound = int(sock.getsockname()[1])
    # On loopback only local names are expected: anything else is a rebound DNS name. On
    # another address the machine's names are many; the operator chose to expose it.
    hosts = _LOCAL_HOSTS if host in ("127.0.0.1", "::1", "localhost") else None
    config = uvicorn.Config(build_app(dashboard, hosts), log_level="warning", access_log=False,
                            lifespan="off")  # fmt: skip
    server = uvicorn.Server(config)
    stop = threading.Event()

    def sample_until_stopped() -> None:
        while not stop.is_set():
            try:
                dashboard.sample()
            except Exception:  # a bad sample must not end the time series
                _log.exception("dashboard sample failed")
            stop.wait(SAMPLE_EVERY_S)

    threads = (
        threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                         name="dashboard"),
        threading.Thread(target=sample_until_stopped, daemon=True, name="dashboard-sampler"),
    )  # fmt: skip
    for thread in threads:
        thread.start()
    return DashboardServer(host, bound, stop, threads, server)
