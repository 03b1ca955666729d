"""Tier-1 tables for the Job snapshot's claim of Pods (JOB-25, JOB-26; upstream ``ClaimObject``).

``claim_pod`` decides per Pod what the ``observe_job`` activity makes of it; what becomes of the
Pods that stopped matching is :func:`workflows.decisions.job.release_unmatched_pods` (tests/unit/test_job_decisions.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from activities.job import JobCopies, JobPodIndex, claim_pod, selector_matches
from kube.errors import Unreachable
from workflows.models.job import (
    CONTROLLER_UID_LABEL,
    JOB_TRACKING_FINALIZER,
    POD_JOB_LABEL,
    TRACKING_LABEL,
)

JOB = "job-uid"


def pod_(owner: str | None = None, *, controller: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "uid": "pod-uid"}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner, "controller": controller}]
    if deleting:
        meta["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("pod", "job_deleting", "matches", "verdict"),
    [
        (pod_(JOB), False, True, "claimed"),
        (pod_(JOB, deleting=True), False, True, "claimed"),
        (pod_(JOB), False, False, "unmatched"),
        (pod_(JOB), True, False, "unmatched"),
        (pod_("other"), False, True, "ignore"),
        (pod_("other"), False, False, "ignore"),
        (pod_(), False, True, "adopt"),
        (pod_(JOB, controller=False), False, True, "adopt"),
        (pod_(), True, True, "ignore"),
        (pod_(), False, False, "ignore"),
        (pod_(deleting=True), False, True, "ignore"),
    ],
    ids=["own and matching", "own and being deleted: still claimed", "own, labels changed: release",
         "own, labels changed, job being deleted: set apart too", "another controller's", "another's, not matching",
         "orphan that matches: adopt", "owner but not controller: an orphan", "orphan, job being deleted",
         "orphan that does not match", "orphan being deleted"],
)
def test_claim_pod(pod: dict[str, Any], job_deleting: bool, matches: bool, verdict: str) -> None:
    assert claim_pod(pod, job_uid=JOB, job_deleting=job_deleting, matches=matches) == verdict


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({"matchLabels": {"app": "a"}}, {"app": "a", "x": "y"}, True),
        ({"matchLabels": {"app": "a"}}, {"app": "debug"}, False),
        ({"matchLabels": {"app": "a"}}, {}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["1", "2"]}]}, {"tier": "2"}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["1"]}]}, {"tier": "1"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": "x"}, False),
        ({"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]},
         {"app": "a"}, True),
        ({}, {"app": "a"}, False),
        (None, {"app": "a"}, False),
    ],
    ids=["matchLabels", "relabeled", "label removed", "In", "In, key missing", "NotIn, key missing",
         "NotIn, listed", "Exists", "Exists, missing", "DoesNotExist, present", "both kinds", "empty selector",
         "no selector"],
)
def test_selector_matches(selector: dict[str, Any] | None, labels: dict[str, str], matches: bool) -> None:
    assert selector_matches(selector, labels) == matches


# --- the worker's index of the Pods batchd made (JOB-93) ------------------------------------


class _Watch:
    """An informer stand-in: its resourceVersion is what the test sets."""

    def __init__(self, namespace: str | None, rv: int = 0) -> None:
        self.namespace, self.rv = namespace, rv

    def wait_for(self, rv: int, timeout: float) -> bool:
        return self.rv >= rv


def job_pod(name: str, *, owner: str | None = "job-uid", phase: str = "Running", holding: bool = True,
            released: bool = False, ns: str = "ns", rv: int = 1) -> dict[str, Any]:
    labels = {POD_JOB_LABEL: "true", CONTROLLER_UID_LABEL: "job-uid", **({TRACKING_LABEL: "released"} if released else {})}
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"u-{name}", "resourceVersion": str(rv),
                            "labels": labels, "finalizers": [JOB_TRACKING_FINALIZER] if holding else []}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": "job", "uid": owner, "controller": True}]
    return {"kind": "Pod", "metadata": meta, "status": {"phase": phase}}


def test_the_index_holds_each_jobs_pods_in_play_and_drops_the_counted_and_the_gone() -> None:
    index = JobPodIndex()
    index.watch(_Watch("ns", rv=9))
    for p in (job_pod("a"), job_pod("b", phase="Succeeded"), job_pod("c", owner="other"), job_pod("o", owner=None),
              job_pod("x", ns="elsewhere", owner=None)):
        index.handle("ADDED", p)
    read = index.read("ns", "job-uid", 9)
    assert read is not None
    owned, orphans, rv = read
    assert sorted(c.info.name for c in owned) == ["a", "b"] and [c.info.name for c in orphans] == ["o"] and rv == 9
    index.handle("MODIFIED", job_pod("b", phase="Succeeded", holding=False, released=True))  # JOB-91: counted
    index.handle("DELETED", job_pod("a", phase="Failed", holding=False))  # gone for good
    index.handle("MODIFIED", job_pod("c"))  # now the Job's: it moves between owners
    assert sorted(c.info.name for c in index.read("ns", "job-uid", 9)[0]) == ["c"]  # type: ignore[index]
    assert index.read("other-ns", "job-uid", 0) is None  # no watch there: the activity LISTs


def test_a_pod_that_leaves_the_watch_holding_the_finalizer_is_kept_as_left() -> None:  # JOB-26, JOB-93
    index = JobPodIndex()
    index.watch(_Watch(None, rv=5))
    index.handle("DELETED", job_pod("a"))  # its batchd label removed: the watch says DELETED, the Pod still holds
    owned, _, _ = index.read("ns", "job-uid", 5)  # type: ignore[misc]
    assert [(c.info.name, c.left) for c in owned] == [("a", True)]
    index.forget("u-a")
    assert index.read("ns", "job-uid", 5) == ([], [], 5)


def test_a_read_waits_for_the_watch_to_reach_what_the_workflow_saw_or_did() -> None:  # JOB-93
    index = JobPodIndex()
    assert index.read("ns", "job-uid", 0) is None  # no watch: the activity LISTs
    index.watch(_Watch("ns", rv=7))
    with pytest.raises(Unreachable, match="behind 8"):
        index.read("ns", "job-uid", 8)


class _Gets:
    """A stand-in API client that serves one Job by GET and counts the GETs."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job, self.gets = job, 0

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        return copy.deepcopy(self.job) if self.job["metadata"]["name"] == name else None


