"""Distributions over jobs: the CDF of job completion times and of finish-time fairness ρ."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from shock.core.errors import InputError
from shock.results.figures.style import new_figure, place_legend, time_unit
from shock.results.runs import RunView


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ordered = np.sort(values)
    fractions = np.arange(1, len(ordered) + 1) / len(ordered)
    return ordered, fractions


def jct_cdf(runs: Sequence[RunView]) -> Figure:
    """One line per run: the fraction of jobs done within each completion time."""
    measured = [run for run in runs if len(run.jct_s)]
    if not measured:
        raise InputError("no finished jobs to draw", path=runs[0].path, field="jobs")
    unit = time_unit(max(float(run.jct_s.max()) for run in measured))
    figure = new_figure()
    axes = figure.add_subplot()
    for run in measured:
        x, y = _ecdf(run.jct_s / unit.seconds)
        axes.step(x, y, where="post", label=run.legend)
    axes.set_title("Job completion time (CDF)")
    axes.set_xlabel(unit.label("job completion time"))
    axes.set_ylabel("fraction of jobs")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    place_legend(axes)
    return figure


def rho_cdf(runs: Sequence[RunView]) -> Figure:
    """One line per run: finish-time fairness ρ (1 = as fast as alone on 1/N of the cluster)."""
    figure = new_figure()
    axes = figure.add_subplot()
    drawn = 0
    for run in runs:
        rhos = run.ftf_rho[np.isfinite(run.ftf_rho)]
        if len(rhos) == 0:
            continue
        x, y = _ecdf(rhos)
        axes.step(x, y, where="post", label=run.legend)
        drawn += 1
    if drawn == 0:
        raise InputError("no job has a finish-time fairness ρ", path=runs[0].path, field="jobs")
    axes.axvline(1.0, color="grey", linestyle="--", linewidth=1, label="_fair (ρ = 1)")
    axes.set_title("Finish-time fairness ρ (CDF; ρ > 1 is unfair)")
    axes.set_xlabel("finish-time fairness ρ")
    axes.set_ylabel("fraction of jobs")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    place_legend(axes)
    return figure
