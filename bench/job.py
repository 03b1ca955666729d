"""bench/job: one Indexed Job, 5,000 completions, parallelism 500, Pods running 1 s on kubesim.

    .venv/bin/python -m bench.job [--completions 5000] [--parallelism 500] [--run-seconds 1] [--per-index]

With ``--per-index`` the Job has ``backoffLimitPerIndex: 1`` and every tenth index fails once
(kubesim's kubelet exits its first Pod with 1), so 10 % of the indexes wait out their own
10 s backoff and run again; the Job still ends Complete.

Prints (never asserts): Pods started and finished per second, time to Complete, Kubernetes API
requests per Pod (kubesim's audit of every HTTP request the worker made; the fake kubelet's
updates are in-process and not counted), Temporal actions per Pod and history length (over the
whole continue-as-new chain), the largest history event (JOB-92) and the failed workflow tasks,
and worker peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from temporalio.service import RPCError, RPCStatusCode

from activities.kube import Kube
from bench.harness import (
    billable_actions,
    cluster,
    new_namespace,
    table,
    worker_process,
)
from workflows.identity import job_workflow_id
from workflows.models.job import JOB_MANAGED_BY

_TRANSIENT = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE, RPCStatusCode.RESOURCE_EXHAUSTED)


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def audit_total(url: str) -> int:
    with urllib.request.urlopen(f"{url}/kubesim/audit") as resp:
        return sum(r.get("count", 0) for r in json.loads(resp.read())["requests"])


async def main(completions: int, parallelism: int, run_seconds: float, per_index: bool = False) -> None:
    async with cluster() as (wd, env, kubeconfig, kube):
        url = kube.access.server
        ns = new_namespace(kube, "bench-job")
        with worker_process(env, kubeconfig, wd, namespace=ns, task_queue="bench-job") as proc:
            await asyncio.sleep(3)  # informers synced
            before = audit_total(url)
            t0 = time.time()
            annotations = {"kubesim.batchd.io/run-seconds": str(run_seconds)}
            spec = {"managedBy": JOB_MANAGED_BY, "completionMode": "Indexed", "completions": completions,
                    "parallelism": parallelism, "template": {
                        "metadata": {"annotations": annotations},
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
            if per_index:
                spec["backoffLimitPerIndex"] = 1
                annotations["kubesim.batchd.io/fail-indexes"] = ",".join(str(i) for i in range(0, completions, 10))
                annotations["kubesim.batchd.io/fail-times"] = "1"
            job = kube.create("Job", ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "big"},
                                          "spec": spec})
            wid = job_workflow_id(ns, "big", job["metadata"]["uid"])
            handle = env.client.get_workflow_handle(wid)
            while True:
                try:
                    result = await asyncio.wait_for(handle.result(), 1800)
                    break
                except RPCError as err:  # not started yet, or a long poll the loaded server let lapse
                    if "not found" not in str(err).lower() and err.status not in _TRANSIENT:
                        raise
                    await asyncio.sleep(0.5)
            elapsed = time.time() - t0
            requests = audit_total(url) - before
            _, peak = proc.rss_mb()
        pods = [p for p in _all_pods(kube, ns)]
        starts = sorted(_ts(p["status"]["startTime"]) for p in pods if p["status"].get("startTime"))
        ends = sorted(_ts(s["state"]["terminated"]["finishedAt"]) for p in pods
                      for s in p["status"].get("containerStatuses") or [] if (s.get("state") or {}).get("terminated"))
        runs, events, actions = 0, [], 0
        biggest, task_failures = (0, ""), []
        async for wf in env.client.list_workflows(f'WorkflowId = "{wid}"'):
            hist = await env.client.get_workflow_handle(wid, run_id=wf.run_id).fetch_history()
            runs += 1
            events.append(len(hist.events))
            actions += billable_actions(hist)
            for ev in hist.events:
                if ev.ByteSize() > biggest[0]:
                    biggest = (ev.ByteSize(), ev.WhichOneof("attributes") or "")
                    (wd / "largest-event.pb").write_bytes(ev.SerializeToString())
                if ev.HasField("workflow_task_failed_event_attributes"):
                    failed = ev.workflow_task_failed_event_attributes
                    task_failures.append(f"{failed.cause}: {failed.failure.message[:200]}")
        done = kube.get("Job", ns, "big")
        if done is None:
            raise RuntimeError(f"Job {ns}/big is gone before its figures were read")
        final = done["status"]
    span_start = max(1e-3, starts[-1] - starts[0]) if starts else float("nan")
    span_end = max(1e-3, ends[-1] - ends[0]) if ends else float("nan")
    print(f"job: Indexed, {completions} completions, parallelism {parallelism}, Pods run {run_seconds:g} s"
          + (", backoffLimitPerIndex 1, every tenth index fails once" if per_index else ""))
    print(table([
        ("result", f"{result} (succeeded {final.get('succeeded')}, failed {final.get('failed', 0)}, "
                   f"completedIndexes {final.get('completedIndexes')!r}, failedIndexes {final.get('failedIndexes')!r})"),
        ("time to Complete (s)", f"{elapsed:.1f}"),
        ("Pods started / finished per second", f"{len(starts) / span_start:.0f} / {len(ends) / span_end:.0f}"),
        ("Kubernetes API requests per Pod", f"{requests / max(1, len(pods)):.2f} ({requests} for {len(pods)} Pods)"),
        ("Temporal actions per Pod", f"{actions / max(1, len(pods)):.3f} ({actions} in {runs} run(s))"),
        ("history events per run (max / total)", f"{max(events, default=0)} / {sum(events)}"),
        ("largest history event (KB; Temporal warns above 256)", f"{biggest[0] / 1024:.0f} ({biggest[1]})"),
        ("failed workflow tasks", f"{len(task_failures)} {sorted(set(task_failures))}"),
        ("worker peak RSS (MiB)", f"{peak:.0f}"),
    ]))
    print(f"(logs in {wd})")


def _all_pods(kube: Kube, ns: str) -> Iterator[dict[str, Any]]:
    cont = None
    while True:
        page = kube.list("Pod", ns, limit=1000, continue_=cont)
        yield from page.get("items") or []
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--completions", type=int, default=5000)
    parser.add_argument("--parallelism", type=int, default=500)
    parser.add_argument("--run-seconds", type=float, default=1.0)
    parser.add_argument("--per-index", action="store_true", help="backoffLimitPerIndex 1; 10 %% of Pods fail once")
    a = parser.parse_args()
    asyncio.run(main(a.completions, a.parallelism, a.run_seconds, a.per_index))
