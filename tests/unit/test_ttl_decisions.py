"""Tier 1: the TTL-after-finished decisions (KEP-592) as tables over pure functions."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from workflows.decisions import ttl as decide
from workflows.execute import Call, Wait, execute
from workflows.models.common import Job, Pod
from workflows.models.ttl import DeleteExpiredResult, TTLObservation, delete_expired, time_left
from workflows.times import NEVER

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)


def make_job(*, ttl: int | None = 10, conditions: list[dict[str, Any]] | None = None,
             deleting: bool = False, managed_by: str | None = None, annotations: dict[str, str] | None = None) -> Job:
    raw: dict[str, Any] = {
        "metadata": {"name": "etl", "namespace": "team-a", "uid": "u1", "resourceVersion": "7",
                     "annotations": annotations or {}},
        "spec": {"ttlSecondsAfterFinished": ttl, "managedBy": managed_by},
        "status": {"conditions": conditions or []},
    }
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-11-22T09:00:00Z"
    return Job.model_validate(raw)


def cond(type_: str, status: str = "True", at: datetime | None = NOW) -> dict[str, Any]:
    return {"type": type_, "status": status, "lastTransitionTime": at.isoformat() if at else None}


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


NEEDS_CLEANUP = [
    ("complete job with ttl", make_job(conditions=[cond("Complete")]), True),
    ("failed job with ttl", make_job(conditions=[cond("Failed")]), True),
    ("running job", make_job(conditions=[]), False),
    ("no ttl", make_job(ttl=None, conditions=[cond("Complete")]), False),
    ("being deleted", make_job(conditions=[cond("Complete")], deleting=True), False),  # TTL-4
    ("FailureTarget is not finished", make_job(conditions=[cond("FailureTarget")]), False),  # TTL-2
    ("SuccessCriteriaMet is not finished", make_job(conditions=[cond("SuccessCriteriaMet")]), False),  # TTL-2
    ("Complete=False is not finished", make_job(conditions=[cond("Complete", "False")]), False),  # TTL-2
    ("Suspended is not finished", make_job(conditions=[cond("Suspended")]), False),
]


@pytest.mark.parametrize("job,expected", [r[1:] for r in NEEDS_CLEANUP], ids=[r[0] for r in NEEDS_CLEANUP])
def test_needs_cleanup(job: Job, expected: bool) -> None:
    assert TTLObservation.of_job(job).needs_cleanup() is expected


TIME_LEFT = [
    # name, conditions, ttl, expected remaining (s)
    ("Job completed 10s ago, 15s TTL", [cond("Complete", at=ago(10))], 15, 5.0),
    ("Job failed 10s ago, 15s TTL", [cond("Failed", at=ago(10))], 15, 5.0),
    ("Job completed 10s ago, 10s TTL: expires now", [cond("Complete", at=ago(10))], 10, 0.0),
    ("Job completed 20s ago, 10s TTL: expired 10s ago", [cond("Complete", at=ago(20))], 10, -10.0),
    ("TTL 0 expires at the finish time", [cond("Complete", at=ago(3))], 0, -3.0),  # TTL-9
    ("huge TTL (int32 max) stays far in the future", [cond("Complete", at=NOW)], 2**31 - 1, float(2**31 - 1)),
    ("clock skew: finished 30s in the future", [cond("Complete", at=NOW + timedelta(seconds=30))], 10, 40.0),  # TTL-8
    ("first finished condition wins", [cond("FailureTarget", at=ago(99)), cond("Failed", at=ago(4)),
                                       cond("Complete", at=ago(50))], 10, 6.0),  # TTL-3
]


@pytest.mark.parametrize("conditions,ttl,remaining", [r[1:] for r in TIME_LEFT], ids=[r[0] for r in TIME_LEFT])
def test_time_left(conditions: list[dict[str, Any]], ttl: int, remaining: float) -> None:
    left = time_left(TTLObservation.of_job(make_job(ttl=ttl, conditions=conditions)), NOW)
    assert left is not None
    assert left.remaining.total_seconds() == remaining
    assert left.expired is (remaining <= 0)
    assert left.expire_at == NOW + timedelta(seconds=remaining)


def test_clock_skew_is_flagged_so_the_workflow_can_warn() -> None:  # TTL-8
    job = make_job(conditions=[cond("Complete", at=NOW + timedelta(seconds=1))])
    left = time_left(TTLObservation.of_job(job), NOW)
    assert left is not None and left.finish_in_future and not left.expired


def test_finished_without_transition_time_has_no_expiry() -> None:  # TTL-5
    assert time_left(TTLObservation.of_job(make_job(conditions=[cond("Complete", at=None)])), NOW) is None


@pytest.mark.parametrize("bad", [make_job(ttl=None, conditions=[cond("Complete")]), make_job(conditions=[])],
                         ids=["no ttl", "not finished"])
def test_time_left_refuses_objects_that_need_no_cleanup(bad: Job) -> None:
    with pytest.raises(ValueError):
        time_left(TTLObservation.of_job(bad), NOW)


def test_time_left_refuses_a_naive_now() -> None:
    with pytest.raises(ValueError):
        time_left(TTLObservation.of_job(make_job(conditions=[cond("Complete")])), NOW.replace(tzinfo=None))


def make_pod(*, label: str | None = "30", phase: str = "Succeeded", restart: str | None = "Never",
             finished: list[datetime | None] | None = None, owner_kind: str | None = None) -> Pod:
    raw: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "pu", "labels": {}},
        "spec": {"restartPolicy": restart},
        "status": {"phase": phase, "containerStatuses": [
            {"name": f"c{i}", "state": {"terminated": {"exitCode": 0, "finishedAt": t.isoformat() if t else None}}}
            for i, t in enumerate(finished if finished is not None else [ago(5)])
        ]},
    }
    if label is not None:
        raw["metadata"]["labels"]["batchd.io/ttl-seconds-after-finished"] = label
    if owner_kind:
        raw["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": owner_kind, "name": "o",
                                               "uid": "ou", "controller": True}]
    return Pod.model_validate(raw)


POD_CASES = [
    # name, pod, needs cleanup, remaining (s) or None, problem expected
    ("succeeded pod, 30s TTL, finished 5s ago", make_pod(), True, 25.0, False),
    ("failed pod counts as finished", make_pod(phase="Failed"), True, 25.0, False),
    ("running pod waits", make_pod(phase="Running", finished=[]), False, None, False),
    ("latest container finish wins", make_pod(finished=[ago(50), ago(5), ago(20)]), True, 25.0, False),
    ("OnFailure pods qualify", make_pod(restart="OnFailure"), True, 25.0, False),
    ("restartPolicy Always is refused with a reason", make_pod(restart="Always"), False, None, True),
    ("Pods owned by a Job are the Job's business", make_pod(owner_kind="Job"), False, None, True),
    ("Pods owned by a ReplicaSet still qualify", make_pod(owner_kind="ReplicaSet"), True, 25.0, False),
    ("non-numeric label is refused with a reason", make_pod(label="soon"), False, None, True),
    ("negative label is refused with a reason", make_pod(label="-5"), False, None, True),
    ("unlabelled pod is ignored", make_pod(label=None), False, None, False),
]


@pytest.mark.parametrize("pod,needs,remaining,problem", [r[1:] for r in POD_CASES], ids=[r[0] for r in POD_CASES])
def test_pod_ttl(pod: Pod, needs: bool, remaining: float | None, problem: bool) -> None:
    obs = TTLObservation.of_pod(pod)
    assert obs.needs_cleanup() is needs
    assert (obs.problem is not None) is problem
    if remaining is not None:
        left = time_left(obs, NOW)
        assert left is not None and left.remaining.total_seconds() == remaining


def test_terminal_pod_without_finish_times_has_no_expiry() -> None:
    assert time_left(TTLObservation.of_pod(make_pod(finished=[None])), NOW) is None


SUCCESS, FAILURE = "batchd.io/ttl-seconds-after-success", "batchd.io/ttl-seconds-after-failure"
BY_OUTCOME = [
    # name, spec TTL, annotations, condition, TTL in force, held (FAIL-CLOSED)
    ("success annotation overrides the spec on success", 600, {SUCCESS: "5"}, "Complete", 5, False),
    ("success annotation leaves a failure to the spec", 600, {SUCCESS: "5"}, "Failed", 600, False),
    ("failure annotation overrides the spec on failure", 60, {FAILURE: "86400"}, "Failed", 86400, False),
    ("an annotation applies when the spec has none", None, {FAILURE: "30"}, "Failed", 30, False),
    ("no TTL for the other outcome when the spec has none", None, {FAILURE: "30"}, "Complete", None, False),
    ("both annotations, success", None, {SUCCESS: "0", FAILURE: "9"}, "Complete", 0, False),
    ("both annotations, failure", None, {SUCCESS: "0", FAILURE: "9"}, "Failed", 9, False),
    ("a bad value holds the Job, whatever TTL is in force", 600, {SUCCESS: "1h"}, "Complete", 600, True),
    ("a bad value for the other outcome holds it too", 600, {FAILURE: "-1"}, "Complete", 600, True),
    ("a value beyond int64 holds it", None, {SUCCESS: "9" * 30}, "Complete", None, True),
    ("a value beyond datetime's range is total: never", None, {SUCCESS: str(2**63 - 1)}, "Complete", 2**63 - 1,
     False),
]


@pytest.mark.parametrize("spec_ttl,annotations,condition,ttl,held", [r[1:] for r in BY_OUTCOME],
                         ids=[r[0] for r in BY_OUTCOME])
def test_ttl_by_outcome(spec_ttl: int | None, annotations: dict[str, str], condition: str, ttl: int | None,
                        held: bool) -> None:  # TTL-OUTCOME
    obs = TTLObservation.of_job(make_job(ttl=spec_ttl, conditions=[cond(condition)], annotations=annotations))
    assert obs.ttl_seconds == ttl
    assert obs.problem is None and obs.held is held and (obs.held_by is not None) is held
    assert obs.needs_cleanup() is (ttl is not None)
    event = obs.not_applied()
    assert (event is not None and event.reason == "InvalidAnnotation" and "is held" in event.message) is held
    if ttl is not None and not held:
        left = time_left(obs, NOW)
        assert left is not None
        assert left.remaining == (None if ttl == 2**63 - 1 else timedelta(seconds=ttl))


def test_a_running_job_with_per_outcome_annotations_keeps_its_spec_ttl_until_it_finishes() -> None:
    obs = TTLObservation.of_job(make_job(ttl=600, annotations={SUCCESS: "5", FAILURE: "50"}))
    assert obs.ttl_seconds == 600 and not obs.needs_cleanup()


@pytest.mark.parametrize("annotations,hold", [
    ({}, None), ({"batchd.io/ttl-hold": "debugging INC-1"}, "debugging INC-1"), ({"batchd.io/ttl-hold": ""}, ""),
], ids=["not held", "held with a reason", "an empty reason holds too"])
def test_hold_is_read_from_the_annotation_on_jobs_and_pods(annotations: dict[str, str], hold: str | None) -> None:
    job = TTLObservation.of_job(make_job(conditions=[cond("Complete")], annotations=annotations))
    raw = make_pod().model_dump(by_alias=True)
    raw["metadata"]["annotations"] = annotations
    pod = TTLObservation.of_pod(Pod.model_validate(raw))
    for obs in (job, pod):
        assert obs.hold == hold and obs.held is (hold is not None)
        assert obs.needs_cleanup()  # a hold keeps the workflow (and its timer), it only stops the delete


class World:
    """The fake side of a TTL pass: the object as the fresh read and the delete find it."""

    def __init__(self, fresh: TTLObservation, *, deletable: bool = True) -> None:
        self.fresh, self.deletable = fresh, deletable
        self.steps: list[str] = []

    async def perform(self, step: Any) -> Any:
        if isinstance(step, Call) and step.activity is delete_expired:
            self.steps.append("delete" if self.deletable else "delete refused")
            if self.deletable:
                return DeleteExpiredResult(deleted=True, observation=self.fresh, expire_at=NOW, deleted_at=NOW)
            return DeleteExpiredResult(deleted=False, observation=self.fresh)
        if isinstance(step, Call):
            self.steps.append("read")
            return self.fresh
        if isinstance(step, Wait):
            self.steps.append(f"wait {step.timeout.total_seconds():g}s" if step.timeout else "wait")
            return True
        if isinstance(step, decide.ShowExpiry):
            self.steps.append("unshow" if step.expire_at is None else f"show {step.expire_at:%H:%M:%S}")
        return None


def finished(ttl: int | None, ago_s: float, **annotations: str) -> TTLObservation:
    return TTLObservation.of_job(make_job(ttl=ttl, conditions=[cond("Complete", at=ago(ago_s))],
                                          annotations=annotations))


PASSES = [
    # name, observation, the fresh read, (can delete), steps, outcome (None: decide again)
    ("expiring: a timer to the expiry", finished(60, 10), None, True, ["show 10:00:50", "wait 50s"], None),
    ("expired: deleted", finished(10, 20), None, True, ["show 09:59:50", "delete"], "deleted"),
    ("expired, but the fresh copy's TTL was raised: decide again", finished(10, 20), finished(600, 20), False,
     ["show 09:59:50", "delete refused"], None),
    ("expired, the fresh copy has no TTL any more", finished(10, 20), finished(None, 20), False,
     ["show 09:59:50", "delete refused"], "not_needed"),
    ("expired and held: no timer, a wait for the hold to go", finished(10, 20, **{"batchd.io/ttl-hold": "audit"}),
     None, True, ["show 09:59:50", "wait"], None),
    ("a signal says no TTL: a fresh read confirms it", finished(None, 20), finished(None, 20), True,
     ["read", "unshow"], "not_needed"),
    ("a stale signal says no TTL: the fresh read still needs cleanup", finished(None, 20), finished(10, 20), True,
     ["read"], None),
]


@pytest.mark.parametrize(("obs", "fresh", "deletable", "steps", "outcome"), [r[1:] for r in PASSES],
                         ids=[r[0] for r in PASSES])
def test_a_pass(obs: TTLObservation, fresh: TTLObservation | None, deletable: bool, steps: list[str],
                outcome: str | None) -> None:
    """One pass of the workflow's own ``process_ttl`` on the executor, against a fake side."""
    world = World(fresh or obs, deletable=deletable)
    books = decide.Books(obs, NEVER if "unshow" in steps else None)
    result = asyncio.run(execute(decide.process_ttl(books, lambda: NOW), world))
    assert world.steps == steps
    assert (result.outcome if result else None) == outcome
