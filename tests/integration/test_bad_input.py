"""Tier 3: values at the edges of what the API accepts never jam a workflow (TIME-1 in docs/design.md).

Each case runs the real worker and bridge against kubesim and the dev server, and checks that
the object's workflow keeps answering queries, honours the next change, ends on deletion, and
says "never" where that is the answer. The watchdog test shows what still happens when a
workflow task fails anyway (a bug): an ERROR line, a Warning Event, and deletion still ends it.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import TypedSearchAttributes
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from kube.client import Kube
from tests.conftest import eventually, running, save_history, workflow_exists
from tests.integration.test_cronjob import cronjob_manifest, describe, events_of, jobs_of, started
from tests.k8s import create_job, finish_job, pod_manifest
from worker import commands
from worker.routers import search_attributes
from worker.watchdog import REASON, Watchdog
from workflows.identity import cronjob_workflow_id, job_workflow_id, ttl_workflow_id
from workflows.models.common import ObjectRef

INT64_MAX = 2**63 - 1


async def ended(client: Client, wid: str) -> Any:
    desc = await client.get_workflow_handle(wid).describe()
    return desc.status != WorkflowExecutionStatus.RUNNING and desc


async def test_a_cronjob_whose_starting_deadline_is_int64_max_runs_and_answers(client, kube: Kube, namespace,
                                                                               task_queue):
    # now - 2^63-1 s is before datetime.min: no deadline at all, so the due time runs
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("far", "@every 2s", sds=INT64_MAX))
        await started(client, namespace, "far")
        await eventually(lambda: jobs_of(kube, namespace, "far"), what="a Job")
        state = await describe(client, namespace, "far")
        assert state["startingDeadlineSeconds"] == INT64_MAX and state["active"]
        kube.patch("CronJob", namespace, "far", {"spec": {"suspend": True}})
        await eventually(lambda: describe(client, namespace, "far"), what="describe")
        assert await eventually(lambda: _suspended(client, namespace, "far"), what="the suspend honoured")
        kube.delete("CronJob", namespace, "far")
        assert await eventually(lambda: ended(client, cronjob_workflow_id(namespace, "far")), what="workflow ended")


async def _suspended(client: Client, ns: str, name: str) -> bool:
    return bool((await describe(client, ns, name))["suspend"])


async def test_a_sub_minute_schedule_makes_one_job_a_minute_and_no_status_write_while_it_is_active(
        client, kube: Kube, namespace, task_queue, kubesim_server, skipper):
    # CJ-SUBMINUTE: every activation of a minute names that minute's Job (CJ-30, CJ-31)
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("often", "@every 1s"))
        handle = await started(client, namespace, "often")
        [first] = await eventually(lambda: jobs_of(kube, namespace, "often"), what="the first Job")
        await eventually(lambda: (kube.get("CronJob", namespace, "often").get("status") or {}).get("active"),
                         what="status.active written")
        kubesim_server.audit(reset=True)
        await skipper.fast_forward(handle, timedelta(minutes=3))
        jobs = await eventually(lambda: (j := jobs_of(kube, namespace, "often")) and len(j) >= 4 and j,
                                timeout=60, what="one Job for each of the next three minutes")
        minutes = sorted(int(j["metadata"]["name"].rsplit("-", 1)[1]) for j in jobs)
        assert minutes == list(range(minutes[0], minutes[0] + len(minutes))) and len(minutes) in (4, 5)
        writes = sum(n for key, n in kubesim_server.audit().items()
                     if key.resource == "cronjobs" and key.verb in ("patch", "update"))
        # two writes (status, batchd's annotations) per new Job at most; before, 2 per second (360)
        assert writes <= 2 * len(jobs), writes
        assert (await describe(client, namespace, "often"))["lastScheduleTime"]
        await save_history(handle, "cronjob-sub-minute")


async def test_a_pod_ttl_label_too_large_to_take_is_a_ttlnotapplied_warning(client, kube: Kube, namespace,
                                                                            task_queue):
    async with running(client, kube, task_queue, namespace):
        pod = kube.create("Pod", namespace, pod_manifest("huge", ttl_label="9" * 63))
        warned = await eventually(lambda: events_of(kube, namespace, "huge", "TTLNotApplied"), what="TTLNotApplied")
        assert "larger than" in warned[0]["message"]
        await eventually(lambda: kube.get("Pod", namespace, "huge")["status"].get("phase") == "Succeeded",
                         what="the Pod finished")
        assert not await workflow_exists(client, ttl_workflow_id("Pod", namespace, "huge", pod["metadata"]["uid"]))


async def test_a_ttl_beyond_year_9999_is_never_and_deletion_still_ends_the_workflow(client, kube: Kube, namespace,
                                                                                    task_queue):
    async with running(client, kube, task_queue, namespace):
        pod = kube.create("Pod", namespace, pod_manifest("forever", ttl_label="1000000000000"))  # 31,700 years
        wid = ttl_workflow_id("Pod", namespace, "forever", pod["metadata"]["uid"])
        state = await eventually(lambda: _ttl_state(client, wid), what="the TTL workflow decided")
        assert state["expireAt"] == "never"
        rows = await commands.ttl_list(client, namespace=namespace, limit=None, output="json")
        assert '"expiresAt": "never"' in rows and '"inSeconds": null' in rows
        table = await commands.ttl_list(client, namespace=namespace, limit=None, output="table")
        assert "never" in table.splitlines()[1]
        job = create_job(kube, namespace, "late", ttl=2**31 - 1)  # int32 max, from a finish in year 9990
        finish_job(kube, namespace, "late", datetime(9990, 1, 1, tzinfo=UTC))
        job_wid = ttl_workflow_id("Job", namespace, "late", job["metadata"]["uid"])
        assert (await eventually(lambda: _ttl_state(client, job_wid), what="the Job's TTL"))["expireAt"] == "never"
        kube.patch("Job", namespace, "late", {"spec": {"ttlSecondsAfterFinished": 0}})
        await eventually(lambda: _expires(client, job_wid, "9990-01-01T00:00:00Z"), what="the lowered TTL honoured")
        kube.delete("Job", namespace, "late")
        await eventually(lambda: ended(client, job_wid), what="the Job's workflow ended")
        kube.delete("Pod", namespace, "forever")
        desc = await eventually(lambda: ended(client, wid), what="the Pod's workflow ended")
        assert desc.status == WorkflowExecutionStatus.COMPLETED
        await save_history(client.get_workflow_handle(job_wid), "ttl-never-then-deleted")


async def _expires(client: Client, wid: str, when: str) -> bool:
    return (await client.get_workflow_handle(wid).query("describe")).get("expireAt") == when


async def _ttl_state(client: Client, wid: str) -> dict[str, Any] | None:
    if not await workflow_exists(client, wid):
        return None
    state = await client.get_workflow_handle(wid).query("describe")
    return state if state.get("expireAt") else None


@workflow.defn(name="AlwaysFailsItsTask")
class AlwaysFailsItsTask:
    """Stands in for a batchd workflow with a bug: every task raises."""

    @workflow.run
    async def run(self) -> None:
        raise RuntimeError("a bug in a decision")


async def test_a_workflow_failing_its_tasks_is_reported_and_ended_when_its_object_is_deleted(
        client, kube: Kube, namespace, task_queue, caplog):
    job = create_job(kube, namespace, "buggy")
    wid = f"test-stuck/{uuid.uuid4()}"
    attributes: TypedSearchAttributes = search_attributes(
        ObjectRef(kind="Job", namespace=namespace, name="buggy", uid=job["metadata"]["uid"]))
    watchdog = Watchdog(client, kube, task_queue=task_queue)
    async with Worker(client, task_queue=task_queue, workflows=[AlwaysFailsItsTask],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        await client.start_workflow("AlwaysFailsItsTask", id=wid, task_queue=task_queue, search_attributes=attributes)
        with caplog.at_level(logging.ERROR, logger="batchd.watchdog"):
            assert await eventually(watchdog.check, timeout=60, interval=1, what="the problem reported") == [wid]
        assert any(wid in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
        [event] = await eventually(lambda: events_of(kube, namespace, "buggy", REASON), what="the Warning Event")
        assert event["type"] == "Warning" and wid in event["message"]
        assert await watchdog.check() == []  # reported once per run
        kube.delete("Job", namespace, "buggy")
        await eventually(lambda: kube.get("Job", namespace, "buggy") is None, what="the Job deleted")
        await watchdog.check()
        desc = await eventually(lambda: ended(client, wid), what="the stuck workflow ended")
        assert desc.status == WorkflowExecutionStatus.TERMINATED


async def test_a_job_whose_active_deadline_is_int64_max_runs_to_completion(client, kube: Kube, namespace,
                                                                          task_queue):
    # start + 2^63-1 s is past year 9999: no deadline (TIME-1); the Job runs as any other
    from tests.integration.test_job import condition, job_manifest, outcome

    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("endless", deadline=INT64_MAX, run_seconds=0.5))
        wid = job_workflow_id(namespace, "endless", job["metadata"]["uid"])
        await eventually(lambda: workflow_exists(client, wid), what="the Job's workflow")
        assert await client.get_workflow_handle(wid).query("describe")
        assert await outcome(client, namespace, job) == "Complete"
        assert condition(kube.get("Job", namespace, "endless"), "Complete")
