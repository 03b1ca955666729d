"""The CronJob controller's decisions, pure: state, the observed CronJob and its Jobs, and ``now`` in;
a plan out.

Layer: workflows (pure; no Temporal API, no I/O, no clock). A pass, :func:`run_pass`, yields
steps (workflows/execute.py): the workflow hands them to the executor, which calls the
activities they name and sends each result back, to be folded into the state here. So every decision of upstream's ``syncCronJob`` (which time is
due, the concurrency policy, which Events, whether the status needs a write, when to look again)
is table-tested without a workflow (tests/unit/test_cronjob_decisions.py).

One name per instant:

* ``now``: the instant a pass runs as of. For an armed creation it is the schedule time the pass
  was woken ahead of (CJ-52), else ``workflow.now()``;
* ``due``: a schedule time the pass acts on;
* ``wake``: when the next pass runs (None: only on a change).

A function that returns a new :class:`CronJobState` never changes the one it was given. The
Events a decision asks for come back with it, in order.

``subminute`` is the one input that is not a value: a callable the planner asks, only when a
schedule time falls in the minute of one already acted on, whether the sub-minute rule
(CJ-SUBMINUTE) applies. The workflow answers with ``workflow.patched``, which leaves a marker in
the history the first time it is asked, so it must be asked only where it matters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from workflows import cron
from workflows.execute import Call, Log, Patched, Steps
from workflows.models.common import (
    CRONJOB_MISSED_EVENT,
    CRONJOB_SUSPENDED_EVENT,
    INVALID_ANNOTATION,
    CloudEvent,
    EventInput,
    ObjectRef,
)
from workflows.models.cronjob import (
    BACKFILL_ANNOTATION,
    BACKFILL_LIMIT,
    BACKFILL_TAKEN_ANNOTATION,
    CRONJOB_COMPONENT,
    FAILED_RUNS_ANNOTATION,
    FAILURES_SINCE_SUCCESS_ANNOTATION,
    LAST_FAILED_JOB_ANNOTATION,
    LAST_FAILURE_TIME_ANNOTATION,
    LEDGER_SIZE,
    MAX_REFS,
    MAX_RUNS_ANNOTATION,
    NEXT_SCHEDULE_ANNOTATION,
    SUCCEEDED_RUNS_ANNOTATION,
    SUSPEND_AFTER_FAILURES_ANNOTATION,
    BackfillInput,
    BackfillResult,
    CreateJobInput,
    CreateJobResult,
    CronJobObservation,
    CronJobRun,
    CronJobState,
    DeleteJobsInput,
    DeleteJobsResult,
    GroupAnswer,
    GroupReport,
    JobSummary,
    LedgerEntry,
    Membership,
    ObjectReference,
    RunSource,
    SetSuspendInput,
    SyncCronJobInput,
    SyncCronJobResult,
    create_cronjob_job,
    delete_cronjob_jobs,
    parse_backfill,
    set_cronjob_suspend,
    tell_group,
)
from workflows.times import plus_seconds
from workflows.times import rfc3339 as iso

RECENT_RUNS = 10
OUTBOX = 200  # NOTIFY-EVENTS: CloudEvents a CronJob keeps while its sink is down
REMEMBERED = 200  # counted Job uids and reported warnings kept for de-duplication

Subminute = Callable[[], bool]
Clock = Callable[[], datetime]


class Books(Protocol):
    """What a pass reads and writes as it goes: the workflow's state (which a signal may replace
    while a step runs) and the Events to record at the end of the pass."""

    state: CronJobState
    events: list[EventInput]


class BackfillRefused(ValueError):
    """A backfill range the workflow refuses (CJ-BACKFILL); nothing is created."""


@dataclass(frozen=True)
class Run:
    """One Job to create: the schedule's (or a backfill's, or a trigger's) for ``due``."""

    name: str
    due: datetime
    source: RunSource = "schedule"
    #: Replace policy (CJ-29): these active Jobs are deleted first, and nothing is created
    #: while one of them survives the delete
    replace: tuple[ObjectReference, ...] = ()
    manual: bool = False


@dataclass(frozen=True)
class Pass:
    """The plan of one pass (upstream's ``syncCronJob``), up to the Job creations.

    The workflow deletes ``history`` (:func:`history_deleted`), then takes ``due`` in order: for
    each, :func:`start` says whether to create and what, and :func:`created` folds the result in;
    with ``catching_up``, :func:`pass_goes_on` says whether the next time runs in this pass. Then
    :func:`wake_after` says when to look again.
    """

    state: CronJobState
    events: list[EventInput] = field(default_factory=list)
    #: finished Jobs beyond the history limits, to delete first (CJ-47 to CJ-50)
    history: list[ObjectReference] = field(default_factory=list)
    #: schedule times to run, oldest first, with their ledger source: the most recent one due, or
    #: with catch-up every missed one (CJ-CATCH-UP)
    due: list[tuple[datetime, RunSource]] = field(default_factory=list)
    catching_up: bool = False
    schedule: cron.Schedule | None = None  # None: nothing is scheduled (deleting, bad schedule, suspended)
    earliest: datetime | None = None
    latest_due: datetime | None = None  # the most recent schedule time due, if any


@dataclass(frozen=True)
class Start:
    """What :func:`start` decided for one due time."""

    state: CronJobState
    events: list[EventInput] = field(default_factory=list)
    run: Run | None = None  # None: nothing to create for this time
    #: Forbid held this time back behind an active Job: the pass creates nothing more
    held: bool = False


@dataclass(frozen=True, slots=True)
class CreateAt:
    """A step: CJ-52, hand ``run``'s creation to the worker until ``at``. Sent back its
    :class:`CreateJobResult`, or None if a signal or an update interrupted the wait."""

    run: Run
    at: datetime


@dataclass(frozen=True, slots=True)
class PassEnd:
    """How a pass ended: when to look again, or ``interrupted`` (an armed creation was, so plan
    again at once, ``wake`` being the pass's own instant)."""

    wake: datetime | None
    interrupted: bool = False


class _Edit:
    """A working copy of the state and the Events asked for; the public functions return both."""

    def __init__(self, state: CronJobState) -> None:
        self.s = state
        self.events: list[EventInput] = []

    @property
    def obs(self) -> CronJobObservation:
        return self.s.observation

    def set(self, **update: Any) -> None:
        self.s = self.s.model_copy(update=update)

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.events.append(_event(self.obs, type_, reason, message))

    def warn_once(self, key: str, reason: str, message: str, *,
                  type_: Literal["Normal", "Warning"] = "Warning") -> None:
        """One Event per ``key`` (CJ-51): a pass that meets the same problem again stays quiet."""
        if key in self.s.reported:
            return
        self.set(reported=[*self.s.reported, key][-REMEMBERED:])
        self.event(type_, reason, message)

    def ledger_once(self, entry: LedgerEntry) -> None:
        """Add ``entry`` unless the ledger has its schedule time with its outcome already (a pass that
        meets the same time again)."""
        if not any(x.scheduled_time == entry.scheduled_time and x.outcome == entry.outcome for x in self.s.ledger):
            self.ledger_add(entry)

    def ledger_add(self, entry: LedgerEntry) -> None:
        self.set(ledger=[*self.s.ledger, entry][-LEDGER_SIZE:])
        # NOTIFY-EVENTS: a run missed or skipped; a time waiting for its group may still run, and is
        # announced by the outcome its wait ends with
        if entry.outcome not in ("created", "replaced", "waited-for-group"):
            self.notify(CRONJOB_MISSED_EVENT, f"{iso(entry.scheduled_time)}/{entry.outcome}", entry.scheduled_time,
                        {"scheduledTime": iso(entry.scheduled_time), "source": entry.source, "outcome": entry.outcome})

    def notify(self, type_: str, occurrence: str, time: datetime, data: dict[str, Any]) -> None:
        """NOTIFY-EVENTS: queue a CloudEvent, if the worker has a sink; the oldest go beyond OUTBOX."""
        o = self.obs
        if o.cloudevents:
            ev = CloudEvent.about(ObjectRef(kind="CronJob", namespace=o.namespace, name=o.name, uid=o.uid),
                                  type_, occurrence, time, data)
            self.set(outbox=[*self.s.outbox, ev][-OUTBOX:])

    def record_run(self, run: CronJobRun) -> None:
        self.set(recent=[*self.s.recent, run][-RECENT_RUNS:])

    def gone(self) -> None:
        self.s = gone(self.s)


