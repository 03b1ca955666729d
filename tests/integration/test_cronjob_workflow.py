"""Tier 3: the CronJob workflow alone on the real dev server, with stand-in activities.

Here the Kubernetes side is a recorder, so the tests can feed the workflow specs that the API
server would have refused — what "got past validation" looks like to batchd (a newer API
server, a worker whose zone database lacks a zone) — and pin the workflow's reaction.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from tests.conftest import eventually, idle, save_history
from workflows.cronjob import CronJobWorkflow
from workflows.models.common import EventInput
from workflows.models.cronjob import (
    CreateJobInput,
    CreateJobResult,
    CronJobInput,
    CronJobObservation,
    CronJobSpec,
    CronJobState,
    DeleteJobsInput,
    DeleteJobsResult,
    JobSummary,
    ObjectReference,
    SetSuspendInput,
    SyncCronJobInput,
    SyncCronJobResult,
)


class FakeKube:
    def __init__(self, *, events_fail_with_status: bool = False) -> None:
        self.created: list[str] = []
        self.events: list[tuple[str, str]] = []
        self.syncs = 0
        self.events_fail_with_status = events_fail_with_status  # the status write's one try records none
        self.unrecorded: list[str] = []

    def activities(self) -> list:
        @activity.defn(name="create_cronjob_job")
        async def create(inp: CreateJobInput) -> CreateJobResult:
            if inp.job_name in self.created:
                return CreateJobResult(outcome="exists", job=ObjectReference(name=inp.job_name, namespace=inp.namespace, uid=inp.job_name))
            self.created.append(inp.job_name)
            return CreateJobResult(outcome="created", job=ObjectReference(name=inp.job_name, namespace=inp.namespace, uid=inp.job_name))

        @activity.defn(name="delete_cronjob_jobs")
        async def delete(inp: DeleteJobsInput) -> DeleteJobsResult:
            return DeleteJobsResult(deleted=[j.name for j in inp.jobs])

        @activity.defn(name="sync_cronjob")
        async def sync(inp: SyncCronJobInput) -> SyncCronJobResult:
            self.syncs += 1
            if self.events_fail_with_status:
                self.unrecorded += [ev.reason for ev in inp.events]
                return SyncCronJobResult(unrecorded=inp.events)
            self.events += [(ev.reason, ev.message) for ev in inp.events]  # recorded after the write
            return SyncCronJobResult()

        @activity.defn(name="set_cronjob_suspend")
        async def suspend(inp: SetSuspendInput) -> SyncCronJobResult:
            return SyncCronJobResult()

        @activity.defn(name="record_event")
        async def event(inp: EventInput) -> None:
            self.events.append((inp.reason, inp.message))

        return [create, delete, sync, suspend, event]


def observation(schedule: str, *, time_zone: str | None = None, generation: int = 1, **spec) -> CronJobObservation:
    return CronJobObservation(
        namespace="ns", name="cj", uid="cj-uid", generation=generation,
        creation_timestamp=datetime.now(UTC) - timedelta(seconds=1),
        spec=CronJobSpec(schedule=schedule, time_zone=time_zone, **spec),
    )


async def start(client: Client, tq: str, obs: CronJobObservation):
    return await client.start_workflow(
        CronJobWorkflow.run, CronJobInput(state=CronJobState(observation=obs)), id=f"cronjob/{uuid.uuid4()}",
        task_queue=tq, start_signal="observe", start_signal_args=[obs])


async def test_unknown_time_zone_warns_once_and_waits_for_a_spec_change(client: Client, task_queue: str) -> None:
    # CJ-10: Warning UnknownTimeZone, no Job, no requeue - then a fixed spec schedules again
    kube = FakeKube()
    async with Worker(client, task_queue=task_queue, workflows=[CronJobWorkflow], activities=kube.activities()):
        handle = await start(client, task_queue, observation("@every 1s", time_zone="Mars/Olympus"))
        await eventually(lambda: kube.events, what="a warning")
        # idle (no timer, no activity): it waits for a spec change, so no Job and no Event storm follow
        await eventually(lambda: idle(handle), what="the workflow idle")
        assert [r for r, _ in kube.events] == ["UnknownTimeZone"] and kube.created == []
        d = await handle.query("describe")
        assert d["nextScheduleTime"] is None
        await handle.signal("observe", observation("@every 1s", generation=2))
        await eventually(lambda: kube.created, what="a Job after the fix")
        await handle.signal("observe", observation("@every 1s", generation=2).model_copy(update={"gone": True}))
        assert await handle.result() == "gone"
    await save_history(handle, "cronjob-unknown-zone-then-fixed")


async def test_unparseable_schedule_warns_once(client: Client, task_queue: str) -> None:
    # CJ-11
    kube = FakeKube()
    async with Worker(client, task_queue=task_queue, workflows=[CronJobWorkflow], activities=kube.activities()):
        handle = await start(client, task_queue, observation("61 * * * *"))
        await eventually(lambda: kube.events)
        await handle.signal("observe", observation("61 * * * *", generation=1))  # same spec again
        await eventually(lambda: _signal_handled(handle), what="the signal handled")
        assert [r for r, _ in kube.events] == ["UnparseableSchedule"]
        assert "61 * * * *" in kube.events[0][1]
        await handle.terminate("done")


async def test_impossible_date_is_an_invalid_schedule(client: Client, task_queue: str) -> None:
    # CJ-15: 0 0 31 2 * never fires
    kube = FakeKube()
    async with Worker(client, task_queue=task_queue, workflows=[CronJobWorkflow], activities=kube.activities()):
        handle = await start(client, task_queue, observation("0 0 31 2 *"))
        await eventually(lambda: kube.events)
        assert kube.events[0][0] == "InvalidSchedule" and kube.created == []
        await handle.terminate("done")


async def test_tz_prefix_warns_unsupported_but_still_schedules(client: Client, task_queue: str) -> None:
    # CJ-8
    kube = FakeKube()
    async with Worker(client, task_queue=task_queue, workflows=[CronJobWorkflow], activities=kube.activities()):
        handle = await start(client, task_queue, observation("TZ=UTC @every 1s"))
        await eventually(lambda: kube.created)
        # Events are flushed after the pass that queued them, so the first Job may come first.
        await eventually(lambda: kube.events, what="the Event")
        # the same spec again makes a pass at once (the schedule's own next pass is a minute away)
        await handle.signal("observe", observation("TZ=UTC @every 1s"))
        await eventually(lambda: _signal_handled(handle, timers=True), what="the later pass done")
        assert [r for r, _ in kube.events if r == "UnsupportedSchedule"] == ["UnsupportedSchedule"]
        await handle.terminate("done")


async def test_events_the_status_write_could_not_record_are_recorded_with_retries(client: Client, task_queue: str) -> None:
    kube = FakeKube(events_fail_with_status=True)
    async with Worker(client, task_queue=task_queue, workflows=[CronJobWorkflow], activities=kube.activities()):
        handle = await start(client, task_queue, observation("TZ=UTC @every 1s"))
        await eventually(lambda: kube.created and kube.syncs)
        await eventually(lambda: kube.events, what="the Event, through record_event")
        assert kube.unrecorded == [r for r, _ in kube.events] == ["UnsupportedSchedule"]
        await handle.terminate("done")


async def test_a_job_finishing_is_counted_once_however_often_it_is_reported(client: Client, task_queue: str) -> None:
    kube = FakeKube()
    async with Worker(client, task_queue=task_queue, workflows=[CronJobWorkflow], activities=kube.activities()):
        handle = await start(client, task_queue, observation("@every 1s"))
        [name] = await eventually(lambda: kube.created[:1])
        done = JobSummary(name=name, uid=name, owner_uid="cj-uid", outcome="Failed")
        for _ in range(3):  # a replayed event, a relist, a second bridge
            await handle.signal("job_observed", done)
        d = await eventually(lambda: _failed(handle))
        assert d["counters"] == {"succeeded": 0, "failed": 1, "failuresSinceLastSuccess": 1}
        assert [r["jobName"] for r in d["recentRuns"]] == [name]
        await handle.signal("observe", observation("@every 1s").model_copy(update={"gone": True}))
        await handle.result()
    await save_history(handle, "cronjob-counted-once")


async def _signal_handled(handle, *, timers: bool = False) -> bool:
    """The workflow took in its last signal (a workflow task completed after it) and is idle again."""
    events = (await handle.fetch_history()).events
    last = max(i for i, ev in enumerate(events) if ev.HasField("workflow_execution_signaled_event_attributes"))
    return (any(ev.HasField("workflow_task_completed_event_attributes") for ev in events[last:])
            and await idle(handle, timers=timers))


async def _failed(handle) -> dict | None:
    d = await handle.query("describe")
    return d if d["counters"]["failed"] else None