def _job(rv: str, uid: str = JOB) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "ns", "uid": uid, "resourceVersion": rv},
            "spec": {"parallelism": 3, "template": {"spec": {"containers": [{"name": "c"}]}}}}


def test_a_kept_copy_of_the_job_stands_in_for_a_get_only_while_nothing_is_newer() -> None:  # JOB-93
    views: dict[str, dict[str, Any]] = {}
    copies = JobCopies(lambda ns, uid: views.get(uid))
    api = _Gets(_job("10"))

    def read(not_before: int = 0) -> dict[str, Any] | None:
        return copies.get(api, "ns", "j", JOB, not_before)  # type: ignore[arg-type]

    assert read() == _job("10") and api.gets == 1  # nothing kept yet
    assert read() == _job("10") and api.gets == 2  # the watch has not seen the Job yet
    views[JOB] = {"metadata": {"resourceVersion": "10"}}
    got = read()
    assert got == _job("10") and api.gets == 2  # the watch is at the copy: no GET
    got["spec"]["parallelism"] = 99  # type: ignore[index]
    assert read() == _job("10")  # a copy handed out is the caller's own
    assert read(not_before=11) == _job("10") and api.gets == 3  # the workflow saw a later one
    api.job = _job("12")
    views[JOB] = {"metadata": {"resourceVersion": "12"}}  # someone changed it
    assert read() == _job("12") and api.gets == 4
    assert read() == _job("12") and api.gets == 4
    api.job = _job("13")
    copies.keep(_job("13"))  # a status write's answer
    views[JOB] = {"metadata": {"resourceVersion": "13"}}
    assert read() == _job("13") and api.gets == 4  # once the watch has it, no GET
    api.job = _job("1", uid="another")  # deleted and made again under the name
    views[JOB] = {"metadata": {"resourceVersion": "14"}}
    assert read()["metadata"]["uid"] == "another" and api.gets == 5  # type: ignore[index]
    assert read() is not None and api.gets == 6  # nothing kept for a uid it is not


def test_the_kept_copies_are_the_most_recently_used_within_a_byte_bound() -> None:
    copies = JobCopies(lambda ns, uid: None)
    big = "x" * (1024 * 1024)  # a Job near etcd's 1.5 MB
    for i in range(JobCopies.LIMIT_BYTES // len(big) + 10):
        job = _job(str(i), uid=f"u{i}")
        job["metadata"]["annotations"] = {"a": big}
        copies.keep(job)
    assert copies._bytes <= JobCopies.LIMIT_BYTES
    assert copies._bytes == sum(len(c[2]) for c in copies._copies.values())
    assert "u0" not in copies._copies and f"u{JobCopies.LIMIT_BYTES // len(big) + 9}" in copies._copies
    copies.forget(next(iter(copies._copies)))
    assert copies._bytes == sum(len(c[2]) for c in copies._copies.values())
