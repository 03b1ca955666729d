"""Tier 4: a newcomer's first kubectl commands against kubesim and a worker set up as ``batchd
dev`` sets it up (``--job-scope all``, every CronJob, TTL for every Job), once per kubectl minor
version on the machine, asserting what kubectl prints (issue 17)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, NamedTuple

import pytest

from kube.client import Kube
from tests.conftest import eventually, new_namespace
from tests.e2e.test_worker_process import BATCHD, http_get
from worker.cluster import log_tail
from worker.dev import DEV_BRIDGE, dev_server_args, free_port
from worker.upstream import KUBERNETES_VERSION, UpstreamError, bin_dir


# `kubectl` and the versioned binaries beside it (kubectl.1.27 … kubectl.1.33) that exist here, and
# the kubectl built with upstream's control plane (`make upstream`), the server's own version.
# The versioned ones sit in the directory of the real kubectl (the Google Cloud CLI's bin/), which
# need not be on PATH.
def _kubectls() -> dict[str, str]:
    found = shutil.which("kubectl")
    beside = [os.path.dirname(os.path.realpath(found))] if found else []
    # every other minor version from 1.27 (the ones between add little; make test has eight minutes)
    names = ["kubectl", *(f"kubectl.1.{m}" for m in range(27, 34, 2))]
    kubectls = {os.path.basename(hit): hit for name in names
                if (hit := shutil.which(name) or shutil.which(name, path=os.pathsep.join(beside)))}
    with contextlib.suppress(UpstreamError):
        kubectls[f"kubectl.{KUBERNETES_VERSION}"] = str(bin_dir() / "kubectl")
    return dict(sorted(kubectls.items()))


KUBECTLS = _kubectls()
# On kube-apiserver 1.34: the server's own kubectl, the one on PATH and 1.33; the older ones are
# past kubectl's version skew policy (one minor version) and run on kubesim only.
_SKEWED = {name for name in KUBECTLS if name.startswith("kubectl.1.") and int(name.split(".")[2]) < 33}
KUBECTL_PARAMS = [pytest.param(path, id=name, marks=[pytest.mark.kubesim_only(
    "older than kube-apiserver 1.34's kubectl skew")] if name in _SKEWED else []) for name, path in KUBECTLS.items()]
Run = Callable[..., str]

APPLIED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{app: applied}}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {{kubesim.batchd.io/exit-code: "{code}"}}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: [sh, -c, "exit {code}"]
"""


def dev_args() -> list[str]:
    """The worker flags that make the bridge settings of ``batchd dev``."""
    assert (DEV_BRIDGE.job_scope, DEV_BRIDGE.ttl_scope, DEV_BRIDGE.cronjob_selector) == ("all", "all", "")
    return ["--job-scope", "all", "--cronjob-selector", ""]


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _dev_server(tmp_path: Path, log: IO[bytes]) -> tuple[subprocess.Popen[bytes], int]:
    """The dev server and its frontend port, once it and its UI answer. A port picked free may be
    taken before the server binds it (the server then exits): start again on others, twice at most."""
    deadline = time.monotonic() + 240
    for _ in range(3):
        port, ui_port = free_port(), free_port()
        server = subprocess.Popen(dev_server_args(tmp_path, port, ui_port), stdout=log, stderr=log)
        while server.poll() is None and not (_answers(port) and _answers(ui_port)):
            assert time.monotonic() < deadline, "dev server did not start"
            time.sleep(0.2)
        if server.poll() is None:
            return server, port
    raise AssertionError("dev server exited at start three times")


@contextmanager
def dev_world(tmp_path: Path, kubeconfig: Path, namespaces: list[str]) -> Iterator[Path]:
    """The Temporal dev server as ``batchd dev`` starts it, and a worker with its bridge settings
    (on ``namespaces``), both as separate processes; yields the worker's log. The worker keeps the
    default Lease times: no test here kills it, and a 2 s renew deadline on a saturated machine
    makes leadership flap."""
    log = open(tmp_path / "temporal.log", "ab")  # noqa: SIM115 - closed below
    server: subprocess.Popen[bytes] | None = None
    worker = None
    try:
        server, port = _dev_server(tmp_path, log)
        for _ in range(3):  # a free port can be taken by another test's process before the worker binds it
            health = free_port()
            args = [BATCHD, "worker", "--temporal-address", f"127.0.0.1:{port}", "--kubeconfig", str(kubeconfig),
                    "--namespaces", ",".join(namespaces), "--health-port", str(health), "--ttl-scope", "all",
                    *dev_args(), "--leader-elect-resource-namespace", namespaces[0]]
            with open(tmp_path / "worker.log", "ab") as out:
                worker = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 240
            # ready, and ours: a process that took the port first may answer /readyz for it
            while worker.poll() is None and http_get(health, "/readyz")[0] != 200:
                assert time.monotonic() < deadline, "worker not ready"
                time.sleep(0.2)
            time.sleep(0.5)
            if worker.poll() is None:
                break
            assert "address already in use" in (tmp_path / "worker.log").read_text(), "the worker exited"
        yield tmp_path / "worker.log"
    finally:
        for proc in (worker, server):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        log.close()


