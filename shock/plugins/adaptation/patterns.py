"""Typed view of the Accordion and GNS sections of the bundled adaptation patterns."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from shock.api import adaptation_data

Interval = tuple[int, int]  # [start, end) over 0-based epoch indices


@dataclass(frozen=True, slots=True)
class AccordionRules:
    max_batch_size: dict[str, int]
    non_adaptive_models: frozenset[str]
    warmup_fraction: float
    # model -> initial batch size (None: any) -> critical intervals
    critical_regimes: dict[str, dict[int | None, tuple[Interval, ...]]]

    def regimes(self, model: str, initial_batch_size: int) -> tuple[Interval, ...]:
        by_size = self.critical_regimes.get(model, {})
        found = by_size.get(initial_batch_size, by_size.get(None))
        return found if found is not None else ()


@dataclass(frozen=True, slots=True)
class GnsSegment:
    start_epoch: int
    end_epoch: int | None  # exclusive; None: to the end of the job
    multiplier: int
    applies_to_last_epoch: bool


@dataclass(frozen=True, slots=True)
class GnsSchedule:
    min_num_epochs_exclusive: int
    segments: tuple[GnsSegment, ...]


@dataclass(frozen=True, slots=True)
class GnsRules:
    batch_size_limit: dict[str, int]
    schedules: dict[tuple[str, int, int], GnsSchedule]  # (model, initial bs, scale factor)


def _intervals(raw: list[list[int]]) -> tuple[Interval, ...]:
    return tuple((int(a), int(b)) for a, b in raw)


@cache
def accordion_rules() -> AccordionRules:
    raw = adaptation_data()["accordion"]
    regimes: dict[str, dict[int | None, tuple[Interval, ...]]] = {}
    for model, entry in raw["critical_regimes"].items():
        if "by_initial_batch_size" in entry:
            regimes[model] = {
                int(size): _intervals(intervals)
                for size, intervals in entry["by_initial_batch_size"].items()
            }
        else:
            regimes[model] = {None: _intervals(entry["intervals"])}
    return AccordionRules(
        max_batch_size={k: int(v) for k, v in raw["max_batch_size"].items()},
        non_adaptive_models=frozenset(raw["non_adaptive_models"]),
        warmup_fraction=float(raw["warmup_fraction"]),
        critical_regimes=regimes,
    )


@cache
def gns_rules() -> GnsRules:
    raw = adaptation_data()["gns"]
    schedules = {
        (entry["model"], int(entry["initial_batch_size"]), int(entry["scale_factor"])): (
            GnsSchedule(
                int(entry["min_num_epochs_exclusive"]),
                tuple(
                    GnsSegment(
                        int(s["start_epoch"]),
                        None if s["end_epoch"] is None else int(s["end_epoch"]),
                        int(s["multiplier"]),
                        bool(s["applies_to_last_epoch"]),
                    )
                    for s in entry["segments"]
                ),
            )
        )
        for entry in raw["schedules"]
    }
    return GnsRules({k: int(v) for k, v in raw["batch_size_limit"].items()}, schedules)
