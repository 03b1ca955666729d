"""Fault injection (errors, Retry-After, latency, watch disconnects) and the request audit."""

from __future__ import annotations

import time

import pytest
from kubernetes.client import ApiException

from kubesim import AuditKey
from tests.kubesim.conftest import Http, job_body


@pytest.fixture
def faults(sim, ns):
    """The session server's faults, cleared before the namespace fixture tears down."""
    yield sim.faults
    sim.faults.clear()


def test_every_request_fails_with_500_at_rate_one(faults, batch, ns):
    faults.set(error_rate=1.0, codes=(500,))
    with pytest.raises(ApiException) as err:
        batch.list_namespaced_job(ns)
    assert err.value.status == 500
    faults.clear()
    assert batch.list_namespaced_job(ns).items == []


def test_429_carries_retry_after(faults, http: Http, ns):
    faults.set(error_rate=1.0, codes=(429,), retry_after_seconds=3)
    code, headers, body = http.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs")
    assert code == 429 and headers["Retry-After"] == "3"
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 3


def test_a_fraction_of_requests_fail(faults, http: Http, ns):
    faults.set(error_rate=0.5, codes=(500, 429))
    codes = [http.request("GET", f"/api/v1/namespaces/{ns}/pods")[0] for _ in range(200)]
    failed = sum(c != 200 for c in codes)
    assert 60 < failed < 140
    assert set(codes) == {200, 500, 429}


def test_discovery_and_admin_paths_are_never_faulted(faults, http: Http):
    faults.set(error_rate=1.0)
    for path in ("/api", "/apis", "/api/v1", "/apis/batch/v1", "/version", "/healthz", "/kubesim/audit"):
        assert http.request("GET", path)[0] == 200, path


def test_latency_is_added_to_resource_requests(faults, http: Http, ns):
    faults.set(latency_seconds=0.2)
    start = time.monotonic()
    http.request("GET", f"/api/v1/namespaces/{ns}/pods")
    assert time.monotonic() - start >= 0.2


def test_faults_are_controlled_over_http(sim, http: Http, ns):
    try:
        code, _, body = http.request("POST", "/kubesim/faults", {"error_rate": 1.0, "codes": [503]})
        assert code == 200 and body["error_rate"] == 1.0
        assert http.request("GET", f"/api/v1/namespaces/{ns}/pods")[0] == 503
        assert http.request("POST", "/kubesim/faults", {})[0] == 200
        assert http.request("GET", f"/api/v1/namespaces/{ns}/pods")[0] == 200
        assert http.request("POST", "/kubesim/faults", {"error_rate": 2})[0] == 400
    finally:
        sim.faults.clear()


def test_audit_counts_requests_in_rbac_terms(sim, batch, core, http: Http, ns):
    sim.audit(reset=True)
    batch.create_namespaced_job(ns, job_body("aud"))
    batch.read_namespaced_job("aud", ns)
    batch.read_namespaced_job("aud", ns)
    batch.patch_namespaced_job_status("aud", ns, {"status": {"active": 1}})
    batch.list_job_for_all_namespaces()
    batch.delete_collection_namespaced_job(ns)
    core.list_namespaced_pod(ns, watch=True, timeout_seconds=1, _preload_content=False).read()
    counts = sim.audit()
    assert counts[AuditKey("create", "batch", "jobs", "")] == 1
    assert counts[AuditKey("get", "batch", "jobs", "")] == 2
    assert counts[AuditKey("patch", "batch", "jobs", "status")] == 1
    assert counts[AuditKey("list", "batch", "jobs", "")] == 1
    assert counts[AuditKey("deletecollection", "batch", "jobs", "")] == 1
    assert counts[AuditKey("watch", "", "pods", "")] == 1
    rows = http.get("/kubesim/audit")["requests"]
    assert {"verb": "get", "group": "batch", "resource": "jobs", "subresource": "", "count": 2, "faulted": 0} in rows


def test_the_audit_tells_faulted_requests_apart(sim, batch, http: Http, ns):
    sim.audit(reset=True)
    batch.create_namespaced_job(ns, job_body("flt"))
    sim.faults.set(error_rate=1.0, codes=(503,))
    try:
        for _ in range(3):
            assert http.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/flt")[0] == 503
    finally:
        sim.faults.clear()
    batch.read_namespaced_job("flt", ns)
    key = AuditKey("get", "batch", "jobs", "")
    assert sim.audit()[key] == 4 and sim.faulted() == {key: 3}
    assert {"verb": "get", "group": "batch", "resource": "jobs", "subresource": "", "count": 4, "faulted": 3} in \
        http.get("/kubesim/audit")["requests"]
    sim.audit(reset=True)
    assert sim.faulted() == {}
