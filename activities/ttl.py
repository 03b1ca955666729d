"""Activities of the TTL-after-finished workflow: fresh read, and check-again-then-delete.

Layer: activities. Implements the declarations of workflows/models/ttl.py, which workflows/ttl.py
calls; registered by worker/temporal.py.
Runs in the worker's thread pool (kube/client.py's client is synchronous).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import metrics
from temporalio import activity

from activities.contract import implements
from activities.errors import temporal_errors
from kube.client import Clock, Kube, SystemClock
from kube.errors import Conflict
from workflows.models import ttl as contract
from workflows.models.common import Job, ObjectRef, ObserveInput, Pod
from workflows.models.ttl import DeleteExpiredInput, DeleteExpiredResult, TTLObservation, time_left

_meter = metrics.get_meter("batchd.ttl")
#: Upstream's metric (TTL-16), for Jobs and Pods alike: actual deletion − expiry.
DELETION_DURATION = _meter.create_histogram(
    "ttl_after_finished_controller_job_deletion_duration_seconds",
    description="Time from TTL expiry to the deletion request succeeding (kind: Job or Pod)",
    unit="s",
    explicit_bucket_boundaries_advisory=[0.1 * 2**k for k in range(14)],  # upstream's buckets
)
DELETIONS = _meter.create_counter(
    "batchd_ttl_deletions", description="TTL delete attempts by kind and outcome"
)


def observe(ref: ObjectRef, raw: dict[str, Any] | None) -> TTLObservation:
    """Turn a fresh GET into an observation of ``ref``; absent or another uid means gone."""
    if raw is None or raw.get("metadata", {}).get("uid") != ref.uid:
        return TTLObservation(ref=ref, gone=True)
    if ref.kind == "Job":
        return TTLObservation.of_job(Job.model_validate(raw))
    return TTLObservation.of_pod(Pod.model_validate(raw))


class TTLActivities:
    """The TTL activities, bound to one Kubernetes client and clock."""

    def __init__(self, kube: Kube, clock: Clock | None = None) -> None:
        self.kube = kube
        self.clock = clock or SystemClock()

    @implements(contract.read_ttl_object)
    @temporal_errors
    def read_ttl_object(self, inp: ObserveInput) -> TTLObservation:
        """GET the object fresh."""
        ref = inp.ref
        return observe(ref, self.kube.get(ref.kind, ref.namespace, ref.name))

    @implements(contract.delete_expired)
    @temporal_errors
    def delete_expired(self, inp: DeleteExpiredInput) -> DeleteExpiredResult:
        """GET fresh, re-run the decision on the fresh copy, delete only if it is expired (TTL-11 to TTL-13).

        Jobs are deleted with Foreground propagation, so their Pods go first; Pods, which have
        no dependents, with Background. The uid precondition guarantees a recreated namesake is
        never touched; a 404 or a failed precondition means the object is already gone.
        """
        ref = inp.ref
        obs = observe(ref, self.kube.get(ref.kind, ref.namespace, ref.name))
        if not obs.needs_cleanup():
            return self._skip(obs, "not_needed")
        now = self.clock.now()
        left = time_left(obs, now)
        if left is None or left.expire_at is None or not left.expired:
            return self._skip(obs, "not_expired", left.expire_at if left else None)
        if obs.held:  # TTL-HOLD
            return self._skip(obs, "held", left.expire_at)
        propagation = "Foreground" if ref.kind == "Job" else "Background"
        try:
            # The resourceVersion precondition makes the decision exactly the one taken on this
            # read: a hold or a raised TTL written since then fails it, and the loop decides again.
            existed = self.kube.delete(ref.kind, ref.namespace, ref.name, uid=ref.uid,
                                       resource_version=obs.resource_version, propagation=propagation) is not None
        except Conflict:
            fresh = observe(ref, self.kube.get(ref.kind, ref.namespace, ref.name))
            return self._skip(fresh, "gone" if fresh.gone else "changed")
        if not existed:
            return self._skip(TTLObservation(ref=ref, gone=True), "gone")
        DELETION_DURATION.record((now - left.expire_at).total_seconds(), {"kind": ref.kind})
        DELETIONS.add(1, {"kind": ref.kind, "outcome": "deleted"})
        activity.logger.info(
            "deleted %s %s (uid %s), %.3fs after expiry", ref.kind, ref.key(), ref.uid,
            (now - left.expire_at).total_seconds(),
        )
        return DeleteExpiredResult(deleted=True, observation=obs, expire_at=left.expire_at, deleted_at=now)

    @staticmethod
    def _skip(obs: TTLObservation, outcome: str, expire_at: Any = None) -> DeleteExpiredResult:
        DELETIONS.add(1, {"kind": obs.ref.kind, "outcome": outcome})
        return DeleteExpiredResult(deleted=False, observation=obs, expire_at=expire_at)

    def all(self) -> list[Callable[..., object]]:
        """Every activity of this group, for worker registration."""
        return [self.read_ttl_object, self.delete_expired]
