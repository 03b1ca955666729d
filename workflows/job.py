"""The Job controller as one durable workflow per Job (finalizer-based Pod tracking, KEP-3939).

Layer: workflows (deterministic). Started and poked by the bridge's Job router (worker/routers.py) on
``job/{ns}/{name}/{uid}`` for Jobs whose ``spec.managedBy`` is ``batchd.io/job-controller``.
Its activities are declared in workflows/models/job.py; the decisions are pure (workflows/decisions/job.py).

Each *sync* mirrors upstream's ``syncJob``:

1. ``observe_job``: a fresh snapshot — the Job and every Pod it owns (orphans adopted, Pods
   that stopped matching its selector set apart);
2. ``decide.plan_sync``: what to release, delete, create, record, and when to look again;
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

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import MetricCounter, MetricHistogramFloat
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import jobmetrics
    from workflows.decisions import job as decide
    from workflows.execute import Wait, WorkflowSide, execute
    from workflows.models.job import Dependency, JobInput, JobSpecView, JobStatusView
    from workflows.policies import Backoff

#: the API server's alphabet for generated names (no vowels, no look-alike digits)
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
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

    def written(self, before: JobStatusView, after: JobStatusView, spec: JobSpecView) -> None:
        """POL-51, POL-52, POL-55: what a successful status write finished."""
        mode = jobmetrics.completion_mode(spec)
        rises = jobmetrics.status_rises(before, after, spec)
        self.add(jobmetrics.PODS_FINISHED, rises.pods_succeeded, completion_mode=mode, result="succeeded")
        self.add(jobmetrics.PODS_FINISHED, rises.pods_failed, completion_mode=mode, result="failed")
        limit = jobmetrics.backoff_limit_label(spec)
        if rises.indexes_succeeded is not None:
            self.add(jobmetrics.FINISHED_INDEXES, rises.indexes_succeeded, status="succeeded", backoffLimit=limit)
        if rises.indexes_failed:
            self.add(jobmetrics.FINISHED_INDEXES, rises.indexes_failed, status="failed", backoffLimit=limit)
        finished = jobmetrics.job_finished(before, after)
        if finished is not None:
            self.add(jobmetrics.JOBS_FINISHED, 1, completion_mode=mode, result=finished[0], reason=finished[1])


@workflow.defn(name="Job")
class JobWorkflow(WorkflowSide):
    """Runs one Job: keeps its Pods going and its status counted, until it finishes or goes."""

    @workflow.init
    def __init__(self, inp: JobInput) -> None:
        self.ns, self.name, self.uid = inp.namespace, inp.name, inp.uid
        self.books = decide.Books(inp.namespace, inp.name, inp.uid, inp.memory, suffix=_suffix,
                                   expect=list(inp.expect), notify=inp.notify)
        self._poked = False
        self._failure_backoff = Backoff(timedelta(seconds=10), decide.CREATE_BACKOFF_MAX)
        self.metrics = JobMetrics()

    @workflow.signal(name="poke")
    def poke(self) -> None:
        """The Job or one of its Pods changed; sync again."""
        self._poked = True

    @workflow.signal(name="dependency")
    def dependency(self, dep: Dependency) -> None:
        """JOB-AFTER: a Job this one waits for ended, or was deleted, as the bridge saw it."""
        self.books.memory = decide.ended(self.books.memory, dep)
        self._poked = True

    @workflow.query(name="describe")
    def describe(self) -> dict[str, Any]:
        """The last snapshot's counts and the durable memory."""
        snap = self.books.last
        return {
            "namespace": self.ns, "name": self.name, "uid": self.uid, "syncs": self.books.syncs,
            "status": snap.status.model_dump(mode="json", by_alias=True, context={"readable": True}) if snap else None,
            "pods": len(snap.pods) + snap.rest.pods if snap else None,
            "backoff": self.books.memory.backoff.model_dump(mode="json", by_alias=True),
            "waitingFor": self.books.waiting,
            "held": snap.options.held if snap else None,
        }

    @workflow.run
    async def run(self, inp: JobInput) -> str:
        b = self.books
        while True:
            self._poked = False
            started = workflow.now()
            try:
                outcome, requeue = await execute(decide.sync(b, workflow.now), self)
            except ActivityError as err:
                # A permanent Kubernetes refusal (400/403/422) of a step: report it, keep the Job's
                # state, and try again later rather than failing (and forgetting) the workflow.
                b.errored = True
                workflow.logger.error("Job %s/%s: sync failed: %s", self.ns, self.name, err.cause or err)
                await execute(decide.report(b, "Warning", "SyncFailed", str(err.cause or err)[:500]), self)
                outcome, requeue = None, self._failure_backoff.next()
            else:
                self._failure_backoff.reset()
            self._poked |= b.again
            b.again = False
            if b.sample is not None:
                self.metrics.synced(*b.sample, error=b.errored, took=workflow.now() - started)
            if outcome is not None:
                return outcome
            if workflow.info().is_continue_as_new_suggested():
                await self._continue_as_new(requeue)
            await self._wait(requeue)

    async def perform(self, step: Any) -> Any:
        """The sync's steps; its metrics go to upstream's instruments."""
        if isinstance(step, decide.CountMetric):
            return self.metrics.add(step.name, step.value, **step.labels)
        if isinstance(step, decide.StatusWritten):
            return self.metrics.written(step.before, step.after, step.spec)
        return await super().perform(step)

    def woken(self) -> bool:
        return self._poked

    async def _wait(self, requeue: timedelta | None) -> None:
        """Until a poke, or ``requeue`` (None: no timer)."""
        await self.perform(Wait(requeue, f"Job {self.ns}/{self.name}: look again" if requeue else None))

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
        workflow.continue_as_new(JobInput(namespace=self.ns, name=self.name, uid=self.uid, memory=self.books.memory,
                                          expect=self.books.expect, notify=self.books.notify))


def _suffix() -> str:
    """Five characters of a Pod's generated name, replayed identically (a retried activity asks
    for the same names)."""
    rnd = workflow.random()
    return "".join(rnd.choice(NAME_ALPHABET) for _ in range(5))
