"""DESIGN's dependency rule, checked on the source: dependencies point inward.

`domain` imports only the standard library, numpy and transitions; `store` never imports
`runtime`. A newcomer's stray import would otherwise only show up as a tangle much later.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def _imported_roots(package: str) -> dict[str, set[str]]:
    """Top-level module names imported anywhere in ``package``, by importing file."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        roots = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
        found[str(path.relative_to(REPO))] = roots
    return found


@pytest.mark.parametrize(
    ("package", "allowed"),
    [
        ("domain", STDLIB | {"domain", "numpy", "transitions"}),
        ("store", STDLIB | {"domain", "store", "migrations", "sqlalchemy", "sqlmodel", "alembic",
                            "structlog"}),
    ],
)
def test_package_imports_only_what_design_allows(package: str, allowed: set[str]) -> None:
    offenders = {
        path: sorted(roots - allowed)
        for path, roots in _imported_roots(package).items()
        if roots - allowed
    }
    assert offenders == {}


def test_the_check_sees_imports() -> None:
    roots = _imported_roots("runtime")
    assert any("mujoco" in r for r in roots.values())
    assert any("store" in r for r in roots.values())
