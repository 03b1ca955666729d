"""FAIL-CLOSED, each kind of hold end to end (docs/design.md): a Job that creates no Pod, a CronJob
that creates no Job from its schedule (a trigger still does), a finished Job its TTL does not
delete; each with its Warning and its ``held`` in describe, and each ended by fixing the
annotation. And JOB-AFTER's cycles, which end in DependencyFailed. On both backends, without the
admission policy (tests/e2e/test_admission_policy.py has it), as a cluster from before it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kube.client import Kube
from tests.conftest import eventually, running, utcnow, workflow_exists
from tests.integration.test_cronjob import cronjob_manifest, describe, events_of, jobs_of
from tests.integration.test_job import condition, job_manifest, outcome, pods_of
from tests.k8s import create_job, finish_job, second
from worker.commands import cronjob_describe, describe_object
from workflows.identity import cronjob_workflow_id, job_workflow_id, ttl_workflow_id

HELD = "is held"


def warnings(kube: Kube, ns: str, name: str) -> list[str]:
    return [e["message"] for e in events_of(kube, ns, name, "InvalidAnnotation") if e["type"] == "Warning"]


async def test_a_job_with_an_after_it_cannot_read_creates_no_pod_until_it_is_fixed(client, kube, namespace, task_queue):
    too_many = ",".join(f"j{i}" for i in range(101))
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("consumer", notes={"batchd.io/after": too_many}))
        [message] = await eventually(lambda: warnings(kube, namespace, "consumer"), what="the Warning")
        assert "annotation batchd.io/after='j0,j1," in message and "must be at most 100 names" in message
        assert "the Job is held: it creates no Pod and is not deleted until it is fixed or removed" in message
        wid = job_workflow_id(namespace, "consumer", job["metadata"]["uid"])
        await eventually(lambda: workflow_exists(client, wid), what="the Job's workflow")
        assert (await client.get_workflow_handle(wid).query("describe"))["held"] == message
        assert f"held: {message}" in (await describe_object(client, "Job", namespace, "consumer",
                                                            output="table")).splitlines()
        await asyncio.sleep(2)  # time for a Pod the hold must not make
        assert not pods_of(kube, namespace, job) and not kube.get("Job", namespace, "consumer")["status"].get("startTime")

        kube.patch("Job", namespace, "consumer", {"metadata": {"annotations": {"batchd.io/after": "producer"}}})
        await eventually(lambda: events_of(kube, namespace, "consumer", "WaitingForDependencies"), what="the wait")
        assert (await client.get_workflow_handle(wid).query("describe"))["held"] is None
        kube.create("Job", namespace, job_manifest("producer"))
        assert await outcome(client, namespace, job) == "Complete"
        assert condition(kube.get("Job", namespace, "producer"), "Complete")


async def test_jobs_in_a_cycle_fail_each_naming_it_and_one_behind_it_fails_with_them(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        jobs = {name: kube.create("Job", namespace, job_manifest(name, notes={"batchd.io/after": after}))
                for name, after in (("a", "b"), ("behind", "a"), ("self", "self"))}
        # b closes the cycle after a waits: b's search finds it, and a fails with it, from itself
        await eventually(lambda: events_of(kube, namespace, "a", "WaitingForDependencies"), what="a waiting")
        jobs["b"] = kube.create("Job", namespace, job_manifest("b", notes={"batchd.io/after": "a"}))
        expected = {"a": "cycle: a → b → a", "b": "cycle: b → a → b", "self": "cycle: self → self",
                    "behind": "Job a failed"}
        for name, message in expected.items():
            assert await outcome(client, namespace, jobs[name]) == "Failed"
            failed = condition(kube.get("Job", namespace, name), "Failed")
            assert failed and (failed["reason"], failed["message"]) == ("DependencyFailed", message), name
            assert not pods_of(kube, namespace, jobs[name])


@pytest.mark.timeout(300)  # up to two minutes for the schedule's two Jobs
async def test_a_cronjob_with_a_limit_it_cannot_read_is_held_and_a_trigger_still_runs(client, kube, namespace,
                                                                                     task_queue):
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        kube.create("CronJob", namespace, cronjob_manifest("nightly", "@every 2s", annotations={"batchd.io/max-runs": "-1"}))
        [message] = await eventually(lambda: warnings(kube, namespace, "nightly"), what="the Warning")
        assert message == ("annotation batchd.io/max-runs='-1' must be an integer from 1 to 2147483647; the CronJob is "
                           "held: no Job is created from its schedule until it is fixed or removed")
        state = await describe(client, namespace, "nightly")
        assert state["held"] == message and state["upcoming"] == []
        for text in (await describe_object(client, "CronJob", namespace, "nightly", output="table"),
                     await cronjob_describe(client, namespace, "nightly", output="table")):
            assert f"held: {message}" in text.splitlines()  # `batchd describe`, `batchd cronjob describe`
        await asyncio.sleep(5)  # two schedule times pass
        assert jobs_of(kube, namespace, "nightly") == []
        handle = client.get_workflow_handle(cronjob_workflow_id(namespace, "nightly"))
        manual = (await handle.execute_update("trigger", {}))["jobName"]  # an operator's request is obeyed
        await eventually(lambda: kube.get("Job", namespace, manual), what="the triggered Job")

        kube.patch("CronJob", namespace, "nightly", {"metadata": {"annotations": {"batchd.io/max-runs": "2"}}})
        # Jobs are named by the minute (CJ-31): the second scheduled one may wait for the next minute
        await eventually(lambda: len(jobs_of(kube, namespace, "nightly")) == 3, timeout=150, what="two scheduled Jobs")
        history = await handle.query("history")
        assert "held" in {e["outcome"] for e in history}, history  # the times that passed while held
        assert (await describe(client, namespace, "nightly"))["held"] is None


async def test_a_finished_job_with_a_ttl_it_cannot_read_is_not_deleted_until_it_is_fixed(
        client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        create_job(kube, namespace, "report", ttl=1)
        kube.patch("Job", namespace, "report", {"metadata": {"annotations": {
            "batchd.io/ttl-seconds-after-success": "soon"}}})
        job: dict[str, Any] = finish_job(kube, namespace, "report", second(utcnow()))
        [message] = await eventually(lambda: warnings(kube, namespace, "report"), what="the Warning")
        assert "annotation batchd.io/ttl-seconds-after-success='soon'" in message and HELD in message
        wid = ttl_workflow_id("Job", namespace, "report", job["metadata"]["uid"])
        await eventually(lambda: workflow_exists(client, wid), what="the TTL workflow")
        await asyncio.sleep(3)  # well past the spec's TTL of 1 s
        assert kube.get("Job", namespace, "report") is not None
        assert (await client.get_workflow_handle(wid).query("describe"))["held"] == message
        kube.patch("Job", namespace, "report", {"metadata": {"annotations": {"batchd.io/ttl-seconds-after-success": "0"}}})
        await eventually(lambda: kube.get("Job", namespace, "report") is None, what="deleted once fixed")
