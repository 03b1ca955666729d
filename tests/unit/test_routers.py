"""Tier 1: the bridge's routers (worker/routers.py) and the pure answers they act on.

Each controller's router turns observed changes into workflow starts and signals; what an object
is for the controller (in scope, finished, still waiting, its problem) comes from the pure models.
The tables below pin those answers and what each router sends for a sequence of events, through
a stand-in Temporal client that records every start and signal. No real clock is read, except by
the poker's test, which bounds how many pokes a second of events makes.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from temporalio.exceptions import WorkflowAlreadyStartedError

from worker.routers import CronJobRouter, JobRouter, TTLRouter, Workflows
from workflows.models.common import (
    INVALID_ANNOTATION,
    Condition,
    Job,
    ObjectRef,
    Pod,
    finished_condition,
)
from workflows.models.cronjob import CronJobObservation, CronJobSpec, CronJobStatus
from workflows.models.job import POD_JOB_LABEL, job_in_scope
from workflows.models.ttl import (
    POD_TTL_LABEL,
    TTL_HOLD_ANNOTATION,
    TTL_NOT_APPLIED,
    TTLObservation,
    still_waiting,
    ttl_in_scope,
)
from workflows.times import NEVER, iso, rfc3339

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
MANAGED = "batchd.io/job-controller"


def at(seconds_from_now: float) -> str:
    return rfc3339(NOW + timedelta(seconds=seconds_from_now))


def make_job(*, ttl: int | None = 60, finished: str | None = "Complete", finished_at: str | None = at(-10),
             managed_by: str | None = MANAGED, rv: str = "1", deleting: bool = False,
             annotations: dict[str, str] | None = None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "etl", "namespace": "team-a", "uid": "u1", "resourceVersion": rv,
                            "generation": 1, "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = at(0)
    if owner:
        meta["ownerReferences"] = [{"kind": owner["kind"], "name": owner["name"], "uid": owner["uid"],
                                    "controller": True}]
    conditions = [] if finished is None else [
        {"type": finished, "status": "True", "lastTransitionTime": finished_at}]
    return {"kind": "Job", "metadata": meta, "spec": {"ttlSecondsAfterFinished": ttl, "managedBy": managed_by},
            "status": {"conditions": conditions}}


def make_pod(*, label: str = "30", owner: str | None = None, restart: str = "Never") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "team-a", "uid": "u3", "resourceVersion": "1",
                            "labels": {POD_TTL_LABEL: label}}
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner, "uid": "u-owner", "controller": True}]
    return {"kind": "Pod", "metadata": meta, "spec": {"restartPolicy": restart}, "status": {
        "phase": "Succeeded", "containerStatuses": [{"name": "c", "state": {"terminated": {"finishedAt": at(-10)}}}]}}


# -- the one "finished" predicate (TTL-2, TTL-3, CJ-48) ----------------------------------------


def c(type_: str, status: str = "True", when: str = "2026-11-22T09:00:00Z") -> Condition:
    return Condition(type=type_, status=status, last_transition_time=when)


FINISHED = [
    ("no conditions", [], None),
    ("Complete=True", [c("Complete")], "Complete"),
    ("Failed=True", [c("Failed")], "Failed"),
    ("interim conditions only announce it", [c("FailureTarget"), c("SuccessCriteriaMet"), c("Suspended")], None),
    ("Complete=False is not finished", [c("Complete", "False")], None),
    ("Failed=Unknown is not finished", [c("Failed", "Unknown")], None),
    ("the first in list order counts", [c("Failed", when="2026-11-22T08:00:00Z"), c("Complete")], "Failed"),
    ("after an interim condition", [c("SuccessCriteriaMet"), c("Complete")], "Complete"),
]


@pytest.mark.parametrize(("conditions", "expected"), [r[1:] for r in FINISHED], ids=[r[0] for r in FINISHED])
def test_finished_condition(conditions: list[Condition], expected: str | None) -> None:
    got = finished_condition(conditions)
    assert (got.type if got else None) == expected
    assert got is None or got is next(x for x in conditions if x.type == expected)  # TTL-3: its time counts


# -- the one time formatter --------------------------------------------------------------------

FORMATS = [
    ("whole seconds", datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC), "2026-11-22T10:00:00Z"),
    ("sub-seconds are truncated, as metav1.Time does", datetime(2026, 11, 22, 10, 0, 0, 999999, tzinfo=UTC),
     "2026-11-22T10:00:00Z"),
    ("another offset is written in UTC", datetime(2026, 11, 22, 12, 0, tzinfo=timezone(timedelta(hours=2))),
     "2026-11-22T10:00:00Z"),
    ("a year below 1000 keeps four digits", datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "0999-01-02T03:04:05Z"),
]


@pytest.mark.parametrize(("t", "expected"), [r[1:] for r in FORMATS], ids=[r[0] for r in FORMATS])
def test_rfc3339(t: datetime, expected: str) -> None:
    assert rfc3339(t) == expected
    assert iso(t) == expected


def test_iso_writes_never_for_the_instant_that_never_comes() -> None:
    assert iso(datetime.max.replace(tzinfo=UTC)) == "never"
    assert rfc3339(None) is None and iso(None) is None


# -- scope (TTL-1, JOB-1) -----------------------------------------------------------------------

SCOPES = [
    # name, managedBy, ttl scope managed, ttl scope all, job scope managed, job scope all
    ("managed by batchd", MANAGED, True, True, True, True),
    ("names no controller", None, False, True, False, True),
    ("names the built-in controller", "kubernetes.io/job-controller", False, True, False, True),
    ("names another controller", "example.com/other", False, True, False, False),
]


@pytest.mark.parametrize(("managed_by", "ttl_managed", "ttl_all", "job_managed", "job_all"),
                         [r[1:] for r in SCOPES], ids=[r[0] for r in SCOPES])
def test_scope(managed_by: str | None, ttl_managed: bool, ttl_all: bool, job_managed: bool, job_all: bool) -> None:
    job = Job.model_validate(make_job(managed_by=managed_by))
    assert (ttl_in_scope(job, "managed"), ttl_in_scope(job, "all")) == (ttl_managed, ttl_all)
    assert (job_in_scope(job, "managed"), job_in_scope(job, "all")) == (job_managed, job_all)


# -- still waiting at now (TTL-5..7, TIME-1, TTL-HOLD) ----------------------------------------

WAITING = [
    ("finished 10 s ago, 60 s TTL: sleeping", make_job(ttl=60), True),
    ("finished 10 s ago, 10 s TTL: expired at now, deleting", make_job(ttl=10), False),
    ("finished 10 s ago, 0 s TTL: deleting", make_job(ttl=0), False),
    ("expired but held: waits for the hold to go", make_job(ttl=0, annotations={TTL_HOLD_ANNOTATION: "debug"}), True),
    ("no finish time: waits for a change", make_job(finished_at=None), True),
    ("expiry beyond datetime: never comes", make_job(ttl=2**31 - 1, finished_at="9999-12-01T00:00:00Z"), True),
    ("no TTL: no workflow waits", make_job(ttl=None), False),
    ("running: no workflow waits", make_job(finished=None), False),
    ("being deleted plays no part", make_job(ttl=60, deleting=True), True),
]


@pytest.mark.parametrize(("raw", "expected"), [r[1:] for r in WAITING], ids=[r[0] for r in WAITING])
def test_still_waiting(raw: dict[str, Any], expected: bool) -> None:
    assert still_waiting(TTLObservation.of_job(Job.model_validate(raw)), NOW) is expected


def test_still_waiting_refuses_a_naive_now() -> None:
    with pytest.raises(ValueError):
        still_waiting(TTLObservation.of_job(Job.model_validate(make_job())), NOW.replace(tzinfo=None))


NOT_APPLIED = [
    ("a Pod owned by a Job", make_pod(owner="etl"), "Job etl"),
    ("a Pod that restarts Always", make_pod(restart="Always"), "restartPolicy Always"),
    ("a label that is no number", make_pod(label="1m"), "'1m'"),
    ("a Pod that qualifies", make_pod(), None),
]


@pytest.mark.parametrize(("raw", "says"), [r[1:] for r in NOT_APPLIED], ids=[r[0] for r in NOT_APPLIED])
def test_the_model_says_why_a_ttl_is_not_applied(raw: dict[str, Any], says: str | None) -> None:
    obs = TTLObservation.of_pod(Pod.model_validate(raw))
    event = obs.not_applied()
    if says is None:
        assert event is None and obs.needs_cleanup()
        return
    assert event is not None and not obs.needs_cleanup()
    assert (event.type, event.reason, event.ref) == ("Warning", TTL_NOT_APPLIED, obs.ref)
    assert says in event.message


# -- what the routers send -----------------------------------------------------------------------


class Recorder:
    """Stands in for the Temporal and Kubernetes clients: records each start, signal and Event."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.running: set[str] = set()

    async def start_workflow(self, *_: Any, id: str, start_signal: str | None = None, **__: Any) -> None:
        if start_signal is not None:
            self.sent.append((f"start+{start_signal}", id))
        elif id in self.running:
            raise WorkflowAlreadyStartedError(id, "TTLAfterFinished")
        else:
            self.sent.append(("start", id))
        self.running.add(id)

    def get_workflow_handle(self, wid: str) -> Any:
        recorder = self

        class Handle:
            async def signal(self, name: str, *args: Any) -> None:
                gone = bool(args) and getattr(args[0], "gone", False)
                recorder.sent.append((f"{name}{' gone' if gone else ''}", wid))

        return Handle()

    def record_event(self, ref: Any, *, reason: str, **_: Any) -> None:
        self.sent.append((f"event {reason}", ref.uid))


