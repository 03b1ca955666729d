"""Activities of the CronJob workflow: create a Job from the fresh template, delete Jobs, write status.

Layer: activities. Implements the declarations of workflows/models/cronjob.py, which
workflows/cronjob.py calls (as local activities, but for the armed creation, which waits on the
worker's timed queue); registered by worker/temporal.py. Every call is idempotent: the Job name is
deterministic (AlreadyExists on a Job this CronJob controls is success), deletes tolerate 404,
status writes are merge patches of values the workflow owns. Rule ids (CJ-n) are those of docs/cronjob.md.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from opentelemetry import metrics
from temporalio import activity
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.contract import implements
from activities.errors import temporal_errors
from kube.client import Clock, Kube, SystemClock, prestarted_pool, try_record_event
from kube.errors import (
    AlreadyExists,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    namespace_terminating,
)
from workflows.identity import K8S_KIND, K8S_NAME, K8S_NAMESPACE, group_workflow_id
from workflows.models import cronjob as contract
from workflows.models.common import (
    EventInput,
    EventType,
    Job,
    JobStatus,
    ObjectRef,
    controller_of,
    finished_condition,
)
from workflows.models.cronjob import (
    CRONJOB_COMPONENT,
    MANUAL_INSTANTIATE_ANNOTATION,
    SCHEDULED_TIMESTAMP_ANNOTATION,
    CreateJobInput,
    CreateJobResult,
    CronJob,
    CronJobObservation,
    DeleteJobsInput,
    DeleteJobsResult,
    GroupInput,
    GroupReport,
    GroupState,
    JobSummary,
    ObjectReference,
    ReadJobsInput,
    ReadJobsResult,
    SetSuspendInput,
    SyncCronJobInput,
    SyncCronJobResult,
)
from workflows.models.job import JOB_MANAGED_BY
from workflows.times import rfc3339

T = TypeVar("T")
#: Threads for armed creations: when many CronJobs share a schedule time, this many create at once.
CREATORS = 16
#: How long an armed creation that is done waits for the others due at the same instant.
BURST_WAIT = 5.0
#: A burst's completions are handed back at most this many a second, and over at most
#: COMPLETION_SPREAD seconds (see ``create_job_at``).
COMPLETION_RATE = 1000
COMPLETION_SPREAD = 2.0

_meter = metrics.get_meter("batchd.cronjob")
#: Upstream's metric (CJ-38) with finer low buckets added: batchd's timers are sub-second.
CREATION_SKEW = _meter.create_histogram(
    "cronjob_controller_cronjob_job_creation_skew_duration_seconds",
    unit="s",
    description="Time from a Job's scheduled time to its creation by the CronJob workflow",
    explicit_bucket_boundaries_advisory=[0.05, 0.1, 0.25, 0.5] + [float(2**k) for k in range(10)],
)


def _ref(job: dict[str, Any]) -> ObjectReference:
    m = job["metadata"]
    return ObjectReference(name=m["name"], namespace=m["namespace"], uid=m["uid"],
                           resource_version=m.get("resourceVersion"))


def build_job(cronjob: dict[str, Any], inp: CreateJobInput) -> dict[str, Any]:
    """The Job a CronJob creates for one run (CJ-32 to CJ-35), handed to batchd's Job controller.

    The Job's spec shares the template's nested objects with ``cronjob`` (each caller's copy is
    its own, and nothing mutates them), so a creation in a burst does not pay for a deep copy of
    the template (docs/benchmarks.md).
    """
    template = cronjob["spec"].get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    annotations = dict(tmeta.get("annotations") or {})
    if inp.scheduled_annotation and not inp.manual:
        annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = inp.scheduled_annotation
    if inp.manual:
        annotations[MANUAL_INSTANTIATE_ANNOTATION] = "manual"
    spec = dict(template.get("spec") or {})
    spec.setdefault("managedBy", JOB_MANAGED_BY)  # batchd runs what it schedules, unless told otherwise
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": inp.job_name,
            "namespace": inp.namespace,
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "CronJob", "name": inp.cronjob_name, "uid": inp.cronjob_uid,
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": spec,
    }


def _heartbeats() -> asyncio.Task[None] | None:
    """Heartbeat this activity three times per heartbeat timeout until cancelled (None: none asked).

    Workflows do not ask for heartbeats (workflows/cronjob.py, ``ARMED_SLACK``), but an armed
    creation scheduled by earlier workflow code, still in a recorded history, carries a heartbeat
    timeout, and without beats it would time out and retry every timeout until its time.
    """
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        return None

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(timeout.total_seconds() / 3)

    return asyncio.create_task(beat())


@dataclass
class _Creation:
    """An armed creation whose time has come, queued for a creator thread."""

    inp: CreateJobInput
    context: contextvars.Context  # the activity's: activity.info() and the logger in the thread
    done: asyncio.Future[tuple[CreateJobResult, datetime]]
    outcome: tuple[CreateJobResult, datetime] | Exception | None = None  # set by the creator thread


@dataclass
class _Burst:
    """The armed creations of one worker due at the same instant."""

    pending: int = 0
    size: int = 0  # creations that joined it
    completed: int = 0  # of those, handed back to the SDK
    running: bool = False  # its time has come (and the cyclic GC is held off)
    created: asyncio.Event = field(default_factory=asyncio.Event)
    due: collections.deque[_Creation] = field(default_factory=collections.deque)  # not yet taken by a creator
    creators: int = 0  # creator threads taking from ``due`` (counted on the event loop)

    def completion_delay(self) -> float:
        """How long the next completion waits: its place in line at COMPLETION_RATE, within COMPLETION_SPREAD."""
        place, self.completed = self.completed, self.completed + 1
        return place * min(1 / COMPLETION_RATE, COMPLETION_SPREAD / self.size)


class _BurstHold:
    """While any burst of creations runs, the worker's other work waits for it.

    Python's cyclic garbage collector: a full collection of a worker with many cached workflows
    holds the GIL long enough that, landing in a burst, it would delay every creation still to
    come by that much. Memory freed by reference counting is unaffected, and the collection runs
    once the burst is done (a full one waits longer: :func:`collect_when_quiet`, which also reads
    the armed creations' times kept here). The bridge's dispatch of watch events
    (:func:`after_creations`): in a large burst the worker holds the GIL throughout, and
    dispatching the ADDED events of the Jobs just created, which no decision waits for, would
    take a share of it. The forwarding of the Temporal SDK's metrics (:func:`in_burst`, worker/telemetry.py), which converts every buffered
    update in one go (docs/design.md).
    """

    def __init__(self) -> None:
        self.holders = 0
        self.was_enabled = True
        self.since = 0.0  # monotonic: when the running burst began
        self.armed: collections.Counter[datetime] = collections.Counter()  # waiting creations by due instant
        self.ended = 0.0  # monotonic: when the last burst ended

    def next_due(self) -> datetime | None:
        """The earliest instant an armed creation of this process waits for."""
        return min(self.armed, default=None)

    def hold(self) -> None:
        if self.holders == 0:
            self.was_enabled = gc.isenabled()
            gc.disable()
            self.since = time.monotonic()
        self.holders += 1

    def release(self) -> None:
        self.holders -= 1
        if self.holders == 0:
            self.ended = time.monotonic()
            if self.was_enabled:
                gc.enable()


_BURST = _BurstHold()  # process-wide, as the collector is; used on the event loop only


def in_burst(at_most: float = BURST_WAIT) -> bool:
    """True while a burst of armed creations runs in this process, for at most ``at_most`` from its start."""
    return bool(_BURST.holders) and time.monotonic() < _BURST.since + at_most


async def after_creations(at_most: float = BURST_WAIT) -> None:
    """Return once no burst of armed creations is running in this process, or it has run ``at_most``."""
    while in_burst(at_most):
        await asyncio.sleep(0.05)


#: How often the worker makes a full collection of its own (``collect_when_quiet``).
FULL_COLLECTION_EVERY = 60.0
#: A full collection does not start this close to an armed creation's time, before it or after
#: its burst (whose completions wake the workflows that take in the Jobs made).
QUIET = 10.0


def _full_collection_due(since_last: float, burst_running: bool, next_due_in: float | None,
                         since_burst: float) -> bool:
    """Whether to make a full collection now: its interval is up, no burst runs, and none is due
    or just over within QUIET, unless the interval has been up three times over (creations due
    every few seconds must not put it off for good)."""
    if since_last < FULL_COLLECTION_EVERY or burst_running:
        return False
    quiet = (next_due_in is None or next_due_in > QUIET or next_due_in < 0) and since_burst > QUIET
    return quiet or since_last >= 3 * FULL_COLLECTION_EVERY


async def collect_when_quiet(poll: float = 1.0) -> None:
    """Make the cyclic collector's full collections at moments of the worker's choosing.

    With thousands of cached workflows Python's collector made a full collection every 20–40 s on
    its own, each holding the interpreter for 0.5–1.4 s, and where one began just before a
    schedule time every creation of that time waited for it, and the one held off by a burst ran
    as it ended, stalling the hand-back of its results (docs/benchmarks.md). Here the oldest
    generation is never collected by the interpreter's own thresholds; this task collects it
    every FULL_COLLECTION_EVERY, away from the armed creations' times. The younger generations
    are collected as before. The thresholds are put back when the task ends.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], 2**31 - 1)
    last = time.monotonic()
    try:
        while True:
            await asyncio.sleep(poll)
            due = _BURST.next_due()
            due_in = None if due is None else (due - datetime.now(UTC)).total_seconds()
            now = time.monotonic()
            if _full_collection_due(now - last, bool(_BURST.holders), due_in, now - _BURST.ended):
                gc.collect()
                last = time.monotonic()
    finally:
        gc.set_threshold(*thresholds)


