"""Tier 4: ``batchd cluster`` and ``batchd dev --kube cluster`` as a user runs them, and a control
plane that cannot start (worker/cluster.py).

Each test starts a control plane of its own (about 7 s here), so they share one test process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube.client import Kube
from kube.config import load_access
from kube.errors import Forbidden, Invalid
from tests.conftest import backends, eventually
from tests.e2e.test_worker_process import BATCHD
from worker.cluster import ClusterError, ControlPlane, _Component
from worker.dev import free_port

pytestmark = pytest.mark.xdist_group("control-planes")


@pytest.fixture(autouse=True)
def _needs_the_control_plane(request: pytest.FixtureRequest) -> None:
    if "cluster" not in backends(request.config):
        pytest.skip("needs upstream's control plane (--backends cluster)")


def processes_under(directory: Path) -> list[str]:
    """Command lines of the processes that name ``directory``: what a stop must leave none of."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in cmdline and int(pid) != os.getpid():
            found.append(cmdline)
    return found


@pytest.fixture
def lines() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:  # SIGTERM: a SIGKILLed batchd would leave its control plane running
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _until_line(proc: subprocess.Popen[str], text: str, timeout: float = 120) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if text in line:
            return seen
    raise AssertionError(f"no {text!r} from {proc.args}; it printed: {seen[-20:]}")


@pytest.mark.timeout(300)
def test_batchd_cluster_runs_the_control_plane_with_batchds_identity_and_stops_it_all(
        tmp_path: Path, lines: list[subprocess.Popen[str]]) -> None:
    state = tmp_path / "plane"
    proc = subprocess.Popen([BATCHD, "cluster", "--state-dir", str(state)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines.append(proc)
    _until_line(proc, "running")
    admin = Kube(load_access(state / "kubeconfig"))
    nodes = admin.request("GET", "/api/v1/nodes")["items"]
    assert len(nodes) == 4 and all(n["status"]["allocatable"]["pods"] == "50k" for n in nodes)
    assert admin.request("GET", "/version")["gitVersion"] == "v1.34.4"

    batchd = Kube(load_access(state / "batchd.kubeconfig"))
    review = batchd.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert review["status"]["userInfo"]["username"] == "system:serviceaccount:batchd-system:batchd"
    assert "items" in batchd.list("Job")  # its ClusterRole lets it list Jobs everywhere
    with pytest.raises(Forbidden):  # and nothing beyond deploy/base's RBAC
        batchd.request("GET", "/api/v1/namespaces/batchd-system/secrets")
    with pytest.raises(Forbidden):
        batchd.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": "not-batchds"}})
    # deploy/policy's admission policy is in force (FAIL-CLOSED), as an operator installs it
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": {"batchd.io/after": "j"}},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    deadline = time.monotonic() + 60  # kube-apiserver compiles a new policy in the background
    while True:
        try:
            admin.request("POST", "/apis/batch/v1/namespaces/default/jobs", body=job, query={"dryRun": "All"})
        except Invalid as err:  # a policy's denial is a 422
            assert "batchd-annotations" in err.message and "names the Job itself" in err.message
            break
        assert time.monotonic() < deadline, "the admission policy refused nothing within 60 s"
        time.sleep(0.5)
    # kube-controller-manager runs without the controllers batchd replaces
    log = (state / "logs" / "kube-controller-manager.log").read_text()
    for controller in ("job-controller", "cronjob-controller", "ttl-after-finished-controller"):
        assert f'"Warning: controller is disabled" controller="{controller}"' in log

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 0
    assert processes_under(state) == []


def test_an_unknown_upstream_controller_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run([BATCHD, "cluster", "--state-dir", str(tmp_path), "--upstream-controllers", "job,deployment"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "deployment: choose from job, cronjob, ttl-after-finished" in done.stderr


@pytest.mark.timeout(300)
def test_a_component_that_fails_is_named_with_its_log_and_the_rest_is_stopped(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "plane")
    kwok = next(c for c in plane.components if c.name == "kwok")
    flawed = _Component("kwok", lambda: [*kwok.args(), "--no-such-flag"], kwok.ready)
    plane.components[plane.components.index(kwok)] = flawed
    with pytest.raises(ClusterError) as failed:
        plane.start()
    message = str(failed.value)
    assert message.startswith("kwok exited with ") and "kwok.log" in message
    assert "no-such-flag" in message  # the end of its log says why
    assert processes_under(plane.dir) == []


@pytest.mark.timeout(300)
def test_a_port_taken_before_its_component_binds_it_is_picked_anew(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "plane")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        plane.ports["etcd"] = taken.getsockname()[1]  # picked, then taken by someone else
        try:
            plane.start()
            assert plane.ports["etcd"] != taken.getsockname()[1]
            assert Kube(load_access(plane.kubeconfig)).request("GET", "/version")["gitVersion"] == "v1.34.4"
        finally:
            plane.stop()
    assert processes_under(plane.dir) == []


@pytest.mark.timeout(300)
async def test_batchd_dev_on_the_control_plane_runs_the_examples_and_stops_it_all(
        tmp_path: Path, lines: list[subprocess.Popen[str]]) -> None:
    state = tmp_path / "dev"
    proc = subprocess.Popen([BATCHD, "dev", "--kube", "cluster", "--state-dir", str(state), "--temporal-port",
                             str(free_port()), "--ui-port", str(free_port())],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "BATCHD_LOG_LEVEL": "WARNING"})
    lines.append(proc)
    banner = "\n".join(_until_line(proc, "Try:", timeout=180))
    kubeconfig = state / "cluster" / "kubeconfig"
    assert f"export KUBECONFIG={kubeconfig}" in banner and "ServiceAccount batchd-system/batchd" in banner
    admin = Kube(load_access(kubeconfig))

    def complete(job: dict[str, Any] | None) -> bool:
        return any(c["type"] == "Complete" and c["status"] == "True"
                   for c in ((job or {}).get("status") or {}).get("conditions") or [])

    await eventually(lambda: complete(admin.get("Job", "default", "indexed-demo")), timeout=120,
                     what="the example Indexed Job complete")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(120) == 0
    assert processes_under(state) == []
