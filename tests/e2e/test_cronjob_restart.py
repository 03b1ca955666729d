"""Tier 4: CronJob workflows across worker deaths — a real ``batchd worker`` process SIGKILLed at
random points across 10 schedule times, during a one-at-a-time backfill and during a catch-up,
SIGKILLed while a creation is armed, and a worker stopped across a schedule time with a
``startingDeadlineSeconds`` (real minutes: marked slow).
"""

from __future__ import annotations

import asyncio
import random
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from kube.client import Kube
from tests.conftest import eventually, idle, running, utcnow
from tests.e2e.test_worker_process import ready, worker_process
from tests.integration.test_cronjob import (
    armed_for,
    cronjob_manifest,
    describe,
    events_of,
    jobs_of,
    started,
)
from tests.integration.test_cronjob_backfill import down_since, minute_floor, minutes_of
from tests.k8s import finish_job, second, stamp
from worker.dev import free_port
from workflows.cronjob import ARMED_SLACK
from workflows.identity import cronjob_workflow_id


@pytest.mark.timeout(900)  # 11 worker start-ups of several seconds each on a slow machine
async def test_worker_sigkilled_across_10_schedule_times_creates_each_job_exactly_once(
    temporal_env: WorkflowEnvironment, kube: Kube, worker_kubeconfig: Path, namespace: str, task_queue: str,
    skipper: Any, tmp_path: Path,
) -> None:
    client = temporal_env.client
    rng = random.Random(7)
    # Catch-up (CJ-CATCH-UP): under load the dev server's time-skipping has fired a timer only after
    # the next minute, and upstream's rule then runs the latest time alone; with catch-up every
    # minute must have its one Job, however late its timer fires.
    kube.create("CronJob", namespace, cronjob_manifest("tick", "* * * * *", annotations={"batchd.io/catch-up": "all"}))
    health = free_port()
    lead = ("--cronjob-lead", "0")  # the virtual clock runs ahead: an armed creation would wait in real time
    proc_cm = worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / "w0.log", health, *lead)
    proc = proc_cm.__enter__()
    try:
        handle = await started(client, namespace, "tick")
        for i in range(10):
            await ready(health)  # the random point is in the worker's work, not in its start-up
            ff = asyncio.create_task(skipper.fast_forward(handle, timedelta(minutes=1)))
            await asyncio.sleep(rng.uniform(0.0, 0.4))  # kill at a random point of the tick
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc_cm.__exit__(None, None, None)
            proc_cm = worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / f"w{i + 1}.log",
                                     health, *lead)
            proc = proc_cm.__enter__()
            assert await asyncio.wait_for(ff, 90)
        jobs = await eventually(lambda: (j := jobs_of(kube, namespace, "tick")) and len(j) >= 10 and j,
                                timeout=60, what="10 Jobs")
        d = await describe(client, namespace, "tick")
        later = {j["metadata"]["name"] for j in jobs_of(kube, namespace, "tick")}
    finally:
        proc_cm.__exit__(None, None, None)
    # Real time passes too (about a minute and a half), so the virtual clock crosses 10 or 11
    # schedule times: every minute between the first and the last has exactly one Job.
    minutes = sorted(int(j["metadata"]["name"].rsplit("-", 1)[1]) for j in jobs)
    assert len(minutes) == len(set(minutes)), minutes  # no duplicate
    assert minutes == list(range(minutes[0], minutes[-1] + 1)) and len(minutes) >= 10, minutes  # none missing
    # the status names every Job made before it was read, and none that did not exist after (the
    # next minute may make one meanwhile)
    assert {j["metadata"]["name"] for j in jobs} <= set(d["active"]) <= later


