"""Tier-1 tables for workflows/jobmetrics.py: how much upstream's Job controller metrics rise.

Rule ids are those of docs/job.md (POL-48 to POL-56). The Job workflow records what
these functions compute after each successful status write; the bridge records POL-54 per Pod event.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_job_decisions import NOW, cond
from workflows.jobmetrics import (
    METRICS,
    SYNC_DURATION_BUCKETS,
    StatusRises,
    backoff_limit_label,
    job_finished,
    status_rises,
    tracking_finalizer_event,
)
from workflows.models.job import JOB_TRACKING_FINALIZER, JobSpecView, JobStatusView

NONINDEXED = JobSpecView(completions=5, parallelism=2)
INDEXED = JobSpecView(completions=5, parallelism=2, completion_mode="Indexed")
PER_INDEX = INDEXED.model_copy(update={"backoff_limit_per_index": 1})


def st(**kw: Any) -> JobStatusView:
    return JobStatusView(start_time=NOW, **kw)


def test_names_labels_and_buckets_are_upstreams() -> None:  # POL-48, POL-49
    assert {m.name: m.labels for m in METRICS} == {
        "job_controller_job_sync_duration_seconds": ("completion_mode", "result", "action"),
        "job_controller_job_syncs_total": ("completion_mode", "result", "action"),
        "job_controller_jobs_finished_total": ("completion_mode", "result", "reason"),
        "job_controller_job_pods_finished_total": ("completion_mode", "result"),
        "job_controller_pod_failures_handled_by_failure_policy_total": ("action",),
        "job_controller_terminated_pods_tracking_finalizer_total": ("event",),
        "job_controller_job_finished_indexes_total": ("status", "backoffLimit"),
        "job_controller_job_pods_creation_total": ("reason", "status"),
    }
    assert len(SYNC_DURATION_BUCKETS) == 15 and SYNC_DURATION_BUCKETS[0] == 0.004
    assert SYNC_DURATION_BUCKETS[-1] == pytest.approx(65.536)
    assert all(b == pytest.approx(2 * a) for a, b in zip(SYNC_DURATION_BUCKETS[:-1], SYNC_DURATION_BUCKETS[1:], strict=True))


@pytest.mark.parametrize(
    ("spec", "before", "after", "rises"),
    [
        (NONINDEXED, st(), st(active=2), StatusRises(0, 0, None, None)),
        (NONINDEXED, st(uncounted_succeeded=["a"]), st(succeeded=1), StatusRises(1, 0, None, None)),
        (NONINDEXED, st(succeeded=1, failed=1), st(succeeded=3, failed=2), StatusRises(2, 1, None, None)),
        (INDEXED, st(), st(succeeded=3, completed_indexes="0-2"), StatusRises(3, 0, 3, None)),
        (INDEXED, st(succeeded=3, completed_indexes="0-2"), st(succeeded=4, completed_indexes="0-2,4"),
         StatusRises(1, 0, 1, None)),
        (INDEXED, st(succeeded=4, completed_indexes="0-3,7"), st(succeeded=5, completed_indexes="0-4,7"),
         StatusRises(1, 0, 1, None)),
        (INDEXED, st(succeeded=2, completed_indexes="0,1"), st(succeeded=2, completed_indexes="0,1", failed=2),
         StatusRises(0, 2, 0, None)),
        (PER_INDEX, st(failed_indexes=""), st(failed=2, failed_indexes="1,3"), StatusRises(0, 2, 0, 2)),
        (PER_INDEX, st(failed=2, failed_indexes="1,3"), st(failed=3, failed_indexes="1,3"), StatusRises(0, 1, 0, 0)),
        (PER_INDEX, st(failed_indexes=None), st(failed_indexes=""), StatusRises(0, 0, 0, 0)),
    ],
    ids=["nothing finished", "step 3 folds a success (NonIndexed)", "several at once",
         "indexes completed (Indexed counts indexes, JOB-47)", "one more index",
         "index beyond completions not counted (POL-44)", "failures only", "per-index: two indexes fail",
         "per-index: a retried failure fails no index", "per-index: first write of an empty set"],
)
def test_status_rises(spec: JobSpecView, before: JobStatusView, after: JobStatusView,
                      rises: StatusRises) -> None:  # POL-52, POL-55
    assert status_rises(before, after, spec) == rises


def test_elastic_scale_down_is_no_fall() -> None:  # POL-52, POL-44: both sides counted within the new completions
    spec = INDEXED.model_copy(update={"completions": 3, "parallelism": 3})
    before, after = st(succeeded=5, completed_indexes="0-4"), st(succeeded=3, completed_indexes="0-2")
    assert status_rises(before, after, spec) == StatusRises(0, 0, 0, None)


@pytest.mark.parametrize(
    ("before", "after", "finished"),
    [
        (st(conditions=[cond("SuccessCriteriaMet", reason="CompletionsReached")]),
         st(conditions=[cond("SuccessCriteriaMet", reason="CompletionsReached"),
                        cond("Complete", reason="CompletionsReached")]), ("succeeded", "CompletionsReached")),
        (st(conditions=[cond("SuccessCriteriaMet", reason="SuccessPolicy")]),
         st(conditions=[cond("SuccessCriteriaMet", reason="SuccessPolicy"), cond("Complete", reason="SuccessPolicy")]),
         ("succeeded", "SuccessPolicy")),
        (st(conditions=[cond("FailureTarget", reason="BackoffLimitExceeded")]),
         st(conditions=[cond("FailureTarget", reason="BackoffLimitExceeded"),
                        cond("Failed", reason="BackoffLimitExceeded")]), ("failed", "BackoffLimitExceeded")),
        (st(), st(conditions=[cond("FailureTarget", reason="PodFailurePolicy")]), None),
        (st(conditions=[cond("Failed", reason="DeadlineExceeded")]),
         st(conditions=[cond("Failed", reason="DeadlineExceeded")]), None),
        (st(), st(conditions=[cond("Complete", status="False")]), None),
    ],
    ids=["Complete added", "Complete by successPolicy", "Failed added", "interim condition only",
         "already failed: not again", "a False condition"],
)
def test_job_finished(before: JobStatusView, after: JobStatusView, finished: tuple[str, str] | None) -> None:  # POL-51
    assert job_finished(before, after) == finished


@pytest.mark.parametrize(("spec", "label"), [(NONINDEXED, "global"), (INDEXED, "global"), (PER_INDEX, "perIndex")])
def test_backoff_limit_label(spec: JobSpecView, label: str) -> None:  # POL-55
    assert backoff_limit_label(spec) == label


def p(phase: str, *finalizers: str) -> dict[str, Any]:
    return {"metadata": {"finalizers": list(finalizers)}, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("old", "new", "event"),
    [
        (None, p("Pending", JOB_TRACKING_FINALIZER), None),
        (p("Running", JOB_TRACKING_FINALIZER), p("Succeeded", JOB_TRACKING_FINALIZER), "add"),
        (p("Running", JOB_TRACKING_FINALIZER), p("Failed", JOB_TRACKING_FINALIZER), "add"),
        (None, p("Failed", JOB_TRACKING_FINALIZER), "add"),
        (p("Succeeded", JOB_TRACKING_FINALIZER), p("Succeeded"), "delete"),
        (p("Failed", JOB_TRACKING_FINALIZER), None, "delete"),
        (p("Succeeded", JOB_TRACKING_FINALIZER), p("Succeeded", JOB_TRACKING_FINALIZER, "other"), None),
        (p("Succeeded"), None, None),
        (p("Running", JOB_TRACKING_FINALIZER), None, None),
        (p("Succeeded", "other"), p("Succeeded"), None),
    ],
    ids=["new running pod", "finishes succeeded", "finishes failed", "first seen finished (relist)",
         "finalizer removed", "deleted while holding it", "unrelated update", "deleted after removal",
         "running pod deleted", "another finalizer"],
)
def test_tracking_finalizer_event(old: dict[str, Any] | None, new: dict[str, Any] | None,
                                  event: str | None) -> None:  # POL-54
    assert tracking_finalizer_event(old, new) == event


def test_each_buffered_update_is_exported_with_its_own_labels() -> None:
    # An attribute set freed after its update leaves its id() to the next one; the SDK's exporter
    # cached labels by id(), so the next set was exported with the old labels.
    from dataclasses import dataclass as _dataclass

    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import CollectorRegistry
    from temporalio.runtime import BUFFERED_METRIC_KIND_COUNTER, MetricBuffer

    from worker.telemetry import _MetricsExporter

    @_dataclass
    class Metric:
        name: str = "sets_total"
        description: str = ""
        unit: str = ""
        kind: int = BUFFERED_METRIC_KIND_COUNTER

    @_dataclass
    class Update:
        metric: Metric
        value: int
        attributes: dict[str, str]

    registry = CollectorRegistry()
    exporter = _MetricsExporter(MetricBuffer(10), MeterProvider(metric_readers=[
        PrometheusMetricReader(registry=registry, scope_info_enabled=False)]))
    metric = Metric()
    for i in range(50):
        exporter._apply_update(Update(metric, 1, {"set": str(i)}))  # type: ignore[arg-type]
    samples = {s.labels["set"]: s.value for fam in registry.collect() for s in fam.samples
               if s.name == "sets_total"}
    assert samples == {str(i): 1.0 for i in range(50)}


def test_each_buffered_metric_is_exported_to_the_instrument_of_its_name() -> None:
    # A metric object freed after its update leaves its id() to the next one, of any name and kind;
    # the SDK's exporter found instruments by id(), so the next metric's values went to the old
    # one's instrument, and its cache kept an entry per address.
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import CollectorRegistry
    from temporalio.runtime import (
        BUFFERED_METRIC_KIND_COUNTER,
        BUFFERED_METRIC_KIND_HISTOGRAM,
        MetricBuffer,
    )

    from worker.telemetry import _MetricsExporter

    class Metric:  # one object, renamed: what a reused address looks like to a cache by id()
        name, description, unit, kind = "runs_total", "", "", BUFFERED_METRIC_KIND_COUNTER

    class Update:
        def __init__(self, metric: Metric, value: float) -> None:
            self.metric, self.value, self.attributes = metric, value, {"outcome": "created"}

    registry = CollectorRegistry()
    exporter = _MetricsExporter(MetricBuffer(10), MeterProvider(metric_readers=[
        PrometheusMetricReader(registry=registry, scope_info_enabled=False)]))
    metric = Metric()
    exporter._apply_update(Update(metric, 1))  # type: ignore[arg-type]
    metric.name, metric.kind = "delay_seconds", BUFFERED_METRIC_KIND_HISTOGRAM
    exporter._apply_update(Update(metric, 2.5))  # type: ignore[arg-type]
    metric.name, metric.kind = "runs_total", BUFFERED_METRIC_KIND_COUNTER
    for _ in range(3):
        exporter._apply_update(Update(Metric(), 1))  # type: ignore[arg-type]
    samples = {s.name: s.value for fam in registry.collect() for s in fam.samples}
    assert samples["runs_total"] == 4.0
    assert samples["delay_seconds_sum"] == 2.5 and samples["delay_seconds_count"] == 1.0
    assert len(exporter._named) == 2 and not exporter._instruments


def test_the_sdk_metrics_are_not_forwarded_during_a_burst_of_creations(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.metrics import MeterProvider

    from worker import telemetry

    drained: list[int] = []

    class Buffer:
        def retrieve_updates(self) -> list[object]:
            drained.append(1)
            return []

    exporter = telemetry._MetricsExporter(Buffer(), MeterProvider())  # type: ignore[arg-type]
    monkeypatch.setattr(telemetry, "in_burst", lambda: True)
    exporter._drain_once()
    assert drained == []
    monkeypatch.setattr(telemetry, "in_burst", lambda: False)
    exporter._drain_once()
    assert drained == [1]
