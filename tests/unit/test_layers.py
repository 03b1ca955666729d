"""Layer rules import-linter cannot express (it does not forbid sub-modules of external packages),
and what the worker process must not load."""

from __future__ import annotations

import ast
import subprocess
import sys
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
    banned = {"kube", "kubernetes", "urllib3", "aiohttp", "requests", "socket", "subprocess"}
    offenders = {f: n & banned for f, names in imported_modules("workflows").items()
                 if (n := {name.split(".")[0] for name in names}) & banned}
    assert not offenders


def test_the_worker_imports_neither_the_kubernetes_client_nor_aiohttp() -> None:
    # Each is about 10 MiB of every worker's memory, held for nothing (docs/benchmarks.md); kubesim
    # and `batchd dev`, which runs it, still use both.
    heavy = ("kubernetes", "aiohttp", "requests", "urllib3")
    probe = f"import sys, worker.cli, worker.app; print(*[m for m in {heavy!r} if m in sys.modules])"
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == []
