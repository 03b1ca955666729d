"""Events (both groups), Leases (leader election's compare-and-swap), and the namespace lifecycle:
a Terminating namespace refuses new content, empties itself and goes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.differential.harness import APPLY, MERGE, Call, Case, Poll, Reply
from tests.differential.objects import (
    CONTAINER,
    EVENTS,
    EVENTS_V1,
    LEASES,
    NAMESPACES,
    code,
    job,
    lease,
    params,
)

T0 = "2020-01-01T00:00:00Z"
MICRO = "2020-01-01T00:00:00.000000Z"
OTHER = "/api/v1/namespaces/{ns}-x"
OTHER_JOBS = "/apis/batch/v1/namespaces/{ns}-x/jobs"
OTHER_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}-x/leases"


def core_event(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Job", "name": "j", "namespace": "{ns}", "apiVersion": "batch/v1"},
            "reason": "Started", "message": "m", "type": "Normal", "source": {"component": "c"},
            "firstTimestamp": T0, "lastTimestamp": T0, "count": 1, **fields}


def new_event(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "regarding": {"kind": "Job", "name": "j", "namespace": "{ns}"}, "reason": "Started", "note": "n",
            "type": "Normal", "eventTime": MICRO, "reportingController": "example.com/c",
            "reportingInstance": "i", "action": "Run", **fields}


def conditions(reply: Reply) -> Any:
    """A terminating namespace's phase and its conditions' types, statuses and reasons."""
    if reply.status != 200:
        return reply.status
    status = reply.body.get("status") or {}
    return {"phase": status.get("phase"), "conditions": [
        {k: c.get(k) for k in ("type", "status", "reason", "message")} for c in status.get("conditions") or []]}


def phase(reply: Reply) -> Any:
    body = reply.body
    return {"code": reply.status, "phase": (body.get("status") or {}).get("phase"),
            "deleting": bool((body.get("metadata") or {}).get("deletionTimestamp")),
            "spec": body.get("spec")}


CASES = [
    Case("events: core/v1, and the same Event in events.k8s.io/v1", (
        Call("POST", EVENTS, core_event("e1")),
        Call("GET", EVENTS_V1 + "/e1"),
        Call("PATCH", EVENTS + "/e1", {"count": 2, "lastTimestamp": "2020-01-01T00:01:00Z"}, ctype=MERGE),
    )),
    Case("events: events.k8s.io/v1, and the same Event in core/v1", (
        Call("POST", EVENTS_V1, new_event("e2")),
        Call("GET", EVENTS + "/e2"),
        Call("PATCH", EVENTS_V1 + "/e2", {"series": {"count": 2, "lastObservedTime": "2020-01-01T00:01:00.000000Z"}},
             ctype=MERGE),
    )),
    Case("events: what each group refuses", (
        Call("POST", EVENTS, core_event("other", involvedObject={"kind": "Job", "name": "j", "namespace": "else"})),
        Call("POST", EVENTS, core_event("timed", eventTime=MICRO)),
        Call("POST", EVENTS_V1, new_event("v1", type="Weird", deprecatedCount=3, eventTime=None)),
        Call("POST", EVENTS_V1, new_event("Bad_Name")),
        Call("POST", EVENTS, core_event("Loose_Name"), show=code),
    )),
    Case("leases: create, the compare-and-swap, and a PUT that creates", (
        Call("POST", LEASES, lease(holderIdentity="a", leaseDurationSeconds=15, acquireTime=MICRO,
                                   renewTime="2020-01-01T01:00:00.123456+01:00", leaseTransitions=0), label="l"),
        Call("PUT", LEASES + "/l", lambda ctx: {**ctx["l"], "metadata": {"name": "l"}}),
        Call("PUT", LEASES + "/l", lambda ctx: {**ctx["l"], "metadata": {**ctx["l"]["metadata"], "resourceVersion": "1"}}),
        Call("PUT", LEASES + "/l", lambda ctx: {**ctx["l"], "spec": {**ctx["l"]["spec"], "holderIdentity": "b",
                                                                     "leaseTransitions": 1}}),
        Call("PUT", LEASES + "/m", lease("m", holderIdentity="b")),
        Call("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                              "metadata": {"name": "g", "generation": 7}, "spec": {}}),
    )),
    Case("leases: what a Lease refuses", (
        Call("POST", LEASES, lease(holderIdentity="a", leaseDurationSeconds=0, leaseTransitions=-1)),
        Call("POST", LEASES, lease("t", acquireTime=T0)),
        Call("POST", LEASES, lease("u", renewTime="2020-01-01 00:00:00")),
    )),
    Case("leases: the coordinated leader election fields", (
        Call("POST", LEASES, lease(strategy="OldestEmulationVersion", preferredHolder="x")),
    )),
    Case("leases: apply", (
        Call("PATCH", LEASES + "/l", lease(holderIdentity="a"), ctype=APPLY, manager="elector"),
        Call("PATCH", LEASES + "/l", lease(holderIdentity="b"), ctype=APPLY, manager="thief"),
    )),
    Case("namespaces: create, names and the protected ones", (
        Call("POST", NAMESPACES, {"metadata": {"name": "{ns}-x", "labels": {"a": "b"}}}),
        Call("POST", NAMESPACES, {"metadata": {"name": "Bad_NS"}}),
        Call("POST", NAMESPACES, {"metadata": {"name": "{ns}-y.z"}}),
        Call("DELETE", NAMESPACES + "/default"),
        Call("DELETE", NAMESPACES + "/kube-system"),
        Call("POST", "/apis/coordination.k8s.io/v1/namespaces/{ns}-none/leases", lease()),
        Call("DELETE", OTHER),
    ), extra_namespaces=("x",)),
    Case("namespaces: a Terminating namespace refuses new content and tells what holds it", (
        Call("POST", NAMESPACES, {"metadata": {"name": "{ns}-x"}}, show=code),
        Call("POST", OTHER_JOBS, job(meta={"finalizers": ["example.com/hold"]}), show=code),
        Call("POST", OTHER_LEASES, lease(holderIdentity="x"), show=code),
        Call("DELETE", OTHER, show=phase),  # the namespace controller's conditions race what follows
        Call("GET", OTHER, show=phase),
        Call("POST", OTHER_LEASES, lease("new")),
        Call("POST", OTHER_JOBS, {**job("new"), "spec": {"template": {"spec": {"containers": [CONTAINER]}}}}),
        Call("DELETE", OTHER, show=phase),
        # kube-controller-manager's namespace controller comes back every few seconds (and, with a
        # loaded machine and the namespaces of a whole test run to go through, after a minute)
        Poll(OTHER, until=lambda r: len((r.body.get("status") or {}).get("conditions") or []) >= 5,
             show=conditions, timeout=150),
        Poll(OTHER_LEASES + "/l", until=lambda r: r.status == 404, show=code),
        # its going, once the controller is back (seconds later upstream), "finalize" shows
        Call("PATCH", OTHER_JOBS + "/j", {"metadata": {"finalizers": None}}, ctype=MERGE, show=code),
    ), extra_namespaces=("x",), seconds=6),
    Case("namespaces: finalize", (
        Call("POST", NAMESPACES, {"metadata": {"name": "{ns}-x"}}, label="x", show=code),
        Call("PUT", OTHER + "/finalize", lambda ctx: {**ctx["x"], "spec": {"finalizers": ["example.com/x"]}}),
        Call("PUT", OTHER + "/finalize", lambda ctx: {**ctx["x"], "spec": {"finalizers": ["Bad Finalizer"]}}),
        Call("DELETE", OTHER, show=conditions),
        # with no finalizer left of either kind, the deleted namespace goes
        Call("PUT", OTHER + "/finalize", lambda ctx: {**ctx["x"], "metadata": {"name": ctx["x"]["metadata"]["name"]},
                                                      "spec": {"finalizers": []}}, show=code),
        Poll(OTHER, until=lambda r: r.status == 404, show=code),
    ), extra_namespaces=("x",)),
]


@pytest.mark.timeout(240)  # a namespace's deletion waits for kube-controller-manager (up to 150 s, above)
@pytest.mark.parametrize("case", params(CASES))
def test_lifecycle(case: Case, differential: Callable[[Case], None]) -> None:
    differential(case)
