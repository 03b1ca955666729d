"""CronJob (docs/cronjob.md) as one long-lived durable workflow per CronJob.

Layer: workflows (deterministic). Started and signalled by the bridge (worker/bridge.py) on
``cronjob/{ns}/{name}``; operators call its updates ``trigger``, ``suspend``, ``resume`` and
``backfill`` and its queries ``describe`` and ``history`` (``batchd cronjob …``, ``temporal
workflow update execute …``, the SDK). Its activities are declared in workflows/models/cronjob.py
and implemented in activities/cronjob.py.

Every decision is made by the pure functions of ``workflows/decisions/cronjob.py``; this class
hands their steps to the executor (``workflows/execute.py``). One pass of upstream's
``syncCronJob`` is :meth:`sync`, and its workqueue ``AddAfter`` a durable timer to the next
schedule time:

0. suspend the CronJob if its breaker tripped (CJ-BREAKER);
1. delete the finished Jobs beyond the history limits;
2. create the Job that is due (or, with catch-up, each missed one), under the concurrency policy;
3. create the next Job of a one-at-a-time backfill;
4. report to its concurrency group (CJ-GROUP, workflows/group.py) when its view changed: a time
   the group has no slot for waits, and the group's ``group_answer`` signal resumes it;
5. record the Events, and write status and batchd's annotations when they changed;
6. sleep until the next schedule time (plus the optional jitter), or until a signal or an update
   changes something.

Armed creation (CJ-52; ``lead_seconds`` > 0, policy Allow): the timer fires ``lead`` before
the time, and that pass runs as of the time itself, handing the creation to
``create_cronjob_job_at`` on the worker's timed queue. The activity waits in the worker and
creates the Job on the second, so a burst of CronJobs sharing a schedule needs no server round
trip at the schedule time. At the time it re-reads the CronJob and creates nothing if the spec
changed meanwhile (its generation) or the starting deadline passed; a signal or an update during
the wait cancels it and the pass re-plans. Forbid and Replace depend on which Jobs are active at
the time, so they always wake at the time.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import MetricCounter
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from workflows.decisions import cronjob as decide
    from workflows.decisions.cronjob import Run
    from workflows.execute import Call, Emit, Notify, Wait, WorkflowSide, execute
    from workflows.identity import NEXT_SCHEDULE_TIME, timed_task_queue
    from workflows.models.common import EventInput
    from workflows.models.cronjob import (
        BackfillInput,
        BackfillResult,
        CreateJobInput,
        CreateJobResult,
        CronJobInput,
        CronJobObservation,
        CronJobState,
        GroupAnswer,
        JobSummary,
        SuspendInput,
        SuspendResult,
        TriggerInput,
        TriggerResult,
        create_cronjob_job_at,
        set_cronjob_suspend,
        sync_cronjob,
    )
    from workflows.policies import K8S_RETRY
    from workflows.times import rfc3339 as iso

#: ``workflow.patched`` id: a schedule time in the minute of one already considered is not acted
#: on again (CJ-SUBMINUTE); histories recorded before it replay without it.
ONE_PASS_A_MINUTE = "one-pass-a-minute"
#: ``workflow.patched`` id: a Job's end seen during an armed creation's wait stops the wait
#: (``job_observed``); histories recorded before it replay without it.
JOB_END_STOPS_ARMED_WAIT = "job-end-stops-armed-wait"
#: ``workflow.patched`` id: such an end is folded in while the armed creation goes on waiting
#: (``_tidy``), where the patch above cancelled it and armed the same creation again: each Job's
#: end cost a cancel, a second activity and a second POST of the Job at the scheduled second.
#: Histories recorded before it replay as they ran.
JOB_END_TIDIED_DURING_ARMED_WAIT = "job-end-tidied-during-armed-wait"
#: ``workflow.patched`` id: the Events of a pass or of a Job's end are recorded by the status
#: write's local activity, after the write, where each Event had one of its own before it: each
#: Job end of a ``*/1`` CronJob costs one local activity, activation and marker fewer (its
#: ``SuccessfulCreate`` comes from the armed creation). Histories recorded before it replay as they ran.
EVENTS_WITH_STATUS = "events-with-status"
#: ``workflow.patched`` id: the pass takes the backfill that the annotation ``batchd.io/backfill``
#: asks for (CJ-BACKFILL-DOOR); a worker of before it ignores the annotation, and its histories
#: replay without it.
BACKFILL_DOOR = "backfill-door"
#: An armed creation's time limit beyond its wait. It does not heartbeat: with 2,000 CronJobs on
#: one minute the heartbeats were the dev server's most frequent call (docs/benchmarks.md), and a
#: worker killed while it waits loses the creation only until this limit, when the retry (idempotent
#: by name, on another worker) creates the Job (CJ-55).
ARMED_SLACK = timedelta(seconds=10)
#: Continue-as-new beyond this many events (five to ten runs of a ``*/1`` CronJob, at 8 to 10
#: events a run) plus a share of as many again drawn from the workflow id (:func:`_history_limit`),
#: well before the server suggests it. The SDK's core keeps every state machine of a run (one per
#: command: timer, activity, marker, upsert, workflow task) until the run ends, so a cached workflow
#: grows with its run: 2,000 ``*/1`` CronJobs held about 100 MiB less after 20 to 39 events. But each
#: continue-as-new that meets a signal fails its task once (UnhandledCommand), and an update that
#: arrives then is refused (WorkflowNotReady): at 20 the CLI's and the tests' updates met it
#: (docs/benchmarks.md, the soak). A run started with another length keeps it
#: (``CronJobInput.run_events``), so it replays as it ran.
HISTORY_EVENTS = 60
#: After a "stale" armed creation, how long to wait for the bridge to deliver the new spec.
STALE_WAIT = timedelta(seconds=60)


def _outcome_unused(task: asyncio.Task[Any]) -> None:
    """Retrieve an abandoned activity's end, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _subminute() -> bool:
    return workflow.patched(ONE_PASS_A_MINUTE)


