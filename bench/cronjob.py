"""bench/cronjob: 500 CronJobs ``* * * * *`` over 3 minutes — creation skew, completeness, memory.

    .venv/bin/python -m bench.cronjob [--cronjobs 500] [--minutes 3] [--cronjob-lead S] [--max-cached-workflows N]
                                      [--sticky-wait D] [--replicas N]
                                      [--temporal dev|postgres]
                                      [--ceiling]

Prints (never asserts): Jobs created vs expected (and duplicates), creation skew p50/p99/max
(the first watch event of each Job minus its scheduled time), worker peak RSS. The created Jobs
name another controller in ``spec.managedBy`` so nothing runs them: this measures scheduling only.
``--cronjob-lead``, ``--max-cached-workflows`` and ``--sticky-wait`` are passed to the worker
(default: its own). ``--replicas N`` runs N workers on the task queue (one holds the Lease and
runs the bridge; all take workflow and activity tasks) and prints each one's peak RSS.

``--ceiling`` first runs as many ``MinuteCeiling`` workflows (bench/ceiling.py: a timer to the
lead, then an activity that waits for the minute; no Kubernetes) on the same Temporal server for the
same number of minutes, their worker in its own process, and prints their skew and that worker's
peak RSS: what the server allows, and what the SDK itself holds for as many cached workflows. Then it
creates as many Jobs at one instant through kubesim from a light raw-HTTP client (16 keep-alive
connections, as bench/kubesim_bench.py), with two watches open as in the measured run (the
worker's informer and the bench's), and prints when each creation was answered: what the API
server allows the same burst.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.ceiling import MinuteCeiling
from bench.harness import (
    TEMPORAL_SERVERS,
    Process,
    cluster,
    new_namespace,
    percentile,
    run_then_exit,
    start_workflows,
    table,
    worker_processes,
)
from bench.kubesim_bench import raw_request, read_response
from kube.client import Kube
from worker.bridge import BridgeSettings
from workflows.identity import cronjob_workflow_id

#: A Job seen this many seconds after its time is printed with its workflow's events around the time.
LATE = 5.0


def cronjob(name: str, history_limit: int | None = None) -> dict[str, Any]:
    """An every-minute CronJob whose Jobs no controller runs; ``history_limit``: its
    ``successfulJobsHistoryLimit`` (None: the API server's default, 3)."""
    spec: dict[str, Any] = {"schedule": "* * * * *", "jobTemplate": {"spec": {
        "managedBy": "bench.batchd.io/nobody",
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}
    if history_limit is not None:
        spec["successfulJobsHistoryLimit"] = history_limit
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "labels": {"batchd.io/managed": "true"}}, "spec": spec}


def window(minutes: int) -> tuple[datetime, datetime]:
    """The measured schedule times: the first leaves the set-up's first passes (and an armed
    creation's 30 s lead) 105 s to settle."""
    first = (datetime.now(UTC) + timedelta(seconds=105)).replace(second=0, microsecond=0)
    return first, first + timedelta(minutes=minutes - 1)


def skew_rows(skews: dict[datetime, list[float]]) -> list[tuple[str, str]]:
    every = [s for v in skews.values() for s in v]
    return [
        *((f"  {t:%H:%M}: runs, skew p50 / p99 / max (s)",
           f"{len(v)}, {percentile(v, 50):.2f} / {percentile(v, 99):.2f} / {max(v):.2f}")
          for t, v in sorted(skews.items())),
        ("skew p50 / p99 / max (s)",
         f"{percentile(every, 50):.2f} / {percentile(every, 99):.2f} / {max(every, default=float('nan')):.2f}"),
    ]


async def ceiling(client: Client, wd: Path, count: int, minutes: int, lead: float) -> None:
    """``count`` MinuteCeiling workflows for ``minutes``, their worker in its own process (bench/ceiling.py)."""
    tq = f"minute-ceiling-{uuid.uuid4()}"
    first, last = window(minutes)
    out = wd / "minute-ceiling.json"
    seconds = (last - datetime.now(UTC)).total_seconds() + 30
    log = wd / "minute-ceiling.log"
    with open(log, "wb") as written:
        proc = Process(subprocess.Popen([sys.executable, "-m", "bench.ceiling", client.service_client.config.target_host,
                                         tq, str(count), str(seconds), str(out)], stdout=written,
                                        stderr=subprocess.STDOUT), log)
    peak = float("nan")
    try:
        await start_workflows(client, MinuteCeiling.run, [last, timedelta(seconds=lead)], task_queue=tq, count=count)
        while proc.proc.poll() is None:
            with contextlib.suppress(OSError, RuntimeError):  # it may exit between the check and the read
                peak = proc.rss_mb()[1]
            await asyncio.sleep(1)
    finally:
        proc.stop()
    skews: dict[datetime, list[float]] = {}
    for _, due, at in json.loads(out.read_text()):
        if first <= (t := datetime.fromisoformat(due)) <= last:
            skews.setdefault(t, []).append(at - t.timestamp())
    print(f"ceiling: {count} MinuteCeiling workflows, lead {lead:g} s, {minutes} minutes, worker in its own process")
    print(table([("runs / expected", f"{sum(map(len, skews.values()))} / {count * minutes}"), *skew_rows(skews),
                 ("worker peak RSS (MiB)", f"{peak:.0f}")]))


async def events_around(client: Client, workflow_id: str, due: datetime) -> str:
    """The events of every run of ``workflow_id`` from 70 s before ``due`` to 30 s after, one line each."""
    rows = []
    async for run in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        async for ev in client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history_events():
            at = ev.event_time.ToDatetime(UTC)
            if -70 <= (offset := (at - due).total_seconds()) <= 30:
                started = ev.activity_task_started_event_attributes
                extra = f" attempt {started.attempt} by {started.identity}" if ev.HasField(
                    "activity_task_started_event_attributes") else ""
                rows.append((at, f"  {offset:+7.2f} s  run {run.run_id[:8]}  {ev.event_id:4d} "
                                 f"{EventType.Name(ev.event_type)}{extra}"))
    return "\n".join(row for _, row in sorted(rows))


def watch_jobs(kube: Kube, ns: str, stop: threading.Event,
               on_event: Callable[[dict[str, Any]], None] = lambda ev: None) -> None:
    """Follow the Jobs of ``ns`` until ``stop``, resuming from the last version seen."""
    rv = kube.list("Job", ns, limit=1)["metadata"]["resourceVersion"]
    while not stop.is_set():
        with contextlib.suppress(Exception):
            for ev in kube.watch("Job", ns, resource_version=rv, timeout_seconds=10):
                rv = ev["object"].get("metadata", {}).get("resourceVersion", rv)
                on_event(ev)


async def creation_ceiling(kube: Kube, ns: str, count: int, connections: int = 16) -> list[float]:
    """Seconds from one instant to the answer of each of ``count`` Job creations that succeeded (the Jobs the bench's
    CronJobs make, in their own namespace), sent over ``connections`` raw keep-alive connections."""
    body = cronjob("")["spec"]["jobTemplate"]["spec"]
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    requests = [raw_request("POST", path, json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"ceiling-{i:05d}"}, "spec": body}).encode())
        for i in range(count)]
    host, port = kube.endpoint.host, kube.endpoint.port
    done: list[float] = []
    stop = threading.Event()

    async def connection(chunk: list[bytes], at: float) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        await asyncio.sleep(at - time.time())
        for req in chunk:
            writer.write(req)
            if await read_response(reader) < 300:
                done.append(time.time() - at)
        writer.close()

    for _ in range(2):
        threading.Thread(target=watch_jobs, args=(kube, ns, stop), daemon=True).start()
    at = time.time() + 1
    await asyncio.gather(*(connection(requests[i::connections], at) for i in range(connections)))
    stop.set()
    return done


