"""Tier 4: deploy/ — the base and the Temporal Cloud overlays render and validate, and say what
production needs: two replicas, a disruption budget, requests from the benchmarks, and a worker
configuration that really reaches Temporal Cloud with an API key or with mTLS.

Validation: ``kubectl kustomize`` must render each with nothing on stderr; every object is
checked against kubesim's OpenAPI — the served document for the kinds kubesim serves, fetched
over HTTP, and for the others (Deployment, ClusterRole, …) the schemas kubesim builds the same
way from the same client models (:func:`kubesim.schema.openapi_v3_schemas`). Unknown fields,
missing required fields and wrong types fail, with the path.

The overlays are checked through the worker's own flag parsing: the container's args and env,
with the Secret's keys resolved and its volume materialised as the kubelet would, must give a
Temporal configuration with TLS and the API key, or with the client certificate and key.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim import schema

ROOT = Path(__file__).resolve().parents[2]
BASE, API_KEY, MTLS = "deploy/base", "deploy/overlays/temporal-cloud-api-key", "deploy/overlays/temporal-cloud-mtls"
#: The worker's peak RSS in the benchmarks (docs/benchmarks.md: 236–280 MiB); the request must cover it.
PEAK_RSS_MIB = 280


def render(path: str) -> list[dict[str, Any]]:
    out = subprocess.run(["kubectl", "kustomize", str(ROOT / path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


# -- a small OpenAPI v3 checker, for the subset kubesim's documents use -------------------------

def check(value: Any, spec: dict[str, Any], schemas: dict[str, Any], path: str, errors: list[str]) -> None:
    if "$ref" in spec:
        spec = schemas[spec["$ref"].rsplit("/", 1)[-1]]
    for part in spec.get("allOf", []):
        check(value, part, schemas, path, errors)
    if "oneOf" in spec:
        if not any(_fits(value, alt) for alt in spec["oneOf"]):
            errors.append(f"{path}: {value!r} is none of {[alt.get('type') for alt in spec['oneOf']]}")
        return
    kind = spec.get("type")
    if kind and not _fits(value, spec):
        errors.append(f"{path}: {value!r} is not {kind}")
        return
    if kind == "array":
        for i, item in enumerate(value):
            check(item, spec.get("items", {}), schemas, f"{path}[{i}]", errors)
    if kind == "object" and "properties" in spec:
        errors.extend(f"{path}.{k}: unknown field" for k in value if k not in spec["properties"])
        errors.extend(f"{path}.{k}: required" for k in spec.get("required", []) if k not in value)
        for k, v in value.items():
            if k in spec["properties"]:
                check(v, spec["properties"][k], schemas, f"{path}.{k}", errors)
    elif kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        for k, v in value.items():
            check(v, spec["additionalProperties"], schemas, f"{path}[{k}]", errors)


def _fits(value: Any, spec: dict[str, Any]) -> bool:
    kind = spec.get("type")
    return {"object": isinstance(value, dict), "array": isinstance(value, list), "string": isinstance(value, str),
            "boolean": isinstance(value, bool), "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, int | float) and not isinstance(value, bool)}.get(kind or "", True)


def served_schemas(url: str, obj: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The served document's schemas and the object's definition name, if kubesim serves its kind."""
    group_version = obj["apiVersion"]
    path = "api/v1" if group_version == "v1" else f"apis/{group_version}"
    # The first request builds the documents (seconds on a loaded machine).
    with urllib.request.urlopen(f"{url}/openapi/v3", timeout=60) as resp:
        index = json.load(resp)["paths"]
    if path not in index:
        return None
    with urllib.request.urlopen(url + index[path]["serverRelativeURL"], timeout=60) as resp:
        schemas = json.load(resp)["components"]["schemas"]
    for name, spec in schemas.items():
        if {"group": group_version.rpartition("/")[0], "version": group_version.rpartition("/")[2],
                "kind": obj["kind"]} in spec.get("x-kubernetes-group-version-kind", []):
            return schemas, name
    return None


@pytest.mark.parametrize("path", [BASE, API_KEY, MTLS], ids=["base", "temporal-cloud-api-key", "temporal-cloud-mtls"])
def test_every_rendered_object_validates_against_kubesims_openapi(path: str) -> None:
    from kubesim import KubeSim

    docs = render(path)
    assert sorted(by_kind(docs)) == ["ClusterRole", "ClusterRoleBinding", "Deployment", "Namespace",
                                     "PodDisruptionBudget", "Role", "RoleBinding", "ServiceAccount"]
    served = 0
    with KubeSim(kubelet=False) as sim:
        for obj in docs:
            body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            errors: list[str] = []
            found = served_schemas(sim.url, obj)
            if found is not None:
                served += 1
                schemas, name = found
                check(body, schemas[name], schemas, obj["kind"], errors)
            model = f"V1{obj['kind']}"
            schemas = schema.openapi_v3_schemas(model)
            check(body, schemas[schema.definition_name(model)], schemas, obj["kind"], errors)
            assert not errors, f"{path}: {obj['kind']} {obj['metadata']['name']}: {errors}"
    assert served, "at least the Namespace is checked against the document kubesim serves"


