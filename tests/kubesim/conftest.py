"""Fixtures for kubesim's own tests: one KubeSim (with kubelet) per session, a fresh namespace
per test, the official ``kubernetes`` client and the real ``kubectl``.

Waits poll with a deadline (:func:`eventually`); no test asserts after a bare sleep.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import pytest

from kubesim import KubeSim

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.05, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy (AssertionError counts as not yet)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            result = check()
            if result:
                return result
            last = result
        except AssertionError as err:
            last = err
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")
        time.sleep(interval)


@dataclass
class Http:
    """Raw HTTP against kubesim, for what the typed client hides (status codes, headers)."""

    base: str

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                raw: bytes | None = None) -> tuple[int, dict[str, str], Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                payload = resp.read()
                return resp.status, dict(resp.headers), _decode(payload)
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), _decode(err.read())

    def get(self, path: str) -> Any:
        code, _, body = self.request("GET", path)
        assert code == 200, (code, body)
        return body


def _decode(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        return payload.decode()


@pytest.fixture(scope="session")
def sim() -> Iterator[KubeSim]:
    server = KubeSim(kubelet=True, bookmark_interval=0.3)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def sim_kubeconfig(sim: KubeSim, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim.write_kubeconfig(tmp_path_factory.mktemp("kubesim") / "kubeconfig")


@pytest.fixture(scope="session")
def api_client(sim_kubeconfig: Path) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(str(sim_kubeconfig))


@pytest.fixture(scope="session")
def core(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def batch(api_client: kubernetes.client.ApiClient) -> kubernetes.client.BatchV1Api:
    return kubernetes.client.BatchV1Api(api_client)


@pytest.fixture(scope="session")
def events_api(api_client: kubernetes.client.ApiClient) -> kubernetes.client.EventsV1Api:
    return kubernetes.client.EventsV1Api(api_client)


@pytest.fixture(scope="session")
def http(sim: KubeSim) -> Http:
    return Http(sim.url)


@pytest.fixture
def ns(core: kubernetes.client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    try:
        core.delete_namespace(name)
    except kubernetes.client.ApiException:
        pass


Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def kubectl(sim_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """Run the real kubectl against kubesim, with discovery cached in a session tmp dir."""
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, input: str | None = None, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        cmd = ["kubectl", "--kubeconfig", str(sim_kubeconfig), "--cache-dir", str(cache), *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    return run


def pod_body(name: str, *, run_seconds: float = 1.0, exit_code: int = 0, restart_policy: str = "Never",
             labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    """A minimal Pod with the kubelet annotations."""
    annotations = {"kubesim.batchd.io/run-seconds": str(run_seconds), "kubesim.batchd.io/exit-code": str(exit_code)}
    annotations.update(meta.pop("annotations", {}))
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations, **meta},
        "spec": {"restartPolicy": restart_policy, "containers": [{"name": "main", "image": "busybox:1.36"}]},
    }


def job_body(name: str, *, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    """A minimal batch/v1 Job."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": labels or {}, **meta},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "main", "image": "busybox:1.36"}]}}},
    }


def owner_ref(obj: Any, *, block: bool = True, kind: str = "Job", api_version: str = "batch/v1") -> dict[str, Any]:
    meta = obj.metadata if hasattr(obj, "metadata") else None
    name = meta.name if meta else obj["metadata"]["name"]
    uid = meta.uid if meta else obj["metadata"]["uid"]
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
            "controller": True, "blockOwnerDeletion": block}
