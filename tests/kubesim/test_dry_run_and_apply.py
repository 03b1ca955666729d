"""Server-side dry run (``dryRun=All``) and server-side apply (``application/apply-patch+yaml``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubesim import apply as ssa
from tests.kubesim.conftest import Http, job_body

APPLY = ssa.APPLY_PATCH


def store_rv(http: Http) -> int:
    return int(http.get("/api/v1/namespaces")["metadata"]["resourceVersion"])


def first_event_after(http: Http, ns: str, rv: int) -> dict[str, Any]:
    """The first watch event on Jobs in ``ns`` after ``rv`` (a watch that ends at its timeout)."""
    code, _, body = http.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs?watch=1&resourceVersion={rv}"
                                        "&timeoutSeconds=1")
    assert code == 200
    lines = [json.loads(line) for line in body.splitlines()] if isinstance(body, str) else [body]
    assert lines, "no watch event"
    return lines[0]


def test_dry_run_create_update_patch_and_delete_store_nothing(http: Http, ns: str) -> None:
    base = f"/apis/batch/v1/namespaces/{ns}/jobs"
    code, _, real = http.request("POST", base, job_body("kept"))
    assert code == 201
    labels_before = dict(real["metadata"]["labels"])
    before = store_rv(http)

    code, _, created = http.request("POST", f"{base}?dryRun=All", job_body("dry"))
    assert code == 201 and created["metadata"]["uid"] and "resourceVersion" not in created["metadata"]
    assert created["spec"]["backoffLimit"] == 6  # defaulted as a real create is
    assert http.request("GET", f"{base}/dry")[0] == 404

    real["metadata"]["labels"] = {"changed": "by-put"}
    code, _, updated = http.request("PUT", f"{base}/kept?dryRun=All", real)
    assert code == 200 and updated["metadata"]["labels"] == {"changed": "by-put"}
    code, _, patched = http.request("PATCH", f"{base}/kept?dryRun=All", {"metadata": {"labels": {"p": "1"}}},
                                    content_type="application/merge-patch+json")
    assert code == 200 and patched["metadata"]["labels"]["p"] == "1"
    code, _, applied = http.request("PATCH", f"{base}/kept?dryRun=All&fieldManager=t",
                                    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"labels": {"a": "1"}}},
                                    content_type=APPLY)
    assert code == 200 and applied["metadata"]["labels"]["a"] == "1"
    code, _, deleted = http.request("DELETE", f"{base}/kept?dryRun=All")
    assert code == 200, deleted
    code, _, deleted = http.request("DELETE", f"{base}/kept", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                                "dryRun": ["All"]})
    assert code == 200, deleted

    stored = http.get(f"{base}/kept")
    assert stored["metadata"]["resourceVersion"] == real["metadata"]["resourceVersion"]
    assert stored["metadata"]["labels"] == labels_before
    assert "deletionTimestamp" not in stored["metadata"]
    assert store_rv(http) == before  # no resourceVersion consumed
    # No watch event either: the first event after the dry runs is the next real write.
    http.request("POST", base, job_body("after"))
    event = first_event_after(http, ns, before)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "after")


def test_an_unknown_dry_run_value_is_refused(http: Http, ns: str) -> None:
    code, _, answer = http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs?dryRun=Some", job_body("x"))
    assert (code, answer["reason"]) == (422, "Invalid")
    assert answer["message"] == 'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"'


def _cronjob(image: str = "busybox", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj", "labels": {"app": "a"}},
            "spec": {"schedule": "@hourly", **spec, "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": image}]}}}}}}


def test_apply_creates_then_is_idempotent(http: Http, ns: str) -> None:
    path = f"/apis/batch/v1/namespaces/{ns}/cronjobs/cj?fieldManager=me"
    code, _, created = http.request("PATCH", path, _cronjob(), content_type=APPLY)
    assert code == 201, created
    [entry] = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["fieldsType"]) == ("me", "Apply", "FieldsV1")
    containers = entry["fieldsV1"]["f:spec"]["f:jobTemplate"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert containers == {'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {}}}
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {"f:app": {}}}
    code, _, again = http.request("PATCH", path, _cronjob(), content_type=APPLY)
    assert code == 200
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == created["metadata"]["managedFields"]


def test_apply_conflicts_with_another_manager_in_upstreams_words_and_force_takes_over(http: Http, ns: str) -> None:
    base = f"/apis/batch/v1/namespaces/{ns}/cronjobs"
    code, _, _ = http.request("POST", f"{base}?fieldManager=kubectl-create", _cronjob())
    assert code == 201
    code, _, answer = http.request("PATCH", f"{base}/cj?fieldManager=kubectl", _cronjob("alpine"), content_type=APPLY)
    assert (code, answer["reason"]) == (409, "Conflict")
    field = '.spec.jobTemplate.spec.template.spec.containers[name="main"].image'
    assert answer["message"] == f'Apply failed with 1 conflict: conflict with "kubectl-create" using batch/v1: {field}'
    assert answer["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "kubectl-create" using batch/v1', "field": field}]

    code, _, answer = http.request("PATCH", f"{base}/cj?fieldManager=kubectl", _cronjob("alpine", suspend=True),
                                   content_type=APPLY)
    assert code == 409 and answer["message"].startswith(
        'Apply failed with 2 conflicts: conflicts with "kubectl-create" using batch/v1:\n- ')

    # The same value is shared, not a conflict.
    code, _, shared = http.request("PATCH", f"{base}/cj?fieldManager=kubectl", _cronjob(), content_type=APPLY)
    assert code == 200, shared
    code, _, forced = http.request("PATCH", f"{base}/cj?fieldManager=kubectl&force=true", _cronjob("alpine"),
                                   content_type=APPLY)
    assert code == 200, forced
    assert forced["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] == "alpine"
    managers = {e["manager"]: e for e in forced["metadata"]["managedFields"]}
    create_containers = managers["kubectl-create"]["fieldsV1"]["f:spec"]["f:jobTemplate"]["f:spec"]["f:template"][
        "f:spec"]["f:containers"]['k:{"name":"main"}']
    assert "f:image" not in create_containers  # taken over


def test_apply_removes_what_the_manager_no_longer_applies(http: Http, ns: str) -> None:
    path = f"/apis/batch/v1/namespaces/{ns}/cronjobs/cj?fieldManager=me"
    with_labels = _cronjob()
    with_labels["metadata"]["labels"] = {"app": "a", "extra": "x"}
    assert http.request("PATCH", path, with_labels, content_type=APPLY)[0] == 201
    code, _, after = http.request("PATCH", path, _cronjob(), content_type=APPLY)
    assert code == 200 and after["metadata"]["labels"] == {"app": "a"}


@pytest.mark.parametrize("query", ["", "?fieldManager="])
def test_apply_without_a_field_manager_is_invalid(http: Http, ns: str, query: str) -> None:
    code, _, answer = http.request("PATCH", f"/apis/batch/v1/namespaces/{ns}/cronjobs/cj{query}", _cronjob(),
                                   content_type=APPLY)
    assert (code, answer["reason"]) == (422, "Invalid")
    assert answer["message"] == 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'


def test_an_update_takes_ownership_of_what_it_changed(http: Http, ns: str) -> None:
    base = f"/apis/batch/v1/namespaces/{ns}/cronjobs"
    assert http.request("PATCH", f"{base}/cj?fieldManager=me", _cronjob(), content_type=APPLY)[0] == 201
    code, _, patched = http.request("PATCH", f"{base}/cj?fieldManager=editor", {"spec": {"schedule": "@daily"}},
                                    content_type="application/merge-patch+json")
    assert code == 200
    managers = {e["manager"]: e["fieldsV1"] for e in patched["metadata"]["managedFields"]}
    assert managers["editor"] == {"f:spec": {"f:schedule": {}}}
    assert "f:schedule" not in managers["me"]["f:spec"]
    # So the applier re-applying its old schedule now conflicts with the editor.
    code, _, answer = http.request("PATCH", f"{base}/cj?fieldManager=me", _cronjob(), content_type=APPLY)
    assert code == 409 and answer["message"] == (
        'Apply failed with 1 conflict: conflict with "editor" using batch/v1: .spec.schedule')


def test_managed_fields_are_in_the_api_servers_order_apply_first() -> None:
    # kubectl and users read managedFields[0]: the Apply entry stays first even when another
    # manager updated the status between two applies.
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a", "labels": {"app": "x"}},
           "spec": {"backoffLimit": 0}}
    first = ssa.apply(None, job, "kubectl", force=False, now="2026-01-01T00:00:00Z")
    status = {**first, "status": {"active": 1}}
    status["metadata"] = {**first["metadata"], "managedFields": ssa.update_entries(
        first, status, "batchd", "2026-01-01T00:00:01Z", subresource="status")}
    again = ssa.apply(status, job, "kubectl", force=False, now="2026-01-01T00:00:02Z")
    assert [(e["manager"], e["operation"]) for e in again["metadata"]["managedFields"]] == \
        [("kubectl", "Apply"), ("batchd", "Update")]