#: ``(namespace, uid)`` → the CronJob as this worker's informer last saw it, or None.
CronJobCache = Callable[[str, str], dict[str, Any] | None]


class CronJobActivities:
    """The CronJob activities, bound to one Kubernetes client and clock.

    With ``cached`` (the bridge's informer, in the same process) a creation builds the Job from
    the cached CronJob, as upstream builds it from its lister, when that copy is the instance and
    generation the workflow planned for; otherwise it GETs the CronJob. In a burst of creations
    due in the same second, a GET per creation would be a large part of the worker's work
    (docs/design.md).
    """

    def __init__(self, kube: Kube, clock: Clock | None = None, cached: CronJobCache | None = None) -> None:
        self.kube = kube
        self.clock = clock or SystemClock()
        self.cached = cached
        self.pool = prestarted_pool(CREATORS, "cronjob-create")
        self._bursts: dict[datetime, _Burst] = {}  # armed creations by due instant (event loop only)

    def _event(self, namespace: str, name: str, uid: str, type_: EventType, reason: str, message: str) -> None:
        try_record_event(self.kube, EventInput(ref=ObjectRef(kind="CronJob", namespace=namespace, name=name, uid=uid),
                                               type=type_, reason=reason, message=message, component=CRONJOB_COMPONENT),
                         now=self.clock.now(), log=activity.logger)

    @implements(contract.create_cronjob_job)
    @temporal_errors
    def create_job(self, inp: CreateJobInput) -> CreateJobResult:
        """Build the Job from the CronJob's current template and create it (CJ-30 to CJ-39)."""
        res = self._create(inp)
        self._report(inp, res, self.clock.now())
        return res

    def _report(self, inp: CreateJobInput, res: CreateJobResult, at: datetime) -> None:
        """What follows a creation at ``at``: the skew metric, a log line and the SuccessfulCreate Event.

        Kept out of ``_create``: in a burst of armed creations they wait until all are created.
        """
        if res.outcome != "created":
            return
        skew = max(0.0, (at - inp.scheduled).total_seconds())
        if not inp.manual:
            CREATION_SKEW.record(skew)
        activity.logger.info("created Job %s/%s for %s, %.3f s after that time", inp.namespace, inp.job_name,
                             rfc3339(inp.scheduled), skew)
        self._event(inp.namespace, inp.cronjob_name, inp.cronjob_uid, "Normal", "SuccessfulCreate",
                    f"Created job {inp.job_name}")

    def _cronjob(self, inp: CreateJobInput) -> dict[str, Any] | None:
        """The CronJob to create from: the informer's copy if it is what the workflow planned for, else a GET."""
        cj = self.cached(inp.namespace, inp.cronjob_uid) if self.cached else None
        if cj is not None:
            meta = cj["metadata"]
            if (meta.get("name") == inp.cronjob_name and not meta.get("deletionTimestamp")
                    and inp.generation in (None, meta.get("generation") or 0)):
                return cj
        return self.kube.get_instance("CronJob", inp.namespace, inp.cronjob_name, inp.cronjob_uid)

    def _create(self, inp: CreateJobInput) -> CreateJobResult:
        cj = self._cronjob(inp)
        if cj is None or cj["metadata"].get("deletionTimestamp"):
            activity.logger.info("CronJob %s/%s is gone or being deleted: nothing created for %s", inp.namespace,
                                 inp.cronjob_name, rfc3339(inp.scheduled))
            return CreateJobResult(outcome="cronjob_gone")
        generation = cj["metadata"].get("generation") or 0
        if inp.generation is not None and generation != inp.generation:
            return CreateJobResult(outcome="stale", generation=generation)
        if inp.observed is not None and CronJobObservation.of(CronJob.model_validate(cj)).decision_key() != inp.observed:
            # an annotation changed since the plan (FAIL-CLOSED's hold, a window, a skip calendar):
            # the workflow plans again once the bridge tells it; an abandoned wait creates nothing
            activity.logger.info("CronJob %s/%s changed since its creation for %s was armed: nothing created",
                                 inp.namespace, inp.cronjob_name, rfc3339(inp.scheduled))
            return CreateJobResult(outcome="stale", generation=generation)
        if inp.latest is not None and self.clock.now() > inp.latest:
            activity.logger.info("CronJob %s/%s: the run of %s is past its starting deadline", inp.namespace,
                                 inp.cronjob_name, rfc3339(inp.scheduled))
            return CreateJobResult(outcome="too_late")
        body = build_job(cj, inp)
        try:
            job = self.kube.create("Job", inp.namespace, body)
        except AlreadyExists:
            existing = self.kube.get("Job", inp.namespace, inp.job_name)
            if existing is None:
                raise  # deleted in between: let the retry create it
            owner = controller_of(existing["metadata"]) or {}
            if owner.get("uid") != inp.cronjob_uid:
                return CreateJobResult(outcome="not_ours", message=f"Job {inp.job_name} exists and is not controlled by this CronJob")
            activity.logger.info("Job %s/%s already exists", inp.namespace, inp.job_name)
            finished = finished_condition(JobStatus.model_validate(existing.get("status") or {}).conditions) is not None
            return CreateJobResult(outcome="exists", job=_ref(existing), finished=finished)
        except (Invalid, Forbidden) as err:
            if namespace_terminating(err):
                # CJ-36: no Event; retried (a plain KubeError is retryable) until the namespace,
                # and with it the CronJob, is gone, which answers "cronjob_gone".
                raise KubeError(err.status, err.reason, err.message) from None
            self._event(inp.namespace, inp.cronjob_name, inp.cronjob_uid, "Warning", "FailedCreate",
                        f"Error creating job: {err.message}")
            return CreateJobResult(outcome="invalid", message=err.message)
        return CreateJobResult(outcome="created", job=_ref(job))

    # A worker that dies holding an armed creation is noticed when the attempt's time limit (the
    # wait plus ARMED_SLACK) passes; another replica then creates the Job (or finds it, if the
    # dead one got that far), at most about ARMED_SLACK late (CJ-55).
    @implements(contract.create_cronjob_job_at)
    async def create_job_at(self, inp: CreateJobInput) -> CreateJobResult:
        """Wait in the worker until ``not_before``, then create the Job as ``create_cronjob_job`` does.

        Checked at that moment, not when armed: the CronJob's uid, deletion and generation (a
        changed spec answers "stale") and the starting deadline ("too_late"). The wait is capped
        by ``wait_at_most`` too, so a worker clock behind the workflow's cannot stretch it.
        When many creations are due at the same instant, a few creator threads take them in turn
        (``_queue``), and each one's metric, log line, Event and completion (which
        wakes its workflow) wait until all of them are created, so that burst has the CPU first;
        the cyclic garbage collector and the bridge's dispatch wait too (``_BurstHold``). Then the
        completions are handed back one after another, not all at once: each is a call to the
        Temporal server that the SDK's core holds until answered, and a whole burst of them at
        once would swell the worker's memory until they are answered (docs/benchmarks.md).
        """
        due = inp.not_before or inp.scheduled
        burst = self._bursts.setdefault(due, _Burst())
        burst.pending += 1
        burst.size += 1
        _BURST.armed[due] += 1
        beat = _heartbeats()
        try:
            wait = min((due - self.clock.now()).total_seconds(), inp.wait_at_most)
            if wait > 0:
                try:
                    await asyncio.sleep(wait)
                except asyncio.CancelledError:
                    activity.logger.info("armed creation of Job %s/%s cancelled: nothing created", inp.namespace,
                                         inp.job_name)
                    raise
            if not burst.running:
                burst.running = True
                _BURST.hold()
            res, at = await self._queue(burst, inp)
        finally:
            if beat is not None:
                beat.cancel()
            _BURST.armed[due] -= 1
            if not _BURST.armed[due]:
                del _BURST.armed[due]
            burst.pending -= 1
            if burst.pending == 0:
                if burst.running:
                    _BURST.release()
                burst.created.set()
                self._bursts.pop(due, None)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(burst.created.wait(), BURST_WAIT)
        if res.outcome == "created":
            await self._in_pool(self._report, inp, res, at)
        await asyncio.sleep(burst.completion_delay())
        return res

    def _queue(self, burst: _Burst, inp: CreateJobInput) -> asyncio.Future[tuple[CreateJobResult, datetime]]:
        """Queue a creation whose time has come for the creator threads; its result, and when it was made.

        A creator takes creations from the burst's queue until it is empty and then hands back all
        it made in one call to the event loop, and each creation's metric and log line follow the
        burst (``_report``): a hand-off per creation (an executor's submit, its future, a wake-up
        of the loop, the GIL passed between threads) would lengthen a burst markedly
        (docs/benchmarks.md).
        """
        loop = asyncio.get_running_loop()
        creation = _Creation(inp, contextvars.copy_context(), loop.create_future())
        burst.due.append(creation)
        self._add_creator(burst, loop)
        return creation.done

    def _add_creator(self, burst: _Burst, loop: asyncio.AbstractEventLoop) -> None:
        if burst.due and burst.creators < CREATORS:
            burst.creators += 1
            self.pool.submit(self._creator, burst, loop)

    def _creator(self, burst: _Burst, loop: asyncio.AbstractEventLoop) -> None:
        """A creator thread: create the queued Jobs until none is left, then hand them back."""
        create = temporal_errors(self._create)
        made: list[_Creation] = []
        try:
            while True:
                try:
                    creation = burst.due.popleft()  # atomic: another creator may have taken the last
                except IndexError:
                    break
                if creation.done.cancelled():  # its activity was cancelled while it queued: not made
                    continue
                made.append(creation)
                try:
                    creation.outcome = creation.context.run(create, creation.inp), self.clock.now()
                except Exception as exc:  # the activity that asked raises it
                    creation.outcome = exc
        finally:
            loop.call_soon_threadsafe(self._handed_back, burst, made, loop)

    def _handed_back(self, burst: _Burst, made: list[_Creation], loop: asyncio.AbstractEventLoop) -> None:
        burst.creators -= 1
        for creation in made:
            if creation.done.done():  # its activity was cancelled meanwhile
                continue
            if isinstance(creation.outcome, tuple):
                creation.done.set_result(creation.outcome)
            else:
                creation.done.set_exception(creation.outcome or RuntimeError("the creator thread stopped"))
        self._add_creator(burst, loop)  # a creation queued after this creator found the queue empty

    async def _in_pool(self, fn: Callable[..., T], *args: Any) -> T:
        ctx = contextvars.copy_context()  # activity.info() and the logger, in the pool's thread
        return await asyncio.get_running_loop().run_in_executor(self.pool, ctx.run, temporal_errors(fn), *args)

    @implements(contract.delete_cronjob_jobs)
    @temporal_errors
    def delete_jobs(self, inp: DeleteJobsInput) -> DeleteJobsResult:
        """Delete Jobs with Background propagation (CJ-29, CJ-50); 404 counts as deleted."""
        out = DeleteJobsResult()
        for ref in inp.jobs:
            try:
                self.kube.delete("Job", ref.namespace, ref.name, uid=ref.uid, propagation="Background")
            except KubeError as err:
                if err.retryable and inp.purpose == "replace":
                    raise  # Replace must not create the new Job before the old ones are gone
                out.failed.append(ref.name)
                self._event(inp.namespace, inp.cronjob_name, inp.cronjob_uid, "Warning", "FailedDelete",
                            f"Deleted job: {err.message}")
                continue
            out.deleted.append(ref.name)
            self._event(inp.namespace, inp.cronjob_name, inp.cronjob_uid, "Normal", "SuccessfulDelete",
                        f"Deleted job {ref.name}")
        return out

    @implements(contract.sync_cronjob)
    @temporal_errors
    def sync(self, inp: SyncCronJobInput) -> SyncCronJobResult:
        """Write ``status`` (active, lastScheduleTime, lastSuccessfulTime) and batchd's annotations,
        then record the pass's Events."""
        cj = self.kube.get_instance("CronJob", inp.namespace, inp.name, inp.uid)
        if cj is None:
            return SyncCronJobResult(gone=True, unrecorded=self._record(inp.events))
        status = {
            "active": [a.model_dump(mode="json", by_alias=True, exclude_none=True) for a in inp.active] or None,
            "lastScheduleTime": rfc3339(inp.last_schedule_time),
            "lastSuccessfulTime": rfc3339(inp.last_successful_time),
        }
        current = cj.get("status") or {}
        have = cj["metadata"].get("annotations") or {}
        changed = {k: v for k, v in inp.annotations.items() if have.get(k) != v}
        try:
            if any(current.get(k) != v for k, v in status.items()):
                self.kube.patch("CronJob", inp.namespace, inp.name, {"status": status}, subresource="status")
            if changed:
                self.kube.patch("CronJob", inp.namespace, inp.name, {"metadata": {"annotations": changed}})
        except NotFound:  # deleted since the read (an orphaning delete ends a moment later on a cluster)
            return SyncCronJobResult(gone=True, unrecorded=self._record(inp.events))
        return SyncCronJobResult(unrecorded=self._record(inp.events))

    def _record(self, events: list[EventInput]) -> list[EventInput]:
        """Record each Event once, after the writes: a write that fails is retried with the Events
        not yet recorded, so a retry records none twice. The ones not recorded are returned."""
        now = self.clock.now()
        return [ev for ev in events if not try_record_event(self.kube, ev, now=now, log=activity.logger)]

    @implements(contract.set_cronjob_suspend)
    @temporal_errors
    def set_suspend(self, inp: SetSuspendInput) -> SyncCronJobResult:
        """Patch ``spec.suspend`` so Kubernetes stays the source of truth for suspend/resume, and
        the reason and time beside it (CJ-SUSPEND): one patch, so no reader sees one without the other."""
        cj = self.kube.get_instance("CronJob", inp.namespace, inp.name, inp.uid)
        if cj is None:
            return SyncCronJobResult(gone=True)
        try:
            self.kube.patch("CronJob", inp.namespace, inp.name, inp.patch())
        except NotFound:  # deleted since the read
            return SyncCronJobResult(gone=True)
        return SyncCronJobResult()

    def all(self) -> list[Callable[..., object]]:
        """The activities of the main task queue (``create_job_at`` runs on the timed one)."""
        return [self.create_job, self.delete_jobs, self.sync, self.set_suspend]


