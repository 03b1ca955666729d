"""The bridge's routers, one per controller: which observed changes a workflow must hear of.

Layer: worker. The bridge (worker/bridge.py) hands every informer event to each router that
reads its kind; a router decides, for its controller alone, whether the change needs a workflow
started or signalled, and sends it by the workflow's deterministic ID (workflows/identity.py).
What an object *is* for a controller (in scope, finished, expired, its problem) is decided by the
pure models in workflows/models/; a router only turns their answers into starts and signals, and
remembers what it last sent, so a replayed event, a relist or a resync sends nothing new. It is
the place to decide that a signal is not needed.

- :class:`TTLRouter` (docs/ttl.md): signal-with-start ``TTLAfterFinished`` for a Job or Pod that
  needs cleanup; tell a running workflow of a change or a deletion; record ``TTLNotApplied``.
- :class:`CronJobRouter` (docs/cronjob.md): signal-with-start ``CronJob`` when its spec changes;
  ``job_observed`` when one of its Jobs finishes or goes.
- :class:`JobRouter` (docs/job.md): start ``Job`` for a Job batchd runs; ``poke`` it, coalesced,
  when the Job or one of its Pods changes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from kube.client import Clock, Kube, try_record_event
from worker.commands import ttl_query
from workflows import cronjob as cronjob_workflow
from workflows.identity import (
    EXPIRES_AT,
    K8S_KIND,
    K8S_NAME,
    K8S_NAMESPACE,
    K8S_UID,
    OBSERVED_KEY_MEMO,
    OBSERVED_MEMO,
    TTL_HOLD_MEMO,
    cronjob_workflow_id,
    job_workflow_id,
    ttl_task_queue,
    ttl_workflow_id,
)
from workflows.job import JobWorkflow
from workflows.jobmetrics import (
    METRICS,
    TERMINATED_PODS_TRACKING_FINALIZER,
    tracking_finalizer_event,
)
from workflows.models.common import (
    EventInput,
    Job,
    ObjectRef,
    Pod,
    controller_of,
    finished_condition,
)
from workflows.models.cronjob import (
    CronJob,
    CronJobInput,
    CronJobObservation,
    CronJobState,
    JobSummary,
)
from workflows.models.job import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    JOB_TRACKING_FINALIZER,
    POD_JOB_LABEL,
    TRACKING_LABEL,
    Dependency,
    JobInput,
    JobOptions,
    job_in_scope,
    sync_key,
)
from workflows.models.ttl import (
    TTLInput,
    TTLObservation,
    pod_ttl_in_scope,
    still_waiting,
    ttl_in_scope,
)
from workflows.policies import Backoff
from workflows.ttl import TTLAfterFinishedWorkflow

log = logging.getLogger("batchd.bridge")

_meter = metrics.get_meter("batchd.bridge")
#: POL-54: upstream's informer-side Job controller metric, for the Pods batchd watches
TRACKING_FINALIZER = _meter.create_counter(
    TERMINATED_PODS_TRACKING_FINALIZER,
    description=next(m.description for m in METRICS if m.name == TERMINATED_PODS_TRACKING_FINALIZER))

#: The most deleted Jobs a CronJob's next report carries (CJ-46); an older one the history limits
#: still count is dropped from their count when their delete finds it gone.
ALSO_GONE = 100
#: seconds a starting bridge spends reading the TTL workflows' memos (a page of 1,000 a call)
RECALL_TIMEOUT = 120.0
#: seconds between two pokes of one Job workflow for its Pods' changes (upstream's SyncJobBatchPeriod)
POKE_GAP = 1.0


class Workflows:
    """How the routers reach Temporal: signal-with-start and signal, retried on transient failures."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client, self.task_queue = client, task_queue

    async def start(self, run: Any, arg: Any, *, ref: ObjectRef, wid: str, signal: str,
                    signal_args: Iterable[Any] = (), summary: str) -> None:
        """Start the workflow ``wid`` unless it runs, and signal it either way (signal-with-start)."""
        await _retry(lambda: self.client.start_workflow(
            run, arg, id=wid, task_queue=self.task_queue, start_signal=signal, start_signal_args=list(signal_args),
            search_attributes=search_attributes(ref), static_summary=summary,
        ))

    async def start_or_signal(self, run: Any, arg: Any, observation: Any, *, ref: ObjectRef, wid: str,
                              memo: dict[str, Any], shown: Iterable[SearchAttributePair[Any]] = (),
                              summary: str, task_queue: str | None = None) -> None:
        """Start the workflow ``wid`` with ``arg`` (which carries ``observation``), or signal the
        observation to the one that runs: a start alone costs one action where signal-with-start costs two.

        ``memo`` and ``shown`` (search attributes beyond the object's identity) let the new
        workflow show the observation from its first moment without upserting it; a new one runs
        on ``task_queue`` (default: the bridge's).
        """
        attributes = TypedSearchAttributes([*search_attributes(ref).search_attributes, *shown])
        for _ in range(3):  # a workflow that ended between our start and our signal is started anew
            try:
                await _retry(lambda: self.client.start_workflow(
                    run, arg, id=wid, task_queue=task_queue or self.task_queue, memo=memo, search_attributes=attributes,
                    static_summary=summary, id_conflict_policy=WorkflowIDConflictPolicy.FAIL))
                return
            except WorkflowAlreadyStartedError:
                pass
            try:
                await _retry(lambda: self.client.get_workflow_handle(wid).signal("observe", observation))
                return
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
        raise RuntimeError(f"workflow {wid} kept ending between a start and a signal")

    async def signal(self, wid: str, arg: Any = None, *, name: str = "observe") -> None:
        """Signal a running workflow; one that does not run (never started, or ended) has nothing to hear."""
        handle: WorkflowHandle[Any, Any] = self.client.get_workflow_handle(wid)
        args = [] if arg is None else [arg]
        try:
            await _retry(lambda: handle.signal(name, *args))
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise


