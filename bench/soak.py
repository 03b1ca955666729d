"""bench/soak: 2,000 CronJobs ``* * * * *`` and 10,000 sleeping TTL timers for 30 minutes — does the
worker stay flat?

    .venv/bin/python -m bench.soak [--cronjobs 2000] [--sleepers 10000] [--minutes 30] [--sample 20]
                                   [--settle 2] [--replicas 1] [--server-nice N] [--history-limit N]
                                   [--dynamic-config KEY=VALUE …] [--temporal dev|postgres]
                                   [--tracemalloc | --mallinfo] [--heaptrack] [-- worker flags…]

One ``batchd worker`` process against kubesim and a Temporal server (the dev server, or with
``--temporal postgres`` temporal-server on PostgreSQL, bench/temporal.py; ``--replicas N``: N of them on one
task queue and one Lease, as the manifests run two; each one's RSS is printed, and the first is
the one ``--tracemalloc``, ``--mallinfo`` and ``--heaptrack`` look into). The bench plays the Job controller
by hand: each Job the CronJobs create is marked Complete a second after it appears (``Finisher``;
each minute's row says how many still wait), so each CronJob keeps its three newest Jobs (the
history limit) and its state stays the size it has in a cluster. Measuring starts ``--settle`` minutes after every workflow runs (the set-up's own
bursts done). The worker runs with ``--max-cached-workflows 2500 --sticky-wait 60s`` (2,000
CronJobs on one minute need a cache larger than they are, docs/benchmarks.md) unless other worker
flags follow ``--``. Prints (never asserts), every minute: the worker's RSS, the Jobs of that minute's schedule
time and their creation skew (first watch event minus the scheduled time), and how many of the
creations the workers themselves recorded in that minute were more than 1 s late (their
``cronjob_controller_cronjob_job_creation_skew_duration_seconds``, scraped from each /metrics): the
skew as made, apart from the watch that shows it to the bench. At the end: the RSS
slope over the last 10 minutes (MiB per minute, least squares), the CPU each worker and the Temporal
server (and PostgreSQL) spent per Job made in the measured minutes, and for ``--sample`` CronJobs the
history events of their current run and the Temporal actions per Job their runs cost so far.

``--server-nice N``: the Temporal server runs at nice N, so that the workers and kubesim get the cores
first when both want them, as they would with the Temporal server on machines of its own; it still
gets every cycle they leave.

``--history-limit N``: the CronJobs' ``successfulJobsHistoryLimit``. With the default of 3 each
CronJob deletes one Job a minute from its fourth minute on (a DELETE, a SuccessfulDelete Event and
a watch event for every worker); 10 keeps those deletes out of a run of up to 8 measured minutes.

``--dynamic-config KEY=VALUE`` (repeatable): a dynamic config value of the Temporal server, beside
the ones every bench sets (bench/harness.py), e.g. ``matching.numTaskqueueReadPartitions=1``.

``--tracemalloc``: the worker traces its Python allocations (bench/memsite/sitecustomize.py) and,
each minute, writes the source lines whose allocations grew most; the bench prints the traced
total beside the RSS, so Python's share of the growth shows apart from the native one (the SDK's
Rust core, the allocator).

``--mallinfo``: each minute the worker writes glibc's ``mallinfo2`` (the same sitecustomize), and the
bench prints the heap's bytes in use and free beside the RSS: memory batchd and the SDK hold apart
from the allocator's holes. It costs the worker nothing between samples.

``--heaptrack``: after the first measured minute, heaptrack (Debian's ``heaptrack``, with gdb) attaches
to the worker and records every native allocation until the worker stops. Allocations made before it
attached are not seen, so its peak consumers are what the worker allocated during the soak and still
held at its peak: where the growth is. ``heaptrack_print -f FILE --print-peaks 1`` reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.cronjob import cronjob, watch_jobs
from bench.harness import (
    TEMPORAL_SERVERS,
    billable_actions,
    cluster,
    cpu_seconds,
    histogram_buckets,
    new_namespace,
    percentile,
    renice,
    role_cpu_seconds,
    run_then_exit,
    table,
    worker_processes,
)
from bench.ttl import make_finished_jobs, wait_running
from tests.k8s import finish_job
from workflows.identity import cronjob_workflow_id


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points; nan for fewer than two."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else float("nan")


async def cronjob_costs(client: Client, ns: str, names: list[str], jobs: int) -> tuple[float, float]:
    """Mean history events of the current run of ``names``, and the actions of all their runs so far
    per Job they created (``jobs``)."""
    events, actions = [], 0
    for name in names:
        wid = cronjob_workflow_id(ns, name)
        async for run in client.list_workflows(f'WorkflowId = "{wid}"'):
            hist = await client.get_workflow_handle(wid, run_id=run.run_id).fetch_history()
            actions += billable_actions(hist)
            if run.status is not None and run.status.name == "RUNNING":
                events.append(len(hist.events))
    return (sum(events) / len(events) if events else float("nan")), actions / max(1, jobs)


async def main(count: int, sleepers: int, minutes: int, sample: int, settle: int, worker_args: list[str],
               trace: bool = False, heaptrack: bool = False, replicas: int = 1, mallinfo: bool = False,
               server_nice: int = 0, history_limit: int | None = None, dynamic_config: list[str] | None = None,
               temporal: str = "dev") -> None:
    async with cluster(dynamic_config, temporal) as (wd, env, kubeconfig, kube):
        if server_nice:
            renice(env.pid, server_nice)
        if trace or mallinfo:  # read by the worker's interpreter as it starts (bench/memsite/sitecustomize.py)
            site = str(Path(__file__).parent / "memsite")
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH")) if p)
            os.environ["BATCHD_TRACEMALLOC_DIR" if trace else "BATCHD_MALLINFO_DIR"] = str(wd)
        ns = new_namespace(kube, "bench-soak")
        seen: dict[str, float] = {}
        scheduled: dict[str, datetime] = {}
        stop = threading.Event()
        finisher = Finisher(kube, ns)

        def added(ev: dict[str, Any]) -> None:
            meta = ev["object"].get("metadata", {})
            stamp = (meta.get("annotations") or {}).get("batch.kubernetes.io/cronjob-scheduled-timestamp")
            if ev["type"] == "ADDED" and stamp and meta["name"] not in seen:
                seen[meta["name"]] = time.time()
                scheduled[meta["name"]] = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                finisher.add(meta["name"])

        threading.Thread(target=watch_jobs, args=(kube, ns, stop, added), daemon=True).start()
        with worker_processes(replicas, env, kubeconfig, wd, namespace=ns, task_queue="bench-soak",
                              extra=["--ttl-scope", "all", *worker_args]) as procs:
            proc = procs[0]  # the one traced
            far = datetime.now(UTC) + timedelta(hours=3)
            await asyncio.to_thread(make_finished_jobs, kube, ns, {f"sleep-{i:05d}": far for i in range(sleepers)})
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: kube.create("CronJob", ns, cronjob(f"cj-{i:04d}", history_limit)),
                              range(count)))
            await wait_running(env.client, ns, count + sleepers, datetime.now(UTC) + timedelta(minutes=15))
            start = (datetime.now(UTC) + timedelta(minutes=1 + settle)).replace(second=0, microsecond=0)
            rss: list[list[tuple[float, float]]] = [[] for _ in procs]
            created_skew = SkewScrape([p.port for p in procs if p.port])
            await asyncio.sleep(max(0.0, (start - timedelta(seconds=10) - datetime.now(UTC)).total_seconds()))
            created_skew.minute()
            pids = [p.proc.pid for p in procs]
            cpu, server_cpu = [cpu_seconds(pid) for pid in pids], role_cpu_seconds(env.roles())
            rows = []
            for minute in range(minutes):
                due = start + timedelta(minutes=minute)
                await asyncio.sleep(max(0.0, (due + timedelta(seconds=50) - datetime.now(UTC)).total_seconds()))
                now = [p.rss_mb()[0] for p in procs]
                for series, cur in zip(rss, now, strict=True):
                    series.append((minute, cur))
                if trace or mallinfo:
                    os.kill(proc.proc.pid, signal.SIGUSR1)
                if heaptrack and minute == 0:
                    # attached, it names its file itself (heaptrack.batchd.<pid>.zst) in its working directory
                    recorder = subprocess.Popen(["heaptrack", "-p", str(proc.proc.pid)], cwd=wd,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
                skews = [seen[k] - due.timestamp() for k, t in list(scheduled.items()) if t == due]
                created, over = created_skew.minute()
                rows.append((f"  {due:%H:%M}: RSS MiB, Jobs, skew p50 / p99 / max (s), to finish, workers' count > 1 s",
                             f"{' / '.join(f'{c:.0f}' for c in now)}, {len(skews)}, {percentile(skews, 50):.2f} / {percentile(skews, 99):.2f} / "
                             f"{max(skews, default=float('nan')):.2f}, {finisher.backlog()}, {over:.0f} of {created:.0f}"))
                if mallinfo:
                    await asyncio.sleep(2)  # the worker writes it between two bytecodes of its main thread
                    f = wd / f"mallinfo-{minute + 1}.txt"
                    rows.append(("    the worker's heap", f.read_text().splitlines()[0] if f.exists() else "no sample"))
                print(*(f"{a.strip()} {b}" for a, b in rows[-1 - mallinfo:]), sep="\n", flush=True)
            cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu, strict=True)]
            cpu += [now - server_cpu.get(role, 0.0) for role, now in role_cpu_seconds(env.roles()).items()]
            servers = list(env.roles())
            peaks = [p.rss_mb()[1] for p in procs]
            names = [f"cj-{i:04d}" for i in range(0, count, max(1, count // sample))][:sample]
            made = sum(1 for k in list(seen) if k.rsplit("-", 1)[0] in set(names))
            events, actions = await cronjob_costs(env.client, ns, names, made)
        stop.set()
        if heaptrack:
            recorder.wait(timeout=600)  # it writes its last data as the worker exits
        finisher.stop()
    end = start + timedelta(minutes=minutes)  # Jobs of the times after it, made while the bench wound up, are not counted
    every = [seen[k] - t.timestamp() for k, t in scheduled.items() if start <= t < end]
    print(f"soak: {count} CronJobs '* * * * *' and {sleepers} sleeping TTL timers, {minutes} minutes from "
          f"{start:%H:%M} UTC, {'one worker' if replicas == 1 else f'{replicas} workers'}"
          f"{f', the Temporal server at nice {server_nice}' if server_nice else ''}")
    print(table([
        *rows,
        ("Jobs created / expected", f"{len(every)} / {count * minutes}"),
        ("Jobs the bench marked Complete / PATCHes failed, all minutes", f"{finisher.finished} / {finisher.failed}"),
        ("skew p50 / p99 / max (s), all minutes",
         f"{percentile(every, 50):.2f} / {percentile(every, 99):.2f} / {max(every, default=float('nan')):.2f}"),
        ("RSS slope over the last 10 minutes (MiB/min)", " / ".join(f"{slope(r[-10:]):+.2f}" for r in rss)),
        ("worker peak RSS (MiB)", " / ".join(f"{p:.0f}" for p in peaks)),
        (f"CPU ms per Job made: each worker / {' / '.join(servers)}",
         " / ".join(f"{1000 * c / max(1, len(every)):.1f}" for c in cpu)),
        (f"history events of a CronJob's current run (mean of {len(names)})", f"{events:.0f}"),
        ("Temporal actions per Job, CronJob workflow", f"{actions:.1f}"),
    ]))
    if trace:
        for i in range(1, minutes + 1):
            f = wd / f"tracemalloc-{i}.txt"
            print(f"  minute {i}: {f.read_text().splitlines()[0] if f.exists() else 'no dump'}")
        print(f"(the lines that grew most each minute: {wd}/tracemalloc-N.txt)")
    if heaptrack:
        print(f"(native allocations: heaptrack_print -f {wd}/heaptrack.*.zst --print-peaks 1)")
    print(f"(logs in {wd})")


class SkewScrape:
    """The skew the workers record as they create (CJ-38's histogram), minute by minute.

    The bench's own skew is when its watch saw each Job; the workers' is when the API server
    answered their create. The difference is kubesim's watch and the bench's own process, both on
    the same two cores: a minute whose watch skew is bad and whose creation skew is not was late
    in being seen, not in being made.
    """

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.last: dict[float, float] = {}

    def minute(self) -> tuple[float, float]:
        """Creations since the last call, and how many of them were more than 1 s after their time."""
        now: dict[float, float] = {}
        for port in self.ports:
            for le, n in histogram_buckets(port, "cronjob_controller_cronjob_job_creation_skew_duration_seconds").items():
                now[le] = now.get(le, 0.0) + n
        delta = {le: n - self.last.get(le, 0.0) for le, n in now.items()}
        self.last = now
        return delta.get(float("inf"), 0.0), delta.get(float("inf"), 0.0) - delta.get(1.0, 0.0)


class Finisher:
    """Plays the Job controller: marks each Job Complete a second after it appeared, in order.

    It must keep up with 2,000 Jobs a minute. Until 2026-11-27 a pool of four threads that each
    slept its second before a PATCH finished at most 240 a minute; the rest stayed Running, so each
    CronJob's ``status.active`` and every informer grew by the minute and the soak's memory
    figures measured that. So it counts what it finished, and the bench prints it beside the Jobs made.
    """

    DELAY = 1.0

    def __init__(self, kube: Any, ns: str, threads: int = 8) -> None:
        self.kube, self.ns = kube, ns
        self.queue: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self.finished = self.failed = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self._threads:
            t.start()

    def add(self, name: str) -> None:
        self.queue.put((time.monotonic() + self.DELAY, name))

    def backlog(self) -> int:
        return self.queue.qsize()

    def stop(self) -> None:
        for _ in self._threads:
            self.queue.put(None)

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            due, name = item
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                finish_job(self.kube, self.ns, name, datetime.now(UTC).replace(microsecond=0))
                ok = True
            except Exception:  # deleted by a history limit first, or kubesim busy: counted, not retried
                ok = False
            with self._lock:
                self.finished += ok
                self.failed += not ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cronjobs", type=int, default=2000)
    parser.add_argument("--sleepers", type=int, default=10000)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--settle", type=int, default=2, help="minutes between the set-up and the first measured")
    parser.add_argument("--tracemalloc", action="store_true", help="trace the worker's Python allocations")
    parser.add_argument("--mallinfo", action="store_true", help="sample the worker's malloc heap each minute")
    parser.add_argument("--heaptrack", action="store_true", help="record the worker's native allocations")
    parser.add_argument("--replicas", type=int, default=1, help="worker processes on the task queue (one Lease)")
    parser.add_argument("--server-nice", type=int, default=0,
                        help="the Temporal server's nice value: in a cluster it does not share the workers' cores")
    parser.add_argument("--history-limit", type=int, default=None,
                        help="the CronJobs' successfulJobsHistoryLimit (default 3: from the fourth minute each "
                             "CronJob deletes a Job a minute)")
    parser.add_argument("--dynamic-config", action="append", metavar="KEY=VALUE",
                        help="a dynamic config value of the Temporal server (repeatable)")
    parser.add_argument("--temporal", choices=TEMPORAL_SERVERS, default="dev",
                        help="the dev server, or temporal-server on PostgreSQL (bench/temporal.py)")
    parser.add_argument("worker", nargs="*", help="worker flags, after --")
    a = parser.parse_args()
    run_then_exit(main(a.cronjobs, a.sleepers, a.minutes, a.sample, a.settle,
                     a.worker or ["--max-cached-workflows", "2500", "--sticky-wait", "60s"], a.tracemalloc, a.heaptrack, a.replicas,
                     a.mallinfo, a.server_nice, a.history_limit, a.dynamic_config, a.temporal))
