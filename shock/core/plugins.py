"""The plugin manager: entry-point group `shock`, lookup by name with clear errors."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from shock.core import hookspecs
from shock.core.errors import ShockError, UnknownPluginError

# Registration hook per plugin kind; the kind's singular name is used in messages.
KINDS: dict[str, str] = {
    "policy": "register_policies",
    "placement": "register_placements",
    "adaptation": "register_adaptations",
    "adaptation rules": "register_adaptation_rules",
    "backend": "register_backends",
    "trace format": "register_trace_formats",
    "trace importer": "register_trace_importers",
    "solver": "register_solvers",
    "preset": "register_presets",
}


@dataclass(frozen=True, slots=True)
class RegisteredPlugin:
    """One named thing a plugin module registered."""

    kind: str
    name: str
    description: str
    provider: str  # distribution name, or the plugin's module name when not from a package
    obj: Any


@dataclass(slots=True)
class LoadedPlugins:
    """A plugin manager plus where each plugin came from and which failed to load."""

    manager: pluggy.PluginManager
    providers: dict[int, str] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)  # entry-point name -> error


class PluginRegistry:
    """All registered plugins by kind and name."""

    def __init__(self, loaded: LoadedPlugins) -> None:
        self.manager = loaded.manager
        self.providers = loaded.providers
        self.broken = loaded.broken
        self._by_kind: dict[str, dict[str, RegisteredPlugin]] = {kind: {} for kind in KINDS}
        self.refresh()

    def refresh(self) -> None:
        """Collect registrations again (after a plugin was added to the manager)."""
        for kind in KINDS:
            self._by_kind[kind] = {}
        for kind, hook_name in KINDS.items():
            hook = getattr(self.manager.hook, hook_name)
            for impl in hook.get_hookimpls():
                provider = self.providers.get(id(impl.plugin), impl.plugin_name)
                staged: dict[str, RegisteredPlugin] = {}
                try:
                    impl.function(register=self._collector(kind, provider, staged))
                except Exception as exc:  # one bad plugin must not take every command down
                    # All or nothing: a hook that fails registers none of its objects.
                    self.broken[impl.plugin_name] = f"{type(exc).__name__}: {exc}"
                    continue
                self._by_kind[kind].update(staged)

    def _collector(
        self, kind: str, provider: str, staged: dict[str, RegisteredPlugin]
    ) -> Callable[[Any], None]:
        def register(obj: Any) -> None:
            name = getattr(obj, "name", None)
            if not isinstance(name, str) or not name:
                raise ShockError(f"a {kind} plugin from {provider} has no name")
            existing = staged.get(name) or self._by_kind[kind].get(name)
            if existing is not None and existing.obj is not obj:
                raise ShockError(
                    f"{kind} '{name}' registered twice (by {existing.provider} and {provider})"
                )
            description = getattr(obj, "description", "") or ""
            staged[name] = RegisteredPlugin(kind, name, description, provider, obj)

        return register

    def get(self, kind: str, name: str) -> Any:
        found = self._by_kind[kind].get(name)
        if found is None:
            error = UnknownPluginError(kind, name, list(self._by_kind[kind]))
            if self.broken:
                error.args = (
                    f"{error} ({len(self.broken)} plugin(s) failed to load; see `shock plugins`)",
                )
            raise error
        return found.obj

    def names(self, kind: str) -> list[str]:
        return sorted(self._by_kind[kind])

    def names_from(self, kind: str, provider: str) -> list[str]:
        """Names of the plugins of `kind` that `provider` (a distribution) registered."""
        return [n for n in self.names(kind) if self._by_kind[kind][n].provider == provider]

    def all(self, kind: str) -> list[Any]:
        return [self._by_kind[kind][n].obj for n in self.names(kind)]

    def listing(self) -> list[RegisteredPlugin]:
        rows: list[RegisteredPlugin] = []
        for kind in KINDS:
            rows.extend(self._by_kind[kind][n] for n in sorted(self._by_kind[kind]))
        return rows

    @property
    def hook(self) -> Any:
        """Observer hooks, e.g. `registry.hook.job_finished(event=...)`."""
        return self.manager.hook


def load_plugins(extra_plugins: Iterable[object] = ()) -> LoadedPlugins:
    """Load the entry-point group `shock`, then `extra_plugins`; a plugin that fails to load
    is recorded in `broken`, not fatal."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    loaded = LoadedPlugins(manager)
    # Each distribution's name read once: reading it parses the distribution's metadata, and
    # a package's entry points share one distribution object.
    names: dict[int, str] = {}
    declared = [(e, _provider(e, names)) for e in entry_points(group=hookspecs.PROJECT)]
    # shock's own first, so that no package can take over a built-in's name.
    for entry_point, provider in sorted(declared, key=lambda found: found[1] != "shock"):
        if manager.get_plugin(entry_point.name) is not None:
            loaded.broken[f"{entry_point.name} ({provider})"] = (
                f"entry-point name '{entry_point.name}' is already taken by another package"
            )
            continue
        try:
            plugin = entry_point.load()
        except Exception as exc:  # a third-party plugin may fail in any way
            loaded.broken[entry_point.name] = f"{type(exc).__name__}: {exc}"
            continue
        _register(loaded, plugin, entry_point.name, provider)
    for plugin in extra_plugins:
        if manager.is_registered(plugin):
            continue  # already loaded (e.g. an installed plugin module)
        label = f"{getattr(plugin, '__name__', type(plugin).__name__)} (not from a package)"
        name, copy = label, 1
        while manager.get_plugin(name) is not None:
            copy += 1
            name = f"{label} #{copy}"
        _register(loaded, plugin, name, label)
    return loaded


def _provider(entry_point: EntryPoint, names: dict[int, str]) -> str:
    """The distribution that declared an entry point (its target where none is known);
    `names`: distributions' names already read, by the distribution object's id."""
    dist = entry_point.dist
    if dist is None:
        return entry_point.value
    name = names.get(id(dist))
    if name is None:
        name = names[id(dist)] = dist.name
    return name


def _register(loaded: LoadedPlugins, plugin: object, name: str, provider: str) -> None:
    """Register one plugin with pluggy, or record it as broken."""
    manager = loaded.manager
    try:
        manager.register(plugin, name=name)
        # A misspelled hook (e.g. `register_policy`) would otherwise be ignored silently.
        manager.check_pending()
    except Exception as exc:  # a third-party plugin may fail in any way
        if manager.get_plugin(name) is not None:
            manager.unregister(name=name)
        loaded.broken[name] = f"{type(exc).__name__}: {exc}"
        return
    loaded.providers[id(plugin)] = provider


@cache
def default_registry() -> PluginRegistry:
    """The registry of every installed plugin (entry-point group `shock`)."""
    return PluginRegistry(load_plugins())
