"""kubesim.schema: pruning of unknown fields and the OpenAPI v3 documents kubectl reads.

The last tests run the real kubectl (validation on) against a KubeSim from conftest.
"""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest

from kubesim import schema

REF = re.compile(r'"\$ref":\s*"#/components/schemas/([^"]+)"')


def _job(**extra_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi", "labels": {"any/key": "v"}, "annotations": {"free": "form"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"disk": "ssd"},
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "resources": {
                                "limits": {"cpu": 1, "memory": "1Gi", "example.com/gpu": "2"}
                            },
                            "livenessProbe": {"httpGet": {"port": "http"}},
                        }
                    ],
                }
            },
            **extra_spec,
        },
    }


# --------------------------------------------------------------------------------------------
# prune
# --------------------------------------------------------------------------------------------

PRUNE_DROPS = [
    ("an unknown top-level field is dropped", ["bogus"]),
    ("an unknown spec field is dropped", ["spec", "bogus"]),
    ("an unknown metadata field is dropped", ["metadata", "bogus"]),
    (
        "an unknown field in a list element is dropped",
        ["spec", "template", "spec", "containers", 0, "bogus"],
    ),
    (
        "an unknown field in a nested object is dropped",
        ["spec", "template", "spec", "containers", 0, "livenessProbe", "bogus"],
    ),
]


@pytest.mark.parametrize("path", [c[1] for c in PRUNE_DROPS], ids=[c[0] for c in PRUNE_DROPS])
def test_prune_drops_unknown_fields(path: list[Any]) -> None:
    body = _job()
    cur: Any = body
    for step in path[:-1]:
        cur = cur[step]
    cur[path[-1]] = {"x": 1}
    out = schema.prune("batch", "jobs", body)
    cur = out
    for step in path[:-1]:
        cur = cur[step]
    assert path[-1] not in cur


def test_prune_keeps_known_and_free_form_fields() -> None:
    body = _job(ttlSecondsAfterFinished=10)
    out = schema.prune("batch", "jobs", body)
    # labels, annotations, nodeSelector, quantities and int-or-string survive; the non-pointer
    # structs Go always writes are added
    body["status"] = {}
    body["spec"]["template"].setdefault("metadata", {})
    assert out == body


def test_prune_drops_nulls_and_keeps_api_version_and_kind() -> None:
    out = schema.prune(
        "batch", "jobs", {"apiVersion": "batch/v1", "kind": "Job", "spec": {"completions": None}}
    )
    # what Go writes of an empty Job: its non-pointer structs, and a nil containers list
    assert out == {"apiVersion": "batch/v1", "kind": "Job", "metadata": {}, "status": {},
                   "spec": {"template": {"metadata": {}, "spec": {"containers": None}}}}


def test_prune_shapes_the_object_as_go_writes_it() -> None:
    out = schema.prune("batch", "jobs", {"metadata": {"name": "j", "labels": {}, "finalizers": []},
                                         "status": {"active": 0, "succeeded": 0, "failed": 0, "ready": 0,
                                                    "terminating": 0, "completedIndexes": "",
                                                    "conditions": [{"type": "Complete", "status": "True"}]}})
    assert out["metadata"] == {"name": "j"}  # empty omitempty maps and lists are left out
    # omitempty non-pointer counters are left out at 0, pointers kept; a condition's times are null
    assert out["status"] == {"ready": 0, "terminating": 0, "conditions": [
        {"type": "Complete", "status": "True", "lastProbeTime": None, "lastTransitionTime": None}]}


def test_prune_leaves_unknown_kinds_alone() -> None:
    body = {"spec": {"anything": [1, 2]}}
    assert schema.prune("apps", "deployments", body) is body


