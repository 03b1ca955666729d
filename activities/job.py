"""Activities of the Job workflow: snapshot, Pod creation and deletion, finalizers, status writes.

Layer: activities. Implements the declarations of workflows/models/job.py, which workflows/job.py
calls; registered by worker/temporal.py. Each is idempotent and batched (one activity call handles many Pods, so history stays small however many
Pods a Job runs). Upstream's three tracking steps map to :meth:`JobActivities.write_status`
(step 1 and step 3) and :meth:`JobActivities.release_finalizers` (step 2). The snapshot reads a
Job's Pods from :class:`JobPodIndex`, the worker's own watch of them, once it has reached the
workflow's last read and writes (JOB-93), and records a bounded window of them (JOB-92). Rule ids
(JOB-n, POL-n) are those of docs/job.md.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.contract import implements
from activities.errors import temporal_errors
from kube.client import Clock, Kube, SystemClock, prestarted_pool
from kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    Unreachable,
    namespace_terminating,
)
from workflows.models import job as contract
from workflows.models.common import Job, controller_of
from workflows.models.job import (
    COMPLETION_INDEX_ANNOTATION,
    CONTROLLER_UID_LABEL,
    INDEX_FAILURE_COUNT_ANNOTATION,
    INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
    JOB_ENDS,
    JOB_TRACKING_FINALIZER,
    POD_JOB_LABEL,
    TRACKING_LABEL,
    CreatePodsInput,
    CreatePodsResult,
    Cycle,
    CycleInput,
    DeletePodsInput,
    Dependencies,
    DependenciesInput,
    Dependency,
    JobOptions,
    JobSnapshot,
    JobStatusView,
    ObserveJobInput,
    PodInfo,
    PodsResult,
    PodToCreate,
    ReleaseInput,
    ReleaseUnmatchedInput,
    WriteStatusInput,
    job_snapshot,
    pod_info,
    shortest_cycle,
)
from workflows.models.jobpods import WINDOW, fit_snapshot
from workflows.times import rfc3339

MAX_PARALLEL = 16  # concurrent Pod requests within one activity
#: Strategic merge patch that removes only the tracking finalizer (as upstream does, JOB-32).
_RELEASE = {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}
#: The same for a finished Pod, which it also labels released: the Job's LIST leaves it out from then on (JOB-91).
_RELEASE_FINISHED = {"metadata": {**_RELEASE["metadata"], "labels": {TRACKING_LABEL: "released"}}}
#: JOB-91: the Job's Pods still in play; ``!=`` also matches the Pods without the label (running, or made before it)
_IN_PLAY = f"{TRACKING_LABEL}!=released"
#: JOB-93: how long a sync waits for the worker's watch to reach its own last read and writes
CACHE_WAIT_SECONDS = 10.0
#: JOB-25, JOB-93: how often a Job read from the watch LISTs for orphans the watch cannot show
ORPHAN_SCAN_SECONDS = 60.0
#: JOB-92: a snapshot larger than this is refused, not recorded (Temporal's error limit is 2 MB)
SNAPSHOT_LIMIT = 1536 * 1024


def resource_version_of(obj: dict[str, Any] | None) -> int:
    """An object's resourceVersion as the integer KEP-5504 lets clients compare (0: none, or not one)."""
    rv = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and rv.isdigit() else 0


@dataclass(slots=True)
class CachedPod:
    """A Pod batchd made, as the worker's watch last saw it (JOB-93)."""

    info: PodInfo
    labels: dict[str, str]
    owner: str  # the controller's uid; "" for none
    #: it left the watch (its ``batchd.io/job-controller`` label removed) still holding the finalizer
    left: bool = False


class Watch(Protocol):
    """What :class:`JobPodIndex` needs of an informer (worker/informer.py)."""

    namespace: str | None
    rv: int

    def wait_for(self, rv: int, timeout: float) -> bool: ...


