"""Deletion semantics: finalizers, propagation policies, per-resource defaults and the
garbage collector, through the official client and kubectl."""

from __future__ import annotations

import kubernetes
import pytest
from kubernetes.client import ApiException

from tests.kubesim.conftest import eventually, job_body, owner_ref, pod_body


def missing(read, *args) -> bool:
    try:
        read(*args)
        return False
    except ApiException as err:
        assert err.status == 404, err
        return True


def cronjob_body(name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": job_body("x")["spec"]}}}


def owned_job(batch, ns, name, owner, *, block=True, finalizers=None):
    body = job_body(name)
    body["metadata"]["ownerReferences"] = [owner_ref(owner, kind="CronJob", block=block)]
    if finalizers:
        body["metadata"]["finalizers"] = finalizers
    return batch.create_namespaced_job(ns, body)


def test_an_object_with_finalizers_stays_until_the_last_is_removed(batch, ns):
    batch.create_namespaced_job(ns, job_body("fin", finalizers=["a.io/one", "b.io/two"]))
    batch.delete_namespaced_job("fin", ns, propagation_policy="Background")
    job = batch.read_namespaced_job("fin", ns)
    assert job.metadata.deletion_timestamp is not None
    assert job.metadata.deletion_grace_period_seconds == 0
    rv = job.metadata.resource_version
    batch.patch_namespaced_job("fin", ns, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/one"]}})
    assert batch.read_namespaced_job("fin", ns).metadata.finalizers == ["b.io/two"]
    batch.patch_namespaced_job("fin", ns, {"metadata": {"finalizers": None}})
    assert missing(batch.read_namespaced_job, "fin", ns)
    events = [(e["type"], e["object"].metadata.finalizers) for e in kubernetes.watch.Watch().stream(
        batch.list_namespaced_job, ns, resource_version=rv, timeout_seconds=1)]
    # Removing the last finalizer deletes in the same write: one DELETED, no extra MODIFIED.
    assert events == [("MODIFIED", ["b.io/two"]), ("DELETED", None)]


def test_no_new_finalizers_can_be_added_while_deleting(batch, ns):
    batch.create_namespaced_job(ns, job_body("nonew", finalizers=["a.io/one"]))
    batch.delete_namespaced_job("nonew", ns, propagation_policy="Background")
    with pytest.raises(ApiException) as err:
        batch.patch_namespaced_job("nonew", ns, {"metadata": {"finalizers": ["a.io/one", "b.io/late"]}})
    assert err.value.status == 422
    assert "no new finalizers" in err.value.body


def test_foreground_deletion_waits_for_blocking_dependents(batch, ns):
    owner = batch.create_namespaced_cron_job(ns, cronjob_body("cj"))
    owned_job(batch, ns, "blocker", owner, finalizers=["test.io/hold"])
    owned_job(batch, ns, "free", owner, block=False)
    batch.delete_namespaced_cron_job("cj", ns, propagation_policy="Foreground")
    cj = batch.read_namespaced_cron_job("cj", ns)
    assert cj.metadata.deletion_timestamp is not None and "foregroundDeletion" in cj.metadata.finalizers
    eventually(lambda: missing(batch.read_namespaced_job, "free", ns), what="non-blocking dependent deleted")
    eventually(lambda: batch.read_namespaced_job("blocker", ns).metadata.deletion_timestamp, what="blocker deleting")
    assert batch.read_namespaced_cron_job("cj", ns).metadata.deletion_timestamp is not None  # still waiting
    batch.patch_namespaced_job("blocker", ns, {"metadata": {"finalizers": None}})
    eventually(lambda: missing(batch.read_namespaced_cron_job, "cj", ns), what="owner removed after dependents")


def test_background_deletion_removes_the_owner_then_collects_dependents(batch, ns):
    owner = batch.create_namespaced_cron_job(ns, cronjob_body("cj"))
    owned_job(batch, ns, "dep", owner)
    batch.delete_namespaced_cron_job("cj", ns, propagation_policy="Background")
    assert missing(batch.read_namespaced_cron_job, "cj", ns)
    eventually(lambda: missing(batch.read_namespaced_job, "dep", ns), what="dependent collected")


def test_orphan_deletion_strips_owner_references(batch, ns):
    owner = batch.create_namespaced_cron_job(ns, cronjob_body("cj"))
    owned_job(batch, ns, "kept", owner)
    batch.delete_namespaced_cron_job("cj", ns, propagation_policy="Orphan")
    eventually(lambda: missing(batch.read_namespaced_cron_job, "cj", ns), what="owner removed")
    eventually(lambda: not batch.read_namespaced_job("kept", ns).metadata.owner_references)
    assert batch.read_namespaced_job("kept", ns).metadata.deletion_timestamp is None


def test_jobs_default_to_orphan_and_other_kinds_to_background(batch, core, ns):
    job = batch.create_namespaced_job(ns, job_body("legacy"))
    pod = pod_body("legacy-pod")
    pod["metadata"]["ownerReferences"] = [owner_ref(job)]
    core.create_namespaced_pod(ns, pod)
    batch.delete_namespaced_job("legacy", ns)  # no DeleteOptions body at all
    eventually(lambda: missing(batch.read_namespaced_job, "legacy", ns))
    eventually(lambda: not core.read_namespaced_pod("legacy-pod", ns).metadata.owner_references)
    owner = batch.create_namespaced_cron_job(ns, cronjob_body("cj"))
    owned_job(batch, ns, "child", owner)
    batch.delete_namespaced_cron_job("cj", ns)
    assert missing(batch.read_namespaced_cron_job, "cj", ns)
    eventually(lambda: missing(batch.read_namespaced_job, "child", ns), what="cronjob's job collected")


def test_dependents_whose_owners_are_all_gone_are_collected(batch, core, ns):
    ghost = {"metadata": {"name": "ghost", "uid": "00000000-0000-4000-8000-000000000000"}}
    body = job_body("orphaned")
    body["metadata"]["ownerReferences"] = [owner_ref(ghost, kind="CronJob")]
    batch.create_namespaced_job(ns, body)
    eventually(lambda: missing(batch.read_namespaced_job, "orphaned", ns), what="dependent of a missing owner collected")
    # One live owner keeps it; only the dangling reference goes.
    live = batch.create_namespaced_cron_job(ns, cronjob_body("live"))
    body = job_body("half")
    second = {**owner_ref(live, kind="CronJob"), "controller": False}
    body["metadata"]["ownerReferences"] = [owner_ref(ghost, kind="CronJob"), second]
    batch.create_namespaced_job(ns, body)
    eventually(lambda: [r.name for r in batch.read_namespaced_job("half", ns).metadata.owner_references] == ["live"])


def test_delete_returns_a_status_for_removed_jobs_and_the_object_for_pods(http, ns):
    http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job_body("gone"))
    code, _, body = http.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/gone?propagationPolicy=Background")
    assert code == 200 and body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"]["name"] == "gone" and body["details"]["kind"] == "jobs"
    http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job_body("held", finalizers=["x.io/y"]))
    code, _, body = http.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/held",
                                 {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    assert code == 200 and body["kind"] == "Job" and body["metadata"]["deletionTimestamp"]


@pytest.mark.parametrize(("cascade", "pod_survives"), [("orphan", True), ("background", False), ("foreground", False)])
def test_kubectl_delete_cascade_modes(kubectl, batch, core, ns, cascade, pod_survives):
    job = batch.create_namespaced_job(ns, job_body("kd"))
    pod = pod_body("kd-pod", run_seconds=0.1)
    pod["metadata"]["ownerReferences"] = [owner_ref(job)]
    core.create_namespaced_pod(ns, pod)
    eventually(lambda: core.read_namespaced_pod("kd-pod", ns).status.phase == "Succeeded")
    out = kubectl("-n", ns, "delete", "job", "kd", f"--cascade={cascade}", timeout=30).stdout
    assert 'job.batch "kd" deleted' in out
    assert missing(batch.read_namespaced_job, "kd", ns)
    if pod_survives:
        assert not core.read_namespaced_pod("kd-pod", ns).metadata.owner_references
    else:
        eventually(lambda: missing(core.read_namespaced_pod, "kd-pod", ns), what="pod collected")


def test_a_namespace_can_refuse_creates_like_an_admission_webhook_or_quota(core):
    """kubesim.batchd.io/deny-create emulates policy webhooks (422) and exhausted quotas (403)."""
    import pytest
    from kubernetes.client.exceptions import ApiException

    name = "deny-" + __import__("uuid").uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": name, "annotations": {
        "kubesim.batchd.io/deny-create": "pods:422:images from this registry are not allowed"}}})
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(name, pod)
    assert info.value.status == 422 and "denied the request" in info.value.body
    core.patch_namespace(name, {"metadata": {"annotations": {
        "kubesim.batchd.io/deny-create": "pods:403:exceeded quota: compute, requested: pods=1"}}})
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(name, pod)
    assert info.value.status == 403 and "exceeded quota" in info.value.body
    # other resources are unaffected
    core.create_namespaced_event(name, {"metadata": {"name": "e"}, "involvedObject": {"name": "p", "namespace": name},
                                        "reason": "R", "message": "m", "type": "Normal"})
