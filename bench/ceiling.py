"""The ceiling workflows of the benchmarks: the least a workflow can do on this dev server.

``CeilingWorkflow`` sleeps once and runs one no-op activity (the TTL burst's ceiling);
``SleeperCeiling`` only sleeps (started with no worker, it measures how fast the server starts
workflows). Their own module, importing only the SDK, so the workflow
sandbox can load it cheaply.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from temporalio import activity, workflow

#: workflow id -> wall time its activity ran (filled in the benchmark process)
DONE: dict[str, float] = {}


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
