"""coordination.k8s.io/v1 Leases: validation (API-58 to API-62), MicroTime decoding, the
resourceVersion compare-and-swap leader election relies on, watch, discovery, OpenAPI, protobuf
and what the real kubectl (the current one and 1.27) prints and does."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client import ApiException

from kubesim import gotime, protobuf, schema, strategy
from kubesim.errors import ApiError
from tests.kubesim.conftest import Http, eventually

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ACQUIRED, RENEWED = "2026-11-22T10:00:00.123456Z", "2026-11-22T10:00:05.000001Z"
MICRO = "2006-01-02T15:04:05.000000Z07:00"
NEG = "must be greater than or equal to 0"


def lease(name: str = "leader", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "default", "uid": "0b1c2d3e-0000-4000-8000-000000000001"},
        "spec": {"holderIdentity": "replica-a", "leaseDurationSeconds": 15, "acquireTime": ACQUIRED,
                 "renewTime": RENEWED, "leaseTransitions": 0},
    }
    body["spec"].update(spec)
    return body


def create(obj: dict[str, Any]) -> dict[str, Any]:
    return strategy.prepare_create("coordination.k8s.io", "leases", obj, now=NOW)


def refused(obj: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as info:
        create(obj)
    return info.value


# --------------------------------------------------------------------------------------------
# Validation (ValidateLease, ValidateLeaseSpec)
# --------------------------------------------------------------------------------------------

LEASE_VALID = [
    # (id, spec overrides (None: no fields), what comes back: None as sent, the fields that change,
    # or the name of a field dropped)
    ("a held lease", {}, None),
    ("an empty spec: every field is optional", None, {}),
    ("an empty holder is free-form text", {"holderIdentity": ""}, None),
    ("any holder text is accepted", {"holderIdentity": "Host_1/replica A:7"}, None),
    ("a one-second duration", {"leaseDurationSeconds": 1}, None),  # API-58
    ("zero transitions", {"leaseTransitions": 0}, None),  # API-58
    ("the Kubernetes-defined strategy", {"strategy": "OldestEmulationVersion", "preferredHolder": "a"}, None),  # API-59
    ("a domain-prefixed strategy", {"strategy": "example.com/my-strategy"}, None),  # API-59
    ("an empty preferredHolder needs no strategy", {"preferredHolder": ""}, None),  # API-59
    ("a MicroTime with an offset is stored in UTC", {"renewTime": "2026-11-22T12:00:05,000001+02:00"},
     {"renewTime": RENEWED}),  # API-60
    ("a null time is no time", {"acquireTime": None}, "acquireTime"),
]


@pytest.mark.parametrize("overrides,expected", [c[1:] for c in LEASE_VALID], ids=[c[0] for c in LEASE_VALID])
def test_valid_leases_are_accepted(overrides: dict[str, Any] | None, expected: Any) -> None:
    body = lease(**(overrides or {}))
    if overrides is None:
        body["spec"] = {}
    sent = copy.deepcopy(body["spec"])
    got = create(body)["spec"]
    if expected is None:
        assert got == sent
    elif isinstance(expected, str):
        assert expected not in got and {k: v for k, v in sent.items() if k != expected} == got
    else:
        assert got == {**sent, **expected}


QUALIFIED = "name part must consist of alphanumeric characters, '-', '_' or '.'"
LEASE_INVALID = [
    # (id, spec overrides, field, reason, message fragment)
    ("a zero duration", {"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds", "FieldValueInvalid",
     "Invalid value: 0: must be greater than 0"),  # API-58
    ("a negative duration", {"leaseDurationSeconds": -15}, "spec.leaseDurationSeconds", "FieldValueInvalid",
     "Invalid value: -15: must be greater than 0"),  # API-58
    ("negative transitions", {"leaseTransitions": -1}, "spec.leaseTransitions", "FieldValueInvalid",
     f"Invalid value: -1: {NEG}"),  # API-58
    # Upstream reports strategy errors one "strategy" deeper than the field (API-59).
    ("an unknown strategy", {"strategy": "Newest"}, "spec.strategy.strategy", "FieldValueNotSupported",
     'Unsupported value: "Newest": supported values: "OldestEmulationVersion"'),
    ("an empty strategy", {"strategy": ""}, "spec.strategy.strategy", "FieldValueNotSupported",
     'Unsupported value: "": supported values: "OldestEmulationVersion"'),
    ("a strategy with a bad name part", {"strategy": "example.com/-x"}, "spec.strategy.strategy",
     "FieldValueInvalid", QUALIFIED),
    ("a strategy with two slashes", {"strategy": "a/b/c"}, "spec.strategy.strategy", "FieldValueInvalid",
     "with an optional DNS subdomain prefix and '/'"),
    ("a preferredHolder without a strategy", {"preferredHolder": "replica-b"}, "spec.preferredHolder",
     "FieldValueForbidden", "Forbidden: may only be specified if `strategy` is defined"),  # API-59
]


@pytest.mark.parametrize("overrides,field,reason,fragment", [c[1:] for c in LEASE_INVALID],
                         ids=[c[0] for c in LEASE_INVALID])
def test_invalid_leases_are_refused(overrides: dict[str, Any], field: str, reason: str, fragment: str) -> None:
    err = refused(lease(**overrides))
    assert (err.code, err.reason, err.kind, err.group) == (422, "Invalid", "Lease", "coordination.k8s.io")
    assert err.message.startswith('Lease.coordination.k8s.io "leader" is invalid: ')
    assert [(c.field, c.reason) for c in err.causes] == [(field, reason)]
    assert fragment in err.causes[0].message, err.causes[0].message


def test_a_lease_without_spec_reads_back_with_an_empty_one() -> None:
    body = lease()
    del body["spec"]
    assert create(body)["spec"] == {}


def test_lease_metadata_is_validated_like_every_kinds() -> None:
    body = lease("Not_A_Subdomain")
    body["metadata"]["generation"] = -1
    fields = [c.field for c in refused(body).causes]
    assert fields == ["metadata.name", "metadata.generation"]


def test_an_update_is_validated_like_a_create_and_keeps_no_status() -> None:
    old = create(lease())
    new = copy.deepcopy(old)
    new["spec"]["leaseTransitions"] = -2
    with pytest.raises(ApiError) as info:
        strategy.prepare_update("coordination.k8s.io", "leases", old, new, subresource=None, now=NOW)
    assert [c.field for c in info.value.causes] == ["spec.leaseTransitions"]
    new["spec"] = {"holderIdentity": "replica-b"}  # an update replaces the spec whole
    new["status"] = {"anything": 1}
    out = strategy.prepare_update("coordination.k8s.io", "leases", old, new, subresource=None, now=NOW)
    assert out["spec"] == {"holderIdentity": "replica-b"} and "status" not in out


# --------------------------------------------------------------------------------------------
# MicroTime (API-60)
# --------------------------------------------------------------------------------------------

MICRO_ACCEPTED = [
    ("UTC with six digits", "2026-11-22T10:00:00.123456Z", "2026-11-22T10:00:00.123456Z"),
    ("an offset", "2026-11-22T11:30:00.000001+01:30", "2026-11-22T10:00:00.000001Z"),
    ("a comma before the fraction", "2026-11-22T10:00:00,500000Z", "2026-11-22T10:00:00.500000Z"),
    ("a one-digit hour, as Go's parser allows", "2026-11-22T9:00:00.000000Z", "2026-11-22T09:00:00.000000Z"),
    ("a leap day", "2024-02-29T23:59:59.999999Z", "2024-02-29T23:59:59.999999Z"),
]


@pytest.mark.parametrize("sent,stored", [c[1:] for c in MICRO_ACCEPTED], ids=[c[0] for c in MICRO_ACCEPTED])
def test_micro_times_are_stored_as_the_server_marshals_them(sent: str, stored: str) -> None:
    assert create(lease(renewTime=sent))["spec"]["renewTime"] == stored


MICRO_REFUSED = [
    ("garbage", "tomorrow", 'cannot parse "tomorrow" as "2006"'),
    ("no fraction (what Python's isoformat writes at microsecond 0)", "2026-11-22T10:00:00+00:00",
     'cannot parse "+00:00" as ".000000"'),
    ("milliseconds", "2026-11-22T10:00:00.123Z", 'cannot parse ".123Z" as ".000000"'),
    ("nanoseconds", "2026-11-22T10:00:00.123456789Z", 'cannot parse "789Z" as "Z07:00"'),
    ("no zone", "2026-11-22T10:00:00.000000", 'cannot parse "" as "Z07:00"'),
    ("a lower-case z", "2026-11-22T10:00:00.000000z", 'cannot parse "z" as "Z07:00"'),
    ("a space for the T", "2026-11-22 10:00:00.000000Z", 'cannot parse " 10:00:00.000000Z" as "T"'),
    ("the empty string", "", 'cannot parse "" as "2006"'),
]


@pytest.mark.parametrize("sent,fragment", [c[1:] for c in MICRO_REFUSED], ids=[c[0] for c in MICRO_REFUSED])
def test_micro_times_go_cannot_parse_are_bad_requests(sent: str, fragment: str) -> None:
    err = refused(lease(acquireTime=sent))
    assert (err.code, err.reason) == (400, "BadRequest")
    assert err.message == (f'Lease in version "v1" cannot be handled as a Lease: parsing time '
                           f'{json.dumps(sent)} as "{MICRO}": {fragment}')


MICRO_OUT_OF_RANGE = [
    ("2026-13-01T00:00:00.000000Z", "month"), ("2026-02-29T00:00:00.000000Z", "day"),
    ("2026-01-01T24:00:00.000000Z", "hour"), ("2026-01-01T00:60:00.000000Z", "minute"),
    ("2026-01-01T00:00:60.000000Z", "second"), ("2026-01-01T00:00:00.000000+25:00", "time zone offset hour"),
]


@pytest.mark.parametrize("sent,what", MICRO_OUT_OF_RANGE, ids=[w for _, w in MICRO_OUT_OF_RANGE])
def test_a_field_out_of_range_is_named_as_go_names_it(sent: str, what: str) -> None:
    with pytest.raises(gotime.GoTimeError) as info:
        gotime.parse(sent, gotime.RFC3339_MICRO)
    assert str(info.value) == f"parsing time {json.dumps(sent)}: {what} out of range"


def test_a_time_field_takes_any_fraction_and_refuses_garbage_the_same_way() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "status": {"startTime": "2026-11-22T10:00:00.5Z", "completionTime": "2026-11-22T10:00:01Z"}}
    assert schema.prune("batch", "jobs", job)["status"]["startTime"] == "2026-11-22T10:00:00.5Z"
    job["status"]["completionTime"] = "soon"
    with pytest.raises(ApiError) as info:
        schema.prune("batch", "jobs", job)
    assert info.value.message == ('Job in version "v1" cannot be handled as a Job: parsing time "soon" as '
                                  '"2006-01-02T15:04:05Z07:00": cannot parse "soon" as "2006"')


# --------------------------------------------------------------------------------------------
# Over HTTP: create, compare-and-swap, watch
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def coordination(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoordinationV1Api:
    return kubernetes.client.CoordinationV1Api(api_client)


def body(name: str, holder: str = "replica-a") -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "acquireTime": ACQUIRED,
                     "renewTime": RENEWED, "leaseTransitions": 0}}


def test_the_official_client_round_trips_a_lease_without_generation(coordination, http: Http, ns: str) -> None:
    created = coordination.create_namespaced_lease(ns, kubernetes.client.V1Lease(
        metadata=kubernetes.client.V1ObjectMeta(name="leader"),
        spec=kubernetes.client.V1LeaseSpec(holder_identity="replica-a", lease_duration_seconds=15,
                                           renew_time=datetime(2026, 11, 22, 10, 0, 5, 1, tzinfo=UTC))))
    assert created.spec.renew_time == datetime(2026, 11, 22, 10, 0, 5, 1, tzinfo=UTC)
    raw = http.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/leader")
    assert raw["spec"] == {"holderIdentity": "replica-a", "leaseDurationSeconds": 15, "renewTime": RENEWED}
    assert "generation" not in raw["metadata"] and "status" not in raw  # API-62
    created.spec.lease_transitions = 1
    replaced = coordination.replace_namespaced_lease("leader", ns, created)
    assert replaced.spec.lease_transitions == 1 and replaced.metadata.generation is None


def test_a_python_datetime_at_microsecond_zero_is_refused_as_a_real_server_refuses_it(coordination, ns: str) -> None:
    # The client writes datetime.isoformat(), which has no fraction at microsecond 0.
    with pytest.raises(ApiException) as err:
        coordination.create_namespaced_lease(ns, kubernetes.client.V1Lease(
            metadata=kubernetes.client.V1ObjectMeta(name="whole-second"),
            spec=kubernetes.client.V1LeaseSpec(renew_time=datetime(2026, 11, 22, 10, tzinfo=UTC))))
    assert err.value.status == 400
    assert 'cannot parse "+00:00" as ".000000"' in json.loads(err.value.body)["message"]


def test_a_put_is_a_compare_and_swap_on_the_resource_version(http: Http, ns: str) -> None:
    # API-61
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/cas"
    code, _, first = http.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", body("cas"))
    assert code == 201, first
    mine, theirs = copy.deepcopy(first), copy.deepcopy(first)
    theirs["spec"]["holderIdentity"] = "replica-b"
    code, _, taken = http.request("PUT", path, theirs)
    assert code == 200 and taken["spec"]["holderIdentity"] == "replica-b"
    mine["spec"]["renewTime"] = "2026-11-22T10:00:07.000000Z"  # renews from the version it read
    code, _, answer = http.request("PUT", path, mine)
    assert (code, answer["reason"]) == (409, "Conflict"), answer
    assert answer["message"] == ('Operation cannot be fulfilled on leases.coordination.k8s.io "cas": the object '
                                 "has been modified; please apply your changes to the latest version and try again")
    assert answer["details"] == {"name": "cas", "group": "coordination.k8s.io", "kind": "leases"}
    assert http.get(path)["spec"]["holderIdentity"] == "replica-b"
    # Unlike a Job, a Lease cannot be overwritten without naming the version it replaces.
    del mine["metadata"]["resourceVersion"]
    code, _, answer = http.request("PUT", path, mine)
    assert (code, answer["reason"]) == (422, "Invalid"), answer
    assert answer["message"] == ('leases.coordination.k8s.io "cas" is invalid: metadata.resourceVersion: '
                                 "Invalid value: 0: must be specified for an update")
    assert answer["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                                            "message": "Invalid value: 0: must be specified for an update"}]
    assert http.get(path)["metadata"]["resourceVersion"] == taken["metadata"]["resourceVersion"]


def test_a_put_of_a_missing_lease_creates_it(http: Http, ns: str) -> None:
    # API-61: the lease registry's AllowCreateOnUpdate
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/put-made"
    code, _, made = http.request("PUT", path, {**body("put-made"), "metadata": {"name": "put-made",
                                                                               "resourceVersion": "12345"}})
    assert code == 201, made
    assert made["metadata"]["uid"] and made["spec"]["holderIdentity"] == "replica-a"
    code, _, answer = http.request("PUT", f"{path}-2", body("put-made"))
    assert (code, answer["reason"]) == (400, "BadRequest")
    code, _, answer = http.request("PUT", f"/apis/batch/v1/namespaces/{ns}/jobs/nope", {"metadata": {"name": "nope"}})
    assert code == 404  # a Job is never created by a PUT


def test_patches_need_no_resource_version(coordination, ns: str) -> None:
    coordination.create_namespaced_lease(ns, body("patched"))
    out = coordination.patch_namespaced_lease("patched", ns, {"spec": {"holderIdentity": "replica-c"}})
    assert out.spec.holder_identity == "replica-c" and out.spec.lease_duration_seconds == 15


def test_watch_sees_a_lease_taken_renewed_and_released(coordination, ns: str) -> None:
    rv = coordination.list_namespaced_lease(ns).metadata.resource_version
    coordination.create_namespaced_lease(ns, body("watched"))
    coordination.patch_namespaced_lease("watched", ns, {"spec": {"renewTime": "2026-11-22T10:00:09.000000Z"}})
    coordination.delete_namespaced_lease("watched", ns)
    seen = [(e["type"], e["object"].spec.renew_time) for e in kubernetes.watch.Watch().stream(
        coordination.list_namespaced_lease, ns, resource_version=rv, timeout_seconds=1)]
    renewed = datetime(2026, 11, 22, 10, 0, 9, tzinfo=UTC)
    assert seen == [("ADDED", datetime(2026, 11, 22, 10, 0, 5, 1, tzinfo=UTC)), ("MODIFIED", renewed),
                    ("DELETED", renewed)]


def test_a_protobuf_lease_is_stored_as_its_json_form(http: Http, ns: str) -> None:
    sent = body("pb", holder="")
    code, _, made = http.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                                 raw=protobuf.encode(sent), content_type=protobuf.MEDIA_TYPE)
    assert code == 201, made
    assert made["spec"] == sent["spec"]  # a pointer's empty holder survives the wire


# --------------------------------------------------------------------------------------------
# Discovery, OpenAPI, Tables
# --------------------------------------------------------------------------------------------


def test_discovery_serves_the_coordination_group(http: Http) -> None:
    groups = {g["name"]: g for g in http.get("/apis")["groups"]}
    want = {"groupVersion": "coordination.k8s.io/v1", "version": "v1"}
    assert groups["coordination.k8s.io"]["versions"] == [want]
    assert http.get("/apis/coordination.k8s.io")["preferredVersion"] == want
    resources = http.get("/apis/coordination.k8s.io/v1")["resources"]
    assert resources == [{"name": "leases", "singularName": "lease", "namespaced": True, "kind": "Lease",
                          "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                                    "watch"], "storageVersionHash": ""}]


def test_openapi_describes_leases(http: Http) -> None:
    assert "apis/coordination.k8s.io/v1" in http.get("/openapi/v3")["paths"]
    doc = http.get("/openapi/v3/apis/coordination.k8s.io/v1")
    schemas = doc["components"]["schemas"]
    assert schemas["io.k8s.api.coordination.v1.Lease"]["x-kubernetes-group-version-kind"] == [
        {"group": "coordination.k8s.io", "kind": "Lease", "version": "v1"}]
    spec = schemas["io.k8s.api.coordination.v1.LeaseSpec"]["properties"]
    micro = {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"}
    assert spec["renewTime"]["allOf"] == [micro] and spec["acquireTime"]["allOf"] == [micro]
    assert spec["leaseDurationSeconds"]["format"] == "int32" and spec["holderIdentity"]["type"] == "string"
    ops = doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]
    assert ops["put"]["operationId"] == "replaceCoordinationV1NamespacedLease"
    v2 = http.get("/openapi/v2")
    assert v2["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"]["get"]["operationId"] == (
        "listCoordinationV1NamespacedLease")
    assert v2["definitions"]["io.k8s.api.coordination.v1.LeaseList"]["properties"]["items"]["items"] == {
        "$ref": "#/definitions/io.k8s.api.coordination.v1.Lease"}


def test_a_lease_table_shows_name_holder_and_age(http: Http, coordination, ns: str) -> None:
    coordination.create_namespaced_lease(ns, body("held"))
    coordination.create_namespaced_lease(ns, {**body("free"), "spec": {}})
    req = urllib.request.Request(f"{http.base}/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                                 headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        table = json.loads(resp.read())
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0), ("Holder", 0), ("Age", 0)]
    assert [r["cells"][:2] for r in table["rows"]] == [["free", ""], ["held", "replica-a"]]


# --------------------------------------------------------------------------------------------
# The real kubectl, current and old
# --------------------------------------------------------------------------------------------

LEASE_YAML = """\
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: {name}
spec:
  holderIdentity: {holder}
  leaseDurationSeconds: 15
  acquireTime: "2026-11-22T10:00:00.123456Z"
  renewTime: "2026-11-22T10:00:05.000001Z"
  leaseTransitions: {transitions}
