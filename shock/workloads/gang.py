"""Data-parallel training across a gang: one process per GPU, joined with torch.distributed.

Every rank builds the same workload from the job's seed, takes its slice of each global
batch (the gang together trains on exactly the job's batch size), and the ranks average
their gradients with one all-reduce before each optimiser step. Gradients are averaged by
hand rather than through DistributedDataParallel: the workloads' losses call submodules
directly (the GAN's generators, say), which DDP's forward hooks would not see.

At every iteration boundary the ranks also agree on whether to stop (a preemption or an
expired lease seen by any rank stops them all at the same step), so no rank is left
waiting in a collective for a peer that has gone.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from shock.core.errors import ShockError

# A rank that cannot reach its gang gives up after this long: the scheduler relaunches the
# gang from its checkpoint.
RENDEZVOUS_TIMEOUT_S = 60.0


class GangMismatchError(ShockError):
    """The gang's ranks do not agree on where they are (different checkpoints)."""


@dataclass(frozen=True, slots=True)
class Rendezvous:
    """This process's place in its gang and where the gang meets (rank 0's host and port)."""

    rank: int
    world_size: int
    master_addr: str
    master_port: int
    local_rank: int = 0

    def __post_init__(self) -> None:
        if self.world_size < 2:
            raise ValueError(f"--world-size: a gang has at least 2 ranks, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"--rank must be in 0..{self.world_size - 1}, got {self.rank}")
        if self.local_rank < 0:
            raise ValueError(f"--local-rank must be >= 0, got {self.local_rank}")
        if not self.master_addr:
            raise ValueError("--master-addr is required for a gang")
        if not 0 < self.master_port < 65536:
            raise ValueError(f"--master-port must be in 1..65535, got {self.master_port}")

    @property
    def is_lead(self) -> bool:
        """Rank 0 writes the checkpoints and reports the gang's progress."""
        return self.rank == 0


def shard_bounds(size: int, rank: int, world_size: int) -> tuple[int, int]:
    """[start, end) of `rank`'s part of a global batch of `size` samples: contiguous parts
    that differ by at most one sample and together cover the batch exactly."""
    return rank * size // world_size, (rank + 1) * size // world_size


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


class Gang:
    """The process group of one gang, seen from one rank."""

    def __init__(self, rendezvous: Rendezvous, device: torch.device) -> None:
        self.rendezvous = rendezvous
        self.device = device
        if device.type == "cuda":
            torch.cuda.set_device(device)  # nccl's communicator binds to the current device
        dist.init_process_group(
            backend_for(device),
            init_method=f"tcp://{rendezvous.master_addr}:{rendezvous.master_port}",
            rank=rendezvous.rank,
            world_size=rendezvous.world_size,
            timeout=datetime.timedelta(seconds=RENDEZVOUS_TIMEOUT_S),
        )

    @property
    def rank(self) -> int:
        return self.rendezvous.rank

    @property
    def world_size(self) -> int:
        return self.rendezvous.world_size

    def shard(self, size: int) -> tuple[int, int]:
        return shard_bounds(size, self.rank, self.world_size)

    def agree_to_stop(self, preempt: bool, lease_expired: bool) -> tuple[bool, bool]:
        """Whether any rank wants to stop, and whether any rank's lease ran out."""
        flags = torch.tensor([float(preempt), float(lease_expired)], device=self.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return bool(flags[0].item()), bool(flags[1].item())

    def check_same_step(self, step: int) -> None:
        """Every rank resumed from the same step (they all load the newest checkpoint)."""
        bounds = torch.tensor([float(step), float(-step)], device=self.device)
        dist.all_reduce(bounds, op=dist.ReduceOp.MAX)
        highest, lowest = int(bounds[0].item()), int(-bounds[1].item())
        if highest != lowest:
            raise GangMismatchError(
                f"the gang's ranks resumed from different steps ({lowest} to {highest})"
            )

    def broadcast_parameters(self, model: nn.Module) -> None:
        """Start every rank from rank 0's weights."""
        for tensor in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(tensor.data, src=0)

    def average_gradients(self, model: nn.Module) -> None:
        """Each parameter's gradient becomes the mean over the ranks (one all-reduce; a
        parameter without a gradient on this rank counts as zero)."""
        parameters = [p for p in model.parameters() if p.requires_grad]
        if not parameters:
            return
        flat = torch.cat([
            (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
            for p in parameters
        ])  # fmt: skip
        dist.all_reduce(flat)
        flat /= self.world_size
        offset = 0
        for parameter in parameters:
            count = parameter.numel()
            parameter.grad = flat[offset : offset + count].view_as(parameter).clone()
            offset += count

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
