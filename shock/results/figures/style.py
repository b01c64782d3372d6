"""What every figure shares: off-screen drawing, the screen and paper looks, time units,
worker-type colours, legends placed off the data, and saving as PNG, SVG or PDF."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # figures are files, never windows

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from shock.core.errors import InputError

FORMATS = (".png", ".svg", ".pdf")
DEFAULT_DPI = 200  # PNG: sharp on a high-density screen and in print
STYLES = ("screen", "paper")

# Every look keeps text as text: SVG text as <text> (editable, searchable), PDF fonts embedded
# as TrueType (type 42, what publishers ask for) rather than Type 3.
_TEXT_AS_TEXT = {"svg.fonttype": "none", "pdf.fonttype": 42, "ps.fonttype": 42}
STYLE_RC: dict[str, dict[str, object]] = {
    "screen": {
        **_TEXT_AS_TEXT,
        "font.size": 10.0,
        "legend.fontsize": "small",
        "legend.title_fontsize": "small",
    },
    # A column of a two-column paper: small serif type, no top and right spines.
    "paper": {
        **_TEXT_AS_TEXT,
        "font.size": 8.0,
        "font.family": "serif",
        "font.serif": ["DejaVu Serif", "Times New Roman", "Times"],
        "mathtext.fontset": "dejavuserif",
        "axes.titlesize": "medium",
        "axes.labelsize": "medium",
        "legend.fontsize": "small",
        "legend.title_fontsize": "small",
        "xtick.labelsize": "small",
        "ytick.labelsize": "small",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "lines.linewidth": 1.2,
        "lines.markersize": 3.5,
        "axes.linewidth": 0.6,
        "grid.linewidth": 0.4,
    },
}
# A figure's default size per look (inches): a screen, and one column of a paper.
STYLE_SIZE = {"screen": (7.0, 4.2), "paper": (3.4, 2.4)}

_current_style: ContextVar[str] = ContextVar("figure_style", default="screen")


@contextlib.contextmanager
def figure_style(
    style: str = "screen", font_size: float | None = None, style_file: Path | None = None
) -> Iterator[None]:
    """Draw and save within this: the look's settings, then a matplotlib style file's, then
    the font size (every other size in the figures is relative to it)."""
    if style not in STYLES:
        raise InputError(f"'{style}' is not a style; use {' or '.join(STYLES)}", field="--style")
    rc: dict[str, Any] = dict(STYLE_RC[style])
    token = _current_style.set(style)
    try:
        with matplotlib.rc_context(rc):  # type: ignore[arg-type]  # keys typed as literals
            if style_file is not None:
                _use_style_file(style_file)
            if font_size is not None:
                if font_size <= 0:
                    raise InputError("must be > 0", field="--font-size")
                matplotlib.rcParams["font.size"] = font_size
            yield
    finally:
        _current_style.reset(token)


def _use_style_file(path: Path) -> None:
    import matplotlib.style

    if not path.is_file():
        raise InputError("no such matplotlib style file", path=path, field="--style-file")
    try:
        matplotlib.style.use(str(path))
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"not a matplotlib style file ({exc})", path=path) from None


def current_style() -> str:
    return _current_style.get()


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


def new_figure(width: float | None = None, height: float | None = None) -> Figure:
    """A figure of the current look's size (a kind may ask for a wider or taller one)."""
    default_width, default_height = STYLE_SIZE[current_style()]
    scale = default_width / STYLE_SIZE["screen"][0]
    # A kind's own size is for the screen look; the paper look scales it down alike, to no
    # less than a column's width and its default height.
    size = (
        default_width if width is None else max(default_width, width * scale),
        default_height if height is None else max(default_height, height * scale),
    )
    return Figure(figsize=size, layout="constrained")


def place_legend(
    axes: Axes, handles: Sequence[Artist] | None = None, title: str | None = None
) -> None:
    """A legend beside the data, never over it: right of the axes, or (a paper figure with
    one axes, narrow as a column) below it in up to three columns."""
    if handles is None:
        found, labels = axes.get_legend_handles_labels()
    else:
        found, labels = list(handles), [str(h.get_label()) for h in handles]
    if not found:
        return
    figure = axes.get_figure()
    if current_style() == "paper" and isinstance(figure, Figure) and len(figure.axes) == 1:
        figure.legend(
            found, labels, loc="outside lower center", ncols=min(len(found), 3),
            frameon=False, title=title,
        )
        return
    axes.legend(
        found, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
        frameon=False, title=title,
    )


def worker_colours(worker_types: tuple[str, ...]) -> dict[str, str]:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    # The same type gets the same colour in every figure of a run.
    names = sorted(set(worker_types))
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def check_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InputError(
            "cannot tell the image format from the name: use a "
            f"{', '.join(FORMATS[:-1])} or {FORMATS[-1]} file",
            path=path,
        )
    return suffix


def save_figure(figure: Figure, path: str | Path, dpi: int = DEFAULT_DPI) -> Path:
    path = Path(path)
    suffix = check_format(path)
    if dpi <= 0:
        raise InputError("must be > 0", field="--dpi")
    path.parent.mkdir(parents=True, exist_ok=True)
    # No timestamp or software stamp, so reruns give the same file.
    metadata: dict[str, None] = {
        ".svg": {"Date": None},
        ".pdf": {"CreationDate": None, "ModDate": None},
        ".png": {"Software": None},
    }[suffix]
    with matplotlib.rc_context(dict(_TEXT_AS_TEXT)):  # type: ignore[arg-type]
        figure.savefig(path, dpi=dpi, metadata=metadata)
    return path
