"""PATCH: JSON merge, strategic merge (the merge keys batchd relies on) and JSON patch,
as pure functions and over HTTP through the client and kubectl."""

from __future__ import annotations

import json

import pytest
from kubernetes.client import ApiException

from kubesim import patch
from kubesim.errors import ApiError
from tests.kubesim.conftest import Http, job_body, pod_body

SMP = "application/strategic-merge-patch+json"


def test_merge_patch_merges_maps_and_null_deletes():
    doc = {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}
    out = patch.merge_patch(doc, {"a": {"b": None, "d": 3}, "l": [3], "k": None})
    assert out == {"a": {"c": 2, "d": 3}, "l": [3]}
    assert doc == {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}  # input untouched


def test_strategic_merge_treats_finalizers_as_a_set():
    doc = {"metadata": {"finalizers": ["a", "b"]}}
    assert patch.strategic_merge_patch(doc, {"metadata": {"finalizers": ["b", "c"]}}) == {
        "metadata": {"finalizers": ["a", "b", "c"]}}
    removed = patch.strategic_merge_patch(doc, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert removed == {"metadata": {"finalizers": ["b"]}}
    ordered = patch.strategic_merge_patch(
        doc, {"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"], "finalizers": ["c"]}})
    assert ordered == {"metadata": {"finalizers": ["c", "b", "a"]}}


def test_strategic_merge_merges_lists_by_their_keys():
    doc = {
        "metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]},
        "spec": {"containers": [{"name": "main", "image": "x", "env": [{"name": "A", "value": "1"}],
                                 "ports": [{"containerPort": 80, "name": "http"}]}],
                 "volumes": [{"name": "v1", "emptyDir": {}}]},
        "status": {"conditions": [{"type": "Complete", "status": "False"}, {"type": "Failed", "status": "False"}]},
    }
    out = patch.strategic_merge_patch(doc, {
        "metadata": {"ownerReferences": [{"uid": "2", "$patch": "delete"}, {"uid": "3", "name": "c"}]},
        "spec": {"containers": [{"name": "main", "image": "y", "env": [{"name": "B", "value": "2"}],
                                 "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                                {"name": "side", "image": "z"}],
                 "volumes": [{"name": "v2", "emptyDir": {}}]},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    })
    # new items lead, as the API server orders a merged list; merged ones keep their place
    assert [r["uid"] for r in out["metadata"]["ownerReferences"]] == ["3", "1"]
    main = out["spec"]["containers"][0]
    assert main["image"] == "y" and [e["name"] for e in main["env"]] == ["B", "A"]
    assert main["ports"] == [{"containerPort": 80, "name": "http", "protocol": "TCP"}]
    assert [c["name"] for c in out["spec"]["containers"]] == ["main", "side"]
    assert [v["name"] for v in out["spec"]["volumes"]] == ["v2", "v1"]
    assert out["status"]["conditions"] == [{"type": "Complete", "status": "True"}, {"type": "Failed", "status": "False"}]


def test_strategic_merge_replace_and_delete_directives():
    doc = {"spec": {"template": {"a": 1, "b": 2}, "containers": [{"name": "a"}, {"name": "b"}]},
           "metadata": {"labels": {"x": "1"}}}
    out = patch.strategic_merge_patch(doc, {"spec": {"template": {"$patch": "replace", "c": 3},
                                                     "containers": [{"$patch": "replace"}, {"name": "c"}]}})
    assert out["spec"] == {"template": {"c": 3}, "containers": [{"name": "c"}]}
    assert patch.strategic_merge_patch(doc, {"metadata": {"labels": {"$patch": "delete"}}}) == {
        "spec": doc["spec"], "metadata": {}}
    # Lists without a patch strategy (args, command) are replaced.
    assert patch.strategic_merge_patch({"args": ["a", "b"]}, {"args": ["c"]}) == {"args": ["c"]}


def test_json_patch_supports_every_operation():
    doc = {"a": {"b": [1, 2]}, "c": "x"}
    out = patch.json_patch(doc, [
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "add", "path": "/a/b/0", "value": 0},
        {"op": "replace", "path": "/c", "value": "y"},
        {"op": "copy", "from": "/c", "path": "/d"},
        {"op": "move", "from": "/d", "path": "/e"},
        {"op": "remove", "path": "/a/b/1"},
        {"op": "test", "path": "/e", "value": "y"},
        {"op": "add", "path": "/m~1n", "value": True},
    ])
    assert out == {"a": {"b": [0, 2, 3]}, "c": "y", "e": "y", "m/n": True}
    with pytest.raises(ApiError) as err:
        patch.json_patch(doc, [{"op": "test", "path": "/c", "value": "nope"}])
    assert err.value.code == 422
    with pytest.raises(ApiError) as err:
        patch.json_patch(doc, [{"op": "remove", "path": "/missing"}])
    assert err.value.code == 422


PATCHES_OF_EACH_TYPE = [
    ("merge", patch.MERGE_PATCH, {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"x": {"y": 2}}}),
    ("strategic", patch.STRATEGIC_MERGE_PATCH, {
        "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
        "spec": {"containers": [{"name": "c", "image": "new"}, {"name": "d", "image": "d"}]},
    }),
    ("json", patch.JSON_PATCH, [{"op": "replace", "path": "/spec/containers/0/image", "value": "new"},
                                {"op": "remove", "path": "/metadata/labels/a"},
                                {"op": "copy", "from": "/spec/x", "path": "/spec/z"}]),
]


