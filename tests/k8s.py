"""Builders for the Kubernetes objects tests create through the API (kubesim or a real cluster)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kube.client import Kube


def stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def second(t: datetime) -> datetime:
    """``t`` truncated to whole seconds, as Kubernetes timestamps are."""
    return t.replace(microsecond=0)


#: Jobs the TTL tests create and finish by hand name another controller, so batchd's own Job
#: controller leaves them alone; those tests run the bridge with ``ttl_scope="all"``.
HAND_RUN = "example.com/by-hand"


def job_manifest(name: str, *, ttl: int | None = None, managed_by: str | None = HAND_RUN,
                 labels: dict[str, str] | None = None, finalizers: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": labels or {"app": name}}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}},
    }
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    if managed_by:
        spec["managedBy"] = managed_by
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def create_job(kube: Kube, namespace: str, name: str, **kw: Any) -> dict[str, Any]:
    return kube.create("Job", namespace, job_manifest(name, **kw))


def finish_job(kube: Kube, namespace: str, name: str, at: datetime, *, failed: bool = False) -> dict[str, Any]:
    """Write a terminal status as a Job controller would (two-phase conditions, KEP-4368)."""
    t = stamp(at)
    if failed:
        conditions = [
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": t,
             "lastProbeTime": t, "message": "Job has reached the specified backoff limit"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": t,
             "lastProbeTime": t, "message": "Job has reached the specified backoff limit"},
        ]
        status: dict[str, Any] = {"conditions": conditions, "startTime": t, "failed": 1, "active": 0}
    else:
        conditions = [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": t,
             "lastProbeTime": t, "message": "Reached expected number of succeeded pods"},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": t,
             "lastProbeTime": t, "message": "Reached expected number of succeeded pods"},
        ]
        status = {"conditions": conditions, "startTime": t, "completionTime": t, "succeeded": 1, "active": 0}
    return kube.patch("Job", namespace, name, {"status": status}, subresource="status")


def pod_manifest(name: str, *, ttl_label: str | None = None, run_seconds: float = 0.2, exit_code: int = 0,
                 owner: dict[str, Any] | None = None, finalizers: list[str] | None = None,
                 restart_policy: str = "Never") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {}, "annotations": {
        "kubesim.batchd.io/run-seconds": str(run_seconds), "kubesim.batchd.io/exit-code": str(exit_code)}}
    if ttl_label is not None:
        meta["labels"]["batchd.io/ttl-seconds-after-finished"] = ttl_label
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": owner["kind"], "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "restartPolicy": restart_policy, "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "busybox:1.36"}]}}