# -- what the bridge tells: the CronJob and its Jobs -------------------------------------------

def gone(state: CronJobState) -> CronJobState:
    """The CronJob no longer exists (the bridge said so, or a call found it gone): the workflow ends."""
    return state.model_copy(update={"observation": state.observation.model_copy(update={"gone": True})})


def new_state(obs: CronJobObservation) -> CronJobState:
    """The state of a CronJob object first seen: its own status, no Jobs, no counters."""
    return CronJobState(observation=obs, active=obs.status.active, last_schedule_time=obs.status.last_schedule_time,
                        last_successful_time=obs.status.last_successful_time)


@dataclass(frozen=True)
class Observed:
    state: CronJobState
    changed: bool  # a pass is due
    #: the plan may differ: an armed creation's wait is interrupted (repeats of what is known, a
    #: relist or a second bridge, are not)
    replan: bool
    adopted: bool = False  # a recreated namesake: a new CronJob, and the Events queued for the old one are dropped


def observe(state: CronJobState, obs: CronJobObservation) -> Observed:
    """The CronJob changed (spec, annotations, deletion) or was deleted (CJ-2)."""
    old = state.observation
    if obs.gone:
        if obs.uid and obs.uid != old.uid:
            return Observed(state, changed=False, replan=False)  # the end of a namesake that is not ours
        return Observed(gone(state), changed=True, replan=True)
    if obs.uid != old.uid:  # what the old one had still to tell goes out all the same (NOTIFY-EVENTS), and
        # its concurrency group learns the seat changed hands (CJ-GROUP): the new one's report replaces it
        seat = state.seat.wait_over().model_copy(update={"told": ""}) if state.seat is not None else None
        return Observed(new_state(obs).model_copy(update={"outbox": state.outbox, "seat": seat}), changed=True,
                        replan=True, adopted=True)
    return Observed(state.model_copy(update={"observation": obs}), changed=True,
                    replan=obs.decision_key() != old.decision_key())


def job_observed(state: CronJobState, job: JobSummary, now: datetime) -> tuple[CronJobState, list[EventInput], bool]:
    """One of the CronJob's Jobs finished, or disappeared (CJ-40, CJ-41, CJ-42, CJ-59).

    Returns the state, the Events, and whether anything changed. ``now`` stands in for the time a
    failed Job finished when it says none.
    """
    e = _Edit(state)
    if job.owner_uid and job.owner_uid != e.obs.uid:
        return state, [], False
    if job.also_gone:  # CJ-46: no longer counted by the history limits; nothing shown changes
        e.set(finished=[j for j in e.s.finished if j.uid not in job.also_gone])
        job = job.model_copy(update={"also_gone": ()})
    in_active = any(a.uid == job.uid for a in e.s.active)
    _ledger_result(e, job)
    if job.gone:
        e.set(finished=[j for j in e.s.finished if j.uid != job.uid])
        if not in_active:
            return e.s, e.events, False
        e.set(active=[a for a in e.s.active if a.uid != job.uid])
        e.event("Normal", "MissingJob", f"Active job went missing: {job.name}")
        e.record_run(CronJobRun(job_name=job.name, outcome="Missing"))
        return e.s, e.events, True
    if job.outcome is None:
        return e.s, e.events, False
    if in_active:
        e.set(active=[a for a in e.s.active if a.uid != job.uid])
        _saw_completed(e, job)
    e.set(finished=[*(j for j in e.s.finished if j.uid != job.uid), job])
    if job.outcome == "Complete" and job.completion_time is not None:
        if e.s.last_successful_time is None or job.completion_time > e.s.last_successful_time:
            e.set(last_successful_time=job.completion_time)  # never moves backwards
    if job.uid not in e.s.counted:
        _count(e, job, now)
    return e.s, e.events, True


def _saw_completed(e: _Edit, job: JobSummary) -> None:
    e.event("Normal", "SawCompletedJob", f"Saw completed job: {job.name}, condition: {job.outcome}")


def _count(e: _Edit, job: JobSummary, now: datetime) -> None:
    """CJ-59, CJ-LAST-FAILURE: each finished Job is counted once, whatever the bridge repeats."""
    c = e.s.counters
    e.set(counted=[*e.s.counted, job.uid][-REMEMBERED:])
    if job.outcome == "Complete":
        e.set(counters=c.model_copy(update={"succeeded": c.succeeded + 1, "failures_since_last_success": 0}))
    else:
        e.set(counters=c.model_copy(update={"failed": c.failed + 1,
                                            "failures_since_last_success": c.failures_since_last_success + 1}))
        failed_at = job.finished_at or job.completion_time or now
        if e.s.last_failure_time is None or failed_at >= e.s.last_failure_time:
            e.set(last_failure_time=failed_at, last_failed_job=job.name)
    e.record_run(CronJobRun(job_name=job.name, outcome=job.outcome or "Failed", finished_at=job.completion_time))
    if job.outcome == "Complete":  # CJ-BREAKER: a Complete Job, scheduled or not, resets the count
        e.set(failures_in_a_row=0)
    elif _scheduled(e.s, job.name):
        e.set(failures_in_a_row=e.s.failures_in_a_row + 1)


def _scheduled(state: CronJobState, job_name: str) -> bool:
    """Whether the ledger shows ``job_name`` made by the schedule, not by a trigger or a backfill."""
    return any(x.job == job_name and x.source in ("schedule", "catch-up") for x in state.ledger)


def breaker(state: CronJobState, now: datetime) -> SetSuspendInput | None:
    """CJ-BREAKER: the suspend patch once N scheduled Jobs in a row have Failed; None otherwise."""
    o, n = state.observation, state.observation.suspend_after_failures
    if n is None or state.failures_in_a_row < n or o.spec.suspend or o.deleting:
        return None
    return suspend_change(state, True, f"{n} consecutive failures", now)


def tripped(state: CronJobState, patch: SetSuspendInput,
            now: datetime) -> tuple[CronJobState, list[EventInput]]:
    """Fold the breaker's suspension in: the count starts afresh, and a Warning says why."""
    e = _Edit(suspended(state, patch))
    e.set(failures_in_a_row=0)
    at = patch.at or now
    e.notify(CRONJOB_SUSPENDED_EVENT, f"suspended/{iso(at)}", at,
             {"reason": patch.reason, "suspendedAt": iso(at), "failuresInARow": state.failures_in_a_row})
    e.event("Warning", "SuspendedAfterFailures",
            f"suspended after {patch.reason} of scheduled Jobs ({SUSPEND_AFTER_FAILURES_ANNOTATION}); "
            "resume it with `batchd cronjob resume` or spec.suspend: false")
    return e.s, e.events


# -- one pass ----------------------------------------------------------------------------------

