"""`shock plot`'s flags for papers: legend labels, texts, size, fonts, the paper look, a style
file, PNG resolution, SVG text kept as text, PDF by extension; the flags every kind accepts;
jct-vs-load's metrics; Gantt charts of a report on one time axis."""

from __future__ import annotations

import csv
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from results_documents import make_document, write_document
from typer.testing import CliRunner

from shock.cli.app import app
from shock.results.figures.kinds import KINDS, draw_with_notes
from shock.results.figures.load import LOAD_METRICS, load_curves
from shock.results.figures.options import FigureOptions
from shock.results.report import build_report

SVG = "{http://www.w3.org/2000/svg}"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("docs")
    return [
        write_document(
            root / "fifo.json",
            make_document("fifo_perf", [3600.0 * (1 + i % 5) for i in range(30)],
                          [1.0 + 0.1 * (i % 7) for i in range(30)], rounds=20),
        ),
        write_document(
            root / "gavel.json",
            make_document("max_min_fairness_perf", [1800.0 * (1 + i % 4) for i in range(12)],
                          [0.9 + 0.05 * (i % 5) for i in range(12)], rounds=8, seed=1),
        ),
    ]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep's runs.csv: two policies, three rates, two seeds (the columns `shock sweep`
    writes; the simulations themselves are tested in test_sweep.py)."""
    out = tmp_path_factory.mktemp("sweep")
    metrics = ["avg_jct_s", "p99_jct_s", "makespan_s", "worst_ftf_rho", "utilization"]
    rng = np.random.default_rng(0)
    with (out / "runs.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["cell", "policy", "rate", "seed", *metrics, "status", "error", "wall_s"])
        for policy in ("fifo_perf", "max_min_fairness_perf"):
            for rate in (1.0, 2.0, 4.0):
                for seed in (0, 1):
                    values = [float(v) for v in rng.uniform(1000, 9000, size=4)]
                    writer.writerow([f"{policy}{rate}{seed}", policy, rate, seed, *values,
                                     rng.uniform(0.2, 0.9), "done", "", 1.0])
    return out


def plot(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(app, ["plot", *args])
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def test_png_is_200_dpi_by_default_and_dpi_and_size_change_it(
    docs: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "a.png"
    plot("jct-cdf", *map(str, docs), "-o", str(out))
    assert png_size(out) == (7 * 200, int(4.2 * 200))
    plot("jct-cdf", *map(str, docs), "-o", str(out), "--dpi", "100", "--size", "5,3")
    assert png_size(out) == (500, 300)
    plot("jct-cdf", *map(str, docs), "-o", str(out), "--style", "paper")
    assert png_size(out) == (int(3.4 * 200), int(2.4 * 200))


def test_svg_keeps_text_as_text_with_the_given_labels(docs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "a.svg"
    plot(
        "jct-cdf", *map(str, docs), "-o", str(out), "--label", "gavel=Gavel",
        "--label", "fifo_perf=FIFO", "--title", "Completion times", "--xlabel", "JCT (h)",
        "--ylabel", "CDF",
    )
    root = ET.parse(out).getroot()
    texts = {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}
    assert {"Gavel", "FIFO", "Completion times", "JCT (h)", "CDF"} <= texts
    assert "max_min_fairness_perf" not in out.read_text()


needs_poppler = pytest.mark.skipif(
    shutil.which("pdftoppm") is None,
    reason="pdftoppm is not installed (apt-get install poppler-utils; CI installs it)",
)


@needs_poppler
def test_pdf_opens_and_renders(docs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "figure.pdf"
    plot("summary", *map(str, docs), "-o", str(out), "--style", "paper", "--label", "fifo=FIFO")
    assert out.read_bytes().startswith(b"%PDF")
    # Rendered by another program: poppler, at 100 dpi, to a PNG of the figure's size.
    subprocess.run(
        ["pdftoppm", "-png", "-r", "100", "-singlefile", str(out), str(tmp_path / "page")],
        check=True,
        timeout=60,
    )
    page = tmp_path / "page.png"
    width, height = png_size(page)
    # The paper look's size: a column, 3.4 × 2.4 inches.
    assert (width, height) == (340, 240)
    from matplotlib.image import imread

    pixels = imread(page)
    drawn = np.any(pixels[..., :3] < 0.9, axis=-1)
    assert 0.02 < drawn.mean() < 0.9  # bars, text and axes; not blank, not solid
    # The fonts are embedded as TrueType (what publishers ask for), not Type 3.
    fonts = subprocess.run(["pdffonts", str(out)], capture_output=True, text=True, timeout=60)
    if fonts.returncode == 0:
        assert "TrueType" in fonts.stdout and "Type 3" not in fonts.stdout


def test_paper_look_font_size_and_style_file(docs: list[Path], tmp_path: Path) -> None:
    style_file = tmp_path / "mine.mplstyle"
    style_file.write_text("axes.facecolor: eeeeee\n")
    drawn = draw_with_notes(
        "jct-cdf", docs, FigureOptions(style="paper", font_size=11, style_file=style_file)
    )
    axes = drawn.figure.axes[0]
    assert tuple(drawn.figure.get_size_inches()) == (3.4, 2.4)
    assert axes.title.get_fontsize() == 11  # "medium" of the base size
    assert axes.get_facecolor()[:3] == pytest.approx((0.933, 0.933, 0.933), abs=0.01)
    assert axes.xaxis.label.get_fontfamily() == ["serif"]
    # The paper look puts the legend below the data, the screen look beside it; neither on it.
    assert drawn.figure.legends and axes.get_legend() is None
    screen = draw_with_notes("jct-cdf", docs, FigureOptions()).figure
    legend = screen.axes[0].get_legend()
    assert legend is not None
    screen.canvas.draw()
    box = legend.get_window_extent()
    assert box.x0 >= screen.axes[0].get_window_extent().x1  # right of the axes


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_takes_every_common_flag(
    kind: str, docs: list[Path], sweep: Path, tmp_path: Path
) -> None:
    inputs = [str(sweep)] if kind == "jct-vs-load" else [str(docs[0])]
    if kind == "summary":
        inputs = [str(d) for d in docs]
    out = tmp_path / f"{kind}.pdf"
    _, errors = plot(
        kind, *inputs, "-o", str(out), "--label", "fifo_perf=FIFO", "--title", "T",
        "--xlabel", "X", "--ylabel", "Y", "--size", "4,3", "--font-size", "9",
        "--style", "paper", "--dpi", "150", "--baseline", "fifo", "--metric", "p99_jct",
    )
    assert out.read_bytes().startswith(b"%PDF")
    if kind != "summary":
        assert f"note: --baseline applies to the summary figure; '{kind}' ignores it" in errors
    if kind != "jct-vs-load":
        assert f"note: --metric applies to jct-vs-load; '{kind}' ignores it" in errors


def test_a_label_that_names_nothing_is_a_note(docs: list[Path], tmp_path: Path) -> None:
    _, errors = plot("jct-cdf", str(docs[0]), "-o", str(tmp_path / "x.png"), "--label", "las=L")
    assert "note: --label las=...: no run or policy of this figure is named so" in errors


@pytest.mark.parametrize("metric", list(LOAD_METRICS))
def test_jct_vs_load_draws_each_metric_as_the_mean_over_seeds(metric: str, sweep: Path) -> None:
    with (sweep / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    column = LOAD_METRICS[metric].column
    curves = load_curves([sweep], metric)
    assert curves.seeds == 2
    figure = draw_with_notes(
        "jct-vs-load", [sweep],
        FigureOptions(metric=metric, labels={"max_min_fairness_perf": "Gavel"}),
    ).figure
    axes = figure.axes[0]
    lines = axes.get_lines()
    legend = axes.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["fifo_perf", "Gavel"]
    assert legend.get_title().get_text() == "mean of 2 seeds, min–max shaded"
    for series, line in zip(curves.series, lines, strict=True):
        for load, mean in zip(series.load, series.mean, strict=True):
            values = [float(r[column]) for r in rows
                      if r["policy"] == series.policy and float(r["rate"]) == load]
            assert mean == pytest.approx(np.mean(values))
        scale = np.array(series.mean) / np.array(line.get_ydata())
        assert np.allclose(scale, scale[0])  # one unit for the whole line
    if metric == "utilization":
        assert "%" in axes.get_ylabel()


def test_a_reports_gantt_charts_share_one_time_axis(docs: list[Path]) -> None:
    page = build_report(docs)
    assert page.count('data-kind="gantt"') == 2
    from shock.results.figures.gantt import gantt, gantt_end_s
    from shock.results.runs import load_run

    runs = [load_run(d) for d in docs]
    until = max(gantt_end_s(r) for r in runs)
    limits = {gantt([r], until_s=until).axes[0].get_xlim() for r in runs}
    assert len(limits) == 1
    alone = {gantt([r]).axes[0].get_xlim() for r in runs}
    assert len(alone) == 2  # on their own, each chart would end at its own last job
