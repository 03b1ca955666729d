"""Tier 3: the Job API's policies end to end — kubesim's fake kubelet exits Pods with scripted
codes and evicts them, the real dev server runs the workflows. Rule ids: the POL-n of
docs/job.md (podFailurePolicy, backoffLimitPerIndex, successPolicy, elastic Indexed Jobs).
"""

from __future__ import annotations

from typing import Any

from kube.client import Kube
from tests.conftest import eventually, running
from tests.integration.test_job import condition, job_manifest, no_finalizers_left, outcome, pods_of

INDEX = "batch.kubernetes.io/job-completion-index"
FAILURES = "batch.kubernetes.io/job-index-failure-count"


def with_spec(manifest: dict[str, Any], *, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    manifest["spec"].update(spec)
    manifest["spec"]["template"]["metadata"]["annotations"].update(annotations or {})
    return manifest


def events(kube: Kube, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.list("Event", ns)["items"] if e["involvedObject"]["name"] == name and e["reason"] == reason]


def fail_job_on_42(name: str) -> dict[str, Any]:
    return with_spec(job_manifest(name, completions=3, parallelism=2, exit_code=42, backoff_limit=6),
                     podFailurePolicy={"rules": [
                         {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
                         {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]})


async def test_fail_job_on_an_exit_code_fails_the_job_at_once(client, kube: Kube, namespace, task_queue):
    # POL-11 to POL-17: FailureTarget then Failed (reason PodFailurePolicy), no retry although backoffLimit is 6
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, fail_job_on_42("fatal"))
        assert await outcome(client, namespace, job, record="job-pod-failure-policy-failjob") == "Failed"
    fresh = kube.get("Job", namespace, "fatal")
    failed = condition(fresh, "Failed")
    assert failed and failed["reason"] == "PodFailurePolicy" and condition(fresh, "FailureTarget")
    assert "failed with exit code 42 matching FailJob rule at index 0" in failed["message"]
    # the first two, none replaced: each counted failed, whether it failed or, still running when
    # the first one's exit failed the Job, was deleted (JOB-74). One only when the second creation
    # met an error (a loaded API server's timeout) and the first Pod had failed by the retry.
    pods = pods_of(kube, namespace, fresh)
    assert 1 <= len(pods) <= fresh["status"]["failed"] <= 2 and not fresh["status"].get("completionTime")
    assert events(kube, namespace, "fatal", "PodFailurePolicy")[0]["type"] == "Warning"
    assert no_finalizers_left(kube, namespace, fresh)


async def test_ignore_on_disruption_target_replaces_and_counts_nothing(client, kube: Kube, namespace, task_queue):
    # POL-8, POL-9: an evicted Pod (DisruptionTarget=True) is replaced; status.failed stays 0
    async with running(client, kube, task_queue, namespace):
        manifest = fail_job_on_42("evicted")
        job = kube.create("Job", namespace, with_spec(manifest, completions=1, parallelism=1, backoffLimit=0,
                                                     annotations={"kubesim.batchd.io/exit-code": "0",
                                                                  "kubesim.batchd.io/run-seconds": "8"}))
        first = await eventually(lambda: next((p for p in pods_of(kube, namespace, job)
                                               if p.get("status", {}).get("phase") == "Running"), None))
        kube.patch("Pod", namespace, first["metadata"]["name"],
                   {"metadata": {"annotations": {"kubesim.batchd.io/evict": "true"}}})
        await eventually(lambda: (kube.get("Pod", namespace, first["metadata"]["name"]) or {}).get("status", {})
                         .get("reason") == "Evicted", what="evicted")
        assert await outcome(client, namespace, job, timeout=60, record="job-pod-failure-policy-ignore") == "Complete"
    fresh = kube.get("Job", namespace, "evicted")
    assert fresh["status"].get("failed", 0) == 0 and fresh["status"]["succeeded"] == 1
    pods = pods_of(kube, namespace, fresh)
    assert len(pods) == 2, [(p["metadata"]["name"], p["status"].get("phase"), p["status"].get("reason"), p["metadata"].get("annotations")) for p in pods]
    evicted = next(p for p in pods if p["metadata"]["uid"] == first["metadata"]["uid"])
    assert any(c["type"] == "DisruptionTarget" for c in evicted["status"]["conditions"])
    assert no_finalizers_left(kube, namespace, fresh)


async def test_backoff_limit_per_index_fails_only_the_index_that_always_fails(client, kube: Kube, namespace, task_queue):
    # POL-20, POL-24, POL-25, POL-29: index 2 fails twice (limit 1), the others complete, the Job ends FailedIndexes
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, with_spec(
            job_manifest("perindex", completions=4, parallelism=4, indexed=True), backoffLimitPerIndex=1,
            annotations={"kubesim.batchd.io/fail-indexes": "2"}))
        assert await outcome(client, namespace, job, timeout=90, record="job-backoff-limit-per-index") == "Failed"
    fresh = kube.get("Job", namespace, "perindex")
    st = fresh["status"]
    failed = condition(fresh, "Failed")
    assert failed and (failed["reason"], failed["message"]) == ("FailedIndexes", "Job has failed indexes")
    assert st["failedIndexes"] == "2" and st["completedIndexes"] == "0,1,3"
    assert st["failed"] == 2 and st["succeeded"] == 3
    index2 = sorted(p["metadata"]["annotations"][FAILURES] for p in pods_of(kube, namespace, fresh)
                    if p["metadata"]["annotations"][INDEX] == "2")
    assert index2 == ["0", "1"]
    assert no_finalizers_left(kube, namespace, fresh)


async def test_success_policy_completes_after_two_indexes_and_terminates_the_rest(client, kube: Kube, namespace,
                                                                                  task_queue):
    # POL-35 to POL-38, POL-41: succeededCount 2; the slow indexes are deleted and not counted
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, with_spec(
            job_manifest("leader", completions=5, parallelism=5, indexed=True, run_seconds=60),
            successPolicy={"rules": [{"succeededCount": 2}]},
            annotations={"kubesim.batchd.io/run-seconds-by-index": "0-1=0.5"}))
        assert await outcome(client, namespace, job, timeout=60, record="job-success-policy") == "Complete"
    fresh = kube.get("Job", namespace, "leader")
    st = fresh["status"]
    complete = condition(fresh, "Complete")
    assert complete and (complete["reason"], complete["message"]) == ("SuccessPolicy", "Matched rules at index 0")
    assert condition(fresh, "SuccessCriteriaMet")["reason"] == "SuccessPolicy"
    assert st["succeeded"] == 2 and st["completedIndexes"] == "0,1" and st.get("failed", 0) == 0
    assert st["completionTime"]
    rest = [p for p in pods_of(kube, namespace, fresh) if p["metadata"]["annotations"][INDEX] not in ("0", "1")]
    assert all(p["metadata"].get("deletionTimestamp") for p in rest)  # the slow ones were terminated
    assert no_finalizers_left(kube, namespace, fresh)