class TTLRouter:
    """TTL-after-finished: one workflow per Job or TTL-labelled Pod that needs cleanup (docs/ttl.md)."""

    def __init__(self, workflows: Workflows, kube: Kube, clock: Clock, *, scope: str) -> None:
        self.workflows, self.kube, self.clock, self.scope = workflows, kube, clock, scope
        self._dispatched: dict[str, str] = {}  # workflow id -> decision key last sent (WATCH-3)
        # uid -> problems already recorded as an Event, until the object is deleted
        self._warned: dict[str, set[str]] = {}

    def forget(self) -> None:
        """Forget what was sent (WATCH-4: another replica may have sent since)."""
        self._dispatched.clear()

    async def recall(self, namespaces: Iterable[str | None]) -> None:
        """WATCH-2: learn, from their memo, which observation (its WATCH-3 key) each running TTL workflow has.

        Every replica's bridge lists everything when it starts; without this, each start would
        signal every TTL workflow again (a workflow task, a replay on a cold cache, and a billed
        action each), which under restarts buries the workflows that have real work to do. A
        memo that visibility has not caught up with yet only costs a signal that was not needed.
        """
        try:
            async with asyncio.timeout(RECALL_TIMEOUT):
                for ns in namespaces:
                    async for ex in self.workflows.client.list_workflows(ttl_query(ns)):
                        key = await ex.memo_value(OBSERVED_KEY_MEMO, None)
                        rv = await ex.memo_value(OBSERVED_MEMO, None)  # a workflow started before the key
                        if isinstance(key, str) and key:
                            self._dispatched.setdefault(ex.id, key)
                        elif isinstance(rv, str) and rv:
                            self._dispatched.setdefault(ex.id, f"rv:{rv}")
        except Exception as err:  # visibility is an optimisation here, never a precondition
            log.warning("could not read the TTL workflows' memos (%s); each is told its object again", err)
        log.info("%d running TTL workflows already have their object's observation", len(self._dispatched))

    async def job(self, etype: str, job: Job) -> None:
        """A Job changed: route it if its TTL is batchd's (TTL-1)."""
        if ttl_in_scope(job, self.scope):
            await self.observe(etype, TTLObservation.of_job(job))

    async def pod(self, etype: str, obj: dict[str, Any]) -> None:
        """A Pod changed: route it if it asks for a TTL (TTL-17); only those Pods are parsed."""
        if pod_ttl_in_scope((obj.get("metadata") or {}).get("labels") or {}):
            await self.observe(etype, TTLObservation.of_pod(Pod.model_validate(obj)))

    async def observe(self, etype: str, obs: TTLObservation) -> None:
        """Start or inform the TTL workflow of one object, if this change is news to it."""
        ref = obs.ref
        wid = ttl_workflow_id(ref.kind, ref.namespace, ref.name, ref.uid)
        if (event := obs.not_applied()) is not None and event.message not in self._warned.get(ref.uid, ()):
            self._warned.setdefault(ref.uid, set()).add(event.message)
            await self._record(event)
        if etype == "DELETED":
            self._dispatched.pop(wid, None)
            self._warned.pop(ref.uid, None)
            if self._waiting(obs):
                await self.workflows.signal(wid, obs.model_copy(update={"gone": True}))
            return
        key = obs.decision_key()
        if self._dispatched.get(wid) in (key, f"rv:{obs.resource_version}"):
            return  # WATCH-3: the workflow has this observation, or one that decides the same
        if obs.needs_cleanup():
            expiry = obs.shown_expiry()
            await self.workflows.start_or_signal(
                TTLAfterFinishedWorkflow.run, TTLInput(observation=obs), obs, ref=ref, wid=wid,
                memo={OBSERVED_KEY_MEMO: key, **({TTL_HOLD_MEMO: obs.hold_reason} if obs.held else {})},
                shown=[SearchAttributePair(EXPIRES_AT, expiry)] if expiry else [],
                summary=f"TTL-after-finished of {ref.kind} {ref.key()}",
                task_queue=ttl_task_queue(self.workflows.task_queue))
            self._dispatched[wid] = key
        elif wid in self._dispatched and (not obs.deleting or self._waiting(obs)):
            # TTL removed, or someone else began deleting it: the workflow re-checks and ends.
            await self.workflows.signal(wid, obs)
            self._dispatched[wid] = key

    async def gone(self, ref: ObjectRef) -> None:
        """WATCH-1: end the workflow of a deleted Job or Pod from its identity alone."""
        if ref.kind in ("Job", "Pod"):
            await self.workflows.signal(ttl_workflow_id(ref.kind, ref.namespace, ref.name, ref.uid),
                                        TTLObservation(ref=ref, gone=True))

    def _waiting(self, obs: TTLObservation) -> bool:
        """Whether the object's workflow still waits, so a deletion by someone else must be told.

        An object deleted at or after its expiry was almost always deleted by its own workflow,
        which is completing at that moment; a signal then would only make the server reject that
        completion (unhandled command) and replay it. If someone else deleted it after expiry,
        the workflow is awake anyway and finds it gone on its fresh read.
        """
        return still_waiting(obs, self.clock.now())

    async def _record(self, event: EventInput) -> None:
        log.warning("%s %s: %s", event.ref.kind, event.ref.key(), event.message)
        await asyncio.to_thread(try_record_event, self.kube, event, now=self.clock.now(), log=log)


