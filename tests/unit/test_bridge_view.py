"""Tier 1: what the bridge keeps of an object (worker/informer.py ``bridge_view``) is all it reads.

The informers hand the bridge a view of each object, not the decoded API object (memory with
10,000 TTL timers, issue 3). These tables build objects as an API server returns them, with the
fields the bridge never reads, and check that everything the bridge derives from the view equals
what it derives from the full object.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from worker.bridge import Bridge, BridgeSettings, _Shard
from worker.informer import Informer, bridge_view
from workflows.models.common import Job, Pod
from workflows.models.cronjob import JITTER_ANNOTATION, CronJob, CronJobObservation, JobSummary
from workflows.models.job import CONTROLLER_UID_LABEL, JOB_NAME_LABEL, POD_JOB_LABEL, pod_info
from workflows.models.ttl import POD_TTL_LABEL, TTLObservation

T0, T1 = "2026-11-22T10:00:00Z", "2026-11-22T10:05:00Z"
MANAGED_FIELDS = [{"manager": "kubectl", "operation": "Update", "apiVersion": "batch/v1", "time": T0,
                   "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}}]
POD_TEMPLATE = {"metadata": {"labels": {"app": "etl"}}, "spec": {
    "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "args": ["sh", "-c", "true"],
                                              "resources": {}, "terminationMessagePath": "/dev/termination-log"}]}}


def meta(name: str, *, owner: dict[str, Any] | None = None, deleting: bool = False,
         labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {
        "name": name, "namespace": "team-a", "uid": f"uid-{name}", "resourceVersion": "42", "generation": 2,
        "creationTimestamp": T0, "labels": labels or {"app": name},
        "annotations": annotations or {"kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 500 + "}"},
        "finalizers": ["batch.kubernetes.io/job-tracking"], "managedFields": MANAGED_FIELDS,
        "selfLink": f"/apis/batch/v1/namespaces/team-a/jobs/{name}",
    }
    if owner:
        m["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": owner["kind"], "name": owner["name"],
                                 "uid": owner["uid"], "controller": True, "blockOwnerDeletion": True}]
    if deleting:
        m["deletionTimestamp"] = T1
        m["deletionGracePeriodSeconds"] = 0
    return m


def job(name: str, *, finished: str | None = "Complete", **kw: Any) -> dict[str, Any]:
    conditions = [] if finished is None else [
        {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastProbeTime": T1,
         "lastTransitionTime": T1, "message": "Reached expected number of succeeded pods"},
        {"type": finished, "status": "True", "reason": "CompletionsReached", "lastProbeTime": T1,
         "lastTransitionTime": T1, "message": "Reached expected number of succeeded pods"},
    ]
    status: dict[str, Any] = {"startTime": T0, "active": 0 if finished else 1, "succeeded": 1, "ready": 0,
                              "uncountedTerminatedPods": {}, "conditions": conditions}
    if finished == "Complete":
        status["completionTime"] = T1
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(name, **kw), "spec": {
        "template": POD_TEMPLATE, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": f"uid-{name}"}},
        "ttlSecondsAfterFinished": 100, "managedBy": "batchd.io/job-controller", "suspend": False, "completions": 1,
        "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
    }, "status": status}


def pod(name: str, *, phase: str = "Succeeded", **kw: Any) -> dict[str, Any]:
    terminated = {"exitCode": 0, "reason": "Completed", "startedAt": T0, "finishedAt": T1, "containerID": "c://1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta(name, **kw), "spec": {
        **POD_TEMPLATE["spec"], "nodeName": "node-1", "restartPolicy": "OnFailure",
    }, "status": {
        "phase": phase, "podIP": "10.0.0.7", "hostIP": "10.1.0.1", "startTime": T0,
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": T1}],
        "initContainerStatuses": [{"name": "init", "ready": False, "restartCount": 0, "image": "busybox",
                                   "state": {"terminated": {**terminated, "finishedAt": T0}}}],
        "containerStatuses": [
            {"name": "main", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "sha256:1",
             "state": {"terminated": terminated}, "lastState": {}},
            {"name": "side", "ready": True, "restartCount": 0, "image": "busybox",
             "state": {"running": {"startedAt": T0}}},
        ],
    }}


def cronjob(name: str, **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(name, **kw), "spec": {
        "schedule": "*/5 * * * *", "timeZone": "Europe/Paris", "concurrencyPolicy": "Forbid", "suspend": False,
        "startingDeadlineSeconds": 60, "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1,
        "jobTemplate": {"spec": {"template": POD_TEMPLATE}},
    }, "status": {"lastScheduleTime": T0, "lastSuccessfulTime": T0, "active": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": f"{name}-1", "namespace": "team-a", "uid": "j1"}]}}


CRON_OWNER = {"kind": "CronJob", "name": "nightly", "uid": "uid-nightly"}
JOBS = [
    ("finished Job owned by a CronJob", job("nightly-1", owner=CRON_OWNER)),
    ("failed Job being deleted", job("etl", finished="Failed", deleting=True)),
    ("running Job", job("etl", finished=None)),
    ("Job without status", {**job("etl"), "status": {}}),
]
PODS = [
    ("finished Pod with the TTL label", pod("p", labels={POD_TTL_LABEL: "30"})),
    ("running Pod of a Job", pod("j-0", phase="Running", owner={"kind": "Job", "name": "j", "uid": "u"},
                                 labels={POD_JOB_LABEL: "true", CONTROLLER_UID_LABEL: "u", JOB_NAME_LABEL: "j"})),
    ("Pod without status", {**pod("p"), "status": {}}),
]
CRONJOBS = [
    ("CronJob with a jitter annotation", cronjob("nightly", annotations={JITTER_ANNOTATION: "10"})),
    ("CronJob being deleted", cronjob("nightly", deleting=True)),
]


@pytest.mark.parametrize("obj", [r[1] for r in JOBS], ids=[r[0] for r in JOBS])
def test_a_job_view_gives_the_bridge_the_same_job(obj: dict[str, Any]) -> None:
    view = bridge_view(copy.deepcopy(obj))
    assert Job.model_validate(view) == Job.model_validate(obj)
    assert TTLObservation.of_job(Job.model_validate(view)) == TTLObservation.of_job(Job.model_validate(obj))
    assert (JobSummary.of(Job.model_validate(view), view.get("status"))
            == JobSummary.of(Job.model_validate(obj), obj.get("status")))
    assert "template" not in view["spec"] and "managedFields" not in view["metadata"]


@pytest.mark.parametrize("obj", [r[1] for r in PODS], ids=[r[0] for r in PODS])
def test_a_pod_view_gives_the_bridge_the_same_pod(obj: dict[str, Any]) -> None:
    view = bridge_view(copy.deepcopy(obj))
    assert Pod.model_validate(view) == Pod.model_validate(obj)
    assert TTLObservation.of_pod(Pod.model_validate(view)) == TTLObservation.of_pod(Pod.model_validate(obj))
    assert view["metadata"]["labels"] == obj["metadata"]["labels"]
    assert "containers" not in view["spec"]
    assert pod_info(view) == pod_info(obj)  # JOB-93: the Job controller reads its Pods from this cache


def test_a_pod_view_keeps_what_the_job_controller_reads() -> None:  # JOB-93
    full = pod("j-0", phase="Running", deleting=True)
    full["status"]["containerStatuses"][0]["restartCount"] = 3
    full["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "x",
                                         "lastTransitionTime": T1, "message": "evicted"})
    info = pod_info(bridge_view(copy.deepcopy(full)))
    assert info == pod_info(full) and info.restart_count == 3 and info.deleting
    assert [c.type for c in info.conditions] == ["Ready", "DisruptionTarget"]


@pytest.mark.parametrize("obj", [r[1] for r in CRONJOBS], ids=[r[0] for r in CRONJOBS])
def test_a_cronjob_view_gives_the_bridge_the_same_cronjob(obj: dict[str, Any]) -> None:
    view = bridge_view(copy.deepcopy(obj))
    assert CronJob.model_validate(view) == CronJob.model_validate(obj)
    assert CronJobObservation.of(CronJob.model_validate(view)) == CronJobObservation.of(CronJob.model_validate(obj))
    assert view["spec"] == obj["spec"]  # the workflow is told the whole spec
    assert "managedFields" not in view["metadata"]


def test_other_kinds_pass_unchanged() -> None:
    obj = {"kind": "ConfigMap", "metadata": {"name": "c", "managedFields": MANAGED_FIELDS}, "data": {"k": "v"}}
    assert bridge_view(obj) is obj


class _ListOnly:
    """A Kube stand-in whose list returns the next of the given pages (one page per relist)."""

    def __init__(self, *relists: list[dict[str, Any]]) -> None:
        self.relists = list(relists)

    def list(self, kind: str, namespace: str | None, **_: Any) -> dict[str, Any]:
        return {"items": copy.deepcopy(self.relists.pop(0)), "metadata": {"resourceVersion": "9"}}


def test_the_informer_hands_on_views_and_reports_a_relist_deletion_with_the_view() -> None:
    a, b = job("a"), job("b")
    got: list[tuple[str, dict[str, Any]]] = []
    inf = Informer(_ListOnly([a, b], [b]), "Job", "team-a", lambda t, o: got.append((t, o)),  # type: ignore[arg-type]
                   transform=bridge_view)
    inf._relist()
    inf._relist()
    assert [(t, o["metadata"]["name"]) for t, o in got] == [("SYNC", "a"), ("SYNC", "b"), ("DELETED", "a"), ("SYNC", "b")]
    assert all(o == bridge_view(copy.deepcopy({"kind": "Job", **src})) for (_, o), src in zip(got, [a, b, a, b], strict=True))


class _OneListThenWatches(_ListOnly):
    """One list; then each watch gives the next of ``streams`` and the last stops the informer."""

    def __init__(self, items: list[dict[str, Any]], *streams: list[dict[str, Any]]) -> None:
        super().__init__(items)
        self.streams, self.lists, self.since = list(streams), 0, []
        self.informer: Informer | None = None

    def list(self, kind: str, namespace: str | None, **kw: Any) -> dict[str, Any]:
        self.lists += 1
        return super().list(kind, namespace, **kw)

    def watch(self, kind: str, namespace: str | None, *, resource_version: str, **_: Any) -> Iterator[dict[str, Any]]:
        self.since.append(resource_version)
        stream = self.streams.pop(0)
        if not self.streams:
            assert self.informer is not None
            self.informer.stop()
        yield from copy.deepcopy(stream)


def test_a_resync_hands_on_the_cache_again_without_a_list_and_the_watch_resumes() -> None:
    a, b = job("a"), job("b")
    b2 = copy.deepcopy(b)
    b2["metadata"]["resourceVersion"] = "10"
    b2["metadata"]["labels"] = {"changed": "yes"}
    kube = _OneListThenWatches([a, b], [{"type": "MODIFIED", "object": b2}], [])
    got: list[tuple[str, str, str]] = []
    seen: list[tuple[str | None, str | None]] = []
    inf = Informer(kube, "Job", "team-a",  # type: ignore[arg-type]
                   lambda t, o: got.append((t, o["metadata"]["name"], o["metadata"].get("resourceVersion", ""))),
                   transform=bridge_view, resync_seconds=0,
                   observer=lambda old, new: seen.append(((old or {}).get("metadata", {}).get("resourceVersion"),
                                                          (new or {}).get("metadata", {}).get("resourceVersion"))))
    kube.informer = inf
    inf._run()
    rv_a, rv_b = a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"]
    assert kube.lists == 1  # the resyncs asked the API server for nothing
    assert kube.since == ["9", "10"]  # each watch resumed from the last version seen
    assert got == [("SYNC", "a", rv_a), ("SYNC", "b", rv_b),  # the list
                   ("SYNC", "a", rv_a), ("SYNC", "b", rv_b),  # a resync (resync_seconds=0: before each watch)
                   ("MODIFIED", "b", "10"),
                   ("SYNC", "a", rv_a), ("SYNC", "b", "10")]  # the next resync hands on the cache as it is now
    assert seen == [(None, rv_a), (None, rv_b), (rv_b, "10")]  # a resync is no change


def test_the_informer_says_which_resource_version_its_cache_has_reached() -> None:  # JOB-93
    a, b = job("a"), job("b")
    b2 = copy.deepcopy(b)
    b2["metadata"]["resourceVersion"] = "10"
    reached: list[int] = []
    kube = _OneListThenWatches([a, b], [{"type": "MODIFIED", "object": b2},
                                        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}], [])
    inf = Informer(kube, "Job", "team-a", lambda t, o: reached.append(inf.rv),  # type: ignore[arg-type]
                   transform=bridge_view, resync_seconds=3600)
    kube.informer = inf
    assert not inf.wait_for(0, 0.01)  # not listed yet
    inf._run()
    assert reached == [0, 0, 9]  # the handler sees each change before the cache claims it
    assert inf.rv == 12 and inf.wait_for(12, 0.01) and not inf.wait_for(13, 0.01)


def _ev(uid: str, etype: str, rv: int, received: float = 0.0) -> tuple[float, str, dict[str, Any]]:
    return received, etype, {"kind": "Job", "metadata": {"uid": uid, "resourceVersion": str(rv)}}


SHARD_ROWS = [
    ("changes of one object merge into its latest, in its first place, with its first receipt time",
     [_ev("a", "ADDED", 1, 1.0), _ev("b", "ADDED", 2, 2.0), _ev("a", "MODIFIED", 3, 3.0), _ev("a", "SYNC", 4, 4.0)],
     [(1.0, "SYNC", "a", "4"), (2.0, "ADDED", "b", "2")]),
    ("a deletion is never merged: the pending change goes first, then the deletion",
     [_ev("a", "MODIFIED", 1), _ev("a", "DELETED", 2), _ev("b", "ADDED", 3)],
     [(0.0, "MODIFIED", "a", "1"), (0.0, "DELETED", "a", "2"), (0.0, "ADDED", "b", "3")]),
    ("a replay adds nothing where a change is pending",
     [_ev("a", "MODIFIED", 5), _ev("a", "REPLAY", 4), _ev("b", "REPLAY", 6)],
     [(0.0, "MODIFIED", "a", "5"), (0.0, "REPLAY", "b", "6")]),
]


@pytest.mark.parametrize(("events", "expected"), [r[1:] for r in SHARD_ROWS], ids=[r[0] for r in SHARD_ROWS])
def test_a_bridge_shard_keeps_one_pending_change_per_object(events: list[Any], expected: list[Any]) -> None:
    """WATCH-5: a backlog costs one entry per object, and every object's latest state is routed."""
    async def drain() -> list[tuple[float, str, str, str]]:
        shard = _Shard()
        for event in events:
            shard.put(event)
        out = []
        while shard.qsize():
            received, etype, obj = await shard.get()
            shard.task_done()
            out.append((received, etype, obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]))
        return out

    assert asyncio.run(drain()) == expected


