"""The six applications Pollux's artifact measured (`shock/data/pollux/applications/`).

Each application folder holds:

- `placements.csv` (placement, local_bsz, step_time, sync_time): measured seconds per step
  and of its synchronisation, per placement (one digit per node: GPUs on it, `22` is two
  nodes of two GPUs) and atomic batch size per GPU;
- `scalability.csv` (num_nodes, num_replicas, local_bsz, step_time, sync_time): more
  measurements, by node and replica counts;
- `validation-<batch size>.csv` (progress, iteration, metric, grad_sqr, grad_var): per
  epoch of a run at that total batch size, the samples processed, steps, validation metric
  and the gradient statistics.

An application's goodput model fits the step-time model to all its step-time measurements
(compute time = step time - sync time) and takes the gradient statistics of the run at its
initial batch size at the epoch asked for. The fitted parameters are kept in
`shock/data/pollux/fitted.json` (a fit takes seconds); `python -m shock.goodput.applications`
fits them again from the measurements and rewrites that file.

Its batch limits are Pollux's: the smallest and largest validated total batch sizes, the
smallest and largest measured atomic batch sizes (YOLOv3's largest atomic batch is 8, as
Pollux sets it).
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from shock.goodput.fit import StepTimes, fit_perf_params
from shock.goodput.model import BatchLimits, GoodputModel, GradParams, PerfParams

# Epochs each application trains for in Pollux's simulator, and overrides of its limits.
MAX_EPOCHS = {"bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80, "yolov3": 50}
_MAX_LOCAL_BSZ = {"yolov3": 8}


@dataclass(frozen=True, slots=True)
class EpochStats:
    """One epoch of a validation run: samples and steps done by its end, and the gradient
    statistics measured during it."""

    progress: float
    iteration: int
    grad: GradParams


@dataclass(frozen=True)
class Application:
    name: str
    limits: BatchLimits
    max_epochs: int
    step_times: StepTimes
    # Per validated total batch size, its run's epochs.
    validation: dict[int, tuple[EpochStats, ...]]

    @property
    def perf(self) -> PerfParams:
        return _fitted(self.name)

    def grad_at(self, epoch: int) -> GradParams:
        """The gradient statistics at the initial batch size during `epoch` (clamped)."""
        run = self.validation[self.limits.init_batch_size]
        return run[min(max(epoch, 0), len(run) - 1)].grad

    def goodput_model(self, epoch: int = 0) -> GoodputModel:
        return GoodputModel(self.perf, self.grad_at(epoch), self.limits)

    def steps_to_finish(self, batch_size: int) -> int:
        """Steps a run at `batch_size` (the nearest validated size at or above it) takes to
        finish its `max_epochs` epochs."""
        sizes = sorted(self.validation)
        size = next((s for s in sizes if s >= batch_size), sizes[-1])
        run = self.validation[size]
        return int(run[min(self.max_epochs, len(run)) - 1].iteration)


def _data_root() -> Path:
    return Path(str(resources.files("shock") / "data" / "pollux" / "applications"))


def names() -> tuple[str, ...]:
    return tuple(sorted(MAX_EPOCHS))


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@cache
def application(name: str) -> Application:
    """The bundled application `name` (KeyError for an unknown one)."""
    if name not in MAX_EPOCHS:
        raise KeyError(name)
    folder = _data_root() / name
    nodes: list[int] = []
    replicas: list[int] = []
    local: list[int] = []
    step: list[float] = []
    sync: list[float] = []
    for row in _rows(folder / "placements.csv"):
        digits = [int(d) for d in row["placement"]]
        nodes.append(len(digits))
        replicas.append(sum(digits))
        local.append(int(row["local_bsz"]))
        step.append(float(row["step_time"]))
        sync.append(float(row["sync_time"]))
    placement_local = list(local)
    for row in _rows(folder / "scalability.csv"):
        nodes.append(int(row["num_nodes"]))
        replicas.append(int(row["num_replicas"]))
        local.append(int(row["local_bsz"]))
        step.append(float(row["step_time"]))
        sync.append(float(row["sync_time"]))
    times = StepTimes.from_profile(nodes, replicas, local, step, sync)
    validation: dict[int, tuple[EpochStats, ...]] = {}
    for path in folder.glob("validation-*.csv"):
        size = int(path.stem.split("-")[-1])
        validation[size] = tuple(
            EpochStats(
                progress=float(r["progress"]),
                iteration=int(float(r["iteration"])),
                grad=GradParams(sqr=float(r["grad_sqr"]), var=float(r["grad_var"])),
            )
            for r in _rows(path)
        )
    limits = BatchLimits(
        init_batch_size=min(validation),
        max_batch_size=max(validation),
        min_local_bsz=min(placement_local),
        max_local_bsz=_MAX_LOCAL_BSZ.get(name, max(placement_local)),
    )
    epochs = min(MAX_EPOCHS[name], min(len(run) for run in validation.values()))
    return Application(name, limits, epochs, times, dict(sorted(validation.items())))


FITTED_FILE = "fitted.json"


def _fitted_path() -> Path:
    return _data_root().parent / FITTED_FILE


@cache
def _stored_fits() -> dict[str, PerfParams]:
    path = _fitted_path()
    if not path.exists():
        return {}
    raw = json.loads(path.read_text())
    return {name: PerfParams(**values) for name, values in raw["params"].items()}


@cache
def _fitted(name: str) -> PerfParams:
    stored = _stored_fits().get(name)
    return stored if stored is not None else fit_perf_params(application(name).step_times)


def refit() -> dict[str, PerfParams]:
    """Fit every application's step-time model from its measurements and store the result."""
    fits = {name: fit_perf_params(application(name).step_times) for name in names()}
    document = {
        "about": "Pollux's step-time model fitted to each application's measured step times "
        "(shock.goodput.fit); regenerate with: python -m shock.goodput.applications",
        "params": {name: asdict(params) for name, params in fits.items()},
    }
    _fitted_path().write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    _stored_fits.cache_clear()
    _fitted.cache_clear()
    return fits


if __name__ == "__main__":
    for app_name, params in refit().items():
        print(app_name, params)
