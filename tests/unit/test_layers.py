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


def test_decisions_use_no_temporal_api() -> None:
    """The decisions are pure: what they do with the world goes out as steps (workflows/execute.py)."""
    offenders = {f: {n for n in names if n.startswith("temporalio")}
                 for f, names in imported_modules("workflows/decisions").items()}
    assert not {f: n for f, n in offenders.items() if n}


def test_no_function_in_the_workflows_or_the_decisions_is_over_40_lines() -> None:
    """A function a reader holds at once: at most 40 lines of code (its docstring not counted)."""
    long: dict[str, int] = {}
    for path in (ROOT / "workflows").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body = node.body
                documented = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str)
                first = body[1].lineno if documented and len(body) > 1 else node.lineno
                lines = (node.end_lineno or node.lineno) - first + 1 + (0 if first == node.lineno else 1)
                if lines > 40:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert long == {}