class JobPodIndex:
    """JOB-93: the Pods batchd made, by their controller's uid, from the worker's own watch of them.

    The bridge's informer of the Pods labelled ``batchd.io/job-controller`` hands it every change
    (:meth:`handle`, on the informer's thread), and ``observe_job`` reads a Job's Pods from it
    instead of LISTing them: a LIST of 100,000 Pods is 172 MB. A counted Pod (finished, released,
    JOB-91) is dropped, so the index holds the Pods in play. A read first waits until the watch
    has reached the resourceVersion the Job's workflow last read or wrote
    (:meth:`~worker.informer.Informer.wait_for`), so no sync acts on a cache older than what an
    earlier sync saw or did, on this replica or another (upstream's expectations, KEP-5647).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, CachedPod] = {}
        self._by_owner: dict[str, set[str]] = {}
        self._watches: list[Watch] = []

    def watch(self, informer: Watch) -> None:
        """Read Pods through ``informer`` (one per namespace watched, or one for all)."""
        self._watches.append(informer)

    def handle(self, etype: str, obj: dict[str, Any]) -> None:
        """Take in one change of a Pod, as the watch delivered it (a deletion with its last state)."""
        meta = obj.get("metadata") or {}
        uid = meta.get("uid") or ""
        holding = JOB_TRACKING_FINALIZER in (meta.get("finalizers") or [])
        labels = meta.get("labels") or {}
        finished = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if (etype == "DELETED" and not holding) or (labels.get(TRACKING_LABEL) == "released" and finished
                                                     and not holding):
            self.forget(uid)
            return
        entry = CachedPod(pod_info(obj), labels, _controller_uid(obj) or "", left=etype == "DELETED")
        with self._lock:
            old = self._pods.get(uid)
            if old is not None and old.owner != entry.owner:
                self._by_owner.get(old.owner, set()).discard(uid)
            self._pods[uid] = entry
            self._by_owner.setdefault(entry.owner, set()).add(uid)

    def forget(self, uid: str) -> None:
        """Drop a Pod: gone, counted, or no longer a Job's."""
        with self._lock:
            old = self._pods.pop(uid, None)
            if old is not None:
                owners = self._by_owner.get(old.owner)
                if owners is not None:
                    owners.discard(uid)
                    if not owners:
                        del self._by_owner[old.owner]

    def read(self, namespace: str, job_uid: str, fresher_than: int) -> tuple[list[CachedPod], list[CachedPod], int] | None:
        """The Pods the Job controls, the orphans of its namespace, and the resourceVersion read at.

        None when no watch covers the namespace (the caller LISTs instead).

        Raises:
            Unreachable: the watch did not reach ``fresher_than`` within :data:`CACHE_WAIT_SECONDS`
                (retryable: the next attempt may find it there, on this replica or another).
        """
        watch = next((w for w in self._watches if w.namespace in (None, namespace)), None)
        if watch is None:
            return None
        if not watch.wait_for(fresher_than, CACHE_WAIT_SECONDS):
            raise Unreachable(0, "CacheBehind", f"the Pod watch of namespace {namespace} is at resourceVersion "
                                                f"{watch.rv}, behind {fresher_than}")
        rv = watch.rv
        with self._lock:
            owned = [self._pods[u] for u in self._by_owner.get(job_uid, ())]
            orphans = [p for u in self._by_owner.get("", ()) if (p := self._pods[u]).info.namespace == namespace]
        return owned, orphans, rv


#: The Job as the worker's watch last saw it (its small view, worker/informer.py), by namespace
#: and uid; None when the watch has not seen it or does not cover the namespace.
JobView = Callable[[str, str], dict[str, Any] | None]