class CronJobRouter:
    """CronJobs: one workflow per managed CronJob, told of spec changes and of its Jobs' ends."""

    def __init__(self, workflows: Workflows, *, lead: float, notify: bool = False) -> None:
        self.workflows, self.lead, self.notify = workflows, lead, notify
        self._managed: dict[tuple[str, str], str] = {}  # (namespace, name) -> uid of the CronJobs batchd manages
        self._sent: dict[str, str] = {}  # CronJob uid -> decision key last sent
        self._reported: dict[str, str] = {}  # Job uid -> outcome last reported to its CronJob's workflow
        # (namespace, CronJob) -> uids of its Jobs deleted after their end was reported, for its next report
        self._also_gone: dict[tuple[str, str], list[str]] = {}

    def forget(self) -> None:
        """Forget what was sent (WATCH-4: another replica may have sent since)."""
        self._sent.clear()
        self._reported.clear()

    def track(self, etype: str, obj: dict[str, Any]) -> None:
        """Note a managed CronJob as its event is queued (informer thread), before any of its Jobs' events."""
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if etype == "DELETED":
            self._managed.pop(key, None)
            self._also_gone.pop(key, None)
        else:
            self._managed[key] = meta.get("uid", "")

    async def cronjob(self, etype: str, obj: dict[str, Any]) -> None:
        """Start or inform the CronJob's workflow; status-only changes (its own writes) are skipped."""
        obs = CronJobObservation.of(CronJob.model_validate(obj)).model_copy(
            update={"lead_seconds": self.lead, "cloudevents": self.notify})
        wid = cronjob_workflow_id(obs.namespace, obs.name)
        if etype == "DELETED":
            self._sent.pop(obs.uid, None)
            await self.workflows.signal(wid, obs.model_copy(update={"gone": True}))
            return
        seen = obs.decision_key()
        if self._sent.get(obs.uid) == seen:
            return
        if held := self._also_gone.get((obs.namespace, obs.name)):
            # CJ-46: a lowered history limit counts at once, and only the Jobs that are there
            await self._job_observed(obs.namespace, obs.name,
                                     JobSummary(name="", uid=held.pop(), owner_uid=obs.uid, gone=True))
        state = CronJobState(observation=obs, active=obs.status.active,
                             last_schedule_time=obs.status.last_schedule_time,
                             last_successful_time=obs.status.last_successful_time)
        inp = CronJobInput(state=state, lead_seconds=self.lead, run_events=cronjob_workflow.HISTORY_EVENTS)
        await self.workflows.start(cronjob_workflow.CronJobWorkflow.run, inp,
                                   ref=ObjectRef(kind="CronJob", namespace=obs.namespace, name=obs.name, uid=obs.uid),
                                   wid=wid, signal="observe", signal_args=[obs],
                                   summary=f"CronJob {obs.namespace}/{obs.name}")
        self._sent[obs.uid] = seen

    async def job(self, etype: str, job: Job, obj: dict[str, Any]) -> None:
        """Tell a managed CronJob's workflow that one of its Jobs finished or went away."""
        owner = job.metadata.controller_ref()
        if owner is None or owner.kind != "CronJob":
            return
        if self._managed.get((job.metadata.namespace, owner.name)) != owner.uid:
            return  # not a CronJob batchd manages (or a stale owner reference)
        summary = JobSummary.of(job, obj.get("status"))
        if etype == "DELETED":
            if self._reported.pop(job.metadata.uid, None) is not None:
                # CJ-46: its workflow knows it ended, and its going changes nothing it shows: only the
                # finished Jobs its history limits count, which they next do at a Job's end. So it
                # rides with the next report rather than costing a workflow task of its own, as
                # every history-limit and TTL delete of a finished Job would.
                gone = self._also_gone.setdefault((job.metadata.namespace, owner.name), [])
                gone.append(job.metadata.uid)
                del gone[:-ALSO_GONE]
                return
            summary = summary.model_copy(update={"gone": True})
        elif summary.outcome is None or self._reported.get(job.metadata.uid) == summary.outcome:
            return  # running, or already reported
        else:
            self._reported[job.metadata.uid] = summary.outcome
        await self._job_observed(job.metadata.namespace, owner.name, summary)

    async def vanished(self, cronjob: dict[str, Any], ref: dict[str, Any]) -> None:
        """CJ-42: an active Job of a managed CronJob (``cronjob``'s metadata) no longer exists."""
        summary = JobSummary(name=ref.get("name", ""), uid=ref["uid"], owner_uid=cronjob.get("uid", ""), gone=True)
        await self._job_observed(cronjob.get("namespace", ""), cronjob.get("name", ""), summary)

    async def _job_observed(self, namespace: str, cronjob: str, summary: JobSummary) -> None:
        also_gone = self._also_gone.pop((namespace, cronjob), None)
        if also_gone:
            summary = summary.model_copy(update={"also_gone": tuple(also_gone)})
        try:
            await self.workflows.signal(cronjob_workflow_id(namespace, cronjob), summary, name="job_observed")
        except BaseException:
            if also_gone:  # for the report after it
                self._also_gone.setdefault((namespace, cronjob), [])[:0] = also_gone
            raise

    async def gone(self, ref: ObjectRef) -> None:
        """WATCH-1: end the workflow of a deleted CronJob from its identity alone."""
        if ref.kind == "CronJob":
            await self.workflows.signal(cronjob_workflow_id(ref.namespace, ref.name),
                                        CronJobObservation(namespace=ref.namespace, name=ref.name, uid=ref.uid, gone=True))


