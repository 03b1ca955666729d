"""Tier 3: TTL-after-finished end to end — kubesim over HTTP, the real dev server, worker + bridge.

Durations are real but short (TTLs of 1–6 s). Every assertion reads observable state: objects in
the API, workflow results, search attributes and timer summaries in Temporal.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from bench.harness import BILLABLE
from kube.client import Kube
from tests.conftest import (
    as_batchd,
    eventually,
    routed,
    running,
    save_history,
    utcnow,
    workflow_exists,
)
from tests.k8s import create_job, finish_job, pod_manifest, second
from worker import commands
from worker.bridge import Bridge, BridgeSettings
from workflows.identity import EXPIRES_AT, OBSERVED_KEY_MEMO, TTL_HOLD_MEMO, ttl_workflow_id
from workflows.models.common import Job
from workflows.models.ttl import TTLObservation, TTLResult
from workflows.ttl import TTLAfterFinishedWorkflow


def wf_id(kind: str, ns: str, obj: dict) -> str:
    return ttl_workflow_id(kind, ns, obj["metadata"]["name"], obj["metadata"]["uid"])


async def result_of(client: Client, wid: str, timeout: float = 60) -> TTLResult:
    """The TTL workflow's result. Its fields date the deletion, so no test needs a tight timeout
    (upstream's control plane inside a full make test has taken over 10 s to delete a Job)."""
    handle = client.get_workflow_handle_for(TTLAfterFinishedWorkflow.run, wid)
    await eventually(lambda: workflow_exists(client, wid), what=f"workflow {wid} started")
    return await asyncio.wait_for(handle.result(), timeout)




async def test_finished_job_is_deleted_once_its_ttl_expires_and_not_before(client, kube: Kube, namespace, task_queue):
    # TTL-6, TTL-12
    async with running(client, kube, task_queue, namespace):
        job = create_job(kube, namespace, "etl", ttl=2)
        finished = second(utcnow())
        finish_job(kube, namespace, "etl", finished)
        res = await result_of(client, wf_id("Job", namespace, job))
        # its own queue and worker: a sleeper never takes a CronJob's room in the main cache
        assert (await client.get_workflow_handle(wf_id("Job", namespace, job)).describe()).task_queue == f"{task_queue}-ttl"
    assert res.outcome == "deleted"
    assert res.expire_at == finished + timedelta(seconds=2)
    assert res.deleted_at is not None and res.deleted_at >= res.expire_at
    await eventually(lambda: kube.get("Job", namespace, "etl") is None, what="job gone")


async def test_failed_job_with_ttl_zero_is_deleted_right_after_finishing(client, kube, namespace, task_queue):
    # TTL-9
    async with running(client, kube, task_queue, namespace):
        job = create_job(kube, namespace, "zero", ttl=0)
        finish_job(kube, namespace, "zero", second(utcnow()), failed=True)
        res = await result_of(client, wf_id("Job", namespace, job))
    assert res.outcome == "deleted"


async def finished_and_asleep(client: Client, kube: Kube, namespace: str, name: str, *, ttl: int) -> tuple[str, datetime]:
    """A Job with ``ttl``, finished now, once its TTL workflow runs: its workflow id and finish time."""
    job = create_job(kube, namespace, name, ttl=ttl)
    finished = second(utcnow())
    finish_job(kube, namespace, name, finished)
    wid = wf_id("Job", namespace, job)
    await eventually(lambda: workflow_exists(client, wid))
    return wid, finished


async def test_raising_the_ttl_of_a_sleeping_workflow_defers_deletion(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        wid, finished = await finished_and_asleep(client, kube, namespace, "later", ttl=2)
        kube.patch("Job", namespace, "later", {"spec": {"ttlSecondsAfterFinished": 6}})
        res = await result_of(client, wid)
    # The workflow deletes once and then ends, so its result dates the only deletion: past the
    # raised expiry, whether the raise reached it before the old expiry or the fresh read at the
    # old expiry found it (TTL-11).
    assert res.outcome == "deleted"
    assert res.expire_at == finished + timedelta(seconds=6)
    assert res.deleted_at is not None and res.deleted_at >= finished + timedelta(seconds=6)


async def test_lowering_the_ttl_rearms_the_timer_at_once(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        wid, finished = await finished_and_asleep(client, kube, namespace, "sooner", ttl=3600)
        kube.patch("Job", namespace, "sooner", {"spec": {"ttlSecondsAfterFinished": 1}})
        res = await result_of(client, wid)
    assert res.outcome == "deleted"
    assert res.expire_at == finished + timedelta(seconds=1)


async def test_removing_the_ttl_ends_the_workflow_and_keeps_the_job(client, kube, namespace, task_queue):
    # TTL-10: no TTL, never deleted
    async with running(client, kube, task_queue, namespace):
        wid, _ = await finished_and_asleep(client, kube, namespace, "keep", ttl=3600)
        kube.patch("Job", namespace, "keep", {"spec": {"ttlSecondsAfterFinished": None}})
        res = await result_of(client, wid)
    assert res.outcome == "not_needed"
    assert kube.get("Job", namespace, "keep") is not None


async def test_a_job_already_being_deleted_is_left_alone(client, kube, namespace, task_queue):
    # TTL-4: deletionTimestamp set (a finalizer holds the Job) -> the workflow ends without deleting
    async with running(client, kube, task_queue, namespace):
        job = create_job(kube, namespace, "held", ttl=3600, finalizers=["test.batchd.io/hold"])
        finish_job(kube, namespace, "held", second(utcnow()))
        wid = wf_id("Job", namespace, job)
        await eventually(lambda: workflow_exists(client, wid))
        kube.delete("Job", namespace, "held", propagation="Background")
        res = await result_of(client, wid)
        assert res.outcome == "not_needed"
        held = kube.get("Job", namespace, "held")
        assert held is not None and held["metadata"].get("deletionTimestamp")
        kube.patch("Job", namespace, "held", {"metadata": {"finalizers": None}})


async def test_a_recreated_namesake_is_never_deleted_by_the_old_workflow(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        old = create_job(kube, namespace, "same", ttl=3)
        finish_job(kube, namespace, "same", second(utcnow()))
        old_wid = wf_id("Job", namespace, old)
        await eventually(lambda: workflow_exists(client, old_wid))
        kube.delete("Job", namespace, "same", propagation="Background")
        await eventually(lambda: kube.get("Job", namespace, "same") is None)
        new = create_job(kube, namespace, "same", ttl=3600)
        finish_job(kube, namespace, "same", second(utcnow()))
        res = await result_of(client, old_wid)
        assert res.outcome == "gone"
        # The old workflow has ended, having told the namesake apart by uid: it can delete nothing now.
        new_wid = wf_id("Job", namespace, new)
        await eventually(lambda: workflow_exists(client, new_wid), what="the namesake's workflow")
        fresh = kube.get("Job", namespace, "same")
        assert fresh is not None and fresh["metadata"]["uid"] == new["metadata"]["uid"]
        desc = await client.get_workflow_handle(new_wid).describe()
        assert desc.status == WorkflowExecutionStatus.RUNNING


async def test_foreground_deletion_removes_the_jobs_pods_first(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        job = create_job(kube, namespace, "fg", ttl=1)
        kube.create("Pod", namespace, pod_manifest("fg-pod", owner=job, finalizers=["test.batchd.io/hold"]))
        finish_job(kube, namespace, "fg", second(utcnow()))
        res = await result_of(client, wf_id("Job", namespace, job))
        assert res.outcome == "deleted"
        # Foreground: the Job waits, with deletionTimestamp, until its blocking Pod is gone
        held = await eventually(lambda: kube.get("Job", namespace, "fg"))
        assert held["metadata"].get("deletionTimestamp")
        assert "foregroundDeletion" in held["metadata"].get("finalizers", [])
        pod = await eventually(lambda: (p := kube.get("Pod", namespace, "fg-pod")) and p["metadata"].get("deletionTimestamp") and p)
        assert pod is not None
        kube.patch("Pod", namespace, "fg-pod", {"metadata": {"finalizers": None}})
        await eventually(lambda: kube.get("Pod", namespace, "fg-pod") is None, what="pod gone")
        await eventually(lambda: kube.get("Job", namespace, "fg") is None, what="job gone after its pods")


async def test_jobs_outside_the_ttl_scope_are_left_to_the_builtin_controller(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace, ttl_scope="managed") as br:
        job = create_job(kube, namespace, "builtin", ttl=0, managed_by=None)
        finished = finish_job(kube, namespace, "builtin", second(utcnow()))
        await eventually(lambda: routed(br, finished), what="the bridge routed the finished Job")
        assert kube.get("Job", namespace, "builtin") is not None
        assert not await workflow_exists(client, wf_id("Job", namespace, job))


async def test_ttl_scope_all_takes_every_job(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace, ttl_scope="all"):
        job = create_job(kube, namespace, "anyjob", ttl=0, managed_by=None)
        finish_job(kube, namespace, "anyjob", second(utcnow()))
        res = await result_of(client, wf_id("Job", namespace, job))
    assert res.outcome == "deleted"


async def test_labelled_pod_is_deleted_its_ttl_after_it_finished(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        pod = kube.create("Pod", namespace, pod_manifest("lone", ttl_label="1", run_seconds=0.3))
        res = await result_of(client, wf_id("Pod", namespace, pod))
    assert res.outcome == "deleted"
    assert res.deleted_at is not None and res.expire_at is not None and res.deleted_at >= res.expire_at
    await eventually(lambda: kube.get("Pod", namespace, "lone") is None)


async def test_labelled_pod_owned_by_a_job_gets_a_warning_and_is_kept(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace) as br:
        job = create_job(kube, namespace, "owner")
        pod = kube.create("Pod", namespace, pod_manifest("owned", ttl_label="0", owner=job, run_seconds=0.2))
        events = await eventually(lambda: [
            e for e in kube.list("Event", namespace).get("items", [])
            if e["involvedObject"]["uid"] == pod["metadata"]["uid"] and e["reason"] == "TTLNotApplied"
        ], what="warning event")
        assert events[0]["type"] == "Warning" and "Job owner" in events[0]["message"]
        done = await eventually(lambda: (p := kube.get("Pod", namespace, "owned")) and
                                p.get("status", {}).get("phase") == "Succeeded" and p)
        await eventually(lambda: routed(br, done), what="the bridge routed the finished Pod")
        assert kube.get("Pod", namespace, "owned") is not None
        assert not await workflow_exists(client, wf_id("Pod", namespace, pod))


async def test_pending_expiry_is_visible_in_search_attributes_and_the_timer_summary(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        job = create_job(kube, namespace, "visible", ttl=3600)
        finished = second(utcnow())
        finish_job(kube, namespace, "visible", finished)
        wid = wf_id("Job", namespace, job)
        expires = finished + timedelta(seconds=3600)
        query = (f'K8sKind = "Job" AND K8sNamespace = "{namespace}" AND K8sName = "visible" '
                 f'AND ExpiresAt <= "{(expires + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}"')
        found = await eventually(lambda: _list_ids(client, query), what="visibility row")
        assert found == [wid]
        summary = f"TTL of Job {namespace}/visible expires {expires.strftime('%Y-%m-%dT%H:%M:%SZ')}"
        # the bridge starts the workflow with ExpiresAt set: its timer starts in a workflow task after that
        await eventually(lambda: _has_timer(client, wid, summary), what="the timer with its summary")
        await client.get_workflow_handle(wid).terminate("test done")


async def _list_ids(client: Client, query: str) -> list[str]:
    return [w.id async for w in client.list_workflows(query)]


async def test_two_bridges_at_once_start_one_workflow_and_delete_once(client, kube, deletes, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        second_bridge = Bridge(client, as_batchd(kube), BridgeSettings(namespaces=(namespace,), task_queue=task_queue))
        await second_bridge.start()
        try:
            job = create_job(kube, namespace, "twice", ttl=1)
            finish_job(kube, namespace, "twice", second(utcnow()))
            res = await result_of(client, wf_id("Job", namespace, job))
        finally:
            await second_bridge.stop()
    assert res.outcome == "deleted"
    runs = [w async for w in client.list_workflows(f'WorkflowId = "{wf_id("Job", namespace, job)}"')]
    assert len(runs) == 1
    assert deletes("jobs", namespace) == 1


async def test_a_restarted_bridge_does_not_resend_what_a_sleeping_workflow_has(client, kube, namespace, task_queue):
    """WATCH-2, WATCH-3: the workflow's memo holds the decision key it took in; a new bridge (a
    replica starting) reads it and signals only an object whose change the decision reads."""
    async with running(client, kube, task_queue, namespace):
        job = create_job(kube, namespace, "known", ttl=3600)
        other = create_job(kube, namespace, "changed", ttl=3600)
        finished = second(utcnow())
        finish_job(kube, namespace, "known", finished)
        finish_job(kube, namespace, "changed", finished)
        known, changed = wf_id("Job", namespace, job), wf_id("Job", namespace, other)
        await eventually(lambda: _memo_is(client, known, _key(kube, namespace, "known")), what="the memo in visibility")
    kube.patch("Job", namespace, "known", {"metadata": {"labels": {"team": "data"}}})  # read by no decision
    kube.patch("Job", namespace, "changed", {"spec": {"ttlSecondsAfterFinished": 7200}})
    before = {wid: await _signals(client, wid) for wid in (known, changed)}
    async with running(client, kube, task_queue, namespace) as br:  # a new bridge lists both Jobs
        await eventually(lambda: _more_signals(client, changed, before[changed]), what="the change sent")
        await eventually(lambda: routed(br, kube.get("Job", namespace, "known")), what="the bridge routed known")
        assert await _signals(client, known) == before[known]
        await eventually(lambda: _memo_is(client, changed, _key(kube, namespace, "changed")), what="the new key")
    for wid in (known, changed):
        await client.get_workflow_handle(wid).terminate("test done")


async def test_a_ttl_deletion_costs_a_start_a_timer_and_one_local_activity(client, kube, namespace, task_queue):
    """The bridge starts the workflow already showing its expiry and decision key, with no signal:
    three billed actions for one deletion, and the expiry still in ``ExpiresAt`` and the timer."""
    async with running(client, kube, task_queue, namespace) as br:
        job = create_job(kube, namespace, "cheap", ttl=3)
        finished = second(utcnow())
        finish_job(kube, namespace, "cheap", finished)
        kube.patch("Job", namespace, "cheap", {"metadata": {"labels": {"team": "data"}}})  # read by no decision
        await eventually(lambda: routed(br, kube.get("Job", namespace, "cheap")), what="the label change routed")
        wid = wf_id("Job", namespace, job)
        desc = await client.get_workflow_handle(wid).describe()
        assert desc.typed_search_attributes.get(EXPIRES_AT) == finished + timedelta(seconds=3)
        assert (await result_of(client, wid)).outcome == "deleted"
    await save_history(client.get_workflow_handle(wid), "ttl-keyed-start-deleted")
    history = await client.get_workflow_handle(wid).fetch_history()
    kinds = [ev.WhichOneof("attributes") for ev in history.events]
    billed = [k.removesuffix("_event_attributes") for k in kinds if k in BILLABLE]
    assert billed == ["workflow_execution_started", "timer_started", "marker_recorded"], kinds


def _key(kube: Kube, namespace: str, name: str) -> str:
    return TTLObservation.of_job(Job.model_validate(kube.get("Job", namespace, name))).decision_key()


async def _memo(client: Client, wid: str, key: str) -> str | None:
    """The workflow's memo ``key`` as visibility shows it (None: no row yet, or no such key)."""
    rows = [w async for w in client.list_workflows(f'WorkflowId = "{wid}"')]
    return await rows[0].memo_value(key, None) if rows else None


async def _memo_is(client: Client, wid: str, key: str) -> bool:
    return await _memo(client, wid, OBSERVED_KEY_MEMO) == key


async def _signals(client: Client, wid: str) -> int:
    history = await client.get_workflow_handle(wid).fetch_history()
    return sum(ev.HasField("workflow_execution_signaled_event_attributes") for ev in history.events)


async def _more_signals(client: Client, wid: str, than: int) -> bool:
    return await _signals(client, wid) > than


async def test_a_failed_dispatch_is_retried_in_seconds_not_at_the_next_resync(client, kube, namespace, task_queue):
    """A Temporal call that fails (a frontend restarting, "namespace not found" for a moment)
    is retried with a short backoff; the relist an hour away is not what brings it back."""
    async with running(client, kube, task_queue, namespace, resync_seconds=3600) as br:
        assert br is not None
        real, failed = br.handle, []

        async def flaky(etype: str, obj: dict) -> None:
            if obj["metadata"]["name"] == "flaky" and len(failed) < 3:
                failed.append(etype)
                raise RuntimeError("the frontend is away")
            await real(etype, obj)

        br.handle = flaky  # type: ignore[method-assign]
        job = create_job(kube, namespace, "flaky", ttl=1)
        finish_job(kube, namespace, "flaky", second(utcnow()))
        res = await result_of(client, wf_id("Job", namespace, job))
    assert res.outcome == "deleted" and len(failed) == 3


# -- batchd's extensions: hold, extend, TTL by outcome (docs/ttl.md TTL-HOLD, TTL-EXTEND, TTL-OUTCOME)

HOLD = "batchd.io/ttl-hold"


async def _decided_after(client: Client, wid: str, instant: datetime) -> bool:
    """A workflow task of ``wid`` has completed after ``instant``: it has decided with that time passed."""
    events = (await client.get_workflow_handle(wid).fetch_history()).events
    return any(ev.HasField("workflow_task_completed_event_attributes") and ev.event_time.ToDatetime(UTC) > instant
               for ev in events)


async def _has_timer(client: Client, wid: str, summary: str) -> bool:
    return summary in await _timer_summaries(client, wid)


async def _timer_summaries(client: Client, wid: str) -> list[str]:
    history = await client.get_workflow_handle(wid).fetch_history()
    decode = client.data_converter.payload_converter.from_payload
    return [decode(ev.user_metadata.summary, str)
            for ev in history.events if ev.HasField("timer_started_event_attributes")]


async def test_a_held_job_outlives_its_ttl_and_goes_at_once_when_released(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        job = create_job(kube, namespace, "keep-me", ttl=5)  # time for its timer to start before it expires
        assert commands.ttl_hold(kube, "Job", namespace, "keep-me", "INC-1: debugging") == (
            f"Job {namespace}/keep-me held: INC-1: debugging")
        finished = second(utcnow())
        finish_job(kube, namespace, "keep-me", finished)
        wid = wf_id("Job", namespace, job)
        await eventually(lambda: workflow_exists(client, wid))
        expiry = finished + timedelta(seconds=5)
        await eventually(lambda: _decided_after(client, wid, expiry), what="the expiry passed, held")
        assert kube.get("Job", namespace, "keep-me") is not None
        summaries = await _timer_summaries(client, wid)
        assert summaries[0].endswith(f"; held ({HOLD}): INC-1: debugging"), summaries

        async def listed() -> list[commands.PendingExpiry]:
            return [r for r in await commands.pending_expiries(client, namespace=namespace) if r.hold is not None]

        rows = await eventually(listed, what="the hold in ttl list")
        assert [(r.name, r.hold) for r in rows] == [("keep-me", "INC-1: debugging")]
        assert (await client.get_workflow_handle(wid).describe()).status == WorkflowExecutionStatus.RUNNING

        released = second(utcnow())
        assert commands.ttl_release(kube, "Job", namespace, "keep-me").endswith("released")
        res = await result_of(client, wid)
        await save_history(client.get_workflow_handle(wid), "ttl-held-then-released")
    assert res.outcome == "deleted"
    assert res.expire_at == expiry
    assert res.deleted_at is not None and res.deleted_at >= released


async def test_a_held_job_deleted_by_hand_ends_its_workflow(client, kube, namespace, task_queue):
    """A held, expired object's workflow waits on no timer: the bridge must tell it of a deletion."""
    async with running(client, kube, task_queue, namespace):
        job = create_job(kube, namespace, "by-hand", ttl=0)
        kube.patch("Job", namespace, "by-hand", {"metadata": {"annotations": {HOLD: ""}}})
        finish_job(kube, namespace, "by-hand", second(utcnow()))
        wid = wf_id("Job", namespace, job)
        await eventually(lambda: workflow_exists(client, wid))
        await eventually(lambda: _memo_held(client, wid), what="the hold in the memo")
        kube.delete("Job", namespace, "by-hand", propagation="Background")
        res = await result_of(client, wid)
    assert res.outcome == "gone"


async def _memo_held(client: Client, wid: str) -> bool:
    return await _memo(client, wid, TTL_HOLD_MEMO) is not None


async def test_ttl_extend_raises_the_ttl_of_a_sleeping_workflow(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace):
        wid, finished = await finished_and_asleep(client, kube, namespace, "longer", ttl=2)
        out = commands.ttl_extend(kube, "Job", namespace, "longer", 3)
        assert out.endswith("spec.ttlSecondsAfterFinished 2 -> 5")
        res = await result_of(client, wid)
    assert res.outcome == "deleted" and res.expire_at == finished + timedelta(seconds=5)


def test_ttl_extend_raises_every_ttl_an_object_carries_and_refuses_what_it_cannot(kube, namespace):
    create_job(kube, namespace, "both", ttl=60)
    kube.patch("Job", namespace, "both", {"metadata": {"annotations": {
        "batchd.io/ttl-seconds-after-success": "10", "batchd.io/ttl-seconds-after-failure": "600"}}})
    commands.ttl_extend(kube, "Job", namespace, "both", 90)
    job = kube.get("Job", namespace, "both")
    assert job["spec"]["ttlSecondsAfterFinished"] == 150
    assert job["metadata"]["annotations"]["batchd.io/ttl-seconds-after-success"] == "100"
    assert job["metadata"]["annotations"]["batchd.io/ttl-seconds-after-failure"] == "690"

    kube.create("Pod", namespace, pod_manifest("lone", ttl_label="30"))
    commands.ttl_extend(kube, "Pod", namespace, "lone", 7200)
    assert kube.get("Pod", namespace, "lone")["metadata"]["labels"]["batchd.io/ttl-seconds-after-finished"] == "7230"

    create_job(kube, namespace, "no-ttl")
    with pytest.raises(commands.OpError, match="has no TTL to extend"):
        commands.ttl_extend(kube, "Job", namespace, "no-ttl", 60)
    create_job(kube, namespace, "near-max", ttl=2**31 - 10)
    with pytest.raises(commands.OpError, match="more than the field holds"):
        commands.ttl_extend(kube, "Job", namespace, "near-max", 60)
    assert kube.get("Job", namespace, "near-max")["spec"]["ttlSecondsAfterFinished"] == 2**31 - 10
    with pytest.raises(commands.NotFoundError):
        commands.ttl_extend(kube, "Job", namespace, "absent", 60)
    with pytest.raises(commands.NotFoundError):
        commands.ttl_hold(kube, "Pod", namespace, "absent", "why")


async def test_ttl_by_outcome_overrides_the_spec_and_a_bad_value_holds_the_job(client, kube, namespace, task_queue):
    async with running(client, kube, task_queue, namespace) as br:
        assert br is not None
        jobs = {name: create_job(kube, namespace, name, ttl=ttl) for name, ttl in
                (("quick-ok", 3600), ("kept-failed", None), ("typo", 1))}
        kube.patch("Job", namespace, "quick-ok",
                   {"metadata": {"annotations": {"batchd.io/ttl-seconds-after-success": "1"}}})
        kube.patch("Job", namespace, "kept-failed",
                   {"metadata": {"annotations": {"batchd.io/ttl-seconds-after-failure": "2"}}})
        kube.patch("Job", namespace, "typo",
                   {"metadata": {"annotations": {"batchd.io/ttl-seconds-after-success": "1m"}}})
        finished = second(utcnow())
        finish_job(kube, namespace, "quick-ok", finished)
        finish_job(kube, namespace, "kept-failed", finished, failed=True)
        finish_job(kube, namespace, "typo", finished)
        ok = await result_of(client, wf_id("Job", namespace, jobs["quick-ok"]))
        failed = await result_of(client, wf_id("Job", namespace, jobs["kept-failed"]))
        events = await eventually(lambda: [
            e for e in kube.list("Event", namespace).get("items", [])
            if e["involvedObject"]["uid"] == jobs["typo"]["metadata"]["uid"] and e["reason"] == "InvalidAnnotation"
        ], what="the InvalidAnnotation Event")
        await eventually(lambda: _finished_in_informer(br, jobs["typo"]), what="the bridge saw typo finish")
        # FAIL-CLOSED: its workflow holds it, long past the spec's TTL of 1 s
        await eventually(lambda: workflow_exists(client, wf_id("Job", namespace, jobs["typo"])), what="typo's workflow")
        await asyncio.sleep(2)
    assert ok.outcome == "deleted" and ok.expire_at == finished + timedelta(seconds=1)
    assert failed.outcome == "deleted" and failed.expire_at == finished + timedelta(seconds=2)
    assert events[0]["type"] == "Warning" and "ttl-seconds-after-success='1m'" in events[0]["message"]
    assert "the Job is held" in events[0]["message"]
    assert kube.get("Job", namespace, "typo") is not None


def _finished_in_informer(br: Bridge, job: dict) -> bool:
    seen = br.cached("Job", job["metadata"]["uid"])
    return seen is not None and any(c["type"] == "Complete" for c in seen.get("status", {}).get("conditions") or [])
