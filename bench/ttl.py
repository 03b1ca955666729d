"""bench/ttl: TTL-after-finished throughput, latency and memory, against a ceiling.

    .venv/bin/python -m bench.ttl [--jobs 2000] [--sleepers 10000] [--temporal dev|postgres]

Prints (never asserts):
1. ceiling — a minimal workflow (one sleep, one no-op activity) × N, all waking at once, on the same
   Temporal server: completions/s;
2. burst — N finished Jobs whose TTLs expire in the same second, run by a real ``batchd worker``
   process against kubesim (separate process): deletions/s end to end, time-to-deletion p50/p99,
   worker peak RSS, Temporal actions per deletion, and the ratio ours/ceiling;
3. paced — N/2 Jobs expiring at half the ceiling rate: time-to-deletion p50/p99;
4. sleepers — M Jobs with a one-hour TTL: worker RSS once all M timers sleep, the set-up rate
   against its ceiling (how fast the Temporal server starts workflows no worker polls), and the CPU
   the Temporal server and the worker each used meanwhile.
Time-to-deletion is measured as the API shows it: the first watch event carrying the Job's
deletionTimestamp, minus finish time + TTL.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from bench.ceiling import DONE, CeilingWorkflow, SleeperCeiling, bench_noop
from bench.harness import (
    TEMPORAL_SERVERS,
    DeletionWatch,
    TemporalServer,
    billable_actions,
    cluster,
    cpu_seconds,
    new_namespace,
    percentile,
    run_then_exit,
    start_workflows,
    table,
    worker_process,
)
from kube.client import Kube
from tests.k8s import create_job, finish_job

# -- the ceiling --------------------------------------------------------------------------

async def ceiling(client: Client, n: int) -> dict[str, float]:
    tq = f"ceiling-{uuid.uuid4()}"
    DONE.clear()
    async with Worker(client, task_queue=tq, workflows=[CeilingWorkflow], activities=[bench_noop],
                      activity_executor=ThreadPoolExecutor(64), max_concurrent_activities=64):
        wake = datetime.now(UTC) + timedelta(seconds=5 + n / 200)
        await start_workflows(client, CeilingWorkflow.run, [wake], task_queue=tq, count=n)
        while len(DONE) < n:
            await asyncio.sleep(0.2)
    lat = [t - wake.timestamp() for t in DONE.values()]
    span = max(lat)
    return {"rate": n / span, "p50": percentile(lat, 50), "p99": percentile(lat, 99)}


async def setup_ceiling(client: Client, n: int) -> float:
    """Workflows the Temporal server starts per second (64 starts at a time, no worker polling them):
    the most any bridge could set up on this server, before a single workflow task runs."""
    tq = f"setup-ceiling-{uuid.uuid4()}"
    t0 = time.monotonic()
    await start_workflows(client, SleeperCeiling.run, [timedelta(hours=1)], task_queue=tq, count=n)
    return n / (time.monotonic() - t0)


# -- batchd --------------------------------------------------------------------------------

def make_finished_jobs(kube: Kube, ns: str, expiries: dict[str, datetime]) -> dict[str, datetime]:
    """Create and finish the Jobs; TTL chosen so each expires at its target (whole seconds)."""

    def one(name: str) -> tuple[str, datetime]:
        finished = datetime.now(UTC).replace(microsecond=0)
        ttl = max(0, math.ceil((expiries[name] - finished).total_seconds()))
        create_job(kube, ns, name, ttl=ttl)
        finish_job(kube, ns, name, finished)
        return name, finished + timedelta(seconds=ttl)

    with ThreadPoolExecutor(8) as pool:
        return dict(pool.map(one, expiries))


async def wait_running(client: Client, ns: str, n: int, deadline: datetime) -> int:
    q = f'K8sNamespace = "{ns}" AND ExecutionStatus = "Running"'
    count = 0
    while datetime.now(UTC) < deadline:
        count = (await client.count_workflows(q)).count
        if count >= n:
            break
        await asyncio.sleep(0.5)
    return count


async def actions_per_workflow(client: Client, ns: str, sample: int = 20) -> float:
    totals = []
    async for wf in client.list_workflows(f'K8sNamespace = "{ns}"', limit=sample):
        hist = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        totals.append(billable_actions(hist))
    return sum(totals) / len(totals) if totals else float("nan")


async def ttl_run(env: TemporalServer, kube: Kube, kubeconfig: Any, wd: Any, expiries_fn: Any, n: int,
                  label: str) -> dict[str, Any]:
    ns = new_namespace(kube, f"bench-{label}")
    tq = f"bench-{label}"
    with worker_process(env, kubeconfig, wd, namespace=ns, task_queue=tq, extra=["--ttl-scope", "all"]) as proc:
        start = datetime.now(UTC)
        first_expiry = start + timedelta(seconds=15 + n / 25)  # set-up (create, finish, start) must end first
        expiries = expiries_fn(first_expiry)
        watch = DeletionWatch(kube, "Job", ns).start()
        expire_at = await asyncio.to_thread(make_finished_jobs, kube, ns, expiries)
        running = await wait_running(env.client, ns, n, first_expiry)
        while len(watch.seen) < n and datetime.now(UTC) < max(expire_at.values()) + timedelta(seconds=120):
            await asyncio.sleep(0.2)
        watch.stop()
        _, peak = proc.rss_mb()
    lat = [(watch.seen[k] - expire_at[k]).total_seconds() for k in watch.seen]
    last = max(watch.seen.values()) if watch.seen else first_expiry
    return {
        "deleted": len(watch.seen), "running_before_expiry": running,
        "rate": len(watch.seen) / max(1e-3, (last - min(expire_at.values())).total_seconds()),
        "p50": percentile(lat, 50), "p99": percentile(lat, 99), "min": min(lat, default=float("nan")),
        "rss_peak_mb": peak, "actions": await actions_per_workflow(env.client, ns),
    }


async def sleepers(env: TemporalServer, kube: Kube, kubeconfig: Any, wd: Any, m: int,
                   worker_args: list[str]) -> dict[str, Any]:
    ns = new_namespace(kube, "bench-sleep")
    server = env.pid
    with worker_process(env, kubeconfig, wd, namespace=ns, task_queue="bench-sleepers",
                        extra=["--ttl-scope", "all", *worker_args]) as proc:
        far = datetime.now(UTC) + timedelta(hours=1)
        t0 = time.monotonic()
        cpu0 = (cpu_seconds(server), cpu_seconds(proc.proc.pid))
        await asyncio.to_thread(make_finished_jobs, kube, ns, {f"s-{i:05d}": far for i in range(m)})
        running = await wait_running(env.client, ns, m, datetime.now(UTC) + timedelta(seconds=600 + m / 20))
        elapsed = time.monotonic() - t0
        busy = [(cpu_seconds(pid) - before) / elapsed for pid, before in zip((server, proc.proc.pid), cpu0, strict=True)]
        await asyncio.sleep(5)
        cur, peak = proc.rss_mb()
    return {"running": running, "setup_s": elapsed, "rss_mb": cur, "rss_peak_mb": peak, "server_cores": busy[0],
            "worker_cores": busy[1]}


async def burst_and_paced(env: TemporalServer, kube: Kube, kubeconfig: Any, wd: Any, jobs: int) -> None:
    ceil = await ceiling(env.client, jobs)
    print(f"ceiling: {jobs} minimal workflows waking at once", flush=True)
    print(table([("completions/s", f"{ceil['rate']:.0f}"), ("p50 / p99 lateness (s)",
                                                             f"{ceil['p50']:.2f} / {ceil['p99']:.2f}")]))
    burst = await ttl_run(env, kube, kubeconfig, wd, lambda t0: {f"j-{i:05d}": t0 for i in range(jobs)},
                          jobs, "burst")
    print(f"burst: {jobs} Jobs expiring in the same second", flush=True)
    print(table([
        ("deleted", f"{burst['deleted']} (workflows running before expiry: {burst['running_before_expiry']})"),
        ("deletions/s end to end", f"{burst['rate']:.0f}"),
        ("ratio ours / ceiling", f"{burst['rate'] / ceil['rate']:.2f}"),
        ("time-to-deletion p50 / p99 (s)", f"{burst['p50']:.2f} / {burst['p99']:.2f}"),
        ("earliest deletion vs expiry (s)", f"{burst['min']:+.2f}"),
        ("worker peak RSS (MiB)", f"{burst['rss_peak_mb']:.0f}"),
        ("Temporal actions per deletion", f"{burst['actions']:.1f}"),
    ]))
    half = max(1, int(ceil["rate"] / 2))
    paced_n = jobs // 2
    paced = await ttl_run(
        env, kube, kubeconfig, wd,
        lambda t0: {f"p-{i:05d}": t0 + timedelta(seconds=i // half) for i in range(paced_n)}, paced_n, "paced")
    print(f"paced: {paced_n} Jobs expiring at {half}/s (half the ceiling)", flush=True)
    print(table([("deleted", paced["deleted"]),
                 ("time-to-deletion p50 / p99 (s)", f"{paced['p50']:.2f} / {paced['p99']:.2f}")]))


async def main(jobs: int, sleeper_count: int, worker_args: list[str], temporal: str = "dev") -> None:
    async with cluster(temporal=temporal) as (wd, env, kubeconfig, kube):
        if jobs:
            await burst_and_paced(env, kube, kubeconfig, wd, jobs)
        if sleeper_count:
            sample = min(sleeper_count, 5000)
            limit = await setup_ceiling(env.client, sample)
            print(f"set-up ceiling: the {env.kind} server starts {limit:.0f} workflows/s ({sample}, no worker)", flush=True)
            s = await sleepers(env, kube, kubeconfig, wd, sleeper_count, worker_args)
            rate = s["running"] / s["setup_s"]
            print(f"sleepers: {sleeper_count} Jobs with a one-hour TTL", flush=True)
            print(table([("TTL workflows running", s["running"]), ("set-up (s)", f"{s['setup_s']:.0f}"),
                         ("set-up rate (workflows/s), ratio to the ceiling", f"{rate:.0f}, {rate / limit:.2f}"),
                         ("CPU during set-up, cores: Temporal server / worker",
                          f"{s['server_cores']:.2f} / {s['worker_cores']:.2f}"),
                         ("worker RSS now / peak (MiB)", f"{s['rss_mb']:.0f} / {s['rss_peak_mb']:.0f}")]))
    print(f"(logs in {wd})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000, help="0: the sleepers only")
    parser.add_argument("--sleepers", type=int, default=10000)
    parser.add_argument("--max-cached-workflows", type=int, default=None,
                        help="passed to the sleepers' worker (default: the worker's own)")
    parser.add_argument("--temporal", choices=TEMPORAL_SERVERS, default="dev",
                        help="the dev server, or temporal-server on PostgreSQL (bench/temporal.py)")
    a = parser.parse_args()
    extra = [] if a.max_cached_workflows is None else ["--max-cached-workflows", str(a.max_cached_workflows)]
    run_then_exit(main(a.jobs, a.sleepers, extra, a.temporal))
