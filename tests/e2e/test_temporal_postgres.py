"""Tier 4: the benches' production-like Temporal (bench/temporal.py) as a bench starts it:
temporal-server 1.32 on PostgreSQL 15, SQL advanced visibility, batchd's search attributes.

Skipped where the server is not built (``make upstream``) or PostgreSQL 15 is not installed.
"""

from __future__ import annotations

import urllib.request
import uuid
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from bench.temporal import postgres_server
from tests.conftest import eventually, require, temporal_server_missing
from workflows.identity import K8S_KIND


@workflow.defn(name="Greet")
class Greet:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello {name}"


@pytest.fixture(autouse=True)
def _needs_server_and_postgres() -> None:
    require(temporal_server_missing(), "make upstream; apt-get install postgresql-15")


def _started_at(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/<pid>/stat), or None when there is none: a pid
    and its start time name one process, even if the pid is used again."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


async def _ids(client: Client, query: str) -> list[str]:
    return [wf.id async for wf in client.list_workflows(query)]


@pytest.mark.timeout(300)
async def test_a_workflow_runs_is_found_by_batchds_search_attribute_and_nothing_is_left_running(
        tmp_path: Path) -> None:
    async with postgres_server(tmp_path / "temporal") as temporal:
        processes = {pid: _started_at(pid) for pids in temporal.roles().values() for pid in pids}
        assert len(processes) > 2 and all(processes.values()), processes  # the server, the postmaster, its children
        task_queue, wid = f"tq-{uuid.uuid4()}", f"greet/{uuid.uuid4()}"
        async with Worker(temporal.client, task_queue=task_queue, workflows=[Greet],
                          workflow_runner=UnsandboxedWorkflowRunner()):
            handle = await temporal.client.start_workflow(
                Greet.run, "job", id=wid, task_queue=task_queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(K8S_KIND, "Job")]))
            assert await handle.result() == "hello job"

        assert await eventually(lambda: _ids(temporal.client, 'K8sKind = "Job"'),
                                what="the workflow in visibility") == [wid]
        assert await _ids(temporal.client, 'K8sKind = "CronJob"') == []
        with urllib.request.urlopen(f"http://{temporal.pprof}/debug/pprof/", timeout=10) as resp:
            assert b"goroutine" in resp.read()  # the profiler a bench reads the server's CPU from

    left = [pid for pid, started in processes.items() if _started_at(pid) == started]
    assert not left, f"still running after the stack stopped: {left}"
