"""The ceiling workflows of the benchmarks: the least a workflow can do on this dev server.

``CeilingWorkflow`` sleeps once and runs one no-op activity (the TTL burst's ceiling);
``SleeperCeiling`` only sleeps (started with no worker, it measures how fast the server starts
workflows); ``MinuteCeiling`` is an armed CronJob reduced to its Temporal part (the CronJob
bench's ceiling). Their own module, importing only the SDK, so the workflow sandbox can load it
cheaply.

``python -m bench.ceiling ADDRESS TASK_QUEUE COUNT SECONDS OUT`` runs the ``MinuteCeiling``
worker alone in its own process for SECONDS, so its memory is measured as the batchd worker's is,
then writes the times ``bench_at`` noted to OUT (JSON).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

from temporalio import activity, workflow

#: workflow id -> wall time its activity ran (filled in the benchmark process)
DONE: dict[str, float] = {}
#: (workflow id, schedule time) -> wall time ``bench_at`` reached that time (in the ceiling worker's process)
AT: dict[tuple[str, datetime], float] = {}


@activity.defn(name="bench_noop")
def bench_noop(name: str) -> None:
    DONE[name] = time.time()


@workflow.defn(name="BenchCeiling")
class CeilingWorkflow:
    @workflow.run
    async def run(self, wake_at: datetime) -> None:
        await workflow.sleep(max(timedelta(0), wake_at - workflow.now()))
        await workflow.execute_activity(bench_noop, workflow.info().workflow_id,
                                        start_to_close_timeout=timedelta(seconds=30))


@workflow.defn(name="BenchSleeperCeiling")
class SleeperCeiling:
    @workflow.run
    async def run(self, sleep: timedelta) -> None:
        await workflow.sleep(sleep)


@activity.defn(name="bench_at")
async def bench_at(name: str, due: datetime) -> None:
    await asyncio.sleep(max(0.0, due.timestamp() - time.time()))
    AT[(name, due)] = time.time()


@workflow.defn(name="BenchMinuteCeiling")
class MinuteCeiling:
    """Each minute until ``until``: a timer to ``lead`` before the minute, then an activity that
    waits in the worker for the minute and notes the time, as an armed CronJob creation does
    (batchd adds the Kubernetes calls, the status write and the schedule's search attribute)."""

    @workflow.run
    async def run(self, until: datetime, lead: timedelta) -> None:
        while (due := (workflow.now() + timedelta(minutes=1)).replace(second=0, microsecond=0)) <= until:
            await workflow.sleep(max(timedelta(0), due - lead - workflow.now()))
            await workflow.execute_activity(bench_at, args=[workflow.info().workflow_id, due],
                                            start_to_close_timeout=lead + timedelta(seconds=60))


async def _minute_worker(address: str, task_queue: str, count: int, seconds: float, out: Path) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    from worker.temporal import DATA_CONVERTER, return_large_blocks_at_once

    return_large_blocks_at_once()  # as batchd's worker does, so the two peaks compare like with like
    client = await Client.connect(address, data_converter=DATA_CONVERTER)
    # passed through the sandbox as batchd's workflow modules are, so no instance holds its own copy
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(__name__))
    async with Worker(client, task_queue=task_queue, workflows=[MinuteCeiling], activities=[bench_at],
                      workflow_runner=runner, max_concurrent_activities=count + 100,
                      max_cached_workflows=count + 100):
        await asyncio.sleep(seconds)
    out.write_text(json.dumps([[name, due.isoformat(), at] for (name, due), at in AT.items()]))


if __name__ == "__main__":
    # this module by its name, as the workflow sandbox imports it (not as __main__)
    from bench import ceiling
    from bench.harness import run_then_exit

    address, task_queue, count, seconds, out = sys.argv[1:6]
    run_then_exit(ceiling._minute_worker(address, task_queue, int(count), float(seconds), Path(out)))
