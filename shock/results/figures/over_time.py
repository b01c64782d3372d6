"""The cluster over a run's rounds (from the timeline): GPU utilisation per worker type, the
queue, and the allocation solver's time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from shock.results.figures.style import (
    TimeUnit,
    new_figure,
    place_legend,
    time_unit,
    worker_colours,
)
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


# Above this many rounds, per-round steps blur into a band: draw time-weighted averages over
# this many equal windows instead.
MAX_STEPS = 400


def piecewise(timeline: Timeline, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The per-round values as a step function: piece edges (one more than values) and values.
    A round lasts until the next starts, or one usual round length where the next starts
    much later (the simulation skipped idle time); such gaps hold 0 (nothing ran or waited)."""
    starts = timeline.time_s
    if len(starts) == 0:
        return np.zeros(1), np.zeros(0)
    gaps = np.diff(starts)
    length = float(np.median(gaps)) if len(gaps) else 1.0
    length = length if length > 0 else 1.0
    # Rounds vary a little (rounded times, a round cut short): only a long pause is a gap.
    following = np.append(starts[1:], np.inf)
    ends = np.where(following > starts + 1.5 * length, starts + length, following)
    edges, levels = [float(starts[0])], []
    for k, value in enumerate(values):
        edges.append(float(ends[k]))
        levels.append(float(value))
        if k + 1 < len(starts) and starts[k + 1] > ends[k]:
            edges.append(float(starts[k + 1]))
            levels.append(0.0)
    return np.array(edges), np.array(levels)


def windowed(edges: np.ndarray, levels: np.ndarray, windows: int) -> tuple[np.ndarray, np.ndarray]:
    """Time-weighted averages of a step function over equal windows (exact: the integral is
    piecewise linear between the pieces' edges)."""
    integral = np.concatenate([[0.0], np.cumsum(levels * np.diff(edges))])
    bounds = np.linspace(edges[0], edges[-1], windows + 1)
    return bounds, np.diff(np.interp(bounds, edges, integral)) / np.diff(bounds)


def _steps(
    axes: Axes, timeline: Timeline, values: np.ndarray, unit: TimeUnit, **style: object
) -> object:
    edges, levels = piecewise(timeline, values)
    if len(levels) > MAX_STEPS:
        edges, levels = windowed(edges, levels, MAX_STEPS // 2)
    if len(levels) == 0:
        return axes.plot([], [], **style)  # type: ignore[arg-type]
    y = np.append(levels, levels[-1])
    return axes.step(edges / unit.seconds, y, where="post", **style)  # type: ignore[arg-type]


def _averaging_note(timeline: Timeline, unit: TimeUnit) -> str:
    edges, levels = piecewise(timeline, timeline.queued)
    if len(levels) <= MAX_STEPS:
        return ""
    window = (edges[-1] - edges[0]) / (MAX_STEPS // 2) / unit.seconds
    return f" (averaged over {window:.3g}-{unit.name[:-1]} windows)"


def utilization(runs: Sequence[RunView]) -> Figure:
    """Share of each worker type's GPUs busy per round, and of all GPUs (bold)."""
    figure, rows, timelines, unit = _rows(runs, "utilization")
    for axes, run, timeline in zip(rows, runs, timelines, strict=True):
        colours = worker_colours(timeline.worker_types)
        present = [w for w in range(len(timeline.worker_types)) if timeline.capacity[w] > 0]
        # On a cluster of one GPU type its line is the overall one: draw it once.
        for w in present if len(present) > 1 else ():
            name = timeline.worker_types[w]
            share = 100 * timeline.busy_gpus[:, w] / timeline.capacity[w]
            _steps(axes, timeline, share, unit, label=name, color=colours[name], linewidth=1)
        overall = 100 * timeline.busy_gpus.sum(axis=1) / max(timeline.capacity.sum(), 1.0)
        label = "all GPUs"
        if len(present) == 1:
            label += f" ({timeline.worker_types[present[0]]})"
        _steps(axes, timeline, overall, unit, label=label, color="black", linewidth=2)
        axes.set_ylabel("GPUs busy (%)")
        axes.set_ylim(0, 105)
        note = _averaging_note(timeline, unit)
        axes.set_title(f"GPU utilisation over time — {run.legend}{note}")
        axes.grid(alpha=0.3)
        place_legend(axes)
    return figure


def queue(runs: Sequence[RunView]) -> Figure:
    """Jobs admitted but waiting, and jobs running, per round."""
    figure, rows, timelines, unit = _rows(runs, "queue")
    for axes, run, timeline in zip(rows, runs, timelines, strict=True):
        _steps(axes, timeline, timeline.queued, unit, label="queued", color="#d62728")
        _steps(axes, timeline, timeline.running, unit, label="running", color="#1f77b4")
        axes.set_ylabel("jobs")
        axes.set_ylim(bottom=0)
        axes.set_title(f"Queue over time — {run.legend}{_averaging_note(timeline, unit)}")
        axes.grid(alpha=0.3)
        place_legend(axes)
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
    positive = [t.solve_s[t.solve_s > 0] for t in timelines]
    smallest = min((float(p.min()) for p in positive if len(p)), default=0.0)
    if smallest > 0 and largest / smallest > 100:
        axes.set_yscale("log")  # runs orders of magnitude apart stay readable side by side
    else:
        axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    place_legend(axes)
    return figure
