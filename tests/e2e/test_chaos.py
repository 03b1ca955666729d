"""Tier 4: two ``batchd worker`` replicas on one task queue under chaos, as a Deployment of two
would live: one replica or the other SIGKILLed every 10–20 s for two minutes (the other always
up) and the dev server restarted once on its SQLite file; on kubesim, 5 % of API requests are
answered 500/429/503 and watches are cut at every kill; on upstream's control plane, kube-apiserver
is killed and started again a third of the way in, and etcd two thirds of the way. What must hold
afterwards, read from kubesim's own store and audit, or from a watch and kube-apiserver's audit log:

- every TTL Job deleted, none before its expiry, with one DELETE each beyond the faulted ones;
- one Job per CronJob for every schedule minute, none twice (the CronJobs ask for catch-up,
  CJ-CATCH-UP: with a replica killed every 10–20 s on 2 cores, a CronJob's workflow task can wait
  across two schedule minutes, and upstream's rule would then run only the later one);
- every Indexed Job Complete with exact counts, one Pod created per completion (a creation
  retried after a SIGKILL meets its own Pod, by name, instead of making a second one), and no
  Pod left holding the tracking finalizer.
"""

from __future__ import annotations

import asyncio
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kube.client import Kube
from kube.config import load_access
from kubesim import KubeSim
from kubesim.server import AuditKey
from kubesim.store import WatchEvent
from tests.conftest import backends, eventually, identities, new_namespace, utcnow
from tests.e2e.forked import Forked
from tests.e2e.test_worker_process import http_get, lease_args
from tests.integration.test_cronjob import cronjob_manifest
from tests.integration.test_job import job_manifest
from tests.k8s import create_job, finish_job, second
from worker.cluster import ControlPlane, audited_deletes
from worker.dev import free_port, start_dev_server
from workflows.models.cronjob import SCHEDULED_TIMESTAMP_ANNOTATION
from workflows.models.job import JOB_TRACKING_FINALIZER

TTL_JOBS, CRONJOBS, INDEXED = 120, 10, 3
COMPLETIONS = 30
CHAOS = timedelta(minutes=2)