class Clock:
    def now(self) -> datetime:
        return NOW


def routers(*, ttl_scope: str = "managed", job_scope: str = "managed") -> tuple[Recorder, TTLRouter, CronJobRouter,
                                                                                 JobRouter]:
    rec = Recorder()
    workflows = Workflows(rec, "q")  # type: ignore[arg-type]
    return (rec, TTLRouter(workflows, rec, Clock(), scope=ttl_scope),  # type: ignore[arg-type]
            CronJobRouter(workflows, lead=30.0), JobRouter(workflows, scope=job_scope))


TTL_WID = "job-ttl/team-a/etl/u1"
TTL_ROUTES = [
    ("a finished Job is started once; a change the decision does not read sends nothing (WATCH-3)",
     [("ADDED", make_job()), ("MODIFIED", make_job()), ("MODIFIED", make_job(rv="2"))],
     [("start", TTL_WID)]),
    ("a changed TTL reaches the running workflow as a signal",
     [("ADDED", make_job()), ("MODIFIED", make_job(ttl=120, rv="2"))],
     [("start", TTL_WID), ("observe", TTL_WID)]),
    ("a hold reaches the running workflow as a signal",
     [("ADDED", make_job()), ("MODIFIED", make_job(rv="2", annotations={TTL_HOLD_ANNOTATION: "debug"}))],
     [("start", TTL_WID), ("observe", TTL_WID)]),
    ("a running Job starts nothing", [("ADDED", make_job(finished=None))], []),
    ("out of scope (--ttl-scope managed)", [("ADDED", make_job(managed_by=None))], []),
    ("deleted before its expiry: the sleeping workflow is told",
     [("ADDED", make_job()), ("DELETED", make_job(deleting=True))],
     [("start", TTL_WID), ("observe gone", TTL_WID)]),
    ("deleted at its expiry: its own workflow did it, nothing is sent",
     [("ADDED", make_job(ttl=10)), ("DELETED", make_job(ttl=10, deleting=True))],
     [("start", TTL_WID)]),
    ("TTL removed: the workflow re-checks",
     [("ADDED", make_job()), ("MODIFIED", make_job(ttl=None, rv="2"))],
     [("start", TTL_WID), ("observe", TTL_WID)]),
    ("deletion under way after expiry: nothing is sent",
     [("ADDED", make_job(ttl=10)), ("MODIFIED", make_job(ttl=10, rv="2", deleting=True))],
     [("start", TTL_WID)]),
    ("a bad per-outcome TTL alone: one Warning Event, no workflow (FAIL-CLOSED)",
     [("ADDED", make_job(ttl=None, annotations={"batchd.io/ttl-seconds-after-success": "1m"})),
      ("MODIFIED", make_job(ttl=None, rv="2", annotations={"batchd.io/ttl-seconds-after-success": "1m"}))],
     [(f"event {INVALID_ANNOTATION}", "u1")]),
    ("a bad per-outcome TTL beside the spec's: one Warning Event, a workflow that holds the Job (FAIL-CLOSED)",
     [("ADDED", make_job(ttl=10, annotations={"batchd.io/ttl-seconds-after-success": "1m"}))],
     [(f"event {INVALID_ANNOTATION}", "u1"), ("start", TTL_WID)]),
]