async def finish_each_and_kill_the_worker(
    temporal_env: WorkflowEnvironment, kube: Kube, worker_kubeconfig: Path, namespace: str, task_queue: str,
    tmp_path: Path, name: str, count: int, *, start_with: Any, settled: Any = lambda d: True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run a worker; ``start_with(client)`` starts a series of Jobs that come one at a time. Finish
    each Job as it appears and SIGKILL the worker at a random point after; return the Jobs and
    the workflow's ``describe`` once ``settled(describe)``."""
    client = temporal_env.client
    rng = random.Random(11)
    health = free_port()
    proc_cm = worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / "w0.log", health)
    proc = proc_cm.__enter__()
    try:
        await start_with(client)
        for i in range(count):
            jobs = await eventually(lambda i=i: (j := jobs_of(kube, namespace, name)) and len(j) > i and j,
                                    timeout=120, what=f"Job {i + 1}")
            assert len(jobs) == i + 1, minutes_of(jobs)  # one at a time: the next only after this one ended
            newest = max(jobs, key=lambda j: int(j["metadata"]["name"].rsplit("-", 1)[1]))
            await ready(health)
            finish_job(kube, namespace, newest["metadata"]["name"], second(utcnow()))
            await asyncio.sleep(rng.uniform(0.0, 0.5))  # kill while the worker handles the end and creates the next
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc_cm.__exit__(None, None, None)
            proc_cm = worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / f"w{i + 1}.log",
                                     health)
            proc = proc_cm.__enter__()
        await ready(health)
        d = await eventually(lambda: _settled(describe(client, namespace, name), settled), timeout=60,
                             what="the workflow settled")
        # no workflow task or activity under way: every creation it asked for has been made
        handle = temporal_env.client.get_workflow_handle(cronjob_workflow_id(namespace, name))
        await eventually(lambda: idle(handle, timers=True), timeout=60, what="the workflow idle")
        return jobs_of(kube, namespace, name), d
    finally:
        proc_cm.__exit__(None, None, None)


async def _settled(described: Any, settled: Any) -> dict[str, Any]:
    d = await described
    assert settled(d), d  # the last state seen, if it never settles
    return d


@pytest.mark.timeout(900)
async def test_worker_sigkilled_during_a_one_at_a_time_backfill_creates_each_job_once_in_order(
    temporal_env: WorkflowEnvironment, kube: Kube, worker_kubeconfig: Path, namespace: str, task_queue: str, tmp_path: Path,
) -> None:
    # CJ-BACKFILL: the queue is workflow state; each kill lands while the end of one Job is
    # handled and the next created, and the restarted worker goes on from there
    base = minute_floor(utcnow()) - timedelta(hours=1)
    kube.create("CronJob", namespace, cronjob_manifest("fill", "* * * * *", suspend=True, limits=(10, 10)))

    async def backfill(client: Any) -> None:
        handle = await started(client, namespace, "fill")
        res = await handle.execute_update("backfill", {"from": stamp(base), "to": stamp(base + timedelta(minutes=5)),
                                                       "oneAtATime": True})
        assert len(res["created"]) == 1 and len(res["queued"]) == 5

    jobs, _ = await finish_each_and_kill_the_worker(temporal_env, kube, worker_kubeconfig, namespace, task_queue,
                                                    tmp_path, "fill", 6, start_with=backfill,
                                                    settled=lambda d: (d["backfillQueue"], d["counters"]["succeeded"]) == ([], 6))
    m = int(base.timestamp()) // 60
    assert minutes_of(jobs) == list(range(m, m + 6))


@pytest.mark.timeout(900)
async def test_worker_sigkilled_during_a_forbid_catch_up_creates_each_missed_job_once_in_order(
    temporal_env: WorkflowEnvironment, kube: Kube, worker_kubeconfig: Path, namespace: str, task_queue: str, tmp_path: Path,
) -> None:
    # CJ-CATCH-UP: what is still to run is derived from lastScheduleTime, so no kill loses or repeats a time
    floor = minute_floor(utcnow())
    kube.create("CronJob", namespace, cronjob_manifest("catch", "* * * * *", policy="Forbid", limits=(10, 10),
                                                       annotations={"batchd.io/catch-up": "all"}))
    down_since(kube, namespace, "catch", floor - timedelta(minutes=6))

    async def start(client: Any) -> None:
        await started(client, namespace, "catch")

    jobs, _ = await finish_each_and_kill_the_worker(temporal_env, kube, worker_kubeconfig, namespace, task_queue,
                                                    tmp_path, "catch", 6, start_with=start)
    minutes = minutes_of(jobs)  # the missed 6, and any minute that passed meanwhile, each once
    first = int(floor.timestamp()) // 60 - 5
    assert minutes[:6] == list(range(first, first + 6)), minutes
    assert minutes == list(range(minutes[0], minutes[0] + len(minutes))), minutes


