"""Tier 3: backfill and catch-up of a CronJob's schedule times (CJ-BACKFILL, CJ-CATCH-UP), end to end.

An outage is made by hand: the CronJob's ``status.lastScheduleTime`` is set minutes back before
the worker starts, as if batchd had been down since then.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from kube.client import Kube
from tests.conftest import eventually, running, save_history, utcnow
from tests.integration.test_cronjob import cronjob_manifest, describe, events_of, jobs_of, started
from tests.k8s import finish_job, second, stamp


def minute_floor(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


def minutes_of(jobs: list[dict[str, Any]]) -> list[int]:
    return sorted(int(j["metadata"]["name"].rsplit("-", 1)[1]) for j in jobs)


def down_since(kube: Kube, ns: str, name: str, last: datetime) -> None:
    """Make the CronJob look as if its controller last ran it at ``last`` (an outage since)."""
    kube.patch("CronJob", ns, name, {"status": {"lastScheduleTime": stamp(last)}}, subresource="status")


def ledger_rows(history: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [(int(datetime.fromisoformat(e["scheduledTime"].replace("Z", "+00:00")).timestamp()) // 60,
             e["source"], e["outcome"]) for e in history]


async def test_catch_up_all_runs_every_missed_time_within_the_deadline_oldest_first(
        client, kube: Kube, namespace, task_queue):
    # CJ-CATCH-UP with Allow: 10 minutes down, a 300 s deadline: the 5 times within it run, the
    # older 5 are dropped silently (CJ-20), and upstream's default would have run only the last.
    floor = minute_floor(utcnow())
    kube.create("CronJob", namespace, cronjob_manifest("all", "* * * * *", sds=300,
                                                       annotations={"batchd.io/catch-up": "all"}))
    down_since(kube, namespace, "all", floor - timedelta(minutes=10))
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        handle = await started(client, namespace, "all")
        jobs = await eventually(lambda: (j := jobs_of(kube, namespace, "all")) and len(j) >= 5 and j, what="5 Jobs")
        minutes = minutes_of(jobs)  # a sixth if the next minute came meanwhile
        assert minutes == list(range(minutes[0], minutes[0] + len(minutes))) and len(minutes) <= 6, minutes
        assert minutes[0] in (int(floor.timestamp()) // 60 - 4, int(floor.timestamp()) // 60 - 3), minutes
        history = await handle.query("history")
        assert ledger_rows(history)[:5] == [(m, "catch-up", "created") for m in minutes[:4]] + \
            [(minutes[4], "schedule", "created")]
        assert (await describe(client, namespace, "all"))["catchUp"] == "all"
        assert not events_of(kube, namespace, "all", "TooManyMissedTimes")
        await save_history(handle, "cronjob-catch-up")


async def test_catch_up_with_forbid_runs_the_latest_100_one_at_a_time_in_order(
        client, kube: Kube, namespace, task_queue):
    # CJ-CATCH-UP, over 100 missed: the Warning, the older times in the ledger as too-many-missed,
    # and Forbid runs the kept ones one after another, oldest first.
    floor = minute_floor(utcnow())
    kube.create("CronJob", namespace, cronjob_manifest("many", "* * * * *", policy="Forbid",
                                                       annotations={"batchd.io/catch-up": "all"}))
    down_since(kube, namespace, "many", floor - timedelta(minutes=150))
    async with running(client, kube, task_queue, namespace):
        handle = await started(client, namespace, "many")
        [warning] = await eventually(lambda: events_of(kube, namespace, "many", "TooManyMissedTimes"))
        assert warning["type"] == "Warning" and "catch-up runs the latest 100" in warning["message"]
        [first] = await eventually(lambda: jobs_of(kube, namespace, "many"), what="the first Job")
        [m0] = minutes_of([first])
        assert m0 in (int(floor.timestamp()) // 60 - 99, int(floor.timestamp()) // 60 - 98), m0
        rows = ledger_rows(await handle.query("history"))
        assert rows[-1] == (m0, "catch-up", "created")
        # 150 missed (151 if the minute turned meanwhile): the older ones, from the first after the outage
        assert rows[:-1] == [(m, "catch-up", "too-many-missed") for m in range(int(floor.timestamp()) // 60 - 149, m0)]
        finish_job(kube, namespace, first["metadata"]["name"], second(utcnow()))
        jobs = await eventually(lambda: (j := jobs_of(kube, namespace, "many")) and len(j) == 2 and j, what="the next")
        assert minutes_of(jobs) == [m0, m0 + 1]
        finish_job(kube, namespace, f"many-{m0 + 1}", second(utcnow()))
        jobs = await eventually(lambda: (j := jobs_of(kube, namespace, "many")) and len(j) == 3 and j, what="the third")
        assert minutes_of(jobs) == [m0, m0 + 1, m0 + 2]
        assert ledger_rows(await handle.query("history"))[-2:] == [(m0 + 1, "catch-up", "created"),
                                                                  (m0 + 2, "catch-up", "created")]
        await save_history(handle, "cronjob-catch-up-forbid")


async def test_a_suspension_is_not_caught_up(client, kube: Kube, namespace, task_queue, skipper):
    # CJ-CATCH-UP: resume runs only the latest time (CJ-25); the others are "suspended" in the ledger
    kube.create("CronJob", namespace, cronjob_manifest("paused", "* * * * *", suspend=True,
                                                       annotations={"batchd.io/catch-up": "all"}))
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        handle = await started(client, namespace, "paused")
        await skipper.fast_forward(handle, timedelta(minutes=5))
        kube.patch("CronJob", namespace, "paused", {"spec": {"suspend": False}})
        [job] = await eventually(lambda: jobs_of(kube, namespace, "paused"), what="the latest time's Job")
        history = await handle.query("history")
        assert [e["outcome"] for e in history][-1] == "created" and history[-1]["job"] == job["metadata"]["name"]
        assert {e["outcome"] for e in history[:-1]} == {"suspended"} and len(history) >= 4


def _annotated(kube: Kube, ns: str, name: str) -> datetime:
    job = kube.get("Job", ns, name)
    raw = job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    return datetime.fromisoformat(raw.replace("Z", "+00:00")).astimezone(UTC)


async def test_backfill_creates_the_job_of_every_time_once_and_refuses_over_1000(
        client, kube: Kube, namespace, task_queue):
    # CJ-BACKFILL (suspended: an operator's backfill still runs): both ends included, named as the schedule names them; a second backfill over
    # an overlapping range finds the Jobs that exist; 1,200 times is refused, creating nothing.
    base = minute_floor(utcnow()).replace(minute=0) - timedelta(hours=2)
    kube.create("CronJob", namespace, cronjob_manifest("back", "*/5 * * * *", suspend=True))
    async with running(client, kube, task_queue, namespace):
        handle = await started(client, namespace, "back")
        res = await handle.execute_update("backfill", {"from": stamp(base), "to": stamp(base + timedelta(minutes=30))})
        m = int(base.timestamp()) // 60
        expected = [f"back-{m + 5 * i}" for i in range(7)]
        assert (res["times"], res["created"], res["existed"], res["failed"]) == (7, expected, [], [])
        assert all(_annotated(kube, namespace, n) == base + timedelta(minutes=5 * i) for i, n in enumerate(expected))
        res = await handle.execute_update("backfill", {"from": stamp(base + timedelta(minutes=21)),
                                                       "to": stamp(base + timedelta(minutes=45))})
        assert (res["created"], res["existed"]) == ([f"back-{m + 35}", f"back-{m + 40}", f"back-{m + 45}"],
                                                    [f"back-{m + 25}", f"back-{m + 30}"])
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("backfill", {"from": stamp(base - timedelta(days=5)), "to": stamp(base)})
        assert isinstance(refused.value.cause, ApplicationError) and refused.value.cause.type == "InvalidBackfill"
        assert "more than 1000 schedule times" in str(refused.value.cause)
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("backfill", {"from": stamp(utcnow()), "to": stamp(utcnow() + timedelta(hours=1))})
        assert len(jobs_of(kube, namespace, "back")) == 10
        history = await handle.query("history")
        assert [(e["source"], e["outcome"]) for e in history] == [("backfill", "created")] * 10


async def test_backfill_one_at_a_time_creates_each_after_the_previous_finished(
        client, kube: Kube, namespace, task_queue):
    base = minute_floor(utcnow()) - timedelta(hours=1)
    kube.create("CronJob", namespace, cronjob_manifest("serial", "*/10 * * * *", suspend=True))
    async with running(client, kube, task_queue, namespace):
        handle = await started(client, namespace, "serial")
        start = base.replace(minute=0)
        res = await handle.execute_update("backfill", {"from": stamp(start), "to": stamp(start + timedelta(minutes=20)),
                                                       "oneAtATime": True})
        m = int(start.timestamp()) // 60
        names = [f"serial-{m + 10 * i}" for i in range(3)]
        assert (res["created"], res["queued"]) == (names[:1], names[1:])
        assert (await describe(client, namespace, "serial"))["backfillQueue"] == names
        for i in range(3):
            jobs = await eventually(lambda i=i: (j := jobs_of(kube, namespace, "serial")) and len(j) == i + 1 and j,
                                    what=f"Job {i + 1}")
            assert sorted(j["metadata"]["name"] for j in jobs) == names[: i + 1]
            finish_job(kube, namespace, names[i], second(utcnow()))
        await eventually(lambda: _queue_empty(client, namespace, "serial"), what="the queue done")
        assert len(jobs_of(kube, namespace, "serial")) == 3
        history = await handle.query("history")
        assert [(e["job"], e["source"], e["result"]) for e in history] == [(n, "backfill", "Complete") for n in names]
        await save_history(handle, "cronjob-backfill")


async def _queue_empty(client: Any, ns: str, name: str) -> bool:
    return (await describe(client, ns, name))["backfillQueue"] == []


def _taken(kube: Kube, ns: str, name: str) -> str | None:
    return ((kube.get("CronJob", ns, name) or {})["metadata"].get("annotations") or {}).get("batchd.io/backfill-taken")


async def test_the_backfill_annotation_runs_once_per_value_and_says_what_became_of_it(
        client, kube: Kube, namespace, task_queue):
    # CJ-BACKFILL-DOOR: the request set with the CronJob runs once its workflow starts; a pass for
    # another change does not run it again; a refused one is a Warning; removed and set again, it runs again
    base = minute_floor(utcnow()).replace(minute=0) - timedelta(hours=2)
    asked = f"{stamp(base)}/{stamp(base + timedelta(minutes=30))}"
    kube.create("CronJob", namespace, cronjob_manifest("door", "*/5 * * * *", suspend=True,
                                                       annotations={"batchd.io/backfill": asked}))

    def annotate(value: str | None, **more: str) -> None:
        kube.patch("CronJob", namespace, "door", {"metadata": {"annotations": {"batchd.io/backfill": value, **more}}})

    async with running(client, kube, task_queue, namespace):
        handle = await started(client, namespace, "door")
        [done] = await eventually(lambda: events_of(kube, namespace, "door", "Backfilled"), what="the Event")
        assert done["message"] == f"batchd.io/backfill={asked}: 7 schedule time(s): 7 created, 0 existed, 0 failed, 0 queued"
        assert len(jobs_of(kube, namespace, "door")) == 7
        await eventually(lambda: _taken(kube, namespace, "door") == asked, what="batchd.io/backfill-taken")
        annotate(asked, **{"batchd.io/catch-up": "all"})  # a pass, with the value already taken
        await eventually(lambda: _catch_up_all(client, namespace, "door"), what="the change seen")
        future = f"{stamp(utcnow())}/{stamp(utcnow() + timedelta(hours=1))}"
        annotate(future)
        [refused] = await eventually(lambda: events_of(kube, namespace, "door", "InvalidBackfill"), what="the refusal")
        assert refused["type"] == "Warning" and refused["message"].startswith(f"batchd.io/backfill={future} refused: ")
        assert "in the future" in refused["message"]
        [done] = events_of(kube, namespace, "door", "Backfilled")
        assert done["count"] == 1 and len(jobs_of(kube, namespace, "door")) == 7
        await eventually(lambda: _taken(kube, namespace, "door") == future, what="the refused value taken")
        annotate(None)
        await eventually(lambda: _taken(kube, namespace, "door") is None, what="the record cleared")
        annotate(asked)
        again = await eventually(lambda: [e for e in events_of(kube, namespace, "door", "Backfilled")
                                          if "7 existed" in e["message"]], what="the second run")
        assert again[0]["message"].endswith("7 schedule time(s): 0 created, 7 existed, 0 failed, 0 queued")
        history = await handle.query("history")
        assert [(e["source"], e["outcome"]) for e in history] == [("backfill", "created")] * 7


async def _catch_up_all(client: Any, ns: str, name: str) -> bool:
    return (await describe(client, ns, name))["catchUp"] == "all"
