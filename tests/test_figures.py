"""`shock plot`: every figure kind draws what its inputs hold, into valid PNG/SVG files, and bad
inputs get a clear error."""

from __future__ import annotations

import csv
import json
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from results_documents import make_document, write_document
from shock_cli import run_shock
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError, ShockError
from shock.engine.runner import bundled_trace_path
from shock.results.figures.kinds import KINDS, draw_kind
from shock.results.figures.load import load_series
from shock.results.figures.summary import SUMMARY_METRICS
from shock.results.runs import load_run

SMALL_RUN = ["run", "--quiet", "--trace", str(bundled_trace_path("small_test.trace"))]
# Shockwave's bundled dynamic trace: a few hundred rounds, jobs that change their batch size.
SHOCKWAVE_RUN = [
    "run", "--quiet", "--preset", "shockwave", "--cluster", "64:0:0",
    "--trace", str(bundled_trace_path("shockwave_220_multigpu_dynamic.trace")),
    "--throughputs", str(bundled_trace_path().parents[1] / "shockwave_wisr_throughputs.json"),
]
SWEEP_SPEC = """
[base]
cluster = "2:2:2"
preset = "gavel"
[generate]
jobs = 12
[grid]
policy = ["max_min_fairness_perf", "fifo_perf"]
rate = [1.0, 3.0]
seed = [0, 1]
"""


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def svg_root(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real `shock run --json` documents, timelines included: FIFO and LAS."""
    root = tmp_path_factory.mktemp("docs")
    paths = {"fifo": root / "fifo.json", "las": root / "las.json"}
    for name, policy in (("fifo", "fifo"), ("las", "max_min_fairness")):
        result = CliRunner().invoke(
            app, [*SHOCKWAVE_RUN, "--policy", policy, "--json", str(paths[name])]
        )
        assert result.exit_code == 0, result.output
        assert load_run(paths[name]).timeline is not None
    return paths


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real `shock run --json` document without its timeline, as older versions wrote it."""
    path = tmp_path_factory.mktemp("real") / "real.json"
    result = CliRunner().invoke(app, [*SMALL_RUN, "--json", str(path)])
    assert result.exit_code == 0, result.output
    document = json.loads(path.read_text())
    del document["timeline"]
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    (root / "spec.toml").write_text(SWEEP_SPEC)
    out = root / "out"
    result = CliRunner().invoke(
        app, ["sweep", str(root / "spec.toml"), "--out", str(out), "--quiet", "--parallel", "1"]
    )
    assert result.exit_code == 0, result.output
    return out


def _inputs(kind: str, docs: dict[str, Path], sweep: Path) -> list[Path]:
    if kind == "jct-vs-load":
        return [sweep]
    if kind == "gantt":
        return [docs["fifo"]]
    return [docs["fifo"], docs["las"]]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_every_kind_writes_a_valid_image(
    kind: str, suffix: str, docs: dict[str, Path], sweep: Path, tmp_path: Path
) -> None:
    output = tmp_path / f"figure{suffix}"
    inputs = [str(p) for p in _inputs(kind, docs, sweep)]
    result = CliRunner().invoke(app, ["plot", kind, *inputs, "-o", str(output)])
    assert result.exit_code == 0, result.output
    if suffix == ".png":
        width, height = png_size(output)
        assert width > 300 and height > 200
    else:
        root = svg_root(output)
        # Real drawing, not an empty canvas: paths for the data.
        assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 10


def _legend(figure: Figure, axes_index: int = 0) -> list[str]:
    legend = figure.axes[axes_index].get_legend()
    assert legend is not None
    return [text.get_text() for text in legend.get_texts()]


def test_jct_cdf_has_one_line_per_run_ending_at_one(docs: dict[str, Path]) -> None:
    figure = draw_kind("jct-cdf", [docs["fifo"], docs["las"]])
    axes = figure.axes[0]
    lines = axes.get_lines()
    assert [line.get_label() for line in lines] == ["fifo", "las (max_min_fairness)"]
    assert _legend(figure) == ["fifo", "las (max_min_fairness)"]
    for line, name in zip(lines, ("fifo", "las"), strict=True):
        run = load_run(docs[name])
        x, y = line.get_xydata().T
        # Hours: the longest job takes 12 h.
        assert len(x) == 220 and np.allclose(x, np.sort(run.jct_s) / 3600)
        assert y[-1] == pytest.approx(1.0) and np.all(np.diff(y) > 0)
    assert "hours" in axes.get_xlabel()  # the longest jobs take hours


def test_rho_cdf_skips_jobs_without_a_rho_and_marks_fairness(tmp_path: Path) -> None:
    document = make_document("p", [100.0, 200.0, 300.0], [1.5, None, 0.5])
    figure = draw_kind("rho-cdf", [write_document(tmp_path / "p.json", document)])
    curves = [line for line in figure.axes[0].get_lines() if not line.get_label().startswith("_")]
    assert len(curves) == 1
    assert list(curves[0].get_xdata()) == [0.5, 1.5]


def test_summary_bars_are_the_metric_ratios_to_the_baseline(docs: dict[str, Path]) -> None:
    runs = {name: load_run(path) for name, path in docs.items()}
    for baseline in ("fifo", "las"):
        figure = draw_kind("summary", [docs["fifo"], docs["las"]], baseline=baseline)
        bars = [c for c in figure.axes[0].containers if isinstance(c, BarContainer)]
        assert [c.get_label() for c in bars] == ["fifo", "las (max_min_fairness)"]
        for container, name in zip(bars, ("fifo", "las"), strict=True):
            heights = [patch.get_height() for patch in container.patches]
            expected = [
                runs[name].metrics[key] / runs[baseline].metrics[key]
                for key, _ in SUMMARY_METRICS
            ]
            assert heights == pytest.approx(expected)
            if name == baseline:
                assert heights == pytest.approx([1.0] * len(SUMMARY_METRICS))


def test_summary_baseline_by_policy_and_unknown_baseline(docs: dict[str, Path]) -> None:
    by_policy = draw_kind("summary", [docs["fifo"], docs["las"]], baseline="max_min_fairness")
    assert by_policy.axes[0].get_ylabel().startswith("relative to las (max_min_fairness)")
    with pytest.raises(InputError, match=r"no run named 'nope'.*fifo, las"):
        draw_kind("summary", [docs["fifo"], docs["las"]], baseline="nope")


def test_summary_with_a_zero_baseline_metric_says_so(tmp_path: Path) -> None:
    fair = write_document(tmp_path / "fair.json", make_document("a", [10.0, 20.0], [1.0, 0.9]))
    other = write_document(tmp_path / "other.json", make_document("b", [10.0, 30.0], [1.0, 2.0]))
    figure = draw_kind("summary", [fair, other])
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels[-1].startswith("unfair share\n(baseline 0")


def test_utilization_has_a_line_per_worker_type_and_the_overall_share(
    docs: dict[str, Path],
) -> None:
    figure = draw_kind("utilization", [docs["fifo"], docs["las"]])
    assert len(figure.axes) == 2
    run = load_run(docs["fifo"])
    timeline = run.timeline
    assert timeline is not None
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    # One GPU type (64 V100s): its line is the overall one, drawn once.
    assert timeline.worker_types == ("v100",)
    assert set(lines) == {"all GPUs (v100)"}
    overall = 100 * timeline.busy_gpus.sum(axis=1) / timeline.capacity.sum()
    assert np.allclose(lines["all GPUs (v100)"].get_ydata()[:-1], overall)
    assert 0 < overall.max() <= 100


def test_utilization_on_a_mixed_cluster_has_a_line_per_worker_type(tmp_path: Path) -> None:
    path = write_document(tmp_path / "mixed.json", make_document("m", [1.0], [1.0], rounds=20))
    figure = draw_kind("utilization", [path])
    timeline = load_run(path).timeline
    assert timeline is not None
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert set(lines) == {"k80", "p100", "v100", "all GPUs"}
    overall = 100 * timeline.busy_gpus.sum(axis=1) / timeline.capacity.sum()
    assert np.allclose(lines["all GPUs"].get_ydata()[:-1], overall)
    for w, name in enumerate(timeline.worker_types):
        share = 100 * timeline.busy_gpus[:, w] / timeline.capacity[w]
        assert np.allclose(lines[name].get_ydata()[:-1], share)


def test_queue_draws_queued_and_running(docs: dict[str, Path]) -> None:
    figure = draw_kind("queue", [docs["fifo"]])
    timeline = load_run(docs["fifo"]).timeline
    assert timeline is not None
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert set(lines) == {"queued", "running"}
    assert np.allclose(lines["queued"].get_ydata()[:-1], timeline.queued)


def test_solve_time_marks_only_the_rounds_that_solved(docs: dict[str, Path]) -> None:
    figure = draw_kind("solve-time", [docs["fifo"], docs["las"]])
    lines = figure.axes[0].get_lines()
    assert len(lines) == 2
    for line, name in zip(lines, ("fifo", "las"), strict=True):
        timeline = load_run(docs[name]).timeline
        assert timeline is not None
        solved = timeline.solve_s > 0
        scale = 1000 if "(ms)" in figure.axes[0].get_ylabel() else 1
        assert 0 < len(line.get_xdata()) == int(solved.sum()) < len(timeline.solve_s)
        assert np.allclose(line.get_ydata(), timeline.solve_s[solved] * scale)


def gantt_bars(figure: Figure) -> dict[str, list[tuple[int, float]]]:
    """Each legend entry's bars as (job id, length in seconds), in the drawn order."""
    axes = figure.axes[0]
    ticks = zip(axes.get_yticks(), axes.get_yticklabels(), strict=True)
    labels = {round(tick): int(text.get_text()) for tick, text in ticks}
    unit = axes.get_xlabel().split("(")[1].rstrip(")")
    scale = {"hours": 3600.0, "minutes": 60.0, "seconds": 1.0}[unit]
    bars: dict[str, list[tuple[int, float]]] = {}
    for collection in axes.collections:
        if isinstance(collection, PolyCollection):
            for path in collection.get_paths():
                (x0, y0), (x1, y1) = path.vertices.min(axis=0), path.vertices.max(axis=0)
                row = round((y0 + y1) / 2)
                bars.setdefault(str(collection.get_label()), []).append(
                    (labels.get(row, row), (x1 - x0) * scale)
                )
    return bars


def test_gantt_draws_every_segment_by_worker_type_and_each_batch_size_change(
    tmp_path: Path,
) -> None:
    # Arrivals out of id order: the rows follow arrival.
    document = make_document("g", [500.0, 900.0, 300.0, 700.0], [1.0] * 4, rounds=5)
    jobs = document["jobs"]
    assert isinstance(jobs, list)
    jobs[0]["arrival_s"], jobs[3]["arrival_s"] = 300.0, 0.0
    figure = draw_kind("gantt", [write_document(tmp_path / "g.json", document)])
    axes = figure.axes[0]
    bars = gantt_bars(figure)
    assert set(bars) == {"waiting", "on v100", "on k80"}
    # Each job's first segment (on v100) lasts a third of its JCT; rows in arrival order.
    assert [job for job, _ in bars["on v100"]] == [3, 1, 2, 0]
    assert [length for _, length in bars["on v100"]] == pytest.approx([700 / 3, 300, 100, 500 / 3])
    assert len(bars["on k80"]) == 4
    assert [t.get_text() for t in axes.get_yticklabels()] == ["3", "1", "2", "0"]
    markers = [c for c in axes.collections if isinstance(c, PathCollection)]
    # Jobs 0 and 3 change their batch size once each.
    assert sum(len(c.get_offsets()) for c in markers) == 2
    assert "batch size change" in _legend(figure)


def test_gantt_of_a_real_run_draws_its_segments_and_batch_size_changes(
    docs: dict[str, Path],
) -> None:
    run = load_run(docs["las"])
    assert run.timeline is not None
    figure = draw_kind("gantt", [docs["las"]])
    axes = figure.axes[0]
    bars = gantt_bars(figure)
    segments: dict[str, int] = {}
    for job in run.timeline.jobs:
        for segment in job.segments:
            name = f"on {segment.worker_type}"
            segments[name] = segments.get(name, 0) + 1
    assert {k: len(v) for k, v in bars.items() if k != "waiting"} == segments
    assert len(bars["waiting"]) == 220
    changes = sum(len(job.batch_sizes) - 1 for job in run.timeline.jobs)
    markers = [c for c in axes.collections if isinstance(c, PathCollection)]
    assert changes > 0 and sum(len(c.get_offsets()) for c in markers) == changes


def test_gantt_stays_readable_for_hundreds_of_jobs(tmp_path: Path) -> None:
    document = make_document("big", [3600.0] * 300, [1.0] * 300, rounds=3)
    figure = draw_kind("gantt", [write_document(tmp_path / "big.json", document)])
    width, height = figure.get_size_inches()
    assert 8 <= height <= 16 and width >= 8
    assert figure.axes[0].get_yticks().size == 0  # no 300 unreadable labels


def test_jct_vs_load_is_the_mean_over_seeds_per_policy(sweep: Path) -> None:
    label, series = load_series([sweep])
    assert label.startswith("arrival rate")
    assert [s.policy for s in series] == ["fifo_perf", "max_min_fairness_perf"]
    with (sweep / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    for s in series:
        for load, mean, samples in zip(s.load, s.mean, s.samples, strict=True):
            values = [
                float(r["avg_jct_s"])
                for r in rows
                if r["policy"] == s.policy and float(r["rate"]) == load
            ]
            assert samples == 2 and mean == pytest.approx(np.mean(values))
    figure = draw_kind("jct-vs-load", [sweep])
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["fifo_perf", "max_min_fairness_perf"]
    assert list(lines[0].get_xdata()) == [1.0, 3.0]


def plot_error(*args: str) -> str:
    """The error `shock plot ARGS` stops with (in-process; the CLI prints it as `error: ...`)."""
    result = CliRunner().invoke(app, ["plot", *args])
    assert isinstance(result.exception, ShockError), result.output
    return " ".join(str(result.exception).split())


def test_a_timeline_kind_on_a_document_without_one_says_so(real_run: Path, tmp_path: Path) -> None:
    # As a user sees it: one line, exit status 2, no traceback.
    result = run_shock(
        "plot", "utilization", str(real_run), "-o", str(tmp_path / "x.png"), cwd=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert "needs the run's timeline" in result.stderr and "real.json" in result.stderr
    for kind in ("queue", "gantt", "solve-time"):
        message = plot_error(kind, str(real_run), "-o", str(tmp_path / "x.png"))
        assert f"the '{kind}' figure needs the run's timeline" in message
    assert not (tmp_path / "x.png").exists()
    # The distributions need no timeline.
    svg = tmp_path / "x.svg"
    result = CliRunner().invoke(app, ["plot", "jct-cdf", str(real_run), "-o", str(svg)])
    assert result.exit_code == 0, result.output
    svg_root(svg)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["histogram", "{doc}"], "unknown figure kind 'histogram'; the kinds: jct-cdf, rho-cdf"),
        (["jct-cdf", "{doc}", "-o", "{tmp}/f.jpg"], "use a .png, .svg or .pdf file"),
        (["jct-cdf", "{tmp}/missing.json"], "missing.json: no such file"),
        (["jct-cdf", "{tmp}/bad.json"], "bad.json: not JSON"),
        (["jct-cdf", "{tmp}/list.json"], "list.json: not a shock results document"),
        (["jct-cdf", "{tmp}"], "reads results documents"),
        (["jct-vs-load", "{doc}"], "reads sweep directories"),
        (["jct-vs-load", "{tmp}"], "no runs.csv here"),
        (["gantt", "{doc}", "{doc}"], "the gantt figure draws one run; got 2"),
        (["jct-cdf", "{doc}", "--label", "x"], "'x' is not NAME=TEXT"),
        (["jct-cdf", "{doc}", "--size", "3"], "'3' is not W,H in inches"),
        (["jct-cdf", "{doc}", "--style", "poster"], "'poster' is not a style"),
        (["jct-vs-load", "{tmp}", "--metric", "p99"], "did you mean 'p99_jct'"),
        (["jct-cdfs", "{doc}"], "did you mean 'jct-cdf'"),
    ],
)
def test_bad_inputs_get_a_clear_error(
    args: list[str], message: str, docs: dict[str, Path], tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[]")
    filled = [a.format(doc=docs["fifo"], tmp=tmp_path) for a in args]
    if "-o" not in filled:
        filled += ["-o", str(tmp_path / "out.png")]
    assert message in plot_error(*filled)
    assert not (tmp_path / "out.png").exists()


def test_a_sweep_that_varies_no_load_is_refused(tmp_path: Path, sweep: Path) -> None:
    table = (sweep / "runs.csv").read_text().splitlines()
    header = table[0].split(",")
    rate = header.index("rate")
    one_rate = [table[0]] + [line for line in table[1:] if line.split(",")[rate] == "1.0"]
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "runs.csv").write_text("\n".join(one_rate) + "\n")
    with pytest.raises(InputError, match="varies no load axis"):
        draw_kind("jct-vs-load", [flat])


