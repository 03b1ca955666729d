"""The status subresource: what a PUT or PATCH of ``/status`` may change (the status, and
metadata), what it ignores (the spec), the Job status rules, and the main resource ignoring
status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.differential.harness import JSON_PATCH, MERGE, STRATEGIC, Call, Case
from tests.differential.objects import (
    CRONJOBS,
    JOBS,
    LEASES,
    NAMESPACES,
    PODS,
    code,
    cronjob,
    job,
    lease,
    params,
    pod,
)

T0 = "2020-01-01T00:00:00Z"
T1 = "2020-01-01T00:05:00Z"


def with_status(label: str, **status: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The object an earlier step returned, with this status: a PUT of /status."""
    return lambda ctx: {**ctx[label], "status": status}


def patch_status(**status: Any) -> dict[str, Any]:
    return {"status": status}


def causes(reply: Any) -> Any:
    """An error's causes (field, reason, message), or the status written."""
    body = reply.body
    if reply.status >= 400:
        return {"code": reply.status, "causes": (body.get("details") or {}).get("causes"), "message": body.get("message")}
    return {"code": reply.status, "status": body.get("status")}


CASES = [
    Case("status: a Job's zero counters", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("PUT", JOBS + "/j/status", with_status("j", active=0, succeeded=0, failed=0, ready=0, terminating=0,
                                                    uncountedTerminatedPods={})),
        Call("GET", JOBS + "/j/status"),
    )),
    Case("status: a /status write ignores the spec and keeps metadata", (
        Call("POST", JOBS, job(), show=code),
        Call("PATCH", JOBS + "/j/status", {"status": {"active": 2, "ready": 1, "startTime": T0},
                                          "spec": {"parallelism": 5},
                                          "metadata": {"labels": {"seen": "yes"}, "annotations": {"a": "b"}}},
             ctype=MERGE),
        Call("GET", JOBS + "/j"),
    )),
    Case("status: the main resource ignores the status", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("PUT", JOBS + "/j", lambda ctx: {**ctx["j"], "status": {"active": 3},
                                              "spec": {**ctx["j"]["spec"], "parallelism": 3}}),
        Call("PATCH", JOBS + "/j", {"status": {"succeeded": 1}, "metadata": {"labels": {"x": "y"}}}, ctype=MERGE),
    )),
    Case("status: a Job's counters and ready pods", (
        Call("POST", JOBS, job(), show=code),
        Call("PATCH", JOBS + "/j/status", patch_status(active=-1, failed=-2, succeeded=-3, ready=3, terminating=-1),
             ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(active=1, failed=2, startTime=T0), ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(failed=1), ctype=MERGE, show=causes),
    )),
    Case("status: finishing a Job", (
        Call("POST", JOBS, job(), show=code),
        Call("PATCH", JOBS + "/j/status", patch_status(conditions=[{"type": "Complete", "status": "True"}]),
             ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(startTime=T0, active=1), ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(
            active=0, succeeded=1, completionTime=T1, conditions=[
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": T1},
                {"type": "Complete", "status": "True", "lastTransitionTime": T1}]), ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(conditions=[{"type": "Failed", "status": "True"}]),
             ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(completionTime=T0), ctype=MERGE, show=causes),
    )),
    Case("status: failing a Job", (
        Call("POST", JOBS, job(), show=code),
        Call("PATCH", JOBS + "/j/status", patch_status(startTime=T0, conditions=[
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]), ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(startTime=T0, conditions=[
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "m"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "m"}]),
             ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(conditions=[
            {"type": "FailureTarget", "status": "False"}]), ctype=MERGE, show=causes),
    )),
    Case("status: indexes of an Indexed Job", (
        Call("POST", JOBS, job(completions=3, parallelism=3, completionMode="Indexed", backoffLimitPerIndex=1),
             show=code),
        Call("PATCH", JOBS + "/j/status", patch_status(completedIndexes="0,5", failedIndexes="1-0"),
             ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(completedIndexes="0-1", failedIndexes="1"),
             ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(completedIndexes="0,2", failedIndexes="1", succeeded=2,
                                                       failed=1), ctype=MERGE, show=causes),
    )),
    Case("status: uncounted pods", (
        Call("POST", JOBS, job(), show=code),
        Call("PATCH", JOBS + "/j/status", patch_status(uncountedTerminatedPods={"succeeded": ["a", "a"],
                                                                                "failed": [""]}),
             ctype=MERGE, show=causes),
        Call("PATCH", JOBS + "/j/status", patch_status(uncountedTerminatedPods={"succeeded": ["a"]}),
             ctype=MERGE, show=causes),
    )),
    Case("status: a CronJob's status", (
        Call("POST", CRONJOBS, cronjob(), show=code),
        Call("PATCH", CRONJOBS + "/cj/status", {
            "status": {"lastScheduleTime": T0, "lastSuccessfulTime": T1,
                       "active": [{"kind": "Job", "name": "x", "namespace": "{ns}", "apiVersion": "batch/v1"}]},
            "spec": {"suspend": True}}, ctype=MERGE),
        Call("PATCH", CRONJOBS + "/cj/status", [{"op": "replace", "path": "/status/active", "value": []}],
             ctype=JSON_PATCH),
        Call("GET", CRONJOBS + "/cj"),
    )),
    Case("status: a Pod's status", (
        Call("POST", PODS, pod(), show=code),
        Call("PATCH", PODS + "/p/status", {"status": {"phase": "Running", "message": "m", "podIP": "10.1.2.3"},
                                          "spec": {"nodeName": "elsewhere"},
                                          "metadata": {"labels": {"seen": "yes"}}}, ctype=MERGE),
        Call("PATCH", PODS + "/p/status", {"status": {"phase": "Failed"}}, ctype=MERGE, show=causes),
        Call("PATCH", PODS + "/p/status", {"status": {"phase": "Running"}}, ctype=MERGE, show=causes),
        Call("PATCH", PODS + "/p/status", {"status": {"conditions": [
            {"type": "example.com/Checked", "status": "True", "lastTransitionTime": T0}]}}, ctype=STRATEGIC,
             show=causes),
    ), pods=True),
    Case("status: a Pod's owner references do not change through /status", (
        Call("POST", JOBS, job(), label="j", show=code),
        Call("POST", PODS, pod(), show=code),
        Call("PATCH", PODS + "/p/status", lambda ctx: {"metadata": {"ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": ctx["j"]["metadata"]["uid"]}]}},
             ctype=MERGE, show=lambda r: r.body["metadata"].get("ownerReferences")),
    ), pods=True),
    Case("status: kinds without a status subresource", (
        Call("POST", LEASES, lease(holderIdentity="a"), show=code),
        Call("GET", LEASES + "/l/status"),
        Call("PATCH", LEASES + "/l/status", {"spec": {"holderIdentity": "b"}}, ctype=MERGE),
        Call("GET", JOBS + "/nope/status"),
    )),
    Case("status: a namespace's status", (
        Call("PATCH", NAMESPACES + "/{ns}/status", {"status": {"phase": "Terminating"}, "spec": {"finalizers": []}},
             ctype=MERGE),
        Call("PATCH", NAMESPACES + "/{ns}/status", {"status": {"phase": "Active"}}, ctype=MERGE),
    )),
]


@pytest.mark.parametrize("case", params(CASES))
def test_status(case: Case, differential: Callable[[Case], None]) -> None:
    differential(case)