class Replicas:
    """Two worker processes on the same task queue; either may be killed and is started again."""

    def __init__(self, args: list[str], logs: Path) -> None:
        self.args, self.logs = args, logs
        self.ports = [free_port(), free_port()]
        self.procs: list[Forked | None] = [None, None]
        self.log_paths: list[Path | None] = [None, None]
        self.starts = 0

    def start(self, i: int) -> None:
        self.starts += 1
        self.log_paths[i] = self.logs / f"replica{i}-{self.starts}.log"
        self.procs[i] = Forked([*self.args, "--health-port", str(self.ports[i])], self.log_paths[i])

    async def ready(self, i: int, timeout: float = 180) -> None:
        """Until replica ``i`` says ready; a failure carries the end of its log (CI keeps no files).

        Its port was picked free when the test began and may be taken since by another process (an
        outgoing connection's, from the same range): a replica that exits because it cannot bind
        it starts again on another."""
        deadline = time.monotonic() + timeout
        while (answer := http_get(self.ports[i], "/readyz"))[0] != 200:
            proc = self.procs[i]
            if proc is not None and proc.poll() is not None and "address already in use" in self._tail(i):
                self.ports[i] = free_port()
                self.start(i)
            elif time.monotonic() > deadline:
                raise AssertionError(f"replica {i} on :{self.ports[i]} not ready within {timeout:.0f} s; last answer: "
                                     f"{answer[0]} {answer[1].strip()!r}\n--- the end of its log:\n{self._tail(i)}")
            await asyncio.sleep(0.2)

    def _tail(self, i: int) -> str:
        """The last lines of replica ``i``'s log, once it has one."""
        log = self.log_paths[i]
        if log is None or not log.exists():
            return ""
        return "".join(log.read_text(errors="replace").splitlines(keepends=True)[-40:])

    async def kill(self, i: int) -> None:
        """SIGKILL replica ``i`` once the other one is ready, and start it again at once."""
        await self.ready(1 - i)
        proc = self.procs[i]
        assert proc is not None and proc.poll() is None, f"replica {i} exited by itself; see {self.logs}"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.start(i)

    def stop(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


class SimWorld:
    """kubesim: 5 % of requests faulted, watches cut at every kill; its store and audit are the record."""

    def __init__(self, tmp_path: Path) -> None:
        self.sim = KubeSim(port=free_port()).start()
        self.kubeconfig = self.worker_kubeconfig = Path(self.sim.write_kubeconfig(tmp_path / "kubeconfig"))
        self.kube = Kube(load_access(self.kubeconfig))
        self.deleted_at: dict[str, datetime] = {}  # Job name -> first deletionTimestamp or removal
        self.pods_by_owner: dict[str, set[str]] = defaultdict(set)  # Job uid -> Pod uids ever created
        self.sim.store.add_listener(self._on)

    def _on(self, event: WatchEvent) -> None:
        meta = event.obj["metadata"]
        if event.key == ("batch", "jobs") and (event.type == "DELETED" or meta.get("deletionTimestamp")):
            self.deleted_at.setdefault(meta["name"], self.sim.clock.now())
        elif event.key == ("", "pods") and event.type == "ADDED":
            if owner := _owner(event.obj):
                self.pods_by_owner[owner].add(meta["uid"])

    def begin(self) -> None:
        self.sim.faults.set(error_rate=0.05, codes=(500, 429, 503), retry_after_seconds=1)

    async def disrupt(self, share: float) -> None:
        self.sim.disconnect_watches()

    def end(self) -> None:
        self.sim.faults.clear()

    def objects(self, kind: str, ns: str) -> list[dict[str, Any]]:
        key = {"Job": ("batch", "jobs"), "Pod": ("", "pods")}[kind]
        return [o for o in self.sim.objects(*key) if o["metadata"]["namespace"] == ns]

    #: DELETEs done but missing from the record: none here (kubesim records each before it answers)
    unrecorded = 0

    def deletes(self, resource: str, ns: str) -> int:
        """DELETE requests that were not answered with an injected fault."""
        key = AuditKey("delete", "batch" if resource == "jobs" else "", resource, "")
        return self.sim.audit().get(key, 0) - self.sim.faulted().get(key, 0)

    def summary(self) -> str:
        return f"{sum(self.sim.faulted().values())} faulted requests of {sum(self.sim.audit().values())}"

    def close(self) -> None:
        self.sim.faults.clear()
        self.sim.stop()


class PlaneWorld:
    """Upstream's control plane: kube-apiserver restarted at a third of the chaos and etcd at two
    thirds (SIGKILL, same ports); a watch of the API and the API server's audit log are the record."""

    def __init__(self, tmp_path: Path) -> None:
        self.plane = ControlPlane(tmp_path / "plane")
        self.plane.start()
        self.kubeconfig, self.worker_kubeconfig = self.plane.kubeconfig, self.plane.batchd_kubeconfig
        self.kube = identities(self.kubeconfig, self.worker_kubeconfig, on_cluster=True)
        self.deleted_at: dict[str, datetime] = {}
        self.pods_by_owner: dict[str, set[str]] = defaultdict(set)
        self.restarted: list[str] = []
        self._jobs_seen: set[str] = set()
        self._stop = threading.Event()
        self._watchers: list[threading.Thread] = []

    def record(self, ns: str) -> None:
        for kind in ("Job", "Pod"):
            thread = threading.Thread(target=self._watch, args=(kind, ns), daemon=True)
            thread.start()
            self._watchers.append(thread)

    def _watch(self, kind: str, ns: str) -> None:
        """List, then watch; after a broken watch (the API server restarted) list again, and take a
        Job gone meanwhile as deleted when it was first missed (never earlier than it was)."""
        kube = Kube(load_access(self.kubeconfig))
        while not self._stop.is_set():
            try:
                listed = kube.list(kind, ns)
                names = set()
                for obj in listed["items"]:
                    names.add(obj["metadata"]["name"])
                    self._seen(kind, "ADDED", obj)
                if kind == "Job":
                    for name in self._jobs_seen - names:
                        self.deleted_at.setdefault(name, datetime.now(UTC))
                for event in kube.watch(kind, ns, resource_version=listed["metadata"]["resourceVersion"],
                                        timeout_seconds=30):
                    if self._stop.is_set() or event.get("type") == "ERROR":
                        break
                    self._seen(kind, event["type"], event["object"])
            except Exception:  # noqa: BLE001 - the API server or etcd is restarting: list again
                time.sleep(0.5)

    def _seen(self, kind: str, etype: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if kind == "Job":
            self._jobs_seen.add(meta["name"])
            if etype == "DELETED" or meta.get("deletionTimestamp"):
                self.deleted_at.setdefault(meta["name"], datetime.now(UTC))
        elif owner := _owner(obj):
            self.pods_by_owner[owner].add(meta["uid"])

    def begin(self) -> None:
        pass

    async def disrupt(self, share: float) -> None:
        for component, at in (("kube-apiserver", 1 / 3), ("etcd", 2 / 3)):
            if share >= at and component not in self.restarted:
                await asyncio.to_thread(self.plane.restart, component)
                self.restarted.append(component)
                return

    def end(self) -> None:
        assert self.restarted == ["kube-apiserver", "etcd"], self.restarted

    def objects(self, kind: str, ns: str) -> list[dict[str, Any]]:
        return list(self.kube.list(kind, ns)["items"])

    @property
    def unrecorded(self) -> int:
        """DELETEs done but missing from the audit log: kube-apiserver writes a request's entry once
        it has answered, so one SIGKILLed in between has deleted in etcd and logged nothing."""
        return self.restarted.count("kube-apiserver")

    def deletes(self, resource: str, ns: str) -> int:
        """Successful DELETEs by batchd's ServiceAccount, from the API server's audit log."""
        return audited_deletes(self.plane.dir, resource, ns, "system:serviceaccount:batchd-system:batchd")

    def summary(self) -> str:
        return f"restarted {', '.join(self.restarted)}"

    def close(self) -> None:
        self._stop.set()
        self.plane.stop()


@contextmanager
def chaos_world(kind: str, tmp_path: Path) -> Iterator[SimWorld | PlaneWorld]:
    world = SimWorld(tmp_path) if kind == "kubesim" else PlaneWorld(tmp_path)
    try:
        yield world
    finally:
        world.close()


@pytest.mark.slow
@pytest.mark.timeout(1500)  # two minutes of chaos, and the settling after it, by design
@pytest.mark.parametrize("kind", ["kubesim", "cluster"])
async def test_two_replicas_under_chaos_lose_nothing_and_do_everything_once(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if kind not in backends(request.config):
        pytest.skip(f"--backends without {kind}")
    rng = random.Random(2026)
    temporal_port, ui_port = free_port(), free_port()
    server = await start_dev_server(tmp_path, temporal_port, ui_port)
    replicas: Replicas | None = None
    try:
        with chaos_world(kind, tmp_path) as world:
            kube = world.kube
            ns = new_namespace(kube)
            if isinstance(world, PlaneWorld):
                world.record(ns)
            replicas = Replicas(["worker", "--temporal-address", f"127.0.0.1:{temporal_port}",
                                 "--kubeconfig", str(world.worker_kubeconfig), "--namespaces", ns,
                                 "--task-queue", "chaos", "--resync-seconds", "30", "--ttl-scope", "all",
                                 "--cronjob-selector", "", *lease_args(ns)], tmp_path)
            replicas.start(0)
            replicas.start(1)
            await replicas.ready(0)
            await replicas.ready(1)

            cronjobs = {f"every-minute-{i}": kube.create("CronJob", ns, cronjob_manifest(
                f"every-minute-{i}", "* * * * *", annotations={"batchd.io/catch-up": "all"})) for i in range(CRONJOBS)}
            indexed = {f"indexed-{i}": kube.create("Job", ns, job_manifest(
                f"indexed-{i}", completions=COMPLETIONS, parallelism=3, indexed=True, run_seconds=4))
                for i in range(INDEXED)}
            # expiries spread over 20..110 s after finishing: they fall inside the chaos
            ttls = {f"ttl-{i:03d}": 20 + (i * 7) % 91 for i in range(TTL_JOBS)}
            for name, ttl in ttls.items():
                create_job(kube, ns, name, ttl=ttl)
            finished = second(utcnow())
            for name in ttls:
                finish_job(kube, ns, name, finished)

            world.begin()
            chaos_start = utcnow()
            chaos_end = chaos_start + CHAOS
            restarted_server = False
            kills = 0
            while utcnow() < chaos_end:
                await asyncio.sleep(rng.uniform(10, 20))
                await world.disrupt((utcnow() - chaos_start) / CHAOS)
                await replicas.kill(rng.randrange(2))
                kills += 1
                if not restarted_server and utcnow() > chaos_end - CHAOS / 2:
                    server.terminate()
                    await server.wait()
                    server = await start_dev_server(tmp_path, temporal_port, ui_port)
                    restarted_server = True
            chaos_end = utcnow()
            world.end()
            assert restarted_server and kills >= 5

            # -- settling: both replicas up, no faults --------------------------------------
            def jobs() -> dict[str, dict[str, Any]]:
                return {j["metadata"]["name"]: j for j in world.objects("Job", ns)}

            # Every property is checked, and every one that fails is reported together.
            problems: list[str] = []

            async def settle(check: Callable[[], Any], timeout: float, what: str, detail: Callable[[], Any]) -> None:
                try:
                    await eventually(check, timeout=timeout, what=what)
                except AssertionError as err:
                    problems.append(f"{err}: {detail()}")

            await settle(lambda: not set(ttls) & set(jobs()), 300, "every TTL Job deleted",
                         lambda: sorted(set(ttls) & set(jobs())))
            await settle(lambda: all(_finished(jobs().get(n)) for n in indexed), 300, "every Indexed Job finished",
                         lambda: {n: (jobs().get(n) or {}).get("status") for n in indexed})
            minutes = {name: range(_epoch_minute(cj["metadata"]["creationTimestamp"]) + 1,
                                   int(chaos_end.timestamp()) // 60 + 1)
                       for name, cj in cronjobs.items()}
            expected = {f"{name}-{m}" for name, ms in minutes.items() for m in ms}
            await settle(lambda: expected <= set(jobs()), 150, "a Job for every schedule minute of every CronJob",
                         lambda: f"missing {sorted(expected - set(jobs()))}")

            # TTL: none early, one DELETE each
            early = {n: t for n, t in world.deleted_at.items()
                     if n in ttls and t < finished + timedelta(seconds=ttls[n])}
            if early:
                problems.append(f"deleted before their expiry: {early}")
            deletes, done = world.deletes("jobs", ns), TTL_JOBS - len(set(ttls) & set(jobs()))
            if not done - world.unrecorded <= deletes <= done:
                problems.append(f"{deletes} DELETE requests (not faulted) for {done} TTL Jobs deleted")

            # CronJobs: never two Jobs for one schedule time, each named for its time
            everything = jobs()
            for name in cronjobs:
                made = [j for j in everything.values() if _owner(j) == cronjobs[name]["metadata"]["uid"]]
                stamps = [j["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION] for j in made]
                if len(stamps) != len(set(stamps)):
                    problems.append(f"{name}: two Jobs for one schedule time: {sorted(stamps)}")
                misnamed = [j["metadata"]["name"] for j in made if j["metadata"]["name"] !=
                            f"{name}-{_epoch_minute(j['metadata']['annotations'][SCHEDULED_TIMESTAMP_ANNOTATION])}"]
                if misnamed:
                    problems.append(f"{name}: Jobs not named for their schedule time: {misnamed}")

            # Indexed Jobs: exact counts, one Pod per completion, no finalizer left
            for name, job in indexed.items():
                st = (everything.get(name) or {}).get("status") or {}
                counts = (_finished(everything.get(name)), st.get("succeeded"), st.get("failed", 0),
                          st.get("completedIndexes"))
                if counts != ("Complete", COMPLETIONS, 0, f"0-{COMPLETIONS - 1}"):
                    problems.append(f"{name}: {counts}")
                created = len(world.pods_by_owner[job["metadata"]["uid"]])
                if created != COMPLETIONS:
                    problems.append(f"{name}: {created} Pods created for {COMPLETIONS} completions")
            holding = [p["metadata"]["name"] for p in world.objects("Pod", ns)
                       if JOB_TRACKING_FINALIZER in p["metadata"].get("finalizers", [])]
            if holding:
                problems.append(f"Pods still holding the tracking finalizer: {holding}")
            if pod_deletes := world.deletes("pods", ns):
                problems.append(f"{pod_deletes} Pod DELETE requests where none was needed")
            print(f"chaos on {kind}: {kills} kills, {replicas.starts} replica starts, {world.summary()}")
            assert not problems, "\n".join(problems)
    finally:
        if replicas is not None:
            replicas.stop()
        if server.returncode is None:
            server.terminate()
            await server.wait()


def _epoch_minute(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC).timestamp()) // 60


def _owner(job: dict[str, Any]) -> str | None:
    return next((o["uid"] for o in job["metadata"].get("ownerReferences") or [] if o.get("controller")), None)


def _finished(job: dict[str, Any] | None) -> str | None:
    return next((c["type"] for c in ((job or {}).get("status") or {}).get("conditions") or []
                 if c["type"] in ("Complete", "Failed") and c["status"] == "True"), None)

