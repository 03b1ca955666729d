"""The Job controller as one durable workflow per Job (finalizer-based Pod tracking, KEP-3939).

Layer: workflows (deterministic). Started and poked by the bridge's Job router (worker/routers.py) on
``job/{ns}/{name}/{uid}`` for Jobs whose ``spec.managedBy`` is ``batchd.io/job-controller``.
Its activities are declared in workflows/models/job.py; the decisions are pure (workflows/jobsync.py).

Each *sync* mirrors upstream's ``syncJob``:

1. ``observe_job``: a fresh snapshot — the Job and every Pod it owns (orphans adopted, Pods
   that stopped matching its selector set apart);
2. ``jobsync.plan_sync``: what to release, delete, create, record, and when to look again;
3. act: release the Pods that stopped matching (JOB-26), delete and create Pods (batched), then
   the tracking protocol — step 1 write the new uncounted uids (and interim conditions), step 2
   remove those Pods' finalizers, step 3 fold the uids into ``succeeded``/``failed`` — each an
   idempotent activity.

Upstream's ``job_controller_*`` metrics (POL-48 to POL-56) are recorded here, where the
sync's action, its outcome and each successful status write are known, through
``workflow.metric_meter()``: it records nothing while a history is replayed, so a worker restart
counts nothing twice. The sync duration is measured in workflow time (``workflow.now()`` at the
sync's first and last workflow task), so a sync whose steps all ran as local activities in one
workflow task measures 0.

The uids whose finalizer removal was requested live in the workflow's durable memory, where
upstream keeps an in-memory cache that a restart loses. A worker killed between any two steps
resumes from history; the next snapshot shows exactly what landed, so nothing is counted twice
or lost. The workflow ends once the Job has finished (or is gone) and no Pod holds the
finalizer any more; the TTL workflow takes it from there.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import MetricCounter, MetricHistogramFloat
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import jobmetrics, jobsync
    from workflows.execute import record_event_best_effort
    from workflows.models.common import (
        Condition,
        EventInput,
        EventType,
        ObjectRef,
        finished_condition,
    )
    from workflows.models.job import (
        CreatePodsInput,
        DeletePodsInput,
        JobInput,
        JobMemory,
        JobSnapshot,
        JobStatusView,
        ObserveJobInput,
        PodToCreate,
        ReleaseInput,
        ReleaseUnmatchedInput,
        SyncPlan,
        WriteStatusInput,
        create_job_pods,
        delete_job_pods,
        observe_job,
        release_job_pods,
        release_unmatched_job_pods,
        write_job_status,
    )
    from workflows.policies import (
        BULK_HEARTBEAT,
        BULK_TIMEOUT,
        K8S_CALL_TIMEOUT,
        K8S_RETRY,
        Backoff,
    )

In = TypeVar("In")
Out = TypeVar("Out")

COMPONENT = "batchd-job-controller"
CREATE_BACKOFF_MAX = timedelta(minutes=5)
#: the Events (reason and message) a Job's workflow remembers having recorded
REPORTED = 50
#: the API server's alphabet for generated names (no vowels, no look-alike digits)
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: JOB-26 release: a new activity, only ever scheduled for Pods that stopped matching their selector
RELEASE_UNMATCHED_PATCH = "release-unmatched-pods"
#: JOB-94: continue as new in the task that wakes the run, not in the one that ends a sync
CONTINUE_AS_NEW_AT_WAKE = "continue-as-new-at-wake"


class JobMetrics:
    """Upstream's ``job_controller_*`` instruments (POL-48 to POL-56) on ``workflow.metric_meter()``.

    The meter is replay-safe (nothing is recorded while replaying). The attributes the SDK adds
    (``namespace``, ``task_queue``, ``workflow_type``) are dropped by the worker's views
    (worker/telemetry.py), which leave exactly upstream's labels.
    """

    def __init__(self) -> None:
        self._counters: dict[str, MetricCounter] = {}
        self._duration: MetricHistogramFloat | None = None
        self._specs = {m.name: m for m in jobmetrics.METRICS}

    def add(self, name: str, value: int, **labels: str) -> None:
        """Add ``value`` (≥ 0; upstream adds zeros too, which creates the series) to a counter."""
        if value < 0:
            return
        counter = self._counters.get(name)
        if counter is None:
            counter = workflow.metric_meter().create_counter(name, self._specs[name].description)
            self._counters[name] = counter
        counter.add(value, labels)

    def synced(self, mode: str, action: str, *, error: bool, took: timedelta) -> None:
        """POL-49: one sample per sync of a live Job."""
        labels = {"completion_mode": mode, "result": "error" if error else "success", "action": action}
        if self._duration is None:
            self._duration = workflow.metric_meter().create_histogram_float(
                jobmetrics.SYNC_DURATION, self._specs[jobmetrics.SYNC_DURATION].description, "s")
        self._duration.record(max(took.total_seconds(), 0.0), labels)
        self.add(jobmetrics.SYNCS, 1, **labels)

    def written(self, before: JobStatusView, after: JobStatusView, snap: JobSnapshot) -> None:
        """POL-51, POL-52, POL-55: what a successful status write finished."""
        mode = jobmetrics.completion_mode(snap.spec)
        rises = jobmetrics.status_rises(before, after, snap.spec)
        self.add(jobmetrics.PODS_FINISHED, rises.pods_succeeded, completion_mode=mode, result="succeeded")
        self.add(jobmetrics.PODS_FINISHED, rises.pods_failed, completion_mode=mode, result="failed")
        limit = jobmetrics.backoff_limit_label(snap.spec)
        if rises.indexes_succeeded is not None:
            self.add(jobmetrics.FINISHED_INDEXES, rises.indexes_succeeded, status="succeeded", backoffLimit=limit)
        if rises.indexes_failed:
            self.add(jobmetrics.FINISHED_INDEXES, rises.indexes_failed, status="failed", backoffLimit=limit)
        finished = jobmetrics.job_finished(before, after)
        if finished is not None:
            self.add(jobmetrics.JOBS_FINISHED, 1, completion_mode=mode, result=finished[0], reason=finished[1])


@workflow.defn(name="Job")
class JobWorkflow:
    """Runs one Job: keeps its Pods going and its status counted, until it finishes or goes."""

    @workflow.init
    def __init__(self, inp: JobInput) -> None:
        self.ns, self.name, self.uid = inp.namespace, inp.name, inp.uid
        self.memory: JobMemory = inp.memory
        self._poked = False
        self._create_backoff = Backoff(timedelta(seconds=10), CREATE_BACKOFF_MAX)
        self._failure_backoff = Backoff(timedelta(seconds=10), CREATE_BACKOFF_MAX)
        self._last: JobSnapshot | None = None
        #: how the Job ends, as decided by a status this workflow read or wrote: still its result
        #: (JOB-5) if the Job is deleted (its TTL, say) before the last finalizer is released
        self._finished: str | None = None
        self.syncs = 0
        self._expect: list[str] = list(inp.expect)  # JOB-26: Pods the next LIST should show
        self.metrics = JobMetrics()
        self._sample: tuple[str, str] | None = None  # POL-49: (completion_mode, action) of this sync
        self._errored = False  # POL-49: this sync met an error (result="error")

    @workflow.signal(name="poke")
    def poke(self) -> None:
        """The Job or one of its Pods changed; sync again."""
        self._poked = True

    @workflow.query(name="describe")
    def describe(self) -> dict[str, Any]:
        """The last snapshot's counts and the durable memory."""
        snap = self._last
        return {
            "namespace": self.ns, "name": self.name, "uid": self.uid, "syncs": self.syncs,
            "status": snap.status.model_dump(mode="json", by_alias=True, context={"readable": True}) if snap else None,
            "pods": len(snap.pods) + snap.rest.pods if snap else None,
            "backoff": self.memory.backoff.model_dump(mode="json", by_alias=True),
        }

    @workflow.run
    async def run(self, inp: JobInput) -> str:
        while True:
            self._poked = False
            started = workflow.now()
            try:
                outcome, requeue = await self.sync()
            except ActivityError as err:
                # A permanent Kubernetes refusal (400/403/422) of a step: report it, keep the Job's
                # state, and try again later rather than failing (and forgetting) the workflow.
                self._errored = True
                workflow.logger.error("Job %s/%s: sync failed: %s", self.ns, self.name, err.cause or err)
                await self._event("Warning", "SyncFailed", str(err.cause or err)[:500])
                outcome, requeue = None, self._failure_backoff.next()
            else:
                self._failure_backoff.reset()
            if self._sample is not None:
                self.metrics.synced(*self._sample, error=self._errored, took=workflow.now() - started)
            if outcome is not None:
                return outcome
            if workflow.info().is_continue_as_new_suggested():
                await self._continue_as_new(requeue)
            await self._wait(requeue)

    async def _wait(self, requeue: timedelta | None) -> None:
        """Until a poke, or ``requeue`` (None: no timer)."""
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._poked, timeout=requeue,
                timeout_summary=f"Job {self.ns}/{self.name}: look again" if requeue else None)

    async def _continue_as_new(self, requeue: timedelta | None) -> None:
        """JOB-94: start afresh with the durable memory, in a workflow task of its own.

        The new run syncs first, so the poke that woke this one is served. Runs from before the
        patch continued as new at the end of the sync's task.
        """
        if workflow.patched(CONTINUE_AS_NEW_AT_WAKE):
            # A poke that came during the sync is served by the new run: wait for the next one (the
            # bridge sends one a tick at most, so the task it starts has that tick to itself) or
            # for the timer, at least a second, whichever comes first.
            self._poked = False
            await self._wait(None if requeue is None else max(requeue, timedelta(seconds=1)))
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(JobInput(namespace=self.ns, name=self.name, uid=self.uid, memory=self.memory,
                                          expect=self._expect))

    async def sync(self) -> tuple[str | None, timedelta | None]:
        """One sync; returns the final outcome (to end the workflow) and when to look again."""
        self.syncs += 1
        snap = await self._observe()
        plan = jobsync.plan_sync(snap, self.memory, workflow.now())
        self._sample = None if snap.gone or plan.finished else (jobmetrics.completion_mode(snap.spec), plan.action)
        self._expect = self.expected_pods(snap, plan)
        released_unmatched = await self.release_unmatched(snap, plan)  # JOB-26, before all else
        if plan.delete:
            await self._delete(plan.delete, release=False)
        if plan.release_and_delete:
            await self._delete(plan.release_and_delete, release=True)
        create_backoff = await self.create_pods(plan.create, plan.creation_reason) if plan.create and not snap.gone \
            else None
        folded = await self._track(snap, plan)
        if folded is None:
            return None, timedelta(0)  # the Job moved on since the snapshot: look again
        for ev in plan.events:
            await self._event(ev.type, ev.reason, ev.message)
        done, requeue = jobsync.after_sync(snap, folded, plan, set(self.memory.finalizers_removed), released_unmatched)
        if done:
            workflow.logger.info("Job %s/%s %s; no Pod holds the tracking finalizer", self.ns, self.name,
                                 "is gone" if snap.gone else "finished")
            return self._finished or "gone", None  # not gone: just set from the finished condition
        if create_backoff is not None:
            return None, create_backoff  # refused (quota-like): wait, however much else is pending
        return None, requeue

    async def _observe(self) -> JobSnapshot:
        """Read the Job and its Pods, and keep what the read says in the durable memory."""
        last = self._last
        self._errored = False
        self._sample = (None if last is None or last.gone or finished_condition(last.status.conditions) is not None
                        else (jobmetrics.completion_mode(last.spec), "reconciling"))  # if the read fails
        snap = await self._call(
            observe_job, ObserveJobInput(namespace=self.ns, name=self.name, uid=self.uid, expect=self._expect,
                                         memory=self.memory),
            local=True)
        self._last = snap
        self._reached(snap.pods_rv)
        if not snap.gone:
            self._note_end(snap.status)
        self._trim_memory(snap)
        return snap

    async def _delete(self, pods: list[str], *, release: bool) -> None:
        res = await self._call(delete_job_pods, DeletePodsInput(namespace=self.ns, pods=pods, release=release))
        self._reached(res.pods_rv)

    async def _track(self, snap: JobSnapshot, plan: SyncPlan) -> JobStatusView | None:
        """The tracking protocol (JOB-30 to JOB-34): record, release, fold. The status the Job now
        has, or None if a write found the Job changed since the snapshot."""
        status, rv = snap.status, snap.resource_version
        if plan.record is not None and not snap.gone:  # step 1
            written = await self._write(plan.record, snap.status, snap, rv)
            if written is None:
                return None
            status, rv = plan.record, written
            self._note_end(status)
        # The plan's backoff record counts the failures just recorded: kept now, because once step 2
        # labels their Pods released the next snapshot will not show them again (JOB-91).
        self.memory = self.memory.model_copy(update={"backoff": plan.backoff, "counted_backoff": plan.counted_backoff})
        for action, n in sorted(Counter(plan.policy_actions).items()):  # POL-53, POL-18: once step 1 is written
            self.metrics.add(jobmetrics.POD_FAILURES_HANDLED, n, action=action)
        if plan.release:  # step 2
            await self._release(snap, plan.release)
        folded = jobsync.fold(status, snap.pods, set(self.memory.finalizers_removed), snap.spec, workflow.now(),
                              held_elsewhere=snap.rest.holding)
        if folded != status and not snap.gone:  # step 3
            if await self._write(folded, status, snap, rv) is None:
                return None
            self._note_end(folded)
        return folded

    async def _release(self, snap: JobSnapshot, names: list[str]) -> None:
        """Step 2: remove the Pods' finalizers; their uids join the durable memory (JOB-38)."""
        uids = {p.name: p.uid for p in [*snap.pods, *snap.unmatched]}
        ended = {p.name for p in snap.pods if p.finished}
        res = await self._call(release_job_pods, ReleaseInput(
            namespace=self.ns, pods=names, finished=[n for n in names if n in ended]))
        self._reached(res.pods_rv)
        self.memory = self.memory.model_copy(update={"finalizers_removed": [
            *self.memory.finalizers_removed, *(uids[n] for n in res.names if n in uids)]})

    def _note_end(self, status: JobStatusView) -> None:
        """Remember how a status the Job is known to carry (read, or written) decides its end (JOB-5).

        A sync writes SuccessCriteriaMet (step 1) and Complete only once the Pods are counted
        (step 3). A Job deleted in between (a TTL of a second after the Complete of a sync whose
        workflow task the server then refused, for a signal that came in meanwhile) still ends
        this workflow with Complete.
        """
        if (end := jobsync.decided_end(status.conditions)) is not None:
            self._finished = end

    async def release_unmatched(self, snap: JobSnapshot, plan: SyncPlan) -> set[str]:
        """JOB-26: take the Job's ownerReference and finalizer off the Pods that stopped matching; their names."""
        if not plan.release_unmatched or not workflow.patched(RELEASE_UNMATCHED_PATCH):
            return set()
        uids = {p.name: p.uid for p in snap.unmatched}
        done = await self._call(release_unmatched_job_pods, ReleaseUnmatchedInput(
            namespace=self.ns, job_uid=self.uid, pods={n: uids[n] for n in plan.release_unmatched}))
        return set(done.names)

    def expected_pods(self, snap: JobSnapshot, plan: SyncPlan) -> list[str]:
        """JOB-26: the Pods the next sync's LIST must show, unless relabeled (those holding the finalizer
        whose removal is not requested; the Pods this sync creates are added as they are made)."""
        removed = set(self.memory.finalizers_removed)
        dropped = {*plan.release, *plan.release_and_delete}
        return sorted(p.name for p in snap.pods if p.has_finalizer and p.uid not in removed and p.name not in dropped)

    async def create_pods(self, pods: list[PodToCreate], reason: str = "new") -> timedelta | None:
        """Create Pods; a rejected template fails the Job, a quota-like refusal backs off."""
        rnd = workflow.random()  # replayed identically: a retried activity asks for the same names
        pods = [p.model_copy(update={"suffix": "".join(rnd.choice(NAME_ALPHABET) for _ in range(5))}) for p in pods]
        res = await self._call(
            create_job_pods, CreatePodsInput(namespace=self.ns, name=self.name, uid=self.uid,
                                             indexes=[p.index for p in pods], pods=pods))
        self._expect += res.created
        self._reached(res.pods_rv)
        # POL-56: each attempt once; creates refused because the namespace is terminating are in neither
        self.metrics.add(jobmetrics.PODS_CREATION, len(res.created), reason=reason, status="succeeded")
        if res.failed + res.refused:
            self._errored = True
            self.metrics.add(jobmetrics.PODS_CREATION, res.failed + res.refused, reason=reason, status="failed")
        if res.invalid:
            await self._event("Warning", "FailedCreate", f"Error creating: {res.invalid}")
            await self._fail("PodCreationFailed", f"Pod creation was rejected: {res.invalid}")
            return None
        if res.forbidden:
            await self._event("Warning", "FailedCreate", f"Error creating: {res.forbidden}")
            return self._create_backoff.next()
        self._create_backoff.reset()
        return None

    async def _fail(self, reason: str, message: str) -> None:
        """Mark the Job failing (FailureTarget); the next syncs finish it as upstream would (JOB-75)."""
        snap = self._last
        if snap is None or snap.gone or finished_condition(snap.status.conditions) is not None:
            return
        now = workflow.now()
        conditions = [c for c in snap.status.conditions if c.type != "FailureTarget"] + [
            Condition(type="FailureTarget", status="True", reason=reason, message=message, last_transition_time=now)]
        status = snap.status.model_copy(update={"conditions": conditions,
                                                "start_time": snap.status.start_time or now})
        await self._write(status, snap.status, snap, snap.resource_version)
        self._poked = True

    async def _write(self, status: JobStatusView, before: JobStatusView, snap: JobSnapshot, rv: str) -> str | None:
        """Write ``status`` over ``before`` if the Job is still at ``rv``; the new resourceVersion, or None if stale/gone."""
        res = await self._call(
            write_job_status,
            WriteStatusInput(namespace=self.ns, name=self.name, uid=self.uid, resource_version=rv, status=status,
                             indexed=snap.spec.completion_mode == "Indexed"),
            local=True)
        if res.gone or res.stale:
            self._errored = True  # upstream's status update fails the sync (POL-49 result="error")
            return None
        self.metrics.written(before, status, snap)
        return res.resource_version

    def _reached(self, rv: int) -> None:
        """JOB-93: the next sync's read of the Pods must have reached ``rv``, which this one read or wrote."""
        if rv > self.memory.pods_rv:
            self.memory = self.memory.model_copy(update={"pods_rv": rv})

    def _trim_memory(self, snap: JobSnapshot) -> None:
        """Keep only the removed-finalizer uids a fresh read still shows holding it (bounded memory)."""
        keep = jobsync.prune_finalizers_removed(snap, self.memory.finalizers_removed)
        if keep != self.memory.finalizers_removed:
            self.memory = self.memory.model_copy(update={"finalizers_removed": keep})

    async def _event(self, type_: EventType, reason: str, message: str) -> None:
        """Record an Event once per reason and message (kept across continue-as-new, as the CronJob's)."""
        key = f"{reason}:{message}"
        if key in self.memory.reported:
            return
        self.memory = self.memory.model_copy(update={"reported": [*self.memory.reported, key][-REPORTED:]})
        await record_event_best_effort(EventInput(
            ref=ObjectRef(kind="Job", namespace=self.ns, name=self.name, uid=self.uid),
            type=type_, reason=reason, message=message, component=COMPONENT))

    async def _call(self, activity: Callable[[In], Out], arg: In, *, local: bool = False) -> Out:
        """Run a declared activity: ``local`` for one object's read or write, else the batched,
        heartbeating kind that touches up to 500 Pods."""
        if local:
            return await workflow.execute_local_activity(
                activity, arg, start_to_close_timeout=K8S_CALL_TIMEOUT, retry_policy=K8S_RETRY)
        return await workflow.execute_activity(
            activity, arg, start_to_close_timeout=BULK_TIMEOUT, heartbeat_timeout=BULK_HEARTBEAT, retry_policy=K8S_RETRY)