@pytest.mark.parametrize(
    "group,plural,body",
    [
        ("", "pods", {"spec": {"containers": [{"name": "c", "image": "x", "zzz": 1}]}}),
        ("", "namespaces", {"spec": {"finalizers": ["kubernetes"], "zzz": 1}}),
        ("", "events", {"involvedObject": {"kind": "Pod", "zzz": 1}, "zzz": 2}),
        (
            "events.k8s.io",
            "events",
            {"regarding": {"kind": "Pod", "zzz": 1}, "note": "n", "zzz": 2},
        ),
        ("batch", "cronjobs", {"spec": {"schedule": "@daily", "zzz": 1}}),
        ("coordination.k8s.io", "leases", {"spec": {"holderIdentity": "a", "zzz": 1}}),
    ],
    ids=["pods", "namespaces", "core events", "events.k8s.io events", "cronjobs", "leases"],
)
def test_prune_covers_every_served_kind(group: str, plural: str, body: dict[str, Any]) -> None:
    assert '"zzz"' not in json.dumps(schema.prune(group, plural, body))


def test_unknown_fields_and_strict_decoding_error() -> None:
    body = _job(bogus=1)
    body["spec"]["template"]["spec"]["containers"][0]["nope"] = 2
    # Reported in document order, as Go's strict decoder does.
    assert schema.unknown_fields("batch", "jobs", body) == [
        "spec.template.spec.containers[0].nope",
        "spec.bogus",
    ]
    err = schema.strict_decoding_error("batch", "jobs", body)
    assert err is not None and err.code == 400
    assert err.message == (
        'Job in version "v1" cannot be handled as a Job: strict decoding error: '
        'unknown field "spec.template.spec.containers[0].nope", unknown field "spec.bogus"'
    )
    assert schema.strict_decoding_error("batch", "jobs", _job()) is None


# --------------------------------------------------------------------------------------------
# OpenAPI v3
# --------------------------------------------------------------------------------------------

GROUP_VERSIONS = [
    (
        "api/v1",
        ["io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.Namespace", "io.k8s.api.core.v1.Event"],
    ),
    ("apis/batch/v1", ["io.k8s.api.batch.v1.Job", "io.k8s.api.batch.v1.CronJob"]),
    ("apis/events.k8s.io/v1", ["io.k8s.api.events.v1.Event"]),
    ("apis/coordination.k8s.io/v1", ["io.k8s.api.coordination.v1.Lease"]),
]


def test_index_lists_every_group_version_with_a_stable_hash() -> None:
    index = schema.openapi_v3_index()
    assert set(index["paths"]) == {gv for gv, _ in GROUP_VERSIONS}
    for gv, entry in index["paths"].items():
        assert re.fullmatch(
            rf"/openapi/v3/{re.escape(gv)}\?hash=[0-9A-F]{{128}}", entry["serverRelativeURL"]
        )
    assert schema.openapi_v3_index() == index


@pytest.mark.parametrize("gv,kinds", GROUP_VERSIONS, ids=[gv for gv, _ in GROUP_VERSIONS])
def test_document_has_kind_schemas_and_resolves_all_refs(gv: str, kinds: list[str]) -> None:
    doc = schema.openapi_v3_document(gv)
    assert doc is not None and doc["openapi"].startswith("3.0")
    schemas = doc["components"]["schemas"]
    for name in kinds:
        assert "x-kubernetes-group-version-kind" in schemas[name]
    missing = set(REF.findall(json.dumps(doc))) - set(schemas)
    assert not missing