async def test_elastic_scale_up_from_4_to_6_completes_all_six_indexes(client, kube: Kube, namespace, task_queue):
    # POL-42, POL-46
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("elastic", completions=4, parallelism=4, indexed=True,
                                                          run_seconds=3))
        await eventually(lambda: len(pods_of(kube, namespace, job)) == 4)
        kube.patch("Job", namespace, "elastic", {"spec": {"completions": 6, "parallelism": 6}})
        assert await outcome(client, namespace, job, timeout=60, record="job-elastic-scale-up") == "Complete"
    st = kube.get("Job", namespace, "elastic")["status"]
    assert st["completedIndexes"] == "0-5" and st["succeeded"] == 6
    indexes = sorted(int(p["metadata"]["annotations"][INDEX]) for p in pods_of(kube, namespace, job))
    assert indexes == [0, 1, 2, 3, 4, 5]


async def test_elastic_scale_down_removes_the_highest_indexes(client, kube: Kube, namespace, task_queue):
    # POL-43, POL-44
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, job_manifest("shrink", completions=4, parallelism=4, indexed=True,
                                                          run_seconds=5))
        await eventually(lambda: len(pods_of(kube, namespace, job)) == 4)
        kube.patch("Job", namespace, "shrink", {"spec": {"completions": 2, "parallelism": 2}})
        assert await outcome(client, namespace, job, timeout=60) == "Complete"
    st = kube.get("Job", namespace, "shrink")["status"]
    assert st["completedIndexes"] == "0,1" and st["succeeded"] == 2 and st.get("failed", 0) == 0
    cut = [p for p in pods_of(kube, namespace, job) if int(p["metadata"]["annotations"][INDEX]) >= 2]
    assert all(p["metadata"].get("deletionTimestamp") for p in cut)


