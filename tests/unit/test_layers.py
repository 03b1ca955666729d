"""Layer rules import-linter cannot express (it does not forbid sub-modules of external packages)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


def test_activities_never_import_the_workflow_api() -> None:
    offenders = {f for f, names in imported_modules("activities").items() if "temporalio.workflow" in names}
    assert not offenders


def test_workflows_never_import_the_kubernetes_client_or_do_io() -> None:
    banned = {"kubernetes", "urllib3", "aiohttp", "requests", "socket", "subprocess"}
    offenders = {f: n & banned for f, names in imported_modules("workflows").items()
                 if (n := {name.split(".")[0] for name in names}) & banned}
    assert not offenders