async def main(count: int, minutes: int, worker_args: list[str], with_ceiling: bool = False, lead: float = 30,
               replicas: int = 1, temporal: str = "dev") -> None:
    async with cluster(temporal=temporal) as (wd, env, kubeconfig, kube):
        if with_ceiling:
            await ceiling(env.client, wd, count, minutes, lead)
            answered = await creation_ceiling(kube, new_namespace(kube, "bench-ceiling"), count)
            print(f"ceiling: {count} Job creations at one instant through kubesim, 16 raw connections")
            print(table([("created / sent", f"{len(answered)} / {count}"), (
                "answered after p50 / p99 / max (s)",
                f"{percentile(answered, 50):.2f} / {percentile(answered, 99):.2f} / {max(answered):.2f}")]))
        ns = new_namespace(kube, "bench-cron")
        seen: dict[str, float] = {}
        scheduled: dict[str, datetime] = {}
        stop = threading.Event()

        def added(ev: dict[str, Any]) -> None:
            meta = ev["object"].get("metadata", {})
            if ev["type"] == "ADDED" and meta["name"] not in seen:
                seen[meta["name"]] = time.time()
                stamp = meta["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
                scheduled[meta["name"]] = datetime.fromisoformat(stamp.replace("Z", "+00:00"))

        threading.Thread(target=watch_jobs, args=(kube, ns, stop, added), daemon=True).start()
        with worker_processes(replicas, env, kubeconfig, wd, namespace=ns, task_queue="bench-cron",
                              extra=worker_args) as procs:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: kube.create("CronJob", ns, cronjob(f"cj-{i:04d}")), range(count)))
            q = f'K8sNamespace = "{ns}" AND WorkflowType = "CronJob" AND ExecutionStatus = "Running"'
            while (await env.client.count_workflows(q)).count < count:
                await asyncio.sleep(0.5)
            first, last = window(minutes)
            await asyncio.sleep((last - datetime.now(UTC)).total_seconds() + 30)
            peaks = [proc.rss_mb()[1] for proc in procs]
        stop.set()
        late = sorted(((seen[k] - t.timestamp(), k, t) for k, t in scheduled.items()
                       if first <= t <= last and seen[k] - t.timestamp() > LATE), reverse=True)
        for skew, job, due in late[:3]:
            print(f"late: Job {job} seen {skew:.2f} s after {due:%H:%M:%S}; its workflow's events from 70 s before:")
            print(await events_around(env.client, cronjob_workflow_id(ns, job.rsplit("-", 1)[0]), due))
    measured = {k: v for k, v in scheduled.items() if first <= v <= last}
    expected = count * minutes
    per_minute: dict[datetime, list[float]] = {}
    for k, t in measured.items():
        per_minute.setdefault(t, []).append(seen[k] - t.timestamp())
    print(f"cronjob: {count} CronJobs '* * * * *', {minutes} schedule times ({first:%H:%M}–{last:%H:%M} UTC)"
          f"{' worker ' + ' '.join(worker_args) if worker_args else ''}")
    print(table([
        ("Jobs created / expected", f"{len(measured)} / {expected}"),
        *skew_rows(per_minute),
        ("worker peak RSS (MiB)" if replicas == 1 else f"peak RSS of each of {replicas} workers (MiB)",
         ", ".join(f"{peak:.0f}" for peak in peaks)),
    ]))
    print(f"(logs in {wd})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cronjobs", type=int, default=500)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--cronjob-lead", type=float, default=None)
    parser.add_argument("--max-cached-workflows", type=int, default=None)
    parser.add_argument("--sticky-wait", default=None, help="e.g. 60s")
    parser.add_argument("--ceiling", action="store_true", help="first the same number of MinuteCeiling workflows")
    parser.add_argument("--replicas", type=int, default=1, help="worker processes on the task queue (one Lease)")
    parser.add_argument("--temporal", choices=TEMPORAL_SERVERS, default="dev",
                        help="the dev server, or temporal-server on PostgreSQL (bench/temporal.py)")
    a = parser.parse_args()
    extra = [] if a.cronjob_lead is None else ["--cronjob-lead", str(a.cronjob_lead)]
    extra += [] if a.max_cached_workflows is None else ["--max-cached-workflows", str(a.max_cached_workflows)]
    extra += [] if a.sticky_wait is None else ["--sticky-wait", a.sticky_wait]
    lead = BridgeSettings.cronjob_lead if a.cronjob_lead is None else a.cronjob_lead  # the worker's default
    run_then_exit(main(a.cronjobs, a.minutes, extra, a.ceiling, lead, a.replicas, a.temporal))