@pytest.mark.parametrize(("events", "expected"), [r[1:] for r in TTL_ROUTES], ids=[r[0] for r in TTL_ROUTES])
def test_ttl_router(events: list[tuple[str, dict[str, Any]]], expected: list[tuple[str, str]]) -> None:
    rec, ttl, _, _ = routers()

    async def scenario() -> None:
        for etype, raw in events:
            await ttl.job(etype, Job.model_validate(raw))

    asyncio.run(scenario())
    assert rec.sent == expected


def test_ttl_router_forgets_a_warned_object_once_it_is_deleted() -> None:
    # what it warned of is kept per object, not for the life of the process
    rec, ttl, _, _ = routers()
    bad = {"batchd.io/ttl-seconds-after-success": "1m"}

    async def scenario() -> None:
        for i in range(3):
            raw = make_job(ttl=None, annotations=bad)
            raw["metadata"].update(name=f"etl-{i}", uid=f"u{i}")
            job = Job.model_validate(raw)
            await ttl.job("ADDED", job)
            await ttl.job("DELETED", job)

    asyncio.run(scenario())
    assert rec.sent == [(f"event {INVALID_ANNOTATION}", f"u{i}") for i in range(3)]
    assert ttl._warned == {}


def test_ttl_router_parses_only_the_pods_that_ask_for_a_ttl() -> None:
    rec, ttl, _, _ = routers()
    unlabelled = {"kind": "Pod", "metadata": {"name": "q", "namespace": "team-a", "uid": "u4", "labels": {}},
                  "status": {"phase": 7}}  # the Pod model would refuse it

    async def scenario() -> None:
        await ttl.pod("ADDED", unlabelled)  # not parsed: an invalid phase would fail validation
        await ttl.pod("ADDED", make_pod())

    asyncio.run(scenario())
    assert rec.sent == [("start", "pod-ttl/team-a/p/u3")]


