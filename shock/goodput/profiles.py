"""Measured per-GPU-type goodput profiles, read from a folder the user gives
(`shock run --goodput-profiles PATH`).

Sia's artifact (SOSP'23) measured each application on several GPU types. Its data has no
licence, so shock bundles none of it: point a run at the artifact's `sia-simulator/traces`
folder (or any folder laid out the same way). The profiles are the run's: the simulator runs
each elastic job at its GPU type's measured goodput (`curve`, at `step_seconds`), and a
policy that predicts goodput (`sia`) reads them from its input
(`PolicyInput.goodput_profiles`).

    <root>/<application>/placements-<suffix>.csv    placement, local_bsz, step_time, sync_time
    <root>/<application>/scalability-<suffix>.csv   local_bsz, step_time, sync_time,
                                                    num_nodes, num_replicas
    <root>/<application>/validation-<batch>.csv     progress, iteration, metric, grad_sqr,
                                                    grad_var   (one row per epoch)

`<suffix>` names the GPU type as Sia's artifact does (`aws`: T4, `dgx-ext`: A100, `rtx`:
RTX 2080 Ti, `azure`: V100, `quad`: Quadro RTX 6000); `SUFFIX_OF` maps shock's worker type
names to them, and a worker type may also be named by its suffix. A placement is one digit
per node, the GPUs on it (`22`: two nodes of two GPUs). Each (application, GPU type) becomes
a goodput model: Pollux's step-time model fitted to all its step times
(shock.goodput.fit), the gradient statistics of the run at the application's initial batch
size, and its batch limits (smallest/largest validated batch size, smallest/largest measured
per-GPU batch).

Applications are the folders named after one of the six data-parallel applications
(`MAX_EPOCHS`) that hold validation files; a GPU type is profiled for an
application when both its placements and scalability files are there. A malformed file
stops the read with an error naming the file, line and column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from pathlib import Path

from shock.core.errors import InputError
from shock.goodput.fit import StepTimes, fit_perf_params
from shock.goodput.measured import MeasuredTimes, PlacementRow, ScalabilityRow
from shock.goodput.model import BatchLimits, GoodputModel, GradParams, PerfParams
from shock.goodput.progress import Configuration, TrainingCurve
from shock.goodput.progress import curve as bundled_curve

# shock's worker type -> the suffix of Sia's files measured on that GPU type.
SUFFIX_OF: Mapping[str, str] = {
    "t4": "aws",
    "a100": "dgx-ext",
    "rtx2080ti": "rtx",
    "v100": "azure",
    "rtx6000": "quad",
}
# Epochs each application trains for in Sia's (and Pollux's) simulator.
MAX_EPOCHS: Mapping[str, int] = {
    "bert": 2,
    "cifar10": 100,
    "ncf": 10,
    "imagenet": 90,
    "deepspeech2": 80,
    "yolov3": 50,
}
# Largest per-GPU batch where the measurements overstate what fits (Sia's artifact: DeepSpeech2
# on the RTX 2080 Ti holds 57 samples).
_MAX_LOCAL_BSZ: Mapping[tuple[str, str], int] = {("deepspeech2", "rtx"): 57}
# Sia's simulator slows each application's simulated goodput by this factor, fitted to its
# physical cluster's runs (sia-simulator/simulator_config.py, SLOWDOWNS).
SLOWDOWN: Mapping[str, float] = {
    "cifar10": 1.8,
    "imagenet": 1.2,
    "yolov3": 1.2,
    "bert": 1.2,
    "deepspeech2": 1.2,
    "ncf": 1.5,
}
_PLACEMENTS = ("placement", "local_bsz", "step_time", "sync_time")
_SCALABILITY = ("local_bsz", "step_time", "sync_time", "num_nodes", "num_replicas")
_VALIDATION = ("progress", "iteration", "grad_sqr", "grad_var")


@dataclass(frozen=True, eq=False)
class TypeProfile:
    """One application measured on one GPU type."""

    application: str
    suffix: str
    step_times: StepTimes
    limits: BatchLimits
    # Samples per second on one GPU at its largest measured per-GPU batch (Sia's ratio of
    # GPU types: largest batch / slowest step among the one-GPU placements).
    one_gpu_rate: float
    # The measurements as Sia's simulator reads them for the step times its jobs run at.
    measured: MeasuredTimes

    @property
    def perf(self) -> PerfParams:
        return _fit(self)


@dataclass(frozen=True)
class SiaApplication:
    name: str
    max_epochs: int
    # Per validated total batch size: (sqr, var) of each epoch.
    grads: Mapping[int, tuple[tuple[float, float], ...]]
    by_suffix: Mapping[str, TypeProfile]

    @property
    def init_batch_size(self) -> int:
        return min(self.grads)

    def grad_at(self, epoch: int) -> GradParams:
        run = self.grads[self.init_batch_size]
        sqr, var = run[min(max(epoch, 0), len(run) - 1)]
        return GradParams(sqr=sqr, var=var)

    def model(self, suffix: str, epoch: int) -> GoodputModel:
        profile = self.by_suffix[suffix]
        return GoodputModel(profile.perf, self.grad_at(epoch), profile.limits)


@dataclass(frozen=True, eq=False)
class SiaProfiles:
    root: Path
    applications: Mapping[str, SiaApplication]

    def suffix_for(self, worker_type: str) -> str | None:
        """The suffix of Sia's files for a worker type (None: not measured)."""
        suffixes = {s for app in self.applications.values() for s in app.by_suffix}
        if worker_type in suffixes:
            return worker_type
        suffix = SUFFIX_OF.get(worker_type.lower())
        return suffix if suffix in suffixes else None

    def profile(self, application: str, worker_type: str) -> TypeProfile | None:
        app = self.applications.get(application)
        suffix = self.suffix_for(worker_type)
        if app is None or suffix is None:
            return None
        return app.by_suffix.get(suffix)

    def curve(
        self, application: str, worker_type: str, calibrate: bool = True
    ) -> TrainingCurve | None:
        """The goodput a job of `application` runs at on `worker_type`, where it was
        measured (None: not measured there): the bundled training curve (Sia's validation
        runs are Pollux's) with that type's fitted step-time model and batch limits, its step
        times stretched by Sia's calibration factors (`SLOWDOWN`) when `calibrate`."""
        profile = self.profile(application, worker_type)
        if profile is None:
            return None
        slowdown = SLOWDOWN.get(application, 1.0) if calibrate else 1.0
        return _measured_curve(profile, slowdown)

    def step_seconds(
        self,
        application: str,
        worker_type: str,
        node_gpus: tuple[int, ...],
        config: Configuration,
        calibrate: bool = True,
    ) -> float | None:
        """Seconds per step of `config` on this placement of `worker_type` GPUs, as Sia's
        simulator runs its jobs: the measurements interpolated (not the fitted model), slowed
        by the calibration factor when `calibrate`. None where they do not reach (the
        curve's fitted model answers there)."""
        profile = self.profile(application, worker_type)
        if profile is None:
            return None
        seconds = profile.measured.step_seconds(node_gpus, config)
        if not math.isfinite(seconds):
            return None
        return seconds * (SLOWDOWN.get(application, 1.0) if calibrate else 1.0)


