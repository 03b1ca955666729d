"""Tier 4: the real ``batchd worker`` process against kubesim and the dev server, driven only
through the Kubernetes API, Temporal and the worker's HTTP endpoints — as a user would.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from kube.client import Kube
from kube.config import load_access
from tests.conftest import eventually, utcnow
from tests.e2e.forked import Forked
from tests.k8s import create_job, finish_job, second
from worker.dev import free_port

BATCHD = str(Path(sys.executable).parent / "batchd")


def lease_args(namespace: str) -> list[str]:
    """Leader election (on by default) on a Lease in the test's own namespace, with short times: a
    worker SIGKILLed while it holds the Lease is replaced within 3 s, not the default 15 s."""
    return ["--leader-elect-resource-namespace", namespace, "--leader-elect-lease-duration", "3s",
            "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "1s"]


@contextmanager
def worker_process(temporal_env: WorkflowEnvironment, kubeconfig: Path, namespace: str, task_queue: str,
                   log: Path, health_port: int, *extra: str) -> Iterator[Forked]:
    """A ``batchd worker`` process (forked, see :mod:`tests.e2e.forked`), killed on the way out."""
    target = temporal_env.client.service_client.config.target_host
    args = ["worker", "--temporal-address", target, "--kubeconfig", str(kubeconfig),
            "--namespaces", namespace, "--task-queue", task_queue, "--health-port", str(health_port),
            "--resync-seconds", "30", "--ttl-scope", "all",  # TTL tests' Jobs are finished by hand
            *lease_args(namespace), *extra]
    proc = Forked(args, log)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def http_get(port: int, path: str) -> tuple[int, str]:
    """Status and body, the body of an error status included (it says why not ready)."""
    try:
        # generous: a scrape of /metrics on a loaded machine takes seconds
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=15) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


async def ready(port: int, timeout: float = 180) -> None:
    """Until the worker process on ``port`` says ready: starting one (imports, connecting, the
    first list) takes seconds, and far longer on a loaded machine. A failure names the last answer,
    whose body says what was not ready."""
    answer = (0, "")

    def check() -> bool:
        nonlocal answer
        answer = http_get(port, "/readyz")
        return answer[0] == 200

    try:
        await eventually(check, timeout=timeout, what=f"worker on :{port} ready")
    except AssertionError as err:
        raise AssertionError(f"{err}; last answer: {answer[0]} {answer[1].strip()!r}") from None


class DeletionWatch:
    """Records, from a watch of the API, when each Job first showed a deletionTimestamp."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.deleted_at: dict[str, datetime] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        rv = self.kube.list("Job", self.namespace)["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            for ev in self.kube.watch("Job", self.namespace, resource_version=rv, timeout_seconds=5):
                obj = ev["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                ts = obj["metadata"].get("deletionTimestamp")
                if ts and obj["metadata"]["name"] not in self.deleted_at:
                    self.deleted_at[obj["metadata"]["name"]] = datetime.fromisoformat(ts.replace("Z", "+00:00"))

    def stop(self) -> None:
        self._stop.set()


@pytest.mark.slow
@pytest.mark.timeout(900)  # the expiries are minutes out by design
async def test_worker_killed_with_200_ttl_timers_asleep_deletes_all_on_time_once(
    temporal_env: WorkflowEnvironment, kubesim_server: Any, kubeconfig: Path, kube: Kube, namespace: str,
    task_queue: str, tmp_path: Path,
) -> None:
    n, base = 200, 180
    # expiries spread over base..base+6 s after finishing; the Jobs are finished only once the
    # worker runs, and the worker is killed before the first expiry (checked, not assumed). Starting
    # 200 workflows took a loaded 2-core CI machine over 120 s (with the deadlock detector firing
    # on first activations), hence the base.
    ttls = {f"job-{i:03d}": base + (i % 7) for i in range(n)}
    for name, ttl in ttls.items():
        create_job(kube, namespace, name, ttl=ttl)
    watch = DeletionWatch(kube, namespace)
    kubesim_server.audit(reset=True)
    health = free_port()
    client = temporal_env.client
    query = f'K8sNamespace = "{namespace}" AND ExecutionStatus = "Running"'
    with worker_process(temporal_env, kubeconfig, namespace, task_queue, tmp_path / "worker1.log", health) as proc:
        await ready(health)
        finished = second(utcnow())
        for name in ttls:
            finish_job(kube, namespace, name, finished)
        await eventually(lambda: _count(client, query, n), timeout=base - 10, what="200 TTL workflows running")
        assert utcnow() < finished + timedelta(seconds=base - 1), "set-up overran the first expiry; the kill would prove nothing"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert all(kube.get("Job", namespace, name) for name in ttls), "nothing may be deleted before expiry"
    await asyncio.sleep(max(0.0, (finished + timedelta(seconds=base + 2) - utcnow()).total_seconds()))  # some expire while down
    with worker_process(temporal_env, kubeconfig, namespace, task_queue, tmp_path / "worker2.log", health):
        await eventually(lambda: not kube.list("Job", namespace)["items"], timeout=180, what="all Jobs deleted")
    watch.stop()
    assert set(watch.deleted_at) == set(ttls)
    early = {k: v for k, v in watch.deleted_at.items() if v < finished + timedelta(seconds=ttls[k])}
    assert not early, f"deleted before expiry: {early}"
    deletes = sum(c for key, c in kubesim_server.audit().items() if key.verb == "delete" and key.resource == "jobs")
    assert deletes == n, f"{deletes} DELETE requests for {n} Jobs"


async def _count(client: Any, query: str, n: int) -> bool:
    return (await client.count_workflows(query)).count >= n


@pytest.mark.timeout(300)  # two waits of up to 120 s and 60 s, and the worker's stop
async def test_worker_rides_out_faults_watch_drops_and_a_kubesim_restart(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path,
) -> None:
    from kubesim import KubeSim

    port = free_port()
    sim = KubeSim(port=port).start()
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    kube = Kube(load_access(kubeconfig))
    health = free_port()
    log = tmp_path / "worker.log"
    try:
        with worker_process(temporal_env, kubeconfig, "default", task_queue, log, health) as proc:
            await ready(health)
            assert http_get(health, "/healthz")[0] == 200
            # A delete attempt is a GET and a DELETE, and the activity's retries back off 1, 2, 4, 8,
            # 16, 32 s: at 30 % faults an attempt failed half the time, and one Job in five failing
            # six in a row (about 8 % of runs) outlasted a 60 s wait in CI. At 15 % and 120 s, all
            # seven attempts fail for one of five Jobs in about 0.1 % of runs.
            sim.faults.set(error_rate=0.15, codes=(500, 429), retry_after_seconds=1)
            for i in range(5):
                _finished_job(kube, f"faulty-{i}", ttl=1)
            sim.disconnect_watches()
            await eventually(lambda: _none_left(kube, "faulty-"), timeout=120, what="deleted despite faults")
            sim.faults.clear()

            sim.stop()  # kubesim restarts empty on the same port; the worker must relist and go on
            sim = KubeSim(port=port).start()
            await asyncio.sleep(1)
            _finished_job(kube, "after-restart", ttl=1)
            await eventually(lambda: kube.get("Job", "default", "after-restart") is None, timeout=60,
                             what="deleted after kubesim restart")
            status, body = http_get(health, "/metrics")
            assert status == 200
            assert "ttl_after_finished_controller_job_deletion_duration_seconds" in body
            assert "batchd_bridge_events" in body
            assert re.search(r'^batchd_informer_failures_total\{[^}]*reason="request"[^}]*\} [1-9]', body, re.MULTILINE)
            assert re.search(r"^batchd_bridge_leading(\{[^}]*\})? 1(\.0)?$", body, re.MULTILINE)  # it holds the Lease
            assert "batchd_ttl_pending_timers" in body
            assert "temporal_" in body  # the SDK's own metrics flow into the same endpoint
            assert proc.poll() is None, "the worker must survive all of it"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=90) == 0
    finally:
        sim.stop()
    text = log.read_text()
    # at the default level the log says what batchd did, not each watch event it routed
    assert "deleted Job default/after-restart" in text, text[-2000:]
    assert "MODIFIED Job default/after-restart" not in text


def _finished_job(kube: Kube, name: str, ttl: int) -> None:
    _retry(lambda: create_job(kube, "default", name, ttl=ttl))
    _retry(lambda: finish_job(kube, "default", name, second(utcnow())))


def _retry(fn: Any, attempts: int = 20) -> Any:
    for i in range(attempts):
        try:
            return fn()
        except Exception:
            if i == attempts - 1:
                raise
            time.sleep(0.1)


def _none_left(kube: Kube, prefix: str) -> bool:
    try:
        return not [j for j in kube.list("Job", "default")["items"] if j["metadata"]["name"].startswith(prefix)]
    except Exception:
        return False


if __name__ == "__main__":
    pytest.main([__file__])