def run_pass(b: Books, now: datetime, *, armed: bool, subminute: Subminute, clock: Clock) -> Steps[PassEnd]:
    """One pass as steps: delete beyond the history limits, then create what is due, in order.

    ``armed``: the pass runs as of ``now``, ahead of the clock, and the Job due then is created by
    the worker at that time (:class:`CreateAt`).
    """
    if (trip := breaker(b.state, clock())) is not None:  # CJ-BREAKER, before anything is due
        res: SyncCronJobResult = yield Call(set_cronjob_suspend, trip, summary="set spec.suspend=true (breaker)")
        if res.gone:
            b.state = gone(b.state)
            return PassEnd(None)
        b.state, events = tripped(b.state, trip, clock())
        b.events += events
    plan = plan_pass(b.state, now, armed=armed, subminute=subminute)
    b.state = plan.state
    b.events += plan.events
    if plan.history:
        b.state = history_deleted(b.state, (yield _delete(b.state, plan.history, "history")))
    b.state = wait_ended(b.state, [due for due, _ in plan.due], now)
    for due, source in plan.due:
        if b.state.observation.gone or runs_left(b.state) == 0:
            break
        begun = start(b.state, due, source, subminute=subminute, catching_up=plan.catching_up)
        b.state = begun.state
        b.events += begun.events
        if begun.held:
            break
        if begun.run is None:
            continue
        if needs_slot(b.state, begun.run) and not (yield from _slot(b, begun.run)):
            break  # CJ-GROUP: the group's answer wakes the workflow
        if not (yield from _start(b, begun.run, at=now if armed else None, clock=clock)):
            return PassEnd(now, interrupted=True)
        b.state = slot_used(b.state, due)
        if plan.catching_up and not pass_goes_on(b.state):
            break
    if plan.due:
        b.state, events = limits_reached(b.state, now)
        b.events += events
    yield from sync_group(b)  # CJ-GROUP: a Job created or ended, a wait begun or over
    return PassEnd(wake_after(plan, b.state, now, subminute))


def _start(b: Books, run: Run, *, at: datetime | None, clock: Clock) -> Steps[bool]:
    """Replace the active Jobs if the run says so, then create its Job (armed: at ``at``).

    False: the armed creation was interrupted or found the spec changed, and nothing was created.
    """
    if run.replace:
        b.state = replaced(b.state, (yield _delete(b.state, list(run.replace), "replace")))
        if b.state.active:
            return True  # could not replace; try again at the next wake
    if at is None:
        yield from create(b, run, clock)
        return True
    res = yield CreateAt(run, at)
    if res is None or res.outcome == "stale":
        return False
    yield from _fold_created(b, run, res, clock)
    return True


# -- concurrency groups (CJ-GROUP) -----------------------------------------------------------------

def needs_slot(state: CronJobState, run: Run) -> bool:
    """A scheduled run of a member waits for its group; a trigger, a backfill, and a Replace (which
    swaps its own Job's slot) do not."""
    return state.observation.concurrency_group is not None and run.source in ("schedule", "catch-up") \
        and not run.replace


def _slot(b: Books, run: Run) -> Steps[bool]:
    """Whether ``run``'s time has its slot; if not, the member reports the time as waiting, and the
    group's answer (``group_answer``: queued, or granted now or later) resumes it."""
    due, seat = run.due, b.state.seat
    if seat is not None and seat.granted is not None:  # the slot is the member's, whichever time it now runs
        _set_seat(b, want=due, source=run.source, granted=due)
        return True
    since = seat.since if seat is not None and seat.since is not None else due
    _set_seat(b, want=due, source=run.source, since=since, granted=None)
    yield from sync_group(b)
    return False


def answered(state: CronJobState, ans: GroupAnswer, now: datetime) -> tuple[CronJobState, list[EventInput], bool]:
    """The ``group_answer`` signal: the waiting time has its slot (a pass is due), or it waits: ledger
    ``waited-for-group`` once, and a Normal Event once per wait. An answer about another time is
    only kept for ``describe``."""
    seat = state.seat
    if seat is None or seat.group != ans.group:
        return state, [], False
    due = seat.want
    about_the_wait = due is not None and seat.granted is None and (ans.want == due or ans.refused is not None)
    granted = about_the_wait and ans.granted
    e = _Edit(state)
    e.set(seat=seat.model_copy(update={"answer": ans, "answered_at": now.replace(microsecond=0),
                                       "granted": due if granted else seat.granted}))
    if not about_the_wait or granted or due is None:
        return e.s, [], granted
    e.ledger_once(LedgerEntry(scheduled_time=due, source=seat.source, outcome="waited-for-group"))
    if ans.refused:
        e.warn_once(f"{INVALID_ANNOTATION}:{ans.refused}", INVALID_ANNOTATION, f"{ans.refused}; the CronJob waits")
    else:
        held = ", ".join(h.job for h in ans.holders) or "slots granted to other CronJobs"
        e.warn_once(f"WaitingForGroup:{iso(seat.since or due)}", "WaitingForGroup",
                    f"schedule time {iso(due)} waits for a slot in concurrency group {seat.group} (limit "
                    f"{ans.limit}, {ans.used} used, held by {held}; place {ans.position} of {ans.waiting})",
                    type_="Normal")
    return e.s, e.events, bool(e.events)


def _set_seat(b: Books, **update: Any) -> None:
    seat = b.state.seat or Membership(group=b.state.observation.concurrency_group or "")
    b.state = b.state.model_copy(update={"seat": seat.model_copy(update=update)})


def slot_used(state: CronJobState, due: datetime) -> CronJobState:
    """After the creation for ``due`` (whatever its outcome): the wait is over. The pass's report then
    turns the grant into its Job, or frees it."""
    seat = state.seat
    if seat is None or seat.want != due:
        return state
    return state.model_copy(update={"seat": seat.wait_over()})


def wait_ended(state: CronJobState, due: list[datetime], now: datetime) -> CronJobState:
    """The waiting time is no longer due. A newer time takes its place in the queue and its slot, if
    granted (as Forbid runs only the latest); past ``startingDeadlineSeconds`` it is
    ``missed-deadline``; else (suspended, a window ended) the wait just ends."""
    seat = state.seat
    if seat is None or seat.want is None or seat.want in due:
        return state
    if any(t > seat.want for t in due):  # the place in the queue, and a slot granted, go to the newer time
        return state.model_copy(update={"seat": seat.model_copy(update={"want": None})})
    e = _Edit(state)
    deadline = wait_deadline(state)
    if deadline is not None and now >= deadline:
        e.ledger_add(LedgerEntry(scheduled_time=seat.want, source=seat.source, outcome="missed-deadline"))
    e.set(seat=seat.wait_over())
    return e.s


def wait_deadline(state: CronJobState) -> datetime | None:
    """When the time waiting for its group passes ``startingDeadlineSeconds``; None without either."""
    sds, seat = state.observation.spec.starting_deadline_seconds, state.seat
    return plus_seconds(seat.want, sds) if seat is not None and seat.want is not None and sds is not None else None


def group_report(state: CronJobState) -> GroupReport | None:
    """The member's whole view for its group; a leave for the group it was in when it left (or is
    gone); None outside any group."""
    o, seat = state.observation, state.seat
    group = None if o.gone else o.concurrency_group
    if seat is None and group is None:
        return None
    if seat is not None and seat.group != group:
        return GroupReport(namespace=o.namespace, group=seat.group, member=o.name, member_uid=o.uid, leave=True)
    want = seat.want if seat is not None else None
    return GroupReport(namespace=o.namespace, group=group or "", member=o.name, member_uid=o.uid,
                       limit=o.concurrency_limit, active=state.active[:MAX_REFS], active_count=len(state.active),
                       want=want, since=seat.since if seat is not None and want is not None else None)


def group_key(rep: GroupReport) -> str:
    return rep.model_dump_json(include={"group", "member_uid", "limit", "want", "since", "leave", "active_count"}) \
        + ",".join(a.uid for a in rep.active)


