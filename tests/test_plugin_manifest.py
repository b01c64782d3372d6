"""The plugin registry built from a cached manifest imports a plugin module only when one of
its names is looked up, and answers exactly as a registry that loads every plugin."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shock.core import plugins
from shock.core.errors import UnknownPluginError
from shock.core.plugins import PluginRegistry, cached_registry, load_plugins
from shock.util.plugin_manifest import manifest_path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SHOCK_CACHE_DIR", str(tmp_path))
    # A package installed while the tests run (the example plugins) has its metadata on disk
    # but no import path in this process, so it loads as broken and no manifest is written:
    # these tests see the entry points this process can import.
    importable = [pair for pair in plugins.installed_entry_points() if _importable(pair[1].module)]
    monkeypatch.setattr(plugins, "installed_entry_points", lambda: importable)
    return tmp_path


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is missing
        return False


def _manifest_file() -> Path:
    return manifest_path([found for _, found in plugins.installed_entry_points()])


def _rows(registry: PluginRegistry) -> list[tuple[str, str, str, str, type]]:
    return [(r.kind, r.name, r.provider, r.description, type(r.obj)) for r in registry.listing()]


def test_first_registry_loads_everything_and_writes_the_manifest(cache: Path) -> None:
    registry = cached_registry()
    assert registry.pending == []
    written = json.loads(_manifest_file().read_text())
    fifo = written["entry_points"]["fifo"]
    assert ["policy", "fifo"] in fifo["names"]
    assert fifo["files"][0][0].endswith("fifo.py")


def test_lazy_registry_answers_as_a_full_load(cache: Path) -> None:
    cached_registry()  # writes the manifest
    lazy = cached_registry()
    assert "fifo" in lazy.pending
    eager = PluginRegistry(load_plugins())
    for kind in ("policy", "placement", "preset", "solver", "trace format", "backend"):
        assert lazy.names(kind) == eager.names(kind), kind
    assert type(lazy.get("policy", "fifo")) is type(eager.get("policy", "fifo"))
    assert "fifo" not in lazy.pending
    assert _rows(lazy) == _rows(eager)
    assert lazy.pending == []


def test_a_lookup_imports_only_the_module_that_registers_the_name(cache: Path) -> None:
    """In fresh interpreters: the first loads everything (and writes the manifest), the
    second imports the default policy's module and not another one."""
    probe = (
        "import sys\n"
        "from shock.core.plugins import default_registry\n"
        "registry = default_registry()\n"
        "registry.get('policy', 'max_min_fairness_perf')\n"
        "print('shock.plugins.policies.max_min_fairness' in sys.modules,"
        " 'shock.plugins.policies.themis.policy' in sys.modules)\n"
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
        ).stdout.split()
        for _ in range(2)
    ]
    assert outputs == [["True", "True"], ["True", "False"]]


def test_a_changed_module_file_makes_the_manifest_unused(cache: Path) -> None:
    cached_registry()
    path = _manifest_file()
    written = json.loads(path.read_text())
    written["entry_points"]["fifo"]["files"][0][1] += 1  # as if fifo.py had been edited
    path.write_text(json.dumps(written))
    assert cached_registry().pending == []  # a full load, which rewrites the manifest
    assert cached_registry().pending != []


def test_a_name_the_manifest_misplaces_falls_back_to_a_full_load(cache: Path) -> None:
    cached_registry()
    path = _manifest_file()
    written = json.loads(path.read_text())
    # The manifest says fifo's module registers a policy it does not (a stale manifest).
    written["entry_points"]["fifo"]["names"].append(["policy", "tiresias_moved"])
    written["entry_points"]["tiresias"]["names"].remove(["policy", "tiresias"])
    path.write_text(json.dumps(written))
    undeclared = cached_registry()
    assert "tiresias" in undeclared.pending
    assert undeclared.get("policy", "tiresias").name == "tiresias"  # found by a full load
    assert undeclared.pending == []
    misplaced = cached_registry()
    with pytest.raises(UnknownPluginError):
        misplaced.get("policy", "tiresias_moved")
    assert misplaced.pending == []
    assert not path.exists()  # forgotten: the next full load writes it anew


def test_observer_plugins_are_loaded_with_the_registry(cache: Path) -> None:
    cached_registry()
    path = _manifest_file()
    written = json.loads(path.read_text())
    written["entry_points"]["fifo"]["observes"] = True
    path.write_text(json.dumps(written))
    lazy = cached_registry()
    assert "fifo" not in lazy.pending and "tiresias" in lazy.pending
    assert lazy.manager.get_plugin("fifo") is not None


def test_an_unwritable_cache_loads_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SHOCK_CACHE_DIR", str(blocker / "cache"))
    assert cached_registry().pending == []
    assert cached_registry().pending == []
