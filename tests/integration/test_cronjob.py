"""Tier 3: CronJob workflows end to end — kubesim over HTTP, the real dev server, worker + bridge.

Most tests use ``@every Ns`` schedules (real, short); upstream names Jobs by the minute (CJ-30, CJ-31),
so a test that needs several distinct Jobs fast-forwards the workflow's virtual clock instead. With
the default ``cronjob_lead`` every Allow run is an armed creation (the lead exceeds the interval);
the fast-forwarded Allow tests set it to 0, since an armed creation waits on the worker's real clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import Client

from kube.client import Kube
from tests.conftest import eventually, idle, running, save_history, utcnow, workflow_exists
from tests.k8s import finish_job, second
from workflows import cronjob as cronjob_workflow
from workflows.cronjob import ARMED_SLACK, JOB_END_TIDIED_DURING_ARMED_WAIT
from workflows.identity import NEXT_SCHEDULE_TIME, cronjob_workflow_id
from workflows.models.job import JOB_MANAGED_BY

#: Jobs these tests' CronJobs create name another controller, so they stay active until a test
#: finishes them by hand; the Job controller's own tests are in test_job.py.
HAND_RUN = "example.com/by-hand"


def cronjob_manifest(name: str, schedule: str, *, policy: str = "Allow", suspend: bool = False,
                     time_zone: str | None = None, sds: int | None = None, managed: bool = True,
                     annotations: dict[str, str] | None = None, limits: tuple[int, int] | None = None,
                     job_managed_by: str | None = HAND_RUN) -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {"spec": {"restartPolicy": "Never",
                                                      "containers": [{"name": "main", "image": "busybox:1.36"}]}}}
    if job_managed_by:
        job_spec["managedBy"] = job_managed_by
    spec: dict[str, Any] = {
        "schedule": schedule, "concurrencyPolicy": policy, "suspend": suspend,
        "jobTemplate": {"metadata": {"labels": {"app": name}, "annotations": {"team": "batch"}}, "spec": job_spec},
    }
    if time_zone:
        spec["timeZone"] = time_zone
    if sds is not None:
        spec["startingDeadlineSeconds"] = sds
    if limits is not None:
        spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"] = limits
    meta: dict[str, Any] = {"name": name, "labels": {"batchd.io/managed": "true"} if managed else {},
                            "annotations": annotations or {}}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": spec}


def jobs_of(kube: Kube, ns: str, cronjob: str) -> list[dict[str, Any]]:
    return [j for j in kube.list("Job", ns)["items"]
            if any(o.get("name") == cronjob and o.get("kind") == "CronJob" for o in j["metadata"].get("ownerReferences", []))]


def events_of(kube: Kube, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.list("Event", ns)["items"]
            if e["involvedObject"]["name"] == name and e["reason"] == reason]


async def describe(client: Client, ns: str, name: str) -> dict[str, Any]:
    return await client.get_workflow_handle(cronjob_workflow_id(ns, name)).query("describe")


async def test_job_is_created_for_the_due_time_with_upstreams_metadata(client, kube: Kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        cj = kube.create("CronJob", namespace, cronjob_manifest("every", "@every 2s", job_managed_by=None))
        [job] = await eventually(lambda: jobs_of(kube, namespace, "every"), what="a Job")
        meta = job["metadata"]
        assert meta["labels"]["app"] == "every" and meta["annotations"]["team"] == "batch"  # CJ-32
        owner = meta["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == \
            ("CronJob", cj["metadata"]["uid"], True, True)  # CJ-34
        assert job["spec"]["managedBy"] == JOB_MANAGED_BY
        scheduled = datetime.fromisoformat(meta["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"].replace("Z", "+00:00"))
        assert meta["name"] == f"every-{int(scheduled.timestamp()) // 60}"  # CJ-30
        fresh = await eventually(lambda: (c := kube.get("CronJob", namespace, "every")) and c.get("status", {}).get("active") and c)
        assert fresh["status"]["active"][0]["uid"] == meta["uid"]
        assert fresh["status"]["lastScheduleTime"] == scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert await eventually(lambda: events_of(kube, namespace, "every", "SuccessfulCreate"))
        assert (fresh["metadata"].get("annotations") or {}).get("batchd.io/next-schedule-time") or \
            (await eventually(lambda: kube.get("CronJob", namespace, "every")["metadata"]["annotations"].get("batchd.io/next-schedule-time")))


async def test_replace_deletes_the_active_job_then_creates_the_next(client, kube, namespace, task_queue, skipper):
    async with running(client, kube, task_queue, namespace):
        handle, first = await first_job_then_the_next_time(client, kube, namespace, skipper, "repl", "Replace")
        [second_job] = await eventually(
            lambda: (j := jobs_of(kube, namespace, "repl")) and j[0]["metadata"]["uid"] != first["metadata"]["uid"] and j,
            what="replacement")
        assert await eventually(lambda: events_of(kube, namespace, "repl", "SuccessfulDelete"))
        assert (await describe(client, namespace, "repl"))["active"] == [second_job["metadata"]["name"]]


async def test_history_limits_delete_the_oldest_finished_jobs(client, kube, namespace, task_queue, skipper):
    # CJ-48 to CJ-50: keep 1 successful and 1 failed, oldest by startTime deleted. Daily, and a day
    # fast-forwarded at a time: the real time the test takes never reaches another schedule time.
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("hist", "0 0 * * *", limits=(1, 1)))
        handle = await started(client, namespace, "hist")
        names = []
        start = second(utcnow()) - timedelta(minutes=1)
        for i, failed in enumerate((False, False, True, True)):
            await skipper.fast_forward(handle, timedelta(days=1))
            job = await eventually(lambda: [j for j in jobs_of(kube, namespace, "hist")
                                            if j["metadata"]["name"] not in names], what="next Job")
            names.append(job[0]["metadata"]["name"])
            # distinct startTimes in creation order, whole seconds apart
            finish_job(kube, namespace, names[-1], start + timedelta(seconds=i), failed=failed)
        await eventually(lambda: {j["metadata"]["name"] for j in jobs_of(kube, namespace, "hist")} == {names[1], names[3]},
                         what="only the newest of each kind")
        d = await describe(client, namespace, "hist")
        assert d["counters"] == {"succeeded": 2, "failed": 2, "failuresSinceLastSuccess": 2}


async def test_more_than_100_missed_times_warns_and_runs_only_the_latest(client, kube, namespace, task_queue, skipper):
    # CJ-17, CJ-18
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("late", "* * * * *", suspend=True))
        handle = await started(client, namespace, "late")
        await skipper.fast_forward(handle, timedelta(minutes=150))
        kube.patch("CronJob", namespace, "late", {"spec": {"suspend": False}})
        await eventually(lambda: events_of(kube, namespace, "late", "TooManyMissedTimes"), what="TooManyMissedTimes")
        # the first Job; on a loaded machine a minute may pass meanwhile and make the next one too
        job = min(await eventually(lambda: jobs_of(kube, namespace, "late")), key=lambda j: j["metadata"]["name"])
        minute = int(job["metadata"]["name"].rsplit("-", 1)[1])
        assert minute >= int(utcnow().timestamp()) // 60 + 149
        # CJ-LEDGER: the times that passed while suspended, the last 100 of them, then the run
        history = await handle.query("history")
        first = [e["outcome"] for e in history].index("created")
        assert len(history) == 100 and first >= 98 and [e["outcome"] for e in history[:first]] == ["suspended"] * first
        assert history[first]["job"] == job["metadata"]["name"]
        times = [_utc(e["scheduledTime"]) for e in history]
        assert all(b - a == timedelta(minutes=1) for a, b in zip(times, times[1:], strict=False))


async def test_schedule_change_rearms_the_timer_at_once(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        kube.create("CronJob", namespace, cronjob_manifest("move", "0 0 1 1 *"))
        await started(client, namespace, "move")
        kube.patch("CronJob", namespace, "move", {"spec": {"schedule": "0 9 * * *", "timeZone": "Asia/Tokyo"}})
        d = await eventually(lambda: _next(client, namespace, "move", "T00:00:00Z"), what="re-armed timer")
        assert d["nextScheduleTime"].endswith("T00:00:00Z")  # 09:00 in Tokyo is midnight UTC
        cj = await eventually(lambda: (c := kube.get("CronJob", namespace, "move"))["metadata"]["annotations"]
                              .get("batchd.io/next-schedule-time", "").endswith("T00:00:00Z") and c)
        rows = [w async for w in client.list_workflows(
            f'WorkflowId = "{cronjob_workflow_id(namespace, "move")}" AND NextScheduleTime < "2100-01-01T00:00:00Z"')]
        assert len(rows) == 1 and cj


async def _next(client: Client, ns: str, name: str, suffix: str) -> dict[str, Any] | None:
    d = await describe(client, ns, name)
    return d if (d["nextScheduleTime"] or "").endswith(suffix) else None


async def test_jitter_delays_the_run_but_not_its_scheduled_time(client, kube, namespace, task_queue, skipper):
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("jit", "0 * * * *", annotations={"batchd.io/jitter-percent": "50"}))
        handle = await started(client, namespace, "jit")
        d = await describe(client, namespace, "jit")
        wake, boundary = _utc(d["nextScheduleTime"]), _utc(d["upcoming"][0])
        assert boundary <= wake < boundary + timedelta(minutes=30)
        await skipper.fast_forward(handle, wake - utcnow() + timedelta(seconds=5))
        [job] = await eventually(lambda: jobs_of(kube, namespace, "jit"))
        assert job["metadata"]["name"] == f"jit-{int(boundary.timestamp()) // 60}"


async def test_several_schedules_run_at_their_union_and_a_refused_one_warns(client, kube, namespace, task_queue,
                                                                           skipper):
    # CJ-SCHEDULES: the union's times, its next time shown; a refused list is ignored with a Warning
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest(
            "many", "0 0 1 1 *", annotations={"batchd.io/schedules": "15 * * * *\n45 * * * *; 15 * * * *"}))
        kube.create("CronJob", namespace, cronjob_manifest(
            "bad", "0 0 1 1 *", annotations={"batchd.io/schedules": "15 * * * *; @every 1m"}))
        handle = await started(client, namespace, "many")
        d = await describe(client, namespace, "many")
        upcoming = [_utc(t) for t in d["upcoming"]]
        assert d["schedules"] == ["15 * * * *", "45 * * * *", "15 * * * *"]
        assert [t.minute for t in upcoming[:4]] in ([15, 45, 15, 45], [45, 15, 45, 15])
        assert _utc(d["nextScheduleTime"]) == upcoming[0]
        cj = kube.get("CronJob", namespace, "many")
        assert _utc(cj["metadata"]["annotations"]["batchd.io/next-schedule-time"]) == upcoming[0]
        await skipper.fast_forward(handle, upcoming[1] - utcnow() + timedelta(seconds=5))
        jobs = await eventually(lambda: len(jobs_of(kube, namespace, "many")) >= 2 and jobs_of(kube, namespace, "many"))
        assert sorted(j["metadata"]["name"] for j in jobs) == sorted(
            f"many-{int(t.timestamp()) // 60}" for t in upcoming[:2])
        [warning] = await eventually(lambda: events_of(kube, namespace, "bad", "InvalidAnnotation"))
        assert "@every" in warning["message"] and warning["type"] == "Warning"
        assert (await describe(client, namespace, "bad"))["schedules"] == []


async def test_a_window_a_run_limit_and_a_skip_calendar(client, kube, namespace, task_queue, skipper):
    # CJ-WINDOW, CJ-MAX-RUNS, CJ-SKIP on daily CronJobs, each fast-forwarded two days
    midnight = (utcnow() + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    until = midnight + timedelta(hours=12)
    manifests = {"win": {"batchd.io/active-until": until.isoformat()}, "max": {"batchd.io/max-runs": "1"},
                 "skip": {"batchd.io/skip": f"0 0 {midnight.day} {midnight.month} *"}}
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        for name, notes in manifests.items():
            kube.create("CronJob", namespace, cronjob_manifest(name, "0 0 * * *", annotations=notes))
        handles = {name: await started(client, namespace, name) for name in manifests}
        d = await describe(client, namespace, "win")
        assert [_utc(t) for t in d["upcoming"]] == [midnight] and _utc(d["activeUntil"]) == until
        assert (await describe(client, namespace, "max"))["remainingRuns"] == 1
        # CJ-58: the skipped midnight wakes the workflow, but the time shown is the one that runs
        d = await describe(client, namespace, "skip")
        assert _utc(d["nextScheduleTime"]) == _utc(d["upcoming"][0]) == midnight + timedelta(days=1)
        shown = await eventually(lambda: kube.get("CronJob", namespace, "skip")["metadata"]["annotations"].get(
            "batchd.io/next-schedule-time"), what="the next schedule time annotated")
        assert _utc(shown) == midnight + timedelta(days=1)

        async def advertised() -> datetime | None:
            return (await handles["skip"].describe()).typed_search_attributes.get(NEXT_SCHEDULE_TIME)

        assert await eventually(advertised, what="NextScheduleTime") == midnight + timedelta(days=1)
        for handle in handles.values():
            await skipper.fast_forward(handle, timedelta(days=2))
        first, second_day = f"{int(midnight.timestamp()) // 60}", f"{int(midnight.timestamp()) // 60 + 24 * 60}"
        for name, reason in (("win", "ActiveWindowEnded"), ("max", "MaxRunsReached")):
            [event] = await eventually(lambda n=name, r=reason: events_of(kube, namespace, n, r), what=reason)
            assert event["type"] == "Normal" and event["count"] == 1
            assert [j["metadata"]["name"] for j in jobs_of(kube, namespace, name)] == [f"{name}-{first}"]
            d = await describe(client, namespace, name)
            assert d["upcoming"] == [] and d["nextScheduleTime"] is None
            assert "batchd.io/next-schedule-time" not in kube.get("CronJob", namespace, name)["metadata"]["annotations"]
        assert (await describe(client, namespace, "max"))["remainingRuns"] == 0
        [job] = await eventually(lambda: jobs_of(kube, namespace, "skip"), what="the day after the skipped one")
        assert job["metadata"]["name"] == f"skip-{second_day}"
        ledger = await handles["skip"].query("history")
        assert [(_utc(x["scheduledTime"]), x["outcome"]) for x in ledger][:2] == [
            (midnight, "skipped-calendar"), (midnight + timedelta(days=1), "created")]
        for name, saved in (("skip", "cronjob-skip-calendar"), ("max", "cronjob-max-runs"), ("win", "cronjob-window")):
            await save_history(handles[name], saved)  # recorded while the annotation showed the wake-up


async def test_the_breaker_suspends_after_two_scheduled_failures(client, kube, namespace, task_queue, skipper):
    # CJ-BREAKER: suspended as `batchd cronjob suspend --reason` does, with a Warning
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest(
            "brk", "0 0 * * *", annotations={"batchd.io/suspend-after-failures": "2"}))
        handle = await started(client, namespace, "brk")
        done: set[str] = set()
        for _ in range(2):
            await skipper.fast_forward(handle, timedelta(days=1))
            [job] = await eventually(lambda: [j for j in jobs_of(kube, namespace, "brk")
                                              if j["metadata"]["name"] not in done], what="the next Job")
            finish_job(kube, namespace, job["metadata"]["name"], second(utcnow()), failed=True)
            done.add(job["metadata"]["name"])
        cj = await eventually(lambda: (c := kube.get("CronJob", namespace, "brk"))["spec"]["suspend"] and c,
                              what="the suspension")
        notes = cj["metadata"]["annotations"]
        assert notes["batchd.io/suspend-reason"] == "2 consecutive failures" and "batchd.io/suspended-at" in notes
        [event] = await eventually(lambda: events_of(kube, namespace, "brk", "SuspendedAfterFailures"))
        assert event["type"] == "Warning"
        d = await describe(client, namespace, "brk")
        assert (d["suspendAfterFailures"], d["failuresInARow"], d["upcoming"]) == (2, 0, [])


async def test_suspended_cronjob_creates_nothing_and_resume_runs_the_missed_time(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        kube.create("CronJob", namespace, cronjob_manifest("paused", "@every 1s", suspend=True))
        handle = await started(client, namespace, "paused")
        # suspended, the workflow sets no timer and waits for a change: once idle, it creates nothing
        await eventually(lambda: idle(handle), what="the suspended workflow idle")
        assert jobs_of(kube, namespace, "paused") == []
        assert (await describe(client, namespace, "paused"))["nextScheduleTime"] is None
        kube.patch("CronJob", namespace, "paused", {"spec": {"suspend": False}})
        await eventually(lambda: jobs_of(kube, namespace, "paused"), what="a Job after resume")


async def test_trigger_suspend_and_resume_updates(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        kube.create("CronJob", namespace, cronjob_manifest("ops", "0 0 1 1 *"))  # far away
        wid = cronjob_workflow_id(namespace, "ops")
        await eventually(lambda: workflow_exists(client, wid))
        handle = client.get_workflow_handle(wid)
        res = await handle.execute_update("trigger", {})
        name = res["jobName"]
        job = await eventually(lambda: kube.get("Job", namespace, name), what="triggered Job")
        assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
        assert (await handle.execute_update("suspend", {})) == {"suspended": True, "changed": True}
        assert kube.get("CronJob", namespace, "ops")["spec"]["suspend"] is True
        assert (await handle.execute_update("suspend", {}))["changed"] is False
        assert (await handle.execute_update("resume", {})) == {"suspended": False, "changed": True}
        assert kube.get("CronJob", namespace, "ops")["spec"]["suspend"] is False
        d = await describe(client, namespace, "ops")
        assert d["active"] == [name] and d["upcoming"][0].startswith(f"{utcnow().year + 1}-01-01T00:00:00")


async def test_suspend_with_a_reason_annotates_the_cronjob_and_resume_clears_it(client, kube, namespace, task_queue):
    # CJ-SUSPEND
    async with running(client, kube, task_queue, namespace):
        kube.create("CronJob", namespace, cronjob_manifest("why", "0 0 1 1 *"))
        handle = await started(client, namespace, "why")
        before = second(utcnow())
        assert await handle.execute_update("suspend", {"reason": "db migration"}) == {"suspended": True, "changed": True}
        notes = kube.get("CronJob", namespace, "why")["metadata"]["annotations"]
        assert kube.get("CronJob", namespace, "why")["spec"]["suspend"] is True
        assert notes["batchd.io/suspend-reason"] == "db migration"
        at = _utc(notes["batchd.io/suspended-at"])
        assert before <= at <= utcnow() and notes["batchd.io/suspended-at"].endswith("Z")
        d = await describe(client, namespace, "why")
        assert (d["suspendReason"], d["suspendedAt"]) == ("db migration", notes["batchd.io/suspended-at"])
        # a new reason for a suspended CronJob: the reason changes, the time it was suspended does not
        assert (await handle.execute_update("suspend", {"reason": "still migrating"}))["changed"] is True
        assert (await handle.execute_update("suspend", {"reason": "still migrating"}))["changed"] is False
        notes = kube.get("CronJob", namespace, "why")["metadata"]["annotations"]
        assert (notes["batchd.io/suspend-reason"], _utc(notes["batchd.io/suspended-at"])) == ("still migrating", at)
        assert await handle.execute_update("resume", {}) == {"suspended": False, "changed": True}
        cj = kube.get("CronJob", namespace, "why")
        assert cj["spec"]["suspend"] is False
        assert not {"batchd.io/suspend-reason", "batchd.io/suspended-at"} & set(cj["metadata"].get("annotations") or {})
        d = await describe(client, namespace, "why")
        assert (d["suspendReason"], d["suspendedAt"]) == (None, None)
        # set with kubectl instead: describe shows it once the bridge has passed it on
        kube.patch("CronJob", namespace, "why", {"metadata": {"annotations": {"batchd.io/suspend-reason": "by hand"}},
                                                "spec": {"suspend": True}})
        await eventually(lambda: _described(client, namespace, "why", "suspendReason", "by hand"), what="the reason")


async def _described(client: Client, ns: str, name: str, key: str, value: Any) -> bool:
    return (await describe(client, ns, name))[key] == value


async def test_forbid_skips_while_a_job_is_active_and_the_ledger_and_last_failure_say_so(
        client, kube, namespace, task_queue, skipper):
    # CJ-28: no new Job while one is active; the skipped time runs when the active one
    # ends. CJ-LEDGER, CJ-LAST-FAILURE: the first fails; a trigger is a run of its own
    async with running(client, kube, task_queue, namespace):
        handle, first = await first_job_then_the_next_time(client, kube, namespace, skipper, "ledger", "Forbid")
        await eventually(lambda: events_of(kube, namespace, "ledger", "JobAlreadyActive"), what="JobAlreadyActive")
        failed_at = second(utcnow())
        finish_job(kube, namespace, first["metadata"]["name"], failed_at, failed=True)
        jobs = await eventually(lambda: (j := jobs_of(kube, namespace, "ledger")) and len(j) == 2 and j, what="late run")
        [late] = [j for j in jobs if j["metadata"]["uid"] != first["metadata"]["uid"]]
        minutes = sorted(int(j["metadata"]["name"].rsplit("-", 1)[1]) for j in jobs)
        assert minutes[1] - minutes[0] == 24 * 60
        manual = (await handle.execute_update("trigger", {}))["jobName"]
        notes = await eventually(lambda: (a := kube.get("CronJob", namespace, "ledger")["metadata"]["annotations"])
                                 .get("batchd.io/last-failed-job") and a, what="the last failure annotations")
        assert notes["batchd.io/last-failed-job"] == first["metadata"]["name"]
        assert _utc(notes["batchd.io/last-failure-time"]) == failed_at
        history = await handle.query("history")
        first_time = _utc(first["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"])
        late_time = _utc(late["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"])
        assert [(_utc(e["scheduledTime"]), e["source"], e["outcome"], e["job"], e["result"]) for e in history] == [
            (first_time, "schedule", "created", first["metadata"]["name"], "Failed"),
            (late_time, "schedule", "skipped-concurrency", None, None),
            (late_time, "schedule", "created", late["metadata"]["name"], "running"),
            (_utc(history[3]["scheduledTime"]), "trigger", "created", manual, "running"),
        ]
        assert history[0]["jobUID"] == first["metadata"]["uid"] and history[0]["createdAt"].endswith("Z")
        d = await describe(client, namespace, "ledger")
        assert (d["lastFailedJob"], _utc(d["lastFailureTime"])) == (first["metadata"]["name"], failed_at)
        assert d["counters"]["failed"] == 1 and set(d["active"]) == {late["metadata"]["name"], manual}
        kube.delete("Job", namespace, late["metadata"]["name"])
        await eventually(lambda: _ledger_result(handle, 2, "deleted"), what="the deleted Job in the ledger")
        await save_history(handle, "cronjob-ledger")


async def test_an_active_job_deleted_while_no_worker_ran_goes_missing_and_forbid_runs_again(
        client, kube, namespace, task_queue, skipper):
    # CJ-42: no watch event tells of a deletion no worker saw; the leader reads each CronJob's
    # status.active against its cache and the API server, and the skipped time runs late (CJ-28)
    async with running(client, kube, task_queue, namespace):
        handle, first = await first_job_then_the_next_time(client, kube, namespace, skipper, "lost", "Forbid")
        await eventually(lambda: events_of(kube, namespace, "lost", "JobAlreadyActive"), what="JobAlreadyActive")
        await eventually(lambda: kube.get("CronJob", namespace, "lost")["status"].get("active"), what="status.active")
    kube.delete("Job", namespace, first["metadata"]["name"])
    await eventually(lambda: kube.get("Job", namespace, first["metadata"]["name"]) is None, what="the Job gone")
    async with running(client, kube, task_queue, namespace, vanished_seconds=0.5):
        [event] = await eventually(lambda: events_of(kube, namespace, "lost", "MissingJob"), what="MissingJob")
        assert event["message"] == f"Active job went missing: {first['metadata']['name']}"
        [late] = await eventually(lambda: jobs_of(kube, namespace, "lost"), what="the skipped time run late")
        # the status names the first Job until the pass that found it missing writes it
        await eventually(lambda: [a["uid"] for a in kube.get("CronJob", namespace, "lost")["status"].get("active") or []]
                         == [late["metadata"]["uid"]], what="the late Job active, and only it")
        assert [x["outcome"] for x in await handle.query("history")] == ["created", "skipped-concurrency", "created"]


async def _ledger_result(handle: Any, i: int, result: str) -> bool:
    return (await handle.query("history"))[i]["result"] == result


async def test_deleting_the_cronjob_ends_its_workflow_and_no_more_jobs(client, kube, namespace, task_queue):
    # lead 0: each creation is an activity the workflow awaits, so an ended workflow has none
    # under way (one armed in the worker: test_deleting_the_cronjob_while_armed_creates_nothing)
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("bye", "@every 1s"))
        wid = cronjob_workflow_id(namespace, "bye")
        await eventually(lambda: jobs_of(kube, namespace, "bye"))
        kube.delete("CronJob", namespace, "bye", propagation="Orphan")
        assert await asyncio.wait_for(client.get_workflow_handle(wid).result(), 20) == "gone"
        before = {j["metadata"]["name"] for j in kube.list("Job", namespace)["items"]}
    # The worker has stopped, waiting for whatever it had under way: nothing can create a Job now,
    # and nothing did once the workflow had ended.
    assert {j["metadata"]["name"] for j in kube.list("Job", namespace)["items"]} == before


async def test_cronjobs_without_the_label_are_left_alone(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace) as br:
        cj = kube.create("CronJob", namespace, cronjob_manifest("builtin", "@every 1s", managed=False))
        # The informer takes events in order: once it holds a labelled twin created after this
        # one, it would hold this one too, had the label selector let it in.
        twin = kube.create("CronJob", namespace, cronjob_manifest("twin", "0 0 1 1 *"))
        await eventually(lambda: br.cached("CronJob", twin["metadata"]["uid"]), what="the informer saw the twin")
        assert br.cached("CronJob", cj["metadata"]["uid"]) is None
        assert jobs_of(kube, namespace, "builtin") == []
        assert not await workflow_exists(client, cronjob_workflow_id(namespace, "builtin"))


async def first_job_then_the_next_time(client: Client, kube: Kube, ns: str, skipper: Any, name: str,
                                       policy: str) -> tuple[Any, dict[str, Any]]:
    """A daily CronJob with ``policy``, fast-forwarded to its first Job and then to its next time
    (daily: the real time a test takes never reaches a schedule time of its own)."""
    kube.create("CronJob", ns, cronjob_manifest(name, "0 0 * * *", policy=policy))
    handle = await started(client, ns, name)
    await skipper.fast_forward(handle, timedelta(days=1))
    [first] = await eventually(lambda: jobs_of(kube, ns, name))
    await skipper.fast_forward(handle, timedelta(days=1))
    return handle, first


async def started(client: Client, ns: str, name: str) -> Any:
    wid = cronjob_workflow_id(ns, name)
    await eventually(lambda: workflow_exists(client, wid), what=f"workflow {wid}")
    await eventually(lambda: describe(client, ns, name), what="first sync")
    return client.get_workflow_handle(wid)




def _utc(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)


# -- armed creations (cronjob_lead > 0, policy Allow) ------------------------------------------

async def armed_for(client: Client, ns: str, name: str, *, timeout: float = 60.0) -> datetime:
    """The schedule time of the creation the workflow has handed to the worker, once it has."""
    d = await eventually(lambda: _armed(client, ns, name), timeout=timeout, what="an armed creation")
    return _utc(d["armedFor"])


async def _armed(client: Client, ns: str, name: str) -> dict[str, Any] | None:
    d = None
    with contextlib.suppress(Exception):  # not started yet
        d = await describe(client, ns, name)
    if d is None or not d["armedFor"]:
        return None
    assert d["nextScheduleTime"] == d["armedFor"], d  # the armed time is the next one, not null beside it
    return d


async def _suspended(client: Client, ns: str, name: str) -> dict[str, Any] | None:
    d = await describe(client, ns, name)
    return d if d["suspend"] else None


def _created(job: dict[str, Any]) -> datetime:
    return _utc(job["metadata"]["creationTimestamp"])


async def test_an_armed_creation_is_made_by_the_worker_on_the_second_of_its_time(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace, cronjob_lead=30):
        kube.create("CronJob", namespace, cronjob_manifest("sharp", "@every 15s"))
        due = await armed_for(client, namespace, "sharp")
        assert utcnow() < due  # armed ahead of its time
        [job] = await eventually(lambda: jobs_of(kube, namespace, "sharp"), what="the Job")
        assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == \
            due.strftime("%Y-%m-%dT%H:%M:%SZ")
        # never early; on the second unless the machine is loaded, and in any case by the armed
        # attempt, whose deadline is ARMED_SLACK after the time
        assert due <= _created(job) <= due + ARMED_SLACK
        handle = client.get_workflow_handle(cronjob_workflow_id(namespace, "sharp"))
        hist = await handle.fetch_history()
        [first] = [e for e in hist.events if e.HasField("activity_task_scheduled_event_attributes")][:1]
        attrs = first.activity_task_scheduled_event_attributes
        assert (attrs.activity_type.name, attrs.task_queue.name) == ("create_cronjob_job_at", f"{task_queue}-timed")
        assert first.event_time.ToDatetime(UTC) < due

        async def completed() -> bool:  # the Job is visible before the activity's completion is recorded
            return any(e.activity_task_completed_event_attributes.scheduled_event_id == first.event_id
                       for e in (await handle.fetch_history()).events
                       if e.HasField("activity_task_completed_event_attributes"))

        await eventually(completed, what="the armed creation completed")  # the armed one made it
        await eventually(lambda: (c := kube.get("CronJob", namespace, "sharp")) and c.get("status", {}).get("active"))
        await save_history(handle, "cronjob-armed-creation")


async def test_a_job_that_ends_while_the_next_creation_is_armed_is_counted_before_that_time(
        client, kube, namespace, task_queue):
    # CJ-53: with a lead longer than the period the workflow always waits on an armed creation; a
    # Job's end is folded in during that wait, so the status follows at once, not at the next time
    # (30 s on), and the armed creation waits on: not cancelled and armed again, which would POST
    # the next Job twice at its second
    async with running(client, kube, task_queue, namespace, cronjob_lead=60):
        kube.create("CronJob", namespace, cronjob_manifest("ends", "@every 30s"))
        [job] = await eventually(lambda: jobs_of(kube, namespace, "ends"), what="the first Job")
        handle = client.get_workflow_handle(cronjob_workflow_id(namespace, "ends"))
        await eventually(lambda: _armed_after(client, namespace, "ends", _created(job)), what="the next time armed")
        due = _utc((await describe(client, namespace, "ends"))["armedFor"])
        done_at = second(utcnow())
        finish_job(kube, namespace, job["metadata"]["name"], done_at)

        def counted() -> dict[str, Any] | None:
            status = kube.get("CronJob", namespace, "ends").get("status") or {}
            return status if status.get("lastSuccessfulTime") and not status.get("active") else None

        # within less than the period: a pass at the next time would come too late
        status = await eventually(counted, timeout=25, what="the end counted in the CronJob's status")
        assert _utc(status["lastSuccessfulTime"]) == done_at

        async def patched_path_ran() -> bool:
            # The status is written by a local activity inside the workflow task, before the task's
            # completion records the patch marker: the history may lag the status by that task.
            markers = [e.marker_recorded_event_attributes for e in (await handle.fetch_history()).events
                       if e.HasField("marker_recorded_event_attributes")]
            return any(JOB_END_TIDIED_DURING_ARMED_WAIT.encode() in p.data
                       for m in markers for d in m.details.values() for p in d.payloads)

        await eventually(patched_path_ran, what="the job-end-tidied-during-armed-wait patch marker")
        # Jobs are named by the minute (CJ-31): when ``due`` shares the first Job's minute, the Job
        # created at or after it is the next time's, 30 s on; a loaded machine took over 60 s
        await eventually(lambda: [j for j in jobs_of(kube, namespace, "ends") if _created(j) >= due],
                         timeout=150, what="the armed time's Job")

        async def armed_outcomes() -> list[str] | None:
            """The outcomes of the armed creations, once the one of ``due`` has completed."""
            events = (await handle.fetch_history()).events
            assert not any(e.HasField("activity_task_cancel_requested_event_attributes") for e in events)
            done = [json.loads(e.activity_task_completed_event_attributes.result.payloads[0].data)["outcome"]
                    for e in events if e.HasField("activity_task_completed_event_attributes")]
            return done or None

        # the armed Job made once: no "exists" from a second attempt after a cancel
        assert set(await eventually(armed_outcomes, what="the armed creation completed")) == {"created"}
        await save_history(handle, "cronjob-job-end-tidied-while-armed")


async def test_a_jobs_end_is_recorded_by_the_status_write(client, kube, namespace, task_queue):
    # EVENTS_WITH_STATUS: SawCompletedJob rides with the status write's local activity, where it
    # had one of its own; the creation activity records SuccessfulCreate itself
    async with running(client, kube, task_queue, namespace, cronjob_lead=60):
        kube.create("CronJob", namespace, cronjob_manifest("ride", "@every 10s"))
        [job] = await eventually(lambda: jobs_of(kube, namespace, "ride")[:1], what="the first Job")
        handle = client.get_workflow_handle(cronjob_workflow_id(namespace, "ride"))
        finish_job(kube, namespace, job["metadata"]["name"], second(utcnow()))
        await eventually(lambda: events_of(kube, namespace, "ride", "SawCompletedJob"), what="SawCompletedJob")
        await eventually(lambda: not (kube.get("CronJob", namespace, "ride").get("status") or {}).get("active"),
                         what="the status without the Job")
        local = [json.loads(m.details["data"].payloads[0].data)["activity_type"]
                 for m in [e.marker_recorded_event_attributes for e in (await handle.fetch_history()).events
                           if e.HasField("marker_recorded_event_attributes")]
                 if m.marker_name == "core_local_activity"]
        assert "sync_cronjob" in local and "record_event" not in local, local
        await save_history(handle, "cronjob-events-with-status")


async def test_a_cronjob_continues_as_new_at_its_own_length_and_keeps_its_ledger(
        client, kube, namespace, task_queue, monkeypatch):
    # CronJobs on one schedule continue as new at different lengths (HISTORY_EVENTS plus a share
    # drawn from the workflow id), so they do not all start afresh in the same minute
    monkeypatch.setattr(cronjob_workflow, "HISTORY_EVENTS", 10)
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("long", "@every 2s"))
        handle = await started(client, namespace, "long")
        first = (await handle.describe()).run_id
        await eventually(lambda: _ledger(handle), what="the first Job in the ledger")

        async def continued() -> bool:
            return (await handle.describe()).run_id != first

        await eventually(continued, timeout=150, what="continue-as-new")  # a pass or two a minute (CJ-SUBMINUTE)
        limit = 10 + zlib.crc32(handle.id.encode()) % 10
        events = (await client.get_workflow_handle(handle.id, run_id=first).fetch_history()).events
        assert events[-1].HasField("workflow_execution_continued_as_new_event_attributes")
        assert limit < len(events) <= limit + 20  # checked once a pass, each pass a few events
        assert await _ledger(handle)  # the new run carries the state, the ledger with it
        for run in (events[0].workflow_execution_started_event_attributes,  # the bridge's start
                    events[-1].workflow_execution_continued_as_new_event_attributes):  # and the next run's
            assert json.loads(run.input.payloads[0].data)["runEvents"] == 10


async def test_a_jobs_end_seen_just_before_continue_as_new_still_gets_its_event(
        client, kube, namespace, task_queue, monkeypatch):
    # The Job's end wakes the workflow from its wait for the next time; the run then continues as
    # new before its next pass, which is where that end's Event would have been recorded
    limit = [10**6]
    monkeypatch.setattr(cronjob_workflow, "_history_limit", lambda _events: limit[0])
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("last", "@every 60s"))
        # due a minute after the creation: the default minute of waiting left a loaded machine none
        [job] = await eventually(lambda: jobs_of(kube, namespace, "last"), timeout=150, what="the first Job")
        handle = client.get_workflow_handle(cronjob_workflow_id(namespace, "last"))
        first = (await handle.describe()).run_id
        await eventually(lambda: kube.get("CronJob", namespace, "last").get("status", {}).get("active"),
                         what="the pass done: the Job in the status")
        limit[0] = 0  # the next time the run looks, it continues as new
        finish_job(kube, namespace, job["metadata"]["name"], second(utcnow()))

        async def continued() -> bool:
            return (await handle.describe()).run_id != first

        await eventually(continued, timeout=25, what="continue-as-new")
        limit[0] = 10**6
        [event] = await eventually(lambda: events_of(kube, namespace, "last", "SawCompletedJob"), timeout=10,
                                   what="the Event of the Job's end")
        assert job["metadata"]["name"] in event["message"]


async def _ledger(handle: Any) -> list[dict[str, Any]]:
    return await handle.query("history")


async def _armed_after(client: Client, ns: str, name: str, after: datetime) -> bool:
    d = await _armed(client, ns, name)
    return bool(d) and _utc(d["armedFor"]) > after


async def test_a_spec_change_while_armed_is_obeyed_at_the_time(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace, cronjob_lead=30):
        kube.create("CronJob", namespace, cronjob_manifest("relabel", "@every 12s"))
        due = await armed_for(client, namespace, "relabel")
        kube.patch("CronJob", namespace, "relabel", {"spec": {"jobTemplate": {"metadata": {"labels": {"app": "v2"}}}}})
        [job] = await eventually(lambda: jobs_of(kube, namespace, "relabel"), what="the Job", timeout=30)
        assert job["metadata"]["labels"]["app"] == "v2"  # the new template, not the armed one's
        assert job["metadata"]["name"] == f"relabel-{int(due.timestamp()) // 60}"


async def test_suspending_while_armed_creates_nothing(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace, cronjob_lead=30):
        # 30 s apart: the suspension must reach the worker's informer before the time. The armed
        # creation checks the CronJob in that cache at the time (as upstream's lister does), so a
        # suspend the informer has not seen yet by then is, like upstream's, too late.
        kube.create("CronJob", namespace, cronjob_manifest("halt", "@every 30s"))
        due = await armed_for(client, namespace, "halt")
        kube.patch("CronJob", namespace, "halt", {"spec": {"suspend": True}})
        await eventually(lambda: _suspended(client, namespace, "halt"), what="the workflow to see the suspension")
        assert utcnow() < due, "the suspension reached the workflow only after the time: the test proves nothing"
        # idle: the abandoned creation has ended in the worker too (its end is in the history)
        await eventually(lambda: idle(client.get_workflow_handle(cronjob_workflow_id(namespace, "halt"))),
                         timeout=90, what="the armed creation ended")
        assert jobs_of(kube, namespace, "halt") == []
        assert (await describe(client, namespace, "halt"))["armedFor"] is None


async def test_the_suspend_update_does_not_wait_for_an_armed_creation(client, kube, namespace, task_queue):
    # 45 s apart, all of it armed: a loaded CI machine took over 10 s for the update and for the
    # informer to see the patch, and an update that waited for the creation would return after it.
    async with running(client, kube, task_queue, namespace, cronjob_lead=45):
        kube.create("CronJob", namespace, cronjob_manifest("halt2", "@every 45s"))
        due = await armed_for(client, namespace, "halt2")
        handle = client.get_workflow_handle(cronjob_workflow_id(namespace, "halt2"))
        res = await asyncio.wait_for(handle.execute_update("suspend", {}), (due - utcnow()).total_seconds())
        assert res == {"suspended": True, "changed": True} and utcnow() < due
        await eventually(lambda: idle(handle), timeout=90, what="the armed creation ended")
        assert jobs_of(kube, namespace, "halt2") == []  # the abandoned wait saw the new generation


async def test_deleting_the_cronjob_while_armed_creates_nothing(client, kube, namespace, task_queue, caplog):
    caplog.set_level(logging.INFO, logger="temporalio.activity")
    async with running(client, kube, task_queue, namespace, cronjob_lead=30):
        kube.create("CronJob", namespace, cronjob_manifest("gone", "@every 12s"))
        due = await armed_for(client, namespace, "gone")
        kube.delete("CronJob", namespace, "gone", propagation="Orphan")
        assert await asyncio.wait_for(client.get_workflow_handle(cronjob_workflow_id(namespace, "gone")).result(), 20) == "gone"
        # The armed creation outlives its closed workflow: cancelled on its next heartbeat, or at the
        # time it re-reads the CronJob and finds it gone. Either way it says so.
        await eventually(lambda: _said_nothing_created(caplog, namespace),
                         timeout=max(0.0, (due - utcnow()).total_seconds()) + 30, what="the armed creation's end")
        assert kube.list("Job", namespace)["items"] == []


def _said_nothing_created(caplog: pytest.LogCaptureFixture, namespace: str) -> bool:
    return any(f" {namespace}/" in r.getMessage() and "nothing created" in r.getMessage() for r in caplog.records)
