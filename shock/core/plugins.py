"""The plugin manager: entry-point group `shock`, lookup by name with clear errors.

`default_registry()` imports a plugin module only when one of its names is looked up (or its
kind is listed), using the manifest of names each entry point registered
(`plugin_manifest`); modules that implement observer hooks are always loaded. Without a
usable manifest it loads every plugin, as `load_plugins` does, and writes one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pluggy

from shock.core import hookspecs
from shock.core.errors import ShockError, UnknownPluginError
from shock.util.plugin_manifest import (
    DeclaredPlugin,
    InstalledEntryPoint,
    forget_manifest,
    manifest_path,
    module_stamps,
    read_manifest,
    write_manifest,
)

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
    # Entry points not imported yet (a lazy registry), in load order, and the names each
    # registers by kind (from the manifest).
    pending: dict[str, tuple[EntryPoint, str]] = field(default_factory=dict)  # with provider
    declared: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> name -> entry
    manifest: Path | None = None  # where the manifest came from


class PluginRegistry:
    """All registered plugins by kind and name."""

    def __init__(self, loaded: LoadedPlugins) -> None:
        self.manager = loaded.manager
        self.providers = loaded.providers
        self.broken = loaded.broken
        self._loaded = loaded
        self._by_kind: dict[str, dict[str, RegisteredPlugin]] = {kind: {} for kind in KINDS}
        # The (kind, name) pairs each plugin (by pluggy name) registered.
        self.registered_by: dict[str, list[tuple[str, str]]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Collect registrations again (after a plugin was added to the manager)."""
        for kind in KINDS:
            self._by_kind[kind] = {}
        self.registered_by = {}
        self._collect(lambda impl: True)

    def _collect(self, wanted: Callable[[Any], bool]) -> None:
        """Call the registration hooks of the plugins `wanted` (a test on a hook impl)."""
        for kind, hook_name in KINDS.items():
            hook = getattr(self.manager.hook, hook_name)
            for impl in hook.get_hookimpls():
                if not wanted(impl):
                    continue
                provider = self.providers.get(id(impl.plugin), impl.plugin_name)
                staged: dict[str, RegisteredPlugin] = {}
                try:
                    impl.function(register=self._collector(kind, provider, staged))
                except Exception as exc:  # one bad plugin must not take every command down
                    # All or nothing: a hook that fails registers none of its objects.
                    self.broken[impl.plugin_name] = f"{type(exc).__name__}: {exc}"
                    continue
                self._by_kind[kind].update(staged)
                names = self.registered_by.setdefault(impl.plugin_name, [])
                names.extend((kind, name) for name in staged)

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
        if found is None and self._loaded.pending:
            entry = self._loaded.declared.get(kind, {}).get(name)
            if entry is not None:
                self._load_entries([entry])
                found = self._by_kind[kind].get(name)
                if found is None and self._loaded.manifest is not None:
                    forget_manifest(self._loaded.manifest)  # it did not know this module
            if found is None:
                self._load_all()
                found = self._by_kind[kind].get(name)
        if found is None:
            error = UnknownPluginError(kind, name, list(self._by_kind[kind]))
            if self.broken:
                error.args = (
                    f"{error} ({len(self.broken)} plugin(s) failed to load; see `shock plugins`)",
                )
            raise error
        return found.obj

    def _load_entries(self, names: list[str]) -> None:
        """Import and register these pending entry points (names of `pending`)."""
        loaded = self._loaded
        plugins: list[object] = []
        for name in names:
            pending = loaded.pending.pop(name, None)
            if pending is None:
                continue
            plugin = _load_entry_point(loaded, *pending)
            if plugin is not None:
                plugins.append(plugin)
        for declared in loaded.declared.values():
            for known, entry in list(declared.items()):
                if entry not in loaded.pending:
                    del declared[known]
        if plugins:
            self._collect(lambda impl: any(impl.plugin is p for p in plugins))

    def _load_kind(self, kind: str) -> None:
        """Import every pending plugin that registers something of `kind`."""
        if self._loaded.pending:
            self._load_entries(sorted(set(self._loaded.declared.get(kind, {}).values())))

    def _load_all(self) -> None:
        if self._loaded.pending:
            self._load_entries(list(self._loaded.pending))

    def names(self, kind: str) -> list[str]:
        return sorted({*self._by_kind[kind], *self._loaded.declared.get(kind, {})})

    def names_from(self, kind: str, provider: str) -> list[str]:
        """Names of the plugins of `kind` that `provider` (a distribution) registered."""
        self._load_kind(kind)
        return [n for n in self.names(kind) if self._by_kind[kind][n].provider == provider]

    def all(self, kind: str) -> list[Any]:
        self._load_kind(kind)
        return [self._by_kind[kind][n].obj for n in sorted(self._by_kind[kind])]

    def registered(self, kind: str) -> list[RegisteredPlugin]:
        """Every registered plugin of one kind, by name."""
        self._load_kind(kind)
        return [self._by_kind[kind][n] for n in sorted(self._by_kind[kind])]

    def listing(self) -> list[RegisteredPlugin]:
        self._load_all()
        return [row for kind in KINDS for row in self.registered(kind)]

    @property
    def pending(self) -> list[str]:
        """Entry points not imported yet (a registry built from a cached manifest)."""
        return list(self._loaded.pending)

    @property
    def hook(self) -> Any:
        """Observer hooks, e.g. `registry.hook.job_finished(event=...)`."""
        return self.manager.hook


