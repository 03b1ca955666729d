"""Activities of the Job workflow: snapshot, Pod creation and deletion, finalizers, status writes.

Layer: activities. Implements the declarations of workflows/models/job.py, which workflows/job.py
calls; registered by worker/temporal.py. Each is idempotent and batched (one activity call handles many Pods, so history stays small however many
Pods a Job runs). Upstream's three tracking steps map to :meth:`JobActivities.write_status`
(step 1 and step 3) and :meth:`JobActivities.release_finalizers` (step 2). Rule ids (JOB-n,
POL-n) are those of docs/job.md.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio import activity

from activities.contract import implements
from activities.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    namespace_terminating,
    temporal_errors,
)
from activities.kube import Clock, Kube, SystemClock, prestarted_pool
from workflows.models import job as contract
from workflows.models.job import (
    COMPLETION_INDEX_ANNOTATION,
    CONTROLLER_UID_LABEL,
    INDEX_FAILURE_COUNT_ANNOTATION,
    INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
    JOB_TRACKING_FINALIZER,
    POD_JOB_LABEL,
    TRACKING_LABEL,
    CreatePodsInput,
    CreatePodsResult,
    DeletePodsInput,
    JobSnapshot,
    JobStatusView,
    ObserveJobInput,
    PodsResult,
    PodToCreate,
    ReleaseInput,
    ReleaseUnmatchedInput,
    WriteStatusInput,
    job_snapshot,
)
from workflows.models.jobpods import bound_snapshot
from workflows.times import rfc3339

MAX_PARALLEL = 16  # concurrent Pod requests within one activity
#: Strategic merge patch that removes only the tracking finalizer (as upstream does, JOB-32).
_RELEASE = {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}
#: The same for a finished Pod, which it also labels released: the Job's LIST leaves it out from then on (JOB-91).
_RELEASE_FINISHED = {"metadata": {**_RELEASE["metadata"], "labels": {TRACKING_LABEL: "released"}}}
#: JOB-91: the Job's Pods still in play; ``!=`` also matches the Pods without the label (running, or made before it)
_IN_PLAY = f"{TRACKING_LABEL}!=released"


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
        match: to be released, decided by :func:`workflows.jobsync.release_unmatched_pods`),
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
    ref = next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
    return None if ref is None else str(ref.get("uid") or "")


def _heartbeating(pool: ThreadPoolExecutor, fn: Callable[[str], str], names: list[str]) -> list[str]:
    """Run ``fn`` over ``names`` in parallel, heartbeating from the activity's thread as results come."""
    done: list[str] = []
    for name in pool.map(fn, names):
        done.append(name)
        activity.heartbeat(len(done))
    return done


