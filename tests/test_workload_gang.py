"""A job on several GPUs as a gang of processes: the rendezvous fields of the job contract,
the split of each batch over the ranks, and real 2-rank runs of the harness on loopback
(gloo on the CPU): trained like one process, preempted and resumed as one."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest
import torch
from cluster_procs import free_port

from shock.cluster.jobproc import job_arguments
from shock.cluster.runtime.messages import Launch
from shock.workloads.checkpoint import load_latest_checkpoint
from shock.workloads.gang import Rendezvous, shard_bounds
from shock.workloads.harness import JobConfig
from shock.workloads.run import build_parser

JOB_TYPE = "Recommendation (batch size 32)"
WAIT_S = 120  # bounds a wait for a state; never a duration the test relies on


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 7])
def test_shard_bounds_split_every_batch_exactly_and_evenly(world_size: int) -> None:
    for size in range(0, 40):
        parts = [shard_bounds(size, rank, world_size) for rank in range(world_size)]
        covered = [i for start, end in parts for i in range(start, end)]
        assert covered == list(range(size))
        lengths = [end - start for start, end in parts]
        assert max(lengths) - min(lengths) <= 1


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ({"world_size": 1}, "--world-size"),
        ({"rank": 2}, "--rank"),
        ({"rank": -1}, "--rank"),
        ({"master_addr": ""}, "--master-addr"),
        ({"master_port": 0}, "--master-port"),
        ({"local_rank": -1}, "--local-rank"),
    ],
)
def test_rendezvous_rejects_bad_fields(fields: dict[str, Any], complaint: str) -> None:
    good: dict[str, Any] = {"rank": 1, "world_size": 2, "master_addr": "127.0.0.1",
                            "master_port": 29500}  # fmt: skip
    with pytest.raises(ValueError, match=complaint):
        Rendezvous(**(good | fields))


def test_a_gang_trains_static() -> None:
    with pytest.raises(ValueError, match="a gang trains static"):
        JobConfig(1, JOB_TYPE, 10, Path("x"), adaptation="gns",
                  rendezvous=Rendezvous(0, 2, "127.0.0.1", 29500))  # fmt: skip


def test_launch_rendezvous_fields_reach_the_job_arguments() -> None:
    launch = Launch(
        run_id=7, job_id=3, job_type=JOB_TYPE, target_steps=10, checkpoint_dir="ck",
        gpus=(1,), lease_s=0.0, rank=1, world_size=2, local_rank=0, master_addr="10.0.0.5",
        master_port=24680,
    )  # fmt: skip
    args = build_parser().parse_args(job_arguments(launch, "cpu", None))
    assert (args.rank, args.world_size, args.local_rank) == (1, 2, 0)
    assert (args.master_addr, args.master_port) == ("10.0.0.5", 24680)
    single = Launch(run_id=8, job_id=3, job_type=JOB_TYPE, target_steps=10, checkpoint_dir="ck",
                    gpus=(0,), lease_s=0.0)  # fmt: skip
    alone = build_parser().parse_args(job_arguments(single, "cpu", None))
    assert alone.world_size == 1 and alone.master_addr == ""


class JobRun:
    """One `python -m shock.workloads.run` process; its stdout messages in a queue."""

    def __init__(self, args: list[str], stderr: Path) -> None:
        self.stderr_path = stderr
        with stderr.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "shock.workloads.run", *args],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            )  # fmt: skip
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            self.messages.put(json.loads(line))
        self.messages.put(None)

    def wait_for(self, kind: str) -> dict[str, Any]:
        while True:
            message = self.messages.get(timeout=WAIT_S)
            if message is None:
                raise AssertionError(f"exited before a {kind!r} message: {self.seen}\n"
                                     + self.stderr_path.read_text())  # fmt: skip
            self.seen.append(message)
            if message["type"] == kind:
                return message

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def finish(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=WAIT_S)


def _args(checkpoints: Path, steps: int, *extra: str) -> list[str]:
    return ["--job-id", "1", "--job-type", JOB_TYPE, "--target-steps", str(steps),
            "--checkpoint-dir", str(checkpoints), "--seed", "3", "--report-every-s", "0.001",
            *extra]  # fmt: skip


def _gang(tmp_path: Path, checkpoints: Path, steps: int, name: str) -> list[JobRun]:
    port = free_port()
    gang = ["--world-size", "2", "--master-addr", "127.0.0.1", "--master-port", str(port)]
    return [
        JobRun(_args(checkpoints, steps, *gang, "--rank", str(rank)),
               tmp_path / f"{name}-rank-{rank}.log")
        for rank in range(2)
    ]  # fmt: skip


def test_a_gang_of_two_trains_the_same_model_as_one_process(tmp_path: Path) -> None:
    steps = 30
    ranks = _gang(tmp_path, tmp_path / "gang", steps, "gang")
    alone = JobRun(_args(tmp_path / "alone", steps), tmp_path / "alone.log")
    exits = [run.wait_for("exit") for run in [*ranks, alone]]
    assert [(e["reason"], e["step"]) for e in exits] == [("done", steps)] * 3
    assert [run.finish() for run in [*ranks, alone]] == [0, 0, 0]
    # Only rank 0 reports progress and writes checkpoints; rank 1 logs its own part.
    lead, other = ranks
    assert [m["type"] for m in other.seen] == ["started", "exit"]
    losses = [m["loss"] for m in lead.seen if m["type"] == "progress"]
    assert len(losses) >= 2 and losses[-1] < losses[0]
    assert "rank 1/2: step" in other.stderr_path.read_text()
    # The halves' averaged gradient is the whole batch's: the same weights as alone.
    gang_state = load_latest_checkpoint(tmp_path / "gang")
    alone_state = load_latest_checkpoint(tmp_path / "alone")
    assert gang_state is not None and alone_state is not None
    assert gang_state[1]["step"] == alone_state[1]["step"] == steps
    for name, tensor in alone_state[1]["model"].items():
        assert torch.allclose(gang_state[1]["model"][name], tensor, atol=1e-4), name


def test_a_gang_stops_at_one_step_resumes_there_and_ends_when_a_rank_dies(
    tmp_path: Path,
) -> None:
    checkpoints = tmp_path / "ck"
    ranks = _gang(tmp_path, checkpoints, 10**7, "first")
    ranks[0].wait_for("progress")
    ranks[1].send({"type": "preempt"})  # only rank 1 hears it
    exits = [run.wait_for("exit") for run in ranks]
    assert {e["reason"] for e in exits} == {"preempted"}
    stopped = exits[0]["step"]
    assert stopped > 0 and exits[1]["step"] == stopped
    # Rank 0 wrote the checkpoint of that step; rank 1 wrote none.
    assert [m["step"] for m in ranks[0].seen if m["type"] == "checkpoint"][-1] == stopped
    assert [run.finish() for run in ranks] == [0, 0]
    resumed = _gang(tmp_path, checkpoints, 10**7, "second")
    starts = [run.wait_for("started") for run in resumed]
    assert [s["resumed_from_step"] for s in starts] == [stopped, stopped]
    progress = resumed[0].wait_for("progress")
    assert progress["step"] > stopped
    # A rank that dies ends the others: they fail on the missing peer instead of waiting.
    resumed[1].process.send_signal(signal.SIGKILL)
    assert resumed[0].wait_for("error")["message"]
    assert resumed[0].finish() == 1
    resumed[1].process.wait(timeout=WAIT_S)