def test_job_router_starts_once_and_pokes_when_deleted_not_when_finished() -> None:
    """The finish is the workflow's own write: a poke then would only reach it as it completes,
    and make Temporal refuse that completion."""
    rec, _, _, jobs = routers()
    wid = "job/team-a/etl/u1"

    async def scenario() -> None:
        for etype, raw in [("ADDED", make_job(finished=None)), ("MODIFIED", make_job(finished=None, rv="2")),
                           ("MODIFIED", make_job(rv="3")), ("DELETED", make_job(rv="4")),
                           ("ADDED", make_job(finished=None, managed_by=None))]:
            await jobs.job(etype, Job.model_validate(raw))

    asyncio.run(scenario())
    assert rec.sent == [("start+poke", wid), ("poke", wid)]


def test_job_router_tells_a_waiting_job_each_end_of_the_jobs_it_waits_for_once() -> None:  # JOB-AFTER
    rec, _, _, jobs = routers()
    waiter = make_job(finished=None, annotations={"batchd.io/after": "first"})
    waiter["metadata"].update(name="waiter", uid="uw")
    wid = "job/team-a/waiter/uw"

    def first(rv: str, finished: str | None) -> Job:
        raw = make_job(finished=finished, rv=rv, managed_by="example.com/other")
        raw["metadata"].update(name="first", uid="uf")
        return Job.model_validate(raw)

    async def scenario() -> None:
        await jobs.job("ADDED", first("1", None))  # nobody waits for it yet
        await jobs.job("ADDED", Job.model_validate(waiter))
        await jobs.job("MODIFIED", first("2", None))  # still running: nothing to tell
        await jobs.job("MODIFIED", first("3", "Complete"))
        await jobs.job("MODIFIED", first("4", "Complete"))  # told already
        await jobs.job("DELETED", first("5", "Complete"))  # deleted after it completed: told, once
        await jobs.gone(ObjectRef(kind="Job", namespace="team-a", name="first", uid="uf"))
        done = dict(waiter, status={"conditions": [{"type": "Complete", "status": "True"}]})
        await jobs.job("MODIFIED", Job.model_validate(done))  # the waiter ran: it waits no more
        await jobs.job("ADDED", first("6", "Failed"))

    asyncio.run(scenario())
    told = [s for s in rec.sent if s[0].startswith("dependency")]
    assert told == [("dependency", wid), ("dependency gone", wid), ("dependency gone", wid)]
    assert jobs._dependents == {} and jobs._awaits == {}


