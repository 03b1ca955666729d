"""Metadata, create/get/list/update/delete and selectors through the official client and HTTP."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import kubernetes
import pytest
from kubernetes.client import ApiException

from tests.kubesim.conftest import Http, eventually, job_body, pod_body


def status_of(err: ApiException) -> dict:
    import json

    return json.loads(err.body)


def test_initial_namespaces_exist(core):
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public"} <= names
    assert core.read_namespace("default").status.phase == "Active"


def test_create_assigns_uid_timestamp_generation_and_resource_version(http: Http, ns):
    code, _, job = http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job_body("meta"))
    assert code == 201
    meta = job["metadata"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", meta["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    created = datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00"))
    assert abs(created - datetime.now(UTC)) < timedelta(seconds=5)
    assert meta["generation"] == 1
    assert meta["namespace"] == ns
    assert meta["resourceVersion"].isdigit()


def test_resource_version_is_global_and_increasing(core, batch, ns):
    a = core.create_namespaced_pod(ns, pod_body("rv-a")).metadata.resource_version
    b = batch.create_namespaced_job(ns, job_body("rv-b")).metadata.resource_version
    c = core.patch_namespaced_pod("rv-a", ns, {"metadata": {"labels": {"x": "y"}}}).metadata.resource_version
    assert int(a) < int(b) < int(c)
    listed = core.list_namespaced_pod(ns).metadata.resource_version
    assert int(listed) >= int(c)


def test_generate_name_appends_five_random_characters(core, ns):
    names = {core.create_namespaced_pod(ns, pod_body("", generateName="gen-")).metadata.name for _ in range(3)}
    assert len(names) == 3
    for name in names:
        assert re.fullmatch(r"gen-[a-z0-9]{5}", name)


def test_creating_an_existing_name_is_already_exists(batch, ns):
    batch.create_namespaced_job(ns, job_body("dup"))
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job(ns, job_body("dup"))
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["kind"] == "Status" and body["reason"] == "AlreadyExists"
    assert body["message"] == 'jobs.batch "dup" already exists'


def test_get_of_a_missing_object_is_a_not_found_status(batch, ns):
    with pytest.raises(ApiException) as err:
        batch.read_namespaced_job("nope", ns)
    assert err.value.status == 404
    body = status_of(err.value)
    assert body["reason"] == "NotFound" and body["details"] == {"name": "nope", "group": "batch", "kind": "jobs"}


def test_creating_in_a_missing_namespace_is_not_found(core):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("no-such-ns", pod_body("p"))
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "no-such-ns" not found'


def test_creating_in_a_terminating_namespace_is_forbidden(core, batch, ns):
    batch.create_namespaced_job(ns, job_body("holder", finalizers=["batchd.io/hold"]))
    core.delete_namespace(ns)
    assert core.read_namespace(ns).status.phase == "Terminating"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod_body("late"))
    assert err.value.status == 403
    body = status_of(err.value)
    assert body["reason"] == "Forbidden"
    assert body["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    # The namespace waits for its content; releasing the finalizer lets it go.
    eventually(lambda: batch.read_namespaced_job("holder", ns).metadata.deletion_timestamp)
    # An update of the terminating namespace does not finish it while content remains.
    core.patch_namespace(ns, {"metadata": {"labels": {"touched": "yes"}}})
    assert core.read_namespace(ns).status.phase == "Terminating"
    batch.patch_namespaced_job("holder", ns, {"metadata": {"finalizers": None}})
    eventually(lambda: ns not in {n.metadata.name for n in core.list_namespace().items}, what="namespace gone")


def test_deleting_a_namespace_deletes_its_contents_then_the_namespace(core, batch, ns):
    batch.create_namespaced_job(ns, job_body("j1"))
    core.create_namespaced_pod(ns, pod_body("p1", run_seconds=30, annotations={"kubesim.batchd.io/terminate-seconds": "0.2"}))
    eventually(lambda: core.read_namespaced_pod("p1", ns).status.phase == "Running")
    core.delete_namespace(ns)
    # The running pod terminates gracefully before the namespace can go.
    eventually(lambda: core.read_namespaced_pod("p1", ns).metadata.deletion_timestamp)

    def gone() -> bool:
        try:
            core.read_namespace(ns)
            return False
        except ApiException as err:
            return err.status == 404

    eventually(gone, what="namespace removed")
    assert batch.list_namespaced_job(ns).items == []
    assert core.list_namespaced_pod(ns).items == []


def test_protected_namespaces_cannot_be_deleted(core):
    with pytest.raises(ApiException) as err:
        core.delete_namespace("kube-system")
    assert err.value.status == 403


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=web", {"a", "b"}),
        ("tier==web", {"a", "b"}),
        ("tier!=web", {"c", "d"}),
        ("tier in (web,db)", {"a", "b", "c"}),
        ("tier notin (web)", {"c", "d"}),
        ("env", {"a", "c"}),
        ("!env", {"b", "d"}),
        ("tier=web,env=prod", {"a"}),
        ("tier in (web, db),!env", {"b"}),
    ],
)
def test_label_selectors_support_every_operator(core, ns, selector, expected):
    labels = {"a": {"tier": "web", "env": "prod"}, "b": {"tier": "web"}, "c": {"tier": "db", "env": "dev"}, "d": {}}
    for name, lab in labels.items():
        core.create_namespaced_pod(ns, pod_body(name, labels=lab))
    got = {p.metadata.name for p in core.list_namespaced_pod(ns, label_selector=selector).items}
    assert got == expected


def test_a_malformed_label_selector_is_a_bad_request(core, ns):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(ns, label_selector="a in (b")
    assert err.value.status == 400


def test_field_selectors_match_dotted_paths(core, ns):
    core.create_namespaced_pod(ns, pod_body("fs-1", run_seconds=0.1))
    core.create_namespaced_pod(ns, pod_body("fs-2", run_seconds=60))
    by_name = core.list_namespaced_pod(ns, field_selector="metadata.name=fs-1").items
    assert [p.metadata.name for p in by_name] == ["fs-1"]
    not_name = core.list_namespaced_pod(ns, field_selector="metadata.name!=fs-1").items
    assert [p.metadata.name for p in not_name] == ["fs-2"]
    eventually(lambda: [p.metadata.name for p in core.list_namespaced_pod(ns, field_selector="status.phase=Succeeded").items] == ["fs-1"])
    running = core.list_namespaced_pod(ns, field_selector="status.phase=Running,spec.nodeName=kubesim-node").items
    assert [p.metadata.name for p in running] == ["fs-2"]
    across = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items
    assert {p.metadata.name for p in across} == {"fs-1", "fs-2"}


def test_list_pages_with_limit_and_continue(core, ns):
    for i in range(7):
        core.create_namespaced_pod(ns, pod_body(f"page-{i}"))
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_namespaced_pod(ns, limit=3, _continue=token)
        pages += 1
        seen += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
    assert pages == 3
    assert seen == [f"page-{i}" for i in range(7)]


def test_list_across_all_namespaces(batch, core, ns):
    other = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": other}})
    batch.create_namespaced_job(ns, job_body("x", labels={"mark": ns}))
    batch.create_namespaced_job(other, job_body("x", labels={"mark": ns}))
    items = batch.list_job_for_all_namespaces(label_selector=f"mark={ns}").items
    assert sorted(j.metadata.namespace for j in items) == sorted([ns, other])


def test_stale_resource_version_update_is_a_conflict(batch, ns):
    job = batch.create_namespaced_job(ns, job_body("upd"))
    job.metadata.labels = {"v": "1"}
    updated = batch.replace_namespaced_job("upd", ns, job)
    assert int(updated.metadata.resource_version) > int(job.metadata.resource_version)
    job.metadata.labels = {"v": "2"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        batch.replace_namespaced_job("upd", ns, job)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    assert "the object has been modified" in status_of(err.value)["message"]


def test_update_without_resource_version_is_unconditional(batch, ns):
    job = batch.create_namespaced_job(ns, job_body("uncond"))
    body = batch.api_client.sanitize_for_serialization(job)
    body["metadata"].pop("resourceVersion")
    body["metadata"]["labels"] = {"forced": "yes"}
    out = batch.replace_namespaced_job("uncond", ns, body)
    assert out.metadata.labels == {"forced": "yes"}


def test_delete_preconditions_on_uid_and_resource_version_conflict(batch, ns):
    job = batch.create_namespaced_job(ns, job_body("pre"))
    for pre in ({"uid": str(uuid.uuid4())}, {"resourceVersion": "1"}):
        with pytest.raises(ApiException) as err:
            batch.delete_namespaced_job("pre", ns, body={"preconditions": pre, "propagationPolicy": "Background"})
        assert err.value.status == 409
        assert "in the precondition" in status_of(err.value)["message"]
    ok = {"uid": job.metadata.uid, "resourceVersion": job.metadata.resource_version}
    batch.delete_namespaced_job("pre", ns, body={"preconditions": ok, "propagationPolicy": "Background"})
    with pytest.raises(ApiException) as err:
        batch.read_namespaced_job("pre", ns)
    assert err.value.status == 404


def test_delete_collection_honours_the_label_selector(batch, ns):
    for name, lab in (("dc-a", "yes"), ("dc-b", "yes"), ("dc-c", "no")):
        batch.create_namespaced_job(ns, job_body(name, labels={"sweep": lab}))
    batch.delete_collection_namespaced_job(ns, label_selector="sweep=yes", propagation_policy="Background")
    assert [j.metadata.name for j in batch.list_namespaced_job(ns).items] == ["dc-c"]


def test_status_subresource_changes_status_only(batch, ns):
    batch.create_namespaced_job(ns, job_body("st"))
    out = batch.patch_namespaced_job_status("st", ns, {"status": {"active": 2}, "metadata": {"labels": {"a": "b"}}})
    assert out.status.active == 2
    main = batch.patch_namespaced_job("st", ns, {"status": {"active": 5}})
    assert main.status.active == 2  # status is ignored on the main resource


def test_errors_are_status_objects_over_http(http: Http, ns):
    code, _, body = http.request("GET", f"/api/v1/namespaces/{ns}/pods/missing")
    assert code == 404 and body["kind"] == "Status" and body["status"] == "Failure"
    code, _, body = http.request("GET", "/apis/batch/v1/namespaces/x/widgets")
    assert code == 404 and body["kind"] == "Status"
    code, _, body = http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", raw=b"{not json")
    assert code == 400 and body["reason"] == "BadRequest"


def test_kubernetes_client_round_trips_a_job_model(batch, ns):
    job = kubernetes.client.V1Job(
        metadata=kubernetes.client.V1ObjectMeta(name="model", labels={"k": "v"}, annotations={"a": "b"}),
        spec=kubernetes.client.V1JobSpec(template=kubernetes.client.V1PodTemplateSpec(
            spec=kubernetes.client.V1PodSpec(restart_policy="Never", containers=[
                kubernetes.client.V1Container(name="c", image="busybox")]))),
    )
    batch.create_namespaced_job(ns, job)
    got = batch.read_namespaced_job("model", ns)
    assert got.metadata.labels == {"k": "v"} and got.metadata.annotations == {"a": "b"}
