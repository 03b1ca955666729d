"""``fieldValidation`` on POST, PUT and PATCH through the official Python client: Strict rejects
unknown fields with the strict decoding error, Warn keeps the object and sends a ``Warning``
header per field, Ignore (and no parameter) drops them silently."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from tests.kubesim.conftest import Http, job_body

STRICT_MESSAGE = (
    'Job in version "v1" cannot be handled as a Job: strict decoding error: '
    'unknown field "spec.template.spec.containers[0].bar", unknown field "spec.foo"'
)  # in document order, as Go's strict decoder reports them


def job_with_unknown_fields(name: str) -> dict[str, Any]:
    body = job_body(name)
    body["spec"]["foo"] = 1
    body["spec"]["template"]["spec"]["containers"][0]["bar"] = "x"
    return body


@dataclass
class Reply:
    status: int
    warnings: list[str]
    body: dict[str, Any]


def send(api: kubernetes.client.ApiClient, method: str, path: str, body: Any, directive: str | None,
         content_type: str = "application/json") -> Reply:
    """One request through the official client's transport. Its typed methods validate bodies
    against their models (unknown fields never leave the client), so these go through call_api."""
    query = [("fieldValidation", directive)] if directive else []
    _, url, headers, data, _ = api.param_serialize(
        method, path, query_params=query, header_params={"Content-Type": content_type}, body=body
    )
    resp = api.call_api(method, url, header_params=headers, body=data)
    resp.read()
    return Reply(resp.status, list(resp.headers.getlist("Warning")), json.loads(resp.data))


def jobs_path(ns: str, name: str = "") -> str:
    return f"/apis/batch/v1/namespaces/{ns}/jobs" + (f"/{name}" if name else "")


def test_strict_create_is_rejected_with_the_strict_decoding_error(
    api_client: kubernetes.client.ApiClient, batch: kubernetes.client.BatchV1Api, ns: str
) -> None:
    reply = send(api_client, "POST", jobs_path(ns), job_with_unknown_fields("strict"), "Strict")
    assert reply.status == 400 and reply.body["reason"] == "BadRequest"
    assert reply.body["message"] == STRICT_MESSAGE
    with pytest.raises(ApiException) as missing:
        batch.read_namespaced_job("strict", ns)
    assert missing.value.status == 404


def test_strict_update_and_patch_are_rejected(
    api_client: kubernetes.client.ApiClient, batch: kubernetes.client.BatchV1Api, ns: str
) -> None:
    created = batch.create_namespaced_job(ns, job_body("upd"))
    body = api_client.sanitize_for_serialization(created)
    body["spec"]["foo"] = 1
    put = send(api_client, "PUT", jobs_path(ns, "upd"), body, "Strict")
    assert put.status == 400 and 'strict decoding error: unknown field "spec.foo"' in put.body["message"]
    with pytest.raises(ApiException) as patch:
        batch.patch_namespaced_job("upd", ns, {"spec": {"foo": 1}}, field_validation="Strict")
    assert patch.value.status == 400 and 'unknown field \\"spec.foo\\"' in patch.value.body
    # A strict write without unknown fields goes through.
    out = batch.patch_namespaced_job(
        "upd", ns, {"metadata": {"labels": {"ok": "1"}}}, field_validation="Strict"
    )
    assert out.metadata.labels["ok"] == "1"


def test_warn_keeps_the_object_and_sends_one_warning_per_unknown_field(
    api_client: kubernetes.client.ApiClient, batch: kubernetes.client.BatchV1Api, ns: str
) -> None:
    reply = send(api_client, "POST", jobs_path(ns), job_with_unknown_fields("warn"), "Warn")
    assert reply.status == 201 and reply.body["metadata"]["name"] == "warn"
    assert reply.warnings == [
        '299 - "unknown field \\"spec.template.spec.containers[0].bar\\""',
        '299 - "unknown field \\"spec.foo\\""',
    ]
    assert "foo" not in reply.body["spec"]
    patched = send(api_client, "PATCH", jobs_path(ns, "warn"), {"spec": {"foo": 2}}, "Warn",
                   "application/merge-patch+json")
    assert patched.status == 200
    assert patched.warnings == ['299 - "unknown field \\"spec.foo\\""']


@pytest.mark.parametrize("directive", ["Ignore", None], ids=["Ignore", "absent"])
def test_ignore_and_absent_drop_unknown_fields_silently(
    api_client: kubernetes.client.ApiClient, batch: kubernetes.client.BatchV1Api, ns: str,
    directive: str | None,
) -> None:
    reply = send(api_client, "POST", jobs_path(ns), job_with_unknown_fields("ign"), directive)
    assert reply.status == 201 and reply.warnings == []
    stored = api_client.sanitize_for_serialization(batch.read_namespaced_job("ign", ns))
    assert "foo" not in stored["spec"]
    assert "bar" not in stored["spec"]["template"]["spec"]["containers"][0]


def test_an_unsupported_directive_is_invalid(http: Http, ns: str) -> None:
    code, _, out = http.request(
        "POST", f"/apis/batch/v1/namespaces/{ns}/jobs?fieldValidation=Loud", job_body("loud")
    )
    assert code == 422 and out["reason"] == "Invalid"
    assert out["details"]["causes"][0]["field"] == "fieldValidation"
