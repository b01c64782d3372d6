"""`shock.api`, the stable surface: every exported name resolves, and the examples (packages
and docs/plugins.md) use nothing from shock but it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import shock.api

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_SOURCES = sorted(
    path
    for path in (ROOT / "examples").rglob("*.py")
    if "build" not in path.relative_to(ROOT / "examples").parts
)
PLUGINS_DOC = ROOT / "docs" / "plugins.md"


def test_every_exported_name_resolves() -> None:
    names = shock.api.__all__
    assert len(names) == len(set(names))
    missing = [name for name in names if not hasattr(shock.api, name)]
    assert missing == []
    namespace: dict[str, object] = {}
    exec("from shock.api import *", namespace)
    assert set(names) <= namespace.keys()


def test_the_module_says_it_is_the_stable_surface() -> None:
    assert shock.api.__doc__ is not None
    assert "stable surface" in shock.api.__doc__


def _shock_imports(tree: ast.AST) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names) of every import of shock or of a module under it."""
    def is_shock(module: str) -> bool:
        return module == "shock" or module.startswith("shock.")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names if is_shock(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_shock(node.module or ""):
            found.append((node.module or "", tuple(alias.name for alias in node.names)))
    return found


def _check_only_api(imports: list[tuple[str, tuple[str, ...]]], where: str) -> None:
    for module, names in imports:
        assert module == "shock.api", f"{where} imports {module}"
        unknown = [name for name in names if name not in shock.api.__all__]
        assert unknown == [], f"{where} imports {unknown} that shock.api does not export"


def test_there_are_example_packages() -> None:
    packages = {path.relative_to(ROOT / "examples").parts[0] for path in EXAMPLE_SOURCES}
    assert {"shock-example-policy", "shock-example-backend"} <= packages


@pytest.mark.parametrize("path", EXAMPLE_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_example_packages_import_only_the_api(path: Path) -> None:
    _check_only_api(_shock_imports(ast.parse(path.read_text(), str(path))), str(path))


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)


def test_plugins_doc_imports_only_the_api() -> None:
    blocks = _python_blocks(PLUGINS_DOC.read_text())
    assert len(blocks) >= 5
    imports = []
    for number, block in enumerate(blocks, start=1):
        imports += _shock_imports(ast.parse(block, f"{PLUGINS_DOC.name}, python block {number}"))
    assert imports, "the plugin docs show no import at all"
    _check_only_api(imports, str(PLUGINS_DOC))