@pytest.mark.parametrize("ctype,body", [c[1:] for c in PATCHES_OF_EACH_TYPE],
                         ids=[c[0] for c in PATCHES_OF_EACH_TYPE])
def test_applying_a_patch_never_mutates_its_target(ctype, body):
    # The server hands patches the stored snapshot with only its top level and metadata copied.
    target = {"metadata": {"labels": {"a": "1"}, "finalizers": ["a"]},
              "spec": {"x": {"y": 1}, "containers": [{"name": "c", "image": "old"}]}}
    snapshot = json.loads(json.dumps(target))
    result = patch.apply(ctype, target, json.loads(json.dumps(body)))
    assert target == snapshot
    assert result != snapshot


def test_merge_patch_over_http_updates_labels(http: Http, ns):
    http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job_body("mp", labels={"a": "1", "b": "2"}))
    code, _, out = http.request("PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/mp",
                                {"metadata": {"labels": {"a": None, "c": "3"}}}, "application/merge-patch+json")
    assert code == 200 and out["metadata"]["labels"] == {"b": "2", "c": "3"}


def test_strategic_merge_patch_over_http_adds_and_removes_finalizers(http: Http, ns):
    http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job_body("fin", finalizers=["a.io/x"]))
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/fin"
    code, _, out = http.request("PATCH", path, {"metadata": {"finalizers": ["b.io/y"]}}, SMP)
    assert code == 200 and out["metadata"]["finalizers"] == ["b.io/y", "a.io/x"]
    code, _, out = http.request("PATCH", path, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x"]}}, SMP)
    assert code == 200 and out["metadata"]["finalizers"] == ["b.io/y"]


def test_strategic_merge_patch_of_job_status_conditions_by_type(batch, ns):
    batch.create_namespaced_job(ns, job_body("cond"))
    t = "2026-01-01T00:00:00Z"
    batch.patch_namespaced_job_status("cond", ns, {"status": {"conditions": [
        {"type": "Suspended", "status": "True", "lastProbeTime": t, "lastTransitionTime": t}]}})
    out = batch.patch_namespaced_job_status("cond", ns, {"status": {"conditions": [
        {"type": "Suspended", "status": "False", "lastProbeTime": t, "lastTransitionTime": t}]}})
    assert [(c.type, c.status) for c in out.status.conditions] == [("Suspended", "False")]


def test_json_patch_over_http_with_a_failing_test_is_unprocessable(http: Http, ns):
    http.request("POST", f"/api/v1/namespaces/{ns}/pods", pod_body("jp", labels={"a": "1"}))
    path = f"/api/v1/namespaces/{ns}/pods/jp"
    ops = [{"op": "test", "path": "/metadata/labels/a", "value": "1"},
           {"op": "add", "path": "/metadata/labels/b", "value": "2"}]
    code, _, out = http.request("PATCH", path, ops, "application/json-patch+json")
    assert code == 200 and out["metadata"]["labels"] == {"a": "1", "b": "2"}
    code, _, out = http.request("PATCH", path, [{"op": "test", "path": "/metadata/labels/a", "value": "9"}],
                                "application/json-patch+json")
    assert code == 422 and out["kind"] == "Status"


def test_patch_with_a_stale_resource_version_is_a_conflict(core, ns):
    old = core.create_namespaced_pod(ns, pod_body("stale")).metadata.resource_version
    core.patch_namespaced_pod("stale", ns, {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("stale", ns, {"metadata": {"resourceVersion": old, "labels": {"x": "2"}}})
    assert err.value.status == 409


def test_unknown_patch_media_types_are_unsupported(http: Http, ns):
    http.request("POST", f"/api/v1/namespaces/{ns}/pods", pod_body("mt"))
    code, _, out = http.request("PATCH", f"/api/v1/namespaces/{ns}/pods/mt", {"a": 1}, "text/plain")
    assert code == 415 and out["reason"] == "UnsupportedMediaType"


def test_kubectl_patch_with_each_patch_type(kubectl, batch, ns):
    batch.create_namespaced_job(ns, job_body("kp"))
    kubectl("-n", ns, "patch", "job", "kp", "-p", json.dumps({"metadata": {"labels": {"s": "1"}}}))
    kubectl("-n", ns, "patch", "job", "kp", "--type", "merge", "-p", json.dumps({"metadata": {"labels": {"m": "1"}}}))
    out = kubectl("-n", ns, "patch", "job", "kp", "--type", "json", "-o", "json",
                  "-p", json.dumps([{"op": "add", "path": "/metadata/labels/j", "value": "1"}])).stdout
    labels = json.loads(out)["metadata"]["labels"]
    assert {k: labels[k] for k in ("s", "m", "j")} == {"s": "1", "m": "1", "j": "1"}
