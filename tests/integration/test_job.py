"""Tier 3: the Job controller end to end — kubesim's fake kubelet runs the Pods, the real dev server
runs the workflows. Rule ids: docs/job.md (JOB-n) and docs/kubesim.md (API-n).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import WorkflowTaskFailedCause
from temporalio.client import Client

from kube.client import Kube
from tests.conftest import DEV_SERVER_ARGS, eventually, running, save_history, workflow_exists
from worker.dev import ephemeral_dev_server
from workflows.identity import job_workflow_id
from workflows.job import CONTINUE_AS_NEW_AT_WAKE
from workflows.models.job import JOB_MANAGED_BY, JOB_TRACKING_FINALIZER, TRACKING_LABEL


def job_manifest(name: str, *, completions: int | None = 1, parallelism: int = 1, indexed: bool = False,
                 run_seconds: float = 0.3, exit_code: int = 0, backoff_limit: int | None = None,
                 deadline: int | None = None, suspend: bool = False, policy: str | None = None,
                 terminate_seconds: float | None = None, ttl: int | None = None, grace: int = 1,
                 container_name: str = "main", notes: dict[str, str] | None = None) -> dict[str, Any]:
    annotations = {"kubesim.batchd.io/run-seconds": str(run_seconds), "kubesim.batchd.io/exit-code": str(exit_code)}
    if terminate_seconds is not None:
        annotations["kubesim.batchd.io/terminate-seconds"] = str(terminate_seconds)
    spec: dict[str, Any] = {
        "managedBy": JOB_MANAGED_BY, "parallelism": parallelism, "suspend": suspend,
        "template": {"metadata": {"labels": {"app": name}, "annotations": annotations},
                     "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace,
                              "containers": [{"name": container_name, "image": "busybox:1.36"}]}},
    }
    if completions is not None:
        spec["completions"] = completions
    if indexed:
        spec["completionMode"] = "Indexed"
    for key, value in (("backoffLimit", backoff_limit), ("activeDeadlineSeconds", deadline),
                       ("podReplacementPolicy", policy), ("ttlSecondsAfterFinished", ttl)):
        if value is not None:
            spec[key] = value
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "annotations": notes or {}},
            "spec": spec}


def pods_of(kube: Kube, ns: str, job: dict[str, Any]) -> list[dict[str, Any]]:
    uid = job["metadata"]["uid"]
    return kube.list("Pod", ns, label_selector=f"batch.kubernetes.io/controller-uid={uid}")["items"]


def condition(job: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    if not job:
        return None
    return next((c for c in job.get("status", {}).get("conditions") or [] if c["type"] == type_ and c["status"] == "True"), None)


async def outcome(client: Client, ns: str, job: dict[str, Any], timeout: float = 60, *, record: str | None = None) -> str:
    wid = job_workflow_id(ns, job["metadata"]["name"], job["metadata"]["uid"])
    await eventually(lambda: workflow_exists(client, wid), what=f"workflow {wid}")
    handle = client.get_workflow_handle(wid)
    result = await asyncio.wait_for(handle.result(), timeout)
    if record:
        await save_history(handle, record)
    return result




def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def no_finalizers_left(kube: Kube, ns: str, job: dict[str, Any]) -> bool:
    return not [p for p in pods_of(kube, ns, job) if JOB_TRACKING_FINALIZER in p["metadata"].get("finalizers", [])]


async def test_nonindexed_job_runs_to_complete_and_counts_every_pod_once(client, kube: Kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("plain", completions=3, parallelism=2))
        assert await outcome(client, namespace, job, record="job-nonindexed-complete") == "Complete"
    fresh = kube.get("Job", namespace, "plain")
    st = fresh["status"]
    assert st["succeeded"] == 3 and st.get("failed", 0) == 0 and st.get("active", 0) == 0
    assert condition(fresh, "SuccessCriteriaMet") and condition(fresh, "Complete")  # JOB-76, API-45
    assert st["completionTime"] and st["startTime"]
    assert st["uncountedTerminatedPods"] in ({}, {"succeeded": [], "failed": []})
    pods = pods_of(kube, namespace, fresh)
    assert len(pods) == 3 and no_finalizers_left(kube, namespace, fresh)
    assert [p["metadata"]["labels"].get(TRACKING_LABEL) for p in pods] == ["released"] * 3  # JOB-91
    p = pods[0]["metadata"]
    assert p["labels"]["batch.kubernetes.io/job-name"] == "plain"  # JOB-6, API-9
    owner = p["ownerReferences"][0]
    assert (owner["kind"], owner["controller"], owner["blockOwnerDeletion"]) == ("Job", True, True)  # JOB-7


async def test_indexed_job_completes_every_index_once(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("idx", completions=4, parallelism=2, indexed=True))
        assert await outcome(client, namespace, job) == "Complete"
    fresh = kube.get("Job", namespace, "idx")
    assert fresh["status"]["completedIndexes"] == "0-3" and fresh["status"]["succeeded"] == 4  # JOB-47, JOB-48
    pods = pods_of(kube, namespace, fresh)
    indexes = sorted(int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]) for p in pods)
    assert indexes == [0, 1, 2, 3]
    for p in pods:
        i = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == i  # JOB-9
        assert p["spec"]["hostname"] == f"idx-{i}"  # JOB-10
        assert p["metadata"]["generateName"] == f"idx-{i}-"  # JOB-11


async def test_a_pod_deleted_mid_run_is_counted_once_and_replaced(client, kube, namespace, task_queue):
    # JOB-59: under TerminatingOrFailed a deleted running Pod counts failed at once
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("victim", completions=2, parallelism=2, run_seconds=3))
        victim = await eventually(lambda: next((p for p in pods_of(kube, namespace, job)
                                                if p.get("status", {}).get("phase") == "Running"), None))
        kube.delete("Pod", namespace, victim["metadata"]["name"])
        assert await outcome(client, namespace, job) == "Complete"
    st = kube.get("Job", namespace, "victim")["status"]
    assert st["succeeded"] == 2 and st["failed"] == 1
    assert no_finalizers_left(kube, namespace, job)


async def test_a_job_continues_as_new_between_syncs_and_counts_every_pod_once(kube, namespace, task_queue):
    # The server suggests continue-as-new after 40 events (a server of its own: every other test's
    # workflows keep the default), so this Job runs as several workflow runs. The run continues as
    # new in the workflow task that woke it, before its next sync: a poke during a sync's steps
    # would make the server refuse a task that also carried the continue-as-new.
    env = await ephemeral_dev_server(
        [*DEV_SERVER_ARGS, "--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=40"])
    async with env, running(env.client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("runs", completions=6, parallelism=2, run_seconds=1))
        assert await outcome(env.client, namespace, job, timeout=90) == "Complete"
        wid = job_workflow_id(namespace, "runs", job["metadata"]["uid"])
        last = await env.client.get_workflow_handle(wid).fetch_history()
        first = env.client.get_workflow_handle(
            wid, run_id=last.events[0].workflow_execution_started_event_attributes.first_execution_run_id)
        events = (await first.fetch_history()).events
        assert events[-1].HasField("workflow_execution_continued_as_new_event_attributes")
        await save_history(first, "job-continued-as-new")
        task = next(i for i in range(len(events) - 1, 0, -1)
                    if events[i].HasField("workflow_task_completed_event_attributes"))
        assert not [e for e in events[task:] if e.HasField("activity_task_scheduled_event_attributes")
                    or e.HasField("marker_recorded_event_attributes")], "a sync ran in the task that continued as new"
        assert any(CONTINUE_AS_NEW_AT_WAKE.encode() in e.SerializeToString() for e in events)
        # A poke that reaches the server while the continuing task is in flight makes the server
        # refuse that task (UnhandledCommand) and hand the signal to the next one: Temporal's own way
        # of not losing a signal, which no workflow can avoid. Any other failure is a fault.
        failed = [e.workflow_task_failed_event_attributes.cause for e in events
                  if e.HasField("workflow_task_failed_event_attributes")]
        assert set(failed) <= {WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND}, failed
    st = kube.get("Job", namespace, "runs")["status"]
    assert st["succeeded"] == 6 and st.get("failed", 0) == 0 and st.get("active", 0) == 0
    assert no_finalizers_left(kube, namespace, job)


async def test_backoff_limit_fails_the_job_after_retries(client, kube, namespace, task_queue):
    # JOB-65, JOB-75: FailureTarget then Failed, reason BackoffLimitExceeded
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("crash", exit_code=1, backoff_limit=1, run_seconds=0.1))
        assert await outcome(client, namespace, job, timeout=90, record="job-backoff-failed") == "Failed"
    fresh = kube.get("Job", namespace, "crash")
    failed = condition(fresh, "Failed")
    assert failed and failed["reason"] == "BackoffLimitExceeded" and condition(fresh, "FailureTarget")
    assert fresh["status"]["failed"] == 2 and not fresh["status"].get("completionTime")  # JOB-77
    pods = sorted(pods_of(kube, namespace, fresh), key=lambda p: p["metadata"]["creationTimestamp"])
    assert len(pods) == 2 and no_finalizers_left(kube, namespace, fresh)


async def test_a_jobs_annotations_set_its_backoff(client, kube, namespace, task_queue):
    # JOB-BACKOFF: 1 s doubling, so four failures take about 7 s where upstream's 10 s would take 70 s
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest(
            "quick", exit_code=1, backoff_limit=3, run_seconds=0.1,
            notes={"batchd.io/backoff-base-seconds": "1", "batchd.io/backoff-max-seconds": "2"}))
        assert await outcome(client, namespace, job, timeout=45) == "Failed"
    pods = sorted(pods_of(kube, namespace, job), key=lambda p: p["metadata"]["creationTimestamp"])
    assert len(pods) == 4
    ends = [p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] for p in pods]
    starts = [p["metadata"]["creationTimestamp"] for p in pods]
    gaps = [(_at(start) - _at(end)).total_seconds() for end, start in zip(ends, starts[1:], strict=False)]
    assert [round(g) >= want for g, want in zip(gaps, [1, 2, 2], strict=True)] == [True] * 3, gaps  # capped at 2


async def test_succeeded_pods_are_deleted_once_counted(client, kube, namespace, task_queue):
    # JOB-DELETE-SUCCEEDED: counts as ever, and no succeeded Pod left behind
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest(
            "tidy", completions=6, parallelism=2, indexed=True, notes={"batchd.io/delete-succeeded-pods": "true"}))
        assert await outcome(client, namespace, job) == "Complete"
        await eventually(lambda: not pods_of(kube, namespace, job), what="every Pod deleted")
    st = kube.get("Job", namespace, "tidy")["status"]
    assert (st["succeeded"], st["completedIndexes"], st.get("failed", 0)) == (6, "0-5", 0)


async def test_a_job_waits_for_the_jobs_it_names_and_fails_with_them(client, kube, namespace, task_queue):
    # JOB-AFTER: no Pod until the named Jobs Complete; one failed or deleted unfinished fails it
    async with running(client, kube, task_queue, namespace):
        later = kube.create("Job", namespace, job_manifest("later", notes={"batchd.io/after": "first"}))
        doomed = kube.create("Job", namespace, job_manifest("doomed", notes={"batchd.io/after": "broken"}))
        orphan = kube.create("Job", namespace, job_manifest("orphan", notes={"batchd.io/after": "slow"}))
        [event] = await eventually(lambda: [e for e in kube.list("Event", namespace)["items"]
                                            if e["reason"] == "WaitingForDependencies"
                                            and e["involvedObject"]["name"] == "later"], what="the wait's Event")
        assert "first" in event["message"] and event["type"] == "Normal"
        wid = job_workflow_id(namespace, "later", later["metadata"]["uid"])
        assert (await client.get_workflow_handle(wid).query("describe"))["waitingFor"] == ["first"]
        assert not pods_of(kube, namespace, later) and not kube.get("Job", namespace, "later")["status"].get("startTime")
        kube.create("Job", namespace, job_manifest("first", run_seconds=0.5))
        kube.create("Job", namespace, job_manifest("broken", exit_code=1, backoff_limit=0, run_seconds=0.1))
        slow = kube.create("Job", namespace, job_manifest("slow", run_seconds=60))
        await eventually(lambda: pods_of(kube, namespace, slow), what="the slow Job's Pod")
        kube.delete("Job", namespace, "slow")
        assert await outcome(client, namespace, later) == "Complete"
        assert condition(kube.get("Job", namespace, "first"), "Complete")
        for job, why in ((doomed, "broken failed"), (orphan, "slow was deleted before it finished")):
            assert await outcome(client, namespace, job) == "Failed"
            failed = condition(kube.get("Job", namespace, job["metadata"]["name"]), "Failed")
            assert failed and failed["reason"] == "DependencyFailed" and why in failed["message"]
            assert not pods_of(kube, namespace, job)


async def test_active_deadline_fails_the_job_and_deletes_its_pods(client, kube, namespace, task_queue):
    # JOB-67, JOB-74
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("slow", run_seconds=60, deadline=2))
        assert await outcome(client, namespace, job) == "Failed"
    fresh = kube.get("Job", namespace, "slow")
    assert condition(fresh, "Failed")["reason"] == "DeadlineExceeded"
    assert fresh["status"].get("active", 0) == 0 and no_finalizers_left(kube, namespace, fresh)


async def test_replacement_policy_failed_waits_for_a_terminating_pod_to_finish(client, kube, namespace, task_queue):
    # JOB-55, JOB-57, JOB-60, JOB-43: under Failed, no replacement while the old Pod is terminating
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("patient", run_seconds=60, policy="Failed",
                                                          terminate_seconds=3, grace=30))
        first = await eventually(lambda: _running(kube, namespace, job))
        kube.delete("Pod", namespace, first["metadata"]["name"])
        await eventually(lambda: kube.get("Job", namespace, "patient")["status"].get("terminating") == 1,
                         what="terminating=1")
        assert [p["metadata"]["uid"] for p in pods_of(kube, namespace, job)] == [first["metadata"]["uid"]]
        replacement = await eventually(lambda: _other(kube, namespace, job, first), timeout=40, what="replacement")
        old = kube.get("Pod", namespace, first["metadata"]["name"])
        assert old is None or old["status"]["phase"] == "Failed", "replaced only once terminal"
        assert replacement["metadata"]["creationTimestamp"] >= first["metadata"]["creationTimestamp"]
        kube.delete("Job", namespace, "patient", propagation="Foreground")
        assert await outcome(client, namespace, job) == "gone"


async def test_replacement_policy_terminating_or_failed_replaces_while_terminating(client, kube, namespace, task_queue):
    # JOB-55, JOB-59, JOB-61: the deleted Pod counts failed at once; its replacement waits only for the
    # recreation backoff (10 s from the deletion), not for the Pod to terminate (here 25 s)
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("eager", run_seconds=60, terminate_seconds=25, grace=60))
        first = await eventually(lambda: _running(kube, namespace, job))
        kube.delete("Pod", namespace, first["metadata"]["name"])
        await eventually(lambda: kube.get("Job", namespace, "eager")["status"].get("failed") == 1, what="failed=1")
        await eventually(lambda: _other(kube, namespace, job, first), timeout=30, what="replacement")
        old = kube.get("Pod", namespace, first["metadata"]["name"])
        assert old is not None and old["metadata"].get("deletionTimestamp") and old["status"]["phase"] == "Running"
        kube.delete("Job", namespace, "eager", propagation="Foreground")
        assert await outcome(client, namespace, job, timeout=90) == "gone"


def _running(kube: Kube, ns: str, job: dict[str, Any]) -> dict[str, Any] | None:
    return next((p for p in pods_of(kube, ns, job) if p.get("status", {}).get("phase") == "Running"), None)


def _other(kube: Kube, ns: str, job: dict[str, Any], first: dict[str, Any]) -> dict[str, Any] | None:
    return next((p for p in pods_of(kube, ns, job) if p["metadata"]["uid"] != first["metadata"]["uid"]), None)


async def test_suspend_deletes_active_pods_and_resume_restarts_the_clock(client, kube, namespace, task_queue):
    # JOB-81, JOB-82
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("nap", run_seconds=30))
        await eventually(lambda: pods_of(kube, namespace, job))
        kube.patch("Job", namespace, "nap", {"spec": {"suspend": True}})
        suspended = await eventually(lambda: condition(kube.get("Job", namespace, "nap"), "Suspended"), what="Suspended")
        assert suspended["reason"] == "JobSuspended"
        await eventually(lambda: kube.get("Job", namespace, "nap")["status"].get("active", 0) == 0)
        await eventually(lambda: no_finalizers_left(kube, namespace, job))
        kube.patch("Job", namespace, "nap", {"spec": {"suspend": False}})
        await eventually(lambda: kube.get("Job", namespace, "nap")["status"].get("active") == 1, what="resumed")
        resumed = next(c for c in kube.get("Job", namespace, "nap")["status"]["conditions"] if c["type"] == "Suspended")
        assert resumed["status"] == "False" and resumed["reason"] == "JobResumed"
        kube.delete("Job", namespace, "nap", propagation="Foreground")
        assert await outcome(client, namespace, job) == "gone"


async def test_job_deleted_mid_run_frees_its_pods_finalizers(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("doomed", completions=3, parallelism=3, run_seconds=30))
        await eventually(lambda: len(pods_of(kube, namespace, job)) == 3)
        kube.delete("Job", namespace, "doomed", propagation="Foreground")
        assert await outcome(client, namespace, job) == "gone"
        await eventually(lambda: kube.get("Job", namespace, "doomed") is None, what="job gone")
        await eventually(lambda: not pods_of(kube, namespace, job), timeout=30, what="pods gone")


async def test_the_ttl_workflow_deletes_the_finished_job_later(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("short", ttl=1))
        assert await outcome(client, namespace, job) == "Complete"
        await eventually(lambda: kube.get("Job", namespace, "short") is None, timeout=30, what="TTL deletion")


async def test_pod_creation_refused_by_admission_fails_the_job_with_a_reason(client, kube, namespace, task_queue):
    # A template the API accepts but Pod creation refuses (a policy webhook's 422): Warning Event,
    # and the Job fails with a clear reason - no hot retry loop.
    kube.patch("Namespace", None, namespace, {"metadata": {"annotations": {
        "kubesim.batchd.io/deny-create": "pods:422:images from this registry are not allowed"}}})
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("refused"))
        assert await outcome(client, namespace, job) == "Failed"
    fresh = kube.get("Job", namespace, "refused")
    failed = condition(fresh, "Failed")
    assert failed["reason"] == "PodCreationFailed" and "not allowed" in failed["message"]
    events = [e for e in kube.list("Event", namespace)["items"]
              if e["involvedObject"]["name"] == "refused" and e["reason"] == "FailedCreate"]
    assert len(events) == 1 and events[0]["type"] == "Warning"


async def test_a_quota_like_refusal_backs_off_and_recovers(client, kube, namespace, task_queue):
    kube.patch("Namespace", None, namespace, {"metadata": {"annotations": {
        "kubesim.batchd.io/deny-create": "pods:403:exceeded quota: compute, requested: pods=1"}}})
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("quota"))
        await eventually(lambda: [e for e in kube.list("Event", namespace)["items"]
                                  if e["involvedObject"]["name"] == "quota" and e["reason"] == "FailedCreate"])
        assert not pods_of(kube, namespace, job)
        kube.patch("Namespace", None, namespace, {"metadata": {"annotations": {"kubesim.batchd.io/deny-create": None}}})
        assert await outcome(client, namespace, job, timeout=60) == "Complete"