@pytest.mark.slow
@pytest.mark.timeout(600)  # up to two real minutes by design, more on a loaded machine
async def test_a_time_missed_beyond_the_starting_deadline_is_skipped(
    client: Any, kube: Kube, namespace: str, task_queue: str,
) -> None:
    # CJ-13, CJ-20: the workflow sleeps towards a schedule time and the worker goes down across it;
    # when it comes back 25 s after that time (beyond the 15 s deadline), the missed time is dropped
    # silently and the next one runs. (A cron schedule: with @every, upstream's deadline clamp
    # shifts the grid and never fires.) No armed creation: nothing waits in the stopped worker.
    kube.create("CronJob", namespace, cronjob_manifest("deadline", "* * * * *", sds=15))
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        await started(client, namespace, "deadline")
        await eventually(lambda: _planned(client, namespace, "deadline"), what="the first pass")
    missed = minute_floor(utcnow()) + timedelta(minutes=1)
    await asyncio.sleep(max(0.0, (missed + timedelta(seconds=25) - utcnow()).total_seconds()))
    async with running(client, kube, task_queue, namespace, cronjob_lead=0):
        # The pass at the missed time has run once the workflow plans the time after it; by then
        # it has dropped the missed one or run it.
        await eventually(lambda: _next_is(client, namespace, "deadline", missed + timedelta(minutes=1)), timeout=60,
                         what="the pass at the missed time")
        assert await _last(client, namespace, "deadline") != missed, "the missed time must not run"
        assert int(missed.timestamp()) // 60 not in minutes_of(jobs_of(kube, namespace, "deadline"))
        ran = await eventually(lambda: _after(client, namespace, "deadline", missed), timeout=60, what="next run")
    assert ran == missed + timedelta(minutes=1)
    assert not [e for e in kube.list("Event", namespace)["items"] if e["reason"] == "MissSchedule"]  # CJ-20: silent


async def _planned(client: Any, ns: str, name: str) -> bool:
    return bool((await describe(client, ns, name))["nextScheduleTime"])


async def _last(client: Any, ns: str, name: str) -> datetime | None:
    t = (await describe(client, ns, name))["lastScheduleTime"]
    return datetime.fromisoformat(t.replace("Z", "+00:00")) if t else None


async def _next_is(client: Any, ns: str, name: str, t: datetime) -> bool:
    return (await describe(client, ns, name))["nextScheduleTime"] == stamp(t)