class World(NamedTuple):
    spaces: dict[str, str]  # a namespace for each test that uses the world, by kubectl binary or name
    log: Path  # the worker's


@pytest.fixture(scope="module")
def world(kube: Kube, worker_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One dev world for the module (per test process), with a namespace for each test that uses it:
    a dev server and a worker are the slow part to start."""
    spaces = {key: new_namespace(kube) for key in [*KUBECTLS.values(), "cronjob"]}
    with dev_world(tmp_path_factory.mktemp("dev"), worker_kubeconfig, list(spaces.values())) as log:
        yield World(spaces, log)


def _until(run: Callable[[], str], text: str, timeout: float = 60) -> str:
    """``run()``'s output once it contains ``text`` (what kubectl prints of an asynchronous write)."""
    deadline = time.monotonic() + timeout
    while text not in (out := run()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return out


@contextmanager
def kubectl_runner(binary: str, kubeconfig: Path, namespace: str, cache: Path,
                   worker_log: Path | None = None) -> Iterator[Run]:
    """``run(*args)``: kubectl's output; a failure says what the worker (``worker_log``) logged last."""
    def run(*args: str, ok: bool = True, timeout: float = 60, stdin: str | None = None) -> str:
        cmd = [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), "-n", namespace, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin)
        if ok and proc.returncode != 0:
            worker = f"\nthe worker's log ends:\n{log_tail(worker_log, 40)}" if worker_log else ""
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr}{worker}")
        if not ok:
            assert proc.returncode != 0, proc.stdout
            return proc.stderr
        return proc.stdout

    yield run


# One test process runs every version, on one dev world (the module fixture); the minute-long
# CronJob test below may run beside them in another process, on a world of its own.
@pytest.mark.xdist_group("kubectl-versions", per_backend=True)
@pytest.mark.parametrize("binary", KUBECTL_PARAMS)
@pytest.mark.timeout(900)
def test_a_newcomers_first_kubectl_commands(binary: str, kubeconfig: Path, world: World,
                                           tmp_path: Path, backend: str) -> None:
    namespace = world.spaces[binary]
    with kubectl_runner(binary, kubeconfig, namespace, tmp_path / "cache", world.log) as k:
        other = f"{namespace}-b"

        # create namespace / cronjob / job, each with both dry runs first
        assert k("create", "namespace", other, "--dry-run=client", "-o", "name") == f"namespace/{other}\n"
        assert k("create", "namespace", other, "--dry-run=server") == f"namespace/{other} created (server dry run)\n"
        assert "NotFound" in k("get", "namespace", other, ok=False)
        assert k("create", "namespace", other) == f"namespace/{other} created\n"
        assert k("get", "namespace", other, "-o", "jsonpath={.status.phase}") == "Active"

        cron = ["create", "cronjob", "every-minute", "--image=busybox", "--schedule=*/1 * * * *"]
        assert k(*cron, "--dry-run=client", "--", "date") == "cronjob.batch/every-minute created (dry run)\n"
        assert k(*cron, "--dry-run=server", "--", "date") == "cronjob.batch/every-minute created (server dry run)\n"
        assert "NotFound" in k("get", "cronjob", "every-minute", ok=False)
        assert k(*cron, "--", "date") == "cronjob.batch/every-minute created\n"

        hello = ["create", "job", "hello", "--image=busybox"]
        assert k(*hello, "--dry-run=client", "--", "echo", "hi") == "job.batch/hello created (dry run)\n"
        assert k(*hello, "--dry-run=server", "--", "echo", "hi") == "job.batch/hello created (server dry run)\n"
        assert "NotFound" in k("get", "job", "hello", ok=False)
        assert k(*hello, "--", "echo", "hi") == "job.batch/hello created\n"
        assert k("create", "job", "--from=cronjob/every-minute", "manual-1") == "job.batch/manual-1 created\n"
        assert k("get", "job", "manual-1", "-o", "jsonpath={.metadata.annotations}") == \
            '{"cronjob.kubernetes.io/instantiate":"manual"}'

        # wait, get with jsonpath, logs, describe, events
        assert k("wait", "--for=condition=complete", "job/hello", "job/manual-1", "--timeout=90s", timeout=100) == \
            "job.batch/hello condition met\njob.batch/manual-1 condition met\n"
        assert k("get", "job", "hello", "-o", "jsonpath={.status.succeeded}/{.spec.completions}") == "1/1"
        if backend == "kubesim":  # kwok's Nodes run no container, so they have no logs to serve
            assert k("logs", "job/hello") == "+ echo hi\nkubesim: exit code 0\n"
            stamped = k("logs", "job/hello", "--timestamps").splitlines()
            assert [re.sub(r"^\S+Z ", "", line) for line in stamped] == ["+ echo hi", "kubesim: exit code 0"]
            assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ", line) for line in stamped)
        described = k("describe", "job", "hello")
        assert re.search(r"^Name:\s+hello$", described, re.M)
        assert re.search(r"^Pods Statuses:\s+0 Active .*/ 1 Succeeded / 0 Failed$", described, re.M)
        events = _until(lambda: k("events", "--for", "job/hello"), "Job completed")  # the Event follows the status
        assert events.splitlines()[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        assert re.search(r"^\S+\s+Normal\s+Completed\s+Job/hello\s+Job completed$", events, re.M), events

        # watch as JSON: the first object is the Job, as one JSON document
        watch = subprocess.run(
            [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), "-n", namespace,
             "get", "job", "hello", "--watch", "-o", "json", "--request-timeout=2s"],
            capture_output=True, text=True, timeout=30)
        first = json.JSONDecoder().raw_decode(watch.stdout)[0]
        assert (first["kind"], first["metadata"]["name"]) == ("Job", "hello")

        # apply --server-side twice: the second run changes nothing; a failing Job waits as failed
        manifest = tmp_path / "applied.yaml"
        manifest.write_text(APPLIED.format(name="applied", code=3))
        assert k("apply", "--server-side", "-f", str(manifest)) == "job.batch/applied serverside-applied\n"
        rv = k("get", "job", "applied", "-o", "jsonpath={.metadata.resourceVersion}")
        assert k("apply", "--server-side", "-f", str(manifest)) == "job.batch/applied serverside-applied\n"
        assert k("wait", "--for=condition=failed", "job/applied", "--timeout=90s", timeout=100) == \
            "job.batch/applied condition met\n"
        assert k("get", "job", "applied", "-o", "jsonpath={.metadata.managedFields[0].manager}") == "kubectl"
        assert int(k("get", "job", "applied", "-o", "jsonpath={.metadata.resourceVersion}")) > int(rv)
        conflict = k("apply", "--server-side", "--field-manager=someone-else", "-f", "-", ok=False,
                     stdin=APPLIED.format(name="applied", code=3).replace("app: applied", "app: changed"))
        assert 'Apply failed with 1 conflict: conflict with "kubectl": .metadata.labels.app' in conflict

        # delete, waiting until it is gone
        # kubectl 1.34 names the namespace: `job.batch "hello" deleted from NS namespace`
        ns = f"( from {namespace} namespace)?"
        assert re.fullmatch(rf'job.batch "hello" deleted{ns} \(server dry run\)\n', k("delete", "job", "hello", "--dry-run=server"))
        assert re.fullmatch(rf'job.batch "hello" deleted{ns}\n', k("delete", "job", "hello", "--wait=true", "--timeout=60s"))
        assert k("get", "job", "hello", ok=False).strip() == 'Error from server (NotFound): jobs.batch "hello" not found'
        assert re.fullmatch(rf'cronjob.batch "every-minute" deleted{ns}\n', k("delete", "cronjob", "every-minute"))
        assert k("delete", "namespace", other, "--wait=false") == f'namespace "{other}" deleted\n'


