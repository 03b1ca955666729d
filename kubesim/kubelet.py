"""The fake kubelet: binds new Pods to ``kubesim-node`` and plays their lifecycle.

Layer: kubesim (imports nothing from batchd). A store listener plus one task on the server's
event loop, started by :class:`kubesim.KubeSim` unless ``kubelet=False``. It writes Pod status
straight to the store (as the real kubelet's status manager does through ``pods/status``), so
every transition is an ordinary MODIFIED watch event.

Per-Pod behaviour comes from annotations:
``kubesim.batchd.io/run-seconds`` (float, default 1): how long each container run lasts;
``kubesim.batchd.io/exit-code`` (int, default 0): how each run ends;
``kubesim.batchd.io/terminate-seconds`` (float): how long a deleted Pod takes to stop
(default: its grace period; shorter than the grace period means it exited on SIGTERM, 143).

All timing reads the injected clock; the loop polls it every ``tick`` seconds so a fake clock
advanced by a test is honoured promptly.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from datetime import datetime, timedelta
from typing import Any

from kubesim import resources
from kubesim.codec import clone
from kubesim.gc import PODS, Lifecycle
from kubesim.store import Clock, Obj, Store, WatchEvent, timestamp

log = logging.getLogger(__name__)

NODE_NAME = "kubesim-node"
HOST_IP = "10.0.0.10"
RUN_SECONDS = "kubesim.batchd.io/run-seconds"
EXIT_CODE = "kubesim.batchd.io/exit-code"
TERMINATE_SECONDS = "kubesim.batchd.io/terminate-seconds"


def _annotation(pod: Obj, key: str, default: float | None, kind: type = float) -> Any:
    raw = (pod["metadata"].get("annotations") or {}).get(key)
    if raw is None:
        return default
    try:
        return kind(raw)
    except (TypeError, ValueError):
        return default


def _condition(ctype: str, status: bool, ts: str, reason: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": ctype, "status": "True" if status else "False",
                            "lastProbeTime": None, "lastTransitionTime": ts}
    if reason:
        cond["reason"] = reason
    return cond


class Kubelet:
    """Plays Pods Pending → Running → Succeeded/Failed and graceful termination."""

    def __init__(self, store: Store, lifecycle: Lifecycle, clock: Clock, tick: float = 0.02) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self.clock = clock
        self.tick = tick
        self._queue: list[tuple[datetime, int, str, str]] = []  # (when, seq, action, uid)
        self._seq = itertools.count()
        self._terminating: set[str] = set()
        self._ips = itertools.count(2)
        self._wake = asyncio.Event()

    def on_event(self, event: WatchEvent) -> None:
        """Store listener: react to new Pods and to Pods that started graceful deletion."""
        if event.key != PODS:
            return
        meta = event.obj["metadata"]
        uid = meta["uid"]
        if event.type == "ADDED":
            self._schedule(self.clock.now(), "bind", uid)
        elif event.type == "DELETED":
            self._terminating.discard(uid)
        elif meta.get("deletionTimestamp") and uid not in self._terminating:
            grace = int(meta.get("deletionGracePeriodSeconds") or 0)
            if grace <= 0 and not (event.obj.get("spec") or {}).get("nodeName"):
                return
            self._terminating.add(uid)
            seconds = _annotation(event.obj, TERMINATE_SECONDS, None)
            wait = float(grace) if seconds is None else min(float(seconds), float(grace))
            self._schedule(self.clock.now() + timedelta(seconds=wait), "terminate", uid)

    def _schedule(self, when: datetime, action: str, uid: str) -> None:
        heapq.heappush(self._queue, (when, next(self._seq), action, uid))
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock.now()
            while self._queue and self._queue[0][0] <= now:
                _, _, action, uid = heapq.heappop(self._queue)
                try:
                    self._act(action, uid, now)
                except Exception:
                    log.exception("kubelet %s failed for pod %s", action, uid)
            try:
                await asyncio.wait_for(self._wake.wait(), self.tick if self._queue else None)
            except TimeoutError:
                pass

    def _act(self, action: str, uid: str, now: datetime) -> None:
        found = self.store.get_by_uid(uid)
        if found is None or found[0] != PODS:
            return
        pod = found[1]
        if action == "terminate":
            self._terminate(pod, now)
            return
        if pod["metadata"].get("deletionTimestamp"):
            return  # termination owns it now
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return
        if action == "bind":
            self._bind(pod, now)
        elif action == "start":
            self._start(pod, now)
        elif action == "finish":
            self._finish(pod, now)

    def _containers(self, pod: Obj) -> list[dict[str, Any]]:
        return list((pod.get("spec") or {}).get("containers") or [])

    def _bind(self, pod: Obj, now: datetime) -> None:
        ts = timestamp(now)
        new = clone(pod)
        new.setdefault("spec", {})["nodeName"] = NODE_NAME
        status = new.setdefault("status", {})
        status["phase"] = "Pending"
        status["hostIP"] = HOST_IP
        status["hostIPs"] = [{"ip": HOST_IP}]
        status["conditions"] = [
            _condition("PodReadyToStartContainers", False, ts),
            _condition("Initialized", True, ts),
            _condition("Ready", False, ts, "ContainersNotReady"),
            _condition("ContainersReady", False, ts, "ContainersNotReady"),
            _condition("PodScheduled", True, ts),
        ]
        status["containerStatuses"] = [
            {"name": c.get("name", ""), "image": c.get("image", ""), "imageID": "", "ready": False,
             "restartCount": 0, "started": False,
             "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}}
            for c in self._containers(pod)
        ]
        status.setdefault("qosClass", "BestEffort")
        self.store.replace(PODS, new)
        self._schedule(now, "start", pod["metadata"]["uid"])

    def _start(self, pod: Obj, now: datetime) -> None:
        ts = timestamp(now)
        new = clone(pod)
        status = new.setdefault("status", {})
        status["phase"] = "Running"
        status["startTime"] = ts
        ip = next(self._ips)
        status["podIP"] = f"10.244.{ip // 250 % 250}.{ip % 250 + 2}"
        status["podIPs"] = [{"ip": status["podIP"]}]
        status["conditions"] = [
            _condition("PodReadyToStartContainers", True, ts),
            _condition("Initialized", True, ts),
            _condition("Ready", True, ts),
            _condition("ContainersReady", True, ts),
            _condition("PodScheduled", True, ts),
        ]
        init = (pod.get("spec") or {}).get("initContainers") or []
        if init:
            status["initContainerStatuses"] = [
                {"name": c.get("name", ""), "image": c.get("image", ""), "imageID": "", "ready": True,
                 "restartCount": 0, "started": False, "lastState": {},
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts, "finishedAt": ts}}}
                for c in init
            ]
        status["containerStatuses"] = [
            {"name": c.get("name", ""), "image": c.get("image", ""), "imageID": f"docker.io/{c.get('image', '')}",
             "containerID": f"containerd://{pod['metadata']['uid'].replace('-', '')}{n}",
             "ready": True, "restartCount": 0, "started": True,
             "state": {"running": {"startedAt": ts}}, "lastState": {}}
            for n, c in enumerate(self._containers(pod))
        ]
        self.store.replace(PODS, new)
        self._schedule(now + timedelta(seconds=self._run_seconds(pod)), "finish", pod["metadata"]["uid"])

    def _run_seconds(self, pod: Obj) -> float:
        return max(0.0, float(_annotation(pod, RUN_SECONDS, 1.0)))

    def _finish(self, pod: Obj, now: datetime) -> None:
        ts = timestamp(now)
        code = int(_annotation(pod, EXIT_CODE, 0, int))
        policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
        new = clone(pod)
        status = new.setdefault("status", {})
        statuses = status.get("containerStatuses") or []
        reason = "Completed" if code == 0 else "Error"
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            # Restart in place: the pod stays Running, the container's restartCount grows.
            for cs in statuses:
                started = (cs.get("state", {}).get("running") or {}).get("startedAt", ts)
                cs["lastState"] = {"terminated": {"exitCode": code, "reason": reason,
                                                  "startedAt": started, "finishedAt": ts}}
                cs["state"] = {"running": {"startedAt": ts}}
                cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
            self.store.replace(PODS, new)
            self._schedule(now + timedelta(seconds=self._run_seconds(pod)), "finish", pod["metadata"]["uid"])
            return
        self._terminated(status, code, reason, ts)
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        self.store.replace(PODS, new)

    def _terminated(self, status: dict[str, Any], code: int, reason: str, ts: str) -> None:
        for cs in status.get("containerStatuses") or []:
            started = (cs.get("state", {}).get("running") or {}).get("startedAt", ts)
            cs["state"] = {"terminated": {"exitCode": code, "reason": reason, "startedAt": started,
                                          "finishedAt": ts,
                                          "containerID": cs.get("containerID", "")}}
            cs["ready"] = False
            cs["started"] = False
        ready_reason = "PodCompleted" if code == 0 else "PodFailed"
        for cond in status.get("conditions") or []:
            if cond.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
                if cond.get("status") != "False":
                    cond["lastTransitionTime"] = ts
                cond["status"] = "False"
                cond["reason"] = ready_reason

    def _terminate(self, pod: Obj, now: datetime) -> None:
        """End of graceful termination: the Pod turns Failed (if still running), then the
        kubelet's grace-0 delete removes it once its finalizers are gone."""
        meta = pod["metadata"]
        if not meta.get("deletionTimestamp"):
            return
        current = pod
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed"):
            new = clone(pod)
            status = new.setdefault("status", {})
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            seconds = _annotation(pod, TERMINATE_SECONDS, None)
            # Exited on SIGTERM before the deadline: 143; killed at the deadline: 137.
            sigterm = seconds is not None and float(seconds) < grace
            self._terminated(status, 143 if sigterm else 137, "Error", timestamp(now))
            status["phase"] = "Failed"
            current = self.store.replace(PODS, new)
        self.lifecycle.delete(resources.STORAGE_OWNER[PODS], current, {"gracePeriodSeconds": 0})
