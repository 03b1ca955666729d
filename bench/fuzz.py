"""bench/fuzz: random valid specs thrown at a worker; prints what got stuck (never asserts).

    .venv/bin/python -m bench.fuzz [--seconds 180] [--seed 1] [--rate 20]
    .venv/bin/python -m bench.fuzz --annotations [--seconds 180] [--seed 1]

``--annotations`` runs tests/annotation_fuzz.py's worlds instead (every batchd.io annotation, valid
and invalid, changed while the objects run; FAIL-CLOSED), 14 more every 20 s, and prints the
cases, the counts and every invariant broken.

A ``batchd worker --ttl-scope all --cronjob-selector ''`` runs against kubesim and the dev server
(which marks a workflow failing its tasks after 2 failures). For ``--seconds`` the fuzzer
creates, patches and deletes Jobs, CronJobs and TTL-labelled Pods whose fields are drawn at the
edges of what the API accepts: int32 and int64 extremes, every schedule form, zones, sub-minute
``@every``, huge Pod TTL labels, finish times far in the past or future. kubesim refuses what a
real API server refuses (counted as rejected). Then, after a settling period, it prints:

* workflows with the ``TemporalReportedProblems`` search attribute (stuck on failing tasks);
* ERROR lines in the worker's log;
* the worker's CPU use while idle after the burst (a retry storm shows here) and its peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import time
import uuid
import zoneinfo
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from bench.harness import (
    cluster,
    cpu_seconds,
    new_namespace,
    run_then_exit,
    table,
    worker_process,
)
from kube.client import Kube
from kube.errors import KubeError
from tests.annotation_fuzz import AnnotationFuzz
from tests.k8s import finish_job, job_manifest, pod_manifest
from workflows.models.job import JOB_MANAGED_BY

INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
ZONES = sorted(zoneinfo.available_timezones())
SCHEDULES = ["* * * * *", "*/1 * * * *", "@every 1s", "@every 7s", "@every 45s", "@every 2562047h",
             "0 0 31 2 *", "0 0 29 2 *", "59 23 31 12 *", "@hourly", "TZ=Asia/Kolkata */2 * * * *",
             "0-59/7 0-23 1-31 jan-dec sun-sat", "@every 500ms"]


def edge_int(rng: random.Random, high: int) -> int:
    return rng.choice([0, 1, 2, 59, 60, 3600, high - 1, high, rng.randint(0, high)])


def random_job(rng: random.Random, name: str) -> dict[str, Any]:
    body = job_manifest(name, ttl=edge_int(rng, INT32_MAX) if rng.random() < 0.8 else None,
                        managed_by=rng.choice([JOB_MANAGED_BY, "example.com/by-hand"]))
    spec = body["spec"]
    if rng.random() < 0.5:
        spec["activeDeadlineSeconds"] = max(1, edge_int(rng, INT64_MAX))
    if rng.random() < 0.5:
        spec["backoffLimit"] = edge_int(rng, INT32_MAX)
    if rng.random() < 0.4:
        spec["completionMode"] = "Indexed"
        spec["completions"] = rng.randint(1, 4)
    spec["parallelism"] = rng.randint(0, 3)
    spec["template"]["metadata"]["annotations"] = {"kubesim.batchd.io/run-seconds": str(rng.choice([0.1, 1, 5])),
                                                   "kubesim.batchd.io/exit-code": str(rng.choice([0, 0, 1, 255]))}
    return body


def random_cronjob(rng: random.Random, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedule": rng.choice(SCHEDULES),
        "concurrencyPolicy": rng.choice(["Allow", "Forbid", "Replace"]),
        "suspend": rng.random() < 0.2,
        "jobTemplate": {"spec": job_manifest(name, managed_by="example.com/by-hand")["spec"]},
    }
    if rng.random() < 0.5:
        spec["startingDeadlineSeconds"] = edge_int(rng, INT64_MAX)
    if rng.random() < 0.5:
        spec["timeZone"] = rng.choice(ZONES)
    if rng.random() < 0.3:
        spec["successfulJobsHistoryLimit"] = edge_int(rng, INT32_MAX)
    annotations = {"batchd.io/jitter-percent": rng.choice(["0", "50", "51", "-1", "x", str(INT64_MAX)])} \
        if rng.random() < 0.3 else {}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "annotations": annotations},
            "spec": spec}


def random_pod(rng: random.Random, name: str) -> dict[str, Any]:
    label = rng.choice(["0", "1", "9" * 63, "1000000000000", str(INT64_MAX), str(INT64_MAX + 1), "30"])
    return pod_manifest(name, ttl_label=label, run_seconds=rng.choice([0.1, 1]),
                        restart_policy=rng.choice(["Never", "OnFailure", "Always"]))


class Fuzzer:
    def __init__(self, kube: Kube, namespace: str, rng: random.Random) -> None:
        self.kube, self.ns, self.rng = kube, namespace, rng
        self.names: dict[str, list[str]] = {"Job": [], "CronJob": [], "Pod": []}
        self.counts = {"created": 0, "rejected": 0, "patched": 0, "deleted": 0, "finished": 0}

    def step(self) -> None:
        kind = self.rng.choice(["Job", "CronJob", "Pod"])
        action = self.rng.random()
        try:
            if action < 0.6 or not self.names[kind]:
                name = f"{kind.lower()}-{uuid.uuid4().hex[:8]}"
                body = {"Job": random_job, "CronJob": random_cronjob, "Pod": random_pod}[kind](self.rng, name)
                self.kube.create(kind, self.ns, body)
                self.names[kind].append(name)
                self.counts["created"] += 1
            elif action < 0.75 and kind == "Job":
                when = self.rng.choice([datetime.now(UTC), datetime(9990, 1, 1, tzinfo=UTC),
                                        datetime(1971, 1, 1, tzinfo=UTC)])
                finish_job(self.kube, self.ns, self.rng.choice(self.names["Job"]), when,
                           failed=self.rng.random() < 0.3)
                self.counts["finished"] += 1
            elif action < 0.9:
                name = self.rng.choice(self.names[kind])
                patch: dict[str, Any] = {"metadata": {"labels": {"touched": str(self.rng.randint(0, 9))}}}
                if kind == "CronJob":
                    patch["spec"] = {"schedule": self.rng.choice(SCHEDULES), "suspend": self.rng.random() < 0.3}
                self.kube.patch(kind, self.ns, name, patch)
                self.counts["patched"] += 1
            else:
                name = self.names[kind].pop(self.rng.randrange(len(self.names[kind])))
                self.kube.delete(kind, self.ns, name)
                self.counts["deleted"] += 1
        except KubeError:
            self.counts["rejected"] += 1  # refused as a real API server would (400/422), or gone meanwhile


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--settle", type=float, default=60, help="quiet seconds after the burst before reading")
    ap.add_argument("--rate", type=float, default=20, help="API actions per second")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--annotations", action="store_true", help="fuzz batchd's annotations, with their invariants")
    args = ap.parse_args()
    if args.annotations:
        await fuzz_annotations(args.seconds, args.seed)
        return
    rng = random.Random(args.seed)
    async with cluster(["--dynamic-config-value",
                        "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute=2"]) as (wd, env, kubeconfig, kube):
        ns = new_namespace(kube, "fuzz")
        with worker_process(env, kubeconfig, wd, namespace=ns, task_queue=f"fuzz-{uuid.uuid4()}",
                            extra=["--ttl-scope", "all", "--cronjob-selector", ""]) as worker:
            await asyncio.sleep(3)
            fuzz = Fuzzer(kube, ns, rng)
            start = time.monotonic()
            while time.monotonic() - start < args.seconds:
                fuzz.step()
                await asyncio.sleep(1 / args.rate)
            await asyncio.sleep(args.settle / 2)
            cpu0, t0 = cpu_seconds(worker.proc.pid), time.monotonic()
            await asyncio.sleep(args.settle / 2)
            idle_cpu = (cpu_seconds(worker.proc.pid) - cpu0) / (time.monotonic() - t0)
            stuck = [ex.id async for ex in env.client.list_workflows(
                'TemporalReportedProblems IS NOT NULL AND ExecutionStatus = "Running"')]
            running = (await env.client.count_workflows('ExecutionStatus = "Running"')).count
            log_lines = worker.log.read_text(errors="replace").splitlines()
            errors = [line for line in log_lines if " ERROR " in line or '"level": "ERROR"' in line]
            causes = Counter(m.group(1) for line in log_lines if "Failing workflow task" in line
                             and (m := re.search(r'message: "([^"]*)"', line)))
            print(table([
                ("seed / seconds / rate", f"{args.seed} / {args.seconds:g} s / {args.rate:g} per s"),
                ("API actions", ", ".join(f"{k} {v}" for k, v in fuzz.counts.items())),
                ("running workflows", running),
                ("stuck (TemporalReportedProblems)", f"{len(stuck)} {stuck[:5]}"),
                ("workflow task failures by cause", dict(causes) or "none"),
                ("worker ERROR lines", len(errors)),
                ("worker CPU while idle after", f"{idle_cpu * 100:.1f} % of a core"),
                ("worker peak RSS", f"{worker.rss_mb()[1]:.0f} MiB"),
            ]))
            for line in errors[:10]:
                print("   ", line[:300])
            print(f"  (logs in {wd})")


async def fuzz_annotations(seconds: float, seed: int) -> None:
    """FAIL-CLOSED: tests/annotation_fuzz.py's worlds against a worker process, in batches."""
    async with cluster(["--dynamic-config-value",
                        "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute=2"]) as (wd, env, kubeconfig, kube):
        ns = new_namespace(kube, "fuzz")
        with worker_process(env, kubeconfig, wd, namespace=ns, task_queue=f"fuzz-{uuid.uuid4()}",
                            extra=["--ttl-scope", "all", "--cronjob-selector", ""]):
            await asyncio.sleep(3)
            fuzz = AnnotationFuzz(kube, ns, random.Random(seed))
            start = time.monotonic()
            while time.monotonic() - start < seconds or fuzz.pending:
                if len(fuzz.cases) < 14 * (1 + int((time.monotonic() - start) // 20)) and time.monotonic() - start < seconds:
                    fuzz.start(cases=14)
                fuzz.step()
                await asyncio.sleep(0.25)
            for _ in range(20):
                fuzz.step()
                await asyncio.sleep(0.5)
            broken = await fuzz.check(env.client)
        print(table([
            ("seed / seconds", f"{seed} / {seconds:g} s"),
            ("cases", ", ".join(f"{n} {what}" for what, n in sorted(Counter(w for w, _ in fuzz.cases).items()))),
            ("counts", ", ".join(f"{v} {k}" for k, v in sorted(fuzz.counts.items()))),
            ("invariants broken", len(broken)),
        ]))
        for line in broken[:20]:
            print("   ", line[:300])


if __name__ == "__main__":
    run_then_exit(main())
