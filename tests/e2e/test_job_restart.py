"""Tier 4: the Job controller across worker deaths — a real ``batchd worker`` process SIGKILLed at
random points while a Job's Pods finish, so kills land between the tracking protocol's steps.
"""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from activities.kube import Kube
from tests.e2e.test_worker_process import free_port, worker_process
from tests.integration.test_job import job_manifest, no_finalizers_left, pods_of
from workflows.identity import job_workflow_id


async def test_worker_sigkilled_between_protocol_steps_counts_every_pod_exactly_once(
    temporal_env: WorkflowEnvironment, kube: Kube, kubeconfig: Path, namespace: str, task_queue: str,
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    health = free_port()
    job = kube.create("Job", namespace, job_manifest("sturdy", completions=30, parallelism=3, run_seconds=0.8))
    wid = job_workflow_id(namespace, "sturdy", job["metadata"]["uid"])
    kills = 0
    for i in range(4):  # four deaths at random points while Pods finish and are counted
        with worker_process(temporal_env, kubeconfig, namespace, task_queue, tmp_path / f"w{i}.log", health) as proc:
            await asyncio.sleep(rng.uniform(2.0, 4.0))
            if _finished(kube, namespace):
                break
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
    with worker_process(temporal_env, kubeconfig, namespace, task_queue, tmp_path / "last.log", health):
        result = await asyncio.wait_for(temporal_env.client.get_workflow_handle(wid).result(), 120)
    assert kills >= 2, "the test must actually kill the worker mid-run"
    assert result == "Complete"
    fresh = kube.get("Job", namespace, "sturdy")
    st = fresh["status"]
    succeeded_pods = [p for p in pods_of(kube, namespace, fresh) if p["status"]["phase"] == "Succeeded"]
    assert st["succeeded"] == 30 == len(succeeded_pods), (st, len(succeeded_pods))  # no double, no lost count
    assert st.get("failed", 0) == 0
    assert no_finalizers_left(kube, namespace, fresh)  # no stuck finalizer
    assert not [e for e in kube.list("Event", namespace)["items"] if e["reason"] == "TooManySucceededPods"]


def _finished(kube: Kube, ns: str) -> bool:
    job: Any = kube.get("Job", ns, "sturdy")
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
               for c in (job or {}).get("status", {}).get("conditions") or [])