async def _after(client: Any, ns: str, name: str, t: datetime) -> datetime | None:
    last = await _last(client, ns, name)
    return last if last and last > t else None


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_worker_killed_while_a_creation_is_armed_still_creates_the_job_once(
    temporal_env: WorkflowEnvironment, kube: Kube, worker_kubeconfig: Path, namespace: str, task_queue: str, tmp_path: Path,
) -> None:
    # The armed creation waits inside the worker; SIGKILL loses the wait. Its attempt times out
    # ARMED_SLACK after the schedule time and the retry, on the restarted worker, creates the Job.
    client = temporal_env.client
    kube.create("CronJob", namespace, cronjob_manifest("armed", "* * * * *"))
    health = free_port()
    with worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / "w0.log", health,
                        "--cronjob-lead", "30") as proc:
        due = await armed_for(client, namespace, "armed", timeout=75)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert datetime.now(UTC) < due, "killed before the time"
    with worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / "w1.log", health,
                        "--cronjob-lead", "30"):
        wait = (due - datetime.now(UTC) + ARMED_SLACK).total_seconds() + 90  # the retry, on a busy machine
        # (a Job of the minute before may exist too: the first pass can come after a minute turned)
        name = f"armed-{int(due.timestamp()) // 60}"
        job = await eventually(lambda: kube.get("Job", namespace, name), timeout=wait, what="the armed Job")
        # the workflow took the creation in and has none still under way: one creation for the time
        handle = client.get_workflow_handle(cronjob_workflow_id(namespace, "armed"))
        await eventually(lambda: _ledger_has(handle, due), timeout=60, what="the creation in the ledger")
        await eventually(lambda: idle(handle, timers=True), timeout=60, what="the workflow idle")
        assert [e["outcome"] for e in await handle.query("history") if e["scheduledTime"] == stamp(due)] == ["created"]
    created = datetime.fromisoformat(job["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    assert job["metadata"]["name"] == f"armed-{int(due.timestamp()) // 60}"
    # Never early; made by the retry, which Temporal starts once the lost attempt's timeout
    # (ARMED_SLACK after the time) fires: on a loaded machine its timer queue runs tens of
    # seconds late (seen: 29 s), so the bound is the test's patience, not a latency claim.
    assert due <= created <= due + ARMED_SLACK + timedelta(seconds=90)


async def _ledger_has(handle: Any, due: datetime) -> bool:
    return any(e["scheduledTime"] == stamp(due) and e["outcome"] == "created" for e in await handle.query("history"))


@pytest.mark.timeout(600)
async def test_a_concurrency_group_survives_sigkills_and_a_holder_deleted_while_no_worker_ran(
    temporal_env: WorkflowEnvironment, kube: Kube, worker_kubeconfig: Path, namespace: str, task_queue: str, tmp_path: Path,
) -> None:
    """CJ-GROUP: three CronJobs share one slot. The worker is SIGKILLed at random points as each holder
    ends, and once a holder is deleted while no worker runs (no bridge sees it: the group's re-read
    must). Never two Jobs at once, each member served once in turn, and no Job made twice."""
    client = temporal_env.client
    rng = random.Random(5)
    members = [f"m{i}" for i in range(3)]
    for name in members:
        kube.create("CronJob", namespace, cronjob_manifest(name, "@every 2s", annotations={
            "batchd.io/concurrency-group": "gpu", "batchd.io/concurrency-limit": "1"}))
    most = 0

    def running_jobs() -> list[dict[str, Any]]:
        return [j for name in members for j in jobs_of(kube, namespace, name)
                if not any(c["type"] in ("Complete", "Failed") for c in j.get("status", {}).get("conditions", []))]

    async def watch() -> None:
        nonlocal most
        while True:
            most = max(most, len(running_jobs()))
            await asyncio.sleep(0.05)

    health = free_port()
    args = ("--group-recheck", "2s")
    watcher = asyncio.create_task(watch())
    served: list[str] = []
    uids: set[str] = set()
    proc_cm = worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / "w0.log", health, *args)
    proc = proc_cm.__enter__()
    try:
        for i in range(len(members)):
            [job] = await eventually(lambda: [j for j in running_jobs() if j["metadata"]["uid"] not in uids],
                                     timeout=120, what=f"holder {i + 1}")
            name = job["metadata"]["name"]
            served.append(name)
            uids.add(job["metadata"]["uid"])
            if i == 0:  # ended while no worker runs: deleted, and no bridge sees it
                owner = name.rsplit("-", 1)[0]  # once its CronJob's workflow has it (else it just makes it again)
                await eventually(lambda o=owner, n=name: _holds(client, namespace, o, n), what=f"{owner} holding {name}")
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kube.delete("Job", namespace, name)
            else:
                await ready(health)
                finish_job(kube, namespace, name, second(utcnow()), failed=rng.random() < 0.5)
                await asyncio.sleep(rng.uniform(0.0, 0.4))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            proc_cm.__exit__(None, None, None)
            proc_cm = worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / f"w{i + 1}.log",
                                     health, *args)
            proc = proc_cm.__enter__()
        d = await describe(client, namespace, served[0].rsplit("-", 1)[0])
    finally:
        watcher.cancel()
        proc_cm.__exit__(None, None, None)
    assert most == 1, f"{most} Jobs of the group ran at once"
    owners = [n.rsplit("-", 1)[0] for n in served]
    assert sorted(owners) == members, served  # each member once: the oldest wait goes first
    everything = [j["metadata"]["name"] for name in members for j in jobs_of(kube, namespace, name)]
    assert len(everything) == len(set(everything))
    first = served[0].rsplit("-", 1)[0]  # the group's re-read told its CronJob, as no bridge could
    assert served[0] not in d["active"] and events_of(kube, namespace, first, "MissingJob")


async def _holds(client: Any, ns: str, cronjob: str, job: str) -> bool:
    seat = (await describe(client, ns, cronjob))["concurrencyGroup"]
    return {"cronjob": cronjob, "job": job} in seat["holders"]
