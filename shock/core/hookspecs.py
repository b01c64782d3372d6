"""The whole plugin contract on one page.

Registration hooks receive a `register` callback so one module can contribute several named
things. Observer hooks receive typed events and return nothing; they never change decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from shock.core.events import (
        AllocationComputed,
        JobArrived,
        JobFinished,
        RoundEnded,
        RoundStarted,
        RunFinished,
        RunStarted,
    )

PROJECT = "shock"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Register = Callable[[Any], None]


@hookspec
def register_policies(register: Register) -> None:
    """Register `shock.core.policy.Policy` instances (one name each)."""


@hookspec
def register_placements(register: Register) -> None:
    """Register `shock.core.placement.Placement` instances."""


@hookspec
def register_adaptations(register: Register) -> None:
    """Register `shock.core.adaptation.AdaptationModel` instances."""


@hookspec
def register_adaptation_rules(register: Register) -> None:
    """Register `shock.core.adaptation.AdaptationRules` (how simulated batch sizes evolve)."""


@hookspec
def register_backends(register: Register) -> None:
    """Register `shock.core.run.Backend` instances."""


@hookspec
def register_trace_formats(register: Register) -> None:
    """Register `shock.core.trace.TraceFormat` instances."""


@hookspec
def register_trace_importers(register: Register) -> None:
    """Register importers of production traces (`shock trace import FORMAT`): objects with
    `name`, `description` and the fields of `shock.traces.importers.TraceImporter`."""


@hookspec
def register_solvers(register: Register) -> None:
    """Register `shock.core.solver.Solver` instances (`--solver NAME`)."""


@hookspec
def register_presets(register: Register) -> None:
    """Register `shock.core.presets.Preset` instances (`--preset NAME`)."""


# Observer events.


@hookspec
def run_started(event: RunStarted) -> None:
    """A run is about to start."""


@hookspec
def job_arrived(event: JobArrived) -> None:
    """A job was admitted to the cluster."""


@hookspec
def allocation_computed(event: AllocationComputed) -> None:
    """The policy produced a new allocation."""


@hookspec
def round_started(event: RoundStarted) -> None:
    """A scheduling round began; the event lists what runs where."""


@hookspec
def round_ended(event: RoundEnded) -> None:
    """A scheduling round ended."""


@hookspec
def job_finished(event: JobFinished) -> None:
    """A job completed all its steps."""


@hookspec
def run_finished(event: RunFinished) -> None:
    """A whole run (simulation or cluster) finished."""