def _history_limit(events: int) -> int:
    """This run's continue-as-new threshold: ``events`` to twice that, fixed by the workflow id.

    CronJobs on one schedule run in step; with one threshold they would all start afresh in the
    same minute, each new run's first task outside the worker's cache. Spread over as many events
    again, they start afresh a few at a time.
    """
    return events + zlib.crc32(workflow.info().workflow_id.encode()) % events


@workflow.defn(name="CronJob")
class CronJobWorkflow(WorkflowSide):
    """Creates the Jobs of one CronJob on schedule, for as long as the CronJob exists."""

    @workflow.init
    def __init__(self, inp: CronJobInput) -> None:
        self.state: CronJobState = inp.take_state()
        self._lock = asyncio.Lock()  # the loop's pass and the updates' Kubernetes calls never interleave
        self._changed = False  # a pass is due
        self._interrupt = False  # a signal or an update asks an armed creation to stop waiting
        self._tidy = False  # a Job ended while a creation is armed: fold it in without stopping the wait
        self.events: list[EventInput] = []  # recorded at the end of the pass
        self.lead = timedelta(seconds=inp.lead_seconds)
        self.run_events = inp.run_events
        self.wake: datetime | None = None  # when the next pass runs, as the last pass planned it
        self.armed_for: datetime | None = None  # the schedule time of the creation now armed
        self._written: Any = None  # what the last status write sent (decide.status_key)
        self._advertised: Any = ()  # the NextScheduleTime search attribute as last upserted
        # the newest ledger entry counted in batchd_cronjob_runs_total (or carried over): one key, not a
        # set of all a hundred: 16 KiB a CronJob once its ledger is full, 30 MiB at 2,000
        self._counted_up_to = decide.newest_ledger_key(self.state)
        self._runs_counter: MetricCounter | None = None

    @property
    def obs(self) -> CronJobObservation:
        return self.state.observation

    # -- signals: the bridge's view of the world; they only update state -----------------

    @workflow.signal(name="observe")
    def observe(self, obs: CronJobObservation) -> None:
        """The CronJob changed (spec, deletion) or was deleted."""
        if obs.lead_seconds is not None and obs.lead_seconds != self.lead.total_seconds():
            self.lead = timedelta(seconds=obs.lead_seconds)
            self._changed = self._interrupt = True
        seen = decide.observe(self.state, obs)
        if seen.adopted:
            self.events = []
        self.state = seen.state
        self._changed |= seen.changed
        self._interrupt |= seen.replan

    @workflow.signal(name="job_observed")
    def job_observed(self, job: JobSummary) -> None:
        """One of this CronJob's Jobs finished, or disappeared.

        A change during an armed creation's wait is acted on at once, so the status, the counters
        and the history limits follow now rather than at the armed time: with a lead of a whole
        period (a ``*/1`` schedule) the workflow waits on an armed creation nearly all the time.
        The creation goes on waiting (``_tidy``) unless the end changes what the pass would plan
        (the breaker trips, or a one-at-a-time backfill may go on): then the wait stops and the
        pass plans afresh.
        """
        self.state, events, changed = decide.job_observed(self.state, job, workflow.now())
        self.events += events
        self._changed |= changed
        if not changed or self.armed_for is None:
            return
        if workflow.patched(JOB_END_TIDIED_DURING_ARMED_WAIT):
            if decide.only_tidying(self.state, workflow.now()):
                self._tidy = True
            else:
                self._interrupt = True
        elif workflow.patched(JOB_END_STOPS_ARMED_WAIT):
            self._interrupt = True

    @workflow.signal(name="group_answer")
    def group_answer(self, answer: GroupAnswer) -> None:
        """CJ-GROUP: the concurrency group answers a report, or gives the waiting schedule time its slot."""
        self.state, events, changed = decide.answered(self.state, answer, workflow.now())
        self.events += events
        self._changed |= changed

    # -- operator controls ----------------------------------------------------------------

    @workflow.update(name="trigger")
    async def trigger(self, _: TriggerInput) -> TriggerResult:
        """Create a Job now, as ``kubectl create job --from=cronjob/NAME`` does, under a distinct name."""
        self._interrupt = True  # the lock may be held by an armed creation's wait
        async with self._lock:
            run = decide.trigger(self.state, workflow.now())
            res = await self._create(run)
            if res.outcome not in ("created", "exists") or res.job is None:
                raise ApplicationError(f"could not create Job {run.name}: {res.outcome} {res.message}".strip(),
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
        deadline then runs (CJ-25)."""
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
            result = await self._backfill(times, inp.one_at_a_time)
            self._changed = True
            return result

    @backfill.validator
    def _validate_backfill(self, inp: BackfillInput) -> None:
        self._require_live()
        self._backfill_times(inp)

    def _backfill_times(self, inp: BackfillInput) -> list[datetime]:
        try:
            return decide.backfill_times(self.state, inp, workflow.now())
        except decide.BackfillRefused as err:
            raise ApplicationError(f"backfill refused: {err}", type="InvalidBackfill", non_retryable=True) from None

    @workflow.query(name="describe")
    def describe(self) -> dict[str, Any]:
        """Schedule, next times, active Jobs, counters and recent results."""
        return decide.describe(self.state, workflow.now(), wake=self.wake, armed_for=self.armed_for)

    @workflow.query(name="history")
    def history(self) -> list[dict[str, Any]]:
        """The run ledger (CJ-LEDGER): the last 100 schedule times, triggers and backfills, oldest first."""
        return decide.history(self.state)

    # -- the loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: CronJobInput) -> str:
        self._delivery = asyncio.create_task(self._deliver())  # NOTIFY-DELIVERY, for as long as the run lasts
        as_of: datetime | None = None
        while not self.obs.gone:
            async with self._lock:
                self._changed = self._interrupt = self._tidy = False
                await self.sync(as_of)
            if self.obs.gone:
                break
            as_of = await self._sleep()
            info = workflow.info()
            if info.is_continue_as_new_suggested() or info.get_current_history_length() > _history_limit(self.run_events):
                await self._continue_as_new()
        workflow.upsert_search_attributes([NEXT_SCHEDULE_TIME.value_unset()])
        workflow.logger.info("CronJob %s/%s is gone; workflow ends", self.obs.namespace, self.obs.name)
        await execute(decide.sync_group(self), self)  # CJ-GROUP: leave, its slots free
        if self.state.outbox:  # NOTIFY-EVENTS: what it has to tell goes out before it ends
            await workflow.wait_condition(lambda: not self.state.outbox)
        return "gone"

    async def _deliver(self) -> None:
        """NOTIFY-DELIVERY: send the outbox's CloudEvents, oldest first, each until the sink takes it; a new
        run (continue-as-new) goes on with what is left."""
        while True:
            await workflow.wait_condition(lambda: bool(self.state.outbox))
            event = self.state.outbox[0]
            await self.perform(Notify(event))
            self.state = decide.delivered(self.state, event.id)

    async def _continue_as_new(self) -> None:
        """Start a new run with this state, once every handler is done and every Event recorded (CJ-51).

        A Job's end seen since the last pass (``job_observed``) leaves its Event to record; the
        new run's state already counts the Job, so it would never record it.
        """
        await workflow.wait_condition(workflow.all_handlers_finished)
        while self.events:
            await self._flush_events()
            await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(CronJobInput(state=self.state, lead_seconds=self.lead.total_seconds(),
                                              run_events=HISTORY_EVENTS))

    async def sync(self, as_of: datetime | None = None) -> None:
        """One pass: execute the planner's steps, then write the status if it changed.

        ``as_of``: a schedule time up to ``lead`` ahead of the clock; the pass runs as of it and
        the Job due then is created on time by the worker (see the module docstring).
        """
        await self._flush_events()
        self.wake = None
        if not self.obs.deleting:
            now = workflow.now()
            armed = as_of is not None and as_of > now and self._armable()
            end = await execute(decide.run_pass(self, as_of if armed and as_of else now, armed=armed,
                                                  subminute=_subminute, clock=workflow.now), self)
            self._changed |= end.interrupted  # plan again at once
            self.wake = end.wake
            if self.state.backfill:
                await self._advance_backfill(None)
            if self.obs.backfill != self.state.backfill_taken and workflow.patched(BACKFILL_DOOR):
                await self._take_backfill()
        self._count_runs()
        await self._write_status(self.wake)

    async def _write_status(self, wake: datetime | None) -> None:
        """Record the Events still to record and write the status if it changed: in one local
        activity when there are both (EVENTS_WITH_STATUS); the Events its one try missed are
        recorded after it with the usual retries."""
        due = decide.status_key(self.state, wake) != self._written
        events: list[EventInput] = []
        if due and self.events and workflow.patched(EVENTS_WITH_STATUS):
            events, self.events = self.events, []
            self._log_warnings(events)
        else:
            await self._flush_events()
        if not due:
            return
        summary = f"write status and annotations, record {len(events)} Event(s)" if events else \
            "write status and annotations"
        res = await self.perform(Call(sync_cronjob, decide.status(self.state, wake, events), summary=summary))
        if res.gone:
            self.state = decide.gone(self.state)
        self._written = decide.status_key(self.state, wake)
        for ev in res.unrecorded:
            await self.perform(Emit(ev))

    async def _tidy_while_armed(self, due: datetime) -> None:
        """A Job's end during an armed wait: its Events, the history limits and the status, as a pass
        would do them, while the creation of ``due`` waits on (``job_observed``)."""
        self._tidy = False
        if not workflow.patched(EVENTS_WITH_STATUS):  # since it, the Events ride with the status write
            await self._flush_events()
        await execute(decide.tidy(self), self)
        self._count_runs()
        await self._write_status(due)

    async def _take_backfill(self) -> None:
        """CJ-BACKFILL-DOOR: run the backfill that ``batchd.io/backfill`` asks for, as the update runs it,
        and say what became of it in an Event."""
        self.state, asked = decide.backfill_asked(self.state)
        if asked is None:
            return
        try:
            times = decide.backfill_times(self.state, asked, workflow.now())
        except decide.BackfillRefused as err:
            self.events.append(decide.backfill_event(self.state, err))
            return
        self.events.append(decide.backfill_event(self.state, await self._backfill(times, asked.one_at_a_time)))

    async def _backfill(self, times: list[datetime], one_at_a_time: bool) -> BackfillResult:
        """CJ-BACKFILL: create the Jobs of ``times``, or queue them one at a time."""
        result = BackfillResult(times=len(times))
        if one_at_a_time:
            self.state = self.state.model_copy(update={"backfill": times, "backfilling": False})
            return await self._advance_backfill(result)
        for t in times:
            result, _ = await self._backfill_one(result, t)
            if self.obs.gone:
                break
        return result

    async def _advance_backfill(self, result: BackfillResult | None) -> BackfillResult:
        """CJ-BACKFILL one at a time: create the queue's next Job once the one before it has ended."""
        result = result or BackfillResult(times=len(self.state.backfill))
        while True:
            self.state, due = decide.next_backfill(self.state)
            if due is None:
                return result.model_copy(update={"queued": decide.backfill_queued(self.state)})
            result, res = await self._backfill_one(result, due)
            self.state = decide.backfill_started(self.state, res)

    async def _backfill_one(self, result: BackfillResult,
                            due: datetime) -> tuple[BackfillResult, CreateJobResult | None]:
        """Create the Job of one backfilled time; None when the ledger shows it created already."""
        run = decide.backfill_run(self.state, due)
        res = None if decide.ran(self.state, due) else await self._create(run)
        return decide.backfilled(result, run, res), res

    # -- executing: the planner's steps, and this workflow's own --------------------------------

    async def perform(self, step: Any) -> Any:
        if isinstance(step, decide.CreateAt):
            return await self._create_at(step.run, step.at)
        return await super().perform(step)

    async def _create(self, run: Run) -> CreateJobResult:
        return await execute(decide.create(self, run, workflow.now), self)

    async def _create_at(self, run: Run, at: datetime) -> CreateJobResult | None:
        """Hand the creation to the worker until ``at``; None if a signal or update interrupts."""
        wait = max(timedelta(0), at - workflow.now())
        inp: CreateJobInput = decide.armed_input(self.state, run, at=at, wait_seconds=wait.total_seconds())
        if self._interrupt:
            return None
        self.armed_for = run.due
        try:
            handle = workflow.start_activity(
                create_cronjob_job_at, inp, task_queue=timed_task_queue(workflow.info().task_queue),
                start_to_close_timeout=wait + ARMED_SLACK, retry_policy=K8S_RETRY,
                cancellation_type=ActivityCancellationType.TRY_CANCEL,
                summary=f"create Job {inp.namespace}/{inp.job_name} at {iso(at)}")
            await workflow.wait_condition(lambda: handle.done() or self._interrupt or self._tidy)
            while self._tidy and not handle.done() and not self._interrupt:
                await self._tidy_while_armed(run.due)
                if self.obs.gone:  # the status write found the CronJob gone
                    break
                await workflow.wait_condition(lambda: handle.done() or self._interrupt or self._tidy)
            if not handle.done():
                # The armed activity does not heartbeat, so the cancellation never reaches it: the
                # abandoned wait fires at its time and re-reads the CronJob. A changed spec, or a
                # change of what its annotations decide (a hold, say), makes it "stale", a deleted or
                # recreated CronJob "cronjob_gone"; else it creates the very Job the next plan
                # creates, and one of the two finds it "exists".
                handle.cancel()
                handle.add_done_callback(_outcome_unused)
                return None
            res: CreateJobResult = await handle
        finally:
            self.armed_for = None
        if res.outcome == "stale":  # the bridge has not told us of the new spec or annotations yet; let it
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: (self.obs.generation >= res.generation and self.obs.decision_key() != inp.observed)
                    or self.obs.gone, timeout=STALE_WAIT, timeout_summary="wait for the CronJob's new spec")
        return res

    async def _set_suspend(self, value: bool, reason: str | None) -> SuspendResult:
        self._interrupt = True  # the lock may be held by an armed creation's wait
        async with self._lock:
            patch = decide.suspend_change(self.state, value, reason, workflow.now())
            if patch is None:
                return SuspendResult(suspended=value, changed=False)
            res = await self.perform(Call(set_cronjob_suspend, patch, summary=f"set spec.suspend={str(value).lower()}"))
            if res.gone:
                self.state = decide.gone(self.state)
                raise ApplicationError("the CronJob no longer exists", type="CronJobGone")
            self.state = decide.suspended(self.state, patch)
            self._changed = True
            return SuspendResult(suspended=value, changed=True)

    async def _flush_events(self) -> None:
        events, self.events = self.events, []
        self._log_warnings(events)
        for ev in events:
            await self.perform(Emit(ev))

    def _log_warnings(self, events: list[EventInput]) -> None:
        for ev in events:
            if ev.type == "Warning":
                workflow.logger.warning("CronJob %s/%s: %s: %s", self.obs.namespace, self.obs.name, ev.reason,
                                        ev.message)

    # -- helpers --------------------------------------------------------------------------

    def _count_runs(self) -> None:
        """``batchd_cronjob_runs_total{outcome,source}``: each new ledger entry once (CJ-LEDGER), through
        the workflow's meter, which records nothing while a history replays."""
        new = decide.ledger_since(self.state, self._counted_up_to)
        if new:
            if self._runs_counter is None:  # one per run: each create makes a new metric in the SDK
                self._runs_counter = workflow.metric_meter().create_counter(
                    "batchd_cronjob_runs", "CronJob schedule times, triggers and backfills, by ledger outcome and source")
            for entry in new:
                self._runs_counter.add(1, {"outcome": entry.outcome, "source": entry.source})
            self._counted_up_to = decide.ledger_key(new[-1])

    def woken(self) -> bool:
        return self._changed or self.obs.gone

    def _require_live(self) -> None:
        if self.obs.gone or self.obs.deleting:
            raise ValueError(f"CronJob {self.obs.namespace}/{self.obs.name} is being deleted or gone")

    def _armable(self) -> bool:
        # a member of a concurrency group asks for its slot at the time itself (CJ-GROUP)
        return (self.lead > timedelta(0) and self.obs.spec.concurrency_policy == "Allow" and not self.obs.spec.suspend
                and self.obs.concurrency_group is None)

    async def _sleep(self) -> datetime | None:
        """Wait for the next wake-up or a change; return the wake-up time if the next pass runs as of it (armed)."""
        now = workflow.now()
        shown = decide.next_run(self.state, self.wake)
        # upserted when the wake-up changes, as before the value became the next run: a history
        # replays with its upserts where they were, and only their values differ (CJ-58)
        if self._advertised != self.wake:
            self._advertised = self.wake
            workflow.upsert_search_attributes([
                NEXT_SCHEDULE_TIME.value_set(shown) if shown else NEXT_SCHEDULE_TIME.value_unset()])
        when = f"next runs {iso(shown)}" if shown else "suspended" if self.obs.spec.suspend else "idle"
        queue = f"; backfill: {len(self.state.backfill)} time(s) to go, one at a time" if self.state.backfill else ""
        workflow.set_current_details(f"CronJob {self.obs.namespace}/{self.obs.name} (`{self.obs.spec.schedule}`) "
                                     f"{when}{queue}")
        if self.wake is None:
            await self.perform(Wait())
            return None
        summary = f"CronJob {self.obs.namespace}/{self.obs.name} next schedule {iso(self.wake)}"
        if not self._armable():
            await self.perform(Wait(max(timedelta(0), self.wake - now), summary))
            return None
        if self._changed or self.obs.gone:
            return None  # a pass at the real time first: whatever is due now is not held back
        arm_at = self.wake - self.lead
        if arm_at > now and await self.perform(
                Wait(arm_at - now, f"{summary}; Job creation armed {self.lead.total_seconds():g}s before")):
            return None
        return self.wake if self._armable() and not self.obs.gone else None
