"""The plugin loader, as docs/plugins.md describes it: what is loaded, what is recorded as
broken (and shown by `shock plugins`), and which names win."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

import pytest
from rich.console import Console

from shock.cli.output import plugins_table
from shock.core.errors import UnknownPluginError
from shock.core.hookspecs import Register, hookimpl
from shock.core.plugins import PluginRegistry, load_plugins


class Named:
    def __init__(self, name: str, description: str = "a test plugin") -> None:
        self.name = name
        self.description = description


def module_with(name: str, **hooks: Callable[..., Any]) -> ModuleType:
    """A plugin module `name` with the given functions marked as hook implementations."""
    module = ModuleType(name)
    for hook_name, function in hooks.items():
        function.__name__ = hook_name
        setattr(module, hook_name, hookimpl(function))
    return module


def install(
    monkeypatch: pytest.MonkeyPatch, *plugins: tuple[str, ModuleType | str], first: bool = False
) -> None:
    """Make the loader find these entry points (name, module or import path), as if packages
    declaring them were installed: after the installed ones, or before them when `first`."""
    extra = []
    for entry_name, target in plugins:
        if isinstance(target, ModuleType):
            monkeypatch.setitem(sys.modules, target.__name__, target)
            target = target.__name__
        extra.append(EntryPoint(name=entry_name, value=target, group="shock"))

    def found(group: str) -> list[EntryPoint]:
        installed = list(entry_points(group=group))
        return [*extra, *installed] if first else [*installed, *extra]

    monkeypatch.setattr("shock.core.plugins.entry_points", found)


def registers(*objects: object) -> Callable[[Register], None]:
    def register_policies(register: Register) -> None:
        for obj in objects:
            register(obj)

    return register_policies


def rendered(registry: PluginRegistry) -> str:
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(plugins_table(registry))
    return console.export_text()


def test_a_module_that_fails_to_import_is_broken_and_the_rest_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, ("broken_example", "shock_no_such_module_xyz"))
    registry = PluginRegistry(load_plugins())
    assert registry.broken["broken_example"].startswith("ModuleNotFoundError: ")
    assert "fifo" in registry.names("policy")
    table = rendered(registry)
    assert "broken" in table and "broken_example" in table
    assert "failed to load: ModuleNotFoundError" in table


def test_a_hook_with_a_parameter_the_hook_lacks_is_broken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def register_policies(register: Register, extra: int) -> None:
        register(Named("test_extra_parameter"))

    module = module_with("shock_test_bad_signature", register_policies=register_policies)
    install(monkeypatch, ("bad_signature", module))
    registry = PluginRegistry(load_plugins())
    assert registry.broken["bad_signature"].startswith("PluginValidationError: ")
    assert "extra" in registry.broken["bad_signature"]
    assert "test_extra_parameter" not in registry.names("policy")


def test_a_misspelled_hook_name_is_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    module = module_with("shock_test_misspelled", register_policy=registers(Named("test_typo")))
    install(monkeypatch, ("misspelled", module))
    registry = PluginRegistry(load_plugins())
    assert "unknown hook 'register_policy'" in registry.broken["misspelled"]


def test_an_entry_point_name_taken_by_another_package_is_broken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = module_with("shock_test_first", register_policies=registers(Named("test_first")))
    second = module_with("shock_test_second", register_policies=registers(Named("test_second")))
    install(monkeypatch, ("same_key", first), ("same_key", second))
    registry = PluginRegistry(load_plugins())
    assert "test_first" in registry.names("policy")
    assert "test_second" not in registry.names("policy")
    assert registry.broken["same_key (shock_test_second)"] == (
        "entry-point name 'same_key' is already taken by another package"
    )


def test_a_name_registered_twice_is_broken_naming_both_providers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept, clashing = Named("test_clash"), Named("test_clash")
    first = module_with("shock_test_keeps", register_policies=registers(kept))
    second = module_with("shock_test_clashes", register_policies=registers(clashing))
    install(monkeypatch, ("keeps", first), ("clashes", second))
    registry = PluginRegistry(load_plugins())
    assert registry.get("policy", "test_clash") is kept  # the first registered keeps it
    assert registry.broken["clashes"] == (
        "ShockError: policy 'test_clash' registered twice "
        "(by shock_test_keeps and shock_test_clashes)"
    )
    assert "keeps" not in registry.broken


def test_a_built_in_name_cannot_be_taken_over(monkeypatch: pytest.MonkeyPatch) -> None:
    impostor = Named("fifo")
    module = module_with("shock_test_impostor", register_policies=registers(impostor))
    install(monkeypatch, ("impostor", module), first=True)  # found before shock itself
    registry = PluginRegistry(load_plugins())
    assert registry.get("policy", "fifo") is not impostor
    assert "policy 'fifo' registered twice (by shock and" in registry.broken["impostor"]


def test_a_hook_that_fails_registers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def register_policies(register: Register) -> None:
        register(Named("test_before_the_failure"))
        raise RuntimeError("the policy's set-up failed")

    def register_placements(register: Register) -> None:
        register(Named("test_other_kind"))

    module = module_with(
        "shock_test_raises",
        register_policies=register_policies,
        register_placements=register_placements,
    )
    install(monkeypatch, ("raises", module))
    registry = PluginRegistry(load_plugins())
    assert registry.broken["raises"] == "RuntimeError: the policy's set-up failed"
    assert "test_before_the_failure" not in registry.names("policy")
    assert "test_other_kind" in registry.names("placement")  # its other hooks still register
    with pytest.raises(UnknownPluginError) as raised:
        registry.get("policy", "test_before_the_failure")
    # Another test process may install the example packages meanwhile: their entry points
    # then show here without their modules, so count what this registry found broken.
    broken = len(registry.broken)
    assert f"{broken} plugin(s) failed to load; see `shock plugins`" in str(raised.value)
    assert "failed to load: RuntimeError: the policy's set-up failed" in rendered(registry)


def test_an_object_without_a_name_is_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    module = module_with(
        "shock_test_nameless", register_policies=registers(Named("test_named"), object())
    )
    install(monkeypatch, ("nameless", module))
    registry = PluginRegistry(load_plugins())
    assert registry.broken["nameless"] == (
        "ShockError: a policy plugin from shock_test_nameless has no name"
    )
    assert "test_named" not in registry.names("policy")


class InlinePlugin:
    def __init__(self, *objects: object) -> None:
        self.objects = objects

    @hookimpl
    def register_policies(self, register: Register) -> None:
        for obj in self.objects:
            register(obj)


def test_extra_plugins_are_named_by_their_class_and_may_repeat() -> None:
    one, two = InlinePlugin(Named("test_one")), InlinePlugin(Named("test_two"))
    registry = PluginRegistry(load_plugins(extra_plugins=[one, two]))
    providers = {row.name: row.provider for row in registry.listing()}
    assert providers["test_one"] == "InlinePlugin (not from a package)"
    assert providers["test_two"] == "InlinePlugin (not from a package)"
    assert providers["fifo"] == "shock"


def test_an_extra_plugin_already_loaded_changes_nothing() -> None:
    plain = PluginRegistry(load_plugins())
    fifo_module = sys.modules[type(plain.get("policy", "fifo")).__module__]
    registry = PluginRegistry(load_plugins(extra_plugins=[fifo_module]))
    # Nothing more is broken than without it (the example packages, installed by another
    # test process meanwhile, may show as broken in both).
    assert registry.broken == plain.broken
    assert {row.provider for row in registry.listing() if row.name == "fifo"} == {"shock"}


def test_an_extra_plugin_with_a_misspelled_hook_is_broken() -> None:
    class Misspelled:
        @hookimpl
        def register_policy(self, register: Register) -> None:
            register(Named("test_never"))

    registry = PluginRegistry(load_plugins(extra_plugins=[Misspelled()]))
    (error,) = (v for k, v in registry.broken.items() if k.startswith("Misspelled"))
    assert "unknown hook 'register_policy'" in error


def test_refresh_collects_a_plugin_registered_later() -> None:
    registry = PluginRegistry(load_plugins())
    late = Named("test_late")
    registry.manager.register(InlinePlugin(late))
    assert "test_late" not in registry.names("policy")
    registry.refresh()
    assert registry.get("policy", "test_late") is late
