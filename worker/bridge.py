"""The bridge: list+watch Kubernetes objects and hand each change to the controllers' routers.

Layer: worker. Started by worker/app.py beside the Temporal worker. The bridge wires the generic
informers (worker/informer.py: list+watch+resync, the cache, the view they keep) to one router
per controller (worker/routers.py: TTL, CronJob, Job), which decide whether a change needs a
workflow started or signalled. It is level-triggered and idempotent: a replayed event, a relist
after ``410 Gone``, a periodic resync or a second bridge in another replica sends the same
observation to the same workflow ID, which changes nothing. Nothing here decides *when* to act;
the workflows do.

Threads: informers call :meth:`Bridge._enqueue` on their threads; dispatch runs on the asyncio
loop in a few shards keyed by object, so events of one object stay in order while different
objects proceed in parallel. A failed dispatch is retried with backoff (WATCH-1, docs/design.md).

With an :class:`~worker.lease.Elector` (``--leader-elect``), every replica keeps its informers and
their cache, but only the Lease holder dispatches (WATCH-4): when it starts leading it forgets what
it may have sent before, reads the TTL workflows' memos, and routes every object its cache holds.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
import zlib
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import Observation
from temporalio.client import Client

from activities.cronjob import after_creations
from activities.job import JobPodIndex
from kube.client import Clock, Kube, SystemClock
from worker.informer import Informer, bridge_view
from worker.lease import Elector
from worker.routers import CronJobRouter, JobRouter, TTLRouter, Workflows
from workflows.identity import TASK_QUEUE
from workflows.models.common import Job, ObjectRef, controller_of
from workflows.models.cronjob import CRONJOB_MANAGED_LABEL
from workflows.models.job import POD_JOB_LABEL
from workflows.models.ttl import POD_TTL_LABEL

log = logging.getLogger("batchd.bridge")

_meter = metrics.get_meter("batchd.bridge")
_tracer = trace.get_tracer("batchd.bridge")
EVENTS = _meter.create_counter("batchd_bridge_events", description="Watch events received, by kind and type")
#: The bridges of this process, for ``batchd_bridge_leading`` (tests run several in one process).
_BRIDGES: weakref.WeakSet[Bridge] = weakref.WeakSet()


def _leading(_options: Any) -> list[Observation]:
    return [Observation(int(any(b.leading for b in _BRIDGES)))] if _BRIDGES else []


_meter.create_observable_gauge(
    "batchd_bridge_leading", callbacks=[_leading],
    description="1 while this replica's bridge routes changes (it holds the Lease, or leader election is off)")
DISPATCH_SECONDS = _meter.create_histogram(
    "batchd_bridge_dispatch_seconds", unit="s", description="Bridge lag: watch event received → workflow signalled",
    explicit_bucket_boundaries_advisory=[0.001 * 2**k for k in range(15)],
)

_Event = tuple[float, str, dict[str, Any]]  # (first received, monotonic; type; object)


class _Shard:
    """One shard's queue of events, with at most one pending change per object (WATCH-5).

    A newer event of an object whose change is still queued replaces it in place, keeping its
    place and its first receipt time, as client-go's workqueue coalesces by key: routing is
    level-triggered, so only the latest state matters, and a backlog (a burst of Jobs finishing
    faster than workflows start) costs one small entry per object, not one per event: the bridge
    queues a change as the object's identity and reads the object from the informers' cache
    when its turn comes. A deletion is never merged and carries its object: it queues behind the
    object's pending change, so a Job seen finishing and then gone is reported as both. A
    ``REPLAY`` (the cache routed on taking the Lease) adds nothing where a change is pending.
    """

    def __init__(self) -> None:
        self._order: asyncio.Queue[tuple[str, bool]] = asyncio.Queue()
        self._pending: dict[tuple[str, bool], _Event] = {}

    def put(self, event: _Event) -> None:
        received, etype, obj = event
        key = (obj.get("metadata", {}).get("uid", ""), etype == "DELETED")
        if (queued := self._pending.get(key)) is None:
            self._pending[key] = event
            self._order.put_nowait(key)
        elif etype != "REPLAY":
            self._pending[key] = (queued[0], etype, obj)

    def holds(self, uid: str) -> bool:
        return (uid, False) in self._pending

    async def get(self) -> _Event:
        return self._pending.pop(await self._order.get())

    def task_done(self) -> None:
        self._order.task_done()

    async def join(self) -> None:
        await self._order.join()

    def qsize(self) -> int:
        return self._order.qsize()


@dataclass(frozen=True)
class BridgeSettings:
    """Which objects the bridge watches and hands to workflows."""

    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    ttl_scope: str = "managed"  # TTL-1: "managed", Jobs with spec.managedBy batchd; "all", every Job
    job_scope: str = "managed"  # JOB-1: "managed", Jobs with spec.managedBy batchd; "all", also those naming no controller
    cronjob_selector: str = f"{CRONJOB_MANAGED_LABEL}=true"  # "": every CronJob
    task_queue: str = TASK_QUEUE
    cronjob_lead: float = 60.0  # seconds: CronJob workflows arm each creation this early (0: off)
    resync_seconds: float = 600.0
    vanished_seconds: float = 30.0  # CJ-42: how often the leader looks for active Jobs that vanished unseen
    # Each dispatch waits on a Temporal RPC, so the shards bound how many are in flight: with 8,
    # 2,000 Jobs finishing together waited seconds in them (bench.compare's TTL lateness p99 11-12 s;
    # 4.9-5.4 s with 32, docs/benchmarks.md).
    shards: int = 32
    cloudevents: bool = False  # NOTIFY-EVENTS: the workflows send CloudEvents (the worker has a sink)


class Bridge:
    """Watches CronJobs, Jobs and the Pods batchd cares about; routes each change to its controllers."""

    def __init__(self, client: Client, kube: Kube, settings: BridgeSettings, *, clock: Clock | None = None,
                 elector: Elector | None = None) -> None:
        self.client, self.kube, self.settings = client, kube, settings
        self.elector = elector
        self.leading = elector is None  # dispatching; without an elector, always
        _BRIDGES.add(self)
        self.clock = clock or SystemClock()
        workflows = Workflows(client, settings.task_queue)
        self.ttl_router = TTLRouter(workflows, kube, self.clock, scope=settings.ttl_scope)
        self.cronjob_router = CronJobRouter(workflows, lead=settings.cronjob_lead, notify=settings.cloudevents)
        self.job_router = JobRouter(workflows, scope=settings.job_scope, notify=settings.cloudevents)
        #: JOB-93: the Pods batchd made, by Job, as the Job activities read them
        self.job_pods = JobPodIndex()
        self._queues: list[_Shard] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._informers: list[Informer] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failures: dict[str, int] = {}  # uid -> dispatches of its latest version that failed in a row
        self._routed: dict[str, str] = {}  # uid -> resourceVersion last routed without error (WATCH-6)
        self._taking_over: asyncio.Task[None] | None = None

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queues = [_Shard() for _ in range(self.settings.shards)]
        self._tasks = [asyncio.create_task(self._consume(q), name=f"bridge-shard-{i}") for i, q in enumerate(self._queues)]
        namespaces = self.settings.namespaces or (None,)
        if self.elector is None:
            await self.ttl_router.recall(namespaces)
        resync = self.settings.resync_seconds
        # CronJobs list first: a Job's owner must be known (and its workflow started, on the same
        # shard) before the Job's events are routed to it.
        cronjobs = [Informer(self.kube, "CronJob", ns, self._enqueue, resync_seconds=resync, transform=bridge_view,
                             label_selector=self.settings.cronjob_selector or None) for ns in namespaces]
        self._informers.extend(cronjobs)
        for inf in cronjobs:
            inf.start()
        await asyncio.to_thread(lambda: all(inf.synced.wait(60) for inf in cronjobs))
        for ns in namespaces:
            self._informers.append(Informer(self.kube, "Job", ns, self._enqueue, resync_seconds=resync,
                                            transform=bridge_view))
            self._informers.append(Informer(self.kube, "Pod", ns, self._enqueue, label_selector=POD_TTL_LABEL,
                                            resync_seconds=resync, transform=bridge_view))
            pods = Informer(self.kube, "Pod", ns, self._job_pod, label_selector=POD_JOB_LABEL,
                            resync_seconds=resync, transform=bridge_view, observer=JobRouter.count_tracking_finalizer)
            self.job_pods.watch(pods)
            self._informers.append(pods)
        self._tasks.append(asyncio.create_task(self.job_router.poker(), name="bridge-poker"))
        self._tasks.append(asyncio.create_task(self._find_vanished(cronjobs), name="bridge-vanished"))
        for inf in self._informers[len(cronjobs):]:
            inf.start()
        if self.elector is not None:
            self._tasks.append(asyncio.create_task(self.elector.run(self._lead, self._follow), name="bridge-lease"))

    def _lead(self) -> None:
        self._taking_over = asyncio.create_task(self._take_over(), name="bridge-take-over")

    async def _take_over(self) -> None:
        """WATCH-4: this replica now holds the Lease: route everything the cache holds.

        What this replica sent while it last led may since have been overtaken by another
        leader's signals, so it is forgotten; the TTL workflows' memos say what they have
        (WATCH-2). Each object goes behind any change of it already queued, as every event does:
        as its identity, routed as the cache holds it when its turn comes.
        """
        for router in (self.ttl_router, self.cronjob_router, self.job_router):
            router.forget()
        self._routed.clear()
        await self.ttl_router.recall(self.settings.namespaces or (None,))
        self.leading = True
        for inf in self._informers:  # CronJobs first, as at start
            for obj in inf.snapshot():
                self._enqueue("REPLAY", obj)

    def _follow(self) -> None:
        """Another replica may lead now: dispatch nothing more (queued events are dropped)."""
        self.leading = False
        if self._taking_over is not None:
            self._taking_over.cancel()


    def cached(self, kind: str, uid: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object with ``uid`` as the informers last saw it (any thread; None if unknown)."""
        for inf in self._informers:
            if inf.kind == kind and (namespace is None or inf.namespace in (None, namespace)) \
                    and (obj := inf.get(uid)) is not None:
                return obj
        return None

    def cached_cronjob(self, namespace: str, uid: str) -> dict[str, Any] | None:
        """The managed CronJob with ``uid`` as the informers last saw it (any thread; None if unknown)."""
        return self.cached("CronJob", uid, namespace)

    def cached_job(self, namespace: str, uid: str) -> dict[str, Any] | None:
        """The Job with ``uid`` as the informers last saw it: its small view (any thread; None if unknown)."""
        return self.cached("Job", uid, namespace)

    @property
    def synced(self) -> bool:
        """True once every informer has listed at least once (readiness)."""
        return bool(self._informers) and all(i.synced.is_set() for i in self._informers)

    async def stop(self, drain_timeout: float = 10.0) -> None:
        """Stop watching, then let queued events finish dispatching (bounded)."""
        for inf in self._informers:
            inf.stop()
        try:
            await asyncio.wait_for(asyncio.gather(*(q.join() for q in self._queues)), drain_timeout)
        except TimeoutError:
            log.warning("bridge: %d events not dispatched at shutdown; the next start relists them",
                        sum(q.qsize() for q in self._queues))
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _find_vanished(self, cronjobs: list[Informer]) -> None:
        """CJ-42: tell CronJob workflows of active Jobs that were deleted while no replica watched.

        A Job deleted while no worker ran (or no replica held the Lease) sends no event that
        anyone routes, and a fresh cache has no old copy to miss it from, so a ``Forbid`` CronJob
        would wait for it for ever. As upstream does at each sync, each Job in a CronJob's
        ``status.active`` that the cache lacks is read from the API server; gone (or its name now
        another uid's), its workflow is told as the watch would have told it. The cache answers
        for nearly all: a GET is only for a Job created or deleted since the cache last heard.
        """
        def uncached() -> list[tuple[dict[str, Any], dict[str, Any]]]:  # in a thread: it unpacks every CronJob
            found = []
            for inf in cronjobs:
                for cj in inf.snapshot():
                    meta = cj.get("metadata") or {}
                    found += [(meta, ref) for ref in (cj.get("status") or {}).get("active") or []
                              if ref.get("uid") and self.cached("Job", ref["uid"], meta.get("namespace")) is None]
            return found

        while True:
            await asyncio.sleep(self.settings.vanished_seconds)
            if not (self.leading and self.synced):
                continue
            for meta, ref in await asyncio.to_thread(uncached):
                try:
                    found = await asyncio.to_thread(self.kube.get_instance, "Job", meta.get("namespace", ""),
                                                    ref.get("name", ""), ref["uid"])
                    if found is None:
                        log.info("bridge: active Job %s/%s of CronJob %s no longer exists; telling its workflow",
                                 meta.get("namespace"), ref.get("name"), meta.get("name"))
                        await self.cronjob_router.vanished(meta, ref)
                except Exception:  # the next sweep asks again
                    log.warning("bridge: could not check active Job %s/%s of CronJob %s",
                                meta.get("namespace"), ref.get("name"), meta.get("name"), exc_info=True)

    # -- events --------------------------------------------------------------------------

    def _job_pod(self, etype: str, obj: dict[str, Any]) -> None:
        """A Pod batchd made changed: into the Job activities' index (JOB-93), then to the routers."""
        self.job_pods.handle(etype, obj)
        self._enqueue(etype, obj)

    def _enqueue(self, etype: str, obj: dict[str, Any]) -> None:
        """Called from informer threads; hands the event to its shard on the loop.

        A Job owned by a CronJob goes to its owner's shard, so the CronJob's workflow is started
        before the Job's news reaches it, and the Job's events keep their order.
        """
        assert self._loop is not None
        meta = obj.get("metadata", {})
        if etype == "SYNC" and self._routed.get(meta.get("uid", "")) == meta.get("resourceVersion"):
            return  # WATCH-6: routed (and tracked) at this version already
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if obj.get("kind") == "CronJob":
            self.cronjob_router.track(etype, obj)
        elif obj.get("kind") == "Job":
            owner = controller_of(meta)
            if owner and owner.get("kind") == "CronJob":
                name = owner.get("name", name)
        shard = zlib.crc32(f"{ns}/{name}".encode()) % len(self._queues)
        if etype != "DELETED":  # WATCH-5: queued as its identity, routed as the cache holds it then
            obj = {"kind": obj.get("kind"), "metadata": {k: meta[k] for k in ("uid", "namespace", "name") if k in meta}}
        self._loop.call_soon_threadsafe(self._queues[shard].put, (time.monotonic(), etype, obj))

    async def _consume(self, queue: _Shard) -> None:
        while True:
            received, etype, obj = await queue.get()
            meta = obj.get("metadata", {})
            uid = meta.get("uid", "")
            try:
                if not self.leading:
                    continue
                await after_creations()
                if etype != "DELETED":  # the object as the cache holds it now, if it still exists
                    latest = self.cached(str(obj.get("kind")), uid, meta.get("namespace"))
                    if latest is None:
                        continue  # deleted since: its DELETED event is queued
                    etype, obj = "SYNC" if etype == "REPLAY" else etype, latest
                if etype == "DELETED":  # forgotten whether or not the deletion routes: no resync brings it back
                    self._routed.pop(uid, None)
                await self.handle(etype, obj)
                if etype != "DELETED":
                    self._routed[uid] = obj.get("metadata", {}).get("resourceVersion", "")
                DISPATCH_SECONDS.record(time.monotonic() - received, {"kind": obj.get("kind", "")})
                self._failures.pop(uid, None)
            except Exception:  # one bad object must not stop the shard
                meta = obj.get("metadata", {})
                log.exception("bridge: failed to dispatch %s %s/%s", etype, meta.get("namespace"), meta.get("name"))
                if etype == "DELETED":  # no resync brings a deletion back: tell by identity alone
                    await self._tell_gone(obj)
                else:
                    self._dispatch_again(queue, etype, obj)
            finally:
                queue.task_done()

    def _dispatch_again(self, queue: _Shard, etype: str, obj: dict[str, Any]) -> None:
        """Queue a failed event again after a backoff (0.5 s doubling to 30 s), not at the next resync.

        A Temporal frontend restarting, or briefly answering "namespace not found", would
        otherwise leave a new object without its workflow for the whole resync period. Only the
        version that failed is retried, and only while it is still the latest the informers hold:
        a newer event is already queued, and an older observation must never follow it.
        """
        meta = obj.get("metadata", {})
        uid, rv = meta.get("uid", ""), meta.get("resourceVersion")
        failures = self._failures[uid] = self._failures.get(uid, 0) + 1
        delay = min(0.5 * 2 ** (failures - 1), 30.0)

        def again() -> None:
            latest = self.cached(str(obj.get("kind")), uid)
            if latest is not None and latest.get("metadata", {}).get("resourceVersion") == rv \
                    and not queue.holds(uid):
                queue.put((time.monotonic(), etype, obj))
            else:
                self._failures.pop(uid, None)

        asyncio.get_running_loop().call_later(delay, again)

    async def _tell_gone(self, obj: dict[str, Any]) -> None:
        """WATCH-1: end the workflows of a deleted object from its kind, name and uid alone.

        The fallback for a DELETED event that could not be routed: whatever in the object's
        content broke the routing, its workflows must still learn that it is gone.
        """
        kind, meta = obj.get("kind"), obj.get("metadata") or {}
        if kind not in ("Job", "Pod", "CronJob"):
            return
        ref = ObjectRef(kind=kind, namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                        uid=meta.get("uid", ""))
        for router in (self.ttl_router, self.cronjob_router, self.job_router):
            try:
                await router.gone(ref)
            except Exception:  # logged; the object is gone and there is nothing left to retry from
                log.exception("bridge: could not tell the workflows of %s %s that it is gone", kind, ref.key())

    async def handle(self, etype: str, obj: dict[str, Any]) -> None:
        """Route one event to the routers that read its kind (public so tests can replay events directly).

        Each event is a trace root: the workflow starts and signals it causes (and through them
        the workflows' activities and Kubernetes requests) are its descendants.
        """
        kind = obj.get("kind")
        meta = obj.get("metadata", {})
        EVENTS.add(1, {"kind": str(kind), "type": etype})
        # DEBUG: at INFO the log says what batchd decided and did (a Job created, an object deleted),
        # as kube-controller-manager's does, not every watch event (a screenful a second in `make dev`)
        log.debug("%s %s %s/%s", etype, kind, meta.get("namespace"), meta.get("name"),
                  extra={"rv": meta.get("resourceVersion", ""), "uid": meta.get("uid", "")})
        attributes = {"k8s.kind": str(kind), "k8s.namespace": meta.get("namespace", ""),
                      "k8s.name": meta.get("name", ""), "k8s.uid": meta.get("uid", ""), "k8s.event": etype}
        with _tracer.start_as_current_span(f"bridge {etype} {kind}", attributes=attributes):
            if kind == "Job":
                job = Job.model_validate(obj)
                await self.ttl_router.job(etype, job)
                await self.cronjob_router.job(etype, job, obj)
                await self.job_router.job(etype, job)
            elif kind == "CronJob":
                await self.cronjob_router.cronjob(etype, obj)
            elif kind == "Pod":
                await self.ttl_router.pod(etype, obj)
                self.job_router.pod(obj)
