"""Jobs against time for one run: where each job ran (coloured by worker type), its wait
(grey), and when its batch size changed (black ticks). Jobs sorted by arrival, one per row."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from shock.core.errors import InputError
from shock.core.timeline import JobTimeline
from shock.results.figures.style import new_figure, place_legend, time_unit, worker_colours
from shock.results.runs import RunView

WAIT_COLOUR = "#dddddd"


def gantt_end_s(run: RunView) -> float:
    """When the run's last job finished or last ran (seconds)."""
    timeline = run.require_timeline("gantt")
    ends = [seg.end_s for job in timeline.jobs for seg in job.segments]
    ends += (run.arrival_s + run.jct_s).tolist()
    return max(ends, default=1.0)


def gantt(runs: Sequence[RunView], until_s: float | None = None) -> Figure:
    """`until_s`: where the time axis ends (charts of several runs drawn to one scale)."""
    if len(runs) != 1:
        raise InputError(f"the gantt figure draws one run; got {len(runs)} documents")
    run = runs[0]
    timeline = run.require_timeline("gantt")
    if not timeline.jobs:
        raise InputError("the timeline has no jobs to draw", path=run.path, field="timeline.jobs")
    arrivals = dict(zip(run.job_ids.tolist(), run.arrival_s.tolist(), strict=True))
    completions = dict(
        zip(run.job_ids.tolist(), (run.arrival_s + run.jct_s).tolist(), strict=True)
    )

    def arrival(job: JobTimeline) -> float:
        first = job.segments[0].start_s if job.segments else 0.0
        return arrivals.get(job.job_id, first)

    jobs = sorted(timeline.jobs, key=lambda job: (arrival(job), job.job_id))
    ends = [seg.end_s for job in jobs for seg in job.segments] + list(completions.values())
    unit = time_unit(until_s if until_s is not None else max(ends, default=1.0))
    # Thin rows for many jobs; the figure grows with the job count up to a readable height.
    height = min(2.0 + 0.03 * len(jobs), 16.0)
    figure = new_figure(width=8.0, height=max(height, 3.5))
    axes = figure.add_subplot()
    bar = 0.8 if len(jobs) <= 60 else 1.0

    waits = []
    by_type: dict[str, list[tuple[float, float, int]]] = {}
    changes_x, changes_y = [], []
    for row, job in enumerate(jobs):
        start = arrival(job)
        end = completions.get(job.job_id, max((s.end_s for s in job.segments), default=start))
        waits.append((start / unit.seconds, (end - start) / unit.seconds, row))
        for segment in job.segments:
            length = segment.end_s - segment.start_s
            by_type.setdefault(segment.worker_type, []).append(
                (segment.start_s / unit.seconds, length / unit.seconds, row)
            )
        for time_s, _ in job.batch_sizes[1:]:
            changes_x.append(time_s / unit.seconds)
            changes_y.append(row)

    def draw(spans: list[tuple[float, float, int]], colour: str, label: str) -> None:
        # One collection of rectangles per colour: thousands of segments draw in a blink.
        half = bar / 2
        rectangles = [
            [(x, y - half), (x, y + half), (x + width, y + half), (x + width, y - half)]
            for x, width, y in spans
        ]
        axes.add_collection(
            PolyCollection(rectangles, facecolors=colour, linewidths=0, label=label)
        )

    draw(waits, WAIT_COLOUR, "waiting")
    colours = worker_colours(timeline.worker_types + tuple(by_type))
    for worker_type in sorted(by_type):
        draw(by_type[worker_type], colours[worker_type], f"on {worker_type}")
    handles: list[Patch | Line2D] = [Patch(color=WAIT_COLOUR, label="waiting")]
    handles += [Patch(color=colours[w], label=f"on {w}") for w in sorted(by_type)]
    if changes_x:
        axes.scatter(changes_x, changes_y, marker="|", s=30, color="black", linewidths=1.2)
        handles.append(
            Line2D([], [], marker="|", linestyle="", color="black", label="batch size change")
        )
    axes.set_ylim(len(jobs) - 0.5, -0.5)  # first arrival on top
    last = max((left + width for left, width, _ in waits), default=1.0)
    if until_s is not None:
        last = max(last, until_s / unit.seconds)
    axes.set_xlim(0, last * 1.02)
    if len(jobs) > 40:
        axes.set_yticks([])
    else:
        axes.set_yticks(
            np.arange(len(jobs)), [str(job.job_id) for job in jobs], fontsize="x-small"
        )
    axes.set_ylabel(f"{len(jobs)} jobs, by arrival")
    axes.set_xlabel(unit.label("time"))
    axes.set_title(f"Jobs over time — {run.legend}")
    place_legend(axes, handles)
    axes.grid(axis="x", alpha=0.3)
    return figure
