"""'Did you mean' for names a user types: close names, or the full list when none is close."""

from __future__ import annotations

import pytest

from shock.core.errors import InputError, UnknownPluginError
from shock.core.plugins import default_registry
from shock.engine.presets import get_preset
from shock.engine.runner import RunOptions, build_request
from shock.util.suggest import close_names, did_you_mean, unknown_name_message


def test_close_names_best_first() -> None:
    names = ["fifo", "fifo_perf", "max_min_fairness", "max_min_fairness_perf"]
    assert close_names("fiffo", names)[0] == "fifo"
    assert close_names("max_min_fairnes_perf", names)[0] == "max_min_fairness_perf"
    assert close_names("zzz", names) == []
    assert did_you_mean("synergy", ["synergy-128", "hetero-96"]) == "did you mean 'synergy-128'?"
    assert did_you_mean("x", ["xylophone"]) == ""  # one letter suggests nothing


def test_unknown_names_suggest_or_list() -> None:
    with pytest.raises(UnknownPluginError) as raised:
        default_registry().get("policy", "fiffo")
    assert "unknown policy 'fiffo'; did you mean 'fifo'?" in str(raised.value)
    assert "`shock plugins` lists all" in str(raised.value)
    message = unknown_name_message("policy", "nothing_like_it", ["fifo", "las"])
    assert message == "unknown policy 'nothing_like_it'; valid policy names: fifo, las"
    with pytest.raises(UnknownPluginError, match="did you mean 'gavel'"):
        get_preset("gavle", default_registry())


def test_options_and_clusters_suggest() -> None:
    with pytest.raises(InputError, match="did you mean 'jobs_without_steps'"):
        build_request(
            RunOptions(policy="finish_time_fairness_perf", policy_options=("jobs_without_step=1",))
        )
    with pytest.raises(InputError, match="did you mean 'synergy-128'"):
        build_request(RunOptions(cluster="synergy-12"))
