"""kubesim: a Kubernetes API server emulator over real HTTP, with a fake kubelet.

Layer: kubesim (imports nothing from batchd). Used by the test suites (a session fixture
starts one :class:`KubeSim` in a thread), by ``batchd dev`` (embedded with
:meth:`KubeSim.serve_async`) and from the command line (``python -m kubesim``).

    with KubeSim() as sim:
        path = sim.write_kubeconfig(tmp / "kubeconfig")
        ...  # kubectl --kubeconfig path / kubernetes.config.load_kube_config(path)

This is the only module that re-exports names.
"""

from __future__ import annotations

import asyncio
import gc as pygc
import ipaddress
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from kubesim.admission import AdmissionPlugin
from kubesim.gc import GarbageCollector, Lifecycle
from kubesim.kubelet import Kubelet
from kubesim.server import ApiServer, AuditKey, Faults
from kubesim.store import Clock, RealClock, Store

__all__ = ["AuditKey", "Clock", "Faults", "KubeSim", "RealClock", "run_forever"]

T = TypeVar("T")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public")


class KubeSim:
    """One emulated API server: store, garbage collector, kubelet and HTTP listener."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        kubelet: bool = True,
        clock: Clock | None = None,
        watch_window: int = 100_000,  # a relist of 100,000 Pods (200 pages) must not outlast it
        bookmark_interval: float = 1.0,
        kubelet_tick: float = 0.02,
        admission: Sequence[AdmissionPlugin] = (),
        compaction_seconds: float = 300.0,  # kube-apiserver's --etcd-compaction-interval
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"kubesim listens on loopback only, not {host}")
        self.host = host
        self.port = port
        self.clock: Clock = clock or RealClock()
        self.store = Store(watch_window)
        self.lifecycle = Lifecycle(self.store, self.clock)
        self.gc = GarbageCollector(self.store, self.lifecycle)
        self.faults = Faults()
        self.api = ApiServer(self.store, self.lifecycle, self.clock, self.faults, bookmark_interval)
        self.api.admission = tuple(admission)  # none by default, as a cluster without those plugins
        self._kubelet_enabled = kubelet
        self._kubelet_tick = kubelet_tick
        self._compaction_seconds = compaction_seconds
        self.kubelet: Kubelet | None = None
        self._runner: web.ServerRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- asyncio embedding ---------------------------------------------------------------

    async def serve_async(self) -> None:
        """Start serving on the running loop; returns once the socket listens."""
        self._loop = asyncio.get_running_loop()
        self.store.add_listener(self.gc.on_event)
        self._tasks.append(asyncio.create_task(self.gc.run(), name="kubesim-gc"))
        if self._kubelet_enabled:
            self.kubelet = Kubelet(self.store, self.lifecycle, self.clock, self._kubelet_tick)
            self.store.add_listener(self.kubelet.on_event)
            self._tasks.append(asyncio.create_task(self.kubelet.run(), name="kubesim-kubelet"))
        for name in INITIAL_NAMESPACES:
            if self.store.get(("", "namespaces"), "", name) is None:
                self.api.create_object(_NAMESPACE, None, {"metadata": {"name": name}})
        if self._compaction_seconds > 0:
            self._tasks.append(asyncio.create_task(self._compactor(), name="kubesim-compactor"))
        self._runner = web.ServerRunner(self.api.make_server(), shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024, reuse_address=True)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def _compactor(self) -> None:
        """As kube-apiserver's: each interval, compact to the revision the previous one saw."""
        seen = self.store.rv
        while True:
            await asyncio.sleep(self._compaction_seconds)
            self.store.compact(seen)
            seen = self.store.rv

    async def shutdown_async(self) -> None:
        """Close watches, stop the listener and background tasks."""
        self.api.disconnect_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks.clear()

    # -- thread mode ---------------------------------------------------------------------

    def start(self) -> KubeSim:
        """Serve from a background thread with its own loop; returns once listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.serve_async())
            except BaseException as e:  # report startup failures to the caller
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=main, name="kubesim", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop a server started with :meth:`start`."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.shutdown_async(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> KubeSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server loop (store access is loop-confined) and return its result."""
        loop = self._loop
        if loop is None or not loop.is_running():
            return fn()
        try:
            if asyncio.get_running_loop() is loop:
                return fn()
        except RuntimeError:
            pass

        async def wrapper() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), loop).result(timeout=10)

    # -- controls ------------------------------------------------------------------------

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig (cluster, context and user ``kubesim``) for this server."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "apiVersion: v1\n"
            "kind: Config\n"
            "clusters:\n"
            "- name: kubesim\n"
            "  cluster:\n"
            f"    server: {self.url}\n"
            "contexts:\n"
            "- name: kubesim\n"
            "  context:\n"
            "    cluster: kubesim\n"
            "    user: kubesim\n"
            "    namespace: default\n"
            "current-context: kubesim\n"
            "users:\n"
            "- name: kubesim\n"
            "  user: {}\n"
            "preferences: {}\n"
        )
        return path

    def disconnect_watches(self) -> int:
        """Force-close every open watch stream; returns how many were closed."""
        return self._call(self.api.disconnect_watches)

    def audit(self, reset: bool = False) -> dict[AuditKey, int]:
        """Request counts by (verb, group, resource, subresource), in RBAC terms."""

        def read() -> dict[AuditKey, int]:
            counts = dict(self.api.audit)
            if reset:
                self.api.audit.clear()
                self.api.faulted.clear()
            return counts

        return self._call(read)

    def faulted(self) -> dict[AuditKey, int]:
        """The audited requests answered with an injected fault (:attr:`faults`), by the same key."""
        return self._call(lambda: dict(self.api.faulted))

    def objects(self, group: str, plural: str) -> list[dict[str, Any]]:
        """A snapshot of the stored objects of one kind (for assertions in tests)."""
        return self._call(lambda: list(self.store.iter((group, plural))))


from kubesim.resources import BY_GR as _BY_GR  # noqa: E402

_NAMESPACE = _BY_GR[("", "namespaces")]


def run_forever(host: str = "127.0.0.1", port: int = 0, kubeconfig_out: str | Path | None = None,
                kubelet: bool = True) -> None:
    """Blocking CLI entry: serve until SIGINT or SIGTERM, then stop cleanly."""

    async def main() -> None:
        # A server process holds many long-lived JSON dicts: collect garbage less often
        # (the default gen-0 threshold of 700 allocations costs a third of a request).
        pygc.set_threshold(50_000, 20, 20)
        sim = KubeSim(host=host, port=port, kubelet=kubelet)
        await sim.serve_async()
        if kubeconfig_out:
            sim.write_kubeconfig(kubeconfig_out)
        print(f"kubesim listening on {sim.url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await sim.shutdown_async()

    asyncio.run(main())
    sys.stdout.flush()
