"""``/readyz`` means "bridge synced and pollers running" (worker/app.py, Readiness).

In process, against the dev server: a Readiness over real Workers is not ready before they run,
names a queue nobody polls, and is ready once the server lists this client's pollers. As a
process: a worker whose Kubernetes API is not there yet is alive, its pollers are seen, and it
is unready only for the bridge — until the API server comes up.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from kube.client import Kube
from tests.conftest import eventually
from tests.e2e.test_worker_process import http_get, worker_process
from worker.app import Readiness
from worker.dev import free_port
from worker.temporal import build_workers, polled_queues

WORKFLOW, ACTIVITY = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY


async def test_ready_only_while_the_server_sees_this_processs_pollers_on_every_queue(
        client: Client, kube: Kube, task_queue: str) -> None:
    workers = build_workers(client, kube, task_queue=task_queue)
    synced = True
    readiness = Readiness(client, lambda: synced, workers, polled_queues(task_queue))
    probing = asyncio.create_task(readiness.run())
    try:
        assert readiness.problems() == ["workers: not running"]
        runs = [asyncio.create_task(w.run()) for w in workers]
        await eventually(lambda: readiness.problems() == [], timeout=30, what="pollers seen by the server")
        synced = False
        assert readiness.problems() == ["bridge: informers not synced"]
        synced = True

        # A queue this process does not poll is reported by name.
        unpolled = f"nobody-{uuid.uuid4().hex[:6]}"
        lonely = Readiness(client, lambda: True, workers, [(task_queue, WORKFLOW), (unpolled, ACTIVITY)])
        lonely_probe = asyncio.create_task(lonely.run())
        await eventually(lambda: lonely.problems() == [f"pollers: {unpolled} (activity): no recent poll from {client.identity}"],
                         timeout=30, what="the unpolled queue named")
        lonely_probe.cancel()

        readiness.stopping()
        assert readiness.problems() == ["stopping"]
        await asyncio.gather(*(w.shutdown() for w in workers))
        await asyncio.gather(*runs)
    finally:
        probing.cancel()
        for w in workers:
            if w.is_running:
                await w.shutdown()


async def test_a_worker_without_its_api_server_is_alive_and_unready_only_for_the_bridge(
        temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path) -> None:
    from kubesim import KubeSim

    port = free_port()
    sim: Any = KubeSim(port=port)
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")  # written before anything listens there
    health = free_port()
    with worker_process(temporal_env, kubeconfig, "default", task_queue, tmp_path / "worker.log", health) as proc:
        await eventually(lambda: http_get(health, "/healthz")[0] == 200, timeout=180, what="health endpoint up (imports are slow on a loaded machine)")
        await eventually(lambda: http_get(health, "/readyz") == (503, "bridge: informers not synced\n"),
                         timeout=60, what="unready for the bridge alone (pollers seen)")
        sim.start()
        try:
            await eventually(lambda: http_get(health, "/readyz") == (200, "ok"), timeout=90, what="ready once listed")
            assert proc.poll() is None
        finally:
            sim.stop()