def _cell(path: Path, line: int, column: str, text: str | None, integer: bool = False) -> float:
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (integer and value != int(value)):
        kind = "a non-negative integer" if integer else "a non-negative number"
        raise InputError(f"expected {kind}, got '{text}'", path=path, line=line, field=column)
    return value


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = [name.strip() for name in reader.fieldnames or ()]
            missing = [c for c in columns if c not in header]
            if missing:
                raise InputError(
                    f"missing column(s) {', '.join(missing)} (the header has "
                    f"{', '.join(header) or 'nothing'})",
                    path=path,
                    line=1,
                    field=missing[0],
                )
            rows = [
                (reader.line_num, {k.strip(): v for k, v in row.items() if k is not None})
                for row in reader
            ]
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=path) from None
    if not rows:
        raise InputError("no data rows", path=path, line=2)
    return rows


def _read_type(folder: Path, name: str, suffix: str) -> TypeProfile:
    nodes: list[int] = []
    replicas: list[int] = []
    local: list[int] = []
    step: list[float] = []
    sync: list[float] = []
    one_gpu: list[tuple[float, float]] = []
    placement_rows: list[PlacementRow] = []
    scalability_rows: list[ScalabilityRow] = []
    placements = folder / f"placements-{suffix}.csv"
    for line, row in _rows(placements, _PLACEMENTS):
        text = (row.get("placement") or "").strip()
        if not text.isdigit() or "0" in text:
            raise InputError(
                f"expected GPUs per node as digits 1-9 (e.g. 22), got '{text}'",
                path=placements,
                line=line,
                field="placement",
            )
        nodes.append(len(text))
        replicas.append(sum(int(d) for d in text))
        local.append(int(_cell(placements, line, "local_bsz", row.get("local_bsz"), True)))
        step.append(_cell(placements, line, "step_time", row.get("step_time")))
        sync.append(_cell(placements, line, "sync_time", row.get("sync_time")))
        if replicas[-1] == 1:
            one_gpu.append((local[-1], step[-1]))
        placement_rows.append((int(text), float(local[-1]), step[-1], sync[-1]))
    placement_local = list(local)
    scalability = folder / f"scalability-{suffix}.csv"
    for line, row in _rows(scalability, _SCALABILITY):
        nodes.append(int(_cell(scalability, line, "num_nodes", row.get("num_nodes"), True)))
        replicas.append(
            int(_cell(scalability, line, "num_replicas", row.get("num_replicas"), True))
        )
        local.append(int(_cell(scalability, line, "local_bsz", row.get("local_bsz"), True)))
        step.append(_cell(scalability, line, "step_time", row.get("step_time")))
        sync.append(_cell(scalability, line, "sync_time", row.get("sync_time")))
        if nodes[-1] < 1 or replicas[-1] < nodes[-1]:
            raise InputError(
                f"needs 1 <= num_nodes <= num_replicas, got {nodes[-1]} and {replicas[-1]}",
                path=scalability,
                line=line,
                field="num_replicas",
            )
        scalability_rows.append((nodes[-1], replicas[-1], float(local[-1]), step[-1], sync[-1]))
    for where, values in ((placements, step), (scalability, step)):
        if any(v <= 0 for v in values):
            raise InputError("step_time must be > 0", path=where, field="step_time")
    if not one_gpu:
        raise InputError("no one-GPU placement (placement 1)", path=placements, field="placement")
    times = StepTimes.from_profile(nodes, replicas, local, step, sync)
    validated = sorted(int(p.stem.split("-")[-1]) for p in folder.glob("validation-*.csv"))
    limits = BatchLimits(
        init_batch_size=validated[0],
        max_batch_size=validated[-1],
        min_local_bsz=min(placement_local),
        max_local_bsz=_MAX_LOCAL_BSZ.get((name, suffix), max(placement_local)),
    )
    largest = max(b for b, _ in one_gpu)
    slowest = max(s for _, s in one_gpu)
    measured = MeasuredTimes.from_rows(placement_rows, scalability_rows)
    return TypeProfile(name, suffix, times, limits, largest / slowest, measured)