class JobCopies:
    """JOB-93: the whole Jobs this worker last read or wrote, handed out again while nothing changed.

    The worker's watch keeps a small view of each Job, not its template and policies (memory at
    100,000 Jobs), so a sync needs the whole object from elsewhere. Upstream reads it from its
    informer; batchd GETs it, and keeps here the last whole copy of each Job it syncs, encoded, the
    most recently used first, at most :data:`LIMIT_BYTES` of them (a Job may take 1.5 MB, so a
    bound on their number would not bound the memory). A copy is used instead of a GET while the
    watch's view of the Job is at the copy's resourceVersion (no one has changed it since, as far
    as the watch knows) and the copy is not older than what the Job's workflow last read or wrote
    (a write by another replica's activity). A change the watch has not delivered yet is read by
    the sync its event pokes, as upstream's informer would; a status write from a stale copy fails
    its precondition, and the copy is dropped.
    """

    LIMIT_BYTES = 32 * 1024 * 1024

    def __init__(self, view: JobView) -> None:
        self.view = view
        self._lock = threading.Lock()
        #: uid -> (the whole Job's resourceVersion, name, JSON), least recently used first
        self._copies: dict[str, tuple[str, str, bytes]] = {}
        self._bytes = 0

    def get(self, kube: Kube, namespace: str, name: str, uid: str, not_before: int) -> dict[str, Any] | None:
        """The Job named ``name``: a copy kept here if still current, else a GET (kept for next time)."""
        with self._lock:
            kept = self._copies.pop(uid, None)
            if kept is not None:
                self._copies[uid] = kept
        seen = self.view(namespace, uid)
        if (kept is not None and seen is not None and kept[1] == name
                and seen["metadata"].get("resourceVersion") == kept[0]
                and kept[0].isdigit() and int(kept[0]) >= not_before):
            copied: dict[str, Any] = json.loads(kept[2])  # the caller's own
            return copied
        job = kube.get("Job", namespace, name)
        if job is None or job["metadata"].get("uid") != uid:
            self.forget(uid)
        else:
            self.keep(job)
        return job

    def keep(self, job: dict[str, Any]) -> None:
        """Keep ``job`` (as the API returned it from a GET or a write) as its uid's copy."""
        meta = job["metadata"]
        entry = (meta.get("resourceVersion") or "", meta.get("name") or "", json.dumps(job).encode())
        with self._lock:
            self._drop(meta["uid"])
            self._copies[meta["uid"]] = entry
            self._bytes += len(entry[2])
            while self._bytes > self.LIMIT_BYTES:
                self._drop(next(iter(self._copies)))

    def forget(self, uid: str) -> None:
        with self._lock:
            self._drop(uid)

    def _drop(self, uid: str) -> None:
        old = self._copies.pop(uid, None)
        if old is not None:
            self._bytes -= len(old[2])


def status_body(s: JobStatusView, indexed: bool) -> dict[str, Any]:
    """The API form of a :class:`JobStatusView` (a full replacement of the controller-owned fields)."""
    body: dict[str, Any] = {
        "active": s.active, "ready": s.ready, "terminating": s.terminating,
        "succeeded": s.succeeded, "failed": s.failed,
        "uncountedTerminatedPods": {"succeeded": s.uncounted_succeeded, "failed": s.uncounted_failed},
        "startTime": rfc3339(s.start_time), "completionTime": rfc3339(s.completion_time),
        "conditions": [
            {"type": c.type, "status": c.status, "reason": c.reason or "", "message": c.message or "",
             "lastTransitionTime": rfc3339(c.last_transition_time), "lastProbeTime": rfc3339(c.last_transition_time)}
            for c in s.conditions
        ] or None,
    }
    if indexed:
        body["completedIndexes"] = s.completed_indexes
        if s.failed_indexes is not None:
            body["failedIndexes"] = s.failed_indexes  # POL-25
    return body


#: the API server's own limit for a generateName prefix (63 less the 5 random characters)
MAX_GENERATE_NAME = 58


def _truncated_prefix(job_name: str, index: int) -> str:
    """JOB-11: ``<job>-<i>-`` with the job part cut so the prefix stays within 58 characters."""
    suffix = f"-{index}-"
    return job_name[: 58 - len(suffix)] + suffix


def build_pod(job: dict[str, Any], index: int | None, counts: PodToCreate | None = None) -> dict[str, Any]:
    """A Pod for ``job`` (JOB-6 to JOB-12): template copy, controller reference, tracking finalizer, index.

    ``counts`` carries the per-index failure counts of a backoffLimitPerIndex Job (spec
    POL-20): the failure count always, the ignored count only when it is not zero.
    """
    meta, spec = job["metadata"], job["spec"]
    template = spec.get("template") or {}
    tmeta = template.get("metadata") or {}
    # JOB-91: a template's copy of the released label would hide the Pod from its own Job
    labels = {**{k: v for k, v in (tmeta.get("labels") or {}).items() if k != TRACKING_LABEL}, POD_JOB_LABEL: "true"}
    annotations = dict(tmeta.get("annotations") or {})
    finalizers = list(tmeta.get("finalizers") or [])
    if JOB_TRACKING_FINALIZER not in finalizers:
        finalizers.append(JOB_TRACKING_FINALIZER)
    pod_spec = copy.deepcopy(template.get("spec") or {})
    name = meta["name"]
    generate = f"{name}-"
    if counts is not None and counts.failure_count is not None:
        annotations[INDEX_FAILURE_COUNT_ANNOTATION] = str(counts.failure_count)
        if counts.ignored_failure_count > 0:
            annotations[INDEX_IGNORED_FAILURE_COUNT_ANNOTATION] = str(counts.ignored_failure_count)
    if index is not None:
        annotations[COMPLETION_INDEX_ANNOTATION] = str(index)
        labels[COMPLETION_INDEX_ANNOTATION] = str(index)
        pod_spec["hostname"] = f"{name}-{index}"
        generate = _truncated_prefix(name, index)
        for c in [*pod_spec.get("containers", []), *pod_spec.get("initContainers", [])]:
            env = c.setdefault("env", [])
            if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "fieldPath": f"metadata.labels['{COMPLETION_INDEX_ANNOTATION}']"}}})
    generate = generate[:MAX_GENERATE_NAME]
    named = {"name": generate + counts.suffix} if counts is not None and counts.suffix else {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            **named, "generateName": generate, "namespace": meta["namespace"], "labels": labels,
            "annotations": annotations, "finalizers": finalizers,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": meta["uid"],
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": pod_spec,
    }


