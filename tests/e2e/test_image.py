"""Tier 4: the container image, built from the Dockerfile and run as a cluster would run it.

``make image`` builds it with buildah on a local Debian base (``make debian-base``: mmdebstrap
and ``podman import``; no registry is needed). The worker then runs from the image's own
entrypoint, command and user, with ``buildah run --isolation chroot --network host`` (no
container engine daemon; ``podman run`` cannot set rlimits in some sandboxes), against the
session's API server (kubesim, and upstream's kube-apiserver as batchd's ServiceAccount) and dev server, and must: become ready, delete a Job at its TTL, create a
CronJob's Job, complete an Indexed Job, run as uid 10001, and exit 0 on SIGTERM.

Without buildah the test is skipped locally; under CI (``CI`` set) it must run (.ci/run
installs buildah, podman and mmdebstrap, and makes the base before it runs the tests). The base
image stays in container storage, so only the first run on a machine pays for mmdebstrap.
Measured here from empty container storage: the
Debian base 40 s, the image 57 s, the whole test 1 min 44 s.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from kube.client import Kube
from tests.conftest import eventually, require
from tests.e2e.test_worker_process import http_get, lease_args
from tests.integration.test_job import job_manifest
from worker.dev import free_port

# the module fixture is built once per test process: its tests share one process (make test: -n)
pytestmark = pytest.mark.xdist_group("image")

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_BASE = "localhost/batchd-debian-python:bookworm"
TOOLS = ("buildah", "podman", "mmdebstrap")
#: Programs a shell or a package manager would bring; none may be left in the runtime image.
SHELL_TOOLS = ("bin/sh", "bin/bash", "bin/dash", "bin/ls", "bin/cat", "bin/apt-get", "bin/dpkg", "bin/pip",
               "bin/pip3", "sbin/useradd")


def _run(*cmd: str, timeout: float = 1200) -> str:
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The image built by ``make image`` on the local Debian base; removed afterwards."""
    missing = [t for t in TOOLS if not shutil.which(t)]
    require(missing, "the image cannot be built here: apt-get install buildah podman mmdebstrap")
    tag = f"localhost/batchd:test-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    _run("make", "debian-base", f"DEBIAN_BASE={DEBIAN_BASE}")
    based = time.monotonic()
    _run("make", "image", f"BASE_IMAGE={DEBIAN_BASE}", f"IMAGE={tag}")
    print(f"debian-base {based - started:.0f} s, image {time.monotonic() - based:.0f} s")
    try:
        yield tag
    finally:
        subprocess.run(["buildah", "rmi", tag], capture_output=True, timeout=120)


@pytest.fixture
def container(image: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A working container of the image and the image's OCI config."""
    config = json.loads(_run("buildah", "inspect", "--type", "image", image))["OCIv1"]["config"]
    name = _run("buildah", "from", "--pull-never", image).strip()
    try:
        yield name, config
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, timeout=120)


def _uid_of_worker(task_queue: str) -> int | None:
    """The real uid of the process running ``batchd worker`` for ``task_queue`` (not buildah's)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            argv = (status.parent / "cmdline").read_bytes().split(b"\0")
            if task_queue.encode() in argv and b"worker" in argv and b"buildah" not in argv[0]:
                return int(next(line.split()[1] for line in status.read_text().splitlines() if line.startswith("Uid:")))
        except (OSError, StopIteration):
            continue
    return None


def _worker_pid(task_queue: str) -> int | None:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if task_queue.encode() in argv and b"worker" in argv and b"buildah" not in argv[0]:
            return int(cmdline.parent.name)
    return None


def test_the_runtime_image_has_no_shell_tools_and_runs_as_uid_10001(container: tuple[str, dict[str, Any]]) -> None:
    name, config = container
    assert config.get("User") == "10001:10001"
    assert config.get("Entrypoint") == ["/opt/batchd/bin/batchd"] and config.get("Cmd") == ["worker"]
    root = Path(_run("buildah", "mount", name).strip())
    try:
        left = [t for t in SHELL_TOOLS if (root / "usr" / t).exists() or (root / "usr/local" / t).exists()]
        assert not left, f"shell tools left in the runtime image: {left}"
        assert (root / "opt/batchd/bin/python3").exists(), "the interpreter the entrypoint needs is kept"
        passwd = (root / "etc/passwd").read_text()
        assert "batchd:x:10001:10001:" in passwd
    finally:
        subprocess.run(["buildah", "umount", name], capture_output=True, timeout=60)


@pytest.mark.timeout(1800)
async def test_the_image_runs_the_worker_against_the_api_server_and_temporal(
        container: tuple[str, dict[str, Any]], temporal_env: WorkflowEnvironment, worker_kubeconfig: Path, kube: Kube,
        namespace: str, task_queue: str, tmp_path: Path) -> None:
    name, config = container
    # The worker runs as uid 10001: its kubeconfig must be readable by it, as a mounted Secret is.
    kube_dir = tmp_path / "kube"
    kube_dir.mkdir(mode=0o755)
    kube_dir.chmod(0o755)
    shutil.copy(worker_kubeconfig, kube_dir / "config")
    (kube_dir / "config").chmod(0o644)
    health = free_port()
    target = temporal_env.client.service_client.config.target_host
    argv = [*config["Entrypoint"], *config["Cmd"], "--temporal-address", target, "--kubeconfig", "/etc/batchd/kube/config",
            "--namespaces", namespace, "--task-queue", task_queue, "--health-port", str(health), "--log-format", "json",
            *lease_args(namespace)]
    env = [f"--env={e}" for e in config.get("Env") or []]
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["buildah", "run", "--isolation", "chroot", "--network", "host", *env,
                                 "--volume", f"{kube_dir}:/etc/batchd/kube:ro", name, "--", *argv],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        await eventually(lambda: http_get(health, "/readyz")[0] == 200, timeout=120, what=f"worker ready ({log})")
        assert _uid_of_worker(task_queue) == 10001

        ttl_job = job_manifest("ttl", ttl=1)
        kube.create("Job", namespace, ttl_job)
        indexed = job_manifest("indexed", completions=3, parallelism=2, indexed=True)
        kube.create("Job", namespace, indexed)
        kube.create("CronJob", namespace, {
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "tick", "labels": {"batchd.io/managed": "true"}},
            "spec": {"schedule": "@every 1s", "jobTemplate": {"spec": job_manifest("x")["spec"]}}})

        def complete(job: dict[str, Any] | None) -> bool:
            conditions = (job or {}).get("status", {}).get("conditions") or []
            return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

        await eventually(lambda: complete(kube.get("Job", namespace, "indexed")), timeout=90, what="Indexed Job complete")
        assert (kube.get("Job", namespace, "indexed") or {})["status"]["succeeded"] == 3
        await eventually(lambda: kube.get("Job", namespace, "ttl") is None, timeout=90, what="TTL Job deleted")
        await eventually(lambda: [j for j in kube.list("Job", namespace)["items"]
                                  if (j["metadata"].get("ownerReferences") or [{}])[0].get("name") == "tick"],
                         timeout=90, what="a Job created for the CronJob")

        pid = _worker_pid(task_queue)
        assert pid is not None and proc.poll() is None, "the worker runs until told to stop"
        os.kill(pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            pid = _worker_pid(task_queue)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait()