def sync_group(b: Books) -> Steps[None]:
    """Tell the group the member's view if it changed since it was last told (leaving an old group first)."""
    while (rep := group_report(b.state)) is not None:
        key = group_key(rep)
        if b.state.seat is not None and b.state.seat.told == key:
            return
        yield Call(tell_group, rep, summary=f"{'leave' if rep.leave else 'report to'} concurrency group {rep.group}")
        if rep.leave:
            b.state = b.state.model_copy(update={"seat": None})
            continue
        _set_seat(b, group=rep.group, told=key)
        return


def create(b: Books, run: Run, clock: Clock) -> Steps[CreateJobResult]:
    """Create ``run``'s Job now and fold the result in (a pass, a trigger, a backfill)."""
    res: CreateJobResult = yield Call(create_cronjob_job, create_input(b.state, run),
                                      summary=f"create Job {b.state.observation.namespace}/{run.name}")
    yield from _fold_created(b, run, res, clock)
    return res


def _fold_created(b: Books, run: Run, res: CreateJobResult, clock: Clock) -> Steps[None]:
    ended = _ended_before_folded(b.state, res)
    if ended is not None and not (yield Patched(END_BEFORE_CREATION_PATCH)):
        ended = None  # a history recorded before the patch
    b.state, events, problem = created(b.state, run, res, clock(), ended=ended)
    b.events += events
    if problem:
        o = b.state.observation
        yield Log("warning", f"CronJob {o.namespace}/{o.name}: {problem}")


def _delete(state: CronJobState, refs: list[ObjectReference], purpose: Literal["replace", "history"]) -> Call[Any]:
    o = state.observation
    return Call(delete_cronjob_jobs,
                DeleteJobsInput(namespace=o.namespace, cronjob_name=o.name, cronjob_uid=o.uid, jobs=refs,
                                purpose=purpose),
                summary=f"delete {len(refs)} Job(s) ({purpose})")


def schedule_of(o: CronJobObservation) -> tuple[cron.Schedule, list[cron.ScheduleWarning]]:
    """The CronJob's schedule: ``spec.schedule`` and any ``batchd.io/schedules`` (CJ-SCHEDULES), in
    its time zone. Raises ``cron.ScheduleError`` as :func:`cron.parse_schedule` does."""
    return cron.parse_schedule(o.spec.schedule, o.spec.time_zone, o.schedules)


