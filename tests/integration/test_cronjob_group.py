"""Tier 3: concurrency groups across CronJobs (CJ-GROUP) — kubesim, the dev server, worker + bridge.

The CronJobs run ``@every 2s`` (but the daily ones, triggered or fast-forwarded): upstream names Jobs by the minute (CJ-31), so each makes at most one
Job a minute and a waiting time is superseded by the next one every two seconds, which is what
these tests want to see hold the queue's order. Their Jobs are run by hand (``HAND_RUN``), so a
slot stays held until a test finishes or deletes its Job.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from temporalio.client import Client

from kube.client import Kube
from tests.conftest import eventually, running, save_history, utcnow
from tests.integration.test_cronjob import cronjob_manifest, describe, events_of, jobs_of, started
from tests.k8s import finish_job, second
from worker.commands import cronjob_describe
from workflows.identity import group_workflow_id


def member(name: str, group: str, limit: int | None = None, schedule: str = "@every 2s", **kw: Any) -> dict[str, Any]:
    notes = {"batchd.io/concurrency-group": group}
    if limit is not None:
        notes["batchd.io/concurrency-limit"] = str(limit)
    return cronjob_manifest(name, schedule, annotations=notes, **kw)


async def group_view(client: Client, ns: str, group: str) -> dict[str, Any]:
    return await client.get_workflow_handle(group_workflow_id(ns, group)).query("describe")


def names(jobs: list[dict[str, Any]]) -> list[str]:
    return sorted(j["metadata"]["name"] for j in jobs)


async def test_a_group_of_one_slot_runs_its_members_one_after_another_oldest_wait_first(
        client, kube: Kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        # the first holds the slot by a trigger and has no time of its own to wait for (it is daily),
        # so the queue's order is the order the others began to wait, whatever the minute
        kube.create("CronJob", namespace, member("first", "db", 1, "0 0 * * *"))
        await (await started(client, namespace, "first")).execute_update("trigger", {})
        [held] = await eventually(lambda: jobs_of(kube, namespace, "first"), what="the first member's Job")
        kube.create("CronJob", namespace, member("second", "db", 3))  # disagrees: the smallest limit wins
        handle = await started(client, namespace, "second")
        d = await eventually(lambda: _waiting(client, namespace, "second"), what="the second member waiting")
        seat = d["concurrencyGroup"]
        assert (seat["name"], seat["limit"], seat["groupLimit"], seat["position"]) == ("db", 3, 1, 1)
        assert seat["holders"] == [{"cronjob": "first", "job": held["metadata"]["name"]}]
        view = await group_view(client, namespace, "db")
        assert view["limit"] == 1 and [q["cronjob"] for q in view["queue"]] == ["second"]
        cli = json.loads(await cronjob_describe(client, namespace, "second", output="json"))  # batchd cronjob describe
        assert cli["concurrencyGroup"]["name"] == "db" and cli["group"]["holders"] == view["holders"]
        assert jobs_of(kube, namespace, "second") == []
        [event] = await eventually(lambda: events_of(kube, namespace, "second", "WaitingForGroup"))
        assert event["type"] == "Normal" and "concurrency group db" in event["message"]

        kube.create("CronJob", namespace, member("third", "db"))  # no limit: 1
        await eventually(lambda: _waiting(client, namespace, "third"), what="the third member waiting")

        # the holder ends: the member that has waited longest gets the slot
        finish_job(kube, namespace, held["metadata"]["name"], second(utcnow()))
        [job] = await eventually(lambda: jobs_of(kube, namespace, "second"), what="the waiting member's Job")
        view = await eventually(lambda: _held_by(client, namespace, "db", job["metadata"]["name"]),
                                what="the group's holder changed")
        assert [q["cronjob"] for q in view["queue"]][0] == "third"  # describe on the member says so at its next time
        assert jobs_of(kube, namespace, "third") == []
        ledger = [(x["outcome"], x["job"]) for x in await handle.query("history")]
        made = ledger.index(("created", job["metadata"]["name"]))  # after its wait (and maybe before the next one's)
        assert made > 0 and ("waited-for-group", None) in ledger[:made]

        # a holder deleted (not finished) frees its slot too
        kube.delete("Job", namespace, job["metadata"]["name"])
        await eventually(lambda: jobs_of(kube, namespace, "third"), what="the third member's Job")
        assert len(jobs_of(kube, namespace, "first")) == 1 and jobs_of(kube, namespace, "second") == []
        await save_history(handle, "cronjob-group-member")
        await save_history(client.get_workflow_handle(group_workflow_id(namespace, "db")), "cronjob-group")


async def test_a_time_that_waits_past_its_starting_deadline_is_missed_and_the_last_member_to_leave_ends_the_group(
        client, kube: Kube, namespace, task_queue, skipper):
    async with running(client, kube, task_queue, namespace):
        kube.create("CronJob", namespace, member("solo", "batch", 1, "0 0 * * *", sds=60))
        handle = await started(client, namespace, "solo")
        # a trigger takes the slot without waiting for it; midnight then waits, and misses its deadline
        await handle.execute_update("trigger", {})
        await skipper.fast_forward(handle, timedelta(days=1))
        await eventually(lambda: _outcome(handle, "missed-deadline"), what="a time missed while waiting")
        assert [(x["source"], x["outcome"]) for x in await handle.query("history")] == [
            ("trigger", "created"), ("schedule", "waited-for-group"), ("schedule", "missed-deadline")]
        assert len(jobs_of(kube, namespace, "solo")) == 1
        view = await group_view(client, namespace, "batch")
        assert view["used"] == 1 and view["members"] == [{"cronjob": "solo", "limit": 1, "active": 1}]
        # leaving the group: the group, empty, ends a minute later (fast-forwarded)
        kube.patch("CronJob", namespace, "solo", {"metadata": {"annotations": {
            "batchd.io/concurrency-group": None, "batchd.io/concurrency-limit": None}}})
        group = client.get_workflow_handle(group_workflow_id(namespace, "batch"))
        await eventually(lambda: _no_members(group), what="the member gone from the group")
        assert not await _closed(client, namespace, "batch")
        await skipper.fast_forward(group, timedelta(minutes=2))
        await eventually(lambda: _closed(client, namespace, "batch"), what="the empty group's workflow ending")
        assert (await describe(client, namespace, "solo"))["concurrencyGroup"] is None


async def _waiting(client: Client, ns: str, name: str) -> dict[str, Any] | None:
    d = await describe(client, ns, name)
    seat = d["concurrencyGroup"]
    return d if seat and seat["waitingFor"] and seat["position"] else None


async def _held_by(client: Client, ns: str, group: str, job: str) -> dict[str, Any] | None:
    view = await group_view(client, ns, group)
    return view if [h.get("job") for h in view["holders"]] == [job] else None  # a grant holds no Job yet


async def _outcome(handle: Any, outcome: str) -> bool:
    return any(x["outcome"] == outcome for x in await handle.query("history"))


async def _no_members(group: Any) -> bool:
    return not (await group.query("describe"))["members"]


async def _closed(client: Client, ns: str, group: str) -> bool:
    desc = await client.get_workflow_handle(group_workflow_id(ns, group)).describe()
    return desc.status is not None and desc.status.name == "COMPLETED"
