"""Tables for the pure CronJob planner (workflows/decisions/cronjob.py), no workflow and no server.

The sync rows follow the shape of upstream's ``TestControllerV2SyncCronJob``: a CronJob on the
hour, whether it ran before and whether that Job is still active, the policy, the deadline and
``now``; expected are the Jobs created and deleted, the Event reasons, the wake-up and whether the
status needs a write. :func:`sync` plays the part of the workflow (docs/cronjob.md, the pass),
against a cluster in which every call succeeds.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from workflows.cron import job_name
from workflows.cronjob import CronJobWorkflow
from workflows.decisions import cronjob as decide
from workflows.execute import Call, Log, Patched, execute
from workflows.models.cronjob import (
    BackfillInput,
    BackfillResult,
    CreateJobResult,
    CronJobInput,
    CronJobObservation,
    CronJobSpec,
    CronJobState,
    DeleteJobsResult,
    JobSummary,
    LedgerEntry,
    ObjectReference,
    SetSuspendInput,
    SyncCronJobResult,
    create_cronjob_job,
    delete_cronjob_jobs,
    set_cronjob_suspend,
)
from workflows.times import iso

T = datetime(2026, 5, 19, 10, 0, tzinfo=UTC)  # the top of the hour
JUST_BEFORE = T - timedelta(minutes=1)
JUST_AFTER = T + timedelta(minutes=1)
WEEK_AFTER = T + timedelta(days=7)
HOURLY = "0 * * * *"


def always() -> bool:
    return True


def never() -> bool:
    raise AssertionError("the sub-minute rule was asked where it cannot matter")


def state(*, schedule: str = HOURLY, policy: str = "Allow", suspend: bool = False, deadline: int | None = None,
          ran_previously: bool = False, still_active: bool = False, created: datetime = JUST_BEFORE - timedelta(minutes=1),
          catch_up: str = "latest", deleting: bool = False, schedules: tuple[str, ...] = (),
          observed: dict[str, Any] | None = None, **more: Any) -> CronJobState:
    obs = CronJobObservation(
        namespace="ns", name="cj", uid="cj-uid", generation=1, creation_timestamp=created, deleting=deleting,
        spec=CronJobSpec(schedule=schedule, concurrency_policy=policy, suspend=suspend,  # type: ignore[arg-type]
                         starting_deadline_seconds=deadline),
        catch_up=catch_up, schedules=list(schedules)).model_copy(update=observed)  # type: ignore[arg-type]
    last = T - timedelta(hours=1) if ran_previously else None
    active = [ObjectReference(name=job_name("cj", last or T - timedelta(hours=1)), namespace="ns", uid="old")] \
        if still_active else []
    return CronJobState(observation=obs, last_schedule_time=last, active=active).model_copy(update=more)


@dataclass
class Synced:
    state: CronJobState
    created: list[str]
    deleted: list[str]
    events: list[str]
    wake: datetime | None
    status_write: bool


class Cluster:
    """The fake side a pass runs against: every call succeeds, and each is written down."""

    def __init__(self, s: CronJobState) -> None:
        self.state, self.events = s, []  # the Books the pass reads and writes
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.logged: list[str] = []
        self.suspended: list[SetSuspendInput] = []

    async def perform(self, step: Any) -> Any:
        if isinstance(step, Log):
            self.logged.append(step.message)
            return None
        if isinstance(step, Patched):
            return True  # a new run
        assert isinstance(step, Call), step
        if step.activity is delete_cronjob_jobs:
            names = [r.name for r in step.arg.jobs]
            self.deleted += names
            return DeleteJobsResult(deleted=names)
        if step.activity is set_cronjob_suspend:
            self.suspended.append(step.arg)
            return SyncCronJobResult()
        assert step.activity is create_cronjob_job, step
        self.created.append(step.arg.job_name)
        job = ObjectReference(name=step.arg.job_name, namespace="ns", uid=f"uid-{step.arg.job_name}")
        return CreateJobResult(outcome="created", job=job)


def sync(s: CronJobState, now: datetime, *, subminute: Any = always) -> Synced:
    """One pass as the workflow runs it (the same steps, the same executor), every call succeeding."""
    before = decide.status_key(s, None)
    cluster = Cluster(s)
    end = asyncio.run(execute(decide.run_pass(cluster, now, armed=False, subminute=subminute,
                                                clock=lambda: now), cluster))
    return Synced(cluster.state, cluster.created, cluster.deleted, [ev.reason for ev in cluster.events], end.wake,
                  decide.status_key(cluster.state, end.wake) != before)


# name, state, now, created (schedule times), deleted, events, wake, status write
SYNC_ROWS: list[tuple[str, dict[str, Any], datetime, list[datetime], list[datetime], list[str], datetime | None,
                      bool]] = [
    ("never ran, not valid schedule", dict(schedule="1 2 3 4 5 6 7"), T, [], [], ["UnparseableSchedule"], None, False),
    ("never ran, not time, A", {}, JUST_BEFORE, [], [], [], T, True),
    ("never ran, not time, F", dict(policy="Forbid"), JUST_BEFORE, [], [], [], T, True),
    ("never ran, not time, R", dict(policy="Replace"), JUST_BEFORE, [], [], [], T, True),
    ("never ran, is time, A", {}, JUST_AFTER, [T], [], [], T + timedelta(hours=1), True),
    ("never ran, is time, F", dict(policy="Forbid"), JUST_AFTER, [T], [], [], T + timedelta(hours=1), True),
    ("never ran, is time, R", dict(policy="Replace"), JUST_AFTER, [T], [], [], T + timedelta(hours=1), True),
    ("never ran, is time, suspended", dict(suspend=True), JUST_AFTER, [], [], [], None, False),
    ("never ran, is time, past short deadline", dict(deadline=10), JUST_AFTER, [], [], [], T + timedelta(hours=1),
     True),
    ("never ran, is time, not past medium deadline", dict(deadline=600), JUST_AFTER, [T], [], [],
     T + timedelta(hours=1), True),
    ("prev ran but done, not time, A", dict(ran_previously=True), JUST_BEFORE, [], [], [], T, True),
    ("prev ran but done, is time, A", dict(ran_previously=True), JUST_AFTER, [T], [], [], T + timedelta(hours=1), True),
    ("prev ran but done, is time, F", dict(ran_previously=True, policy="Forbid"), JUST_AFTER, [T], [], [],
     T + timedelta(hours=1), True),
    ("prev ran but done, is time, R", dict(ran_previously=True, policy="Replace"), JUST_AFTER, [T], [], [],
     T + timedelta(hours=1), True),
    ("prev ran but done, is time, suspended", dict(ran_previously=True, suspend=True), JUST_AFTER, [], [], [], None,
     False),
    ("still active, not time, A", dict(ran_previously=True, still_active=True), JUST_BEFORE, [], [], [], T, True),
    ("still active, is time, A", dict(ran_previously=True, still_active=True), JUST_AFTER, [T], [], [],
     T + timedelta(hours=1), True),
    ("still active, is time, F", dict(ran_previously=True, still_active=True, policy="Forbid"), JUST_AFTER, [], [],
     ["JobAlreadyActive"], T + timedelta(hours=1), True),
    ("still active, is time, R", dict(ran_previously=True, still_active=True, policy="Replace"), JUST_AFTER, [T],
     [T - timedelta(hours=1)], [], T + timedelta(hours=1), True),
    ("prev ran but done, long overdue, not past deadline, A", dict(ran_previously=True, deadline=7 * 86400 + 60),
     WEEK_AFTER, [WEEK_AFTER], [], ["TooManyMissedTimes"], WEEK_AFTER + timedelta(hours=1), True),
    ("prev ran but done, long overdue, past short deadline", dict(ran_previously=True, deadline=10),
     WEEK_AFTER + timedelta(minutes=1), [], [], [], WEEK_AFTER + timedelta(hours=1), True),
    ("prev ran but done, long overdue, no deadline: too many missed, the latest runs", dict(ran_previously=True),
     WEEK_AFTER + timedelta(minutes=1), [WEEK_AFTER], [], ["TooManyMissedTimes"], WEEK_AFTER + timedelta(hours=1),
     True),
    ("being deleted: nothing is scheduled", dict(deleting=True), JUST_AFTER, [], [], [], None, False),
    ("catch-up: every missed hour, oldest first", dict(ran_previously=True, catch_up="all"),
     T + timedelta(hours=2, minutes=1), [T, T + timedelta(hours=1), T + timedelta(hours=2)], [], [],
     T + timedelta(hours=3), True),
    ("catch-up, F: one at a time", dict(ran_previously=True, catch_up="all", policy="Forbid"),
     T + timedelta(hours=2, minutes=1), [T], [], [], T + timedelta(hours=3), True),
    ("catch-up, R: each replaces the one before", dict(ran_previously=True, catch_up="all", policy="Replace"),
     T + timedelta(hours=1, minutes=1), [T, T + timedelta(hours=1)], [T - timedelta(hours=1) + timedelta(hours=1)], [],
     T + timedelta(hours=2), True),
    ("catch-up within the deadline only", dict(ran_previously=True, catch_up="all", deadline=3720),
     T + timedelta(hours=2, minutes=1), [T + timedelta(hours=1), T + timedelta(hours=2)], [], [],
     T + timedelta(hours=3), True),
    ("several schedules: the union's next time", dict(ran_previously=True, schedules=("20 * * * *", "40 * * * *")),
     JUST_AFTER, [T], [], [], T + timedelta(minutes=20), True),
    ("several schedules: the one due runs, the union's next wakes", dict(ran_previously=True, schedules=("20 * * * *",)),
     T + timedelta(minutes=21), [T + timedelta(minutes=20)], [], [], T + timedelta(hours=1), True),
    ("several schedules on one minute: one Job", dict(ran_previously=True, schedules=("0 * * * *", "0 */2 * * *")),
     JUST_AFTER, [T], [], [], T + timedelta(hours=1), True),
]


@pytest.mark.parametrize(("name", "given", "now", "created", "deleted", "events", "wake", "write"), SYNC_ROWS,
                         ids=[r[0] for r in SYNC_ROWS])
def test_sync(name: str, given: dict[str, Any], now: datetime, created: list[datetime], deleted: list[datetime],
              events: list[str], wake: datetime | None, write: bool) -> None:
    out = sync(state(**given), now)
    assert out.created == [job_name("cj", t) for t in created]
    assert out.deleted == [job_name("cj", t) for t in deleted]
    assert out.events == events
    assert out.wake == wake
    assert out.status_write == write
    if created and not given.get("catch_up"):
        assert out.state.last_schedule_time == created[-1]


def test_a_pass_is_idempotent() -> None:
    """A second pass at the same instant finds the time processed: nothing twice, no write (CJ-26)."""
    first = sync(state(), JUST_AFTER)
    again = sync(first.state, JUST_AFTER)
    assert again.created == [] and again.events == []
    assert decide.status_key(again.state, again.wake) == decide.status_key(first.state, first.wake)


def test_a_warning_is_sent_once_per_generation() -> None:
    first = sync(state(schedule="not a schedule"), T)
    assert first.events == ["UnparseableSchedule"]
    assert sync(first.state, T + timedelta(minutes=5)).events == []
    changed = first.state.model_copy(update={"observation": first.state.observation.model_copy(update={"generation": 2})})
    assert sync(changed, T + timedelta(minutes=5)).events == ["UnparseableSchedule"]


def test_forbid_records_the_skipped_time_in_the_ledger() -> None:
    out = sync(state(ran_previously=True, still_active=True, policy="Forbid"), JUST_AFTER)
    assert [(e.scheduled_time, e.outcome) for e in out.state.ledger] == [(T, "skipped-concurrency")]


def test_history_limits_delete_the_oldest_finished_jobs() -> None:
    finished = [JobSummary(name=f"j{i}", uid=f"u{i}", owner_uid="cj-uid", outcome="Complete",
                           start_time=T - timedelta(hours=10 - i)) for i in range(5)]
    out = sync(state(finished=finished), JUST_BEFORE)
    assert out.deleted == ["j0", "j1"]  # the default successfulJobsHistoryLimit is 3
    assert [j.name for j in out.state.finished] == ["j2", "j3", "j4"]


def test_a_jobs_end_while_armed_is_tidied_without_replanning() -> None:
    """CJ-53: the history limits as a pass would apply them, nothing created; a tripping breaker or a
    one-at-a-time backfill waiting for the end wants a pass instead."""
    finished = [JobSummary(name=f"j{i}", uid=f"u{i}", owner_uid="cj-uid", outcome="Complete",
                           start_time=T - timedelta(hours=10 - i)) for i in range(4)]
    s = state(ran_previously=True, finished=finished)
    cluster = Cluster(s)
    asyncio.run(execute(decide.tidy(cluster), cluster))
    assert cluster.deleted == ["j0"] and cluster.created == [] and cluster.events == []
    assert [j.name for j in cluster.state.finished] == ["j1", "j2", "j3"]
    assert decide.only_tidying(s, T)
    assert not decide.only_tidying(s.model_copy(update={"backfill": [T]}), T)
    tripping = state(ran_previously=True, observed={"suspend_after_failures": 2}, failures_in_a_row=2)
    assert not decide.only_tidying(tripping, T)
    deleting = Cluster(state(deleting=True, finished=finished))
    asyncio.run(execute(decide.tidy(deleting), deleting))
    assert deleting.deleted == []  # CJ-24: a CronJob being deleted only reconciles its status


def test_sub_minute_schedule_acts_once_a_minute() -> None:
    """CJ-SUBMINUTE: ``@every 20s`` names one Job a minute; the rule is asked only when it matters."""
    first = sync(state(schedule="@every 20s", created=T), T + timedelta(seconds=21))
    assert first.created == [job_name("cj", T + timedelta(seconds=20))]
    assert first.wake == T + timedelta(minutes=1)  # not 40 s: that time names the same Job
    ended, _, _ = decide.job_observed(
        first.state, JobSummary(name=first.created[0], uid=f"uid-{first.created[0]}", outcome="Complete"), T)
    assert sync(ended, T + timedelta(seconds=41)).created == []
    legacy = sync(ended, T + timedelta(seconds=41), subminute=lambda: False)
    assert legacy.created == [job_name("cj", T + timedelta(seconds=40))]  # an old history's behaviour
    assert sync(state(), JUST_AFTER, subminute=never).created == [job_name("cj", T)]


def test_suspension_is_not_caught_up() -> None:
    """CJ-25: on resume only the latest time runs; the ones the suspension covered are "suspended"."""
    s = state(ran_previously=True, catch_up="all", suspended_since=T - timedelta(minutes=30))
    out = sync(s, T + timedelta(hours=2, minutes=1))
    assert out.created == [job_name("cj", T + timedelta(hours=2))]
    assert [(e.scheduled_time, e.outcome) for e in out.state.ledger][:2] == [
        (T, "suspended"), (T + timedelta(hours=1), "suspended")]


# -- the bridge's reports --------------------------------------------------------------------

def test_a_finished_job_leaves_active_and_is_counted_once() -> None:
    s = state(ran_previously=True, still_active=True)
    done = JobSummary(name=s.active[0].name, uid="old", owner_uid="cj-uid", outcome="Failed",
                      finished_at=T - timedelta(minutes=10))
    s, events, changed = decide.job_observed(s, done, T)
    assert changed and [e.reason for e in events] == ["SawCompletedJob"]
    assert s.active == [] and s.counters.failed == 1 and s.counters.failures_since_last_success == 1
    assert (s.last_failure_time, s.last_failed_job) == (T - timedelta(minutes=10), done.name)
    s, events, _ = decide.job_observed(s, done, T)  # a relist repeats it
    assert events == [] and s.counters.failed == 1
    ok = JobSummary(name="j2", uid="u2", owner_uid="cj-uid", outcome="Complete", completion_time=T)
    s, _, _ = decide.job_observed(s, ok, T)
    assert (s.counters.succeeded, s.counters.failures_since_last_success, s.last_successful_time) == (1, 0, T)


def test_an_active_job_that_disappears_is_missing() -> None:
    s = state(ran_previously=True, still_active=True)
    s, events, changed = decide.job_observed(s, JobSummary(name=s.active[0].name, uid="old", gone=True), T)
    assert changed and [e.reason for e in events] == ["MissingJob"] and s.active == []
    assert s.recent[-1].outcome == "Missing"


def test_jobs_deleted_after_their_end_leave_the_history_limits_count_with_the_next_end() -> None:
    """CJ-46: the bridge holds back the deletion of a Job whose end it reported, until the next end;
    the limits then count only the Jobs that are there (upstream reads its informer)."""
    finished = [JobSummary(name=f"j{i}", uid=f"u{i}", owner_uid="cj-uid", outcome="Complete",
                           start_time=T - timedelta(hours=10 - i)) for i in range(3)]
    s = state(ran_previously=True, finished=finished)
    new = JobSummary(name="j3", uid="u3", owner_uid="cj-uid", outcome="Complete", start_time=T, also_gone=("u1",))
    s, _, changed = decide.job_observed(s, new, T)
    assert changed and [j.uid for j in s.finished] == ["u0", "u2", "u3"]
    assert all(j.also_gone == () for j in s.finished)  # not kept
    cluster = Cluster(s)
    asyncio.run(execute(decide.tidy(cluster), cluster))
    assert cluster.deleted == []  # three Jobs, as the limit allows: j1's delete by a user spares j0
    s, events, changed = decide.job_observed(
        s, JobSummary(name="x", uid="ux", owner_uid="cj-uid", gone=True, also_gone=("u0",)), T)
    assert not changed and events == [] and [j.uid for j in s.finished] == ["u2", "u3"]


def test_another_cronjobs_job_is_ignored() -> None:
    s = state(ran_previously=True, still_active=True)
    assert decide.job_observed(s, JobSummary(name="x", uid="old", owner_uid="other", outcome="Complete"), T) == (
        s, [], False)


def test_observe_adopts_a_recreated_namesake_and_ignores_repeats() -> None:
    s = state(ran_previously=True)
    same = decide.observe(s, s.observation)
    assert same.changed and not same.replan
    new = decide.observe(s, s.observation.model_copy(update={"uid": "new-uid"}))
    assert new.adopted and new.replan and new.state.last_schedule_time is None
    other_gone = decide.observe(s, CronJobObservation(namespace="ns", name="cj", uid="other", gone=True))
    assert not other_gone.changed and not other_gone.state.observation.gone
    assert decide.observe(s, CronJobObservation(namespace="ns", name="cj", gone=True)).state.observation.gone


# -- operator controls --------------------------------------------------------------------------

@pytest.mark.parametrize(("suspended", "reason_then", "suspend", "reason", "changes", "stamps"), [
    (False, None, True, "maintenance", True, True),
    (True, "maintenance", True, "maintenance", False, False),
    (True, "maintenance", True, "another", True, False),  # a new reason keeps suspended-at
    (True, "maintenance", False, None, True, False),
    (False, None, False, None, False, False),
])
def test_suspend_change(suspended: bool, reason_then: str | None, suspend: bool, reason: str | None, changes: bool,
                        stamps: bool) -> None:
    s = state(suspend=suspended)
    s = s.model_copy(update={"observation": s.observation.model_copy(update={
        "suspend_reason": reason_then, "suspended_at": "2026-05-19T09:00:00Z" if suspended else None})})
    patch = decide.suspend_change(s, suspend, reason, T + timedelta(microseconds=5))
    assert (patch is not None) == changes
    if patch is not None:
        assert (patch.at == T) == stamps
        after = decide.suspended(s, patch).observation
        assert after.spec.suspend == suspend and after.suspend_reason == (reason if suspend else None)


@pytest.mark.parametrize(("start", "to", "one", "refusal"), [
    (T + timedelta(hours=1), T, False, "is after"),
    (T, T + timedelta(days=1), False, "in the future"),
    (T - timedelta(days=42), T, False, "more than 1000"),
    (T.replace(tzinfo=None), T, False, "time zone offset"),
])
def test_backfill_refusals(start: datetime, to: datetime, one: bool, refusal: str) -> None:
    with pytest.raises(decide.BackfillRefused, match=refusal):
        decide.backfill_times(state(), BackfillInput(start=start, to=to, one_at_a_time=one), T)


def test_backfill_one_at_a_time_advances_as_each_job_ends() -> None:
    times = decide.backfill_times(state(), BackfillInput(start=T - timedelta(hours=2), to=T), T)
    assert times == [T - timedelta(hours=2), T - timedelta(hours=1), T]
    s = state().model_copy(update={"backfill": times})
    s, due = decide.next_backfill(s)
    assert due == times[0]
    run = decide.backfill_run(s, due)
    res = CreateJobResult(outcome="created", job=ObjectReference(name=run.name, namespace="ns", uid="b0"))
    s, _, _ = decide.created(s, run, res, T)
    s = decide.backfill_started(s, res)
    assert decide.next_backfill(s) == (s, None)  # its Job is active
    assert decide.backfill_queued(s) == [job_name("cj", t) for t in times[1:]]
    assert s.last_schedule_time is None  # a backfill is not the schedule's run
    s, _, _ = decide.job_observed(s, JobSummary(name=run.name, uid="b0", outcome="Complete"), T)
    s, due = decide.next_backfill(s)
    assert due == times[1] and s.backfill == times[1:]
    assert decide.ran(s, times[0]) and not decide.ran(s, times[1])
    assert decide.backfilled(BackfillResult(times=3), run, None).existed == [run.name]


WEEK = f"{iso(T - timedelta(days=7))}/{iso(T)}"


@pytest.mark.parametrize(("asked", "written", "taken", "runs", "taken_after"), [
    (WEEK, None, None, True, WEEK),  # a new value runs
    (WEEK, None, WEEK, False, WEEK),  # once per value
    (WEEK, WEEK, None, False, WEEK),  # a workflow afresh on a CronJob that took it before: the CronJob says so
    (None, WEEK, WEEK, False, None),  # removed: the record goes, so setting it again runs it again
    (f"{iso(T)}/{iso(T)} one-at-a-time", None, WEEK, True, f"{iso(T)}/{iso(T)} one-at-a-time"),  # another value
    (None, None, None, False, None),
])
def test_the_backfill_annotation_is_taken_once_per_value(asked: str | None, written: str | None, taken: str | None,
                                                         runs: bool, taken_after: str | None) -> None:
    """CJ-BACKFILL-DOOR."""
    s = state().model_copy(update={"backfill_taken": taken})
    s = s.model_copy(update={"observation": s.observation.model_copy(update={"backfill": asked, "backfill_taken": written})})
    s, backfill = decide.backfill_asked(s)
    assert (backfill is not None) == runs and s.backfill_taken == taken_after
    assert decide.status(s, None).annotations["batchd.io/backfill-taken"] == taken_after
    if backfill is not None:
        assert backfill.one_at_a_time == asked.endswith("one-at-a-time")  # type: ignore[union-attr]


def test_the_backfill_annotation_says_what_became_of_it() -> None:
    s = state()
    s = s.model_copy(update={"observation": s.observation.model_copy(update={"backfill": WEEK})})
    done = decide.backfill_event(s, BackfillResult(times=168, created=["a", "b"], existed=["c"]))
    assert (done.type, done.reason) == ("Normal", "Backfilled")
    assert done.message == f"batchd.io/backfill={WEEK}: 168 schedule time(s): 2 created, 1 existed, 0 failed, 0 queued"
    assert decide.backfill_event(s, BackfillResult(times=1, failed=["a: Forbidden"])).type == "Warning"
    refused = decide.backfill_event(s, decide.BackfillRefused("more than 1000 schedule times"))
    assert (refused.type, refused.reason) == ("Warning", "InvalidBackfill")
    assert refused.message == f"batchd.io/backfill={WEEK} refused: more than 1000 schedule times"


def test_a_created_job_found_finished_is_not_active_again() -> None:
    """CJ-31: two runs in one minute name one Job; the finished namesake stays out of ``active``."""
    s = state()
    run = decide.Run(job_name("cj", T), T)
    res = CreateJobResult(outcome="exists", finished=True, job=ObjectReference(name=run.name, namespace="ns", uid="u"))
    s, events, _ = decide.created(s, run, res, T)
    assert s.active == [] and s.last_schedule_time == T and events == []
    assert [e.outcome for e in s.ledger] == ["created"]


class EndFirst(Cluster):
    """The bridge's report of a Job that ended at once reaches the workflow with the creation's
    result, and the signal is handled first: the end is folded in before the result."""

    def __init__(self, s: CronJobState, patched: bool) -> None:
        super().__init__(s)
        self.patched = patched

    async def perform(self, step: Any) -> Any:
        if isinstance(step, Patched):
            assert step.patch_id == decide.END_BEFORE_CREATION_PATCH
            return self.patched
        res = await super().perform(step)
        if isinstance(step, Call) and step.activity is create_cronjob_job:
            end = JobSummary(name=res.job.name, uid=res.job.uid, owner_uid="cj-uid", outcome="Complete",
                             completion_time=JUST_AFTER)
            self.state, events, _ = decide.job_observed(self.state, end, JUST_AFTER)
            self.events += events
        return res


@pytest.mark.parametrize("policy", ["Allow", "Forbid"])
def test_a_job_whose_end_is_folded_in_before_its_creation_is_not_active(policy: str) -> None:
    cluster = EndFirst(state(policy=policy), patched=True)
    asyncio.run(execute(decide.run_pass(cluster, JUST_AFTER, armed=False, subminute=always,
                                        clock=lambda: JUST_AFTER), cluster))
    s = cluster.state
    assert cluster.created == [job_name("cj", T)] and s.active == []
    assert [ev.reason for ev in cluster.events] == ["SawCompletedJob"]  # as upstream's next pass sees it
    assert [(e.outcome, e.result) for e in s.ledger] == [("created", "Complete")]
    assert s.last_successful_time == JUST_AFTER and s.counters.succeeded == 1
    # a Forbid CronJob's next time runs: nothing active holds it back
    assert sync(s, T + timedelta(hours=1, minutes=1)).created == [job_name("cj", T + timedelta(hours=1))]


def test_a_history_recorded_before_the_patch_keeps_such_a_job_active() -> None:
    cluster = EndFirst(state(), patched=False)
    asyncio.run(execute(decide.run_pass(cluster, JUST_AFTER, armed=False, subminute=always,
                                        clock=lambda: JUST_AFTER), cluster))
    assert [a.name for a in cluster.state.active] == [job_name("cj", T)] and cluster.events == []


def test_a_ledger_entry_follows_its_job_and_keeps_its_wire_format() -> None:
    """CJ-LEDGER: an entry's result follows its Job (running, then Complete, which a later deletion
    does not overwrite), and the state carried across continue-as-new encodes it as recorded
    histories do: camelCase, in field order. An entry is slotted (docs/benchmarks.md: 0.1 KiB where
    a model took 1.1 KiB, and a workflow holds a hundred)."""
    run = decide.Run(job_name("cj", T), T)
    res = CreateJobResult(outcome="created", job=ObjectReference(name=run.name, namespace="ns", uid="u"))
    s, _, _ = decide.created(state(), run, res, T + timedelta(seconds=1, microseconds=5))
    assert s.ledger[-1].result == "running"
    s, _, _ = decide.job_observed(s, JobSummary(name=run.name, uid="u", owner_uid="cj-uid", outcome="Complete"), T)
    s, _, _ = decide.job_observed(s, JobSummary(name=run.name, uid="u", owner_uid="cj-uid", gone=True), T)
    assert s.ledger[-1].result == "Complete"
    assert not hasattr(s.ledger[-1], "__dict__")
    wire = pydantic_data_converter.payload_converter.to_payloads([s])[0]
    assert (b'"ledger":[{"scheduledTime":"2026-05-19T10:00:00Z","source":"schedule","outcome":"created","job":"'
            + run.name.encode() + b'","jobUid":"u","createdAt":"2026-05-19T10:00:01Z","result":"Complete"}]') in wire.data
    assert pydantic_data_converter.payload_converter.from_payloads([wire], [CronJobState]) == [s]


def test_models_share_their_sets_of_fields_set() -> None:
    """K8sModel: equal sets of field names are one set (docs/benchmarks.md: 21 MiB at 2,000 CronJobs),
    and a copy with changes still knows which fields were set."""
    a, b = state(), state()
    assert a.observation.model_fields_set is b.observation.model_fields_set
    assert a.observation.spec.model_fields_set is b.observation.spec.model_fields_set
    assert "suspend" in a.observation.spec.model_fields_set
    copied = a.model_copy(update={"backfilling": True})
    assert copied.model_fields_set == a.model_fields_set | {"backfilling"}
    assert "backfilling" not in a.model_fields_set
    assert copied.model_fields_set is b.model_copy(update={"backfilling": False}).model_fields_set
    assert CronJobSpec.model_validate({"schedule": "* * * * *"}).model_fields_set == {"schedule"}


def test_the_workflow_takes_its_state_out_of_its_input() -> None:
    """The SDK keeps a workflow's argument for its run's life: the CronJob workflow empties it, so
    the run's first state is not kept beside the current one. The input's wire format is unchanged."""
    s = state()
    wire = pydantic_data_converter.payload_converter.to_payloads([CronJobInput(state=s, lead_seconds=60.0)])[0]
    assert wire.data.startswith(b'{"state":{"observation":{"namespace":"ns"') \
        and wire.data.endswith(b',"leadSeconds":60.0,"runEvents":60}')
    # a run started before runEvents existed replays with the 60 events it was started under
    wire.data = wire.data.replace(b',"runEvents":60}', b'}')
    inp = pydantic_data_converter.payload_converter.from_payloads([wire], [CronJobInput])[0]
    workflow = CronJobWorkflow(inp)
    assert workflow.state == s and inp.state is None and inp.lead_seconds == 60.0 and workflow.run_events == 60
    with pytest.raises(ValueError, match="taken already"):
        inp.take_state()


def test_outcomes_of_a_creation_in_the_ledger() -> None:
    run = decide.Run(job_name("cj", T), T)
    s, _, problem = decide.created(state(), run, CreateJobResult(outcome="too_late"), T)
    assert (s.ledger[-1].outcome, s.last_schedule_time, problem) == ("missed-deadline", None, None)
    s, _, problem = decide.created(state(), run, CreateJobResult(outcome="not_ours", message="owned by x"), T)
    assert (s.ledger[-1].outcome, problem) == ("create-failed", "owned by x")
    s, _, _ = decide.created(state(), run, CreateJobResult(outcome="cronjob_gone"), T)
    assert s.observation.gone
    held = state(ledger=[LedgerEntry(scheduled_time=T, outcome="created", job=run.name, job_uid="u")])
    assert decide.ran(held, T + timedelta(seconds=30))  # the same minute's Job


def test_the_entries_since_the_newest_counted_are_each_new_entry_once() -> None:  # batchd_cronjob_runs_total
    def entry(minute: int, outcome: str = "created") -> LedgerEntry:
        t = T + timedelta(minutes=minute)
        return LedgerEntry(scheduled_time=t, outcome=outcome, job=job_name("cj", t))  # type: ignore[arg-type]

    empty = state()
    assert decide.newest_ledger_key(empty) is None and decide.ledger_since(empty, None) == []
    s = state(ledger=[entry(0), entry(1)])
    counted = decide.newest_ledger_key(s)
    assert decide.ledger_since(s, counted) == []
    # a result written into an entry keeps its identity; entries after it are new
    later = state(ledger=[entry(0), replace(entry(1), result="Complete"), entry(2), entry(3, "missed-deadline")])
    assert decide.ledger_since(later, counted) == [entry(2), entry(3, "missed-deadline")]
    # the counted entry has left a full ledger: everything in it came after
    full = state(ledger=[entry(m) for m in range(10, 10 + decide.LEDGER_SIZE)])
    assert len(decide.ledger_since(full, counted)) == decide.LEDGER_SIZE


def test_an_active_window_bounds_the_times_and_ends_once() -> None:  # CJ-WINDOW
    before = sync(state(ran_previously=True, observed={"active_from": T + timedelta(hours=2)}), JUST_AFTER)
    assert before.created == [] and before.wake == T + timedelta(hours=2)
    until = T + timedelta(minutes=30)
    s = state(ran_previously=True, observed={"active_until": until})
    first = sync(s, JUST_AFTER)
    assert first.created == [job_name("cj", T)] and first.wake == until  # once more, to say it ended
    ended = sync(first.state, until)
    assert ended.created == [] and ended.events == ["ActiveWindowEnded"] and ended.wake is None
    assert decide.describe(ended.state, until, wake=None, armed_for=None)["upcoming"] == []
    later = sync(ended.state, T + timedelta(hours=3, minutes=1))
    assert later.created == [] and later.events == [] and later.wake is None
    on_the_bound = sync(state(ran_previously=True, observed={"active_until": T}), JUST_AFTER)
    assert on_the_bound.created == [job_name("cj", T)]


def test_a_run_limit_counts_scheduled_jobs_only_and_stops_the_timer() -> None:  # CJ-MAX-RUNS
    s = state(ran_previously=True, catch_up="all", observed={"max_runs": 2})
    out = sync(s, T + timedelta(hours=2, minutes=1))  # three missed hours, two runs left
    assert out.created == [job_name("cj", T), job_name("cj", T + timedelta(hours=1))]
    assert out.events == ["MaxRunsReached"] and out.wake is None and decide.runs_left(out.state) == 0
    again = sync(out.state, T + timedelta(hours=5, minutes=1))
    assert again.created == [] and again.events == [] and again.wake is None
    d = decide.describe(again.state, T, wake=None, armed_for=None)
    assert (d["maxRuns"], d["remainingRuns"], d["upcoming"]) == (2, 0, [])
    raised = again.state.model_copy(update={"observation": again.state.observation.model_copy(
        update={"max_runs": 3, "catch_up": "latest"})})
    assert sync(raised, T + timedelta(hours=5, minutes=1)).created == [job_name("cj", T + timedelta(hours=5))]
    run = decide.trigger(again.state, T)  # a trigger does not count
    s2, _, _ = decide.created(again.state, run, CreateJobResult(
        outcome="created", job=ObjectReference(name=run.name, namespace="ns", uid="t")), T)
    assert s2.scheduled_runs == again.state.scheduled_runs


def test_describe_lists_only_the_times_that_will_run() -> None:  # CJ-MAX-RUNS, CJ-SKIP
    def upcoming(s: CronJobState, now: datetime = JUST_AFTER) -> list[str]:
        return decide.describe(s, now, wake=None, armed_for=None)["upcoming"]

    def hours(*h: int) -> list[str]:
        return [iso(T + timedelta(hours=n)) for n in h]

    one_left = sync(state(ran_previously=True, observed={"max_runs": 2}), JUST_AFTER)
    assert one_left.created == [job_name("cj", T)] and upcoming(one_left.state) == hours(1)
    assert upcoming(state(ran_previously=True)) == hours(1, 2, 3, 4, 5)
    assert upcoming(state(ran_previously=True, observed={"skip": ["0 */2 * * *"]})) == hours(1, 3, 5, 7, 9)
    both = state(ran_previously=True, observed={"skip": ["0 */2 * * *"], "max_runs": 2})
    assert upcoming(both) == hours(1, 3)
    assert upcoming(state(ran_previously=True, observed={"skip": ["* * * * *"]})) == []  # every time skipped


def test_the_next_schedule_time_shown_is_one_that_runs() -> None:  # CJ-58, CJ-SKIP, CJ-WINDOW
    def at(h: float) -> datetime:
        return T + timedelta(hours=h)

    skip = state(ran_previously=True, observed={"skip": ["0 */2 * * *"]})  # the even hours
    assert decide.next_run(skip, at(1)) == at(1)
    assert decide.next_run(skip, at(2)) == at(3)  # woken at a skipped time: the next that runs is shown
    assert decide.next_run(skip, None) is None
    assert decide.describe(skip, JUST_AFTER, wake=at(2), armed_for=None)["nextScheduleTime"] == iso(at(3))
    assert decide.next_run(state(ran_previously=True, observed={"skip": ["* * * * *"]}), at(1)) is None
    until = state(ran_previously=True, observed={"active_until": at(0.5)})
    assert decide.next_run(until, at(0.5)) is None  # woken to say the window ended: nothing runs
    assert decide.next_run(state(ran_previously=True, observed={"active_until": at(1)}), at(1)) == at(1)
    one_left = state(ran_previously=True, observed={"skip": ["0 */2 * * *"], "max_runs": 1})
    assert decide.next_run(one_left, at(2)) == at(3)
    none_left = one_left.model_copy(update={"scheduled_runs": 1})
    assert decide.next_run(none_left, at(2)) is None


def test_a_skip_calendar_time_makes_no_job_and_enters_the_ledger_once() -> None:  # CJ-SKIP
    s = state(ran_previously=True, observed={"skip": ["0 */2 * * *"]})  # T is 10:00, an even hour
    out = sync(s, JUST_AFTER)
    assert out.created == [] and out.wake == T + timedelta(hours=1)
    assert [(x.scheduled_time, x.outcome) for x in out.state.ledger] == [(T, "skipped-calendar")]
    again = sync(out.state, JUST_AFTER + timedelta(seconds=5))
    assert again.created == [] and len(again.state.ledger) == 1
    odd = sync(out.state, T + timedelta(hours=1, minutes=1))
    assert odd.created == [job_name("cj", T + timedelta(hours=1))]


def test_the_breaker_suspends_after_n_scheduled_failures_in_a_row() -> None:  # CJ-BREAKER
    s = state(ran_previously=True, observed={"suspend_after_failures": 2})
    names = []
    for hour in range(3):
        out = sync(s, T + timedelta(hours=hour, minutes=1))
        names += out.created
        s = out.state
        if hour == 1:  # a Complete in between resets the count
            s, _, _ = decide.job_observed(s, JobSummary(name=out.created[0], uid=f"u{hour}", owner_uid="cj-uid",
                                                        outcome="Complete"), T)
        else:
            s, _, _ = decide.job_observed(s, JobSummary(name=out.created[0], uid=f"u{hour}", owner_uid="cj-uid",
                                                        outcome="Failed"), T)
    assert s.failures_in_a_row == 1 and not s.observation.spec.suspend
    cluster = Cluster(s)
    out = sync(s, T + timedelta(hours=3, minutes=1))
    s, _, _ = decide.job_observed(out.state, JobSummary(name=out.created[0], uid="u3", owner_uid="cj-uid",
                                                        outcome="Failed"), T)
    cluster = Cluster(s)
    end = asyncio.run(execute(decide.run_pass(cluster, T + timedelta(hours=4, minutes=1), armed=False,
                                              subminute=always, clock=lambda: T), cluster))
    [patch] = cluster.suspended
    assert patch.suspend and patch.reason == "2 consecutive failures"
    assert [ev.reason for ev in cluster.events] == ["SuspendedAfterFailures"]
    assert cluster.created == [] and end.wake is None and cluster.state.failures_in_a_row == 0
    assert cluster.state.observation.spec.suspend
    run = decide.trigger(cluster.state, T)  # a triggered Job's failure does not count
    s, _, _ = decide.job_observed(cluster.state, JobSummary(name=run.name, uid="t", outcome="Failed"), T)
    assert s.failures_in_a_row == 0
