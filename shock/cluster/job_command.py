"""A submitted job that runs a person's own command (`shock submit -- COMMAND ARGS...`):
what the worker runs, where, with which extra environment; kept in the journal as JSON."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

# The step count the scheduler assumes for a command submitted without --steps, until the
# job says its own (shock.job's `steps(total=...)`, in its first progress report).
UNSTATED_STEPS = 1000


@dataclass(frozen=True, slots=True)
class JobCommand:
    argv: tuple[str, ...]
    workdir: str
    env: tuple[tuple[str, str], ...] = ()
    steps: int = 0  # as submitted; 0: the job says

    @property
    def program(self) -> str:
        """The name a command job gets when submitted without --name: its script or program."""
        for arg in self.argv[1:] if _is_interpreter(self.argv[0]) else ():
            if not arg.startswith("-"):
                return os.path.basename(arg)
        return os.path.basename(self.argv[0])

    def to_json(self) -> str:
        return json.dumps(
            {"argv": list(self.argv), "workdir": self.workdir, "env": dict(self.env),
             "steps": self.steps}
        )  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> JobCommand:
        raw = json.loads(text)
        return cls(
            tuple(str(a) for a in raw["argv"]), str(raw["workdir"]),
            tuple((str(k), str(v)) for k, v in raw.get("env", {}).items()),
            int(raw.get("steps", 0)),
        )  # fmt: skip


def _is_interpreter(program: str) -> bool:
    name = os.path.basename(program)
    return name.startswith(("python", "bash", "sh", "torchrun")) or name in ("uv", "env")