def test_cronjob_router_reports_a_managed_cronjobs_job_once_per_outcome() -> None:
    rec, _, cronjobs, _ = routers()
    owner = {"kind": "CronJob", "name": "nightly", "uid": "cj1"}
    stranger = {"kind": "CronJob", "name": "other", "uid": "cj2"}
    cronjobs.track("ADDED", {"kind": "CronJob", "metadata": {"namespace": "team-a", "name": "nightly", "uid": "cj1"}})

    async def scenario() -> None:
        for etype, raw in [("ADDED", make_job(finished=None, owner=owner)), ("MODIFIED", make_job(owner=owner)),
                           ("MODIFIED", make_job(rv="2", owner=owner)), ("DELETED", make_job(rv="3", owner=owner)),
                           ("MODIFIED", make_job(owner=stranger))]:
            await cronjobs.job(etype, Job.model_validate(raw), raw)

    asyncio.run(scenario())
    # its deletion after the report waits for the next report (CJ-46, the test below)
    assert rec.sent == [("job_observed", "cronjob/team-a/nightly")]


def test_cronjob_router_holds_back_the_deletion_of_a_reported_job_until_the_next_report() -> None:
    """CJ-46: each history-limit or TTL delete of a finished Job would otherwise cost a workflow task."""
    rec, _, cronjobs, _ = routers()
    owner = {"kind": "CronJob", "name": "nightly", "uid": "cj1"}
    cronjobs.track("ADDED", {"kind": "CronJob", "metadata": {"namespace": "team-a", "name": "nightly", "uid": "cj1"}})
    told: list[Any] = []
    real_signal = cronjobs.workflows.signal

    async def signal(wid: str, arg: Any = None, *, name: str = "observe") -> None:
        told.append(arg)
        await real_signal(wid, arg, name=name)

    cronjobs.workflows.signal = signal  # type: ignore[method-assign]

    def job(uid: str, **kw: Any) -> dict[str, Any]:
        raw = make_job(owner=owner, **kw)
        raw["metadata"]["uid"] = uid
        return raw

    async def scenario() -> None:
        for etype, raw in [("MODIFIED", job("u1")), ("DELETED", job("u1", rv="2")),  # reported, then deleted
                           ("DELETED", job("u2", finished=None)),  # deleted while running: told at once
                           ("MODIFIED", job("u3"))]:
            await cronjobs.job(etype, Job.model_validate(raw), raw)

    asyncio.run(scenario())
    assert rec.sent == [("job_observed", "cronjob/team-a/nightly"), ("job_observed gone", "cronjob/team-a/nightly"),
                        ("job_observed", "cronjob/team-a/nightly")]
    assert [(s.uid, s.also_gone) for s in told] == [("u1", ()), ("u2", ("u1",)), ("u3", ())]
    asyncio.run(cronjobs.job("DELETED", Job.model_validate(job("u3", rv="2")), job("u3", rv="2")))
    asyncio.run(cronjobs.job("MODIFIED", Job.model_validate(job("u4")), job("u4")))
    asyncio.run(cronjobs.job("DELETED", Job.model_validate(job("u4", rv="2")), job("u4", rv="2")))
    spec = {"kind": "CronJob", "metadata": {"namespace": "team-a", "name": "nightly", "uid": "cj1"},
            "spec": {"schedule": "@hourly", "successfulJobsHistoryLimit": 1, "jobTemplate": {"spec": {}}}}
    asyncio.run(cronjobs.cronjob("MODIFIED", spec))  # a spec change may lower a limit: they go first
    assert [(s.uid, s.gone, s.also_gone) for s in told[3:]] == [("u4", False, ("u3",)), ("u4", True, ())]
    assert rec.sent[-2:] == [("job_observed gone", "cronjob/team-a/nightly"), ("start+observe", "cronjob/team-a/nightly")]
    asyncio.run(cronjobs.job("MODIFIED", Job.model_validate(job("u5")), job("u5")))
    asyncio.run(cronjobs.job("DELETED", Job.model_validate(job("u5", rv="2")), job("u5", rv="2")))
    assert cronjobs._also_gone == {("team-a", "nightly"): ["u5"]}
    cronjobs.track("DELETED", {"kind": "CronJob", "metadata": {"namespace": "team-a", "name": "nightly", "uid": "cj1"}})
    assert cronjobs._also_gone == {}  # a deleted CronJob's are forgotten


