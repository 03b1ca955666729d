"""OwnerReferencesPermissionEnforcement (kubesim/admission.py): off by default; when on, a
blocking owner reference needs ``update`` on the owner's finalizers, and changing an object's
owner references needs ``delete`` on it — answered with kube-apiserver's 403.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim import KubeSim
from kubesim.admission import Attributes, OwnerReferencesPermissionEnforcement, rbac_authorizer
from tests.kubesim.conftest import Http, job_body, owner_ref, pod_body

MERGE = "application/merge-patch+json"
#: What batchd's role granted before hardened clusters were considered.
WITHOUT_FINALIZERS = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "create", "delete"]},
                      {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "create", "patch", "delete"]}]
WITH_FINALIZERS = [*WITHOUT_FINALIZERS,
                   {"apiGroups": ["batch"], "resources": ["jobs/finalizers"], "verbs": ["update"]}]


@pytest.fixture
def hardened() -> Iterator[tuple[KubeSim, list[dict[str, Any]]]]:
    """A kubesim with the plugin on, whose authorizer grants the rules the test puts in the list."""
    rules: list[dict[str, Any]] = []
    plugin = OwnerReferencesPermissionEnforcement(lambda a: rbac_authorizer(rules)(a))
    with KubeSim(kubelet=False, admission=[plugin]) as sim:
        yield sim, rules


def _job(http: Http, ns: str) -> dict[str, Any]:
    code, _, job = http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job_body(f"j-{uuid.uuid4().hex[:6]}"))
    assert code == 201, job
    return job


def _pod(http: Http, ns: str, *refs: dict[str, Any]) -> tuple[int, Any]:
    code, _, body = http.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                 pod_body("", generateName="p-", ownerReferences=list(refs)))
    return code, body


@pytest.mark.parametrize(("rules", "block", "allowed"), [
    (WITHOUT_FINALIZERS, True, False),
    (WITH_FINALIZERS, True, True),
    (WITHOUT_FINALIZERS, False, True),
    ([*WITHOUT_FINALIZERS, {"apiGroups": ["batch"], "resources": ["jobs/*"], "verbs": ["*"]}], True, True),
    ([*WITHOUT_FINALIZERS, {"apiGroups": ["batch"], "resources": ["jobs/finalizers"], "verbs": ["update"],
                            "resourceNames": ["another-job"]}], True, False),
    ([*WITHOUT_FINALIZERS, {"apiGroups": ["batch"], "resources": ["cronjobs/finalizers"], "verbs": ["update"]}],
     True, False),
], ids=["blocking ref without jobs/finalizers is refused", "blocking ref with jobs/finalizers update is admitted",
        "a non-blocking ref needs nothing", "jobs/* covers the finalizers subresource",
        "resourceNames for another Job does not cover this one", "cronjobs/finalizers does not cover a Job owner"])
def test_a_blocking_owner_reference_needs_update_on_the_owners_finalizers(
        hardened: tuple[KubeSim, list[dict[str, Any]]], rules: list[dict[str, Any]], block: bool, allowed: bool) -> None:
    sim, granted = hardened
    http = Http(sim.url)
    job = _job(http, "default")
    granted[:] = rules
    code, body = _pod(http, "default", owner_ref(job, block=block))
    if allowed:
        assert code == 201, body
        return
    assert code == 403 and body["reason"] == "Forbidden", body
    assert body["message"].startswith('pods "p-') and body["message"].endswith(
        "is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set "
        "finalizers on: , <nil>"), body["message"]
    assert not sim.objects("", "pods"), "a refused create stores nothing"


def test_the_checks_are_recorded_in_rbac_terms(hardened: tuple[KubeSim, list[dict[str, Any]]]) -> None:
    sim, granted = hardened
    http = Http(sim.url)
    job = _job(http, "default")
    granted[:] = WITH_FINALIZERS
    assert _pod(http, "default", owner_ref(job))[0] == 201
    [plugin] = sim.api.admission
    assert isinstance(plugin, OwnerReferencesPermissionEnforcement)
    assert plugin.checks == {Attributes("update", "batch", "jobs", "finalizers", "default", job["metadata"]["name"]): 1}


def test_changing_owner_references_of_an_existing_object_needs_delete_on_it(
        hardened: tuple[KubeSim, list[dict[str, Any]]]) -> None:
    sim, granted = hardened
    http = Http(sim.url)
    job = _job(http, "default")
    granted[:] = WITH_FINALIZERS
    code, pod = _pod(http, "default")
    assert code == 201
    path = f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}"
    no_delete = [r if r["resources"] != ["pods"] else {**r, "verbs": ["get", "create", "patch"]} for r in WITH_FINALIZERS]
    granted[:] = no_delete
    code, _, body = http.request("PATCH", path, {"metadata": {"ownerReferences": [owner_ref(job, block=False)]}}, MERGE)
    assert (code, body["message"].split(": ", 1)[-1]) == (403, "cannot set an ownerRef on a resource you can't delete: , <nil>")
    granted[:] = WITH_FINALIZERS
    code, _, body = http.request("PATCH", path, {"metadata": {"ownerReferences": [owner_ref(job, block=False)]}}, MERGE)
    assert code == 200, body
    # Turning an existing reference into a blocking one is a new block: finalizers again.
    granted[:] = [r for r in WITH_FINALIZERS if r["resources"] != ["jobs/finalizers"]]
    code, _, body = http.request("PATCH", path, {"metadata": {"ownerReferences": [owner_ref(job, block=True)]}}, MERGE)
    assert code == 403 and "can't set finalizers on" in body["message"], body
    # A patch that leaves the references as they are is not the plugin's business.
    code, _, body = http.request("PATCH", path, {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert code == 200, body


def test_an_owner_of_an_unknown_kind_cannot_be_blocking(hardened: tuple[KubeSim, list[dict[str, Any]]]) -> None:
    sim, granted = hardened
    granted[:] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": str(uuid.uuid4()), "blockOwnerDeletion": True}
    code, body = _pod(Http(sim.url), "default", ref)
    assert code == 403 and "cannot find RESTMapping for APIVersion apps/v1 Kind ReplicaSet" in body["message"], body


def test_the_plugin_is_off_by_default(http: Http, ns: str) -> None:
    job = _job(http, ns)
    code, body = _pod(http, ns, owner_ref(job))
    assert code == 201, body
