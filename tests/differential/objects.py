"""Bodies, paths and views shared by the case tables."""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential.harness import Case, Reply

JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
CRONJOBS = "/apis/batch/v1/namespaces/{ns}/cronjobs"
PODS = "/api/v1/namespaces/{ns}/pods"
EVENTS = "/api/v1/namespaces/{ns}/events"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/{ns}/events"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
NAMESPACES = "/api/v1/namespaces"
CONTAINER = {"name": "main", "image": "busybox:1.36"}
#: Pods stay unscheduled behind a gate: neither kube-scheduler nor kubesim's kubelet binds them,
#: so what the servers answer does not race a node
GATE = {"name": "example.com/hold"}


def job(name: str = "j", *, meta: dict[str, Any] | None = None, template: dict[str, Any] | None = None,
        **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, **(meta or {})},
            "spec": {"template": template or {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}, **spec}}


def cronjob(name: str = "cj", *, meta: dict[str, Any] | None = None, job_spec: dict[str, Any] | None = None,
            **spec: Any) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "OnFailure", "containers": [CONTAINER]}}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, **(meta or {})},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": job_spec or {"template": template}}, **spec}}


def pod(name: str = "p", *, meta: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **(meta or {})},
            "spec": {"schedulingGates": [GATE], "containers": [CONTAINER], **spec}}


def lease(name: str = "l", *, meta: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, **(meta or {})},
            "spec": spec}


def owned_by(label: str, kind: str = "Job", api_version: str = "batch/v1", block: bool = True) -> Any:
    """An ownerReferences list naming the object an earlier step labelled."""
    def refs(ctx: dict[str, Any]) -> list[dict[str, Any]]:
        meta = ctx[label]["metadata"]
        return [{"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"],
                 "controller": True, "blockOwnerDeletion": block}]
    return refs


def params(cases: list[Case]) -> list[Any]:
    """The cases as pytest parameters named after them; a long one carries a timeout marker, which
    the root conftest's ordering reads as its length, so that it starts early."""
    return [pytest.param(c, id=c.name, marks=[pytest.mark.timeout(60)] if c.seconds else [])
            for c in cases]


# -- what of an answer a step keeps --------------------------------------------------------------


def code(reply: Reply) -> int:
    return reply.status


def names(reply: Reply) -> Any:
    """A list's item names (or the error)."""
    if reply.status != 200:
        return reply.body
    return [item["metadata"]["name"] for item in reply.body["items"]]


def deletion(reply: Reply) -> Any:
    """What deletion shows of an object: its deletion stamps, finalizers and owners (or the error)."""
    if reply.status != 200 or reply.body.get("kind") == "Status":
        return reply.body
    meta = reply.body.get("metadata") or {}
    return {k: meta.get(k) for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "finalizers",
                                     "ownerReferences")}


def gone(reply: Reply) -> bool:
    return reply.status == 404