class JobActivities:
    """The Job controller activities, bound to one Kubernetes client."""

    def __init__(self, kube: Kube, clock: Clock | None = None) -> None:
        self.kube = kube
        self.clock = clock or SystemClock()
        self.pool = prestarted_pool(MAX_PARALLEL, "k8s-pods")

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
        """The snapshot of :meth:`read`, bounded to the Pods the sync needs one by one (JOB-92)."""
        snap = self.read(inp)
        return snap if inp.memory is None else bound_snapshot(snap, inp.memory)

    def read(self, inp: ObserveJobInput) -> JobSnapshot:
        """GET the Job and LIST the Pods its selector matches, claiming them as upstream (JOB-25), as one snapshot.

        The LIST leaves out the Pods labelled released (JOB-91), so its size follows the Pods in
        flight, not the completions so far. Orphans that match are adopted. The Pods of
        ``inp.expect`` that the LIST did not show (relabeled, or stripped of the finalizer by
        someone) are read by name: one the Job still controls whose labels no longer match is
        reported in ``unmatched``, to be released.
        """
        job = self.kube.get("Job", inp.namespace, inp.name)
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

    def _adopt(self, job: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any] | None:
        """JOB-25: make the Job the controller of an orphan Pod and add the tracking finalizer.

        The Job was read fresh by this very activity (uid checked, not being deleted), which is
        the re-check upstream does before adopting. The patch is conditional on the Pod's
        resourceVersion, so a Pod that changed meanwhile is left for the next sync.
        """
        meta, jmeta = pod["metadata"], job["metadata"]
        ref = {"apiVersion": "batch/v1", "kind": "Job", "name": jmeta["name"], "uid": jmeta["uid"],
               "controller": True, "blockOwnerDeletion": True}
        finalizers = list(meta.get("finalizers") or [])
        if JOB_TRACKING_FINALIZER not in finalizers:
            finalizers.append(JOB_TRACKING_FINALIZER)
        patch = {"metadata": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"], "finalizers": finalizers,
                              "ownerReferences": [*(meta.get("ownerReferences") or []), ref]}}
        try:
            adopted = self.kube.patch("Pod", jmeta["namespace"], meta["name"], patch)
        except (NotFound, Conflict):
            return None
        activity.logger.info("Job %s/%s adopted Pod %s", jmeta["namespace"], jmeta["name"], meta["name"])
        return adopted

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
            return PodsResult(stale=True)
        return PodsResult(resource_version=job["metadata"]["resourceVersion"])

    @implements(contract.create_job_pods)
    @temporal_errors
    def create_pods(self, inp: CreatePodsInput) -> CreatePodsResult:
        """Create Pods in slow-start batches of 1, 2, 4, … (JOB-22); stop after a batch with an error."""
        job = self.kube.get_instance("Job", inp.namespace, inp.name, inp.uid)
        if job is None:
            return CreatePodsResult(gone=True)
        created: list[str] = []
        failed = refused = 0
        invalid: str | None = None
        forbidden: str | None = None
        todo = list(inp.pods) or [PodToCreate(index=i) for i in inp.indexes]
        batch = 1
        while todo:
            chunk, todo = todo[:batch], todo[batch:]
            for name, err in self.pool.map(lambda i: self._create_one(job, i), chunk):
                if name is not None:
                    created.append(name)
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
        return CreatePodsResult(created=created, failed=failed, refused=refused, invalid=invalid, forbidden=forbidden)

    def _create_one(self, job: dict[str, Any], want: PodToCreate) -> tuple[str | None, KubeError | None]:
        ns = job["metadata"]["namespace"]
        pod = build_pod(job, want.index, want)
        try:
            try:
                return self.kube.create("Pod", ns, pod)["metadata"]["name"], None
            except AlreadyExists:
                # An earlier attempt of this activity made it before its worker died: that Pod is
                # the one asked for. A stranger holding the name gets a Pod named by the server.
                name = pod["metadata"].pop("name")
                theirs = self.kube.get("Pod", ns, name)
                if theirs is not None and _controller_uid(theirs) == job["metadata"]["uid"]:
                    return name, None
                return self.kube.create("Pod", ns, pod)["metadata"]["name"], None
        except KubeError as err:
            if namespace_terminating(err):
                return None, None  # JOB-23: ignored silently
            return None, err

    def _release(self, namespace: str, name: str, finished: bool = False) -> str:
        try:
            self.kube.patch("Pod", namespace, name, _RELEASE_FINISHED if finished else _RELEASE,
                            patch_type="application/strategic-merge-patch+json")
        except NotFound:
            pass
        return name

    @implements(contract.release_job_pods)
    @temporal_errors
    def release_finalizers(self, inp: ReleaseInput) -> PodsResult:
        """Tracking step 2: remove the tracking finalizer from each Pod (404 counts as done, JOB-32, JOB-91)."""
        finished = set(inp.finished)
        return PodsResult(names=_heartbeating(
            self.pool, lambda n: self._release(inp.namespace, n, n in finished), inp.pods))

    @implements(contract.release_unmatched_job_pods)
    @temporal_errors
    def release_unmatched(self, inp: ReleaseUnmatchedInput) -> PodsResult:
        """JOB-26: release Pods whose labels stopped matching, as upstream's ``ReleasePod``.

        One strategic-merge patch per Pod deletes the Job's ownerReference by uid and the
        tracking finalizer, on the Pod's uid. 404 (gone), 409 (a new Pod of that name) and 422
        (no such reference any more) mean there is nothing left to release.
        """
        def one(name: str) -> str:
            patch = {"metadata": {"uid": inp.pods[name],
                                  "ownerReferences": [{"$patch": "delete", "uid": inp.job_uid}],
                                  "$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}
            try:
                self.kube.patch("Pod", inp.namespace, name, patch, patch_type="application/strategic-merge-patch+json")
                activity.logger.info("released Pod %s/%s from Job %s", inp.namespace, name, inp.job_uid)
            except (NotFound, Conflict, Invalid):
                pass
            return name

        return PodsResult(names=_heartbeating(self.pool, one, sorted(inp.pods)))

    @implements(contract.delete_job_pods)
    @temporal_errors
    def delete_pods(self, inp: DeletePodsInput) -> PodsResult:
        """Delete Pods; with ``release`` the finalizer goes first so they are never counted (JOB-17)."""
        def one(name: str) -> str:
            if inp.release:
                self._release(inp.namespace, name)
            self.kube.delete("Pod", inp.namespace, name)
            return name

        return PodsResult(names=_heartbeating(self.pool, one, inp.pods))

    def all(self) -> list[Callable[..., object]]:
        return [self.observe, self.write_status, self.create_pods, self.release_finalizers, self.release_unmatched,
                self.delete_pods]
