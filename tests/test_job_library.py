"""`shock.job` in process: a local session runs to the end and resumes from its checkpoint;
under an agent (an in-memory channel) it reports, stops when preempted or its lease runs
out, changes batch size on approval, and fails with a one-line reason for an object that
cannot be checkpointed. Importing it imports no torch."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from shock.job import CheckpointError
from shock.job.channel import MemoryChannel, NullChannel
from shock.job.checkpoint import checkpoints, load_latest_object, save_object
from shock.job.environment import JobEnvironmentError, read_environment
from shock.job.messages import (
    BatchSizeApproval,
    BatchSizeRequest,
    CheckpointWritten,
    Error,
    Exit,
    LeaseGrant,
    Preempt,
    Progress,
    Started,
)
from shock.job.session import Session


def _session(tmp_path: Path, channel: object | None = None, **env: str) -> Session:
    environment = read_environment({"SHOCK_CHECKPOINT_EVERY_S": "3600", **env})
    return Session(environment, channel or NullChannel(), checkpoint_dir=tmp_path)  # type: ignore[arg-type]


def _loop(session: Session, total: int, on_step: object = None) -> dict[str, int]:
    """The issue's loop."""
    with session as s:
        state = s.restore() or {"step": 0}
        for step in s.steps(total=total, start=state["step"]):
            if callable(on_step):
                on_step(step)
            state["step"] = step + 1
            if s.checkpoint_due():
                s.checkpoint(state)
        s.checkpoint(state)
    return state


def test_importing_shock_job_imports_no_torch() -> None:
    code = "import sys; from shock import job; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_a_local_session_runs_to_the_end_and_a_rerun_resumes(tmp_path: Path) -> None:
    assert _loop(_session(tmp_path), 50) == {"step": 50}
    assert load_latest_object(tmp_path) is not None
    seen: list[int] = []
    assert _loop(_session(tmp_path), 80, seen.append) == {"step": 80}
    assert seen == list(range(50, 80))  # resumed at its checkpoint


def test_under_an_agent_it_reports_and_stops_at_the_step_it_is_preempted(tmp_path: Path) -> None:
    channel = MemoryChannel()
    session = _session(tmp_path, channel, SHOCK_CHANNEL="0,1")

    def preempt_at_7(step: int) -> None:
        if step == 7:
            channel.push(Preempt())

    assert _loop(session, 2000, preempt_at_7) == {"step": 8}
    assert session.stopped == "preempted"
    sent = channel.sent
    assert sent[0] == Started(0, 0, 0, 0)
    assert [m for m in sent if isinstance(m, CheckpointWritten)][-1].step == 8
    assert sent[-1] == Exit("preempted", 8, 2000)
    assert any(isinstance(m, Progress) and m.step == 8 for m in sent)
    # The next run resumes there and finishes.
    channel = MemoryChannel()
    assert _loop(_session(tmp_path, channel, SHOCK_CHANNEL="0,1"), 20) == {"step": 20}
    assert channel.sent[0] == Started(0, 8, 0, 8) and channel.sent[-1] == Exit("done", 20, 20)


def test_an_expired_lease_stops_the_loop(tmp_path: Path) -> None:
    channel = MemoryChannel()
    session = _session(tmp_path, channel, SHOCK_CHANNEL="0,1")

    def cut_lease(step: int) -> None:
        if step == 3:
            channel.push(LeaseGrant(steps=None, seconds=0.0))

    assert _loop(session, 100, cut_lease)["step"] == 4
    assert channel.sent[-1] == Exit("lease_expired", 4, 100)


def test_a_batch_size_request_takes_effect_once_approved(tmp_path: Path) -> None:
    channel = MemoryChannel(
        lambda m: [BatchSizeApproval(m.batch_size)] if isinstance(m, BatchSizeRequest) else []
    )
    session = _session(tmp_path, channel, SHOCK_CHANNEL="0,1", SHOCK_BATCH_SIZE="16")
    sizes: list[int | None] = []
    with session as s:
        for step in s.steps(total=5):
            sizes.append(s.batch_size)
            if step == 1:
                s.request_batch_size(64)
    assert sizes == [16, 16, 64, 64, 64]
    assert BatchSizeRequest(1, 64, "accordion") in channel.sent


def test_an_object_that_does_not_pickle_fails_the_job_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="cannot checkpoint a dict at step 3"):
        save_object(tmp_path, 3, {"lock": threading.Lock()})
    assert checkpoints(tmp_path) == [] and list(tmp_path.iterdir()) == []  # nothing left
    channel = MemoryChannel()
    with pytest.raises(CheckpointError), _session(tmp_path, channel, SHOCK_CHANNEL="0,1") as s:
        for _ in s.steps(total=3):
            pass
        s.checkpoint({"lock": threading.Lock()})
    (error,) = [m for m in channel.sent if isinstance(m, Error)]
    assert error.message.startswith("CheckpointError: cannot checkpoint a dict at step 3")
    assert "\n" not in error.message


def test_a_torn_checkpoint_is_skipped_for_the_previous_one(tmp_path: Path) -> None:
    save_object(tmp_path, 5, {"step": 5})
    (tmp_path / "ckpt-9.pt").write_bytes(b"\x80\x04 not a whole pickle")
    found = load_latest_object(tmp_path)
    assert found is not None and found[1] == {"step": 5}


def test_a_bad_contract_variable_names_itself() -> None:
    with pytest.raises(JobEnvironmentError, match="SHOCK_CHANNEL"):
        read_environment({"SHOCK_CHANNEL": "three"})
    with pytest.raises(JobEnvironmentError, match="SHOCK_LEASE_S"):
        read_environment({"SHOCK_LEASE_S": "-1"})