def load_plugins(extra_plugins: Iterable[object] = ()) -> LoadedPlugins:
    """Load the entry-point group `shock`, then `extra_plugins`; a plugin that fails to load
    is recorded in `broken`, not fatal."""
    return _load_every_plugin(installed_entry_points(), extra_plugins)


def _new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


def _load_every_plugin(
    installed: list[tuple[EntryPoint, InstalledEntryPoint]], extra_plugins: Iterable[object] = ()
) -> LoadedPlugins:
    loaded = LoadedPlugins(_new_manager())
    for entry_point, found in installed:
        _load_entry_point(loaded, entry_point, found.provider)
    manager = loaded.manager
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


def installed_entry_points() -> list[tuple[EntryPoint, InstalledEntryPoint]]:
    """The group's entry points in load order: shock's own first, so that no package can take
    over a built-in's name."""
    # Each distribution's metadata read once: a package's entry points share one object.
    metadata: dict[int, tuple[str, str, str]] = {}
    found = []
    for entry_point in entry_points(group=hookspecs.PROJECT):
        dist = entry_point.dist
        if dist is None:
            provider, version, location = entry_point.value, "", ""
        else:
            if id(dist) not in metadata:
                read = dist.metadata
                where = str(dist.locate_file(""))
                metadata[id(dist)] = (read["Name"], read["Version"] or "", where)
            provider, version, location = metadata[id(dist)]
        described = InstalledEntryPoint(
            entry_point.name, entry_point.value, entry_point.module, provider, version, location
        )
        found.append((entry_point, described))
    return sorted(found, key=lambda pair: pair[1].provider != "shock")


def _load_entry_point(loaded: LoadedPlugins, entry_point: EntryPoint, provider: str) -> object:
    """Import and register one entry point; None (recorded in `broken`) where it fails."""
    if loaded.manager.get_plugin(entry_point.name) is not None:
        loaded.broken[f"{entry_point.name} ({provider})"] = (
            f"entry-point name '{entry_point.name}' is already taken by another package"
        )
        return None
    try:
        plugin = entry_point.load()
    except Exception as exc:  # a third-party plugin may fail in any way
        loaded.broken[entry_point.name] = f"{type(exc).__name__}: {exc}"
        return None
    if not _register(loaded, plugin, entry_point.name, provider):
        return None
    return plugin


def _register(loaded: LoadedPlugins, plugin: object, name: str, provider: str) -> bool:
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
        return False
    loaded.providers[id(plugin)] = provider
    return True


def _lazy_plugins(
    installed: list[tuple[EntryPoint, InstalledEntryPoint]],
    manifest: dict[str, DeclaredPlugin],
    path: Path,
) -> LoadedPlugins:
    """Entry points left pending, with the names the manifest says each registers; those
    that implement observer hooks loaded now."""
    loaded = LoadedPlugins(_new_manager(), manifest=path)
    for entry_point, found in installed:
        loaded.pending[found.name] = (entry_point, found.provider)
        for kind, name in manifest[found.name].names:
            loaded.declared.setdefault(kind, {})[name] = found.name
    for entry_point, found in installed:
        if manifest[found.name].observes:
            loaded.pending.pop(found.name)
            _load_entry_point(loaded, entry_point, found.provider)
    return loaded


def _manifest_of(
    registry: PluginRegistry, installed: list[tuple[EntryPoint, InstalledEntryPoint]]
) -> dict[str, DeclaredPlugin]:
    """What each entry point of a fully loaded registry registered."""
    registration_hooks = set(KINDS.values())
    plugins = {}
    for _, found in installed:
        plugin = registry.manager.get_plugin(found.name)
        callers = registry.manager.get_hookcallers(plugin) if plugin is not None else None
        observes = any(caller.name not in registration_hooks for caller in callers or ())
        plugins[found.name] = DeclaredPlugin(
            tuple(registry.registered_by.get(found.name, ())),
            observes,
            module_stamps(found.module),
        )
    return plugins


@cache
def default_registry() -> PluginRegistry:
    """The registry of every installed plugin (entry-point group `shock`), built once per
    process (`cached_registry`)."""
    return cached_registry()


def cached_registry() -> PluginRegistry:
    """A registry of every installed plugin that imports a plugin module only when one of
    its names is looked up, where the manifest of names is cached and current; otherwise one
    that loads every plugin, and writes the manifest for the next command."""
    installed = installed_entry_points()
    path = manifest_path([found for _, found in installed])
    manifest = read_manifest(path)
    if manifest is not None and manifest.keys() == {found.name for _, found in installed}:
        return PluginRegistry(_lazy_plugins(installed, manifest, path))
    registry = PluginRegistry(_load_every_plugin(installed))
    # A manifest only where every plugin loaded: broken ones are reported by a full load.
    if not registry.broken:
        write_manifest(path, _manifest_of(registry, installed))
    return registry
