"""The cluster over a run's rounds (from the timeline): GPU utilisation per worker type, the
queue, and the allocation solver's time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from shock.results.figures.style import TimeUnit, new_figure, time_unit, worker_colours
from shock.results.runs import RunView, Timeline


def _rows(
    runs: Sequence[RunView], kind: str
) -> tuple[Figure, list[Axes], list[Timeline], TimeUnit]:
    """One row of axes per run, sharing the time axis."""
    timelines = [run.require_timeline(kind) for run in runs]
    unit = time_unit(max(float(t.time_s.max(initial=0.0)) for t in timelines))
    figure = new_figure(height=1.0 + 2.6 * len(runs))
    axes = list(figure.subplots(len(runs), 1, sharex=True, squeeze=False)[:, 0])
    axes[-1].set_xlabel(unit.label("time"))
    return figure, axes, timelines, unit


def _round_ends(timeline: Timeline) -> np.ndarray:
    """Step plots need each round's end: the next round's start (the last round repeats the
    previous round's length)."""
    times = timeline.time_s
    if len(times) < 2:
        return times + 1.0
    return np.append(times[1:], times[-1] + (times[-1] - times[-2]))


def _steps(
    axes: Axes, timeline: Timeline, values: np.ndarray, unit: TimeUnit, **style: object
) -> object:
    x = np.append(timeline.time_s, _round_ends(timeline)[-1:]) / unit.seconds
    y = np.append(values, values[-1:]) if len(values) else values
    return axes.step(x, y, where="post", **style)  # type: ignore[arg-type]


def utilization(runs: Sequence[RunView]) -> Figure:
    """Share of each worker type's GPUs busy per round, and of all GPUs (bold)."""
    figure, rows, timelines, unit = _rows(runs, "utilization")
    for axes, run, timeline in zip(rows, runs, timelines, strict=True):
        colours = worker_colours(timeline.worker_types)
        for w, name in enumerate(timeline.worker_types):
            if timeline.capacity[w] <= 0:
                continue
            share = 100 * timeline.busy_gpus[:, w] / timeline.capacity[w]
            _steps(axes, timeline, share, unit, label=name, color=colours[name], linewidth=1)
        overall = 100 * timeline.busy_gpus.sum(axis=1) / max(timeline.capacity.sum(), 1.0)
        _steps(axes, timeline, overall, unit, label="all GPUs", color="black", linewidth=2)
        axes.set_ylabel("GPUs busy (%)")
        axes.set_ylim(0, 105)
        axes.set_title(f"GPU utilisation over time — {run.legend}")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def queue(runs: Sequence[RunView]) -> Figure:
    """Jobs admitted but waiting, and jobs running, per round."""
    figure, rows, timelines, unit = _rows(runs, "queue")
    for axes, run, timeline in zip(rows, runs, timelines, strict=True):
        _steps(axes, timeline, timeline.queued, unit, label="queued", color="#d62728")
        _steps(axes, timeline, timeline.running, unit, label="running", color="#1f77b4")
        axes.set_ylabel("jobs")
        axes.set_ylim(bottom=0)
        axes.set_title(f"Queue over time — {run.legend}")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, loc="upper right")
    return figure


def solve_time(runs: Sequence[RunView]) -> Figure:
    """One series per run: the solve time of each round that recomputed its allocation."""
    timelines = [run.require_timeline("solve-time") for run in runs]
    unit = time_unit(max(float(t.time_s.max(initial=0.0)) for t in timelines))
    largest = max(float(t.solve_s.max(initial=0.0)) for t in timelines)
    in_ms = largest < 1.0
    figure = new_figure()
    axes = figure.add_subplot()
    for run, timeline in zip(runs, timelines, strict=True):
        solved = timeline.solve_s > 0
        total = float(timeline.solve_s.sum())
        axes.plot(
            timeline.time_s[solved] / unit.seconds,
            timeline.solve_s[solved] * (1000 if in_ms else 1),
            marker="o",
            markersize=3,
            linewidth=0.8,
            label=f"{run.legend}: {int(solved.sum())} solves, {total:.2f} s in all",
        )
    axes.set_title("Allocation solve time per round")
    axes.set_xlabel(unit.label("time"))
    axes.set_ylabel("solve time (ms)" if in_ms else "solve time (s)")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return figure
