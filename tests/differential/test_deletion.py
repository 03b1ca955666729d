"""Deletion: finalizers and ``deletionTimestamp``, preconditions, grace periods, and propagation
(Foreground, Background, Orphan) carried out by the garbage collector: kube-controller-manager's
on the control plane, kubesim's own."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.differential.harness import MERGE, STRATEGIC, Call, Case, Pause, Poll, Ref
from tests.differential.objects import JOBS, PODS, code, deletion, gone, job, owned_by, params, pod

HOLD = "example.com/hold"


def deleting(reply: object) -> bool:
    return bool(getattr(reply, "body", {}).get("metadata", {}).get("deletionTimestamp"))


def unowned(reply: object) -> bool:
    return not getattr(reply, "body", {}).get("metadata", {}).get("ownerReferences")


#: An orphaning delete orphans the dependents the garbage collector's graph holds; one it has not
#: yet seen (its informer behind, on a loaded machine) is found later with its owner gone, and
#: deleted as garbage. Both sides get the time to see the Pod first.
SEEN = Pause(3.0, "the garbage collector sees the Pod")

CASES = [
    Case("finalizers: a deleted object waits for its finalizers", (
        Call("POST", JOBS, job(meta={"finalizers": [HOLD]}), show=code),
        Call("DELETE", JOBS + "/j", query={"propagationPolicy": "Background"}),
        Call("GET", JOBS + "/j"),
        Call("PATCH", JOBS + "/j", {"metadata": {"labels": {"still": "writable"}}}, ctype=MERGE),
        Call("PATCH", JOBS + "/j", {"metadata": {"finalizers": [HOLD, "example.com/more"]}}, ctype=MERGE),
        Call("DELETE", JOBS + "/j", query={"propagationPolicy": "Background"}),
        Call("PATCH", JOBS + "/j", {"metadata": {"finalizers": None}}, ctype=MERGE),
        Call("GET", JOBS + "/j"),
    )),
    Case("finalizers: what a finalizer may be called", (
        Call("POST", JOBS, job(meta={"finalizers": ["Bad Finalizer", "orphan", "foregroundDeletion"]})),
        Call("POST", JOBS, job("plain", meta={"finalizers": ["nodomain"]}), show=code),
    )),
    Case("delete: preconditions", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("DELETE", JOBS + "/j", {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"},
                                     "propagationPolicy": "Background"}),
        Call("DELETE", JOBS + "/j", {"preconditions": {"resourceVersion": "1"}, "propagationPolicy": "Background"}),
        Call("DELETE", JOBS + "/j", {"preconditions": {"uid": Ref("j", "metadata", "uid"),
                                                       "resourceVersion": Ref("j", "metadata", "resourceVersion")},
                                     "propagationPolicy": "Background"}),
    )),
    Case("delete: options refused before the object is looked up", (
        Call("DELETE", JOBS + "/missing", query={"propagationPolicy": "Sideways"}),
        Call("DELETE", JOBS + "/missing", {"propagationPolicy": "Orphan", "orphanDependents": True}),
        Call("DELETE", JOBS + "/missing", query={"dryRun": "Maybe"}),
        Call("DELETE", JOBS + "/missing"),
    )),
    Case("delete: a Job without a policy orphans, with a warning", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("POST", PODS, pod(meta={"ownerReferences": owned_by("j")}), show=code),
        SEEN,
        Call("DELETE", JOBS + "/j", show=deletion),
        Poll(JOBS + "/j", until=gone, show=code),
        Poll(PODS + "/p", until=unowned, show=deletion),
    ), pods=True),
    Case("delete: Orphan", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("POST", PODS, pod(meta={"ownerReferences": owned_by("j")}), show=code),
        SEEN,
        Call("DELETE", JOBS + "/j", query={"propagationPolicy": "Orphan"}, show=deletion),
        Poll(JOBS + "/j", until=gone, show=code),
        Poll(PODS + "/p", until=unowned, show=deletion),
    ), pods=True),
    Case("delete: Background", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("POST", PODS, pod(meta={"ownerReferences": owned_by("j")}), show=code),
        Call("DELETE", JOBS + "/j", {"propagationPolicy": "Background"}, show=deletion),
        Poll(PODS + "/p", until=gone, show=code),
    ), pods=True),
    Case("delete: Foreground waits for blocking dependents", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("POST", PODS, pod("quick", meta={"ownerReferences": owned_by("j")}), show=code),
        Call("POST", PODS, pod("held", meta={"ownerReferences": owned_by("j"), "finalizers": [HOLD]}), show=code),
        Call("DELETE", JOBS + "/j", query={"propagationPolicy": "Foreground"}, show=deletion),
        Poll(PODS + "/quick", until=gone, show=code),
        Poll(PODS + "/held", until=deleting, show=deletion),
        Call("GET", JOBS + "/j", show=deletion),
        Call("PATCH", PODS + "/held", {"metadata": {"finalizers": None}}, ctype=MERGE, show=deletion),
        Poll(JOBS + "/j", until=gone, show=code),
    ), pods=True),
    Case("delete: a dependent that does not block", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("POST", PODS, pod(meta={"ownerReferences": owned_by("j", block=False), "finalizers": [HOLD]}),
             show=code),
        Call("DELETE", JOBS + "/j", query={"propagationPolicy": "Foreground"}, show=deletion),
        Poll(JOBS + "/j", until=gone, show=code),
        Poll(PODS + "/p", until=deleting, show=deletion),
        Call("PATCH", PODS + "/p", {"metadata": {"finalizers": None}}, ctype=MERGE, show=code),
    ), pods=True),
    Case("delete: a dependent whose owner is gone", (
        Call("POST", PODS, pod(meta={"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                                          "uid": "00000000-0000-0000-0000-000000000001"}]}),
             show=code),
        Poll(PODS + "/p", until=gone, show=code),
    ), pods=True),
    Case("delete: a Pod that never ran goes at once", (
        Call("POST", PODS, pod(), show=code),
        Call("DELETE", PODS + "/p", query={"gracePeriodSeconds": "30"}),
        Call("GET", PODS + "/p"),
        Call("POST", PODS, pod("held", meta={"finalizers": [HOLD]}), show=code),
        Call("DELETE", PODS + "/held", show=deletion),
        Call("DELETE", PODS + "/held", query={"gracePeriodSeconds": "0"}, show=deletion),
        Call("PATCH", PODS + "/held", {"metadata": {"finalizers": None}}, ctype=MERGE, show=deletion),
    ), pods=True),
    Case("delete: a collection", (
        Call("POST", JOBS, job("a", meta={"labels": {"x": "1"}}), show=code),
        Call("POST", JOBS, job("b", meta={"labels": {"x": "2"}}), show=code),
        Call("DELETE", JOBS, query={"labelSelector": "x=1", "propagationPolicy": "Background"},
             show=lambda r: [i["metadata"]["name"] for i in r.body.get("items", [])] if r.status == 200 else r.body),
        Poll(JOBS + "/a", until=gone, show=code),
        Call("GET", JOBS, show=lambda r: [i["metadata"]["name"] for i in r.body["items"]]),
    )),
    Case("delete: owner references that are not valid", (
        Call("POST", PODS, pod(meta={"ownerReferences": [
            {"apiVersion": "", "kind": "", "name": "", "uid": ""},
            {"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "batch/v1", "kind": "Job", "name": "b", "uid": "2", "controller": True}]})),
    ), pods=True),
    Case("delete: strategic merge of owner references", (
        Call("POST", JOBS, job("a"), label="a", show=code),
        Call("POST", JOBS, job("b"), label="b", show=code),
        Call("POST", PODS, pod(meta={"ownerReferences": owned_by("a", block=False)}), show=code),
        Call("PATCH", PODS + "/p", lambda ctx: {"metadata": {"ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "b", "uid": ctx["b"]["metadata"]["uid"]}]}},
             ctype=STRATEGIC, show=deletion),
    ), pods=True),
]


@pytest.mark.parametrize("case", params(CASES))
def test_deletion(case: Case, differential: Callable[[Case], None]) -> None:
    differential(case)
