"""What every figure shares: off-screen drawing, time units, worker-type colours, saving."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files, never windows

from matplotlib.figure import Figure

from shock.core.errors import InputError

FORMATS = (".png", ".svg")
PNG_DPI = 110


@dataclass(frozen=True, slots=True)
class TimeUnit:
    seconds: float
    name: str

    def label(self, quantity: str) -> str:
        return f"{quantity} ({self.name})"


def time_unit(largest_s: float) -> TimeUnit:
    """Hours once times pass a few hours, minutes past a few minutes, else seconds."""
    if largest_s >= 3 * 3600:
        return TimeUnit(3600.0, "hours")
    if largest_s >= 3 * 60:
        return TimeUnit(60.0, "minutes")
    return TimeUnit(1.0, "seconds")


def new_figure(width: float = 7.0, height: float = 4.2) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def worker_colours(worker_types: tuple[str, ...]) -> dict[str, str]:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    # The same type gets the same colour in every figure of a run.
    names = sorted(set(worker_types))
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def check_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InputError(
            f"cannot tell the image format from the name: use a {' or '.join(FORMATS)} file",
            path=path,
        )
    return suffix


def save_figure(figure: Figure, path: str | Path) -> Path:
    path = Path(path)
    suffix = check_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # SVG text stays text (smaller, searchable); no timestamp, so reruns give the same file.
    metadata = {"Date": None} if suffix == ".svg" else {"Software": None}
    figure.savefig(path, dpi=PNG_DPI, metadata=metadata)
    return path
