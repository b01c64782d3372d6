"""The headline metrics of several runs as grouped bars, normalised to a baseline run (as the
figures of Shockwave's paper): below 1 is better than the baseline for every metric shown."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from shock.core.errors import InputError
from shock.results.figures.style import current_style, new_figure, place_legend
from shock.results.runs import RunView
from shock.util.suggest import did_you_mean

# (metrics key, axis label)
SUMMARY_METRICS = (
    ("makespan_s", "makespan"),
    ("avg_jct_s", "average JCT"),
    ("worst_ftf_rho", "worst FTF ρ"),
    ("unfair_fraction", "unfair share"),
)


def pick_baseline(runs: Sequence[RunView], name: str | None) -> RunView:
    """The run whose label (file stem), legend or policy is `name`; the first run by default."""
    if name is None:
        return runs[0]
    for run in runs:
        if name in (run.label, run.legend, run.path.name):
            return run
    matching = [run for run in runs if run.policy == name]
    if len(matching) == 1:
        return matching[0]
    known = ", ".join(run.label for run in runs)
    if len(matching) > 1:
        raise InputError(f"baseline '{name}' names several runs' policy; use a file stem: {known}")
    hint = did_you_mean(name, [run.label for run in runs] + [run.policy for run in runs])
    raise InputError(
        f"no run named '{name}' for --baseline; " + (f"{hint} " if hint else "")
        + f"the runs: {known}"
    )


def summary_ratios(runs: Sequence[RunView], baseline: RunView) -> np.ndarray:
    ratios = np.full((len(runs), len(SUMMARY_METRICS)), np.nan)
    for j, (key, _) in enumerate(SUMMARY_METRICS):
        reference = baseline.metrics.get(key)
        if reference is None or reference == 0:
            continue
        for i, run in enumerate(runs):
            value = run.metrics.get(key)
            if value is not None:
                ratios[i, j] = value / reference
    return ratios


def summary(runs: Sequence[RunView], baseline_name: str | None = None) -> Figure:
    baseline = pick_baseline(runs, baseline_name)
    ratios = summary_ratios(runs, baseline)
    figure = new_figure(width=max(6.0, 1.2 + 0.35 * len(runs) * len(SUMMARY_METRICS)))
    axes = figure.add_subplot()
    width = 0.8 / len(runs)
    groups = np.arange(len(SUMMARY_METRICS))
    for i, run in enumerate(runs):
        offsets = groups - 0.4 + width * (i + 0.5)
        heights = np.nan_to_num(ratios[i], nan=0.0)
        bars = axes.bar(offsets, heights, width * 0.92, label=run.legend)
        labels = ["n/a" if np.isnan(r) else f"{r:.2f}" for r in ratios[i]]
        # A column-wide figure has no room for side-by-side numbers: they stand upright.
        upright = 90 if current_style() == "paper" else 0
        axes.bar_label(bars, labels=labels, fontsize="x-small", padding=1, rotation=upright)
    ticks = []
    for j, (key, name) in enumerate(SUMMARY_METRICS):
        reference = baseline.metrics.get(key)
        ticks.append(name if np.isfinite(ratios[:, j]).any() else f"{name}\n(baseline {reference})")
    axes.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    axes.set_xticks(groups, ticks)
    # A column is too short for the whole sentence; a paper's caption says which way is better.
    better = "" if current_style() == "paper" else " (lower is better)"
    axes.set_ylabel(f"relative to {baseline.legend}{better}")
    axes.set_title("Summary, normalised to the baseline")
    headroom = 1.3 if current_style() == "paper" else 1.15  # room for the upright numbers
    axes.set_ylim(0, max(1.2, float(np.nanmax(ratios, initial=1.0)) * headroom))
    axes.grid(axis="y", alpha=0.3)
    place_legend(axes)
    return figure