"""


def _kubectl_binary(name: str) -> str | None:
    """``kubectl`` or a versioned one, which sits beside the real kubectl (not always on PATH)."""
    found = shutil.which("kubectl")
    beside = os.path.dirname(os.path.realpath(found)) if found else ""
    return shutil.which(name) or (shutil.which(name, path=beside) if beside else None)


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(params=["kubectl", "kubectl.1.27"])
def any_kubectl(request: pytest.FixtureRequest, sim_kubeconfig: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Run:
    binary = _kubectl_binary(request.param)
    if binary is None:
        pytest.skip(f"{request.param} is not installed")
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [binary, "--kubeconfig", str(sim_kubeconfig), "--cache-dir", str(cache), *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=30)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    return run


def test_kubectl_applies_gets_and_deletes_a_lease(any_kubectl: Run, ns: str) -> None:
    kubectl = any_kubectl
    manifest = LEASE_YAML.format(name="leader", holder="replica-a", transitions=0)
    assert kubectl("apply", "-n", ns, "-f", "-", input=manifest).stdout == (
        "lease.coordination.k8s.io/leader created\n")
    taken = LEASE_YAML.format(name="leader", holder="replica-b", transitions=1)
    assert "lease.coordination.k8s.io/leader configured" in kubectl("apply", "-n", ns, "-f", "-", input=taken).stdout
    rows = [line.split() for line in kubectl("get", "lease", "-n", ns).stdout.splitlines()]
    assert rows[0] == ["NAME", "HOLDER", "AGE"] and rows[1][:2] == ["leader", "replica-b"]
    got = yaml.safe_load(kubectl("get", "lease", "leader", "-n", ns, "-o", "yaml").stdout)
    assert got["spec"] == {"holderIdentity": "replica-b", "leaseDurationSeconds": 15, "leaseTransitions": 1,
                           "acquireTime": ACQUIRED, "renewTime": RENEWED}
    assert "generation" not in got["metadata"]
    bad = LEASE_YAML.format(name="broken", holder="x", transitions=-1)
    refused = kubectl("apply", "-n", ns, "-f", "-", input=bad, check=False)
    assert refused.returncode != 0
    assert 'spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0' in refused.stderr
    assert kubectl("delete", "lease", "leader", "-n", ns).stdout == 'lease.coordination.k8s.io "leader" deleted\n'
    eventually(lambda: "No resources found" in kubectl("get", "lease", "-n", ns).stderr, what="no leases")
