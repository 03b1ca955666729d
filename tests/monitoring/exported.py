"""The metric names the worker exports, read from the code, and the names a PromQL query uses.

batchd's own instruments are found in its source (every ``meter.create_*("name", …)`` and the
upstream Job metrics of workflows/jobmetrics.py); the Temporal SDK's are the names compiled into
its core library (temporalio/bridge); ``target_info`` is the OpenTelemetry exporter's own. The
Prometheus suffixes are those a scrape of ``batchd worker`` shows: ``_total`` on counters,
``_bucket``/``_sum``/``_count`` on histograms and ``_milliseconds`` on the SDK's latencies.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import opentelemetry.exporter.prometheus as otel_prometheus
import prometheus_client.process_collector as process_collector
import temporalio.bridge

from workflows.jobmetrics import METRICS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("worker", "activities", "workflows", "kube")
_HISTOGRAM = ("_bucket", "_sum", "_count")

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
             "unless", "offset", "inf", "nan", "atan2"}


@cache
def batchd_instruments() -> dict[str, str]:
    """Instrument name → kind (counter, histogram, gauge) of every instrument batchd creates."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Gauge" \
                        and node.args and isinstance(node.args[0], ast.Constant):
                    found[str(node.args[0].value)] = "gauge"  # a prometheus_client gauge (worker/telemetry.py)
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                kind = node.func.attr
                if kind.startswith("create_") and node.args and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str):
                    found[node.args[0].value] = "counter" if "counter" in kind else \
                        "histogram" if "histogram" in kind else "gauge"
    for m in METRICS:
        found[m.name] = "histogram" if m.buckets else "counter"
    return found


def batchd_families() -> set[str]:
    """The Prometheus sample names of batchd's instruments."""
    names: set[str] = set()
    for name, kind in batchd_instruments().items():
        if kind == "counter":
            names.add(name if name.endswith("_total") else name + "_total")
        elif kind == "histogram":
            names.update(name + suffix for suffix in _HISTOGRAM)
        else:
            names.add(name)
    return names


@cache
def _sdk_core() -> bytes:
    core = next(Path(temporalio.bridge.__file__).parent.glob("temporal_sdk_bridge*"))
    return core.read_bytes()


def sdk_exports(name: str) -> bool:
    """Whether ``name`` is a Prometheus name of a metric the Temporal SDK's core records."""
    if not name.startswith("temporal_"):
        return False
    base = re.sub(r"(_bucket|_sum|_count)$", "", name)
    base = re.sub(r"(_total|_milliseconds)$", "", base)
    return base.removeprefix("temporal_").encode() in _sdk_core()


def exporter_exports(name: str) -> bool:
    """``target_info``: the OpenTelemetry exporter's resource metric, named in its source."""
    return name == "target_info" and name in Path(otel_prometheus.__file__).read_text()


def process_exports(name: str) -> bool:
    """``process_*``: prometheus_client's ProcessCollector, which the worker registers, names them
    ``process_`` and a suffix written in its source."""
    return name.startswith("process_") and f"'{name.removeprefix('process_')}'" in \
        Path(process_collector.__file__).read_text()


def exported(name: str) -> bool:
    """Whether the worker's /metrics can carry a sample named ``name``."""
    return name in batchd_families() or sdk_exports(name) or exporter_exports(name) or process_exports(name)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (recording rules' names included).

    Label matchers, ranges, strings, grouping clauses and function names are removed first; what
    is left of the identifiers are the selectors' metric names.
    """
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b\d+(\.\d+)?(e[+-]?\d+)?(ms|[smhdwy])?\b", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        rest = expr[m.end():].lstrip()
        word = m.group()
        if rest.startswith("(") or word.lower() in _KEYWORDS or word.startswith("$") \
                or expr[max(0, m.start() - 1)] == "$":
            continue
        names.add(word)
    return names
