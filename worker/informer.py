"""The generic informer: list+watch one kind, resync, a cache of what it saw, and the view it keeps.

Layer: worker. The bridge (worker/bridge.py) runs one :class:`Informer` per kind, namespace and
label selector and hands every event to the routers (worker/routers.py); nothing here knows
about workflows or controllers. Like client-go's shared informer, it resumes a watch from the
last resourceVersion, relists on ``410 Gone`` or a watch error (reporting objects deleted
meanwhile as ``DELETED``), hands every cached object to its handler again every
``resync_seconds``, and keeps the last seen copy of each object (:meth:`Informer.get`).

Threads: each informer runs list+watch in a thread with the synchronous
:class:`~kube.client.Kube` client; its handler is called on that thread.

Memory: an informer keeps, and hands on, only :func:`bridge_view` of each object (the fields the
subset models of workflows/models/ read), never the decoded API object. A burst of watch events
queues faster than workflows are started, and with full objects that backlog, not the workflow
cache, would be most of the worker's memory (docs/benchmarks.md).
"""

from __future__ import annotations

import logging
import marshal
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import metrics

from kube.client import Kube
from kube.errors import KubeError
from workflows.policies import Backoff

log = logging.getLogger("batchd.bridge")

#: Why an informer had to list again: ``expired`` (the watch's resourceVersion is too old: routine),
#: ``error`` (another watch error), ``request`` (a list or watch request failed: the API server is
#: unreachable, overloaded or refuses), ``crash`` (a bug). The alert BatchdWatchesFailing reads it.
FAILURES = metrics.get_meter("batchd.bridge").create_counter(
    "batchd_informer_failures", description="List and watch failures of the bridge's informers, by kind and reason")

Handler = Callable[[str, dict[str, Any]], None]
Transform = Callable[[dict[str, Any]], dict[str, Any]]
#: called with (old, new) for every change an informer sees, before its handler (None: not known / deleted)
Observer = Callable[[dict[str, Any] | None, dict[str, Any] | None], None]


