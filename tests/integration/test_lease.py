"""Tier 3: leader election (WATCH-4) — the Lease in kubesim, two bridges on one task queue.

Short real durations (a 3 s Lease). What is asserted is read from the Lease itself and from the
workflows' histories: how many starts and signals each workflow received.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client

from kube.client import Kube
from tests.conftest import eventually, running, utcnow
from tests.k8s import create_job, finish_job, second
from worker.bridge import Bridge, BridgeSettings
from worker.lease import Elector, LeaseSettings
from workflows.identity import ttl_workflow_id

SHORT = {"lease_duration": 3, "renew_deadline": 2, "retry_period": 1}


def lease(namespace: str) -> LeaseSettings:
    return LeaseSettings(namespace=namespace, **SHORT)


def holder(kube: Kube, namespace: str) -> str | None:
    obj = kube.get("Lease", namespace, "batchd")
    return None if obj is None else obj["spec"].get("holderIdentity")


@contextlib.asynccontextmanager
async def second_bridge(client: Client, kube: Kube, namespace: str, task_queue: str,
                        **times: float) -> AsyncIterator[Bridge]:
    """Another replica's bridge on the same Lease (the workers of :func:`running` serve both)."""
    settings = LeaseSettings(namespace=namespace, **{**SHORT, **times})
    br = Bridge(client, kube, BridgeSettings(namespaces=(namespace,), task_queue=task_queue, ttl_scope="all"),
                elector=Elector(kube, settings))
    await br.start()
    try:
        yield br
    finally:
        await br.stop()


async def signals_and_starts(client: Client, wid: str) -> tuple[int, int]:
    history = await client.get_workflow_handle(wid).fetch_history()
    kinds = [ev.WhichOneof("attributes") for ev in history.events]
    return (kinds.count("workflow_execution_signaled_event_attributes"),
            kinds.count("workflow_execution_started_event_attributes"))


def test_the_lease_times_must_nest() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaseSettings(lease_duration=10, renew_deadline=10, retry_period=2)


async def test_two_bridges_send_each_start_and_signal_once(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace, lease=lease(namespace)) as a, \
            second_bridge(client, kube, namespace, task_queue) as b:
        assert a is not None
        await eventually(lambda: a.leading or b.leading, what="a leader")
        jobs = {f"j{i}": create_job(kube, namespace, f"j{i}", ttl=3600) for i in range(5)}
        finished = second(utcnow())
        for name in jobs:
            finish_job(kube, namespace, name, finished)
        wids = [ttl_workflow_id("Job", namespace, name, job["metadata"]["uid"]) for name, job in jobs.items()]

        async def started() -> bool:
            return all([await _started(client, wid) for wid in wids])

        await eventually(started, what="every TTL workflow started")
        for name in jobs:  # a change the decision reads: each workflow must hear of it, once
            kube.patch("Job", namespace, name, {"spec": {"ttlSecondsAfterFinished": 7200}})

        async def told() -> bool:
            return [await signals_and_starts(client, wid) for wid in wids] == [(1, 1)] * len(wids)

        await eventually(told, what="each workflow started once and signalled once")
        assert a.leading != b.leading
        assert holder(kube, namespace) == (a if a.leading else b).elector.identity  # type: ignore[union-attr]
        # The standby's informers saw every change too, and its shards took them in and sent nothing.
        standby = b if a.leading else a
        uids = [job["metadata"]["uid"] for job in jobs.values()]
        await eventually(lambda: _seen_and_drained(standby, uids), what="the standby took every change in")
        assert [await signals_and_starts(client, wid) for wid in wids] == [(1, 1)] * len(wids)
    for wid in wids:
        await client.get_workflow_handle(wid).terminate("test done")


async def test_a_new_leader_routes_what_changed_while_none_led(client, kube, namespace, task_queue):
    """The holder died; a Job that finished before anyone took over is routed by the replica that
    takes over, from its own cache: its informers saw the change while it could not send it."""
    dead = Elector(kube, LeaseSettings(namespace=namespace, identity="dead-replica", **SHORT))
    assert await asyncio.to_thread(dead._try_acquire_or_renew)  # renewed once, then died
    async with running(client, kube, task_queue, bridge=False), \
            second_bridge(client, kube, namespace, task_queue, lease_duration=8) as heir:
        job = create_job(kube, namespace, "late", ttl=3600)
        finish_job(kube, namespace, "late", second(utcnow()))
        uid = job["metadata"]["uid"]
        await eventually(lambda: _finished_in_cache(heir, uid), what="the heir's informer saw the Job finish")
        assert not heir.leading, "took the Lease of a holder that may still be alive"
        await eventually(lambda: heir.leading, what="the heir leads")
        wid = ttl_workflow_id("Job", namespace, "late", uid)
        await eventually(lambda: _started(client, wid), what="the Job's TTL workflow started by the new leader")
        await client.get_workflow_handle(wid).terminate("test done")