def test_the_ttl_decision_key_reads_every_field_but_the_version() -> None:
    """WATCH-3: only a change the TTL decision reads makes a new key."""
    base = TTLObservation.of_job(Job.model_validate(make_job()))
    assert TTLObservation.of_job(Job.model_validate(make_job(rv="9"))).decision_key() == base.decision_key()
    changed = [make_job(ttl=61), make_job(finished_at=at(-11)), make_job(deleting=True),
               make_job(annotations={TTL_HOLD_ANNOTATION: ""}), make_job(finished=None),
               make_job(annotations={"batchd.io/ttl-seconds-after-success": "x"})]
    keys = {TTLObservation.of_job(Job.model_validate(raw)).decision_key() for raw in changed}
    assert base.decision_key() not in keys and len(keys) == len(changed)
    assert base.model_copy(update={"gone": True}).decision_key() != base.decision_key()


def test_the_cronjob_decision_key_reads_every_field_but_its_own_writes() -> None:
    """A field a decision reads is in the key by default: each field changed alone changes it, but
    for the resourceVersion, the status (the workflow's write) and the bridge's lead."""
    base = CronJobObservation(namespace="team-a", name="nightly", uid="cj1", generation=1)
    samples: dict[str, Any] = {
        "namespace": "b", "name": "other", "uid": "cj2", "resource_version": "9", "generation": 2,
        "creation_timestamp": NOW, "deleting": True, "gone": True, "spec": CronJobSpec(schedule="* * * * *"),
        "status": CronJobStatus(last_schedule_time=NOW), "jitter_percent": 5, "problem": "p", "lead_seconds": 1.0,
        "suspend_reason": "r", "suspended_at": "t", "catch_up": "all", "schedules": ["5 * * * *"],
        "active_from": NOW, "active_until": NOW, "max_runs": 3, "skip": ["0 0 * * 0"], "suspend_after_failures": 2,
        "concurrency_group": "g", "concurrency_limit": 2, "cloudevents": True, "held": "h",
        "backfill": "2026-01-01T00:00:00Z/2026-01-01T00:00:00Z", "backfill_taken": "x"}
    assert set(samples) == set(CronJobObservation.model_fields)  # a new field needs a sample here
    unchanged = {f for f, v in samples.items() if base.model_copy(update={f: v}).decision_key() == base.decision_key()}
    assert unchanged == set(CronJobObservation.NOT_DECIDED) == {"resource_version", "status", "lead_seconds",
                                                                "cloudevents", "backfill_taken"}


def test_the_expiry_a_ttl_workflow_starts_with() -> None:
    assert TTLObservation.of_job(Job.model_validate(make_job(ttl=60))).shown_expiry() == NOW + timedelta(seconds=50)
    assert TTLObservation.of_job(Job.model_validate(make_job(finished=None))).shown_expiry() is None
    assert TTLObservation.of_job(Job.model_validate(make_job(finished_at=None))).shown_expiry() is None
    far = TTLObservation.of_job(Job.model_validate(make_job(ttl=2**62)))
    assert far.shown_expiry() == NEVER


def test_the_poker_pokes_a_busy_job_once_a_gap_and_loses_no_change() -> None:
    """Pod events every 5 ms for a second: without the gap, a poke every 10 ms tick (about 100);
    with it, one a gap (at most 6 in a second of 0.2 s gaps), and one more after the last change."""
    rec, _, _, jobs = routers()
    pod = {"metadata": {"namespace": "team-a", "name": "etl-x", "labels": {POD_JOB_LABEL: "true"},
                        "ownerReferences": [{"kind": "Job", "name": "etl", "uid": "u1", "controller": True}]}}

    async def scenario() -> tuple[int, int]:
        poker = asyncio.create_task(jobs.poker(interval=0.01, gap=0.2))
        began = time.monotonic()
        while time.monotonic() - began < 1.0:
            jobs.pod(pod)
            await asyncio.sleep(0.005)
        busy = len(rec.sent)
        deadline = time.monotonic() + 10
        while len(rec.sent) == busy and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        poker.cancel()
        return busy, len(rec.sent)

    busy, after = asyncio.run(scenario())
    assert 1 <= busy <= 6 and after == busy + 1
    assert set(rec.sent) == {("poke", "job/team-a/etl/u1")}
