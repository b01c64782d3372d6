"""Modules imported on first use.

Plugin modules are all imported whenever the plugins load (every `shock` command), but most
runs use one policy. A heavy dependency (Pyomo, SciPy) named through `lazy_module` is imported
only when a plugin first touches it, so `shock run` does not pay for the policies it does not
run.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for a module; the first attribute looked up imports it."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module '{self._name}' ({state})>"


def lazy_module(name: str) -> Any:
    """A stand-in for `import name` that imports on first attribute access."""
    return LazyModule(name)