def _finished_in_cache(br: Bridge, uid: str) -> bool:
    job = br.cached("Job", uid)
    return bool(job and any(c.get("type") == "Complete" for c in (job.get("status") or {}).get("conditions") or []))


def _seen_and_drained(br: Bridge, uids: list[str]) -> bool:
    """The bridge's cache holds each Job with its new TTL, and no change of them waits in its shards."""
    ttls = [(br.cached("Job", uid) or {}).get("spec", {}).get("ttlSecondsAfterFinished") for uid in uids]
    return ttls == [7200] * len(uids) and not any(shard.holds(uid) for shard in br._queues for uid in uids)


async def _started(client: Client, wid: str) -> bool:
    with contextlib.suppress(Exception):
        return (await signals_and_starts(client, wid))[1] == 1
    return False


async def test_a_dead_holder_is_replaced_only_after_the_lease_duration(kube: Kube, namespace: str) -> None:
    dead = Elector(kube, LeaseSettings(namespace=namespace, identity="dead-replica", **SHORT))
    assert await asyncio.to_thread(dead._try_acquire_or_renew)  # renewed once, then died
    renewed = time.monotonic()
    heir = Elector(kube, lease(namespace))
    took: list[float] = []
    task = asyncio.create_task(heir.run(lambda: took.append(time.monotonic()), lambda: None))
    try:
        await eventually(lambda: bool(took), timeout=30, what="the heir leads")
        assert took[0] - renewed >= SHORT["lease_duration"], "took a Lease its holder may still be using"
        spec = kube.get("Lease", namespace, "batchd")["spec"]  # type: ignore[index]
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == (heir.identity, 1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert holder(kube, namespace) is None, "a stopping leader gives the Lease up"


async def test_a_holder_that_cannot_renew_stops_leading_before_another_may_start(kube: Kube, namespace: str) -> None:
    # A wide gap between renew deadline + retry period (3 s) and the duration (6 s), for a loaded machine.
    settings = LeaseSettings(namespace=namespace, lease_duration=6, renew_deadline=2, retry_period=1)
    elector = Elector(kube, settings)
    stopped: list[float] = []
    task = asyncio.create_task(elector.run(lambda: None, lambda: stopped.append(time.monotonic())))
    try:
        await eventually(lambda: elector.leading, what="it leads")
        obj = kube.get("Lease", namespace, "batchd")
        assert obj is not None
        obj["spec"]["holderIdentity"] = "usurper"  # as if it had lost the Lease while partitioned
        kube.replace("Lease", namespace, "batchd", obj)
        taken = time.monotonic()
        await eventually(lambda: bool(stopped), timeout=30, what="it stops leading")
        # it last renewed before ``taken``: another replica could start only 6 s after that renewal
        assert stopped[0] - taken < settings.lease_duration
        assert not elector.leading
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert holder(kube, namespace) == "usurper", "a replica that does not hold the Lease leaves it alone"


class _Counting:
    """The Kube client, counting each kind of request the elector makes."""

    def __init__(self, kube: Kube) -> None:
        self.kube, self.calls = kube, Counter[str]()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.kube, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return method(*args, **kwargs)
        return counted


def test_a_holder_renews_with_one_write_and_reads_only_when_someone_else_wrote(kube: Kube, namespace: str) -> None:
    counting = _Counting(kube)
    elector = Elector(counting, lease(namespace))  # type: ignore[arg-type]
    for _ in range(4):  # takes the free Lease, then renews it three times
        assert elector._try_acquire_or_renew()
    assert counting.calls == {"get": 1, "create": 1, "replace": 3}
    obj = kube.get("Lease", namespace, "batchd")
    assert obj is not None
    obj["spec"]["holderIdentity"] = "usurper"
    kube.replace("Lease", namespace, "batchd", obj)
    # its write of the Lease as it last wrote it conflicts; it reads the Lease and leaves it alone
    assert not elector._try_acquire_or_renew()
    assert counting.calls == {"get": 2, "create": 1, "replace": 4}
    assert holder(kube, namespace) == "usurper"
