"""Tier-1 tables for the Job snapshot's claim of Pods (JOB-25, JOB-26; upstream ``ClaimObject``).

``claim_pod`` decides per Pod what the ``observe_job`` activity makes of it; what becomes of the
Pods that stopped matching is :func:`workflows.jobsync.release_unmatched_pods` (tests/unit/test_jobsync.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from activities.job import claim_pod, selector_matches

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