def test_a_resync_routes_only_what_changed_since_it_was_last_routed() -> None:
    """WATCH-6: a resync hands the whole cache on again; what was routed at that very version is not
    parsed and routed a second time, and what failed to route is."""
    async def run() -> list[tuple[str, str, str]]:
        br = Bridge(None, None, BridgeSettings(shards=1))  # type: ignore[arg-type]  # no router is reached
        br._loop, br._queues = asyncio.get_running_loop(), [_Shard()]
        store: dict[str, dict[str, Any]] = {}
        routed: list[tuple[str, str, str]] = []
        failing = {"c"}

        async def handle(etype: str, obj: dict[str, Any]) -> None:
            meta = obj["metadata"]
            routed.append((etype, meta["uid"], meta["resourceVersion"]))
            if meta["uid"] in failing:
                failing.discard(meta["uid"])
                raise RuntimeError("Temporal unreachable")

        br.handle = handle  # type: ignore[method-assign]
        br.cached = lambda kind, uid, namespace=None: store.get(uid)  # type: ignore[method-assign]
        consumer = asyncio.create_task(br._consume(br._queues[0]))

        async def event(etype: str, uid: str, rv: int) -> None:
            store[uid] = {"kind": "Job", "metadata": {"uid": uid, "namespace": "ns", "name": uid,
                                                      "resourceVersion": str(rv)}}
            br._enqueue(etype, store[uid])
            await asyncio.sleep(0)  # the put, scheduled thread-safely
            await br._queues[0].join()

        for uid in "abc":
            await event("SYNC", uid, 1)  # the first list
        for uid in "abc":
            await event("SYNC", uid, 1)  # a resync: only c, whose routing failed, goes again
        await event("MODIFIED", "a", 2)
        await event("SYNC", "a", 2)
        consumer.cancel()
        return routed

    assert asyncio.run(run()) == [("SYNC", "a", "1"), ("SYNC", "b", "1"), ("SYNC", "c", "1"),
                                  ("SYNC", "c", "1"), ("MODIFIED", "a", "2")]
