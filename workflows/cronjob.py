"""CronJob (KEP-19) as one long-lived durable workflow per CronJob.

Layer: workflows (deterministic). Started and signalled by the bridge (worker/bridge.py) on
``cronjob/{ns}/{name}``; operators call its updates ``trigger``, ``suspend`` and ``resume`` and
its query ``describe`` (``batchd cronjob …``, ``temporal workflow update execute …``, the SDK).
Activities (activities/cronjob.py) are called by name as local activities.

The upstream controller's sync (``syncCronJob``) becomes one pass of :meth:`sync`, and its
workqueue ``AddAfter`` a durable timer to the next schedule time:

1. ``cleanup_finished_jobs``: history limits (C30–C33);
2. ``parse``: time zone, then schedule (B6–B11) — a problem becomes one Warning Event and the
   workflow waits for a spec change, with no retry storm;
3. suspend (C10), then ``most_recent_schedule_time`` (B12–B19): only the latest missed time
   within ``startingDeadlineSeconds`` runs;
4. already processed (C11), concurrency policy (C12–C14), create the Job (C15–C25);
5. write status and batchd's annotations (next schedule time, counters) when they changed;
6. sleep until the next schedule time (plus the optional jitter) or until a signal or an update
   changes something.

Armed creation (``lead_seconds`` > 0, policy Allow): the timer fires ``lead`` before the time and
that pass runs as of the time itself, handing the creation to ``create_cronjob_job_at`` on the
worker's timed queue. The activity waits in the worker and creates the Job on the second, so a
burst of CronJobs sharing a schedule needs no server round trip at the schedule time. At the time
it re-reads the CronJob and creates nothing if the spec changed meanwhile (its generation) or the
starting deadline passed; a signal or an update during the wait cancels it and the pass re-plans.
Forbid and Replace depend on which Jobs are active at the time, so they always wake at the time.

Spec references: shared/spec/cronjob-and-ttl.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from workflows import cron
    from workflows.identity import NEXT_SCHEDULE_TIME, timed_task_queue
    from workflows.models.common import EventInput, ObjectRef
    from workflows.models.cronjob import (
        BACKFILL_LIMIT,
        FAILED_RUNS_ANNOTATION,
        FAILURES_SINCE_SUCCESS_ANNOTATION,
        LAST_FAILED_JOB_ANNOTATION,
        LAST_FAILURE_TIME_ANNOTATION,
        LEDGER_SIZE,
        NEXT_SCHEDULE_ANNOTATION,
        SUCCEEDED_RUNS_ANNOTATION,
        BackfillInput,
        BackfillResult,
        CreateJobInput,
        CreateJobResult,
        CronJobInput,
        CronJobObservation,
        CronJobRun,
        CronJobState,
        DeleteJobsInput,
        DeleteJobsResult,
        JobSummary,
        LedgerEntry,
        ObjectReference,
        RunSource,
        SetSuspendInput,
        SuspendInput,
        SuspendResult,
        SyncCronJobInput,
        SyncCronJobResult,
        TriggerInput,
        TriggerResult,
    )
    from workflows.policies import K8S_BEST_EFFORT_RETRY, K8S_CALL_TIMEOUT, K8S_RETRY
    from workflows.times import plus_seconds

COMPONENT = "batchd-cronjob-controller"
#: ``workflow.patched`` id: a schedule time in the minute of one already considered is not acted
#: on again (CJ-SUBMINUTE); histories recorded before it replay without it.
ONE_PASS_A_MINUTE = "one-pass-a-minute"
RECENT_RUNS = 10
REMEMBERED = 200  # counted Job uids and reported warnings kept for de-duplication
#: An armed creation's time limit beyond its wait, for the creation itself (a worker killed while
#: it waits is noticed sooner, by the heartbeat); the retry (idempotent by name) creates the Job.
ARMED_SLACK = timedelta(seconds=10)
#: how soon a worker that died holding an armed creation is noticed, and the creation retried
ARMED_HEARTBEAT = timedelta(seconds=10)
#: Continue-as-new beyond this many events (about 25 runs), well before the server suggests it:
#: a workflow woken outside the sticky cache replays its whole run, so short runs wake cheaply.
HISTORY_EVENTS = 500
#: After a "stale" armed creation, how long to wait for the bridge to deliver the new spec.
STALE_WAIT = timedelta(seconds=60)


def _outcome_unused(task: asyncio.Task[Any]) -> None:
    """Retrieve an abandoned activity's end, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


