"""The `shock` command line: runs, errors (exit 2, no traceback), plugin listing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from shock_cli import run_shock as _shock
from typer.testing import CliRunner

from shock import __version__
from shock.cli.app import COMMANDS, GROUPS, OWN_COMMANDS, app
from shock.core.errors import InputError
from shock.core.hookspecs import hookimpl
from shock.engine.runner import RunOptions, build_request, parse_window


def _flat(text: str) -> str:
    """Rich wraps at 80 columns off a terminal; compare with whitespace collapsed."""
    return " ".join(text.split())


def test_default_run_writes_document(tmp_path: Path) -> None:
    result = _shock("run", "--quiet", "--json", "out.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    # HiGHS prints a banner on its first instance unless shock silences it.
    assert "HiGHS" not in result.stdout
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["metrics"]["jobs"] == 96
    assert len(document["jobs"]) == 96
    assert document["policy"] == "max_min_fairness_perf"
    assert document["backend"] == "simulator"
    assert document["solver"] == "highs"
    assert document["preset"] == "default"
    assert document["trace"].endswith("max_min_fairness.trace")
    assert document["cluster"] == "k80=24,p100=16,v100=8"
    assert document["unfinished_jobs"] == 0
    metrics = document["metrics"]
    assert metrics["makespan_s"] > 0
    assert 0 < metrics["utilization"] <= 1
    assert metrics["p50_jct_s"] <= metrics["p90_jct_s"] <= metrics["p99_jct_s"]
    for job in document["jobs"]:
        assert job["completion_s"] >= job["arrival_s"]
        assert job["jct_s"] == pytest.approx(job["completion_s"] - job["arrival_s"])
    row = next(line for line in result.stdout.splitlines() if "jobs measured" in line)
    assert [cell.strip() for cell in row.split("│") if cell.strip()] == ["jobs measured", "96"]
    assert "results written to out.json" in _flat(result.stdout)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--policy", "nope"],
            [
                "unknown policy 'nope'",
                "fifo",
                "fifo_perf",
                "max_min_fairness",
                "max_min_fairness_perf",
            ],
        ),
        (["--cluster", "1:2"], ["--cluster", "'1:2'", "V100:P100:K80"]),
        (["--window", "5:2"], ["--window", "'5:2'", "START:END"]),
        (["--preset", "nope"], ["unknown preset 'nope'", "default", "gavel"]),
        (["--backend", "nope"], ["unknown backend 'nope'", "simulator"]),
    ],
    ids=["policy", "cluster", "window", "preset", "backend"],
)
def test_run_errors(args: list[str], expected: list[str], tmp_path: Path) -> None:
    result = _shock("run", "--quiet", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.startswith("error:")
    message = _flat(result.stderr)
    for text in expected:
        assert text in message
    assert result.stdout == ""


def test_run_error_lists_every_policy(tmp_path: Path) -> None:
    # Another test may install the example plugin meanwhile, so only shock's own policies
    # are required (and the listing must be sorted).
    result = _shock("run", "--policy", "nope", cwd=tmp_path)
    assert result.returncode == 2
    listed = _flat(result.stderr).split("valid policy names: ", 1)[1]
    names = [name.strip().rstrip(".") for name in listed.split(",")]
    assert {"fifo", "fifo_perf", "max_min_fairness", "max_min_fairness_perf"} <= set(names)
    assert names == sorted(names)


BUILT_IN_PLUGINS = [
    ("policy", "fifo"),
    ("policy", "fifo_perf"),
    ("policy", "max_min_fairness"),
    ("policy", "max_min_fairness_perf"),
    ("placement", "consolidated"),
    ("placement", "first_fit"),
    ("adaptation", "static"),
    ("backend", "simulator"),
    ("trace format", "gavel"),
    ("trace format", "shockwave"),
    ("solver", "highs"),
    ("solver", "scip"),
    ("preset", "default"),
    ("preset", "gavel"),
    ("preset", "shockwave"),
    ("preset", "synergy"),
]


def _table_rows(output: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in output.splitlines()
        if line.startswith("│")
    ]


def test_plugins_lists_rows() -> None:
    # A wide terminal, so no cell is cut; other installed plugins may be listed too.
    result = CliRunner().invoke(app, ["plugins"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = {(cells[0], cells[1]): cells for cells in _table_rows(result.output) if cells[0]}
    for kind, name in BUILT_IN_PLUGINS:
        cells = rows[(kind, name)]
        assert cells[2] == "shock"
        assert cells[3]  # a description
    assert "Gavel's 10-column" in rows[("trace format", "gavel")][3]


def _registry_with_third_party_plugin():
    """shock's own plugins plus one from a package with a longer name than `shock` (whatever
    else happens to be installed is left out, so the rendering is deterministic)."""
    from importlib.metadata import entry_points

    import pluggy

    from shock.core import hookspecs
    from shock.core.plugins import LoadedPlugins, PluginRegistry

    class ThirdPartyPolicy:
        name = "third_party_sjf"
        description = "example plugin: shortest remaining job first"

    class ThirdPartyModule:
        @hookimpl
        def register_policies(self, register) -> None:
            register(ThirdPartyPolicy())

    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    loaded = LoadedPlugins(manager)
    for entry_point in entry_points(group=hookspecs.PROJECT):
        if entry_point.dist is not None and entry_point.dist.name == "shock":
            plugin = entry_point.load()
            manager.register(plugin, name=entry_point.name)
            loaded.providers[id(plugin)] = "shock"
    module = ThirdPartyModule()
    manager.register(module, name="third_party")
    loaded.providers[id(module)] = "shock-third-party-policy"
    registry = PluginRegistry(loaded)
    assert not registry.broken
    return registry


def test_plugins_table_includes_third_party_provider() -> None:
    from rich.console import Console

    from shock.cli.output import plugins_table

    console = Console(width=250, record=True, file=io.StringIO())
    console.print(plugins_table(_registry_with_third_party_plugin()))
    rows = {(c[0], c[1]): c for c in _table_rows(console.export_text()) if c[0]}
    assert rows[("policy", "third_party_sjf")][2] == "shock-third-party-policy"
    assert rows[("policy", "fifo")][2] == "shock"


def test_names_from_a_provider_leave_out_third_party_plugins() -> None:
    registry = _registry_with_third_party_plugin()
    builtin = registry.names_from("policy", "shock")
    assert "fifo" in builtin and "shockwave" in builtin
    assert "third_party_sjf" not in builtin
    assert registry.names_from("policy", "shock-third-party-policy") == ["third_party_sjf"]


def test_plugins_table_never_cuts_names_at_80_columns() -> None:
    from rich.console import Console

    from shock.cli.output import plugins_table

    registry = _registry_with_third_party_plugin()
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(plugins_table(registry))
    names = {c[1] for c in _table_rows(console.export_text()) if c[0]}
    for kind in ("policy", "placement", "backend", "trace format"):
        assert set(registry.names(kind)) <= names


def test_gavel_preset_fifo_perf(tmp_path: Path) -> None:
    out = tmp_path / "gavel.json"
    result = CliRunner().invoke(
        app,
        ["run", "--preset", "gavel", "--policy", "fifo_perf", "--quiet", "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["preset"] == "gavel"
    assert document["policy"] == "fifo_perf"
    assert document["metrics"]["jobs"] == 96
    assert "fifo_perf" in result.output


def test_window_run(tmp_path: Path) -> None:
    out = tmp_path / "window.json"
    result = CliRunner().invoke(
        app,
        ["run", "--policy", "fifo", "--window", "0:10", "--quiet", "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["metrics"]["jobs"] == 10


def test_version() -> None:
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.output.strip() == __version__


def test_no_args_shows_help() -> None:
    result = CliRunner().invoke(app, [])
    assert "run" in result.output
    assert "plugins" in result.output


def test_a_command_imports_only_its_own_module() -> None:
    # `shock run` (here --help, which builds the same application) imports none of the other
    # commands' modules; `shock trace ...` imports the trace commands and not the others;
    # `shock --help` lists every command.
    probe = (
        "import sys\n"
        "from shock.cli.app import COMMANDS, GROUPS, main\n"
        "sys.argv = ['shock', *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted({m for _, m, _ in (*GROUPS, *COMMANDS)} & sys.modules.keys())\n"
        "print('LOADED', *loaded)\n"
    )

    def loaded(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split("LOADED")[-1].split()

    assert loaded("run", "--help") == []
    assert loaded("version") == []
    assert loaded("trace", "--help") == ["shock.cli.trace_commands"]
    every = CliRunner().invoke(app, ["--help"]).output
    for name, _, _ in (*GROUPS, *COMMANDS, *((n, "", "") for n in OWN_COMMANDS)):
        assert f" {name} " in every


# --------------------------------------------------------------------------- option parsing


@pytest.mark.parametrize(("text", "window"), [(None, None), ("0:10", (0, 10)), ("5:6", (5, 6))])
def test_parse_window_good(text: str | None, window: tuple[int, int] | None) -> None:
    assert parse_window(text) == window


@pytest.mark.parametrize("text", ["5:2", "3:3", "-1:4", "a:b", "5", "1:2:3", ""])
def test_parse_window_bad(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_window(text)
    assert info.value.field == "--window"


@pytest.mark.parametrize("per_server", [0, -1])
def test_bad_gpus_per_server_is_input_error(per_server: int) -> None:
    with pytest.raises(InputError):
        build_request(RunOptions(gpus_per_server=per_server))


def test_negative_preemption_overhead_is_input_error() -> None:
    with pytest.raises(InputError):
        build_request(RunOptions(preemption_overhead_s=-100.0))


def test_round_length_must_be_positive() -> None:
    with pytest.raises(InputError) as info:
        build_request(RunOptions(round_length_s=0.0))
    assert info.value.field == "--round-length"


def test_unknown_worker_type_in_cluster() -> None:
    with pytest.raises(InputError) as info:
        build_request(RunOptions(cluster="a100=4"))
    assert "a100" in str(info.value)
    assert info.value.field == "--cluster"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(42.0, "42.0 s"), (119.9, "119.9 s"), (600.0, "10.0 min"), (7200.0, "2.00 h")],
)
def test_durations_use_a_readable_unit(seconds: float, shown: str) -> None:
    from shock.cli.output import duration

    assert duration(seconds) == shown
