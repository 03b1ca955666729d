"""bench/cost: what each object costs in Temporal signals and actions, per controller and end to end.

    .venv/bin/python -m bench.cost [--jobs 50] [--runs 3]

Prints (never asserts):
1. signals — ``--jobs`` finished TTL Jobs (one-hour TTL), each then touched once with a label no
   decision reads, then once with a new TTL: starts and signals per workflow, with one worker
   replica, with two (leader election, the default) and with two that each send
   (``--no-leader-elect``);
2. actions — billed Temporal actions (history events of the kinds Temporal bills: starts,
   signals, timers, activities, local-activity and patch markers, search attribute and memo
   upserts) per TTL deletion, per CronJob run, per Pod of a one-Pod Job, and for one CronJob run
   end to end: schedule → Job → Pod → the Job's TTL deletion.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client

from bench.harness import (
    Cluster,
    billable_actions,
    cluster,
    new_namespace,
    run_then_exit,
    table,
    worker_processes,
)
from tests.k8s import create_job, finish_job, second
from workflows.identity import cronjob_workflow_id
from workflows.models.cronjob import CRONJOB_MANAGED_LABEL
from workflows.models.job import JOB_MANAGED_BY

SETTLE = 10.0  # seconds after the last change for every signal it causes to land


@contextlib.contextmanager
def replicas(c: Cluster, ns: str, n: int, extra: list[str]) -> Iterator[None]:
    """``n`` worker processes on one task queue (and, unless ``extra`` says otherwise, one Lease)."""
    with worker_processes(n, c.env, c.kubeconfig, c.wd, namespace=ns, task_queue=f"{ns}-q",
                          extra=[*extra, "--ttl-scope", "all"]):
        yield


async def histories(client: Client, query: str) -> list[Any]:
    out = []
    async for wf in client.list_workflows(query):
        out.append(await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history())
    return out


async def wait_count(client: Client, query: str, n: int, timeout: float = 300) -> None:
    async with asyncio.timeout(timeout):
        while (await client.count_workflows(query)).count < n:
            await asyncio.sleep(0.5)


def kinds(history: Any) -> list[str]:
    return [ev.WhichOneof("attributes") for ev in history.events]


async def signals(c: Cluster, jobs: int, n_replicas: int, extra: list[str]) -> dict[str, float]:
    """Starts and signals per TTL workflow: as it starts, for a label, for a new TTL."""
    ns = new_namespace(c.kube, "bench-signals")
    query = f'K8sNamespace = "{ns}" AND WorkflowType = "TTLAfterFinished"'
    sig = "workflow_execution_signaled_event_attributes"

    async def count(kind: str) -> int:
        return sum(kinds(h).count(kind) for h in await histories(c.env.client, query))

    with replicas(c, ns, n_replicas, extra):
        await asyncio.sleep(5)  # informers listed, a leader elected
        names = [f"s-{i:03d}" for i in range(jobs)]
        finished = second(datetime.now(UTC))
        for name in names:
            create_job(c.kube, ns, name, ttl=3600)
            finish_job(c.kube, ns, name, finished)
        await wait_count(c.env.client, query, jobs)
        await asyncio.sleep(SETTLE)
        at_start = await count(sig)
        starts = await count("workflow_execution_started_event_attributes")
        for name in names:
            c.kube.patch("Job", ns, name, {"metadata": {"labels": {"touched": "yes"}}})
        await asyncio.sleep(SETTLE)
        after_label = await count(sig)
        for name in names:
            c.kube.patch("Job", ns, name, {"spec": {"ttlSecondsAfterFinished": 7200}})
        await asyncio.sleep(SETTLE)
        after_ttl = await count(sig)
    return {"starts": starts / jobs, "start": at_start / jobs, "label": (after_label - at_start) / jobs,
            "ttl": (after_ttl - after_label) / jobs}


async def cronjob_run(c: Cluster, runs: int) -> dict[str, float]:
    """One CronJob every 20 s whose Jobs batchd runs (one 1 s Pod) and deletes 5 s after they finish."""
    ns = new_namespace(c.kube, "bench-cost")
    with replicas(c, ns, 1, []):
        await asyncio.sleep(5)
        template = {"metadata": {"annotations": {"kubesim.batchd.io/run-seconds": "1"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
        c.kube.create("CronJob", ns, {
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "tick", "labels": {CRONJOB_MANAGED_LABEL: "true"}},
            "spec": {"schedule": "@every 20s", "jobTemplate": {"spec": {
                "managedBy": JOB_MANAGED_BY, "ttlSecondsAfterFinished": 5, "template": template}}}})
        ttl_query = f'K8sNamespace = "{ns}" AND WorkflowType = "TTLAfterFinished" AND ExecutionStatus = "Completed"'
        await wait_count(c.env.client, ttl_query, runs, timeout=120 + 40 * runs)
        await asyncio.sleep(SETTLE)
        client = c.env.client
        cron = await histories(client, f'WorkflowId = "{cronjob_workflow_id(ns, "tick")}"')
        ttl = await histories(client, ttl_query)
        jobs = await histories(client, f'K8sNamespace = "{ns}" AND WorkflowType = "Job" AND ExecutionStatus = "Completed"')
    made = max(1, len(jobs))
    per_run = sum(billable_actions(h) for h in cron) / made
    per_job = sum(billable_actions(h) for h in jobs) / made
    per_ttl = sum(billable_actions(h) for h in ttl) / max(1, len(ttl))
    return {"runs": made, "cronjob": per_run, "job": per_job, "ttl": per_ttl, "total": per_run + per_job + per_ttl}


async def main(jobs: int, runs: int) -> None:
    async with cluster() as c:
        rows = []
        for label, n, extra in (("1 replica", 1, []), ("2 replicas, leader election", 2, []),
                                ("2 replicas, --no-leader-elect", 2, ["--no-leader-elect"])):
            s = await signals(c, jobs, n, extra)
            rows.append((label, f"starts {s['starts']:.2f}; signals: with the start {s['start']:.2f}, "
                                f"for a label {s['label']:.2f}, for a new TTL {s['ttl']:.2f}"))
            print(f"signals per TTL workflow, {label}: {rows[-1][1]}", flush=True)
        print(table(rows))
        cost = await cronjob_run(c, runs)
        print(f"actions, over {cost['runs']:.0f} CronJob runs (one 1-Pod Job each, TTL 5 s):", flush=True)
        print(table([
            ("per CronJob run (CronJob workflow)", f"{cost['cronjob']:.1f}"),
            ("per Pod of a 1-Pod Job (Job workflow)", f"{cost['job']:.1f}"),
            ("per TTL deletion (TTL workflow)", f"{cost['ttl']:.1f}"),
            ("one run end to end", f"{cost['total']:.1f}"),
        ]))
    print(f"(logs in {c.wd})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    a = parser.parse_args()
    run_then_exit(main(a.jobs, a.runs))
