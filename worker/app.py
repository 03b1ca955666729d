"""``batchd worker``: the Temporal worker, the bridge and the health/metrics server in one process.

Layer: worker. Called by worker/cli.py (production) and worker/dev.py (embedded environment).
Start-up only wires; shutdown (SIGTERM/SIGINT) stops the watches, drains queued events, lets
running activities finish (graceful timeout), then exits.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from opentelemetry import metrics
from opentelemetry.metrics import Observation
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

from activities.kube import Kube
from worker import telemetry
from worker.bridge import Bridge, BridgeSettings
from worker.temporal import TemporalSettings, build_workers, connect, ensure_search_attributes
from worker.watchdog import Watchdog

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


def kube_configuration(kubeconfig: Path | None) -> k8s_client.Configuration:
    """In-cluster config inside a Pod, else the kubeconfig (``--kubeconfig``, ``$KUBECONFIG``, ~/.kube/config)."""
    configuration = k8s_client.Configuration()
    if kubeconfig is None:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
            return configuration
        except k8s_config.ConfigException:
            pass
    k8s_config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None, client_configuration=configuration)
    return configuration


class HealthServer:
    """``/healthz`` (alive), ``/readyz`` (worker running and informers synced) and ``/metrics``."""

    def __init__(self, registry: CollectorRegistry, ready: Callable[[], bool]) -> None:
        self.registry, self.ready = registry, ready
        self.runner: web.AppRunner | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        app = web.Application()
        app.router.add_get("/healthz", lambda _: web.Response(text="ok"))
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _readyz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok") if self.ready() else web.Response(status=503, text="not ready")

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def stop(self) -> None:
        if self.runner:
            await self.runner.cleanup()


async def run(settings: WorkerSettings, *, stop: asyncio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set)."""
    tel = telemetry.install()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    temporal_settings = TemporalSettings(**{**settings.temporal.__dict__, "interceptors": tel.interceptors})
    client = await connect(temporal_settings, runtime=tel.runtime)
    await ensure_search_attributes(client)
    kube = Kube(kube_configuration(settings.kubeconfig))
    bridge = Bridge(client, kube, settings.bridge)
    workers = build_workers(client, kube, task_queue=settings.bridge.task_queue,
                            max_concurrent_activities=settings.max_concurrent_activities,
                            max_cached_workflows=settings.max_cached_workflows, cronjob_cache=bridge.cached_cronjob)
    health = HealthServer(tel.registry, lambda: bridge.synced and all(w.is_running for w in workers))

    async with tel.exporter:
        await health.start(settings.health_address, settings.health_port)
        worker_task = asyncio.create_task(_run_all(workers))
        pending = asyncio.create_task(PendingTimers(client).run())
        watchdog = asyncio.create_task(Watchdog(client, kube, task_queue=settings.bridge.task_queue).run())
        await bridge.start()
        log.info("batchd worker running", extra={
            "temporal": settings.temporal.address, "namespace": settings.temporal.namespace,
            "task_queue": settings.bridge.task_queue, "health_port": health.port,
        })
        stopped = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({worker_task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        log.info("batchd worker stopping")
        await bridge.stop()
        if worker_task not in done:
            await asyncio.gather(*(w.shutdown() for w in workers))
        stopped.cancel()
        pending.cancel()
        watchdog.cancel()
        await worker_task  # re-raises a worker failure after the clean-up above
        await health.stop()
    log.info("batchd worker stopped")


async def _run_all(workers: list[Worker]) -> None:
    """Run the workers together; if one fails, shut the others down and raise its error."""
    tasks = [asyncio.create_task(w.run()) for w in workers]
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    if any(t.exception() for t in done):
        await asyncio.gather(*(w.shutdown() for w in workers if w.is_running), return_exceptions=True)
    await asyncio.gather(*tasks)