def label_selector(selector: dict[str, Any] | None) -> str | None:
    """A LabelSelector as the ``labelSelector`` query string; None for a selector that matches nothing."""
    if not selector:
        return None
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key", ""), req.get("operator"), req.get("values") or []
        if op == "In":
            terms.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            terms.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            terms.append(key)
        elif op == "DoesNotExist":
            terms.append(f"!{key}")
    return ",".join(terms) or None


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy a LabelSelector (matchLabels and matchExpressions); an empty one matches nothing."""
    if not selector:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key", ""), req.get("operator"), req.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def claim_pod(pod: dict[str, Any], *, job_uid: str, job_deleting: bool, matches: bool) -> str:
    """JOB-25, JOB-26 (upstream ``ClaimObject``): what a Job's snapshot makes of one Pod of its namespace.

    Args:
        pod: the Pod as read from the API.
        job_uid: the Job's uid.
        job_deleting: the Job has a deletionTimestamp.
        matches: the Pod's labels match the Job's selector.

    Returns:
        ``"claimed"`` (the Job's own Pod), ``"unmatched"`` (the Job's, but its labels no longer
        match: to be released, decided by :func:`workflows.decisions.job.release_unmatched_pods`),
        ``"adopt"`` (an orphan that matches, not being deleted, while the Job is not) or
        ``"ignore"`` (another controller's Pod, or an orphan that cannot be adopted).
    """
    owner = _controller_uid(pod)
    if owner is not None:
        if owner != job_uid:
            return "ignore"
        return "claimed" if matches else "unmatched"
    if job_deleting or not matches or pod["metadata"].get("deletionTimestamp"):
        return "ignore"
    return "adopt"


def _controller_uid(pod: dict[str, Any]) -> str | None:
    ref = controller_of(pod["metadata"])
    return None if ref is None else str(ref.get("uid") or "")


def _heartbeating(pool: ThreadPoolExecutor, fn: Callable[[str], int], names: list[str]) -> PodsResult:
    """Run ``fn`` (which returns the resourceVersion its write left, JOB-93) over ``names`` in
    parallel, heartbeating from the activity's thread as results come."""
    done: list[str] = []
    rv = 0
    for name, written in zip(names, pool.map(fn, names), strict=True):
        done.append(name)
        rv = max(rv, written)
        activity.heartbeat(len(done))
    return PodsResult(names=done, pods_rv=rv)


class JobActivities:
    """The Job controller activities, bound to one Kubernetes client and, in a worker whose bridge
    watches the Pods, to its :class:`JobPodIndex` (JOB-93)."""

    def __init__(self, kube: Kube, clock: Clock | None = None, pods: JobPodIndex | None = None,
                 jobs: JobView | None = None) -> None:
        self.kube = kube
        self.clock = clock or SystemClock()
        self.pod_index = pods
        self.copies = None if jobs is None else JobCopies(jobs)
        self.pool = prestarted_pool(MAX_PARALLEL, "k8s-pods")
        self._orphans_scanned: dict[str, float] = {}  # Job uid -> monotonic time of its last orphan LIST

    def _pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        pods: list[dict[str, Any]] = []
        cont: str | None = None
        while True:
            page = self.kube.list("Pod", namespace, label_selector=selector, limit=1000, continue_=cont)
            pods += page.get("items") or []
            cont = (page.get("metadata") or {}).get("continue") or None
            if not cont:
                return pods

    @implements(contract.observe_job)
    @temporal_errors
    def observe(self, inp: ObserveJobInput) -> JobSnapshot:
        """The Job and its Pods, bounded to those the sync needs one by one (JOB-92).

        The Pods come from the worker's watch (:meth:`read_cached`, JOB-93) when it covers the
        namespace, else from a LIST (:meth:`read`). A workflow from before JOB-92 passes no memory
        and gets the whole snapshot it recorded then.
        """
        if inp.memory is None:
            return self.read(inp)
        job = self._job(inp.namespace, inp.name, inp.uid, inp.memory.job_rv)
        cached = None if self.pod_index is None else self.pod_index.read(inp.namespace, inp.uid, inp.memory.pods_rv)
        snap = self.read(inp, job) if cached is None else self.read_cached(inp, job, *cached)
        bounded, size = fit_snapshot(snap, inp.memory)
        if size > SNAPSHOT_LIMIT:
            # Recorded, it would fail every workflow task (PayloadsTooLarge) without a word on the Job;
            # refused here, the workflow records a Warning Event SyncFailed with this and tries later.
            raise ApplicationError(
                f"the Job's snapshot takes {size} bytes with {len(bounded.pods)} Pods, the fewest a sync "
                f"can act on; Temporal refuses a payload above 2 MB",
                type="SnapshotTooLarge", non_retryable=True)
        return bounded

    def read(self, inp: ObserveJobInput, job: dict[str, Any] | None = None) -> JobSnapshot:
        """GET the Job and LIST the Pods its selector matches, claiming them as upstream (JOB-25), as one snapshot.

        The LIST leaves out the Pods labelled released (JOB-91), so its size follows the Pods in
        flight, not the completions so far. Orphans that match are adopted. The Pods of
        ``inp.expect`` that the LIST did not show (relabeled, or stripped of the finalizer by
        someone) are read by name: one the Job still controls whose labels no longer match is
        reported in ``unmatched``, to be released.
        """
        job = job if job is not None else self.kube.get("Job", inp.namespace, inp.name)
        ours = job is not None and job["metadata"].get("uid") == inp.uid
        raw_selector = (job.get("spec") or {}).get("selector") if ours and job else None
        selector = label_selector(raw_selector)
        pods = self._pods(inp.namespace, f"{selector or f'{CONTROLLER_UID_LABEL}={inp.uid}'},{_IN_PLAY}")
        listed = {p["metadata"]["name"] for p in pods}
        missing = [p for p in (self.kube.get("Pod", inp.namespace, n) for n in inp.expect if n not in listed)
                   if p is not None]
        if not ours or job is None:
            # A gone Job's Pods may have lost their ownerReference to an orphaning delete; their
            # finalizers must still be released (JOB-3), so they stay in the snapshot.
            gone = [p for p in [*pods, *missing] if _controller_uid(p) in (inp.uid, None)]
            return job_snapshot(job, gone, namespace=inp.namespace, name=inp.name, uid=inp.uid)
        deleting = bool(job["metadata"].get("deletionTimestamp"))
        owned: list[dict[str, Any]] = []
        unmatched: list[dict[str, Any]] = []
        # Without a usable selector nothing is adopted, and nothing released either.
        read = [(p, selector is None or selector_matches(raw_selector, p["metadata"].get("labels") or {}))
                for p in missing]
        for p, matches in [*((p, True) for p in pods), *read]:
            verdict = claim_pod(p, job_uid=inp.uid, job_deleting=deleting, matches=matches)
            if verdict == "claimed":
                owned.append(p)
            elif verdict == "unmatched":
                unmatched.append(p)
            elif verdict == "adopt" and selector is not None and (adopted := self._adopt(job, p)) is not None:
                owned.append(adopted)
        return job_snapshot(job, owned, namespace=inp.namespace, name=inp.name, uid=inp.uid, unmatched=unmatched)

    def read_cached(self, inp: ObserveJobInput, job: dict[str, Any] | None, controlled: list[CachedPod],
                    orphans: list[CachedPod], rv: int) -> JobSnapshot:
        """JOB-93: the Job (a fresh GET) and its Pods as the worker's watch holds them.

        Claimed as :meth:`read` claims a LIST (JOB-25, JOB-26): a Pod whose labels stopped matching
        the selector is reported ``unmatched``; a Pod that left the watch still holding the
        finalizer is read by name (at most 500 a sync), and forgotten once gone or no longer the
        Job's; an orphan of the watch that matches is adopted, and once a minute a LIST finds the
        orphans the watch cannot show (those without ``batchd.io/job-controller``), which the
        adoption labels so that the watch shows them from then on.
        """
        assert self.pod_index is not None
        ours = job is not None and job["metadata"].get("uid") == inp.uid
        raw_selector = (job.get("spec") or {}).get("selector") if ours and job else None
        owned: list[PodInfo] = []
        unmatched: list[PodInfo] = []
        for c in [c for c in controlled if not c.left] + self._still_held([c for c in controlled if c.left][:WINDOW]):
            if not ours or raw_selector is None or selector_matches(raw_selector, c.labels):
                owned.append(c.info)
            else:
                unmatched.append(c.info)
        adopted: list[dict[str, Any]] = []
        if not ours:
            # JOB-3: a gone Job's Pods orphaned by the garbage collector still hold the finalizer
            owned += [c.info for c in orphans if c.labels.get(CONTROLLER_UID_LABEL) == inp.uid]
        elif job is not None and raw_selector is not None and not job["metadata"].get("deletionTimestamp"):
            adopted = self._adopt_orphans(job, raw_selector, orphans)
        snap = job_snapshot(job, [*owned, *adopted], namespace=inp.namespace, name=inp.name, uid=inp.uid,
                            unmatched=unmatched)
        return snap.model_copy(update={"pods_rv": max([rv, *map(resource_version_of, adopted)])})

    def _still_held(self, left: list[CachedPod]) -> list[CachedPod]:
        """The Pods that left the watch and still exist, held by the finalizer; the others are forgotten."""
        assert self.pod_index is not None
        out: list[CachedPod] = []
        for c in left:
            pod = self.kube.get("Pod", c.info.namespace, c.info.name)
            if (pod is None or pod["metadata"].get("uid") != c.info.uid
                    or JOB_TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or [])):
                self.pod_index.forget(c.info.uid)
                continue
            out.append(CachedPod(pod_info(pod), pod["metadata"].get("labels") or {}, _controller_uid(pod) or "",
                                 left=True))
        return out

    def _adopt_orphans(self, job: dict[str, Any], raw_selector: dict[str, Any],
                       orphans: list[CachedPod]) -> list[dict[str, Any]]:
        """JOB-25 from the watch: adopt its orphans that match, and LIST for the unlabelled ones once a minute."""
        meta = job["metadata"]
        found = [p for c in orphans if not c.info.deleting and selector_matches(raw_selector, c.labels)
                 and (p := self.kube.get("Pod", meta["namespace"], c.info.name)) is not None]
        now = time.monotonic()
        if now - self._orphans_scanned.get(meta["uid"], -ORPHAN_SCAN_SECONDS) >= ORPHAN_SCAN_SECONDS:
            self._orphans_scanned[meta["uid"]] = now
            if len(self._orphans_scanned) > 10_000:  # Jobs long gone; at worst one LIST more each
                self._orphans_scanned.clear()
            selector = label_selector(raw_selector)
            if selector is not None:
                found += self._pods(meta["namespace"], f"{selector},!{POD_JOB_LABEL},{_IN_PLAY}")
        adopted = []
        for p in found:
            if claim_pod(p, job_uid=meta["uid"], job_deleting=False, matches=True) == "adopt":
                if (pod := self._adopt(job, p)) is not None:
                    adopted.append(pod)
        return adopted

    def _adopt(self, job: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any] | None:
        """JOB-25: make the Job the controller of an orphan Pod and add the tracking finalizer.

        The Job was read fresh by this very activity (uid checked, not being deleted), which is
        the re-check upstream does before adopting. The patch is conditional on the Pod's
        resourceVersion, so a Pod that changed meanwhile is left for the next sync. It also
        labels the Pod ``batchd.io/job-controller``, so that the worker's watch shows it (JOB-93).
        """
        meta, jmeta = pod["metadata"], job["metadata"]
        ref = {"apiVersion": "batch/v1", "kind": "Job", "name": jmeta["name"], "uid": jmeta["uid"],
               "controller": True, "blockOwnerDeletion": True}
        finalizers = list(meta.get("finalizers") or [])
        if JOB_TRACKING_FINALIZER not in finalizers:
            finalizers.append(JOB_TRACKING_FINALIZER)
        patch = {"metadata": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"], "finalizers": finalizers,
                              "labels": {POD_JOB_LABEL: "true"},
                              "ownerReferences": [*(meta.get("ownerReferences") or []), ref]}}
        try:
            adopted = self.kube.patch("Pod", jmeta["namespace"], meta["name"], patch)
        except (NotFound, Conflict):
            return None
        activity.logger.info("Job %s/%s adopted Pod %s", jmeta["namespace"], jmeta["name"], meta["name"])
        return adopted

    @implements(contract.read_job_dependencies)
    @temporal_errors
    def read_dependencies(self, inp: DependenciesInput) -> Dependencies:
        """JOB-AFTER: GET each Job the Job waits for: its uid and how it ended, if it has."""
        jobs = []
        for name in inp.names:
            raw = self.kube.get("Job", inp.namespace, name)
            jobs.append(Dependency(name=name) if raw is None else Dependency.of(Job.model_validate(raw)))
        return Dependencies(jobs=jobs)

    @implements(contract.find_job_cycle)
    @temporal_errors
    def find_cycle(self, inp: CycleInput) -> Cycle:
        """JOB-AFTER: the shortest way back to the Job through ``after``, each Job read by GET.

        Only a Job that has not begun (no ``startTime``, no end) waits, so only its ``after`` leads
        on; one whose ``after`` cannot be read waits too, held (FAIL-CLOSED), and leads nowhere.
        """
        return Cycle(path=shortest_cycle(inp.name, inp.after, lambda name: self._awaits(inp.namespace, name)))

    def _awaits(self, namespace: str, name: str) -> list[str]:
        """The Jobs ``name`` waits for: none once it has begun, or if there is no such Job."""
        raw = self.kube.get("Job", namespace, name)
        if raw is None or (raw.get("status") or {}).get("startTime"):
            return []
        job = Job.model_validate(raw)
        if any(c.status == "True" for c in job.status.conditions if c.type in JOB_ENDS):
            return []
        return JobOptions.of(job.metadata.annotations).after

    @implements(contract.write_job_status)
    @temporal_errors
    def write_status(self, inp: WriteStatusInput) -> PodsResult:
        """Replace the controller-owned status fields (tracking steps 1 and 3)."""
        patch = {"metadata": {"uid": inp.uid, "resourceVersion": inp.resource_version},
                 "status": status_body(inp.status, inp.indexed)}
        try:
            job = self.kube.patch("Job", inp.namespace, inp.name, patch, subresource="status")
        except NotFound:
            return PodsResult(gone=True)
        except Conflict:
            if self.copies is not None:
                self.copies.forget(inp.uid)
            return PodsResult(stale=True)
        if self.copies is not None:
            self.copies.keep(job)
        return PodsResult(resource_version=job["metadata"]["resourceVersion"])

    def _job(self, namespace: str, name: str, uid: str, not_before: int) -> dict[str, Any] | None:
        """The Job (any uid): from :class:`JobCopies` where the worker watches it, else a GET."""
        if self.copies is None:
            return self.kube.get("Job", namespace, name)
        return self.copies.get(self.kube, namespace, name, uid, not_before)

    @implements(contract.create_job_pods)
    @temporal_errors
    def create_pods(self, inp: CreatePodsInput) -> CreatePodsResult:
        """Create Pods in slow-start batches of 1, 2, 4, … (JOB-22); stop after a batch with an error."""
        job = self._job(inp.namespace, inp.name, inp.uid, inp.job_rv)
        if job is None or job["metadata"].get("uid") != inp.uid:
            return CreatePodsResult(gone=True)
        created: list[str] = []
        rv = 0
        failed = refused = 0
        invalid: str | None = None
        forbidden: str | None = None
        todo = list(inp.pods) or [PodToCreate(index=i) for i in inp.indexes]
        batch = 1
        while todo:
            chunk, todo = todo[:batch], todo[batch:]
            for name, written, err in self.pool.map(lambda i: self._create_one(job, i), chunk):
                if name is not None:
                    created.append(name)
                    rv = max(rv, written)
                elif isinstance(err, Invalid):
                    invalid, refused = err.message, refused + 1
                elif isinstance(err, Forbidden):
                    forbidden, refused = err.message, refused + 1
                elif err is not None:
                    failed += 1
            activity.heartbeat(len(created))
            if invalid or forbidden or failed:
                break
            batch *= 2
        if failed and not created:
            raise KubeError(0, "CreateFailed", f"could not create Pods for Job {inp.namespace}/{inp.name}")
        return CreatePodsResult(created=created, failed=failed, refused=refused, invalid=invalid, forbidden=forbidden,
                                pods_rv=rv)

    def _create_one(self, job: dict[str, Any], want: PodToCreate) -> tuple[str | None, int, KubeError | None]:
        """One Pod: its name and the resourceVersion it was made at (JOB-93), or the error."""
        ns = job["metadata"]["namespace"]
        pod = build_pod(job, want.index, want)
        try:
            try:
                made = self.kube.create("Pod", ns, pod)
            except AlreadyExists:
                # An earlier attempt of this activity made it before its worker died: that Pod is
                # the one asked for. A stranger holding the name gets a Pod named by the server.
                name = pod["metadata"].pop("name")
                theirs = self.kube.get("Pod", ns, name)
                made = theirs if theirs is not None and _controller_uid(theirs) == job["metadata"]["uid"] \
                    else self.kube.create("Pod", ns, pod)
            return made["metadata"]["name"], resource_version_of(made), None
        except KubeError as err:
            if namespace_terminating(err):
                return None, 0, None  # JOB-23: ignored silently
            return None, 0, err

    def _release(self, namespace: str, name: str, finished: bool = False) -> int:
        """Remove the tracking finalizer; the resourceVersion the patch left (0: the Pod is gone)."""
        try:
            return resource_version_of(self.kube.patch("Pod", namespace, name, _RELEASE_FINISHED if finished else _RELEASE,
                                                       patch_type="application/strategic-merge-patch+json"))
        except NotFound:
            return 0

    @implements(contract.release_job_pods)
    @temporal_errors
    def release_finalizers(self, inp: ReleaseInput) -> PodsResult:
        """Tracking step 2: remove the tracking finalizer from each Pod (404 counts as done, JOB-32, JOB-91)."""
        finished = set(inp.finished)
        return _heartbeating(self.pool, lambda n: self._release(inp.namespace, n, n in finished), inp.pods)

    @implements(contract.release_unmatched_job_pods)
    @temporal_errors
    def release_unmatched(self, inp: ReleaseUnmatchedInput) -> PodsResult:
        """JOB-26: release Pods whose labels stopped matching, as upstream's ``ReleasePod``.

        One strategic-merge patch per Pod deletes the Job's ownerReference by uid and the
        tracking finalizer, on the Pod's uid. 404 (gone), 409 (a new Pod of that name) and 422
        (no such reference any more) mean there is nothing left to release. The Pod may have left
        the worker's watch, so its write is no resourceVersion a later read waits for (JOB-93).
        """
        def one(name: str) -> int:
            patch = {"metadata": {"uid": inp.pods[name],
                                  "ownerReferences": [{"$patch": "delete", "uid": inp.job_uid}],
                                  "$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}
            try:
                self.kube.patch("Pod", inp.namespace, name, patch, patch_type="application/strategic-merge-patch+json")
                activity.logger.info("released Pod %s/%s from Job %s", inp.namespace, name, inp.job_uid)
            except (NotFound, Conflict, Invalid):
                pass
            return 0

        return _heartbeating(self.pool, one, sorted(inp.pods))

    @implements(contract.delete_job_pods)
    @temporal_errors
    def delete_pods(self, inp: DeletePodsInput) -> PodsResult:
        """Delete Pods; with ``release`` the finalizer goes first so they are never counted (JOB-17)."""
        def one(name: str) -> int:
            released = self._release(inp.namespace, name) if inp.release else 0
            return max(released, resource_version_of(self.kube.delete("Pod", inp.namespace, name)))

        return _heartbeating(self.pool, one, inp.pods)

    def all(self) -> list[Callable[..., object]]:
        return [self.observe, self.write_status, self.create_pods, self.release_finalizers, self.release_unmatched,
                self.delete_pods, self.read_dependencies, self.find_cycle]
