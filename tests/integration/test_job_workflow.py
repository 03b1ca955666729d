"""Tier 3: the Job workflow alone on the real dev server, with stand-in activities.

Here the Kubernetes side answers from a script, so a test can place a change (the Job deleted)
between two of the workflow's calls, where a real cluster only sometimes puts it.
"""

from __future__ import annotations

import uuid
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from workflows.decisions.job import SUCCESS_CRITERIA_MET
from workflows.job import JobWorkflow
from workflows.models.common import COMPLETE, EventInput
from workflows.models.job import (
    CreatePodsInput,
    CreatePodsResult,
    DeletePodsInput,
    JobInput,
    JobSnapshot,
    ObserveJobInput,
    PodsResult,
    ReleaseInput,
    ReleaseUnmatchedInput,
    WriteStatusInput,
)


def snapshot(*, gone: bool = False) -> JobSnapshot:
    """The Job ``short``: one Pod, Succeeded, still holding the tracking finalizer; or the Job gone."""
    pods: list[dict[str, Any]] = [] if gone else [{
        "name": "short-x", "uid": "pod-uid", "namespace": "ns", "phase": "Succeeded", "hasFinalizer": True,
        "creationTime": "2026-11-25T04:47:10Z", "finishTime": "2026-11-25T04:47:10Z",
        "containers": [{"name": "main", "exitCode": 0}]}]
    return JobSnapshot.model_validate({
        "namespace": "ns", "name": "short", "uid": "job-uid", "resourceVersion": "" if gone else "629", "gone": gone,
        "spec": {"completions": 1, "parallelism": 1, "completionMode": "NonIndexed", "backoffLimit": 6,
                 "podReplacementPolicy": "TerminatingOrFailed", "restartPolicy": "Never"},
        "status": {} if gone else {"active": 1, "ready": 1, "startTime": "2026-11-25T04:47:10Z"},
        "pods": pods})


async def test_a_job_deleted_after_its_success_was_written_still_ends_complete(
        client: Client, task_queue: str) -> None:
    # JOB-5: a sync writes SuccessCriteriaMet (step 1) and releases the Pod's finalizer (step 2);
    # the Job is gone before step 3 writes Complete, so that sync stops and the next one finds it
    # gone. (Seen in CI: step 3's write landed, a signal made the server refuse the workflow task
    # that carried it, and when the write ran again the Job's TTL of a second had deleted it.)
    writes: list[WriteStatusInput] = []

    @activity.defn(name="observe_job")
    async def observe(inp: ObserveJobInput) -> JobSnapshot:
        return snapshot(gone=len(writes) > 1)

    @activity.defn(name="write_job_status")
    async def write(inp: WriteStatusInput) -> PodsResult:
        writes.append(inp)
        return PodsResult(resource_version="630") if len(writes) == 1 else PodsResult(gone=True)

    @activity.defn(name="release_job_pods")
    async def release(inp: ReleaseInput) -> PodsResult:
        return PodsResult(names=inp.pods)

    @activity.defn(name="create_job_pods")
    async def create(inp: CreatePodsInput) -> CreatePodsResult:
        raise AssertionError("nothing to create")

    @activity.defn(name="delete_job_pods")
    async def delete(inp: DeletePodsInput) -> PodsResult:
        raise AssertionError("nothing to delete")

    @activity.defn(name="release_unmatched_job_pods")
    async def release_unmatched(inp: ReleaseUnmatchedInput) -> PodsResult:
        raise AssertionError("nothing stopped matching")

    @activity.defn(name="record_event")
    async def event(inp: EventInput) -> None:
        pass

    async with Worker(client, task_queue=task_queue, workflows=[JobWorkflow],
                      activities=[observe, write, release, create, delete, release_unmatched, event]):
        handle = await client.start_workflow(JobWorkflow.run, JobInput(namespace="ns", name="short", uid="job-uid"),
                                             id=f"job/{uuid.uuid4()}", task_queue=task_queue)
        result = await handle.result()
    # the premise: step 1 wrote the success, step 3 tried Complete and found the Job gone
    assert [[c.type for c in w.status.conditions] for w in writes] == [
        [SUCCESS_CRITERIA_MET], [SUCCESS_CRITERIA_MET, COMPLETE]]
    assert result == COMPLETE