def test_batch_document_types() -> None:
    doc = schema.openapi_v3_document("/openapi/v3/apis/batch/v1?hash=whatever")
    assert doc is not None
    s = doc["components"]["schemas"]
    assert s["io.k8s.api.batch.v1.Job"]["x-kubernetes-group-version-kind"] == [
        {"group": "batch", "kind": "Job", "version": "v1"}
    ]
    job_spec = s["io.k8s.api.batch.v1.JobSpec"]
    assert job_spec["properties"]["ttlSecondsAfterFinished"]["type"] == "integer"
    assert job_spec["required"] == ["template"]
    assert s["io.k8s.api.batch.v1.CronJobSpec"]["properties"]["suspend"]["type"] == "boolean"
    meta = s["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
    assert meta["labels"] == {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": meta["labels"]["description"],
    }
    assert s["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]["format"] == "date-time"
    assert (
        s["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["x-kubernetes-int-or-string"] is True
    )
    assert {"type": "number"} in s["io.k8s.apimachinery.pkg.api.resource.Quantity"]["oneOf"]
    containers = s["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"


def test_patch_operations_advertise_field_validation() -> None:
    # kubectl checks the PATCH operation of the kind for `fieldValidation` to pick server-side
    # validation; without it, it needs the protobuf /openapi/v2 document.
    doc = schema.openapi_v3_document("apis/batch/v1")
    assert doc is not None
    op = doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert op["x-kubernetes-group-version-kind"] == {
        "group": "batch",
        "version": "v1",
        "kind": "Job",
    }
    assert "fieldValidation" in [p["name"] for p in op["parameters"] if p["in"] == "query"]


def test_unknown_group_version_has_no_document() -> None:
    assert schema.openapi_v3_document("apis/apps/v1") is None


# --------------------------------------------------------------------------------------------
# The real kubectl against KubeSim
# --------------------------------------------------------------------------------------------

JOB_YAML = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  ttlSecondsAfterFinished: 100
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        resources:
          limits: {{cpu: 1, memory: 64Mi}}
"""

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


@needs_kubectl
def test_kubectl_apply_with_validation_accepts_a_valid_job(kubectl: Any, ns: str) -> None:
    proc = kubectl("apply", "-n", ns, "-f", "-", input=JOB_YAML.format(name="valid"))
    assert "job.batch/valid created" in proc.stdout
    got = json.loads(kubectl("get", "-n", ns, "job", "valid", "-o", "json").stdout)
    assert got["spec"]["ttlSecondsAfterFinished"] == 100
    explained = kubectl("explain", "jobs.spec.ttlSecondsAfterFinished")
    assert "<integer>" in explained.stdout


@needs_kubectl
def test_kubectl_apply_with_validation_rejects_an_unknown_field(kubectl: Any, ns: str) -> None:
    manifest = JOB_YAML.format(name="typo").replace(
        "  ttlSecondsAfterFinished: 100\n", "  ttlSecondsAfterFinshed: 100\n"
    )
    proc = kubectl("apply", "-n", ns, "-f", "-", input=manifest, check=False)
    assert proc.returncode != 0
    assert 'strict decoding error: unknown field "spec.ttlSecondsAfterFinshed"' in proc.stderr
    assert kubectl("get", "-n", ns, "job", "typo", check=False).returncode != 0


@needs_kubectl
def test_kubectl_apply_with_validate_warn_creates_the_job_and_prints_the_warning(
    kubectl: Any, ns: str
) -> None:
    manifest = JOB_YAML.format(name="warned").replace(
        "  ttlSecondsAfterFinished: 100\n", "  ttlSecondsAfterFinished: 100\n  foo: 1\n"
    )
    proc = kubectl("apply", "--validate=warn", "-n", ns, "-f", "-", input=manifest)
    assert 'Warning: unknown field "spec.foo"' in proc.stderr
    got = json.loads(kubectl("get", "-n", ns, "job", "warned", "-o", "json").stdout)
    assert "foo" not in got["spec"] and got["spec"]["ttlSecondsAfterFinished"] == 100


@needs_kubectl
def test_kubectl_apply_without_validation_drops_the_field_silently(kubectl: Any, ns: str) -> None:
    manifest = JOB_YAML.format(name="ignored").replace(
        "  ttlSecondsAfterFinished: 100\n", "  ttlSecondsAfterFinished: 100\n  foo: 1\n"
    )
    proc = kubectl("apply", "--validate=false", "-n", ns, "-f", "-", input=manifest)
    assert "Warning" not in proc.stderr and "job.batch/ignored created" in proc.stdout
    got = json.loads(kubectl("get", "-n", ns, "job", "ignored", "-o", "json").stdout)
    assert "foo" not in got["spec"]
