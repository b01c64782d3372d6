"""The cluster protocol: fresh stubs, authentication, error replies, the journal's
exactly-once completions, throughput smoothing and the job-line parser."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_procs import SHOCK, SIX_JOBS, write_trace

from shock.cluster.auth import TlsFiles, open_channel, token_metadata
from shock.cluster.jobproc import event_from_message, parse_job_line
from shock.cluster.journal import Journal
from shock.cluster.proto import generate
from shock.cluster.proto import shock_cluster_pb2 as pb
from shock.cluster.proto import shock_cluster_pb2_grpc as pb_grpc
from shock.cluster.runtime.messages import Exit, Progress, Started
from shock.cluster.runtime.runtime import Runtime
from shock.cluster.runtime.state import RuntimeSettings
from shock.cluster.service import ServerAddress, start_server
from shock.core.errors import ShockError
from shock.core.model import JobSpec
from shock.core.results import RunResult
from shock.engine.runner import RunOptions, build_request

TOKEN = "right-token"


def test_checked_in_stubs_match_the_proto(tmp_path: Path) -> None:
    """Fails when someone edits the .proto (or a stub) without regenerating."""
    generated = generate.generate(tmp_path)
    checked_in = Path(generate.__file__).parent
    for path in generated:
        assert path.read_bytes() == (checked_in / path.name).read_bytes(), (
            f"{path.name} is stale: run python -m shock.cluster.proto.generate"
        )


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    trace = write_trace(tmp_path / "one.trace", SIX_JOBS[:1])
    request = build_request(RunOptions(trace=str(trace), cluster="v100=1"))
    scheduler = Runtime(
        request, RuntimeSettings(state_dir=tmp_path / "state", heartbeat_s=0.2)
    )
    server, port = start_server(scheduler, ServerAddress(port=0), TOKEN)
    try:
        yield scheduler, f"127.0.0.1:{port}"
    finally:
        server.stop(grace=0).wait(timeout=5)
        scheduler.journal.close()


def _register(stub: pb_grpc.SchedulerStub, token: str = TOKEN) -> pb.RegisterReply:
    request = pb.RegisterRequest(gpu_type="v100", devices=[pb.Device(index=0, name="cpu")])
    reply: pb.RegisterReply = stub.Register(request, metadata=token_metadata(token), timeout=5)
    return reply


def test_a_peer_with_a_bad_token_is_refused(service: tuple[Runtime, str]) -> None:
    scheduler, address = service
    with open_channel(address) as channel:
        stub = pb_grpc.SchedulerStub(channel)
        for token in ("wrong-token", ""):
            with pytest.raises(grpc.RpcError) as refused:
                _register(stub, token)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            expected = "no token given" if not token else "unknown token"
            assert expected in (refused.value.details() or "")
        assert scheduler.workers == {}
        assert _register(stub).worker_id == "worker-1"


def test_a_worker_with_a_bad_token_exits_with_a_clear_error(
    service: tuple[Runtime, str], tmp_path: Path
) -> None:
    _, address = service
    completed = subprocess.run(
        [*SHOCK, "worker", "--scheduler", address, "--token", "nope", "--simulated",
         "--log-dir", str(tmp_path / "logs"), "--scheduler-timeout", "10"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 3
    assert "refused: " in completed.stderr and "refused this worker's token" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_malformed_requests_get_error_replies_and_the_service_keeps_serving(
    service: tuple[Runtime, str],
) -> None:
    _, address = service
    metadata = token_metadata(TOKEN)
    with open_channel(address) as channel:
        raw = channel.unary_unary("/shock.cluster.v1.Scheduler/Register")
        with pytest.raises(grpc.RpcError) as garbage:
            raw(b"\xff\xff\xff not a protobuf", metadata=metadata, timeout=5)
        assert garbage.value.code() != grpc.StatusCode.OK
        stub = pb_grpc.SchedulerStub(channel)
        refusals = [
            (stub.Register, pb.RegisterRequest(gpu_type="v100"), "at least one device"),
            (stub.Register, pb.RegisterRequest(gpu_type="", devices=[pb.Device()]), "gpu_type"),
            (stub.Heartbeat, pb.HeartbeatRequest(), "worker_id is empty"),
            (stub.ReportEvents, pb.ReportEventsRequest(worker_id="ghost",
             events=[pb.JobEvent(seq=1, progress=pb.Progress(step=1))]), "unknown worker"),
        ]  # fmt: skip
        for method, request, message in refusals:
            with pytest.raises(grpc.RpcError) as refused:
                method(request, metadata=metadata, timeout=5)
            assert refused.value.code() in (
                grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION
            )
            assert message in (refused.value.details() or "")
        worker_id = _register(stub).worker_id
        with pytest.raises(grpc.RpcError) as no_payload:
            stub.ReportEvents(
                pb.ReportEventsRequest(worker_id=worker_id, events=[pb.JobEvent(seq=1)]),
                metadata=metadata, timeout=5,
            )  # fmt: skip
        assert no_payload.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # Still serving: a heartbeat from the registered worker is answered.
        reply = stub.Heartbeat(
            pb.HeartbeatRequest(worker_id=worker_id, wait_s=0.0), metadata=metadata, timeout=5
        )
        assert not reply.reregister


def test_tls_with_a_token(tmp_path: Path) -> None:
    if subprocess.run(["which", "openssl"], capture_output=True).returncode != 0:
        pytest.skip("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    trace = write_trace(tmp_path / "one.trace", SIX_JOBS[:1])
    request = build_request(RunOptions(trace=str(trace), cluster="v100=1"))
    scheduler = Runtime(request, RuntimeSettings(state_dir=tmp_path / "state"))
    server, port = start_server(scheduler, ServerAddress(port=0), TOKEN, TlsFiles(cert, key))
    try:
        with open_channel(f"localhost:{port}", TlsFiles(ca=cert)) as channel:
            assert _register(pb_grpc.SchedulerStub(channel)).worker_id == "worker-1"
        with open_channel(f"localhost:{port}") as plain, pytest.raises(grpc.RpcError):
            _register(pb_grpc.SchedulerStub(plain))
    finally:
        server.stop(grace=0).wait(timeout=5)
        scheduler.journal.close()


def test_a_completion_is_recorded_once(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.add_jobs([JobSpec(job_id=0, job_type="LM (batch size 32)", total_steps=10)])
    assert journal.record_completion(0, at=5.0, run_id=1, step=10)
    assert not journal.record_completion(0, at=9.0, run_id=2, step=10)
    journal.close()
    reopened = Journal(tmp_path)
    assert [row.completed_at for row in reopened.jobs()] == [5.0]
    reopened.close()


def test_job_lines_become_protocol_events() -> None:
    assert parse_job_line("not json") is None
    assert parse_job_line('{"no": "type"}') is None
    started = event_from_message(
        {"type": "started", "job_id": 7, "step": 40, "batch_size": 32, "resumed_from_step": 40}
    )
    assert started is not None and started.payload == Started(40, 32, 40)
    progress = event_from_message({"type": "progress", "step": 5, "steps_per_s": "fast"})
    assert progress is not None and progress.payload == Progress(step=5)  # bad field: ignored
    for line in ('{"type": "progress", "step": 5, "steps_per_s": Infinity}',
                 '{"type": "progress", "step": 5, "steps_per_s": NaN}'):  # fmt: skip
        message = parse_job_line(line)
        assert message is not None
        event = event_from_message(message)
        assert event is not None and event.payload == Progress(step=5)  # no rate: ignored
    rescaled = event_from_message({"type": "progress", "step": 5, "batch_size": 64,
                                   "target_steps": 90})  # fmt: skip
    assert rescaled is not None and rescaled.payload == Progress(5, 0.0, 64, 0.0, 90)
    error = event_from_message({"type": "error", "message": "boom"})
    assert error is not None and error.payload == Exit(reason="error", message="boom")
    assert event_from_message({"type": "lease_request", "step": 3}) is None


def test_stub_generation_is_one_documented_command(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "shock.cluster.proto.generate", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / "shock/cluster/proto/shock_cluster_pb2_grpc.py").exists()


def test_the_cli_and_plugin_loading_do_not_import_grpc() -> None:
    """`shock` works without the cluster extra: gRPC loads only when a cluster command runs."""
    code = (
        "import sys, shock.cli.app\n"
        "from shock.core.plugins import default_registry\n"
        "default_registry().get('backend', 'grpc')\n"
        "assert 'grpc' not in sys.modules and 'google.protobuf' not in sys.modules\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr


def test_a_scripted_worker_runs_a_job_through_the_protocol(tmp_path: Path) -> None:
    """One job, driven by the test as the worker: launch, lease renewal, batch-size approval,
    resent events applied once, completion, shutdown."""
    trace = write_trace(tmp_path / "one.trace", [("LM (batch size 32)", 10)])
    request = build_request(RunOptions(trace=str(trace), cluster="v100=1", round_length_s=5.0))
    settings = RuntimeSettings(state_dir=tmp_path / "state", heartbeat_s=0.2, run_timeout_s=60)
    scheduler = Runtime(request, settings)
    server, port = start_server(scheduler, ServerAddress(port=0), TOKEN)
    results: list[object] = []
    stop = threading.Event()
    loop = threading.Thread(target=lambda: results.append(scheduler.run(stop)), daemon=True)
    loop.start()
    metadata = token_metadata(TOKEN)
    try:
        with open_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.SchedulerStub(channel)
            worker_id = _register(stub).worker_id

            def commands(kind: str) -> list[pb.Command]:
                for _ in range(50):
                    reply = stub.Heartbeat(pb.HeartbeatRequest(worker_id=worker_id, wait_s=0.2),
                                           metadata=metadata, timeout=5)  # fmt: skip
                    found = [c for c in reply.commands if c.WhichOneof("command") == kind]
                    if found or (kind == "shutdown" and reply.shutdown):
                        return found
                raise AssertionError(f"no {kind} command")

            launch = commands("launch")[0].launch
            assert (launch.job_id, launch.target_steps, list(launch.gpus)) == (0, 10, [0])
            assert 5.0 < launch.lease_s <= 5.0 + 2.0  # the round plus its grace

            def report(*events: pb.JobEvent) -> int:
                for event in events:
                    event.run_id, event.job_id = launch.run_id, 0
                reply = stub.ReportEvents(
                    pb.ReportEventsRequest(worker_id=worker_id, events=list(events)),
                    metadata=metadata, timeout=5,
                )  # fmt: skip
                return int(reply.acked_seq)

            started = pb.JobEvent(seq=1, started=pb.Started(step=0, batch_size=32))
            progress = pb.JobEvent(seq=2, progress=pb.Progress(step=5, steps_per_s=40.0))
            wants = pb.JobEvent(seq=3, batch_size_request=pb.BatchSizeRequest(batch_size=64))
            assert report(started, progress, wants) == 3
            assert commands("batch_size")[0].batch_size.batch_size == 64
            renewal = stub.RenewLease(
                pb.RenewLeaseRequest(worker_id=worker_id, run_id=launch.run_id, step=5),
                metadata=metadata, timeout=5,
            )  # fmt: skip
            assert renewal.granted and renewal.seconds > 0
            done = pb.JobEvent(seq=4, exit=pb.Exit(reason="done", step=10, target_steps=10))
            assert report(started, progress, wants, done) == 4  # resent: applied once
            assert report(done) == 4
            commands("shutdown")
            loop.join(timeout=30)
            ended = stub.RenewLease(
                pb.RenewLeaseRequest(worker_id=worker_id, run_id=launch.run_id, step=10),
                metadata=metadata, timeout=5,
            )  # fmt: skip
            assert not ended.granted
    finally:
        stop.set()  # the loop ends even when an assertion above failed
        server.stop(grace=0).wait(timeout=5)
    assert len(results) == 1
    result = results[0]
    assert isinstance(result, RunResult)
    assert [record.job_id for record in result.records] == [0]
    assert scheduler.estimates.estimate("LM (batch size 32)", 1, "v100") == 40.0
    runs = scheduler.journal.runs()
    assert [(run.end_reason, run.last_step) for run in runs] == [("done", 10)]
    scheduler.journal.close()


def test_one_scheduler_per_state_directory(tmp_path: Path) -> None:
    first = Journal(tmp_path)
    with pytest.raises(ShockError, match="another scheduler"):
        Journal(tmp_path)
    first.close()
    Journal(tmp_path).close()  # free again once the first one closed
