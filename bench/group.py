"""bench/group: CronJobs ``* * * * *`` in one concurrency group (CJ-GROUP) — the limit held, throughput,
hand-over latency, fairness, and what the group's workflow costs.

    .venv/bin/python -m bench.group [--cronjobs 300] [--limit 10] [--run-seconds 5] [--minutes 3]

Every CronJob wants a Job each minute; the group lets ``--limit`` run at once, and the bench ends
each Job ``--run-seconds`` after it appears (it writes the ``Complete`` status itself: the Jobs
name another controller). So the group can serve ``limit × 60 / run-seconds`` Jobs a minute, and
with more CronJobs than that its queue never empties: each member keeps one waiting time, the
longest wait first. Prints (never asserts): the most Jobs seen running at once, Jobs a minute
against that capacity, the hand-over (a Job's end to the next Job's creation) p50/p99, Jobs per
CronJob (min/max), the group workflow's runs and events, and the worker's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from bench.cronjob import cronjob, watch_jobs
from bench.harness import cluster, new_namespace, percentile, run_then_exit, table, worker_process
from kube.client import Kube
from workflows.identity import group_workflow_id


class Runner:
    """Ends each Job ``run_seconds`` after its ADDED event, and keeps the figures."""

    def __init__(self, kube: Kube, ns: str, run_seconds: float) -> None:
        self.kube, self.ns, self.run_seconds = kube, ns, run_seconds
        self.lock = threading.Lock()
        self.created: dict[str, float] = {}
        self.ended: list[float] = []
        self.running = 0
        self.most = 0
        self.handover: list[float] = []

    def on_event(self, ev: dict[str, Any]) -> None:
        name = ev["object"].get("metadata", {}).get("name", "")
        if ev["type"] != "ADDED" or name in self.created:
            return
        now = time.time()
        with self.lock:
            self.created[name] = now
            self.running += 1
            self.most = max(self.most, self.running)
            if self.ended:  # a slot freed by the oldest end not yet handed over
                self.handover.append(now - self.ended.pop(0))
        threading.Timer(self.run_seconds, self.finish, args=(name,)).start()

    def finish(self, name: str) -> None:
        t = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        status = {"conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": t},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": t}],
            "startTime": t, "completionTime": t, "succeeded": 1, "active": 0}
        self.kube.patch("Job", self.ns, name, {"status": status}, subresource="status")
        with self.lock:
            self.running -= 1
            self.ended.append(time.time())


def member(name: str, limit: int) -> dict[str, Any]:
    cj = cronjob(name)
    cj["metadata"]["annotations"] = {"batchd.io/concurrency-group": "bench", "batchd.io/concurrency-limit": str(limit)}
    return cj


async def main(count: int, limit: int, run_seconds: float, minutes: int) -> None:
    async with cluster() as (wd, env, kubeconfig, kube):
        ns = new_namespace(kube, "bench-group")
        runner = Runner(kube, ns, run_seconds)
        stop = threading.Event()
        threading.Thread(target=watch_jobs, args=(kube, ns, stop, runner.on_event), daemon=True).start()
        with worker_process(env, kubeconfig, wd, namespace=ns, task_queue="bench-group") as proc:
            for i in range(count):
                kube.create("CronJob", ns, member(f"cj-{i:04d}", limit))
            await asyncio.sleep(60 - datetime.now(UTC).second + 5)  # the first whole minute begins
            start, before = time.time(), len(runner.created)
            await asyncio.sleep(minutes * 60)
            served = len(runner.created) - before
            peak = proc.rss_mb()[1]
            handle = env.client.get_workflow_handle(group_workflow_id(ns, "bench"))
            view = await handle.query("describe")
            runs = [ex async for ex in env.client.list_workflows(f'WorkflowId = "{group_workflow_id(ns, "bench")}"')]
            events = len((await handle.fetch_history()).events)
        stop.set()
    per = Counter(name.rsplit("-", 1)[0] for name in runner.created)
    elapsed = (time.time() - start) / 60
    print(f"group: {count} CronJobs '* * * * *', limit {limit}, each Job {run_seconds:g} s, {minutes} minutes")
    print(table([
        ("most Jobs running at once / limit", f"{runner.most} / {limit}"),
        ("Jobs a minute / capacity", f"{served / elapsed:.1f} / {limit * 60 / run_seconds:.0f}"),
        ("hand-over p50 / p99 / max (s)", f"{percentile(runner.handover, 50):.2f} / "
                                          f"{percentile(runner.handover, 99):.2f} / {max(runner.handover, default=0):.2f}"),
        ("Jobs per CronJob min / max (whole run)", f"{min(per.values(), default=0)} / {max(per.values(), default=0)}"),
        ("CronJobs not served yet", count - len(per)),
        ("waiting at the end", len(view["queue"])),
        ("group workflow runs / events in the current one", f"{len(runs)} / {events}"),
        ("worker peak RSS (MiB)", f"{peak:.0f}"),
    ]))
    print(f"(logs in {wd})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cronjobs", type=int, default=300)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--run-seconds", type=float, default=5.0)
    parser.add_argument("--minutes", type=int, default=3)
    a = parser.parse_args()
    run_then_exit(main(a.cronjobs, a.limit, a.run_seconds, a.minutes))
