"""The named choices of simulator semantics a run makes (RunConfig, MechanismConfig, Preset).

Each is a `StrEnum`: its members compare equal to their values and are written as them, so
a preset, a sweep file or a test may give either the member or its text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar


class SelectionRule(StrEnum):
    """How a round picks the jobs that run."""

    # One queue of (job, worker type) pairs by time owed (allocation x elapsed - received).
    DEFICIT = "deficit"
    # Gavel's per-type walk by priority.
    GAVEL = "gavel"


class OverheadRule(StrEnum):
    """Who pays the (re)start overhead."""

    # A job on other GPUs than last round (shock's).
    MOVED = "moved"
    # A job that did not run last round, except in the run's first round and in a job's
    # last, short round (Shockwave's simulator).
    MISSED_ROUND = "missed_round"


class OverheadEffect(StrEnum):
    """What the overhead does to the job's round."""

    # The job starts that many seconds late and runs to the round's end (shock's).
    LATE_START = "late_start"
    # The job holds its GPUs as long as its planned steps take, t, and does (t - overhead) / t
    # of them (Shockwave's simulator).
    FEWER_STEPS = "fewer_steps"


class RhoContention(StrEnum):
    """N in finish-time fairness' fair share."""

    TIME_AVERAGED = "time_averaged"  # jobs sharing the cluster over the job's life (shock)
    TRACE = "trace"  # jobs in the whole trace (Shockwave)


class RhoAlone(StrEnum):
    """T_alone in finish-time fairness."""

    EXACT = "exact"  # the job's steps at its fastest isolated rates (shock)
    WHOLE_EPOCHS = "whole_epochs"  # its per-epoch profile summed, the last epoch whole (Shockwave)


ChoiceT = TypeVar("ChoiceT", bound=StrEnum)


def coerce(kind: type[ChoiceT], value: object, field: str) -> ChoiceT:
    """`value` (a member or its text) as a member of `kind`; a ValueError naming the field
    and the valid values otherwise."""
    try:
        if not isinstance(value, str):
            raise ValueError
        return kind(value)
    except ValueError:
        valid = ", ".join(member.value for member in kind)
        raise ValueError(f"{field} must be one of {valid}, got {value!r}") from None
