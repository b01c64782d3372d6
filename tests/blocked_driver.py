"""FOR TESTS ONLY: the `shock` CLI in a process where shock cannot use grpc, protobuf or torch.

    python tests/blocked_driver.py REPORT.json run --backend ray ...

A `sys.meta_path` finder, installed before shock is imported, refuses `grpc`, `torch` and
shock's protobuf stubs (`shock.cluster.proto`) to everyone, and `google.protobuf` to shock's
own modules (Ray itself speaks protobuf). At exit REPORT.json says what was refused, which
of those modules are loaded, and which shock module holds a reference to one of them (an
import the finder could not see because another module had loaded it first).
"""

from __future__ import annotations

import atexit
import json
import runpy
import sys
import types
from pathlib import Path

BLOCKED = ("grpc", "torch", "shock.cluster.proto")
BLOCKED_FOR_SHOCK = ("google.protobuf",)
ALL_BLOCKED = BLOCKED + BLOCKED_FOR_SHOCK
_FRAMEWORK = ("<frozen importlib", __file__)


def _matches(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _importer() -> str:
    """The module whose code asked for the import (not the import machinery's)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_FRAMEWORK):
        frame = frame.f_back  # type: ignore[assignment]
    return "" if frame is None else str(frame.f_globals.get("__name__", ""))


class Blocker:
    def __init__(self) -> None:
        self.refused: list[dict[str, str]] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        importer = _importer()
        if _matches(name, BLOCKED) or (
            _matches(name, BLOCKED_FOR_SHOCK) and _matches(importer, ("shock",))
        ):
            self.refused.append({"module": name, "importer": importer})
            raise ImportError(f"{name} is blocked in this driver (asked by {importer})")


def _report(path: Path, blocker: Blocker) -> None:
    held = sorted(
        f"{name}.{attribute}"
        for name, module in list(sys.modules.items())
        if _matches(name, ("shock",)) and module is not None
        for attribute, value in list(vars(module).items())
        if isinstance(value, types.ModuleType) and _matches(value.__name__, ALL_BLOCKED)
    )
    loaded = sorted(name for name in sys.modules if _matches(name, BLOCKED))
    path.write_text(json.dumps({"refused": blocker.refused, "loaded": loaded, "held": held}))


def main() -> None:
    report, *arguments = sys.argv[1:]
    blocker = Blocker()
    sys.meta_path.insert(0, blocker)
    atexit.register(_report, Path(report), blocker)
    sys.argv = ["shock", *arguments]
    runpy.run_module("shock", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
