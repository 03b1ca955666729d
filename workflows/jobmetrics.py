"""Upstream's Job controller metrics: names, label sets, and how much each rose (POL-48 to POL-56).

Layer: workflows, pure (no I/O, no clock, no temporalio). Callers: the Job workflow
(workflows/job.py) records through ``workflow.metric_meter()``, which records nothing while
replaying, so a worker that restarts and replays a Job's history counts nothing twice; the
bridge (worker/bridge.py) counts the tracking-finalizer transitions its Pod informer sees (POL-54);
worker/telemetry.py turns :data:`METRICS` into OpenTelemetry views, so each instrument shows on
``/metrics`` with upstream's name, exactly upstream's labels (the Temporal runtime's own
attributes dropped) and, for the histogram, upstream's buckets.

Names and help texts are upstream's (``pkg/controller/job/metrics/metrics.go``). The decisions
that need a sync's decision counts (the ``action`` of POL-50, the creation ``reason`` of POL-56) are made
by :func:`workflows.decisions.job.plan_sync`; this module computes what rose between two statuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from workflows.models.common import POD_FINISHED_PHASES
from workflows.models.job import JOB_TRACKING_FINALIZER, JobSpecView, JobStatusView
from workflows.models.jobpods import (
    count_indexes,
)

SYNC_DURATION = "job_controller_job_sync_duration_seconds"
SYNCS = "job_controller_job_syncs_total"
JOBS_FINISHED = "job_controller_jobs_finished_total"
PODS_FINISHED = "job_controller_job_pods_finished_total"
POD_FAILURES_HANDLED = "job_controller_pod_failures_handled_by_failure_policy_total"
TERMINATED_PODS_TRACKING_FINALIZER = "job_controller_terminated_pods_tracking_finalizer_total"
FINISHED_INDEXES = "job_controller_job_finished_indexes_total"
PODS_CREATION = "job_controller_job_pods_creation_total"

#: POL-49: 0.004 s · 2^k, k = 0…14 (upstream's ``ExponentialBuckets(0.004, 2, 15)``)
SYNC_DURATION_BUCKETS: tuple[float, ...] = tuple(0.004 * 2**k for k in range(15))


@dataclass(frozen=True)
class MetricSpec:
    """One upstream instrument: its Prometheus name, help text, label names and buckets."""

    name: str
    description: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] | None = None  # a histogram's explicit bucket boundaries


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(SYNC_DURATION, "The time it took to sync a job", ("completion_mode", "result", "action"),
               SYNC_DURATION_BUCKETS),
    MetricSpec(SYNCS, "The number of job syncs", ("completion_mode", "result", "action")),
    MetricSpec(JOBS_FINISHED, "The number of finished jobs", ("completion_mode", "result", "reason")),
    MetricSpec(PODS_FINISHED, "The number of finished Pods that are fully tracked", ("completion_mode", "result")),
    MetricSpec(POD_FAILURES_HANDLED,
               "The number of failed Pods handled by failure policy with respect to the failure policy action "
               "applied based on the matched rule. Possible values of the action label correspond to the possible "
               'values for the failure policy rule action, which are: "FailJob", "Ignore" and "Count".',
               ("action",)),
    MetricSpec(TERMINATED_PODS_TRACKING_FINALIZER,
               "The number of terminated pods (phase=Failed|Succeeded) that have the finalizer "
               'batch.kubernetes.io/job-tracking. The event label can be "add" or "delete".', ("event",)),
    MetricSpec(FINISHED_INDEXES,
               'The number of finished indexes. Possible values for the status label are: "succeeded", "failed". '
               'Possible values for the backoffLimit label are: "perIndex" and "global"', ("status", "backoffLimit")),
    MetricSpec(PODS_CREATION,
               "The number of Pods created by the Job controller labelled with a reason for the Pod creation. "
               "This metric also distinguishes between Pods created using different PodReplacementPolicy settings. "
               'Possible values of the "reason" label are: "new", "recreate_terminating_or_failed", "recreate_failed". '
               'Possible values of the "status" label are: "succeeded", "failed".', ("reason", "status")),
)


def completion_mode(spec: JobSpecView) -> str:
    """The ``completion_mode`` label: ``Indexed`` or ``NonIndexed`` (POL-49)."""
    return spec.completion_mode


def backoff_limit_label(spec: JobSpecView) -> str:
    """POL-55: ``perIndex`` when backoffLimitPerIndex is set, else ``global``."""
    return "perIndex" if spec.backoff_limit_per_index is not None else "global"


def job_finished(before: JobStatusView, after: JobStatusView) -> tuple[str, str] | None:
    """POL-51: the ``(result, reason)`` of a status write that finished the Job, else None.

    Args:
        before: the status the write replaced.
        after: the status written.

    Returns:
        ``("succeeded", reason)`` when the write added Complete=True, ``("failed", reason)`` when
        it added Failed=True (the condition's reason, e.g. CompletionsReached, SuccessPolicy,
        BackoffLimitExceeded, PodFailurePolicy), None otherwise.
    """
    for type_, result in (("Complete", "succeeded"), ("Failed", "failed")):
        now = _true(after, type_)
        if now is not None and _true(before, type_) is None:
            return result, now.reason or ""
    return None


class StatusRises(NamedTuple):
    """What rose in one status write (POL-52, POL-55); never negative."""

    pods_succeeded: int  # status.succeeded (NonIndexed) or completed indexes within completions (Indexed)
    pods_failed: int  # status.failed
    indexes_succeeded: int | None  # Indexed Jobs only: newly completed indexes
    indexes_failed: int | None  # backoffLimitPerIndex Jobs only: newly failed indexes


def status_rises(before: JobStatusView, after: JobStatusView, spec: JobSpecView) -> StatusRises:
    """POL-52, POL-55: how much each counter rose in a successful status write (upstream ``recordJobPodFinished``).

    Indexed Jobs count completed indexes within the *current* completions on both sides, so an
    elastic scale-down that cuts completed indexes is not a fall (POL-44); nothing is ever negative.

    Args:
        before: the status the write replaced.
        after: the status written.
        spec: the Job's spec.

    Returns:
        The rises; the index figures are None where the metric does not apply.
    """
    failed = max(0, after.failed - before.failed)
    if spec.completion_mode != "Indexed" or spec.completions is None:
        return StatusRises(max(0, after.succeeded - before.succeeded), failed, None, None)
    completions = spec.completions
    succeeded = 0
    if after.completed_indexes != before.completed_indexes:
        succeeded = max(0, count_indexes(after.completed_indexes, completions)
                        - count_indexes(before.completed_indexes, completions))
    failed_indexes: int | None = None
    if spec.backoff_limit_per_index is not None:
        failed_indexes = 0
        if after.failed_indexes != before.failed_indexes:
            failed_indexes = max(0, count_indexes(after.failed_indexes or "", completions)
                                 - count_indexes(before.failed_indexes or "", completions))
    return StatusRises(succeeded, failed, succeeded, failed_indexes)


def finished_with_tracking_finalizer(pod: Mapping[str, Any] | None) -> bool:
    """POL-54: phase Succeeded or Failed while holding ``batch.kubernetes.io/job-tracking``."""
    if not pod:
        return False
    phase = (pod.get("status") or {}).get("phase")
    return phase in POD_FINISHED_PHASES and JOB_TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or [])


def tracking_finalizer_event(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str | None:
    """POL-54: ``add`` when a Pod event enters the finished-with-finalizer state, ``delete`` when it leaves it.

    Upstream's ``recordFinishedPodWithTrackingFinalizer``, for any Pod the informer sees.

    Args:
        old: the Pod before the event (None: first seen, an add or the initial list).
        new: the Pod after it (None: deleted).

    Returns:
        ``"add"``, ``"delete"`` or None when the state did not change.
    """
    was, now = finished_with_tracking_finalizer(old), finished_with_tracking_finalizer(new)
    if was == now:
        return None
    return "add" if now else "delete"


def _true(status: JobStatusView, type_: str) -> Any:
    return next((c for c in status.conditions if c.type == type_ and c.status == "True"), None)