@pytest.mark.slow
@pytest.mark.timeout(420)  # two real minutes by design
async def test_a_kubectl_cronjob_runs_each_minute_and_keeps_the_history_its_patch_asks_for(
        kubeconfig: Path, world: World, tmp_path: Path) -> None:
    with kubectl_runner("kubectl", kubeconfig, world.spaces["cronjob"], tmp_path / "cache", world.log) as k:
        assert k("create", "cronjob", "tick", "--image=busybox", "--schedule=*/1 * * * *", "--", "date") == \
            "cronjob.batch/tick created\n"
        assert k("get", "cronjob", "tick", "-o", "jsonpath={.spec.successfulJobsHistoryLimit}") == "3"
        # A limit of 1 shows the trim after two runs, not four: two real minutes less. The server's
        # default of 3 is asserted above; the trim itself is tested in tests/integration/test_cronjob.py.
        assert k("patch", "cronjob", "tick", "--type=merge", "-p", '{"spec":{"successfulJobsHistoryLimit":1}}') == \
            "cronjob.batch/tick patched\n"
        seen: set[str] = set()

        def jobs() -> list[tuple[str, str]]:
            out = k("get", "jobs", "-o",
                    'jsonpath={range .items[*]}{.metadata.name} {.status.succeeded}{"\\n"}{end}')
            rows = [tuple(line.split(" ", 1)) for line in out.splitlines() if line.startswith("tick-")]
            seen.update(name for name, _ in rows)
            return rows  # type: ignore[return-value]

        # Two scheduled runs: the second one's success pushes the first out of the history.
        def two_runs_one_kept() -> bool:
            rows = jobs()
            return len(seen) >= 2 and len(rows) == 1 and rows[0][1] == "1"

        await eventually(two_runs_one_kept, timeout=210, interval=2, what="two runs, the newest kept")
        assert [name for name, _ in jobs()] == [max(seen)]  # names carry the scheduled minute, so they sort by time
