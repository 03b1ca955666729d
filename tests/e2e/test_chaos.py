"""Tier 4: two ``batchd worker`` replicas on one task queue under chaos, as a Deployment of two
would live: 5 % of API requests answered 500/429/503, watches cut, one replica or the other
SIGKILLed every 10–20 s for three minutes (the other always up), and the dev server restarted
once on its SQLite file. What must hold afterwards, read from kubesim's own store and audit:

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
from tests.conftest import eventually, new_namespace, utcnow
from tests.e2e.forked import Forked
from tests.e2e.test_worker_process import lease_args, ready
from tests.integration.test_cronjob import cronjob_manifest
from tests.integration.test_job import job_manifest
from tests.k8s import create_job, finish_job, second
from worker.dev import free_port, start_dev_server
from workflows.models.cronjob import SCHEDULED_TIMESTAMP_ANNOTATION
from workflows.models.job import JOB_TRACKING_FINALIZER

TTL_JOBS, CRONJOBS, INDEXED = 200, 10, 3
COMPLETIONS = 30
CHAOS = timedelta(minutes=3)


class Ledger:
    """What kubesim's store saw, recorded in its own thread as each change is stored."""

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self.deleted_at: dict[str, datetime] = {}  # Job name -> first deletionTimestamp or removal
        self.pods_by_owner: dict[str, set[str]] = defaultdict(set)  # Job uid -> Pod uids ever created
        sim.store.add_listener(self._on)

    def _on(self, event: WatchEvent) -> None:
        meta = event.obj["metadata"]
        if event.key == ("batch", "jobs") and (event.type == "DELETED" or meta.get("deletionTimestamp")):
            self.deleted_at.setdefault(meta["name"], self.sim.clock.now())
        elif event.key == ("", "pods") and event.type == "ADDED":
            owner = next((o["uid"] for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
            if owner:
                self.pods_by_owner[owner].add(meta["uid"])


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

    async def ready(self, i: int) -> None:
        """Until replica ``i`` says ready; a failure carries the end of its log (CI keeps no files)."""
        try:
            await ready(self.ports[i])
        except AssertionError as err:
            log = self.log_paths[i]
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-40:]) if log else ""
            raise AssertionError(f"{err}\n--- the end of replica {i}'s log:\n{tail}") from None

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


@contextmanager
def chaos_world(tmp_path: Path) -> Iterator[tuple[KubeSim, Kube, Ledger]]:
    sim = KubeSim(port=free_port()).start()
    try:
        kube = Kube(load_access(sim.write_kubeconfig(tmp_path / "kubeconfig")))
        yield sim, kube, Ledger(sim)
    finally:
        sim.faults.clear()
        sim.stop()


@pytest.mark.slow
@pytest.mark.timeout(1500)  # three minutes of chaos, and the settling after it, by design
async def test_two_replicas_under_chaos_lose_nothing_and_do_everything_once(tmp_path: Path) -> None:
    rng = random.Random(2026)
    temporal_port, ui_port = free_port(), free_port()
    server = await start_dev_server(tmp_path, temporal_port, ui_port)
    replicas: Replicas | None = None
    try:
        with chaos_world(tmp_path) as (sim, kube, ledger):
            ns = new_namespace(kube)
            replicas = Replicas(["worker", "--temporal-address", f"127.0.0.1:{temporal_port}",
                                 "--kubeconfig", str(tmp_path / "kubeconfig"), "--namespaces", ns,
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
            # expiries spread over 30..170 s after finishing: they fall inside the chaos
            ttls = {f"ttl-{i:03d}": 30 + (i * 7) % 141 for i in range(TTL_JOBS)}
            for name, ttl in ttls.items():
                create_job(kube, ns, name, ttl=ttl)
            finished = second(utcnow())
            for name in ttls:
                finish_job(kube, ns, name, finished)

            sim.faults.set(error_rate=0.05, codes=(500, 429, 503), retry_after_seconds=1)
            chaos_end = utcnow() + CHAOS
            restarted_server = False
            kills = 0
            while utcnow() < chaos_end:
                await asyncio.sleep(rng.uniform(10, 20))
                sim.disconnect_watches()
                await replicas.kill(rng.randrange(2))
                kills += 1
                if not restarted_server and utcnow() > chaos_end - CHAOS / 2:
                    server.terminate()
                    await server.wait()
                    server = await start_dev_server(tmp_path, temporal_port, ui_port)
                    restarted_server = True
            chaos_end = utcnow()
            sim.faults.clear()
            assert restarted_server and kills >= 8

            # -- settling: both replicas up, no faults --------------------------------------
            def jobs() -> dict[str, dict[str, Any]]:
                return {j["metadata"]["name"]: j for j in sim.objects("batch", "jobs")
                        if j["metadata"]["namespace"] == ns}

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
            early = {n: t for n, t in ledger.deleted_at.items()
                     if n in ttls and t < finished + timedelta(seconds=ttls[n])}
            if early:
                problems.append(f"deleted before their expiry: {early}")
            deletes = _unfaulted(sim, "delete", "batch", "jobs")
            if deletes != TTL_JOBS - len(set(ttls) & set(jobs())):
                problems.append(f"{deletes} DELETE requests (not faulted) for {TTL_JOBS} TTL Jobs")

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
                created = len(ledger.pods_by_owner[job["metadata"]["uid"]])
                if created != COMPLETIONS:
                    problems.append(f"{name}: {created} Pods created for {COMPLETIONS} completions")
            holding = [p["metadata"]["name"] for p in sim.objects("", "pods")
                       if JOB_TRACKING_FINALIZER in p["metadata"].get("finalizers", [])]
            if holding:
                problems.append(f"Pods still holding the tracking finalizer: {holding}")
            if pod_deletes := _unfaulted(sim, "delete", "", "pods"):
                problems.append(f"{pod_deletes} Pod DELETE requests where none was needed")
            print(f"chaos: {kills} kills, {replicas.starts} replica starts, "
                  f"{sum(sim.faulted().values())} faulted requests of {sum(sim.audit().values())}")
            assert not problems, "\n".join(problems)
    finally:
        if replicas is not None:
            replicas.stop()
        if server.returncode is None:
            server.terminate()
            await server.wait()


def _unfaulted(sim: KubeSim, verb: str, group: str, resource: str) -> int:
    key = AuditKey(verb, group, resource, "")
    return sim.audit().get(key, 0) - sim.faulted().get(key, 0)


def _epoch_minute(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC).timestamp()) // 60


def _owner(job: dict[str, Any]) -> str | None:
    return next((o["uid"] for o in job["metadata"].get("ownerReferences") or [] if o.get("controller")), None)


def _finished(job: dict[str, Any] | None) -> str | None:
    return next((c["type"] for c in ((job or {}).get("status") or {}).get("conditions") or []
                 if c["type"] in ("Complete", "Failed") and c["status"] == "True"), None)

