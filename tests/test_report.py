"""`shock report`: one self-contained HTML page (table and figures), checked as HTML and in a
real headless browser."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from headless_chromium import CHROMIUM, open_page, screenshot
from matplotlib.image import imread
from shock_cli import run_shock
from typer.testing import CliRunner

from shock.cli.app import app
from shock.engine.runner import bundled_trace_path
from shock.results.report import build_report
from shock.results.runs import load_run

SWEEP_SPEC = """
[base]
cluster = "2:2:2"
preset = "gavel"
[generate]
jobs = 10
[grid]
policy = ["fifo_perf", "max_min_fairness_perf"]
rate = [1.0, 3.0]
"""


class PageOutline(HTMLParser):
    """The parts of the page the test checks: tags, table rows, image sources, outside links."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.tables: list[list[list[str]]] = []  # rows of cells, per table
        self.image_sources: list[str] = []
        self.figure_kinds: list[str] = []
        self.urls: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.image_sources.append(values.get("src") or "")
        elif tag == "figure":
            self.figure_kinds.append(values.get("data-kind") or "")
        for name in ("href", "src"):
            value = values.get(name)
            if value and not value.startswith("data:"):
                self.urls.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Real documents: FIFO and LAS on Gavel's 96-job trace, a small run whose timeline was
    left out (as older versions wrote documents), and a sweep."""
    root = tmp_path_factory.mktemp("report")
    paths = [root / "fifo.json", root / "las.json", root / "old.json"]
    for path, policy in zip(paths[:2], ("fifo_perf", "max_min_fairness_perf"), strict=True):
        result = CliRunner().invoke(
            app, ["run", "--quiet", "--preset", "gavel", "--policy", policy, "--json", str(path)]
        )
        assert result.exit_code == 0, result.output
    trace = str(bundled_trace_path("small_test.trace"))
    result = CliRunner().invoke(app, ["run", "--quiet", "--trace", trace, "--json", str(paths[2])])
    assert result.exit_code == 0, result.output
    old = json.loads(paths[2].read_text())
    del old["timeline"]
    paths[2].write_text(json.dumps(old))
    (root / "spec.toml").write_text(SWEEP_SPEC)
    sweep = root / "sweep"
    result = CliRunner().invoke(
        app, ["sweep", str(root / "spec.toml"), "--out", str(sweep), "--quiet", "--parallel", "1"]
    )
    assert result.exit_code == 0, result.output
    return [*paths, sweep]


# Two timelines: utilisation, queue, solve time, and one Gantt chart per run with a timeline.
EXPECTED_KINDS = [
    "jct-cdf", "rho-cdf", "summary", "utilization", "queue", "solve-time", "gantt", "gantt",
    "jct-vs-load",
]


@pytest.fixture(scope="module")
def report(inputs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("page") / "report.html"
    result = run_shock("report", *map(str, inputs), "-o", str(output), cwd=output.parent)
    assert result.returncode == 0, result.stderr
    return output


def test_the_page_holds_the_table_and_every_figure_inline(report: Path, inputs: list[Path]) -> None:
    outline = PageOutline()
    outline.feed(report.read_text())
    # Self-contained: no script, no stylesheet link, no outside URL.
    assert "script" not in outline.tags and "link" not in outline.tags
    assert outline.urls == []
    assert outline.figure_kinds == EXPECTED_KINDS
    assert all(src.startswith("data:image/") for src in outline.image_sources)
    assert len(outline.image_sources) == len(EXPECTED_KINDS)
    # `shock compare`'s table: a row per metric, a column per run and per sweep group, in
    # parts of at most four runs so a narrow page wraps it; then the sweep pivoted by its
    # load axis, one table per headline metric; then how each run was made.
    assert len(outline.tables) == 2 + 5 + 1
    header, *rows = outline.tables[0]
    assert header == ["metric", "fifo (baseline)", "las", "old", "fifo_perf · 1"]
    assert outline.tables[1][0] == [
        "metric", "fifo_perf · 3", "max_min_fairness_perf · 1", "max_min_fairness_perf · 3",
    ]
    assert [row[0] for row in outline.tables[1][1:]] == [row[0] for row in rows]
    by_metric = {row[0]: row[1:] for row in rows}
    # Ratios to the first run.
    runs = [load_run(p) for p in inputs[:3]]
    ratio = runs[1].metrics["avg_jct_s"] / runs[0].metrics["avg_jct_s"]  # type: ignore[operator]
    jct = by_metric["average JCT (h)"]
    assert ratio != 1 and jct[1].endswith(f"×{ratio:.2f}") and "×" not in jct[0]
    # One unit per row: hours for every run's average JCT, the spread too.
    hours = runs[0].metrics["avg_jct_s"] / 3600  # type: ignore[operator]
    assert jct[0] == f"{hours:,.2f}"
    assert by_metric["jobs measured"][:3] == ["96", "96", "20"]
    pivot_header, *pivot_rows = outline.tables[2]
    assert pivot_header == ["rate", "fifo_perf", "max_min_fairness_perf"]
    assert [row[0] for row in pivot_rows] == ["1", "3"]
    # Each rate's policies against fifo_perf at that rate.
    assert all("×" not in row[1] and "×" in row[2] for row in pivot_rows)
    setup_header, *setups = outline.tables[-1]
    assert setup_header[:3] == ["run", "policy", "backend"]
    assert setups[2][1:4] == ["max_min_fairness_perf", "simulator", "highs"]


def test_a_report_without_timelines_or_sweeps_leaves_their_figures_out(
    inputs: list[Path],
) -> None:
    outline = PageOutline()
    outline.feed(build_report([inputs[2]]))
    assert outline.figure_kinds == ["jct-cdf", "rho-cdf"]
    assert [len(table[0]) for table in outline.tables] == [2, 8]  # one run: one column
    assert len(outline.tables[1]) == 2


def test_a_baseline_changes_what_the_ratios_are_to(inputs: list[Path]) -> None:
    outline = PageOutline()
    outline.feed(build_report(inputs[:2], baseline_name="las"))
    header, *rows = outline.tables[0]
    assert header == ["metric", "fifo", "las (baseline)"]
    jct = next(row for row in rows if row[0] == "average JCT (h)")
    assert "×" in jct[1] and "×" not in jct[2]


def test_bad_report_requests_get_a_clear_error(inputs: list[Path], tmp_path: Path) -> None:
    result = run_shock("report", str(inputs[0]), "-o", str(tmp_path / "r.pdf"), cwd=tmp_path)
    assert result.returncode == 2 and "name it *.html" in result.stderr
    result = run_shock(
        "report", str(inputs[0]), "--baseline", "zzz", "-o", str(tmp_path / "r.html"), cwd=tmp_path
    )
    assert result.returncode == 2 and "--baseline zzz: no run has that label" in result.stderr
    assert not (tmp_path / "r.html").exists()


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (apt-get install chromium; CI installs it)",
)


@needs_chromium
def test_the_page_renders_in_a_browser_without_errors_or_requests(report: Path) -> None:
    url = report.resolve().as_uri()
    with open_page(url) as page:
        layout = page.evaluate(
            """(async () => {
                await Promise.all([...document.images].map(image => image.decode()));
                const size = element => {
                    const box = element.getBoundingClientRect();
                    return [box.width, box.height];
                };
                return {
                    rows: document.querySelectorAll("table.setup tbody tr").length,
                    metrics: document.querySelectorAll("table.comparison tbody tr").length,
                    table: size(document.querySelector("table.comparison")),
                    images: [...document.images].map(
                        image => [...size(image), image.naturalWidth, image.naturalHeight]),
                };
            })()"""
        )
    assert page.console_errors == []
    assert all(re.match(r"(file|data):", request) for request in page.requests), page.requests
    assert layout["rows"] == 3 and layout["metrics"] >= 10
    assert min(layout["table"]) > 0
    assert len(layout["images"]) == len(EXPECTED_KINDS)
    for width, height, natural_width, natural_height in layout["images"]:
        assert width > 100 and height > 100 and natural_width > 0 and natural_height > 0


@needs_chromium
def test_the_screenshot_shows_the_page(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    screenshot(report.resolve().as_uri(), shot)
    pixels = imread(shot)
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1200
    # Not blank: well over a few percent of the pixels are drawn, in several colours.
    drawn = np.any(pixels[..., :3] < 0.95, axis=-1)
    assert drawn.mean() > 0.03
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50