class Informer:
    """List+watch one kind in one namespace (or all), resuming from the last resourceVersion.

    A watch that ends is resumed from the last seen version (bookmarks keep it fresh); an
    ``ERROR`` event or ``410 Gone`` forces a relist, which also reports objects deleted while
    the watch was down as ``DELETED``. Every ``resync_seconds`` the cache is re-delivered.

    ``transform`` (client-go's ``SetTransform``) turns each object, as it is decoded, into what
    is kept and handed on; the same dict is the handler's argument and the relist tombstone.
    ``observer`` sees every change as (old, new), as client-go's update handlers do.
    """

    def __init__(self, kube: Kube, kind: str, namespace: str | None, handler: Handler, *,
                 label_selector: str | None = None, resync_seconds: float = 600.0,
                 watch_timeout_seconds: int = 300, transform: Transform | None = None,
                 observer: Observer | None = None) -> None:
        self.kube, self.kind, self.namespace, self.handler = kube, kind, namespace, handler
        self.observer = observer
        self.transform = transform or (lambda obj: obj)
        self.label_selector = label_selector
        self.resync_seconds = resync_seconds
        self.watch_timeout_seconds = watch_timeout_seconds
        self.synced = threading.Event()
        #: the resourceVersion up to which every change has reached the cache and the handler
        #: (client-go's LastStoreSyncResourceVersion); 0 before the first list
        self.rv = 0
        self._rv_changed = threading.Condition()
        self._stop = threading.Event()
        # uid -> the last object seen (transformed), packed (:func:`_pack`)
        self._known: dict[str, bytes] = {}
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}-{namespace or 'all'}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def get(self, uid: str) -> dict[str, Any] | None:
        """The object with ``uid`` as last seen (transformed, a fresh copy); safe from any thread."""
        packed = self._known.get(uid)
        return None if packed is None else _unpack(packed)

    def wait_for(self, rv: int, timeout: float) -> bool:
        """Wait until the cache has taken in every change up to ``rv`` (KEP-5647's read of one's own
        writes; resourceVersions are comparable integers, KEP-5504); whether it has, in time."""
        with self._rv_changed:
            return self._rv_changed.wait_for(lambda: self.synced.is_set() and self.rv >= rv, timeout)

    def _reached(self, rv: str) -> None:
        value = int(rv) if rv.isdigit() else 0
        if value > self.rv:
            with self._rv_changed:
                self.rv = value
                self._rv_changed.notify_all()

    def snapshot(self) -> Iterator[dict[str, Any]]:
        """Every object as last seen (transformed), one fresh copy at a time; safe from any thread."""
        for packed in list(self._known.values()):
            yield _unpack(packed)

    def _run(self) -> None:
        backoff = Backoff(1.0, 30.0)
        while not self._stop.is_set():
            try:
                rv = self._relist()
                backoff.reset()
                self._watch(rv)
            except KubeError as err:
                FAILURES.add(1, {"kind": self.kind, "reason": "request"})
                delay = backoff.next()
                log.warning("informer %s: %s; retrying in %.0fs", self._thread.name, err, delay,
                            extra={"kind": self.kind, "namespace": self.namespace or ""})
                self._stop.wait(delay)
            except Exception:  # a bug must not silently kill the informer thread
                FAILURES.add(1, {"kind": self.kind, "reason": "crash"})
                log.exception("informer %s crashed; restarting", self._thread.name)
                self._stop.wait(backoff.next())

    def _relist(self) -> str:
        seen: dict[str, bytes] = {}
        cont: str | None = None
        rv: str | None = None
        while True:
            page = self.kube.list(self.kind, self.namespace, label_selector=self.label_selector, limit=500, continue_=cont)
            # The list is at its first page's resourceVersion: the watch resumes from there, so a
            # change made while later pages were read is not missed (JOB-93 trusts this cache).
            rv = rv if rv is not None else str((page.get("metadata") or {}).get("resourceVersion") or "")
            for obj in page.get("items") or []:
                obj.setdefault("kind", self.kind)
                seen[obj["metadata"]["uid"]] = _pack(self.transform(obj))
            cont = (page.get("metadata") or {}).get("continue") or None
            if not cont:
                break
        for uid, packed in self._known.items():
            if uid not in seen:
                old = _unpack(packed)
                self._observe(old, None)
                self.handler("DELETED", old)
        known, self._known = self._known, seen
        for uid, packed in seen.items():
            obj = _unpack(packed)
            self._observe(known.get(uid), obj)
            self.handler("SYNC", obj)
        self.synced.set()
        self._reached(rv)
        return rv

    def _watch(self, rv: str) -> None:
        """Watch from ``rv``, resuming each ended stream, until a watch error (the caller relists).

        Every ``resync_seconds`` every cached object goes to the handler again, from the cache, as
        client-go's resync does. A relist instead would hold a second copy of the whole cache while
        it ran, ask the API server for everything, and merge away the changes made between the end
        of one watch and the list, which the observer has to see one by one.
        """
        deadline = time.monotonic() + self.resync_seconds
        while not self._stop.is_set():
            if time.monotonic() >= deadline:
                for packed in list(self._known.values()):
                    self.handler("SYNC", _unpack(packed))
                deadline = time.monotonic() + self.resync_seconds
            timeout = max(1, min(self.watch_timeout_seconds, int(deadline - time.monotonic())))
            for ev in self.kube.watch(self.kind, self.namespace, resource_version=rv,
                                      label_selector=self.label_selector, timeout_seconds=timeout):
                if self._stop.is_set():
                    return
                etype, obj = ev.get("type"), ev.get("object") or {}
                if etype == "ERROR":
                    FAILURES.add(1, {"kind": self.kind, "reason": "expired" if obj.get("code") == 410 else "error"})
                    log.info("informer %s: watch error %s; relisting", self._thread.name, obj.get("message", ""))
                    return
                rv = str(obj.get("metadata", {}).get("resourceVersion") or rv)
                if etype == "BOOKMARK":
                    self._reached(rv)
                    continue
                obj.setdefault("kind", self.kind)
                obj = self.transform(obj)
                uid = obj.get("metadata", {}).get("uid", "")
                if etype == "DELETED":
                    self._observe(self._known.pop(uid, None) or obj, None)
                else:
                    self._observe(self._known.get(uid), obj)
                    self._known[uid] = _pack(obj)
                self.handler(str(etype), obj)
                self._reached(rv)

    def _observe(self, old: bytes | dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if self.observer is not None:
            try:
                self.observer(_unpack(old) if isinstance(old, bytes) else old, new)
            except Exception:  # an observer (metrics) must never stop the informer
                log.exception("informer %s: observer failed", self._thread.name)


def _pack(obj: dict[str, Any]) -> bytes:
    """An object as the cache keeps it: marshalled, then deflated at the fastest level.

    The cache holds every object the bridge watches, and with tens of thousands of finished Jobs
    it is a large part of the worker's memory. Marshalled, a view takes far less than its dict;
    deflated, less again, for a small cost in CPU per change and per read (docs/benchmarks.md).
    """
    return zlib.compress(marshal.dumps(obj), 1)


def _unpack(packed: bytes) -> dict[str, Any]:
    return marshal.loads(zlib.decompress(packed))


# What the routers (worker/routers.py) read of each kind: the fields of the subset models (workflows/models/
# ObjectMeta, Job, Pod, CronJob) plus the raw Job status times JobSummary.of takes, and of a Pod what
# the Job controller reads (workflows/models/job.py pod_info), since its syncs read Pods from this
# cache (JOB-93). A field a router or pod_info starts to read must be added here;
# tests/unit/test_bridge_view.py compares the models parsed from a full object and from its view.
_META = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
         "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers")
