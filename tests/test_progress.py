"""The run's progress bar: shown for a person at a terminal once a run lasts, driven by the
engine's observer events; never in a pipe, with --quiet or with the document on stdout."""

from __future__ import annotations

import io
import json
import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

from shock.cli.app import app
from shock.cli.progress import (
    ProgressLines,
    ProgressObserver,
    interactive,
    wants_progress,
    wants_progress_lines,
)
from shock.core.plugins import default_registry
from shock.engine.runner import RunOptions, run


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _terminal_console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=120), buffer


def _observed_run(observer: ProgressObserver) -> int:
    registry = default_registry()
    registry.manager.register(observer)
    try:
        result = run(RunOptions(cluster="4:4:4"), registry)
    finally:
        registry.manager.unregister(observer)
    return result.metrics.jobs


def test_bar_follows_the_runs_events_once_shown() -> None:
    console, buffer = _terminal_console()
    observer = ProgressObserver(console, show_after_s=0.0)
    jobs = _observed_run(observer)
    assert observer.shown
    task = observer._progress.tasks[0]
    assert task.total == jobs and task.completed == jobs
    assert task.fields["sim_hours"] > 0
    assert "max_min_fairness_perf on simulator" in buffer.getvalue()


def test_a_quick_run_shows_nothing() -> None:
    console, buffer = _terminal_console()
    observer = ProgressObserver(console, show_after_s=3600.0)
    _observed_run(observer)
    assert not observer.shown
    assert buffer.getvalue() == ""


@pytest.mark.parametrize(
    ("stdout_tty", "stderr_tty", "quiet", "json_to_stdout", "expected"),
    [
        (True, True, False, False, True),
        (False, True, False, False, False),  # output piped
        (True, False, False, False, False),  # stderr to a file
        (True, True, True, False, False),
        (True, True, False, True, False),
    ],
)
def test_only_a_person_at_a_terminal_gets_a_bar(
    monkeypatch: pytest.MonkeyPatch,
    stdout_tty: bool,
    stderr_tty: bool,
    quiet: bool,
    json_to_stdout: bool,
    expected: bool,
) -> None:
    monkeypatch.setattr(sys, "stdout", _Stream(stdout_tty))
    monkeypatch.setattr(sys, "stderr", _Stream(stderr_tty))
    assert wants_progress(quiet, json_to_stdout) is expected
    assert interactive(_Stream(True), _Stream(False)) is False


def test_json_to_stdout_is_the_document_alone() -> None:
    result = CliRunner().invoke(app, ["run", "--cluster", "4:4:4", "--json", "-"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["policy"] == "max_min_fairness_perf"
    assert "timeline" in document


def test_a_window_run_counts_only_its_windows_jobs() -> None:
    console, _ = _terminal_console()
    observer = ProgressObserver(console, show_after_s=0.0)
    registry = default_registry()
    registry.manager.register(observer)
    try:
        result = run(RunOptions(cluster="4:4:4", window=(10, 30)), registry)
    finally:
        registry.manager.unregister(observer)
    assert len(result.records) > 20  # jobs outside the window finished too
    task = observer._progress.tasks[0]
    assert task.total == task.completed == 20


def test_a_log_gets_a_plain_line_per_tenth_of_the_jobs() -> None:
    stream = io.StringIO()
    observer = ProgressLines(stream, show_after_s=0.0)
    registry = default_registry()
    registry.manager.register(observer)
    try:
        jobs = run(RunOptions(cluster="4:4:4"), registry).metrics.jobs
    finally:
        registry.manager.unregister(observer)
    lines = stream.getvalue().splitlines()
    assert 5 <= len(lines) <= 10 and observer.lines == len(lines)
    assert all(line.startswith("max_min_fairness_perf on simulator: ") for line in lines)
    assert f"{jobs}/{jobs} jobs done (100%)" in lines[-1]
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines]
    assert done == sorted(done) and "\x1b" not in stream.getvalue()  # plain text


def test_a_quick_run_logs_nothing() -> None:
    stream = io.StringIO()
    observer = ProgressLines(stream, show_after_s=3600.0)
    _observed_run(observer)  # type: ignore[arg-type]
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    ("stdout_tty", "stderr_tty", "quiet", "expected"),
    [(True, True, False, False), (False, False, False, True), (False, False, True, False)],
)
def test_lines_where_there_is_no_bar(
    monkeypatch: pytest.MonkeyPatch, stdout_tty: bool, stderr_tty: bool, quiet: bool,
    expected: bool,
) -> None:
    monkeypatch.setattr(sys, "stdout", _Stream(stdout_tty))
    monkeypatch.setattr(sys, "stderr", _Stream(stderr_tty))
    assert wants_progress_lines(quiet) is expected
