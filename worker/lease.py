"""Leader election on a Kubernetes Lease: every replica works, one replica's bridge sends.

Layer: worker. Started by worker/app.py when ``--leader-elect`` is on (the default). Every
replica polls the task queues and keeps its informers' cache (the CronJob activities read it);
only the replica holding the Lease routes changes to workflows, so N replicas send each needed
start and signal once instead of N times (WATCH-4, docs/design.md).

The rules are kube-controller-manager's, with its flag names and defaults: a candidate takes the
Lease when its holder has not renewed it for ``lease_duration``, as measured on the candidate's
own clock from when it last saw the Lease change (so clock skew between replicas does not
matter); the holder renews every ``retry_period`` and stops leading when it could not renew for
``renew_deadline``, which is shorter than the duration, so it stops before anyone else may start.
A replica that shuts down gracefully gives the Lease up, and the next one takes it at once.
A replica that dies holding it is replaced within ``lease_duration``; nothing is lost meanwhile,
because the new leader routes everything its cache holds as it starts leading.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kube.client import Clock, Kube, SystemClock
from kube.errors import AlreadyExists, Conflict, KubeError
from workflows.times import micro_time

log = logging.getLogger("batchd.lease")


@dataclass(frozen=True)
class LeaseSettings:
    """``--leader-elect-*``: where the Lease lives and how long a hold lasts (seconds)."""

    namespace: str = "default"
    name: str = "batchd"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""  # empty: hostname_uuid, unique to this process

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("leader election needs 0 < retry period < renew deadline < lease duration, got "
                             f"{self.retry_period} < {self.renew_deadline} < {self.lease_duration}")


class Elector:
    """Acquires and renews one Lease; calls ``on_start`` when it starts leading and ``on_stop`` when it stops."""

    def __init__(self, kube: Kube, settings: LeaseSettings, *, clock: Clock | None = None) -> None:
        self.kube, self.settings = kube, settings
        self.clock = clock or SystemClock()
        self.identity = settings.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.leading = False
        self._observed: dict[str, Any] | None = None  # the Lease's spec as last read
        self._observed_at = 0.0  # monotonic time it last changed
        self._held: dict[str, Any] | None = None  # the Lease as this replica last wrote it, while it holds it

    async def run(self, on_start: Callable[[], None], on_stop: Callable[[], None]) -> None:
        """Campaign until cancelled; on cancellation, give the Lease up if held.

        The callbacks must return at once (start longer work as a task): renewing cannot wait.
        """
        s = self.settings
        renewed = 0.0
        try:
            while True:
                try:
                    held = await asyncio.to_thread(self._try_acquire_or_renew)
                except KubeError as err:
                    log.warning("could not read or write Lease %s/%s: %s", s.namespace, s.name, err)
                    held = False
                except Exception:  # a bug must not end the campaign with this replica leading forever
                    log.exception("leader election on Lease %s/%s failed", s.namespace, s.name)
                    held = False
                now = time.monotonic()
                if held:
                    renewed = now
                    if not self.leading:
                        self.leading = True
                        log.info("leading: this replica (%s) holds Lease %s/%s and routes changes",
                                 self.identity, s.namespace, s.name)
                        on_start()
                elif self.leading and now - renewed >= s.renew_deadline:
                    self.leading = False
                    log.warning("stopped leading: Lease %s/%s not renewed for %.0fs", s.namespace, s.name,
                                now - renewed)
                    on_stop()
                await asyncio.sleep(s.retry_period)
        finally:
            if self.leading:
                self.leading = False
                on_stop()
                await asyncio.to_thread(self._release)

    def _try_acquire_or_renew(self) -> bool:
        """One round: renew the Lease if held, else take it if free or expired.

        A holder renews with one write of the Lease as it last wrote it (its resourceVersion makes
        the write fail if anyone else wrote since), as client-go's elector does: one request per
        round instead of a read and a write. Only when that fails does it read the Lease again.
        """
        s = self.settings
        now = micro_time(self.clock.now())
        if self._held is not None and time.monotonic() - self._observed_at < s.lease_duration:
            held = self._held
            try:
                return self._write({**held, "spec": {**held["spec"], "renewTime": now}})
            except KubeError as err:
                log.info("could not renew Lease %s/%s as last written (%s): reading it", s.namespace, s.name, err)
        self._held = None
        lease = self.kube.get("Lease", s.namespace, s.name)
        if lease is None:
            try:
                self._held = self.kube.create("Lease", s.namespace, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": s.name, "namespace": s.namespace},
                    "spec": self._spec(acquire=now, renew=now, transitions=0)})
            except AlreadyExists:
                return False
            self._observed, self._observed_at = self._held.get("spec") or {}, time.monotonic()
            return True
        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._observed, self._observed_at = spec, time.monotonic()
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and time.monotonic() - self._observed_at < s.lease_duration:
            return False
        mine = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        lease["spec"] = self._spec(acquire=spec.get("acquireTime") if mine else now, renew=now,
                                   transitions=transitions)
        try:
            return self._write(lease)
        except Conflict:  # another replica wrote it first
            return False

    def _write(self, lease: dict[str, Any]) -> bool:
        s = self.settings
        self._held = self.kube.replace("Lease", s.namespace, s.name, lease)
        self._observed, self._observed_at = self._held.get("spec") or {}, time.monotonic()
        return True

    def _spec(self, *, acquire: str | None, renew: str, transitions: int) -> dict[str, Any]:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.settings.lease_duration)),
                "acquireTime": acquire, "renewTime": renew, "leaseTransitions": transitions}

    def _release(self) -> None:
        """Give the Lease up (an empty holder), so the next replica need not wait out the duration."""
        s = self.settings
        self._held = None
        try:
            lease = self.kube.get("Lease", s.namespace, s.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"] = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1,
                             "renewTime": micro_time(self.clock.now())}
            self.kube.replace("Lease", s.namespace, s.name, lease)
            log.info("gave up Lease %s/%s", s.namespace, s.name)
        except KubeError as err:
            log.warning("could not give up Lease %s/%s (the next replica waits it out): %s", s.namespace, s.name, err)
