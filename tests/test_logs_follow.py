"""`shock logs --follow`: only what is new is printed, lines whole, gaps said."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shock.cli.job_commands import _print_run_log, new_output


def run_log(text: str, run_id: int = 1, truncated: bool = False, error: str = "") -> object:
    return SimpleNamespace(run_id=run_id, worker_id="worker-1", text=text, truncated=truncated,
                           error=error)  # fmt: skip


def test_new_output_is_what_follows_the_shown_part() -> None:
    assert new_output("", "a\nb\n", False) == ("a\nb\n", False)
    assert new_output("a\n", "a\nb\n", False) == ("b\n", False)
    # A tail that still overlaps what was shown: only what follows it.
    shown = "".join(f"line {i}\n" for i in range(100))
    tail = shown[-300:] + "line 100\n"
    assert new_output(shown, tail, True) == ("line 100\n", False)
    # A tail that no longer overlaps: all of it, and a gap.
    assert new_output(shown, "line 900\n", True) == ("line 900\n", True)


def test_following_prints_each_line_once_and_waits_for_partial_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown: dict[int, str] = {}
    for text in ("step 1\nstep", "step 1\nstep 2\n", "step 1\nstep 2\nstep 3\n"):
        _print_run_log(run_log(text), shown, whole_lines=True)
    _print_run_log(run_log("step 1\nstep 2\nstep 3\n", run_id=2, error="worker gone"), shown)
    out = capsys.readouterr().out
    assert out == ("==> run 1 on worker-1 <==\nstep 1\nstep 2\nstep 3\n"
                   "==> run 2 on worker-1 <==\n(worker gone)\n")  # fmt: skip


def test_a_gap_in_followed_output_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    shown: dict[int, str] = {}
    _print_run_log(run_log("a\n" * 400), shown, whole_lines=True)
    _print_run_log(run_log("z\n", truncated=True), shown, whole_lines=True)
    assert "output skipped; raise --tail-bytes" in capsys.readouterr().out