class GroupActivities:
    """CJ-GROUP: a member's reports to its concurrency group's workflow, and the group's re-read of its holders.

    ``client`` is the worker's Temporal client; ``recheck`` the worker's ``--group-recheck``, given
    to a group this worker starts.
    """

    def __init__(self, kube: Kube, client: Client | None, recheck: timedelta) -> None:
        self.kube, self.client, self.recheck = kube, client, recheck

    @implements(contract.tell_group)
    async def tell_group(self, inp: GroupReport) -> None:
        """Signal-with-start ``report`` on ``cronjob-group/{ns}/{group}``; a leave starts no group."""
        if self.client is None:
            raise ApplicationError("this worker has no Temporal client for concurrency groups", non_retryable=True)
        wid = group_workflow_id(inp.namespace, inp.group)
        if inp.leave:
            try:
                await self.client.get_workflow_handle(wid).signal("report", inp)
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:  # else: no such group, or it already ended
                    raise
            return
        state = GroupState(namespace=inp.namespace, group=inp.group, recheck_seconds=self.recheck.total_seconds())
        await self.client.start_workflow(
            "CronJobGroup", GroupInput(state=state), id=wid, task_queue=activity.info().task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING, start_signal="report", start_signal_args=[inp],
            static_summary=f"concurrency group {inp.namespace}/{inp.group}",
            search_attributes=TypedSearchAttributes([
                SearchAttributePair(K8S_KIND, "ConcurrencyGroup"), SearchAttributePair(K8S_NAMESPACE, inp.namespace),
                SearchAttributePair(K8S_NAME, inp.group)]))

    @implements(contract.read_group_jobs)
    @temporal_errors
    def read_jobs(self, inp: ReadJobsInput) -> ReadJobsResult:
        """GET each holder: those finished, or gone (404, or a namesake with another uid)."""
        ended = []
        for ref in inp.jobs:
            raw = self.kube.get("Job", inp.namespace, ref.name)
            if raw is None or (raw.get("metadata") or {}).get("uid") != ref.uid:
                ended.append(JobSummary(name=ref.name, uid=ref.uid, gone=True))
                continue
            summary = JobSummary.of(Job.model_validate(raw), raw.get("status"))
            if summary.outcome is not None:
                ended.append(summary)
        return ReadJobsResult(ended=ended)

    def all(self) -> list[Callable[..., object]]:
        return [self.tell_group, self.read_jobs]