def test_run_plot_writes_the_single_run_figures(tmp_path: Path) -> None:
    out = tmp_path / "figures"
    result = CliRunner().invoke(app, [*SMALL_RUN, "--plot", str(out)])
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in out.iterdir())
    assert {"jct-cdf.png", "rho-cdf.png"} <= set(written)
    for path in out.iterdir():
        assert png_size(path)[0] > 300
    assert f"{len(written)} figures written" in result.output


def test_idle_gaps_between_rounds_are_drawn_as_idle(tmp_path: Path) -> None:
    document = make_document("gap", [100.0, 200.0], [1.0, 1.0], rounds=4)
    timeline = document["timeline"]
    assert isinstance(timeline, dict)
    timeline["rounds"]["time_s"] = [0.0, 360.0, 720.0, 5000.0]
    timeline["rounds"]["queued"] = [3, 4, 5, 6]
    figure = draw_kind("queue", [write_document(tmp_path / "gap.json", document)])
    queued = next(line for line in figure.axes[0].get_lines() if line.get_label() == "queued")
    x, y = np.asarray(queued.get_xdata()), np.asarray(queued.get_ydata())
    # Round 3 ends one round length after it starts; nothing waits until 5000 s.
    assert list(x) == pytest.approx([0, 6, 12, 18, 5000 / 60, 5360 / 60])
    assert list(y) == [3, 4, 5, 0, 6, 6]


