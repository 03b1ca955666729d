"""Server-side apply (managers, ownership, conflicts), dry run, field validation, and the managed
fields that ordinary writes leave."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.differential.harness import APPLY, JSON_PATCH, MERGE, STRATEGIC, Call, Case
from tests.differential.objects import (
    CRONJOBS,
    JOBS,
    LEASES,
    PODS,
    code,
    cronjob,
    job,
    lease,
    params,
    pod,
)

CASES = [
    Case("apply: create, re-apply, and a field given up", (
        Call("PATCH", CRONJOBS + "/cj", cronjob(meta={"labels": {"a": "1", "b": "2"}}, suspend=True), ctype=APPLY,
             manager="alice"),
        Call("PATCH", CRONJOBS + "/cj", cronjob(meta={"labels": {"a": "1"}}, suspend=True), ctype=APPLY,
             manager="alice"),
        Call("PATCH", CRONJOBS + "/cj", cronjob(meta={"labels": {"a": "1"}}), ctype=APPLY, manager="alice"),
    )),
    Case("apply: a conflict, forced, then an update takes a field", (
        Call("PATCH", CRONJOBS + "/cj", cronjob(suspend=True), ctype=APPLY, manager="alice", show=code),
        Call("PATCH", CRONJOBS + "/cj", cronjob(suspend=False, schedule="0 * * * *"), ctype=APPLY, manager="bob"),
        Call("PATCH", CRONJOBS + "/cj", cronjob(suspend=False), ctype=APPLY, manager="bob", query={"force": "true"}),
        Call("PATCH", CRONJOBS + "/cj", {"spec": {"suspend": True}}, ctype=MERGE, manager="carol"),
        Call("PATCH", CRONJOBS + "/cj", cronjob(suspend=False), ctype=APPLY, manager="bob"),
        Call("GET", CRONJOBS + "/cj"),
    )),
    Case("apply: conflicts with two managers", (
        Call("PATCH", LEASES + "/l", lease(holderIdentity="a"), ctype=APPLY, manager="alice", show=code),
        Call("PATCH", LEASES + "/l", lease(leaseDurationSeconds=10), ctype=APPLY, manager="bob", show=code),
        Call("PATCH", LEASES + "/l", lease(holderIdentity="c", leaseDurationSeconds=20), ctype=APPLY,
             manager="carol"),
    )),
    Case("apply: shared ownership of an equal value", (
        Call("PATCH", LEASES + "/l", lease(holderIdentity="a", leaseDurationSeconds=10), ctype=APPLY,
             manager="alice"),
        Call("PATCH", LEASES + "/l", lease(holderIdentity="a"), ctype=APPLY, manager="bob"),
        Call("PATCH", LEASES + "/l", lease(leaseDurationSeconds=10), ctype=APPLY, manager="alice"),
        Call("GET", LEASES + "/l"),
    )),
    Case("apply: lists merged by key", (
        Call("PATCH", PODS + "/p", pod(meta={"labels": {"a": "1"}}), ctype=APPLY, manager="alice"),
        Call("PATCH", PODS + "/p", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
                                                                                   "annotations": {"x": "y"}}},
             ctype=APPLY, manager="bob"),
    ), pods=True),
    Case("apply: what it refuses", (
        Call("PATCH", LEASES + "/l", lease(holderIdentity="a"), ctype=APPLY, manager=None),
        Call("PATCH", LEASES + "/l", {**lease(), "metadata": {"name": "other"}}, ctype=APPLY, manager="alice"),
        Call("PATCH", LEASES + "/l", "- not a map", ctype=APPLY, manager="alice"),
        Call("PATCH", LEASES + "/l/status", lease(holderIdentity="a"), ctype=APPLY, manager="alice"),
    )),
    Case("managed fields: create, update and patch by named managers", (
        Call("POST", JOBS, job(meta={"labels": {"a": "1"}, "annotations": {"n": "1"}}, parallelism=2),
             manager="creator"),
        Call("PATCH", JOBS + "/j", {"metadata": {"labels": {"b": "2"}}, "spec": {"parallelism": 3}}, ctype=MERGE,
             manager="patcher"),
        Call("PATCH", JOBS + "/j", [{"op": "add", "path": "/metadata/annotations/m", "value": "2"}],
             ctype=JSON_PATCH, manager="creator"),
        Call("PATCH", JOBS + "/j", {"metadata": {"finalizers": ["example.com/x"]}}, ctype=STRATEGIC,
             manager="finalizer"),
        Call("PATCH", JOBS + "/j", {"metadata": {"finalizers": None, "labels": {"a": None}}}, ctype=MERGE,
             manager="cleaner"),
    )),
    Case("managed fields: a Pod's lists and atomic fields", (
        Call("POST", PODS, pod(nodeSelector={"disk": "ssd"}, containers=[
            {"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}],
             "ports": [{"containerPort": 80}]}])),
    ), pods=True),
    Case("dry run: nothing is kept", (
        Call("POST", LEASES, lease(holderIdentity="a"), query={"dryRun": "All"}),
        Call("GET", LEASES + "/l"),
        Call("POST", LEASES, lease(holderIdentity="a"), label="l", show=code),
        Call("PUT", LEASES + "/l", lambda ctx: {**ctx["l"], "spec": {"holderIdentity": "b"}},
             query={"dryRun": "All"}),
        Call("PATCH", LEASES + "/l", {"spec": {"holderIdentity": "c"}}, ctype=MERGE, query={"dryRun": "All"}),
        Call("PATCH", LEASES + "/l", lease(holderIdentity="d"), ctype=APPLY, manager="alice",
             query={"dryRun": "All"}),
        Call("DELETE", LEASES + "/l", query={"dryRun": "All"}),
        Call("GET", LEASES + "/l"),
    )),
    Case("dry run: a Job's generated fields and a refused value", (
        Call("POST", JOBS, job(), query={"dryRun": "All"}),
        Call("POST", JOBS, job(), query={"dryRun": "Bad"}),
        Call("POST", JOBS, job(), query={"dryRun": ["All", "Bad"]}),
        Call("DELETE", JOBS + "/j", query={"dryRun": "Bad"}),
    )),
    Case("field validation: Strict, Warn, Ignore and a bad directive", (
        Call("POST", LEASES, {**lease("s", holderIdentity="a"), "extra": 1, "spec": {"holderIdentity": "a", "bogus": 2}},
             query={"fieldValidation": "Strict"}),
        Call("POST", LEASES, {**lease("w", holderIdentity="a"), "extra": 1, "spec": {"holderIdentity": "a", "bogus": 2}},
             query={"fieldValidation": "Warn"}),
        Call("POST", LEASES, {**lease("i"), "extra": 1}, query={"fieldValidation": "Ignore"}),
        Call("POST", LEASES, {**lease("n"), "extra": 1}, query={"fieldValidation": "Nope"}),
        Call("PATCH", LEASES + "/w", {"spec": {"bogus": 3}}, ctype=MERGE, query={"fieldValidation": "Warn"}),
    )),
    Case("field validation: a strict patch", (
        Call("POST", LEASES, lease(holderIdentity="a"), show=code),
        Call("PATCH", LEASES + "/l", {"spec": {"bogus": 3}}, ctype=MERGE, query={"fieldValidation": "Strict"}),
    )),
    Case("field validation: the default", (
        Call("POST", LEASES, {**lease(), "extra": 1}),
    )),
    Case("admission: a ValidatingAdmissionPolicy (CEL)", (
        Call("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "{ns}-no-big-jobs"},
            "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [{
                "apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}]},
                "validations": [{"expression": "object.spec.parallelism <= 10"}]}},
             query={"dryRun": "All"}, show=code),
    )),
    Case("managed fields: a write that names no manager", (
        Call("POST", LEASES, lease(holderIdentity="a"), manager=None),
    )),
]


@pytest.mark.parametrize("case", params(CASES))
def test_apply(case: Case, differential: Callable[[Case], None]) -> None:
    differential(case)