@workflow.defn(name="CronJob")
class CronJobWorkflow:
    """Creates the Jobs of one CronJob on schedule, for as long as the CronJob exists."""

    @workflow.init
    def __init__(self, inp: CronJobInput) -> None:
        self._lock = asyncio.Lock()  # the loop's sync and the updates' Kubernetes calls never interleave
        self._changed = False
        self._interrupt = False  # a signal or an update asks an armed creation to stop waiting
        self._events: list[EventInput] = []
        self.lead = timedelta(seconds=inp.lead_seconds)
        self.armed_for: datetime | None = None  # the schedule time of the creation now armed
        self._load(inp.state)

    def _load(self, s: CronJobState) -> None:
        self.obs: CronJobObservation = s.observation
        self.active: list[ObjectReference] = list(s.active)
        self.last_schedule_time = s.last_schedule_time
        self.last_successful_time = s.last_successful_time
        self.finished: dict[str, JobSummary] = {j.uid: j for j in s.finished}
        self.counters = s.counters
        self.recent: list[CronJobRun] = list(s.recent)
        self.reported: list[str] = list(s.reported)
        self.counted: list[str] = list(s.counted)
        self.ledger: list[LedgerEntry] = list(s.ledger)
        self.suspended_since = s.suspended_since
        self.last_failure_time = s.last_failure_time
        self.last_failed_job = s.last_failed_job
        self.backfill_queue: list[datetime] = list(s.backfill)
        self.backfilling = s.backfilling
        self.next_time: datetime | None = None
        self._synced: Any = None  # what the last status write sent
        self._advertised: Any = ()  # the NextScheduleTime search attribute as last upserted

    # -- signals: the bridge's view of the world; they only update state -----------------

    @workflow.signal(name="observe")
    def observe(self, obs: CronJobObservation) -> None:
        """The CronJob changed (spec, deletion) or was deleted."""
        if obs.lead_seconds is not None and obs.lead_seconds != self.lead.total_seconds():
            self.lead = timedelta(seconds=obs.lead_seconds)
            self._changed = self._interrupt = True
        if obs.gone:
            if not obs.uid or obs.uid == self.obs.uid:
                self.obs = self.obs.model_copy(update={"gone": True})
                self._changed = self._interrupt = True
            return
        if obs.uid != self.obs.uid:
            self._adopt(obs)  # a recreated namesake: a new CronJob with a fresh history
            self._interrupt = True
        else:
            if obs.plan_key() != self.obs.plan_key():
                self._interrupt = True  # repeats of what we know (a relist, a second bridge) do not
            self.obs = obs
        self._changed = True

    @workflow.signal(name="job_observed")
    def job_observed(self, job: JobSummary) -> None:
        """One of this CronJob's Jobs finished, or disappeared (C5–C7, C26–C28)."""
        if job.owner_uid and job.owner_uid != self.obs.uid:
            return
        in_active = any(a.uid == job.uid for a in self.active)
        self._ledger_result(job)
        if job.gone:
            self.finished.pop(job.uid, None)
            if in_active:
                self.active = [a for a in self.active if a.uid != job.uid]
                self._queue_event("Normal", "MissingJob", f"Active job went missing: {job.name}")
                self._record_run(CronJobRun(job_name=job.name, outcome="Missing"))
                self._changed = True
            return
        if job.outcome is None:
            return
        if in_active:
            self.active = [a for a in self.active if a.uid != job.uid]
            self._queue_event("Normal", "SawCompletedJob",
                              f"Saw completed job: {job.name}, condition: {job.outcome}")
        self.finished[job.uid] = job
        if job.outcome == "Complete" and job.completion_time is not None:
            if self.last_successful_time is None or job.completion_time > self.last_successful_time:
                self.last_successful_time = job.completion_time  # C6: never moves backwards
        if job.uid not in self.counted:
            self.counted = (self.counted + [job.uid])[-REMEMBERED:]
            c = self.counters
            if job.outcome == "Complete":
                self.counters = c.model_copy(update={"succeeded": c.succeeded + 1, "failures_since_last_success": 0})
            else:
                self.counters = c.model_copy(update={"failed": c.failed + 1,
                                                     "failures_since_last_success": c.failures_since_last_success + 1})
                failed_at = job.finished_at or job.completion_time or workflow.now()
                if self.last_failure_time is None or failed_at >= self.last_failure_time:  # CJ-LAST-FAILURE
                    self.last_failure_time, self.last_failed_job = failed_at, job.name
            self._record_run(CronJobRun(job_name=job.name, outcome=job.outcome, finished_at=job.completion_time))
        self._changed = True

    # -- operator controls ----------------------------------------------------------------

    @workflow.update(name="trigger")
    async def trigger(self, _: TriggerInput) -> TriggerResult:
        """Create a Job now, as ``kubectl create job --from=cronjob/NAME`` does, under a distinct name."""
        self._interrupt = True  # the lock may be held by an armed creation's wait
        async with self._lock:
            now = workflow.now()
            name = f"{self.obs.name[:52]}-m{_base36(int(now.timestamp()))}"
            res = await self._create(name, now, manual=True)
            self._ledger_created(now, res, source="trigger")
            if res.outcome not in ("created", "exists") or res.job is None:
                raise ApplicationError(f"could not create Job {name}: {res.outcome} {res.message}".strip(),
                                       type="TriggerFailed")
            self._changed = True
            return TriggerResult(job_name=res.job.name)

    @trigger.validator
    def _validate_trigger(self, _: TriggerInput) -> None:
        self._require_live()

    @workflow.update(name="suspend")
    async def suspend(self, inp: SuspendInput) -> SuspendResult:
        """Set ``spec.suspend: true`` (in Kubernetes, the source of truth) with an optional reason
        (CJ-SUSPEND); running Jobs are untouched."""
        return await self._set_suspend(True, inp.reason)

    @suspend.validator
    def _validate_suspend(self, inp: SuspendInput) -> None:
        self._require_live()

    @workflow.update(name="resume")
    async def resume(self, _: SuspendInput) -> SuspendResult:
        """Set ``spec.suspend: false`` and clear the reason; the most recent missed time within the
        deadline then runs (C10)."""
        return await self._set_suspend(False, None)

    @resume.validator
    def _validate_resume(self, _: SuspendInput) -> None:
        self._require_live()

    @workflow.update(name="backfill")
    async def backfill(self, inp: BackfillInput) -> BackfillResult:
        """Create the Job of every schedule time from ``from`` to ``to`` (CJ-BACKFILL), named as the
        schedule names it, so a time that already has its Job gets no second one.

        ``oneAtATime``: create the first now and each next one once the previous finished; the
        queue is workflow state, so a worker restart or continue-as-new goes on where it was.
        """
        times = self._backfill_times(inp)
        self._interrupt = True  # the lock may be held by an armed creation's wait
        async with self._lock:
            result = BackfillResult(times=len(times))
            if inp.one_at_a_time:
                self.backfill_queue, self.backfilling = times, False
                result = await self.advance_backfill(result)
            else:
                for t in times:
                    result, _ = await self._backfill_create(result, t)
                    if self.obs.gone:
                        break
            self._changed = True
            return result

    @backfill.validator
    def _validate_backfill(self, inp: BackfillInput) -> None:
        self._require_live()
        self._backfill_times(inp)

    @workflow.query(name="describe")
    def describe(self) -> dict[str, Any]:
        """Schedule, next times, active Jobs, counters and recent results."""
        upcoming: list[str] = []
        try:
            schedule, _ = cron.parse_schedule(self.obs.spec.schedule, self.obs.spec.time_zone)
            t: datetime | None = workflow.now()
            for _ in range(5):
                t = schedule.next(t) if t is not None else None
                if t is None:
                    break
                upcoming.append(_iso(t))
        except cron.ScheduleError as err:
            upcoming = [f"error: {err.reason}"]
        spec = self.obs.spec
        return {
            "namespace": self.obs.namespace, "name": self.obs.name, "uid": self.obs.uid,
            "schedule": spec.schedule, "timeZone": spec.time_zone, "suspend": spec.suspend,
            "suspendReason": self.obs.suspend_reason, "suspendedAt": self.obs.suspended_at,
            "concurrencyPolicy": spec.concurrency_policy,
            "startingDeadlineSeconds": spec.starting_deadline_seconds,
            "nextScheduleTime": _iso(self.next_time) if self.next_time else None,
            "armedFor": _iso(self.armed_for) if self.armed_for else None,
            "upcoming": [] if spec.suspend else upcoming,
            "active": [a.name for a in self.active],
            "lastScheduleTime": _iso(self.last_schedule_time) if self.last_schedule_time else None,
            "lastSuccessfulTime": _iso(self.last_successful_time) if self.last_successful_time else None,
            "lastFailureTime": _iso(self.last_failure_time) if self.last_failure_time else None,
            "lastFailedJob": self.last_failed_job,
            "catchUp": self.obs.catch_up,
            "backfillQueue": [cron.job_name(self.obs.name, t) for t in self.backfill_queue],
            "counters": self.counters.model_dump(by_alias=True),
            "recentRuns": [r.model_dump(mode="json", by_alias=True) for r in self.recent],
            "warnings": self.reported[-10:],
        }

    def _backfill_times(self, inp: BackfillInput) -> list[datetime]:
        """The schedule times of a backfill, one per Job name (per minute, CJ-31); refuses a bad range."""
        def refuse(message: str) -> ApplicationError:
            return ApplicationError(f"backfill refused: {message}", type="InvalidBackfill", non_retryable=True)

        if inp.start.tzinfo is None or inp.to.tzinfo is None:
            raise refuse("--from and --to need a time zone offset (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
        if inp.start > inp.to:
            raise refuse(f"--from {_iso(inp.start)} is after --to {_iso(inp.to)}")
        if inp.to > workflow.now():
            raise refuse(f"--to {_iso(inp.to)} is in the future; the schedule itself runs those times")
        if inp.one_at_a_time and self.backfill_queue:
            raise refuse(f"a one-at-a-time backfill is still running ({len(self.backfill_queue)} time(s) to go)")
        try:
            schedule, _ = cron.parse_schedule(self.obs.spec.schedule, self.obs.spec.time_zone)
        except cron.ScheduleError as err:
            raise refuse(err.message) from None
        times = cron.schedule_times(schedule, first=inp.start, last=inp.to, limit=BACKFILL_LIMIT)
        if times is None:
            raise refuse(f"more than {BACKFILL_LIMIT} schedule times from {_iso(inp.start)} to {_iso(inp.to)}; "
                         "split the range")
        by_name = {cron.job_name(self.obs.name, t): t for t in reversed(times)}  # the first time of each minute
        return sorted(by_name.values())

    @workflow.query(name="history")
    def history(self) -> list[dict[str, Any]]:
        """The run ledger (CJ-LEDGER): the last 100 schedule times, triggers and backfills, oldest first."""
        return [{"scheduledTime": _iso(e.scheduled_time), "source": e.source, "outcome": e.outcome, "job": e.job,
                 "jobUID": e.job_uid, "createdAt": _iso(e.created_at) if e.created_at else None, "result": e.result}
                for e in self.ledger]

    # -- the loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: CronJobInput) -> str:
        armed: datetime | None = None
        while not self.obs.gone:
            async with self._lock:
                self._changed = self._interrupt = False
                await self.sync(armed)
            if self.obs.gone:
                break
            armed = await self._sleep()
            info = workflow.info()
            if info.is_continue_as_new_suggested() or info.get_current_history_length() > HISTORY_EVENTS:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(CronJobInput(state=self.state(), lead_seconds=self.lead.total_seconds()))
        workflow.upsert_search_attributes([NEXT_SCHEDULE_TIME.value_unset()])
        workflow.logger.info("CronJob %s/%s is gone; workflow ends", self.obs.namespace, self.obs.name)
        return "gone"

    async def sync(self, armed: datetime | None = None) -> None:
        """One pass of upstream's syncCronJob, then the status write.

        ``armed``: the pass runs as of that (wake-up) time, up to ``lead`` ahead of the clock, and
        the Job due then is created on time by the worker (see the module docstring).
        """
        await self._flush_events()
        self.next_time = None
        if not self.obs.deleting:  # C8: a CronJob being deleted only reconciles
            await self.cleanup_finished_jobs()
            now = workflow.now()
            ahead = armed if armed is not None and armed > now and self._armable() else None
            self.next_time = await self.schedule(ahead or now, armed=ahead is not None)
            if self.backfill_queue:
                await self.advance_backfill(BackfillResult(times=len(self.backfill_queue)))
        await self._flush_events()
        await self._write_status()

    async def schedule(self, now: datetime, *, armed: bool = False) -> datetime | None:
        """Create the Job that is due, if any; return when to look again (None: on a change only)."""
        spec = self.obs.spec
        try:
            sched, warnings = cron.parse_schedule(spec.schedule, spec.time_zone)
        except cron.ScheduleError as err:  # B10, B11
            self._warn_once(f"{err.reason}:{self.obs.generation}", err.reason, err.message)
            return None
        for w in warnings:  # B6
            self._warn_once(f"{w.reason}:{self.obs.generation}", w.reason, w.message)
        if self.obs.problem:
            self._warn_once(f"InvalidAnnotation:{self.obs.problem}", "InvalidAnnotation", self.obs.problem)
        if spec.suspend:  # C10
            self.suspended_since = self.suspended_since or now
            return None
        earliest = self.last_schedule_time or self.obs.creation_timestamp or now
        try:
            recent = cron.most_recent_schedule_time(
                sched, earliest=earliest, now=now, starting_deadline_seconds=spec.starting_deadline_seconds)
        except cron.ScheduleError as err:  # B15, B18
            self._warn_once(f"{err.reason}:{self.obs.generation}", err.reason, err.message)
            return None
        # CJ-CATCH-UP: an outage is caught up; a suspension is a decision, and only its latest time runs (CJ-25)
        catch_up = (recent.due is not None and recent.missed != "none" and self.obs.catch_up == "all" and not armed
                    and self.suspended_since is None)
        if self.suspended_since is not None:
            self._ledger_suspended(sched, since=max(self.suspended_since, earliest), until=now, due=recent.due)
        if recent.missed == "many" and not catch_up:  # B19: warn, and still run the most recent
            self._warn_once(f"TooManyMissedTimes:{recent.due}", "TooManyMissedTimes",
                            "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
        if catch_up and recent.due is not None:
            await self.catch_up(sched, earliest=earliest, now=now, due=recent.due)
        elif recent.due is not None and not self.already_processed(recent.due):
            if not await self.start_job(recent.due, not_before=now if armed else None):
                self._changed = True  # an armed creation was interrupted: plan again at once
                return now
        wake = cron.next_wakeup(sched, earliest=self.last_schedule_time or earliest, now=now)
        if recent.due is not None:
            later = cron.next_in_another_minute(sched, wake, recent.due)
            if later != wake and workflow.patched(ONE_PASS_A_MINUTE):
                wake = later
        if wake is not None and self.obs.jitter_percent:
            after = sched.next(wake)
            if after is not None:
                wake = plus_seconds(wake, cron.jitter(wake, percent=self.obs.jitter_percent, interval=after - wake,
                                                      key=f"{self.obs.namespace}/{self.obs.name}").total_seconds())
        return wake

    async def catch_up(self, sched: cron.Schedule, *, earliest: datetime, now: datetime, due: datetime) -> None:
        """CJ-CATCH-UP: run every missed time within the deadline, oldest first, not only the latest.

        Forbid runs one at a time: the pass stops at an active Job, and the pass its end starts
        goes on from ``lastScheduleTime``. The times still to run are those after it, so a worker
        restart loses and repeats none.
        """
        missed = cron.missed_times(sched, earliest=earliest, now=now,
                                   starting_deadline_seconds=self.obs.spec.starting_deadline_seconds, keep=LEDGER_SIZE)
        if missed.dropped:
            self._warn_once(f"TooManyMissedTimes:{_iso(missed.times[0])}", "TooManyMissedTimes",
                            f"more than {LEDGER_SIZE} missed schedule times since {_iso(earliest)}; catch-up runs "
                            f"the latest {LEDGER_SIZE}, from {_iso(missed.times[0])}")
            known = {e.scheduled_time for e in self.ledger}
            for t in missed.dropped:
                if t not in known:
                    self._ledger_add(LedgerEntry(scheduled_time=t, source="catch-up", outcome="too-many-missed"))
        for t in missed.times:
            if self.obs.gone:
                break
            if self.already_processed(t) or self._ran(t):
                continue
            await self.start_job(t, source="schedule" if t == due else "catch-up")
            if self.obs.spec.concurrency_policy == "Forbid" and self.active:
                break  # held back (JobAlreadyActive) or just created: the next waits for its end

    def already_processed(self, due: datetime) -> bool:
        """C11: the Job for ``due`` is active, or ``due`` falls in the last schedule time's minute.

        Upstream compares the instants; within one minute every time names the same Job (C16),
        so a sub-minute schedule meets it again and acts once a minute (CJ-SUBMINUTE).
        """
        name = cron.job_name(self.obs.name, due)
        last = self.last_schedule_time
        if last == due or any(a.name == name for a in self.active):
            return True
        return last is not None and cron.job_name(self.obs.name, last) == name and workflow.patched(ONE_PASS_A_MINUTE)

    async def start_job(self, due: datetime, *, not_before: datetime | None = None,
                        source: RunSource = "schedule") -> bool:
        """Apply the concurrency policy (C12–C14) and create the Job for ``due`` (C15–C25).

        ``not_before``: create it then, armed (Allow only). False: the armed creation was
        interrupted or found the spec changed, and nothing was created.
        """
        policy = self.obs.spec.concurrency_policy
        if policy == "Forbid" and self.active:
            self._warn_once(f"JobAlreadyActive:{_iso(due)}", "JobAlreadyActive",
                            "Not starting job because prior execution is running and concurrency policy is Forbid",
                            type_="Normal")
            # with catch-up, a time held back runs once the active Job ends: it is not skipped
            if self.obs.catch_up != "all" and not any(e.scheduled_time == due and e.source == "schedule"
                                                      for e in self.ledger):
                self._ledger_add(LedgerEntry(scheduled_time=due, outcome="skipped-concurrency"))
            return True
        replaced = policy == "Replace" and bool(self.active)
        if replaced:
            res = await self._delete(self.active, "replace")
            self.active = [a for a in self.active if a.name not in res.deleted]
            if self.active:
                return True  # C14: could not replace; try again at the next wake
        name = cron.job_name(self.obs.name, due)
        created = await (self._create(name, due) if not_before is None else self._create_at(name, due, not_before))
        if created is None or created.outcome == "stale":
            return False
        self._ledger_created(due, created, source=source, replaced=replaced)
        if created.outcome in ("created", "exists"):
            self.last_schedule_time = due
        elif created.outcome == "not_ours":
            workflow.logger.warning("CronJob %s/%s: %s", self.obs.namespace, self.obs.name, created.message)
        return True  # "too_late" included: the missed time is dropped silently (B22)

    async def cleanup_finished_jobs(self) -> None:
        """History limits: delete the oldest finished Jobs beyond each limit (C30–C33)."""
        spec = self.obs.spec
        excess: list[JobSummary] = []
        for outcome, limit in (("Complete", spec.successful_jobs_history_limit),
                               ("Failed", spec.failed_jobs_history_limit)):
            if limit is None:
                continue
            jobs = sorted((j for j in self.finished.values() if j.outcome == outcome),
                          key=lambda j: (j.start_time is None, j.start_time or datetime.min.replace(tzinfo=UTC), j.name))
            excess += jobs[: max(0, len(jobs) - limit)]
        if spec.successful_jobs_history_limit is None and spec.failed_jobs_history_limit is None:
            self.finished.clear()  # nothing to enforce, nothing to remember
        if not excess:
            return
        refs = [ObjectReference(name=j.name, namespace=self.obs.namespace, uid=j.uid) for j in excess]
        res = await self._delete(refs, "history")
        for j in excess:
            if j.name in res.deleted:
                self.finished.pop(j.uid, None)
        self.active = [a for a in self.active if a.name not in res.deleted]

    async def advance_backfill(self, result: BackfillResult) -> BackfillResult:
        """CJ-BACKFILL one at a time: once the Job of the queue's first time has ended, create the next.

        ``result``: the answer so far, completed with what this call created and what stays queued.
        """
        while self.backfill_queue and not self.obs.gone:
            t = self.backfill_queue[0]
            if any(a.name == cron.job_name(self.obs.name, t) for a in self.active):
                break  # still running: its end (job_observed) wakes the loop
            if not self.backfilling:
                result, res = await self._backfill_create(result, t)
                self.backfilling = res.outcome in ("created", "exists") and not res.finished
                if self.backfilling:
                    continue
            self.backfill_queue, self.backfilling = self.backfill_queue[1:], False
        waiting = self.backfill_queue[1:] if self.backfilling else self.backfill_queue
        return result.model_copy(update={"queued": [cron.job_name(self.obs.name, t) for t in waiting]})

    async def _backfill_create(self, result: BackfillResult, t: datetime) -> tuple[BackfillResult, CreateJobResult]:
        """Create the Job of schedule time ``t`` for a backfill; the answer says whether it was created or existed."""
        name = cron.job_name(self.obs.name, t)
        if self._ran(t):  # its Job may be gone already (history limits): it is not made twice
            return result.model_copy(update={"existed": [*result.existed, name]}), CreateJobResult(
                outcome="exists", finished=True)
        res = await self._create(name, t)
        self._ledger_created(t, res, source="backfill")
        if res.outcome == "created":
            return result.model_copy(update={"created": [*result.created, name]}), res
        if res.outcome == "exists":
            return result.model_copy(update={"existed": [*result.existed, name]}), res
        why = "the CronJob is gone" if res.outcome == "cronjob_gone" else (res.message or res.outcome)
        return result.model_copy(update={"failed": [*result.failed, f"{name}: {why}"]}), res

    # -- helpers --------------------------------------------------------------------------

    def _armable(self) -> bool:
        return self.lead > timedelta(0) and self.obs.spec.concurrency_policy == "Allow" and not self.obs.spec.suspend

    async def _sleep(self) -> datetime | None:
        """Wait for the next wake-up or a change; return the wake-up time if its creation is to be armed now."""
        now = workflow.now()
        if self._advertised != self.next_time:
            self._advertised = self.next_time
            workflow.upsert_search_attributes([
                NEXT_SCHEDULE_TIME.value_set(self.next_time) if self.next_time else NEXT_SCHEDULE_TIME.value_unset()])
        when = f"next runs {_iso(self.next_time)}" if self.next_time else "suspended" if self.obs.spec.suspend else "idle"
        queue = f"; backfill: {len(self.backfill_queue)} time(s) to go, one at a time" if self.backfill_queue else ""
        workflow.set_current_details(f"CronJob {self.obs.namespace}/{self.obs.name} (`{self.obs.spec.schedule}`) "
                                     f"{when}{queue}")
        if self.next_time is None:
            await workflow.wait_condition(lambda: self._changed or self.obs.gone)
            return None
        summary = f"CronJob {self.obs.namespace}/{self.obs.name} next schedule {_iso(self.next_time)}"
        if not self._armable():
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._changed or self.obs.gone,
                                              timeout=max(timedelta(0), self.next_time - now), timeout_summary=summary)
            return None
        if self._changed or self.obs.gone:
            return None  # a pass at the real time first: whatever is due now is not held back
        arm_at = self.next_time - self.lead
        if arm_at > now:
            try:
                await workflow.wait_condition(
                    lambda: self._changed or self.obs.gone, timeout=arm_at - now,
                    timeout_summary=f"{summary}; Job creation armed {self.lead.total_seconds():g}s before")
                return None
            except TimeoutError:
                pass
        return self.next_time if self._armable() and not self.obs.gone else None

    async def _set_suspend(self, value: bool, reason: str | None) -> SuspendResult:
        self._interrupt = True  # the lock may be held by an armed creation's wait
        async with self._lock:
            # a suspended CronJob given a (new) reason keeps its suspended-at
            renote = value and reason is not None and reason != self.obs.suspend_reason
            if self.obs.spec.suspend == value and not renote:
                return SuspendResult(suspended=value, changed=False)
            at = workflow.now().replace(microsecond=0) if value and not (self.obs.spec.suspend and self.obs.suspended_at) else None
            res: SyncCronJobResult = await workflow.execute_local_activity(
                "set_cronjob_suspend",
                SetSuspendInput(namespace=self.obs.namespace, name=self.obs.name, uid=self.obs.uid, suspend=value,
                                reason=reason, at=at),
                result_type=SyncCronJobResult, start_to_close_timeout=K8S_CALL_TIMEOUT, retry_policy=K8S_RETRY,
                summary=f"set spec.suspend={str(value).lower()}")
            if res.gone:
                self.obs = self.obs.model_copy(update={"gone": True})
                raise ApplicationError("the CronJob no longer exists", type="CronJobGone")
            self.obs = self.obs.model_copy(update={
                "spec": self.obs.spec.model_copy(update={"suspend": value}), "suspend_reason": reason if value else None,
                "suspended_at": _iso(at) if at else self.obs.suspended_at if value else None})
            self._changed = True
            return SuspendResult(suspended=value, changed=True)

    def _require_live(self) -> None:
        if self.obs.gone or self.obs.deleting:
            raise ValueError(f"CronJob {self.obs.namespace}/{self.obs.name} is being deleted or gone")

    def _create_input(self, name: str, scheduled: datetime, *, manual: bool = False) -> CreateJobInput:
        return CreateJobInput(
            namespace=self.obs.namespace, cronjob_name=self.obs.name, cronjob_uid=self.obs.uid, job_name=name,
            scheduled=scheduled, manual=manual, scheduled_annotation=None if manual else self._annotation(scheduled))

    async def _create(self, name: str, scheduled: datetime, *, manual: bool = False) -> CreateJobResult:
        res: CreateJobResult = await workflow.execute_local_activity(
            "create_cronjob_job", self._create_input(name, scheduled, manual=manual), result_type=CreateJobResult,
            start_to_close_timeout=K8S_CALL_TIMEOUT, retry_policy=K8S_RETRY,
            summary=f"create Job {self.obs.namespace}/{name}")
        return self._took(res)

    def _took(self, res: CreateJobResult) -> CreateJobResult:
        if res.outcome == "cronjob_gone":
            self.obs = self.obs.model_copy(update={"gone": True})
        elif res.job is not None and not res.finished and not any(a.uid == res.job.uid for a in self.active):
            # C25. A finished namesake (two runs in one minute, C16) is not active again: the
            # bridge already reported its end and would not report it twice.
            self.active.append(res.job)
        return res

    async def _create_at(self, name: str, scheduled: datetime, not_before: datetime) -> CreateJobResult | None:
        """Hand the creation to the worker until ``not_before``; None if a signal or update interrupts."""
        sds = self.obs.spec.starting_deadline_seconds
        wait = max(timedelta(0), not_before - workflow.now())
        inp = self._create_input(name, scheduled).model_copy(update={
            "not_before": not_before, "wait_at_most": wait.total_seconds(), "generation": self.obs.generation,
            "latest": plus_seconds(scheduled, sds) if sds is not None else None})
        if self._interrupt:
            return None
        self.armed_for = inp.scheduled
        try:
            handle = workflow.start_activity(
                "create_cronjob_job_at", inp, result_type=CreateJobResult,
                task_queue=timed_task_queue(workflow.info().task_queue),
                start_to_close_timeout=wait + ARMED_SLACK, heartbeat_timeout=ARMED_HEARTBEAT, retry_policy=K8S_RETRY,
                cancellation_type=ActivityCancellationType.TRY_CANCEL,
                summary=f"create Job {inp.namespace}/{inp.job_name} at {_iso(not_before)}")
            await workflow.wait_condition(lambda: handle.done() or self._interrupt)
            if not handle.done():
                # The cancellation reaches the worker with its next heartbeat. An abandoned wait
                # that fires first re-reads the CronJob: a changed spec makes it "stale", a
                # recreated CronJob "cronjob_gone"; else it creates the very Job the next plan
                # creates, and one of the two finds it "exists".
                handle.cancel()
                handle.add_done_callback(_outcome_unused)
                return None
            res: CreateJobResult = await handle
        finally:
            self.armed_for = None
        if res.outcome == "stale":  # the bridge has not told us of the new spec yet; let it
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self.obs.generation >= res.generation or self.obs.gone,
                                              timeout=STALE_WAIT, timeout_summary="wait for the CronJob's new spec")
        return self._took(res)

    def _annotation(self, scheduled: datetime) -> str | None:
        try:
            return cron.scheduled_timestamp_annotation(scheduled, self.obs.spec.time_zone)
        except cron.ScheduleError:
            return None

    async def _delete(self, refs: list[ObjectReference], purpose: str) -> DeleteJobsResult:
        res: DeleteJobsResult = await workflow.execute_local_activity(
            "delete_cronjob_jobs",
            DeleteJobsInput(namespace=self.obs.namespace, cronjob_name=self.obs.name, cronjob_uid=self.obs.uid,
                            jobs=refs, purpose=purpose),  # type: ignore[arg-type]
            result_type=DeleteJobsResult, start_to_close_timeout=K8S_CALL_TIMEOUT, retry_policy=K8S_RETRY,
            summary=f"delete {len(refs)} Job(s) ({purpose})")
        return res

    async def _write_status(self) -> None:
        c = self.counters
        wanted = (
            tuple(a.uid for a in self.active), self.last_schedule_time, self.last_successful_time,
            self.next_time, c.succeeded, c.failed, c.failures_since_last_success, self.last_failure_time,
        )
        if wanted == self._synced:
            return
        res: SyncCronJobResult = await workflow.execute_local_activity(
            "sync_cronjob",
            SyncCronJobInput(
                namespace=self.obs.namespace, name=self.obs.name, uid=self.obs.uid, active=self.active,
                last_schedule_time=self.last_schedule_time, last_successful_time=self.last_successful_time,
                annotations={
                    NEXT_SCHEDULE_ANNOTATION: _iso(self.next_time) if self.next_time else None,
                    SUCCEEDED_RUNS_ANNOTATION: str(c.succeeded),
                    FAILED_RUNS_ANNOTATION: str(c.failed),
                    FAILURES_SINCE_SUCCESS_ANNOTATION: str(c.failures_since_last_success),
                    LAST_FAILURE_TIME_ANNOTATION: _iso(self.last_failure_time) if self.last_failure_time else None,
                    LAST_FAILED_JOB_ANNOTATION: self.last_failed_job,
                },
            ),
            result_type=SyncCronJobResult, start_to_close_timeout=K8S_CALL_TIMEOUT, retry_policy=K8S_RETRY,
            summary="write status and annotations")
        if res.gone:
            self.obs = self.obs.model_copy(update={"gone": True})
        self._synced = wanted

    def _warn_once(self, key: str, reason: str, message: str, *, type_: str = "Warning") -> None:
        if key in self.reported:
            return
        self.reported = (self.reported + [key])[-REMEMBERED:]
        workflow.logger.warning("CronJob %s/%s: %s: %s", self.obs.namespace, self.obs.name, reason, message)
        self._queue_event(type_, reason, message)

    def _queue_event(self, type_: str, reason: str, message: str) -> None:
        self._events.append(EventInput(
            ref=ObjectRef(kind="CronJob", namespace=self.obs.namespace, name=self.obs.name, uid=self.obs.uid),
            type=type_, reason=reason, message=message, component=COMPONENT))  # type: ignore[arg-type]

    async def _flush_events(self) -> None:
        events, self._events = self._events, []
        for ev in events:
            try:
                await workflow.execute_local_activity(
                    "record_event", ev, start_to_close_timeout=K8S_CALL_TIMEOUT, retry_policy=K8S_BEST_EFFORT_RETRY,
                    summary=f"event {ev.reason}")
            except ActivityError:  # best effort: an Event is never worth stalling the schedule
                workflow.logger.warning("could not record Event %s on CronJob %s", ev.reason, ev.ref.key())

    def _record_run(self, run: CronJobRun) -> None:
        self.recent = (self.recent + [run])[-RECENT_RUNS:]

    # -- the run ledger (CJ-LEDGER): state only, no commands, so any history replays -----------

    def _ledger_add(self, entry: LedgerEntry) -> None:
        self.ledger = (self.ledger + [entry])[-LEDGER_SIZE:]

    def _ledger_created(self, scheduled: datetime, res: CreateJobResult, *, source: RunSource = "schedule",
                        replaced: bool = False) -> None:
        """The entry for a creation's outcome; a Job already in the ledger (found again as "exists") adds none."""
        if res.outcome in ("created", "exists") and res.job is not None:
            if any(e.job_uid == res.job.uid for e in self.ledger):
                return
            self._ledger_add(LedgerEntry(
                scheduled_time=scheduled, source=source, outcome="replaced" if replaced else "created",
                job=res.job.name, job_uid=res.job.uid, created_at=workflow.now().replace(microsecond=0),
                result=None if res.finished else "running"))
        elif res.outcome == "too_late":
            self._ledger_add(LedgerEntry(scheduled_time=scheduled, source=source, outcome="missed-deadline"))
        elif res.outcome in ("invalid", "not_ours"):
            self._ledger_add(LedgerEntry(scheduled_time=scheduled, source=source, outcome="create-failed",
                                         job=res.job.name if res.job else None))

    def _ledger_result(self, job: JobSummary) -> None:
        result = "deleted" if job.gone else job.outcome
        if result is None:
            return
        self.ledger = [e.model_copy(update={"result": result})
                       if e.job_uid == job.uid and (result != "deleted" or e.result in (None, "running")) else e
                       for e in self.ledger]

    def _ran(self, t: datetime) -> bool:
        """Whether the ledger shows a Job created for the schedule time ``t`` (its minute's Job, CJ-31)."""
        name = cron.job_name(self.obs.name, t)
        return any(e.job == name and e.outcome in ("created", "replaced") for e in self.ledger)

    def _ledger_suspended(self, sched: cron.Schedule, *, since: datetime, until: datetime, due: datetime | None) -> None:
        """A pass after a suspension: every schedule time it covered, but the one now due, is "suspended"."""
        self.suspended_since = None
        t = sched.next(since)
        after = sched.next(t) if t is not None else None
        if t is not None and after is not None and after > t and (until - since) / (after - t) > 2 * LEDGER_SIZE:
            # a long suspension of a busy schedule: only the last times would be kept, so start near them
            t = sched.next(until - (after - t) * 2 * LEDGER_SIZE)
        skipped: list[datetime] = []
        for _ in range(4 * LEDGER_SIZE):  # bounded for irregular schedules too
            if t is None or t > until:
                break
            if t != due:
                skipped = (skipped + [t])[-LEDGER_SIZE:]
            t = sched.next(t)
        for t in skipped:
            self._ledger_add(LedgerEntry(scheduled_time=t, outcome="suspended"))

    def _adopt(self, obs: CronJobObservation) -> None:
        """Start over for a (new) CronJob object: its own status, no Jobs, no counters."""
        self._events = []
        self._load(CronJobState(observation=obs, active=obs.status.active,
                                last_schedule_time=obs.status.last_schedule_time,
                                last_successful_time=obs.status.last_successful_time))

    def state(self) -> CronJobState:
        """All state, for continue-as-new."""
        return CronJobState(
            observation=self.obs, active=self.active, last_schedule_time=self.last_schedule_time,
            last_successful_time=self.last_successful_time, finished=list(self.finished.values()),
            counters=self.counters, recent=self.recent, reported=self.reported, counted=self.counted,
            ledger=self.ledger, suspended_since=self.suspended_since, last_failure_time=self.last_failure_time,
            last_failed_job=self.last_failed_job, backfill=self.backfill_queue, backfilling=self.backfilling,
        )