async def test_orphan_pod_matching_a_manual_selector_is_adopted_and_counted(client, kube: Kube, namespace, task_queue):
    # JOB-25: an orphan that matches the selector gets the controller reference and the
    # tracking finalizer; a Pod controlled by someone else is left alone
    labels = {"app": "adopter"}
    orphan = kube.create("Pod", namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "stray", "labels": labels, "annotations": {"kubesim.batchd.io/run-seconds": "2"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}})
    holder = kube.create("Job", namespace, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "holder"},
                                            "spec": {"suspend": True, "managedBy": "example.com/other", "template": {
                                                "spec": {"restartPolicy": "Never",
                                                         "containers": [{"name": "main", "image": "busybox:1.36"}]}}}})
    other = kube.create("Pod", namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "taken", "labels": labels, "annotations": {"kubesim.batchd.io/run-seconds": "60"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "holder",
                             "uid": holder["metadata"]["uid"], "controller": True}]},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}})
    manifest = job_manifest("adopter", completions=2, parallelism=2, run_seconds=2)
    manifest["spec"].update({"manualSelector": True, "selector": {"matchLabels": labels}})
    manifest["spec"]["template"]["metadata"]["labels"] = labels
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, manifest)
        assert await outcome(client, namespace, job, timeout=60) == "Complete"
    adopted = kube.get("Pod", namespace, "stray")
    ref = next(o for o in adopted["metadata"]["ownerReferences"] if o.get("controller"))
    assert (ref["kind"], ref["uid"]) == ("Job", job["metadata"]["uid"])
    assert adopted["metadata"]["uid"] == orphan["metadata"]["uid"]
    untouched = kube.get("Pod", namespace, "taken")
    assert [o["uid"] for o in untouched["metadata"]["ownerReferences"]] == [holder["metadata"]["uid"]]
    assert "batch.kubernetes.io/job-tracking" not in (untouched["metadata"].get("finalizers") or [])
    assert other["metadata"]["uid"] == untouched["metadata"]["uid"]
    st = kube.get("Job", namespace, "adopter")["status"]
    created = [p for p in kube.list("Pod", namespace)["items"]
               if any(o.get("uid") == job["metadata"]["uid"] for o in p["metadata"].get("ownerReferences") or [])]
    assert st["succeeded"] == 2 and len(created) == 2  # the adopted Pod counted; only one Pod created
    assert not [p for p in created if "batch.kubernetes.io/job-tracking" in p["metadata"].get("finalizers", [])]


async def test_a_running_pod_relabeled_out_of_the_selector_is_released_and_replaced(client, kube: Kube, namespace,
                                                                                    task_queue):
    # JOB-26: the Job's controller reference and the tracking finalizer are
    # patched off the Pod (upstream's ReleasePod), it no longer counts, and a replacement is made
    labels = {"app": "quarantine"}
    manifest = job_manifest("quarantine", completions=2, parallelism=2, run_seconds=10)
    manifest["spec"].update({"manualSelector": True, "selector": {"matchLabels": labels}})
    manifest["spec"]["template"]["metadata"]["labels"] = labels
    async with running(client, kube, task_queue, namespace):
        job = kube.create("Job", namespace, manifest)
        uid = job["metadata"]["uid"]
        victim = await eventually(lambda: next((p for p in kube.list("Pod", namespace, label_selector="app=quarantine")
                                                ["items"] if p.get("status", {}).get("phase") == "Running"), None),
                                  timeout=60)
        name = victim["metadata"]["name"]
        relabeled = kube.patch("Pod", namespace, name, {"metadata": {"labels": {"app": "debug"}}})
        assert relabeled["status"]["phase"] == "Running"  # relabeled while it runs, before it could be counted

        def released() -> dict[str, Any] | None:
            meta = kube.get("Pod", namespace, name)["metadata"]
            return meta if not meta.get("ownerReferences") else None

        meta = await eventually(released, timeout=60, what="relabeled Pod released")
        assert "batch.kubernetes.io/job-tracking" not in (meta.get("finalizers") or [])
        assert await outcome(client, namespace, job, timeout=60) == "Complete"
    st = kube.get("Job", namespace, "quarantine")["status"]
    ours = [p for p in kube.list("Pod", namespace)["items"]
            if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]
    assert st["succeeded"] == 2 and st.get("failed", 0) == 0  # the released Pod is not counted
    assert len(ours) == 2 and name not in {p["metadata"]["name"] for p in ours}  # its replacement instead
    assert kube.get("Pod", namespace, name)["metadata"]["labels"]["app"] == "debug"  # left running, not deleted
    assert not [p for p in ours if "batch.kubernetes.io/job-tracking" in p["metadata"].get("finalizers", [])]
