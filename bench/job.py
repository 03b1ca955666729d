"""bench/job: Indexed Jobs of many Pods on kubesim; by default one, 5,000 completions, parallelism 500, Pods running 1 s.

    .venv/bin/python -m bench.job [--completions 5000] [--parallelism 500] [--run-seconds 1] [--per-index]
                                  [--jobs 1] [--kill-after N] [--temporal dev|postgres]

With ``--per-index`` the Job has ``backoffLimitPerIndex: 1`` and every tenth index fails once
(kubesim's kubelet exits its first Pod with 1), so 10 % of the indexes wait out their own
10 s backoff and run again; the Job still ends Complete. ``--jobs N`` creates N such Jobs at once
and prints Jobs per second and the p99 time to Complete. ``--kill-after N`` SIGKILLs the worker
once N Pods of the first Job have succeeded and starts another. A single Job's end is checked:
exact ``succeeded``, ``failed`` and ``completedIndexes``, one succeeded Pod per index, no Pod left
holding the tracking finalizer.

Prints (never asserts): Pods started and finished per second, time to Complete, Kubernetes API
requests per Pod (kubesim's audit of every HTTP request the worker made; the fake kubelet's
updates are in-process and not counted), Temporal actions per Pod and history length (over the
whole continue-as-new chain), the largest history event (JOB-92) and the failed workflow tasks,
worker peak RSS, and kubesim's RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from bench.harness import (
    TEMPORAL_SERVERS,
    Process,
    billable_actions,
    cluster,
    new_namespace,
    run_then_exit,
    table,
    worker_process,
)
from kube.client import Kube
from workflows.identity import job_workflow_id
from workflows.models.job import COMPLETION_INDEX_ANNOTATION, JOB_MANAGED_BY, JOB_TRACKING_FINALIZER

_TRANSIENT = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE, RPCStatusCode.RESOURCE_EXHAUSTED)


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def audit_total(url: str) -> int:
    with urllib.request.urlopen(f"{url}/kubesim/audit") as resp:
        return sum(r.get("count", 0) for r in json.loads(resp.read())["requests"])


def job_spec(completions: int, parallelism: int, run_seconds: float, per_index: bool) -> dict[str, Any]:
    annotations = {"kubesim.batchd.io/run-seconds": str(run_seconds)}
    spec: dict[str, Any] = {"managedBy": JOB_MANAGED_BY, "completionMode": "Indexed", "completions": completions,
                            "parallelism": parallelism, "template": {
                                "metadata": {"annotations": annotations},
                                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    if per_index:
        spec["backoffLimitPerIndex"] = 1
        annotations["kubesim.batchd.io/fail-every"] = "10"  # a list of the indexes made every Pod 60 KB larger
        annotations["kubesim.batchd.io/fail-times"] = "1"
    return spec


async def wait_result(client: Client, wid: str) -> str:
    handle = client.get_workflow_handle(wid)
    while True:
        try:
            return str(await asyncio.wait_for(handle.result(), 3600))
        except RPCError as err:  # not started yet, or a long poll the loaded server let lapse
            if "not found" not in str(err).lower() and err.status not in _TRANSIENT:
                raise
            await asyncio.sleep(0.5)


async def kill_after(kube: Kube, ns: str, job: str, pods: int, worker: Process) -> float:
    """SIGKILL ``worker`` once ``pods`` Pods of ``job`` have succeeded; its peak RSS (MiB) until then."""
    while True:
        got = await asyncio.to_thread(kube.get, "Job", ns, job)
        if got is not None and (got.get("status") or {}).get("succeeded", 0) >= pods:
            peak = worker.rss_mb()[1]
            worker.proc.send_signal(signal.SIGKILL)
            worker.proc.wait()
            return peak
        await asyncio.sleep(0.2)


async def main(completions: int, parallelism: int, run_seconds: float, per_index: bool = False, jobs: int = 1,
               kill: int | None = None, temporal: str = "dev") -> None:
    async with cluster(temporal=temporal) as (wd, env, kubeconfig, kube):
        url = kube.access.server
        ns = new_namespace(kube, "bench-job")
        names = ["big"] if jobs == 1 else [f"big-{i}" for i in range(jobs)]
        with contextlib.ExitStack() as workers:
            proc = workers.enter_context(worker_process(env, kubeconfig, wd, namespace=ns, task_queue="bench-job"))
            await asyncio.sleep(3)  # informers synced
            before = audit_total(url)
            t0 = time.time()
            spec = job_spec(completions, parallelism, run_seconds, per_index)
            created = await asyncio.gather(*(asyncio.to_thread(kube.create, "Job", ns, {
                "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": n}, "spec": spec}) for n in names))
            wids = [job_workflow_id(ns, j["metadata"]["name"], j["metadata"]["uid"]) for j in created]
            waits = [asyncio.create_task(wait_result(env.client, w)) for w in wids]
            peaks: list[float] = []
            if kill is not None:
                peaks.append(await kill_after(kube, ns, names[0], kill, proc))
                proc = workers.enter_context(worker_process(env, kubeconfig, wd, namespace=ns, task_queue="bench-job"))
            results = await asyncio.gather(*waits)
            elapsed = time.time() - t0
            requests = audit_total(url) - before
            peaks.append(proc.rss_mb()[1])
        kubesim_rss = _rss_of(wd)
        pods = list(_all_pods(kube, ns))
        starts = sorted(_ts(p["status"]["startTime"]) for p in pods if p["status"].get("startTime"))
        ends = sorted(_ts(s["state"]["terminated"]["finishedAt"]) for p in pods
                      for s in p["status"].get("containerStatuses") or [] if (s.get("state") or {}).get("terminated"))
        runs, events, actions = 0, [], 0
        biggest, task_failures = (0, ""), []
        for wid in wids[:50]:  # the histories of at most 50 Jobs
            async for wf in env.client.list_workflows(f'WorkflowId = "{wid}"'):
                hist = await env.client.get_workflow_handle(wid, run_id=wf.run_id).fetch_history()
                runs += 1
                events.append(len(hist.events))
                actions += billable_actions(hist)
                for pos, ev in enumerate(hist.events):
                    if ev.ByteSize() > biggest[0]:
                        biggest = (ev.ByteSize(), ev.WhichOneof("attributes") or "")
                        (wd / "largest-event.pb").write_bytes(ev.SerializeToString())
                    if ev.HasField("workflow_task_failed_event_attributes"):
                        failed = ev.workflow_task_failed_event_attributes
                        end = hist.events[-1].WhichOneof("attributes") or ""
                        task_failures.append(f"{failed.cause}: {failed.failure.message[:200]} "
                                             f"({len(hist.events) - pos} events before the run's {end})")
        finals = [(await asyncio.to_thread(kube.get, "Job", ns, n)) for n in names]
        if any(f is None for f in finals):
            raise RuntimeError(f"a Job of {ns} is gone before its figures were read")
    final = finals[0]["status"]  # type: ignore[index]
    span_start = max(1e-3, starts[-1] - starts[0]) if starts else float("nan")
    span_end = max(1e-3, ends[-1] - ends[0]) if ends else float("nan")
    print(f"job: {jobs} Indexed Job(s), {completions} completions, parallelism {parallelism}, Pods run {run_seconds:g} s"
          + (", backoffLimitPerIndex 1, every tenth index fails once" if per_index else "")
          + (f", worker SIGKILLed after {kill} Pods succeeded" if kill is not None else ""))
    rows = [
        ("result", f"{Counter(results)} (first Job: succeeded {final.get('succeeded')}, failed {final.get('failed', 0)}, "
                   f"completedIndexes {final.get('completedIndexes')!r}, failedIndexes {final.get('failedIndexes')!r})"),
        ("time to Complete (s)", f"{elapsed:.1f}"),
        ("Pods started / finished per second", f"{len(starts) / span_start:.0f} / {len(ends) / span_end:.0f}"),
        ("Kubernetes API requests per Pod", f"{requests / max(1, len(pods)):.2f} ({requests} for {len(pods)} Pods, "
                                             f"{requests / elapsed:.0f}/s)"),
        ("Temporal actions per Pod", f"{actions / max(1, len(pods)):.3f} ({actions} in {runs} run(s))"),
        ("history events per run (max / total)", f"{max(events, default=0)} / {sum(events)}"),
        ("largest history event (KB; Temporal warns above 256)", f"{biggest[0] / 1024:.0f} ({biggest[1]})"),
        ("failed workflow tasks", f"{len(task_failures)} {sorted(set(task_failures))}"),
        ("worker peak RSS (MiB)", " then ".join(f"{p:.0f}" for p in peaks)),
        ("kubesim RSS at the end (MiB)", f"{kubesim_rss:.0f}"),
    ]
    if jobs > 1:
        took = sorted(_ts(next(c["lastTransitionTime"] for c in f["status"].get("conditions") or []  # type: ignore[index]
                               if c["type"] in ("Complete", "Failed"))) - _ts(f["metadata"]["creationTimestamp"])  # type: ignore[index]
                      for f in finals)
        rows.insert(2, ("Jobs per second; time to Complete p50 / p99 (s)",
                        f"{jobs / elapsed:.1f}; {took[len(took) // 2]:.0f} / {took[min(len(took) - 1, int(len(took) * 0.99))]:.0f}"))
    if jobs == 1:
        rows.append(("exact and clean" + (" after the kill" if kill is not None else ""),
                     _check_clean(pods, completions, final, len(range(0, completions, 10)) if per_index else 0)))
    print(table(rows))
    print(f"(logs in {wd})")


def _check_clean(pods: list[dict[str, Any]], completions: int, final: dict[str, Any], failures: int) -> str:
    """Every index succeeded once, ``failures`` failures counted, nothing left holding the finalizer
    (JOB-93's promise after a SIGKILL too)."""
    per_index = Counter(p["metadata"]["annotations"][COMPLETION_INDEX_ANNOTATION] for p in pods
                        if p["status"].get("phase") == "Succeeded")
    twice = sorted(int(i) for i, n in per_index.items() if n > 1)
    held = [p["metadata"]["name"] for p in pods if JOB_TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])]
    ok = (final.get("succeeded") == completions and final.get("completedIndexes") == f"0-{completions - 1}"
          and final.get("failed", 0) == failures and len(per_index) == completions and not twice and not held)
    return (f"{'yes' if ok else 'NO'} ({len(per_index)} indexes succeeded, {len(twice)} twice, "
            f"{final.get('failed', 0)} of {failures} failures counted, {len(held)} holding)")


def _rss_of(wd: Path) -> float:
    """kubesim's resident set size in MiB (the process that wrote the kubeconfig of ``wd``)."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if b"kubesim" in argv and str(wd / "kubeconfig").encode() in argv:
                    text = (proc / "status").read_text()
                    return int(text.split("VmRSS:")[1].split()[0]) / 1024
    return float("nan")


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
    parser.add_argument("--jobs", type=int, default=1, help="this many Jobs, created at once")
    parser.add_argument("--kill-after", type=int, default=None, help="SIGKILL the worker after this many Pods succeeded")
    parser.add_argument("--temporal", choices=TEMPORAL_SERVERS, default="dev",
                        help="the dev server, or temporal-server on PostgreSQL (bench/temporal.py)")
    a = parser.parse_args()
    run_then_exit(main(a.completions, a.parallelism, a.run_seconds, a.per_index, a.jobs, a.kill_after, a.temporal))
