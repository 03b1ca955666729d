"""Discovery documents and the real kubectl: get, describe, create -f, apply -f, delete."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml

from tests.kubesim.conftest import Http, eventually, job_body

JOB_YAML = """
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{app: demo}}
spec:
  backoffLimit: {backoff}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        command: ["sh", "-c", "echo hi"]
"""


def test_discovery_lists_groups_versions_and_resources(http: Http):
    assert http.get("/api")["versions"] == ["v1"]
    groups = {g["name"]: g for g in http.get("/apis")["groups"]}
    assert groups["batch"]["preferredVersion"]["groupVersion"] == "batch/v1"
    assert "events.k8s.io" in groups
    core = {r["name"]: r for r in http.get("/api/v1")["resources"]}
    assert core["namespaces"]["namespaced"] is False and core["namespaces"]["shortNames"] == ["ns"]
    assert core["pods"]["shortNames"] == ["po"] and core["pods"]["categories"] == ["all"]
    assert core["events"]["shortNames"] == ["ev"] and "pods/status" in core
    batch = {r["name"]: r for r in http.get("/apis/batch/v1")["resources"]}
    assert "shortNames" not in batch["jobs"] and batch["cronjobs"]["shortNames"] == ["cj"]
    assert batch["jobs"]["singularName"] == "job" and batch["jobs"]["kind"] == "Job"
    assert set(batch["jobs"]["verbs"]) >= {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
    assert {"jobs/status", "cronjobs/status"} <= set(batch)
    assert http.get("/apis/events.k8s.io/v1")["resources"][0]["name"] == "events"


def test_version_and_health_endpoints(http: Http, kubectl):
    assert http.get("/version")["gitVersion"] == "v1.32.0"
    for path in ("/healthz", "/readyz", "/livez"):
        assert http.get(path) == "ok"
    server = json.loads(kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert server["gitVersion"] == "v1.32.0"


def test_openapi_v3_is_served(http: Http):
    index = http.get("/openapi/v3")
    assert "apis/batch/v1" in index["paths"]
    doc = http.get("/openapi/v3/apis/batch/v1")
    assert doc["components"]["schemas"]


def test_openapi_v2_is_the_v3_documents_in_swagger_form(http: Http):
    doc = http.get("/openapi/v2")
    assert doc["swagger"] == "2.0"
    refs = set(re.findall(r'"\$ref": ?"#/definitions/([^"]+)"', json.dumps(doc)))
    assert refs and refs <= set(doc["definitions"])  # kubectl refuses a dangling $ref
    assert "#/components" not in json.dumps(doc)
    patch = doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "batch", "version": "v1", "kind": "Job"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]  # what kubectl 1.27 looks for
    assert doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["type"] == "string"


def _wire(data: bytes) -> dict[int, list[bytes | int]]:
    """One protobuf message's fields, undecoded: enough to walk gnostic's Document by number."""
    fields: dict[int, list[bytes | int]] = {}
    i = 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < len(data):
        key = varint()
        if key & 7 == 0:
            fields.setdefault(key >> 3, []).append(varint())
        else:
            assert key & 7 == 2, key
            n = varint()
            fields.setdefault(key >> 3, []).append(data[i:i + n])
            i += n
    return fields


def test_openapi_v2_protobuf_is_gnostics_document(http: Http):
    # kubectl <= 1.28 asks with the "@" spelling; the answer must carry the dotted one
    req = urllib.request.Request(http.base + "/openapi/v2", headers={
        "Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        doc = _wire(resp.read())
    assert doc[1] == [b"2.0"]  # swagger
    paths = {_wire(p)[1][0].decode(): _wire(p)[2][0] for p in _wire(doc[8][0])[2]}  # NamedPathItem
    definitions = {_wire(d)[1][0].decode() for d in _wire(doc[9][0])[1]}  # NamedSchema
    assert definitions == set(http.get("/openapi/v2")["definitions"])
    patch = _wire(_wire(paths["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"])[8][0])  # PathItem.patch
    extensions = {_wire(e)[1][0]: _wire(_wire(e)[2][0])[2][0] for e in patch[13]}  # NamedAny, Any.yaml
    assert json.loads(extensions[b"x-kubernetes-group-version-kind"]) == {"group": "batch", "version": "v1", "kind": "Job"}
    queries = [_wire(_wire(_wire(p)[1][0])[2][0]) for p in patch[8] if 2 in _wire(_wire(p)[1][0])]  # non-body
    names = [_wire(q[3][0])[4][0] for q in queries if 3 in q]  # QueryParameterSubSchema.name
    assert b"fieldValidation" in names


def test_kubectl_api_resources_shows_short_names(kubectl):
    out = kubectl("api-resources", "--no-headers").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()}
    assert rows["cronjobs"][1] == "cj" and rows["pods"][1] == "po" and rows["namespaces"][1] == "ns"
    assert rows["jobs"][1] == "batch/v1"  # no short name: the APIVERSION column comes next


def test_kubectl_create_get_describe_and_delete_a_job(kubectl, core, ns, tmp_path: Path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB_YAML.format(name="demo", backoff=2))
    assert 'job.batch/demo created' in kubectl("-n", ns, "create", "-f", str(manifest)).stdout
    got = yaml.safe_load(kubectl("-n", ns, "get", "job", "demo", "-o", "yaml").stdout)
    assert got["kind"] == "Job" and got["metadata"]["uid"] and got["spec"]["backoffLimit"] == 2
    core.create_namespaced_event(ns, {
        "metadata": {"name": "demo.1"}, "reason": "Tested", "message": "described by kubectl", "type": "Normal",
        "involvedObject": {"kind": "Job", "apiVersion": "batch/v1", "name": "demo", "namespace": ns,
                           "uid": got["metadata"]["uid"]},
        "source": {"component": "test"},
    })
    described = kubectl("-n", ns, "describe", "job", "demo").stdout
    assert "Name:" in described and "demo" in described and "described by kubectl" in described
    listed = kubectl("-n", ns, "get", "jobs").stdout
    assert "demo" in listed
    assert "demo" in kubectl("-n", ns, "get", "all").stdout
    assert 'job.batch "demo" deleted' in kubectl("-n", ns, "delete", "-f", str(manifest)).stdout
    assert kubectl("-n", ns, "get", "job", "demo", check=False).returncode != 0


def test_kubectl_apply_creates_then_configures(kubectl, batch, ns, tmp_path: Path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB_YAML.format(name="applied", backoff=1))
    assert "created" in kubectl("-n", ns, "apply", "-f", str(manifest)).stdout
    assert "unchanged" in kubectl("-n", ns, "apply", "-f", str(manifest)).stdout
    manifest.write_text(JOB_YAML.format(name="applied", backoff=4).replace("app: demo", "app: demo2"))
    assert "configured" in kubectl("-n", ns, "apply", "-f", str(manifest)).stdout
    job = batch.read_namespaced_job("applied", ns)
    assert job.spec.backoff_limit == 4 and job.metadata.labels["app"] == "demo2"
    assert "kubectl.kubernetes.io/last-applied-configuration" in job.metadata.annotations


def test_kubectl_gets_cronjobs_by_short_name_and_pods_across_namespaces(kubectl, batch, core, ns):
    batch.create_namespaced_cron_job(ns, {"metadata": {"name": "nightly"}, "spec": {
        "schedule": "0 3 * * *", "jobTemplate": {"spec": job_body("x")["spec"]}}})
    assert "nightly" in kubectl("-n", ns, "get", "cj").stdout
    out = kubectl("get", "ns", ns, "-o", "jsonpath={.status.phase}").stdout
    assert out == "Active"


def test_python_m_kubesim_serves_until_sigterm(tmp_path: Path):
    kubeconfig = tmp_path / "kc"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig-out", str(kubeconfig)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("kubesim listening on http://127.0.0.1:")
        url = line.split()[-1]
        assert f"server: {url}" in kubeconfig.read_text()
        assert Http(url).get("/version")["gitVersion"] == "v1.32.0"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert eventually(lambda: proc.poll() is not None, timeout=10) and proc.returncode == 0
