"""Tier 3: the TTL workflow alone on the real dev server, with stand-in activities under the real names.

The Kubernetes side is a dict here, so these tests pin the workflow's decisions: re-arming on a
signal, the fresh re-check at expiry, ending only on authoritative facts, and determinism.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from tests.conftest import eventually, save_history
from workflows.models.common import ObjectRef, ObserveInput
from workflows.models.ttl import (
    DeleteExpiredInput,
    DeleteExpiredResult,
    TTLInput,
    TTLObservation,
    TTLResult,
    time_left,
)
from workflows.ttl import TTLAfterFinishedWorkflow


class FakeCluster:
    """The objects the stand-in activities see, keyed by name; records every delete call."""

    def __init__(self) -> None:
        self.objects: dict[str, TTLObservation] = {}
        self.deletes: list[str] = []

    def fresh(self, ref: ObjectRef) -> TTLObservation:
        obs = self.objects.get(ref.name)
        return obs if obs is not None and obs.ref.uid == ref.uid else TTLObservation(ref=ref, gone=True)

    def activities(self) -> list:
        @activity.defn(name="read_ttl_object")
        async def read(inp: ObserveInput) -> TTLObservation:
            return self.fresh(inp.ref)

        @activity.defn(name="delete_expired")
        async def delete(inp: DeleteExpiredInput) -> DeleteExpiredResult:
            obs = self.fresh(inp.ref)
            now = datetime.now(UTC)
            left = time_left(obs, now) if obs.needs_cleanup() else None
            if left is None or not left.expired:
                return DeleteExpiredResult(deleted=False, observation=obs)
            self.deletes.append(inp.ref.name)
            del self.objects[inp.ref.name]
            return DeleteExpiredResult(deleted=True, observation=obs, expire_at=left.expire_at, deleted_at=now)

        return [read, delete]


def observation(name: str, *, ttl: int | None, finished_ago: float = 0.0, uid: str = "u1", **kw) -> TTLObservation:
    return TTLObservation(
        ref=ObjectRef(kind="Job", namespace="ns", name=name, uid=uid), ttl_seconds=ttl, finished=True,
        finish_time=datetime.now(UTC) - timedelta(seconds=finished_ago), **kw,
    )


async def start(client: Client, tq: str, obs: TTLObservation):
    return await client.start_workflow(
        TTLAfterFinishedWorkflow.run, TTLInput(observation=obs), id=f"job-ttl/{uuid.uuid4()}", task_queue=tq,
        start_signal="observe", start_signal_args=[obs],
    )


async def test_expired_object_is_deleted_once(client: Client, task_queue: str) -> None:
    cluster = FakeCluster()
    obs = observation("a", ttl=1)
    cluster.objects["a"] = obs
    async with Worker(client, task_queue=task_queue, workflows=[TTLAfterFinishedWorkflow], activities=cluster.activities()):
        handle = await start(client, task_queue, obs)
        res: TTLResult = await handle.result()
    assert res.outcome == "deleted" and cluster.deletes == ["a"]
    await save_history(handle, "ttl-expired-deleted")


async def test_fresh_copy_with_a_later_ttl_sends_the_workflow_back_to_sleep(client: Client, task_queue: str) -> None:
    # The signal is stale (TTL 1) but the cluster already says TTL 3: no deletion before 3 s.
    cluster = FakeCluster()
    stale = observation("b", ttl=1)
    cluster.objects["b"] = stale.model_copy(update={"ttl_seconds": 3})
    async with Worker(client, task_queue=task_queue, workflows=[TTLAfterFinishedWorkflow], activities=cluster.activities()):
        handle = await start(client, task_queue, stale)
        res: TTLResult = await handle.result()
    assert res.outcome == "deleted"
    assert res.expire_at == stale.finish_time + timedelta(seconds=3)
    assert cluster.deletes == ["b"]
    await save_history(handle, "ttl-fresh-copy-sleeps-again")


async def test_a_stale_no_ttl_signal_does_not_end_the_workflow(client: Client, task_queue: str) -> None:
    cluster = FakeCluster()
    obs = observation("c", ttl=2)
    cluster.objects["c"] = obs
    async with Worker(client, task_queue=task_queue, workflows=[TTLAfterFinishedWorkflow], activities=cluster.activities()):
        handle = await start(client, task_queue, obs)
        await handle.signal("observe", obs.model_copy(update={"ttl_seconds": None}))  # stale: the cluster still has TTL 2
        res: TTLResult = await handle.result()
    assert res.outcome == "deleted" and cluster.deletes == ["c"]
    await save_history(handle, "ttl-stale-signal-rechecked")


async def test_a_gone_signal_ends_the_workflow_without_any_delete(client: Client, task_queue: str) -> None:
    cluster = FakeCluster()
    obs = observation("d", ttl=3600)
    cluster.objects["d"] = obs
    async with Worker(client, task_queue=task_queue, workflows=[TTLAfterFinishedWorkflow], activities=cluster.activities()):
        handle = await start(client, task_queue, obs)
        await handle.signal("observe", obs.model_copy(update={"gone": True}))
        res: TTLResult = await handle.result()
    assert res.outcome == "gone" and cluster.deletes == []
    await save_history(handle, "ttl-gone-signal")


async def test_signals_for_another_uid_are_ignored(client: Client, task_queue: str) -> None:
    cluster = FakeCluster()
    obs = observation("e", ttl=1)
    cluster.objects["e"] = obs
    async with Worker(client, task_queue=task_queue, workflows=[TTLAfterFinishedWorkflow], activities=cluster.activities()):
        handle = await start(client, task_queue, obs)
        await handle.signal("observe", observation("e", ttl=None, uid="other", gone=True))
        res: TTLResult = await handle.result()
    assert res.outcome == "deleted"


async def test_describe_query_reports_the_pending_expiry(client: Client, task_queue: str) -> None:
    cluster = FakeCluster()
    obs = observation("f", ttl=3600)
    cluster.objects["f"] = obs
    async with Worker(client, task_queue=task_queue, workflows=[TTLAfterFinishedWorkflow], activities=cluster.activities()):
        handle = await start(client, task_queue, obs)
        state = await eventually(lambda: _expiry(handle))
        assert state.startswith((obs.finish_time + timedelta(seconds=3600)).strftime("%Y-%m-%dT%H:%M:%S"))
        await handle.terminate("done")


async def _expiry(handle) -> str | None:
    return (await handle.query("describe")).get("expireAt")


async def test_history_replays_deterministically(client: Client, task_queue: str) -> None:
    cluster = FakeCluster()
    obs = observation("g", ttl=1)
    cluster.objects["g"] = obs.model_copy(update={"ttl_seconds": 2})
    async with Worker(client, task_queue=task_queue, workflows=[TTLAfterFinishedWorkflow], activities=cluster.activities()):
        handle = await start(client, task_queue, obs)
        await asyncio.wait_for(handle.result(), 20)
    history = await handle.fetch_history()
    assert not [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]
    await Replayer(workflows=[TTLAfterFinishedWorkflow], data_converter=client.data_converter).replay_workflow(history)
