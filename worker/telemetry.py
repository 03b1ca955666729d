"""Logs, metrics and traces for the worker process.

Layer: worker. Called once at start-up by worker/app.py (and the dev environment). Metrics all
flow through OpenTelemetry: batchd's own instruments (activities, bridge) use the global meter
provider; the Temporal SDK's metrics (and ``workflow.metric_meter()`` / ``activity.metric_meter()``)
are buffered by the Temporal ``Runtime`` and forwarded into the same provider. One Prometheus
registry serves them all on ``/metrics``. Traces use the SDK's OpenTelemetry interceptor and are
exported over OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set and the exporter is installed.

Upstream's Job controller metrics (workflows/jobmetrics.py, recorded by the Job workflow through
``workflow.metric_meter()`` and by the bridge) get one view each: only upstream's labels are
kept (the SDK adds ``namespace``, ``task_queue`` and ``workflow_type``, the runtime ``service``),
and the sync-duration histogram gets upstream's buckets. The exporter's ``otel_scope_*`` labels
are off, so a metric carries exactly the labels it was recorded with.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, Gauge, ProcessCollector
from temporalio.contrib.opentelemetry import MetricsExporter, TracingInterceptor
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig

from activities.cronjob import in_burst
from workflows import jobmetrics

_RESERVED = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class _Formatter(logging.Formatter):
    """One event per line: ``ts level logger message key=value…`` or one JSON object."""

    def __init__(self, fmt: str) -> None:
        super().__init__()
        self.json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        extra = {k: v for k, v in record.__dict__.items() if k not in _RESERVED and not k.startswith("_")}
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        if self.json:
            doc: dict[str, Any] = {"ts": ts, "level": record.levelname.lower(), "logger": record.name, "msg": msg}
            doc.update({k: v if isinstance(v, str | int | float | bool) or v is None else str(v) for k, v in extra.items()})
            return json.dumps(doc)
        pairs = " ".join(f"{k}={v}" for k, v in extra.items() if not isinstance(v, dict))
        return f"{ts} {record.levelname:<7} {record.name}: {msg}" + (f" {pairs}" if pairs else "")


def setup_logging(fmt: str = "text", level: str = "INFO") -> None:
    """Route all logging to stderr in ``fmt`` ("text" or "json")."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "aiohttp.access", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@dataclass
class Telemetry:
    """What the worker wires together: the Prometheus registry, the Temporal runtime, interceptors."""

    registry: CollectorRegistry
    runtime: Runtime
    exporter: MetricsExporter
    interceptors: list[Any]


#: The SDK's metric updates buffered between two drains; beyond it they are dropped (the SDK logs
#: an error). The buffer is allocated whole, so it is sized with room to spare above the largest
#: drains measured, a CronJob burst's, which holds a drain for up to ``BURST_WAIT``
#: (activities/cronjob.py), and no larger (docs/benchmarks.md).
METRIC_UPDATES = 30_000


#: Where a container's memory limit is read: cgroup v2, then v1.
CGROUP_MEMORY_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def memory_limit(paths: tuple[Path, ...] = CGROUP_MEMORY_LIMITS) -> int | None:
    """The worker's cgroup memory limit in bytes; None without one (v2's ``max``, v1's 2**63 rounded
    to a page), so that the alert on memory near the limit has nothing to compare with."""
    for path in paths:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        return int(text) if text.isdigit() and int(text) < 2**60 else None
    return None


def install(service: str = "batchd") -> Telemetry:
    """Install the global meter (and tracer) provider and build a Temporal runtime feeding it.

    Call once per process, before any client is created.
    """
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)  # process_resident_memory_bytes and friends
    if (limit := memory_limit()) is not None:
        Gauge("batchd_memory_limit_bytes", "The memory limit of the worker's cgroup (its container's).",
              registry=registry).set(limit)
    resource = Resource.create({"service.name": service})
    reader = PrometheusMetricReader(registry=registry, scope_info_enabled=False)
    provider = MeterProvider(resource=resource, metric_readers=[reader], views=job_controller_views())
    metrics.set_meter_provider(provider)
    tracing = _install_tracing(resource)
    buffer = MetricBuffer(METRIC_UPDATES)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer, global_tags={"service": service}))
    exporter = _MetricsExporter(buffer, provider, poll_interval=timedelta(seconds=1))
    return Telemetry(registry=registry, runtime=runtime, exporter=exporter,
                     interceptors=[TracingInterceptor()] if tracing else [])


class _MetricsExporter(MetricsExporter):
    """The SDK's exporter, with instruments found by name and attributes converted afresh, and
    not draining during a burst.

    The SDK caches both by ``id()`` of the buffer's objects without keeping those alive. Each
    ``create_counter`` (or histogram) call in a workflow makes a new metric object, and each ``add``
    through ``workflow.metric_meter()`` a new attribute set; once freed, their addresses are
    reused. By id, the next attribute set at the old address was exported with the old labels (an
    Indexed Job's finished Pods counted under another series, some samples under no labels), the
    next metric at an old address went to the old metric's instrument (a histogram's value added to
    a counter), and the instrument cache kept one entry per address ever seen (4,000 in a soak's
    first minutes, docs/benchmarks.md).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._named: dict[tuple[str, int], Any] = {}  # (name, kind) -> the SDK's instrument

    def _get_or_create_instrument(self, metric: Any) -> Any:
        key = (metric.name, metric.kind)
        if (found := self._named.get(key)) is None:
            found = self._named[key] = super()._get_or_create_instrument(metric)
            self._instruments.clear()  # the SDK's own cache, by id(), which only that call fills
        return found

    def _get_or_create_attributes(self, attributes: Any) -> Any:
        return dict(attributes)

    def _drain_once(self) -> None:
        """Each drain converts every update buffered since the last one, with the GIL held, and
        in the seconds around a burst of creations that takes a large share of the worker's
        Python time (docs/benchmarks.md). So a drain waits while a burst runs (at most
        ``BURST_WAIT``; the buffer holds METRIC_UPDATES)."""
        if not in_burst():
            super()._drain_once()


def job_controller_views() -> list[View]:
    """One view per upstream Job controller metric: upstream's labels only; the histogram's buckets (POL-48, POL-49)."""
    views = []
    for m in jobmetrics.METRICS:
        aggregation = ExplicitBucketHistogramAggregation(list(m.buckets)) if m.buckets else None
        views.append(View(instrument_name=m.name, attribute_keys=set(m.labels), aggregation=aggregation))
    return views


def _install_tracing(resource: Resource) -> bool:
    """Export traces over OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; False: no tracing.

    Without it the SDK's tracing interceptor is left out as well: it would still wrap every
    workflow activation and activity, and write a span context into every command's header, for
    spans that nothing exports.
    """
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTLP over HTTP/protobuf; the exporter reads OTEL_EXPORTER_OTLP_* (endpoint, headers, ...).
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True