def _read_application(folder: Path) -> SiaApplication | None:
    grads: dict[int, tuple[tuple[float, float], ...]] = {}
    for path in sorted(folder.glob("validation-*.csv")):
        size_text = path.stem.split("-")[-1]
        if not size_text.isdigit() or int(size_text) < 1:
            raise InputError("a validation file is named validation-<batch size>.csv", path=path)
        grads[int(size_text)] = tuple(
            (
                _cell(path, line, "grad_sqr", row.get("grad_sqr")),
                _cell(path, line, "grad_var", row.get("grad_var")),
            )
            for line, row in _rows(path, _VALIDATION)
        )
    if not grads:
        return None
    name = folder.name
    suffixes = sorted(
        p.stem.removeprefix("placements-")
        for p in folder.glob("placements-*.csv")
        if (folder / f"scalability-{p.stem.removeprefix('placements-')}.csv").exists()
    )
    by_suffix = {suffix: _read_type(folder, name, suffix) for suffix in suffixes}
    epochs = min(MAX_EPOCHS.get(name, 10**9), min(len(run) for run in grads.values()))
    return SiaApplication(name, epochs, grads, by_suffix)


@cache
def read_profiles(root: str) -> SiaProfiles:
    """Every application under `root` (read once per process)."""
    folder = Path(root).expanduser()
    if not folder.is_dir():
        raise InputError(
            "no such folder (give Sia's sia-simulator/traces folder)",
            path=folder,
            field="--goodput-profiles",
        )
    applications = {}
    for child in sorted(folder.iterdir()):
        # Only the data-parallel applications (its pipeline-parallel gpt_pmp is not modelled).
        if child.is_dir() and child.name in MAX_EPOCHS:
            app = _read_application(child)
            if app is not None and app.by_suffix:
                applications[app.name] = app
    if not applications:
        raise InputError(
            "no application folder with validation-<batch>.csv, placements-<gpu>.csv and "
            "scalability-<gpu>.csv files",
            path=folder,
            field="--goodput-profiles",
        )
    return SiaProfiles(folder, applications)


@cache
def _fit(profile: TypeProfile) -> PerfParams:
    return fit_perf_params(profile.step_times)


@lru_cache(maxsize=256)
def _measured_curve(profile: TypeProfile, slowdown: float) -> TrainingCurve:
    perf = profile.perf
    # Every time term scales with the slowdown, so each step takes `slowdown` times longer.
    slowed = replace(
        perf,
        alpha_c=perf.alpha_c * slowdown,
        beta_c=perf.beta_c * slowdown,
        alpha_n=perf.alpha_n * slowdown,
        beta_n=perf.beta_n * slowdown,
        alpha_r=perf.alpha_r * slowdown,
        beta_r=perf.beta_r * slowdown,
    )
    return replace(bundled_curve(profile.application), perf=slowed, limits=profile.limits)
