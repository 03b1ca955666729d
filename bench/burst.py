"""bench/burst: one worker's burst of armed CronJob creations alone — no Temporal, kubesim in its own process.

    .venv/bin/python -m bench.burst [--cronjobs 2000] [--rounds 3]

Creates ``--cronjobs`` CronJobs in kubesim, then, each round, runs as many ``create_job_at``
activities (activities/cronjob.py) due at the same instant in this process, each in an activity
context, with the worker's logging (to a file) and meter provider installed, and the CronJobs read
from a cache packed as the worker's informer packs them. Prints, per round, when each Job was
created after its time (p50 / p99 / max), this process's CPU (user / sys) and context switches over
the round, and kubesim's CPU. Isolates the creation path that ``bench.cronjob`` measures inside the
whole worker; the activity environment's own set-up adds CPU on the event loop that the worker's
SDK spends when the activities start, not at their time. Prints; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from activities.cronjob import CronJobActivities
from bench.cronjob import cronjob
from bench.harness import cpu_seconds, kube_for, kubesim_process, new_namespace, percentile, table
from worker import telemetry
from worker.informer import _pack, _unpack, bridge_view
from workflows.models.cronjob import CreateJobInput, CreateJobResult


async def burst(acts: CronJobActivities, cronjobs: list[dict], round_: int) -> tuple[list[float], resource.struct_rusage, resource.struct_rusage]:
    """One round: every CronJob's creation due 1 s from now; seconds after that time each Job was made."""
    due = datetime.now(UTC) + timedelta(seconds=1)
    made: list[float] = []
    create = acts._create  # timed where the creator thread makes the Job, not when the activity returns

    def timed(inp: CreateJobInput) -> CreateJobResult:
        res = create(inp)
        made.append(time.time() - due.timestamp())
        return res

    acts._create = timed  # type: ignore[method-assign]
    inputs = [CreateJobInput(namespace=cj["metadata"]["namespace"], cronjob_name=cj["metadata"]["name"], cronjob_uid=cj["metadata"]["uid"],
                             job_name=f"{cj['metadata']['name']}-{round_}", scheduled=due, not_before=due,
                             wait_at_most=5.0, generation=cj["metadata"]["generation"]) for cj in cronjobs]
    env = ActivityEnvironment()
    before = resource.getrusage(resource.RUSAGE_SELF)
    results = await asyncio.gather(*(env.run(acts.create_job_at, inp) for inp in inputs))
    after = resource.getrusage(resource.RUSAGE_SELF)
    acts._create = create  # type: ignore[method-assign]
    missed = [r.outcome for r in results if r.outcome != "created"]
    if missed:
        print(f"round {round_}: {len(missed)} not created: {sorted(set(missed))}")
    return made, before, after


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cronjobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    wd = Path(tempfile.mkdtemp(prefix="batchd-burst-"))
    with kubesim_process(wd) as (sim, kubeconfig):
        kube = kube_for(kubeconfig)
        ns = new_namespace(kube, "bench-burst")
        cronjobs = [kube.create("CronJob", ns, cronjob(f"cj-{i}")) for i in range(args.cronjobs)]
        packed = {cj["metadata"]["uid"]: _pack(bridge_view(cj)) for cj in cronjobs}
        with open(wd / "worker.log", "w") as log, contextlib.redirect_stderr(log):
            telemetry.setup_logging("text")
            telemetry.install()
            acts = CronJobActivities(kube, cached=lambda ns, uid: _unpack(packed[uid]) if uid in packed else None)
            rows = []
            for r in range(args.rounds):
                sim_before = cpu_seconds(sim.proc.pid)
                made, before, after = await burst(acts, cronjobs, r)
                rows.append((f"round {r}: Jobs, after their time p50 / p99 / max (s)",
                             f"{len(made)}, {percentile(made, 50):.2f} / {percentile(made, 99):.2f} / {max(made):.2f}"))
                rows.append(("  this process: CPU user / sys (s), context switches",
                             f"{after.ru_utime - before.ru_utime:.2f} / {after.ru_stime - before.ru_stime:.2f}, "
                             f"{after.ru_nvcsw - before.ru_nvcsw + after.ru_nivcsw - before.ru_nivcsw}"))
                rows.append(("  kubesim: CPU (s)", f"{cpu_seconds(sim.proc.pid) - sim_before:.2f}"))
                await asyncio.sleep(1)
    print(f"burst: {args.cronjobs} armed creations due at one instant, {args.rounds} rounds (logs in {wd})")
    print(table(rows))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