class JobRouter:
    """The Job controller: one workflow per Job batchd runs, poked when the Job or its Pods change."""

    def __init__(self, workflows: Workflows, *, scope: str, notify: bool = False) -> None:
        self.workflows, self.scope, self.notify = workflows, scope, notify
        self._sent: dict[str, tuple[Any, ...]] = {}  # Job uid -> what its workflow was last told
        self._to_poke: set[str] = set()  # workflows to poke on the next tick (coalesces Pod events)
        #: JOB-AFTER: (namespace, name) of a Job awaited -> the workflows of the Jobs that await it
        self._dependents: dict[tuple[str, str], set[str]] = {}
        self._awaits: dict[str, list[tuple[str, str]]] = {}  # the other way round, to drop a Job that runs
        self._told: set[tuple[str, str, str]] = set()  # (workflow, Job uid, its end) already signalled

    def forget(self) -> None:
        """Forget what was sent (WATCH-4: another replica may have sent since)."""
        self._sent.clear()
        self._to_poke.clear()
        self._told.clear()

    async def job(self, etype: str, job: Job) -> None:
        """Start (or poke) the workflow of a Job batchd runs (JOB-1); its own status writes are skipped.

        Any Job's end is also told to the workflows that wait for it (JOB-AFTER).
        """
        await self._tell_dependents(job, deleted=etype == "DELETED")
        if not job_in_scope(job, self.scope):
            return
        meta = job.metadata
        wid = job_workflow_id(meta.namespace, meta.name, meta.uid)
        self._note_awaits(job, wid, waits=etype != "DELETED")
        seen = sync_key(job)
        if etype != "DELETED" and self._sent.get(meta.uid) == seen:
            return
        finished = finished_condition(job.status.conditions) is not None
        if etype == "DELETED":
            await self.workflows.signal(wid, name="poke")  # a running workflow follows through; none is started
        elif finished:
            pass  # the workflow wrote it, and looks again while Pods still hold the finalizer (JOB-5)
        else:
            await self.workflows.start(JobWorkflow.run, JobInput(namespace=meta.namespace, name=meta.name, uid=meta.uid,
                                                                 notify=self.notify),
                                       ref=ObjectRef(kind="Job", namespace=meta.namespace, name=meta.name, uid=meta.uid),
                                       wid=wid, signal="poke", summary=f"Job {meta.namespace}/{meta.name}")
        if etype == "DELETED":
            self._sent.pop(meta.uid, None)
        else:
            self._sent[meta.uid] = seen

    def pod(self, obj: dict[str, Any]) -> None:
        """A Pod batchd created changed: poke its Job's workflow on the next tick.

        Not for a Pod counted and released (JOB-91): no decision reads it again, and the sync that
        released it looks again anyway. A Job's last sync released its last Pods, so those pokes
        arrived as it completed and made Temporal refuse the completion (one failed task a Job).
        """
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(TRACKING_LABEL) == "released" and JOB_TRACKING_FINALIZER not in (meta.get("finalizers") or []):
            return
        if POD_JOB_LABEL in labels and (wid := _job_of_pod(meta)) is not None:
            self._to_poke.add(wid)

    async def gone(self, ref: ObjectRef) -> None:
        """WATCH-1: a deleted Job's workflow follows through from its identity alone."""
        if ref.kind == "Job":
            await self.workflows.signal(job_workflow_id(ref.namespace, ref.name, ref.uid), name="poke")
            await self._tell(ref.namespace, Dependency(name=ref.name, uid=ref.uid, gone=True))

    def _note_awaits(self, job: Job, wid: str, *, waits: bool) -> None:
        """JOB-AFTER: index the Jobs a running Job awaits; a finished or deleted one awaits nothing."""
        before = self._awaits.pop(wid, [])
        for key in before:
            self._dependents.get(key, set()).discard(wid)
            if not self._dependents.get(key):
                self._dependents.pop(key, None)
        after = JobOptions.of(job.metadata.annotations).after
        if not waits or not after or finished_condition(job.status.conditions) is not None:
            if before:
                self._told = {t for t in self._told if t[0] != wid}
            return
        self._awaits[wid] = [(job.metadata.namespace, name) for name in after]
        for key in self._awaits[wid]:
            self._dependents.setdefault(key, set()).add(wid)

    async def _tell_dependents(self, job: Job, *, deleted: bool) -> None:
        """JOB-AFTER: a Job's end, or its deletion, to the workflows that wait for it."""
        meta = job.metadata
        if (meta.namespace, meta.name) not in self._dependents:
            return
        if finished_condition(job.status.conditions) is None and not deleted:
            return
        await self._tell(meta.namespace, Dependency.of(job, gone=deleted))

    async def _tell(self, namespace: str, dep: Dependency) -> None:
        for wid in sorted(self._dependents.get((namespace, dep.name), ())):
            told = (wid, dep.uid, f"{dep.outcome}:{dep.gone}")
            if told not in self._told:
                await self.workflows.signal(wid, dep, name="dependency")
                self._told.add(told)

    async def poker(self, interval: float = 0.2, gap: float = POKE_GAP) -> None:
        """Poke each Job workflow whose Pods changed, on the next tick and at most once a ``gap``.

        However many Pod events came in, a workflow gets one poke a tick; one poked less than
        ``gap`` ago waits for the rest of it, as upstream batches a Job's syncs a second apart
        (``SyncJobBatchPeriod``): a Job of 1,000 busy Pods then syncs about once a second, each sync
        taking in a second's changes, instead of reading and writing the Job five times as often.
        """
        poked: dict[str, float] = {}  # workflow -> when it was last poked, within the last gap
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            poked = {wid: at for wid, at in poked.items() if now - at < gap}
            batch = {wid for wid in self._to_poke if wid not in poked}
            if not batch:
                continue
            self._to_poke -= batch
            results = await asyncio.gather(*(self.workflows.signal(wid, name="poke") for wid in batch),
                                           return_exceptions=True)
            for wid, res in zip(batch, results, strict=True):
                if isinstance(res, Exception):  # poked again next tick: no resync repeats a Pod's change (WATCH-6)
                    log.warning("could not poke %s: %s", wid, res)
                    self._to_poke.add(wid)
                else:
                    poked[wid] = now

    @staticmethod
    def count_tracking_finalizer(old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """POL-54: count a Pod entering or leaving "finished and holding the tracking finalizer"."""
        event = tracking_finalizer_event(old, new)
        if event is not None:
            TRACKING_FINALIZER.add(1, {"event": event})


def _job_of_pod(meta: dict[str, Any]) -> str | None:
    """The Job workflow a Pod event concerns: its controlling Job, else the Job its labels name.

    The controller reference goes first: a Pod relabeled so that it no longer matches its Job's
    selector (even the ``controller-uid`` label changed) must still wake its Job, which releases
    it (JOB-26); an orphan is routed by its labels, for adoption (JOB-25).
    """
    owner = controller_of(meta)
    ns = meta.get("namespace", "")
    if owner is not None:
        if owner.get("kind") == "Job" and owner.get("name") and owner.get("uid"):
            return job_workflow_id(ns, owner["name"], owner["uid"])
        return None
    labels = meta.get("labels") or {}
    if labels.get(CONTROLLER_UID_LABEL) and labels.get(JOB_NAME_LABEL):
        return job_workflow_id(ns, labels[JOB_NAME_LABEL], labels[CONTROLLER_UID_LABEL])
    return None


def search_attributes(ref: ObjectRef) -> TypedSearchAttributes:
    """``K8sKind``, ``K8sNamespace``, ``K8sName`` and ``K8sUID`` of the object a workflow is for."""
    return TypedSearchAttributes([
        SearchAttributePair(K8S_KIND, ref.kind),
        SearchAttributePair(K8S_NAMESPACE, ref.namespace),
        SearchAttributePair(K8S_NAME, ref.name),
        SearchAttributePair(K8S_UID, ref.uid),
    ])


async def _retry(call: Callable[[], Any], attempts: int = 5) -> Any:
    """Retry a Temporal RPC on transient failures (unavailable, throttled) with backoff."""
    backoff = Backoff(0.2, 5.0)
    for attempt in range(attempts):
        try:
            return await call()
        except RPCError as err:
            transient = err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.RESOURCE_EXHAUSTED,
                                       RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.INTERNAL)
            if not transient or attempt == attempts - 1:
                raise
            await asyncio.sleep(backoff.next())
