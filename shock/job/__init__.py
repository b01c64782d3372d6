"""`shock.job`: what a person's own training script imports to run on a shock cluster.

    from shock import job
    with job.session() as s:
        state = s.restore() or {"step": 0}
        for step in s.steps(total=2000, start=state["step"]):
            ...
            state["step"] = step + 1
            if s.checkpoint_due():
                s.checkpoint(state)
        s.checkpoint(state)

Importing it imports no torch; outside shock the session runs locally to the end.
docs/your-own-jobs.md has the whole API.
"""

from __future__ import annotations

from shock.job.checkpoint import CheckpointError
from shock.job.session import Session, session

__all__ = ["CheckpointError", "Session", "session"]