def test_the_checker_finds_a_misplaced_field_a_wrong_type_and_a_missing_required_one() -> None:
    dep = by_kind(render(BASE))["Deployment"]
    dep["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    dep["spec"]["replicas"] = "two"
    del dep["spec"]["selector"]
    schemas = schema.openapi_v3_schemas("V1Deployment")
    errors: list[str] = []
    check({k: v for k, v in dep.items() if k not in ("apiVersion", "kind")},
          schemas[schema.definition_name("V1Deployment")], schemas, "Deployment", errors)
    assert sorted(errors) == ["Deployment.spec.replicas: 'two' is not integer", "Deployment.spec.selector: required",
                              "Deployment.spec.template.spec.containers[0].resource: unknown field"]


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_two_replicas_a_disruption_budget_and_requests_that_cover_the_benchmarked_peak() -> None:
    docs = by_kind(render(BASE))
    dep, pdb = docs["Deployment"], docs["PodDisruptionBudget"]
    assert dep["spec"]["replicas"] == 2
    assert pdb["metadata"]["namespace"] == dep["metadata"]["namespace"]
    assert pdb["spec"]["selector"] == dep["spec"]["selector"], "the budget covers exactly the worker's Pods"
    assert pdb["spec"]["maxUnavailable"] == 1, "a drain takes one replica at a time, so one keeps polling"
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow", "a Temporal outage must not block drains"
    [box] = dep["spec"]["template"]["spec"]["containers"]
    requests, limits = box["resources"]["requests"], box["resources"]["limits"]
    assert _mebibytes(requests["memory"]) >= PEAK_RSS_MIB
    assert _mebibytes(limits["memory"]) >= 2 * _mebibytes(requests["memory"])
    assert "cpu" in requests and "cpu" not in limits, "bursts at a schedule second must not be throttled"


def _container_config(docs: list[dict[str, Any]], secret: dict[str, str], mount_root: Path) -> tuple[list[str], dict[str, str]]:
    """The worker's args and environment as the kubelet would give them, with ``secret`` as batchd-temporal."""
    pod = by_kind(docs)["Deployment"]["spec"]["template"]["spec"]
    [box] = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    moved: dict[str, str] = {}
    for mount in box["volumeMounts"]:
        source = volumes[mount["name"]].get("secret")
        if source is None:
            continue
        assert source["secretName"] == "batchd-temporal"
        target = mount_root / mount["name"]
        target.mkdir(parents=True)
        for key, value in secret.items():
            (target / key).write_text(value)
        moved[mount["mountPath"]] = str(target)

    def relocate(value: str) -> str:
        return next((value.replace(m, t, 1) for m, t in moved.items() if value.startswith(m)), value)

    env: dict[str, str] = {}
    for var in box.get("env", []):
        if "value" in var:
            env[var["name"]] = relocate(var["value"])
            continue
        if "fieldRef" in var["valueFrom"]:  # the downward API: only the Pod's namespace is asked for
            assert var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
            env[var["name"]] = by_kind(docs)["Deployment"]["metadata"]["namespace"]
            continue
        ref = var["valueFrom"]["secretKeyRef"]
        assert ref["name"] == "batchd-temporal"
        if ref["key"] in secret:
            env[var["name"]] = secret[ref["key"]]
        else:
            assert ref.get("optional"), f"{var['name']}: the Secret lacks {ref['key']}, so the Pod would not start"
    return [relocate(a) for a in box["args"]], env


def _temporal_settings(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    from worker import cli

    for name in [n for n in __import__("os").environ if n.startswith("TEMPORAL_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert args[0] == "worker"
    ctx = cli.worker.make_context("worker", list(args[1:]))
    kw = {k: v for k, v in ctx.params.items() if k.startswith("temporal_")}
    return cli._temporal_settings(kw)


def test_the_api_key_overlay_connects_with_tls_and_the_key_from_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = {"address": "eu-west-1.aws.api.temporal.io:7233", "namespace": "prod.a1b2c", "api-key": "key-123"}
    args, env = _container_config(render(API_KEY), secret, tmp_path)
    settings = _temporal_settings(args, env, monkeypatch)
    assert (settings.address, settings.namespace, settings.api_key) == (secret["address"], "prod.a1b2c", "key-123")
    tls = settings.tls_config()
    assert tls and tls.client_cert is None, "TLS with the key; no client certificate"
    with pytest.raises(AssertionError, match="lacks api-key"):
        _container_config(render(API_KEY), {k: v for k, v in secret.items() if k != "api-key"}, tmp_path / "x")


def test_the_mtls_overlay_connects_with_the_client_certificate_from_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = {"address": "prod.a1b2c.tmprl.cloud:7233", "namespace": "prod.a1b2c", "tls.crt": "CERT", "tls.key": "KEY"}
    args, env = _container_config(render(MTLS), secret, tmp_path)
    settings = _temporal_settings(args, env, monkeypatch)
    assert (settings.address, settings.namespace, settings.api_key) == (secret["address"], "prod.a1b2c", None)
    tls = settings.tls_config()
    assert tls and (tls.client_cert, tls.client_private_key) == (b"CERT", b"KEY")
    # A Secret without the certificate stops the worker at start-up, not a connection without it.
    args, env = _container_config(render(MTLS), {k: v for k, v in secret.items() if k != "tls.crt"}, tmp_path / "x")
    with pytest.raises(Exception, match="does not exist"):
        _temporal_settings(args, env, monkeypatch)