def test_long_runs_are_drawn_as_window_averages_that_keep_the_mean(tmp_path: Path) -> None:
    document = make_document("long", [100.0], [1.0], rounds=2000, round_s=60.0)
    path = write_document(tmp_path / "long.json", document)
    figure = draw_kind("utilization", [path])
    timeline = load_run(path).timeline
    assert timeline is not None
    overall = next(line for line in figure.axes[0].get_lines() if line.get_label() == "all GPUs")
    y = np.asarray(overall.get_ydata())[:-1]
    assert len(y) == 200
    expected = 100 * timeline.busy_gpus.sum(axis=1) / timeline.capacity.sum()
    assert y.mean() == pytest.approx(expected.mean())  # equal windows of equal rounds
    assert "averaged over" in figure.axes[0].get_title()


def test_the_baseline_may_be_named_by_policy(tmp_path: Path) -> None:
    first = write_document(tmp_path / "run-a.json", make_document("fifo", [10.0, 20.0], [1, 2]))
    second = write_document(tmp_path / "run-b.json", make_document("las", [5.0, 10.0], [1, 1.5]))
    figure = draw_kind("summary", [first, second], baseline="las")
    assert figure.axes[0].get_ylabel().startswith("relative to run-b (las)")
    bars = [c for c in figure.axes[0].containers if isinstance(c, BarContainer)]
    assert bars[0].patches[1].get_height() == pytest.approx(2.0)  # average JCT 15 / 7.5


def test_a_worker_type_has_one_colour_across_figures(tmp_path: Path) -> None:
    path = write_document(tmp_path / "m.json", make_document("m", [900.0] * 3, [1.0] * 3, rounds=9))
    utilization = draw_kind("utilization", [path])
    gantt = draw_kind("gantt", [path])
    line_colours = {
        line.get_label(): line.get_color() for line in utilization.axes[0].get_lines()
    }
    for collection in gantt.axes[0].collections:
        label = str(collection.get_label())
        if label.startswith("on "):
            face = collection.get_facecolor()[0]
            assert np.allclose(face, to_rgba(str(line_colours[label[3:]])))
