"""``batchd worker``: the Temporal worker, the bridge and the health/metrics server in one process.

Layer: worker. Called by worker/cli.py (production) and worker/dev.py (embedded environment).
Start-up only wires; shutdown (SIGTERM/SIGINT) stops the watches, drains queued events, lets
running activities finish (graceful timeout), then exits.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from pathlib import Path
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import Observation
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

from activities.cronjob import collect_when_quiet
from kube.client import Kube
from kube.config import load_access
from worker import telemetry
from worker.bridge import Bridge, BridgeSettings
from worker.lease import Elector, LeaseSettings
from worker.temporal import (
    STICKY_WAIT,
    TemporalSettings,
    build_workers,
    connect,
    ensure_search_attributes,
    polled_queues,
    return_large_blocks_at_once,
)
from worker.watchdog import Watchdog
from workflows.policies import Backoff

log = logging.getLogger("batchd.worker")

PENDING_TTL_QUERY = 'WorkflowType = "TTLAfterFinished" AND ExecutionStatus = "Running"'


class PendingTimers:
    """The ``batchd_ttl_pending_timers`` gauge: running TTL workflows, counted in Temporal visibility.

    Counted from visibility (not from this process) so the figure is the namespace's truth and
    survives restarts; refreshed every ``interval`` seconds, read by the metrics scrape.
    """

    def __init__(self, client: Client, interval: float = 30.0) -> None:
        self.client, self.interval = client, interval
        self.value: int | None = None
        metrics.get_meter("batchd.ttl").create_observable_gauge(
            "batchd_ttl_pending_timers", callbacks=[self._observe],
            description="Running TTL-after-finished workflows (each sleeps on one timer)",
        )

    def _observe(self, _options: Any) -> list[Observation]:
        return [] if self.value is None else [Observation(self.value)]

    async def run(self) -> None:
        while True:
            try:
                self.value = (await self.client.count_workflows(PENDING_TTL_QUERY)).count
            except RPCError as err:
                log.warning("could not count pending TTL workflows: %s", err)
            await asyncio.sleep(self.interval)


#: A poller the server last saw longer ago than this is not running: an idle poll is held open by
#: the server for about a minute, then the worker polls again at once.
POLL_FRESHNESS = timedelta(seconds=90)
#: how long a starting worker keeps trying to reach Temporal before it gives up and exits
CONNECT_PATIENCE = 120.0


class Readiness:
    """What ``/readyz`` answers: ready while the bridge has synced and this process's pollers run.

    Bridge synced: every informer has listed once, so every object's workflow has been told.
    Pollers running: each Worker is started and not shutting down, and the Temporal server lists
    this process's identity among the recent pollers of every queue it serves (DescribeTaskQueue)
    — a worker that cannot poll (server unreachable, namespace or credentials refused) runs on
    locally but gets no tasks, so it is not ready. The server is asked every ``interval`` seconds
    by :meth:`run`, not per probe (every second until it first is). :meth:`stopping` makes the
    process unready at once on SIGTERM.
    """

    def __init__(self, client: Client, bridge_synced: Callable[[], bool], workers: Sequence[Worker],
                 queues: Sequence[tuple[str, TaskQueueType.ValueType]], *, interval: float = 10.0) -> None:
        self.client, self.bridge_synced, self.workers, self.queues = client, bridge_synced, workers, queues
        self.interval = interval
        self._unpolled: list[str] | None = None  # queues without our poller; None: not asked yet
        self._stopping = False

    def stopping(self) -> None:
        self._stopping = True

    def problems(self) -> list[str]:
        """Why the process is not ready; empty when it is."""
        if self._stopping:
            return ["stopping"]
        problems = [] if self.bridge_synced() else ["bridge: informers not synced"]
        if not all(w.is_running for w in self.workers):
            problems.append("workers: not running")
        elif self._unpolled is None:
            problems.append("pollers: not seen by the server yet")
        else:
            problems.extend(f"pollers: {q}" for q in self._unpolled)
        return problems

    async def run(self) -> None:
        while True:
            if all(w.is_running for w in self.workers):
                self._unpolled = await self._unpolled_queues()
            # Until the server has seen every poller, ask again soon: start-up waits on this.
            await asyncio.sleep(self.interval if self._unpolled == [] else 1.0)

    async def _unpolled_queues(self) -> list[str]:
        unpolled = []
        for name, kind in self.queues:
            label = f"{name} ({TaskQueueType.Name(kind).removeprefix('TASK_QUEUE_TYPE_').lower()})"
            try:
                resp = await self.client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
                    namespace=self.client.namespace, task_queue=TaskQueue(name=name), task_queue_type=kind))
            except RPCError as err:
                unpolled.append(f"{label}: {err.status.name}")
                continue
            since = datetime.now(UTC) - POLL_FRESHNESS
            if not any(p.identity == self.client.identity and p.last_access_time.ToDatetime(UTC) > since
                       for p in resp.pollers):
                unpolled.append(f"{label}: no recent poll from {self.client.identity}")
        return unpolled


@dataclass(frozen=True)
class WorkerSettings:
    """Everything ``batchd worker`` takes from flags and environment."""

    temporal: TemporalSettings = field(default_factory=TemporalSettings)
    bridge: BridgeSettings = field(default_factory=BridgeSettings)
    kubeconfig: Path | None = None
    health_address: str = "0.0.0.0"
    health_port: int = 8080
    max_concurrent_activities: int = 64
    max_cached_workflows: int = 1000
    sticky_wait: float = STICKY_WAIT.total_seconds()  # seconds a workflow task waits for this worker's cache
    lease: LeaseSettings | None = None  # leader election (WATCH-4); None: this bridge always sends
    cloudevents_sink: str | None = None  # NOTIFY-EVENTS: where CloudEvents go (the bridge's ``cloudevents`` says whether)
    group_recheck: float = 30.0  # CJ-GROUP: seconds between re-reads of a group's holders while one waits


class HealthServer:
    """``/healthz`` (alive), ``/readyz`` (see :class:`Readiness`) and ``/metrics``, over HTTP/1.1.

    Written on asyncio streams because importing aiohttp for three plain endpoints would add its
    modules to every worker's resident memory (docs/benchmarks.md). One request per connection
    (``Connection: close``), which kubelet probes and Prometheus both accept; a client gets
    ``timeout`` seconds for the whole exchange, so one that sends nothing, dribbles, or does not
    read its answer cannot hold a connection.
    """

    MAX_HEAD = 16 * 1024  # bytes; a longer request head is answered 400
    TEXT = "text/plain; charset=utf-8"

    def __init__(self, registry: CollectorRegistry, problems: Callable[[], list[str]], *,
                 timeout: float = 10.0) -> None:
        self.registry, self.problems, self.timeout = registry, problems, timeout
        self.server: asyncio.Server | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host, port, limit=self.MAX_HEAD)
        self.port = self.server.sockets[0].getsockname()[1]  # the bound one, when ``port`` is 0

    async def stop(self) -> None:
        if self.server:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                try:
                    request = _request_line(await reader.readuntil(b"\r\n\r\n"))
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    request = None
                writer.write(self._response(request))
                await writer.drain()
        except TimeoutError:
            writer.transport.abort()  # else an answer the client never reads would be kept forever
        except ConnectionError:
            pass  # the client left: nobody to answer
        finally:
            writer.close()

    def _response(self, request: tuple[str, str] | None) -> bytes:
        """The whole answer to a request: ``(method, path)``, or None for a malformed or oversized head."""
        status, headers, body = self._answer(*request) if request else (400, {}, b"bad request\n")
        headers = {"Content-Type": self.TEXT, **headers, "Content-Length": str(len(body)), "Connection": "close"}
        head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return (head + "\r\n").encode("latin-1") + (b"" if request and request[0] == "HEAD" else body)

    def _answer(self, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        route = {"/healthz": self._healthz, "/readyz": self._readyz, "/metrics": self._metrics}.get(path)
        if route is None:
            return 404, {}, b"not found\n"
        if method not in ("GET", "HEAD"):
            return 405, {"Allow": "GET, HEAD"}, b"method not allowed\n"
        try:
            return route()
        except Exception:
            # This request answers 500; the server and the worker carry on.
            log.warning("health server: %s failed", path, exc_info=True)
            return 500, {}, b"internal error\n"

    def _healthz(self) -> tuple[int, dict[str, str], bytes]:
        return 200, {}, b"ok"

    def _readyz(self) -> tuple[int, dict[str, str], bytes]:
        problems = self.problems()
        return (503, {}, "".join(f"{p}\n" for p in problems).encode()) if problems else (200, {}, b"ok")

    def _metrics(self) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": CONTENT_TYPE_LATEST}, generate_latest(self.registry)


def _request_line(head: bytes) -> tuple[str, str] | None:
    """Method and path (the query dropped) of an HTTP/1.x request head; None when it is malformed."""
    parts = head.decode("latin-1").split("\r\n", 1)[0].split(" ")
    if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].startswith("HTTP/1."):
        return None
    return parts[0], parts[1].partition("?")[0]


async def run(settings: WorkerSettings, *, stop: asyncio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set)."""
    return_large_blocks_at_once()
    tel = telemetry.install()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    temporal_settings = TemporalSettings(**{**settings.temporal.__dict__, "interceptors": tel.interceptors})
    readiness: Readiness | None = None
    # Up before Temporal is reached: the process is alive (liveness) while it waits for the server.
    health = HealthServer(tel.registry, lambda: readiness.problems() if readiness
                          else [f"temporal: connecting to {settings.temporal.address}"])
    await health.start(settings.health_address, settings.health_port)
    try:
        client = await _connect_while_starting(temporal_settings, tel.runtime)
    except BaseException:
        await health.stop()
        raise
    kube = Kube(load_access(settings.kubeconfig))
    bridge = Bridge(client, kube, settings.bridge, elector=Elector(kube, settings.lease) if settings.lease else None)
    workers = build_workers(client, kube, task_queue=settings.bridge.task_queue,
                            max_concurrent_activities=settings.max_concurrent_activities,
                            max_cached_workflows=settings.max_cached_workflows, cronjob_cache=bridge.cached_cronjob,
                            job_pods=bridge.job_pods, job_view=bridge.cached_job,
                            cloudevents_sink=settings.cloudevents_sink,
                            group_recheck=timedelta(seconds=settings.group_recheck),
                            sticky_wait=timedelta(seconds=settings.sticky_wait))
    readiness = Readiness(client, lambda: bridge.synced, workers, polled_queues(settings.bridge.task_queue))

    async with tel.exporter:
        worker_task = asyncio.create_task(_run_all(workers))
        pending = asyncio.create_task(PendingTimers(client).run())
        watchdog = asyncio.create_task(Watchdog(client, kube, task_queue=settings.bridge.task_queue).run())
        probing = asyncio.create_task(readiness.run())
        collecting = asyncio.create_task(collect_when_quiet())
        await bridge.start()
        log.info("batchd worker running", extra={
            "temporal": settings.temporal.address, "namespace": settings.temporal.namespace,
            "task_queue": settings.bridge.task_queue, "health_port": health.port,
        })
        stopped = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({worker_task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        log.info("batchd worker stopping")
        readiness.stopping()
        await bridge.stop()
        if worker_task not in done:
            await asyncio.gather(*(w.shutdown() for w in workers))
        stopped.cancel()
        pending.cancel()
        watchdog.cancel()
        probing.cancel()
        collecting.cancel()
        await worker_task  # re-raises a worker failure after the clean-up above
        await health.stop()
    log.info("batchd worker stopped")


async def _connect_while_starting(settings: TemporalSettings, runtime: Any, *, patience: float = CONNECT_PATIENCE,
                                  delay: float = 0.5) -> Client:
    """Connect and register the search attributes, retrying for up to ``patience`` seconds.

    A replica that starts while the Temporal frontend restarts (a rollout, a failover) waits for
    it instead of exiting into a crash loop; a server that stays unreachable (a wrong address,
    refused TLS) still ends the process, with the last error.
    """
    deadline, backoff = time.monotonic() + patience, Backoff(delay, 10.0)
    while True:
        try:
            client = await connect(settings, runtime=runtime)
            await ensure_search_attributes(client)
            return client
        except Exception as err:
            wait = backoff.next()
            if time.monotonic() + wait > deadline:
                raise
            log.warning("Temporal at %s is not answering (%s); trying again in %.1f s", settings.address, err, wait)
            await asyncio.sleep(wait)


async def _run_all(workers: list[Worker]) -> None:
    """Run the workers together; if one fails, shut the others down and raise its error."""
    tasks = [asyncio.create_task(w.run()) for w in workers]
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    if any(t.exception() for t in done):
        await asyncio.gather(*(w.shutdown() for w in workers if w.is_running), return_exceptions=True)
    await asyncio.gather(*tasks)