def plan_pass(state: CronJobState, now: datetime, *, armed: bool, subminute: Subminute) -> Pass:
    """Upstream's ``syncCronJob`` up to the creations: history limits, the schedule, what is due.

    Args:
        state: the workflow's state.
        now: the instant the pass runs as of (for an armed pass, the schedule time, CJ-52).
        armed: the creation is to be handed to the worker, to happen at ``now``.
        subminute: see the module docstring.
    """
    e = _Edit(state)
    if e.obs.deleting:  # CJ-24: a CronJob being deleted only reconciles its status
        return Pass(state)
    history = _beyond_history_limits(e)
    sched = _schedule_checked(e)
    if sched is None:
        return Pass(e.s, e.events, history)
    spec = e.obs.spec
    if _paused(e, now):
        return Pass(e.s, e.events, history)
    earliest = e.s.last_schedule_time or e.obs.creation_timestamp or now
    if e.obs.active_from is not None:  # CJ-WINDOW: no time before the window opens
        earliest = max(earliest, _second_before(e.obs.active_from))
    left = _limits(e, now)
    if left == 0:  # CJ-MAX-RUNS: no time is due any more
        return Pass(e.s, e.events, history, schedule=sched, earliest=earliest)
    until = min(now, e.obs.active_until) if e.obs.active_until is not None else now  # CJ-WINDOW: none after it
    try:
        recent = cron.most_recent_schedule_time(sched, earliest=earliest, now=until,
                                                starting_deadline_seconds=spec.starting_deadline_seconds)
    except cron.ScheduleError as err:  # CJ-15: an impossible date
        e.warn_once(f"{err.reason}:{e.obs.generation}", err.reason, err.message)
        return Pass(e.s, e.events, history)
    # CJ-CATCH-UP: an outage is caught up; a suspension is a decision, and only its latest time runs (CJ-25)
    catch_up = (recent.due is not None and recent.missed != "none" and e.obs.catch_up == "all" and not armed
                and e.s.suspended_since is None and e.s.held_since is None)
    _ledger_pauses(e, sched, earliest=earliest, until=until, due=recent.due)
    if recent.missed == "many" and not catch_up:  # CJ-18: warn, and still run the most recent
        e.warn_once(f"TooManyMissedTimes:{recent.due}", "TooManyMissedTimes",
                    "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
    due: list[tuple[datetime, RunSource]] = []
    if catch_up and recent.due is not None:
        due = _missed(e, sched, earliest=earliest, now=until, latest=recent.due)
    elif recent.due is not None:
        due = [(recent.due, "schedule")]
    return Pass(e.s, e.events, history, due, catch_up, sched, earliest, recent.due)


def _paused(e: _Edit, now: datetime) -> bool:
    """A suspended CronJob (CJ-25) or a held one (FAIL-CLOSED, until the annotation is fixed or
    removed) creates nothing from its schedule; the first pass after it ledgers the times it covered."""
    if e.obs.spec.suspend:
        e.set(suspended_since=e.s.suspended_since or now)
        return True
    if e.obs.held is not None:
        e.warn_once(f"{INVALID_ANNOTATION}:{e.obs.held}", INVALID_ANNOTATION, e.obs.held)
        e.set(held_since=e.s.held_since or now)
        return True
    return False


def _schedule_checked(e: _Edit) -> cron.Schedule | None:
    """The schedule, its warnings (CJ-8) and the annotations' problems recorded; None if it does not parse."""
    try:
        sched, warnings = schedule_of(e.obs)
    except cron.ScheduleError as err:  # CJ-10, CJ-11: waits for a spec change, no retry storm
        e.warn_once(f"{err.reason}:{e.obs.generation}", err.reason, err.message)
        return None
    for w in warnings:
        e.warn_once(f"{w.reason}:{e.obs.generation}", w.reason, w.message)
    if e.obs.problem:
        e.warn_once(f"{INVALID_ANNOTATION}:{e.obs.problem}", INVALID_ANNOTATION, e.obs.problem)
    return sched


def _skipped(o: CronJobObservation, due: datetime) -> bool:
    """CJ-SKIP: whether one of the skip calendar's expressions activates at ``due`` itself."""
    if not o.skip:
        return False
    try:
        skip, _ = cron.parse_schedule(o.skip[0], o.spec.time_zone, o.skip[1:])
    except cron.ScheduleError:
        return False  # an unknown time zone: the schedule itself does not parse either (CJ-10)
    return skip.next(due - timedelta(seconds=1)) == due


def runs_left(state: CronJobState) -> int | None:
    """CJ-MAX-RUNS: how many more Jobs the schedule may create; None without a limit."""
    limit = state.observation.max_runs
    return None if limit is None else max(limit - state.scheduled_runs, 0)


def _limits(e: _Edit, now: datetime) -> int | None:
    """The Events of a window that has ended (CJ-WINDOW) and of a run limit reached (CJ-MAX-RUNS),
    each once; returns :func:`runs_left`."""
    o = e.obs
    if o.active_until is not None and now >= o.active_until:
        e.warn_once(f"ActiveWindowEnded:{iso(o.active_until)}", "ActiveWindowEnded",
                    f"the active window ended at {iso(o.active_until)}; no more scheduled Jobs", type_="Normal")
    if o.max_runs is None:
        if e.s.scheduled_runs:
            e.set(scheduled_runs=0)  # the count starts again when a limit is set again
        return None
    left = runs_left(e.s)
    if left == 0:
        e.warn_once(f"MaxRunsReached:{o.max_runs}", "MaxRunsReached",
                    f"{o.max_runs} scheduled Job(s) created ({MAX_RUNS_ANNOTATION}); no more scheduled Jobs",
                    type_="Normal")
    return left


def delivered(state: CronJobState, event_id: str) -> CronJobState:
    """NOTIFY-EVENTS: take a delivered CloudEvent out of the outbox."""
    return state.model_copy(update={"outbox": [ev for ev in state.outbox if ev.id != event_id]})


def limits_reached(state: CronJobState, now: datetime) -> tuple[CronJobState, list[EventInput]]:
    """After a pass's creations: the Events of a limit its last creation reached."""
    e = _Edit(state)
    _limits(e, now)
    return e.s, e.events


def _second_before(t: datetime) -> datetime:
    """The whole second before ``t`` rounded up: the first activation strictly after it is at or after ``t``."""
    whole = t.replace(microsecond=0)
    return whole - timedelta(seconds=0 if whole < t else 1)


def _missed(e: _Edit, sched: cron.Schedule, *, earliest: datetime, now: datetime,
            latest: datetime) -> list[tuple[datetime, RunSource]]:
    """CJ-CATCH-UP: every missed time within the deadline, oldest first, not only the latest.

    What is still to run is derived from ``lastScheduleTime`` and the ledger, so a worker restart
    loses and repeats none.
    """
    missed = cron.missed_times(sched, earliest=earliest, now=now,
                               starting_deadline_seconds=e.obs.spec.starting_deadline_seconds, keep=LEDGER_SIZE)
    if missed.dropped:
        e.warn_once(f"TooManyMissedTimes:{iso(missed.times[0])}", "TooManyMissedTimes",
                    f"more than {LEDGER_SIZE} missed schedule times since {iso(earliest)}; catch-up runs "
                    f"the latest {LEDGER_SIZE}, from {iso(missed.times[0])}")
        known = {entry.scheduled_time for entry in e.s.ledger}
        for t in missed.dropped:
            if t not in known:
                e.ledger_add(LedgerEntry(scheduled_time=t, source="catch-up", outcome="too-many-missed"))
    return [(t, "schedule" if t == latest else "catch-up") for t in missed.times]


def already_processed(state: CronJobState, due: datetime, subminute: Subminute) -> bool:
    """CJ-26: the Job for ``due`` is active, or ``due`` falls in the last schedule time's minute.

    Upstream compares the instants; within one minute every time names the same Job (CJ-31), so a
    sub-minute schedule meets it again and acts once a minute (CJ-SUBMINUTE).
    """
    name = cron.job_name(state.observation.name, due)
    last = state.last_schedule_time
    if last == due or any(a.name == name for a in state.active):
        return True
    return last is not None and cron.job_name(state.observation.name, last) == name and subminute()


def start(state: CronJobState, due: datetime, source: RunSource, *, subminute: Subminute,
          catching_up: bool = False) -> Start:
    """Apply the concurrency policy (CJ-28, CJ-29) to one due time: what to create.

    Nothing for a time already processed (CJ-26) or, ``catching_up``, one whose Job the ledger
    shows created.
    """
    e = _Edit(state)
    if already_processed(state, due, subminute) or (catching_up and ran(state, due)):
        return Start(state)
    if _skipped(e.obs, due):  # CJ-SKIP
        e.ledger_once(LedgerEntry(scheduled_time=due, source=source, outcome="skipped-calendar"))
        return Start(e.s, e.events)
    policy = e.obs.spec.concurrency_policy
    if policy == "Forbid" and e.s.active:
        e.warn_once(f"JobAlreadyActive:{iso(due)}", "JobAlreadyActive",
                    "Not starting job because prior execution is running and concurrency policy is Forbid",
                    type_="Normal")
        # with catch-up, a time held back runs once the active Job ends: it is not skipped
        if e.obs.catch_up != "all" and not any(x.scheduled_time == due and x.source == "schedule"
                                               for x in e.s.ledger):
            e.ledger_add(LedgerEntry(scheduled_time=due, outcome="skipped-concurrency"))
        return Start(e.s, e.events, held=True)
    replace = tuple(e.s.active) if policy == "Replace" else ()
    return Start(e.s, e.events, Run(cron.job_name(e.obs.name, due), due, source, replace))


def replaced(state: CronJobState, res: DeleteJobsResult) -> CronJobState:
    """Fold the Replace policy's delete in; a Job that survived it blocks the creation (CJ-29)."""
    return state.model_copy(update={"active": [a for a in state.active if a.name not in res.deleted]})


def create_input(state: CronJobState, run: Run) -> CreateJobInput:
    """The creation of ``run``'s Job (CJ-30, CJ-32 to CJ-35: name, labels, annotations, owner)."""
    o = state.observation
    annotation = None
    if not run.manual:
        try:
            annotation = cron.scheduled_timestamp_annotation(run.due, o.spec.time_zone)
        except cron.ScheduleError:
            pass
    return CreateJobInput(namespace=o.namespace, cronjob_name=o.name, cronjob_uid=o.uid, job_name=run.name,
                          scheduled=run.due, manual=run.manual, scheduled_annotation=annotation)


def armed_input(state: CronJobState, run: Run, *, at: datetime, wait_seconds: float) -> CreateJobInput:
    """An armed creation (CJ-52): the worker waits until ``at`` and creates nothing if the spec or
    what the annotations decide changed meanwhile (its generation, the decision key), or the
    starting deadline passed."""
    o, sds = state.observation, state.observation.spec.starting_deadline_seconds
    return create_input(state, run).model_copy(update={
        "not_before": at, "wait_at_most": wait_seconds, "generation": o.generation, "observed": o.decision_key(),
        "latest": plus_seconds(run.due, sds) if sds is not None else None})


#: ``Patched`` id: a Job whose end was folded in before its creation's result is not made active
#: (:func:`created`); histories recorded before it replay as they ran.
END_BEFORE_CREATION_PATCH = "end-before-creation"


def _ended_before_folded(state: CronJobState, res: CreateJobResult) -> JobSummary | None:
    """The end of ``res``'s new Job, when it was folded in first: the bridge's report of a Job that
    ended at once can reach the workflow in the same activation as the creation's result, and a
    signal is handled before a result."""
    if res.outcome != "created" or res.job is None:
        return None
    return next((j for j in state.finished if j.uid == res.job.uid), None)


def created(state: CronJobState, run: Run, res: CreateJobResult, now: datetime, *,
            ended: JobSummary | None = None) -> tuple[CronJobState, list[EventInput], str | None]:
    """Fold a creation's result in (CJ-39, CJ-44, CJ-LEDGER); returns the state, the Events and a
    line to log, if any.

    ``now``: when the creation returned (the ledger's ``createdAt``). ``ended``: the new Job's end,
    folded in first (:func:`_ended_before_folded`): the Job is not active, it is seen completed at
    once, as upstream's next pass would see it. Else it stayed active until the history limits
    deleted it, and a ``Forbid`` CronJob waited for it for ever.
    """
    e = _Edit(state)
    if res.outcome == "cronjob_gone":
        e.gone()
    elif ended is not None:
        _saw_completed(e, ended)
    elif res.job is not None and not res.finished and not any(a.uid == res.job.uid for a in e.s.active):
        # A finished namesake (two runs in one minute, CJ-31) is not active again: the bridge
        # already reported its end and would not report it twice.
        e.set(active=[*e.s.active, res.job])
    _ledger_created(e, run, res, now)
    if ended is not None:
        _ledger_result(e, ended)
    if run.manual or run.source == "backfill":
        return e.s, e.events, None
    if res.outcome in ("created", "exists"):
        e.set(last_schedule_time=run.due)
        if e.obs.max_runs is not None:  # CJ-MAX-RUNS
            e.set(scheduled_runs=e.s.scheduled_runs + 1)
    elif res.outcome == "not_ours":
        return e.s, e.events, res.message
    return e.s, e.events, None  # "too_late" included: the missed time is dropped silently (CJ-20)


def pass_goes_on(state: CronJobState) -> bool:
    """After a creation in a catch-up list: whether the next time runs in this pass (Forbid: after its end)."""
    return not state.observation.gone and not (state.observation.spec.concurrency_policy == "Forbid" and state.active)


def wake_after(p: Pass, state: CronJobState, now: datetime, subminute: Subminute) -> datetime | None:
    """When the next pass runs (CJ-21, CJ-60): the next schedule time after the last one acted on, plus jitter."""
    if p.schedule is None or p.earliest is None:
        return None
    sched = p.schedule
    last = state.last_schedule_time
    wake = cron.next_wakeup(sched, earliest=max(last, p.earliest) if last else p.earliest, now=now)
    if p.latest_due is not None:
        later = cron.next_in_another_minute(sched, wake, p.latest_due)
        if later != wake and subminute():
            wake = later
    o = state.observation
    if runs_left(state) == 0:
        return None  # CJ-MAX-RUNS
    deadline = wait_deadline(state)  # CJ-GROUP: a time waiting for its group gives up at its deadline
    if deadline is not None and deadline > now and (wake is None or deadline < wake):
        wake = deadline
    if wake is not None and o.active_until is not None and wake > o.active_until:
        return o.active_until if now < o.active_until else None  # CJ-WINDOW: wake once more, to say it ended
    if wake is not None and o.jitter_percent:
        after = sched.next(wake)
        if after is not None:
            wake = plus_seconds(wake, cron.jitter(wake, percent=o.jitter_percent, interval=after - wake,
                                                  key=f"{o.namespace}/{o.name}").total_seconds())
    return wake


def _beyond_history_limits(e: _Edit) -> list[ObjectReference]:
    """CJ-47 to CJ-50: the oldest finished Jobs beyond each limit, to delete."""
    spec = e.obs.spec
    excess: list[JobSummary] = []
    for outcome, limit in (("Complete", spec.successful_jobs_history_limit),
                           ("Failed", spec.failed_jobs_history_limit)):
        if limit is None:
            continue
        jobs = sorted((j for j in e.s.finished if j.outcome == outcome),
                      key=lambda j: (j.start_time is None, j.start_time or datetime.min.replace(tzinfo=UTC), j.name))
        excess += jobs[: max(0, len(jobs) - limit)]
    if spec.successful_jobs_history_limit is None and spec.failed_jobs_history_limit is None:
        e.set(finished=[])  # nothing to enforce, nothing to remember
    return [ObjectReference(name=j.name, namespace=e.obs.namespace, uid=j.uid) for j in excess]


def only_tidying(state: CronJobState, now: datetime) -> bool:
    """CJ-53: whether a Job's end during an armed wait leaves the armed creation as planned, so that
    :func:`tidy` is all a pass would add. Not when the breaker trips (CJ-BREAKER: nothing more is
    created) or a one-at-a-time backfill waits for that end (CJ-BACKFILL)."""
    return not state.backfill and breaker(state, now) is None


def tidy(b: Books) -> Steps[None]:
    """What a pass does about a Job's end before it plans, while the creation stays armed: delete
    the finished Jobs beyond the history limits (CJ-47 to CJ-50)."""
    e = _Edit(b.state)
    history = [] if e.obs.deleting else _beyond_history_limits(e)
    b.state = e.s
    if history:
        b.state = history_deleted(b.state, (yield _delete(b.state, history, "history")))


def history_deleted(state: CronJobState, res: DeleteJobsResult) -> CronJobState:
    """Fold the history limits' delete in: a deleted Job is neither remembered nor active."""
    gone = set(res.deleted)
    return state.model_copy(update={"finished": [j for j in state.finished if j.name not in gone],
                                    "active": [a for a in state.active if a.name not in gone]})


# -- the status write --------------------------------------------------------------------------

def status(state: CronJobState, wake: datetime | None, events: list[EventInput] | None = None) -> SyncCronJobInput:
    """The status and batchd's annotations (CJ-45, CJ-58, CJ-59), and ``events`` to record after
    them; ``wake`` is the next wake-up, and the next schedule time shown is the next that runs
    (:func:`next_run`)."""
    o, c = state.observation, state.counters
    shown = next_run(state, wake)
    return SyncCronJobInput(
        namespace=o.namespace, name=o.name, uid=o.uid, active=state.active, events=events or [],
        last_schedule_time=state.last_schedule_time, last_successful_time=state.last_successful_time,
        annotations={
            NEXT_SCHEDULE_ANNOTATION: iso(shown) if shown else None,
            SUCCEEDED_RUNS_ANNOTATION: str(c.succeeded),
            FAILED_RUNS_ANNOTATION: str(c.failed),
            FAILURES_SINCE_SUCCESS_ANNOTATION: str(c.failures_since_last_success),
            LAST_FAILURE_TIME_ANNOTATION: iso(state.last_failure_time) if state.last_failure_time else None,
            LAST_FAILED_JOB_ANNOTATION: state.last_failed_job,
            BACKFILL_TAKEN_ANNOTATION: state.backfill_taken,
        })


def status_key(state: CronJobState, wake: datetime | None) -> tuple[Any, ...]:
    """What the status write depends on: a pass that changes none of it writes nothing."""
    c = state.counters
    return (tuple(a.uid for a in state.active), state.last_schedule_time, state.last_successful_time, wake,
            c.succeeded, c.failed, c.failures_since_last_success, state.last_failure_time, state.backfill_taken)


# -- operator controls -------------------------------------------------------------------------

def base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def trigger(state: CronJobState, now: datetime) -> Run:
    """CJ-61: a Job now, as ``kubectl create job --from=cronjob/NAME`` makes it, under a distinct name."""
    return Run(manual_job_name(state.observation.name, now), now, "trigger", manual=True)


def manual_job_name(cronjob: str, now: datetime) -> str:
    """A triggered Job's name: never a scheduled one's (those end in the minute, digits only)."""
    return f"{cronjob[:52]}-m{base36(int(now.timestamp()))}"


def suspend_change(state: CronJobState, suspend: bool, reason: str | None, now: datetime) -> SetSuspendInput | None:
    """CJ-SUSPEND: the patch that sets ``spec.suspend`` and its annotations; None if nothing changes.

    A suspended CronJob given a new reason keeps its ``suspended-at``.
    """
    o = state.observation
    renote = suspend and reason is not None and reason != o.suspend_reason
    if o.spec.suspend == suspend and not renote:
        return None
    at = now.replace(microsecond=0) if suspend and not (o.spec.suspend and o.suspended_at) else None
    return SetSuspendInput(namespace=o.namespace, name=o.name, uid=o.uid, suspend=suspend, reason=reason, at=at)


def suspended(state: CronJobState, patch: SetSuspendInput) -> CronJobState:
    """Fold a written suspend patch in, before the bridge reports it back."""
    o = state.observation
    return state.model_copy(update={"observation": o.model_copy(update={
        "spec": o.spec.model_copy(update={"suspend": patch.suspend}),
        "suspend_reason": patch.reason if patch.suspend else None,
        "suspended_at": iso(patch.at) if patch.at else o.suspended_at if patch.suspend else None}),
        # CJ-BREAKER: a resume starts the count of failures afresh
        "failures_in_a_row": state.failures_in_a_row if patch.suspend else 0})


def backfill_times(state: CronJobState, inp: BackfillInput, now: datetime) -> list[datetime]:
    """CJ-BACKFILL: the schedule times from ``from`` to ``to``, one per Job name (per minute, CJ-31).

    Raises:
        BackfillRefused: the range is bad, too long or in the future, or one at a time is still running.
    """
    if inp.start.tzinfo is None or inp.to.tzinfo is None:
        raise BackfillRefused("--from and --to need a time zone offset (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
    if inp.start > inp.to:
        raise BackfillRefused(f"--from {iso(inp.start)} is after --to {iso(inp.to)}")
    if inp.to > now:
        raise BackfillRefused(f"--to {iso(inp.to)} is in the future; the schedule itself runs those times")
    if inp.one_at_a_time and state.backfill:
        raise BackfillRefused(f"a one-at-a-time backfill is still running ({len(state.backfill)} time(s) to go)")
    o = state.observation
    try:
        schedule, _ = schedule_of(o)
    except cron.ScheduleError as err:
        raise BackfillRefused(err.message) from None
    times = cron.schedule_times(schedule, first=inp.start, last=inp.to, limit=BACKFILL_LIMIT)
    if times is None:
        raise BackfillRefused(f"more than {BACKFILL_LIMIT} schedule times from {iso(inp.start)} to {iso(inp.to)}; "
                              "split the range")
    by_name = {cron.job_name(o.name, t): t for t in reversed(times)}  # the first time of each minute
    return sorted(by_name.values())


def backfill_asked(state: CronJobState) -> tuple[CronJobState, BackfillInput | None]:
    """CJ-BACKFILL-DOOR: the backfill that ``batchd.io/backfill`` asks for, once per value.

    The state records the value taken, and the status write copies it to
    ``batchd.io/backfill-taken``, so a workflow that starts afresh on a CronJob it took before (its
    state lost) does not run it again. A removed or unreadable annotation clears the record.
    """
    o = state.observation
    if o.backfill == state.backfill_taken:
        return state, None
    state = state.model_copy(update={"backfill_taken": o.backfill})
    if o.backfill is None or o.backfill == o.backfill_taken:
        return state, None
    asked = parse_backfill(o.backfill)
    return state, None if isinstance(asked, str) else asked


def backfill_event(state: CronJobState, result: BackfillResult | BackfillRefused) -> EventInput:
    """CJ-BACKFILL-DOOR: what became of the annotation's backfill: ``Backfilled``, or the Warning
    ``InvalidBackfill`` when it was refused (the update's refusals)."""
    o = state.observation
    asked = f"{BACKFILL_ANNOTATION}={o.backfill}"
    if isinstance(result, BackfillRefused):
        return _event(o, "Warning", "InvalidBackfill", f"{asked} refused: {result}")
    counts = ", ".join(f"{len(getattr(result, k))} {k}" for k in ("created", "existed", "failed", "queued"))
    return _event(o, "Warning" if result.failed else "Normal", "Backfilled",
                  f"{asked}: {result.times} schedule time(s): {counts}")


def _event(o: CronJobObservation, type_: Literal["Normal", "Warning"], reason: str, message: str) -> EventInput:
    return EventInput(ref=ObjectRef(kind="CronJob", namespace=o.namespace, name=o.name, uid=o.uid),
                      type=type_, reason=reason, message=message, component=CRONJOB_COMPONENT)


def backfill_run(state: CronJobState, due: datetime) -> Run:
    """The creation for one backfilled time. Skip it if :func:`ran` says its Job was created already:
    it may be gone by now (history limits), and it is not made twice."""
    return Run(cron.job_name(state.observation.name, due), due, "backfill")


def backfilled(result: BackfillResult, run: Run, res: CreateJobResult | None) -> BackfillResult:
    """Add one time to a backfill's answer: created, existed (``res`` None: the ledger knew it) or failed."""
    if res is None or res.outcome == "exists":
        return result.model_copy(update={"existed": [*result.existed, run.name]})
    if res.outcome == "created":
        return result.model_copy(update={"created": [*result.created, run.name]})
    why = "the CronJob is gone" if res.outcome == "cronjob_gone" else (res.message or res.outcome)
    return result.model_copy(update={"failed": [*result.failed, f"{run.name}: {why}"]})


def next_backfill(state: CronJobState) -> tuple[CronJobState, datetime | None]:
    """CJ-BACKFILL one at a time: the queue's next time to create, once the Job before it has ended.

    Returns the state (the queue advanced past Jobs that have ended) and the time to create now,
    if any. After creating it, fold with :func:`backfill_started`.
    """
    s = state
    while s.backfill and not s.observation.gone:
        t = s.backfill[0]
        if any(a.name == cron.job_name(s.observation.name, t) for a in s.active):
            break  # still running: its end (job_observed) wakes the loop
        if not s.backfilling:
            return s, t
        s = s.model_copy(update={"backfill": s.backfill[1:], "backfilling": False})
    return s, None


def backfill_started(state: CronJobState, res: CreateJobResult | None) -> CronJobState:
    """Fold in the creation of the queue's first time: it runs now, or (finished, failed) it is done."""
    running = res is not None and res.outcome in ("created", "exists") and not res.finished
    if running:
        return state.model_copy(update={"backfilling": True})
    return state.model_copy(update={"backfill": state.backfill[1:], "backfilling": False})


def backfill_queued(state: CronJobState) -> list[str]:
    """The Jobs a one-at-a-time backfill has still to create, in order."""
    waiting = state.backfill[1:] if state.backfilling else state.backfill
    return [cron.job_name(state.observation.name, t) for t in waiting]


# -- the run ledger (CJ-LEDGER) --------------------------------------------------------------------

LedgerKey = tuple[datetime, str, str, str | None]


def ledger_key(entry: LedgerEntry) -> LedgerKey:
    """A ledger entry's identity (its result aside, which changes as its Job runs)."""
    return entry.scheduled_time, entry.source, entry.outcome, entry.job


def newest_ledger_key(state: CronJobState) -> LedgerKey | None:
    return ledger_key(state.ledger[-1]) if state.ledger else None


def ledger_since(state: CronJobState, newest: LedgerKey | None) -> list[LedgerEntry]:
    """The entries added after the one whose key is ``newest`` (entries are only ever appended);
    all of them if it has left the ledger, or if there was none."""
    for i in range(len(state.ledger) - 1, -1, -1):
        if ledger_key(state.ledger[i]) == newest:
            return state.ledger[i + 1:]
    return list(state.ledger)


def ran(state: CronJobState, due: datetime) -> bool:
    """Whether the ledger shows a Job created for the schedule time ``due`` (its minute's Job, CJ-31)."""
    name = cron.job_name(state.observation.name, due)
    return any(x.job == name and x.outcome in ("created", "replaced") for x in state.ledger)


def _ledger_created(e: _Edit, run: Run, res: CreateJobResult, now: datetime) -> None:
    """The entry for a creation's outcome; a Job already in the ledger (found again as "exists") adds none."""
    if res.outcome in ("created", "exists") and res.job is not None:
        if any(x.job_uid == res.job.uid for x in e.s.ledger):
            return
        e.ledger_add(LedgerEntry(
            scheduled_time=run.due, source=run.source, outcome="replaced" if run.replace else "created",
            job=res.job.name, job_uid=res.job.uid, created_at=now.replace(microsecond=0),
            result=None if res.finished else "running"))
    elif res.outcome == "too_late":
        e.ledger_add(LedgerEntry(scheduled_time=run.due, source=run.source, outcome="missed-deadline"))
    elif res.outcome in ("invalid", "not_ours"):
        e.ledger_add(LedgerEntry(scheduled_time=run.due, source=run.source, outcome="create-failed",
                                 job=res.job.name if res.job else None))


def _ledger_result(e: _Edit, job: JobSummary) -> None:
    result = "deleted" if job.gone else job.outcome
    if result is None:
        return
    e.set(ledger=[replace(x, result=result)
                  if x.job_uid == job.uid and (result != "deleted" or x.result in (None, "running")) else x
                  for x in e.s.ledger])


def _ledger_pauses(e: _Edit, sched: cron.Schedule, *, earliest: datetime, until: datetime,
                   due: datetime | None) -> None:
    """The first pass after a suspension (CJ-25) or a hold (FAIL-CLOSED): every schedule time it
    covered, but the one now due, is "suspended" (or "held")."""
    pauses: tuple[tuple[Literal["suspended", "held"], datetime | None], ...] = (
        ("suspended", e.s.suspended_since), ("held", e.s.held_since))
    for outcome, since in pauses:
        if since is not None:
            e.set(**{f"{outcome}_since": None})
            _ledger_times(e, sched, since=max(since, earliest), until=until, due=due, outcome=outcome)


def _ledger_times(e: _Edit, sched: cron.Schedule, *, since: datetime, until: datetime, due: datetime | None,
                  outcome: Literal["suspended", "held"]) -> None:
    t = sched.next(since)
    after = sched.next(t) if t is not None else None
    if t is not None and after is not None and after > t and (until - since) / (after - t) > 2 * LEDGER_SIZE:
        # a long pause of a busy schedule: only the last times would be kept, so start near them
        t = sched.next(until - (after - t) * 2 * LEDGER_SIZE)
    skipped: list[datetime] = []
    for _ in range(4 * LEDGER_SIZE):  # bounded for irregular schedules too
        if t is None or t > until:
            break
        if t != due:
            skipped = [*skipped, t][-LEDGER_SIZE:]
        t = sched.next(t)
    for t in skipped:
        e.ledger_add(LedgerEntry(scheduled_time=t, outcome=outcome))


# -- queries ---------------------------------------------------------------------------------------

#: how many of the next times ``describe`` lists, and how many schedule times it reads to find them
UPCOMING, UPCOMING_SCAN = 5, 1000


def describe(state: CronJobState, now: datetime, *, wake: datetime | None,
             armed_for: datetime | None) -> dict[str, Any]:
    """The ``describe`` query: schedule, the times that will run, active Jobs, counters and recent results."""
    o, spec = state.observation, state.observation.spec

    def opt(t: datetime | None) -> str | None:
        return iso(t) if t else None

    return {
        "namespace": o.namespace, "name": o.name, "uid": o.uid,
        "schedule": spec.schedule, "schedules": o.schedules, "timeZone": spec.time_zone, "suspend": spec.suspend,
        "suspendReason": o.suspend_reason, "suspendedAt": o.suspended_at,
        "concurrencyPolicy": spec.concurrency_policy,
        "startingDeadlineSeconds": spec.starting_deadline_seconds,
        # armed: the pass has no wake yet; a wake at which nothing runs shows the next time that does
        "nextScheduleTime": opt(next_run(state, wake) if wake else armed_for), "armedFor": opt(armed_for),
        "upcoming": [] if spec.suspend or o.held else _upcoming(state, now),
        "held": o.held,
        "active": [a.name for a in state.active],
        "lastScheduleTime": opt(state.last_schedule_time),
        "lastSuccessfulTime": opt(state.last_successful_time),
        "lastFailureTime": opt(state.last_failure_time), "lastFailedJob": state.last_failed_job,
        "catchUp": o.catch_up,
        "activeFrom": opt(o.active_from), "activeUntil": opt(o.active_until),
        "maxRuns": o.max_runs, "remainingRuns": runs_left(state), "skip": o.skip,
        "suspendAfterFailures": o.suspend_after_failures, "failuresInARow": state.failures_in_a_row,
        "concurrencyGroup": _describe_seat(state),
        "backfillQueue": [cron.job_name(o.name, t) for t in state.backfill],
        "counters": state.counters.model_dump(by_alias=True),
        "recentRuns": [r.model_dump(mode="json", by_alias=True) for r in state.recent],
        "warnings": state.reported[-10:],
    }


def _upcoming(state: CronJobState, now: datetime) -> list[str]:
    """``describe``'s next times that will run (at most :data:`UPCOMING`)."""
    try:
        return [iso(t) for t in _runs(state, now, UPCOMING)]
    except cron.ScheduleError as err:
        return [f"error: {err.reason}"]


def _runs(state: CronJobState, after: datetime, wanted: int) -> list[datetime]:
    """The first ``wanted`` schedule times after ``after`` that will run: none past the run limit
    (CJ-MAX-RUNS) or the active window (CJ-WINDOW), none in the skip calendar (CJ-SKIP).

    Raises:
        cron.ScheduleError: the schedule does not parse.
    """
    o, left = state.observation, runs_left(state)
    runs: list[datetime] = []
    wanted = wanted if left is None else min(wanted, left)
    schedule, _ = schedule_of(o)
    t: datetime | None = max(after, _second_before(o.active_from)) if o.active_from else after
    for _ in range(UPCOMING_SCAN):  # bounded: a skip calendar may skip every time
        if len(runs) >= wanted:
            break
        t = schedule.next(t) if t is not None else None
        if t is None or (o.active_until is not None and t > o.active_until):
            break
        if not _skipped(o, t):
            runs.append(t)
    return runs


def next_run(state: CronJobState, wake: datetime | None) -> datetime | None:
    """CJ-58: the next schedule time shown (``describe``, ``batchd.io/next-schedule-time``,
    ``NextScheduleTime``) for a pass that sleeps until ``wake``: the wake-up itself, unless nothing
    runs then (a time the skip calendar skips, or the end of the active window), when it is the
    next time that will run, or None if none will."""
    o = state.observation
    if wake is None or not (_skipped(o, wake) or (o.active_until is not None and wake >= o.active_until)):
        return wake
    try:
        later = _runs(state, wake - timedelta(seconds=1), 1)
    except cron.ScheduleError:
        return None
    return later[0] if later else None


def _describe_seat(state: CronJobState) -> dict[str, Any] | None:
    """CJ-GROUP: the group as its last answer showed it (``asOf``); ``batchd cronjob describe`` adds the
    group workflow's own, current view."""
    o, seat = state.observation, state.seat
    if o.concurrency_group is None:
        return None
    ans = seat.answer if seat is not None and seat.group == o.concurrency_group else None
    return {
        "name": o.concurrency_group, "limit": o.concurrency_limit, "groupLimit": ans.limit if ans else None,
        "waitingFor": iso(seat.want) if seat and seat.want else None,
        "waitingSince": iso(seat.since) if seat and seat.want and seat.since else None,
        "position": ans.position if ans and seat and seat.want and not seat.granted else None,
        "used": ans.used if ans else None, "waiting": ans.waiting if ans else None,
        "holders": [{"cronjob": h.cronjob, "job": h.job} for h in ans.holders] if ans else [],  # the first 5
        "queue": [{"cronjob": w.cronjob, "scheduledTime": iso(w.scheduled_time)} for w in ans.queue] if ans else [],
        "asOf": iso(seat.answered_at) if seat and seat.answered_at else None,
    }


def history(state: CronJobState) -> list[dict[str, Any]]:
    """The ``history`` query (CJ-LEDGER): the last 100 schedule times, triggers and backfills, oldest first."""
    return [{"scheduledTime": iso(x.scheduled_time), "source": x.source, "outcome": x.outcome, "job": x.job,
             "jobUID": x.job_uid, "createdAt": iso(x.created_at) if x.created_at else None, "result": x.result}
            for x in state.ledger]
