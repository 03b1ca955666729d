"""Label and field selectors on list, their parse errors, and pagination."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.differential.harness import Call, Case, Ref, Reply
from tests.differential.objects import (
    EVENTS,
    JOBS,
    LEASES,
    NAMESPACES,
    PODS,
    code,
    job,
    lease,
    names,
    params,
    pod,
)

THREE_LEASES = (
    Call("POST", LEASES, lease("a", meta={"labels": {"app": "x", "tier": "1"}}, holderIdentity="h1"), show=code),
    Call("POST", LEASES, lease("b", meta={"labels": {"app": "y"}}, holderIdentity="h2"), show=code),
    Call("POST", LEASES, lease("c", meta={"labels": {"tier": "2", "example.com/app": "1"}}), show=code),
)


def labels(*selectors: str) -> tuple[Call, ...]:
    return tuple(Call("GET", LEASES, query={"labelSelector": s}, show=names) for s in selectors)


def fields(path: str, *selectors: str) -> tuple[Call, ...]:
    return tuple(Call("GET", path, query={"fieldSelector": s}, show=names) for s in selectors)


def page(reply: Reply) -> Any:
    if reply.status != 200:
        return reply.body
    return {"names": names(reply), "metadata": reply.body["metadata"]}


CASES = [
    Case("labels: equality, sets and existence", THREE_LEASES + labels(
        "app=x", "app==y", "app!=x", "app in (x,y)", "app notin (x)", "tier", "!tier", "app=x,tier=1",
        "tier in (1, 2)", "example.com/app=1", "!app,tier", "app=", "app!=", " app = x ")),
    Case("labels: what does not parse", THREE_LEASES + labels(
        "app in ()", "=x", "app=x=y", "a b", "app in (x", "Bad$key=1", "app=" + "v" * 70, "app=x,", "app in x",
        "app >", "app gt 1", "app lt x", "(app)", "app,,tier", "app=a b")),
    Case("fields: metadata on any kind", THREE_LEASES + fields(
        LEASES, "metadata.name=a", "metadata.name!=a", "metadata.namespace={ns}", "metadata.name==b",
        "metadata.name=a,metadata.name=b", "metadata.name=a,metadata.namespace!=x")),
    Case("fields: what a kind does not select on", THREE_LEASES + fields(
        LEASES, "spec.holderIdentity=h1", "metadata.uid=x", "bogus", "metadata.name", "=a", "metadata.name=a=b")
        + fields(JOBS, "spec.parallelism=1", "metadata.labels.x=y")
        + fields(PODS, "metadata.labels.x=y", "spec.containers=x")),
    Case("fields: a Pod's", (Call("POST", PODS, pod(), show=code),) + fields(
        PODS, "spec.nodeName=", "spec.nodeName!=", "status.phase=Pending", "spec.restartPolicy=Always",
        "spec.schedulerName=default-scheduler", "spec.serviceAccountName=default", "status.podIP=",
        "spec.hostNetwork=false", "status.nominatedNodeName=", "status.phase!=Running,spec.nodeName="), pods=True),
    Case("fields: a Job's", (Call("POST", JOBS, job(), show=code),) + fields(
        JOBS, "status.successful=0", "status.successful!=0", "status.successful=1")),
    Case("fields: an Event's", (
        Call("POST", EVENTS, {"metadata": {"name": "e"}, "involvedObject": {"kind": "Job", "name": "j",
                                                                             "namespace": "{ns}", "uid": "u"},
                              "reason": "Started", "type": "Normal", "source": {"component": "c"}},
             show=code),
    ) + fields(EVENTS, "involvedObject.kind=Job", "involvedObject.name=j", "involvedObject.uid=u", "reason=Started",
               "type=Normal", "source=c", "involvedObject.namespace={ns}", "reportingComponent=",
               "involvedObject.fieldPath=", "involvedObject.resourceVersion=", "message=x")),
    Case("fields: a namespace's", fields(NAMESPACES, "metadata.name={ns}", "status.phase=Active,metadata.name={ns}",
                                         "spec.finalizers=kubernetes")),
    Case("list: pages", THREE_LEASES + (
        Call("GET", LEASES, query={"limit": "2"}, label="first", show=page),
        Call("GET", LEASES, query={"limit": "2", "continue": Ref("first", "metadata", "continue")}, show=page),
        Call("GET", LEASES, query={"limit": "1", "labelSelector": "app"}, show=page),
        Call("GET", LEASES, query={"limit": "-1"}, show=page),
        Call("GET", LEASES, query={"limit": "0"}, show=page),
        Call("GET", LEASES, query={"limit": "x"}),
    )),
    Case("list: a continue token that is not one", (
        Call("GET", LEASES, query={"continue": "garbage"}),
    )),
]


@pytest.mark.parametrize("case", params(CASES))
def test_selectors(case: Case, differential: Callable[[Case], None]) -> None:
    differential(case)