_JOB_SPEC = ("ttlSecondsAfterFinished", "managedBy", "suspend")
_JOB_STATUS = ("startTime", "completionTime")
_CONDITION = ("type", "status", "lastTransitionTime", "reason", "message")
_POD_STATUS = ("phase",)
_POD_CONDITION = ("type", "status", "lastTransitionTime")
_CONTAINER_STATUSES = ("containerStatuses", "initContainerStatuses")
_TERMINATED = ("exitCode", "finishedAt")


def bridge_view(obj: dict[str, Any]) -> dict[str, Any]:
    """The part of a decoded Job, Pod or CronJob that the bridge keeps and hands to its handlers.

    A decoded Job from the API carries its Pod template, selector and defaults, which no router
    reads; its view is a small part of it (docs/design.md). CronJobs keep their whole spec and
    status: there are few, and their spec is what their workflows are told. Other kinds pass
    unchanged.
    """
    kind = obj.get("kind")
    if kind not in ("Job", "Pod", "CronJob"):
        return obj
    view: dict[str, Any] = {"kind": kind, "metadata": _pick(obj.get("metadata"), _META)}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if kind == "Job":
        view["spec"] = _pick(spec, _JOB_SPEC)
        view["status"] = _pick(status, _JOB_STATUS)
        if "conditions" in status:
            view["status"]["conditions"] = [_pick(c, _CONDITION) for c in status["conditions"] or []]
    elif kind == "Pod":
        view["spec"] = _pick(spec, ("restartPolicy",))
        view["status"] = _pick(status, _POD_STATUS)
        if "conditions" in status:  # the Job controller's (activities/job.py pod_info): Ready, policies
            view["status"]["conditions"] = [_pick(c, _POD_CONDITION) for c in status["conditions"] or []]
        for key in _CONTAINER_STATUSES:
            if key in status:
                view["status"][key] = [_container_status(c) for c in status[key] or []]
    else:
        view["spec"], view["status"] = spec, status
    return view


def _container_status(cs: dict[str, Any]) -> dict[str, Any]:
    out = _pick(cs, ("name", "restartCount"))
    terminated = (cs.get("state") or {}).get("terminated")
    out["state"] = {"terminated": _pick(terminated, _TERMINATED)} if terminated is not None else {}
    return out


def _pick(d: dict[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: d[k] for k in keys if k in d} if d else {}
