"""The fake kubelet: binds new Pods to ``kubesim-node`` and plays their lifecycle.

Layer: kubesim (imports nothing from batchd). A store listener plus one task on the server's
event loop, started by :class:`kubesim.KubeSim` unless ``kubelet=False``. It writes Pod status
straight to the store (as the real kubelet's status manager does through ``pods/status``), so
every transition is an ordinary MODIFIED watch event.

Per-Pod behaviour comes from annotations:
``kubesim.batchd.io/run-seconds`` (float, default 1): how long each container run lasts;
``kubesim.batchd.io/run-seconds-by-index`` (``<index set>=<seconds>;…``): overrides it for Job
Pods of those completion indexes;
``kubesim.batchd.io/exit-code`` (int, default 0): how each run ends;
``kubesim.batchd.io/container-exit-codes`` (``name=code,…``): per-container codes that override it;
``kubesim.batchd.io/fail-indexes`` (an index set such as ``2,5-7``) with
``kubesim.batchd.io/fail-exit-code`` (int, default 1) and ``kubesim.batchd.io/fail-times``
(int, default: always): a Job Pod whose ``batch.kubernetes.io/job-completion-index`` is in the
set exits with that code while its ``job-index-failure-count`` is below ``fail-times``;
``kubesim.batchd.io/fail-every`` (int n) does the same for every index that n divides, where
a set would name thousands of indexes on every Pod;
``kubesim.batchd.io/terminate-seconds`` (float): how long a deleted Pod takes to stop
(default: its grace period; shorter than the grace period means it exited on SIGTERM, 143);
``kubesim.batchd.io/evict`` (set on a running Pod, e.g. with ``kubectl annotate``): the
kubelet evicts it as node-pressure eviction does — ``DisruptionTarget=True`` (reason
``TerminationByKubelet``), containers killed (137), phase ``Failed`` with reason ``Evicted``.
A deleted Pod carrying it also gets ``DisruptionTarget`` when it stops.

Restarts in place (``restartPolicy: Always``, or ``OnFailure`` after a failure) back off as the
kubelet's CrashLoopBackOff does: the container waits (reason ``CrashLoopBackOff``) 10 s, then
20 s, 40 s … up to 5 min before each restart; a run of 10 min or more resets the delay. The
durations are a :class:`RestartBackoff`, injectable.

All timing reads the injected clock; the loop polls it every ``tick`` seconds so a fake clock
advanced by a test is honoured promptly.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from dataclasses import dataclass
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
RUN_SECONDS_BY_INDEX = "kubesim.batchd.io/run-seconds-by-index"
CONTAINER_EXIT_CODES = "kubesim.batchd.io/container-exit-codes"
FAIL_INDEXES = "kubesim.batchd.io/fail-indexes"
FAIL_EXIT_CODE = "kubesim.batchd.io/fail-exit-code"
FAIL_TIMES = "kubesim.batchd.io/fail-times"
FAIL_EVERY = "kubesim.batchd.io/fail-every"
EVICT = "kubesim.batchd.io/evict"
_INDEX = "batch.kubernetes.io/job-completion-index"
_INDEX_FAILURES = "batch.kubernetes.io/job-index-failure-count"


@dataclass(frozen=True)
class RestartBackoff:
    """CrashLoopBackOff: the delay before restart n is ``min(initial * 2**(n-1), cap)`` seconds."""

    initial: float = 10.0
    cap: float = 300.0
    reset_after: float = 600.0  # a run at least this long starts the sequence again


def _in_index_set(text: str, index: int) -> bool:
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            if int(first) <= index <= int(last or first):
                return True
        except ValueError:
            continue
    return False


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

    def __init__(self, store: Store, lifecycle: Lifecycle, clock: Clock, tick: float = 0.02,
                 backoff: RestartBackoff | None = None) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self.clock = clock
        self.tick = tick
        self.backoff = backoff or RestartBackoff()  # replace it to shorten CrashLoopBackOff in tests
        self._delays: dict[str, float] = {}  # uid -> the last CrashLoopBackOff delay
        self._queue: list[tuple[datetime, int, str, str]] = []  # (when, seq, action, uid)
        self._seq = itertools.count()
        self._terminating: set[str] = set()
        self._bound: set[str] = set()  # the Pods bound (or about to be): never bound twice
        self._ips = itertools.count(2)
        self._wake = asyncio.Event()

    def on_event(self, event: WatchEvent) -> None:
        """Store listener: react to new Pods and to Pods that started graceful deletion."""
        if event.key != PODS:
            return
        meta = event.obj["metadata"]
        uid = meta["uid"]
        if event.type == "DELETED":
            self._terminating.discard(uid)
            self._delays.pop(uid, None)
            self._bound.discard(uid)
            return
        # a Pod behind scheduling gates is bound by the update that removes the last one
        if uid not in self._bound and not meta.get("deletionTimestamp") \
                and not (event.obj.get("spec") or {}).get("schedulingGates"):
            self._schedule(self.clock.now(), "bind", uid)
        if event.type == "ADDED":
            return
        if (not meta.get("deletionTimestamp") and EVICT in (meta.get("annotations") or {})
              and (event.obj.get("status") or {}).get("phase") == "Running"):
            self._schedule(self.clock.now(), "evict", uid)
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
            if uid not in self._bound and not (pod.get("spec") or {}).get("schedulingGates"):
                self._bound.add(uid)
                self._bind(pod, now)
        elif action == "start":
            self._start(pod, now)
        elif action == "finish":
            self._finish(pod, now)
        elif action == "restart":
            self._restart(pod, now)
        elif action == "evict":
            self._evict(pod, now)

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
        annotations = pod["metadata"].get("annotations") or {}
        index = annotations.get(_INDEX)
        if isinstance(index, str) and index.isdigit():
            for entry in str(annotations.get(RUN_SECONDS_BY_INDEX) or "").split(";"):
                indexes, _, seconds = entry.partition("=")
                if seconds and _in_index_set(indexes, int(index)):
                    try:
                        return max(0.0, float(seconds))
                    except ValueError:
                        break
        return max(0.0, float(_annotation(pod, RUN_SECONDS, 1.0)))

    def _exit_codes(self, pod: Obj) -> dict[str, int]:
        """Each container's exit code for this run, from the Pod's annotations."""
        code = int(_annotation(pod, EXIT_CODE, 0, int))
        annotations = pod["metadata"].get("annotations") or {}
        index = annotations.get(_INDEX)
        fail, every = annotations.get(FAIL_INDEXES), _annotation(pod, FAIL_EVERY, 0, int)
        if isinstance(index, str) and index.isdigit() and (
                (fail is not None and _in_index_set(fail, int(index))) or (every > 0 and int(index) % every == 0)):
            times = _annotation(pod, FAIL_TIMES, None, int)
            if times is None or int(_annotation(pod, _INDEX_FAILURES, 0, int)) < times:
                code = int(_annotation(pod, FAIL_EXIT_CODE, 1, int))
        codes = {c.get("name", ""): code for c in self._containers(pod)}
        for part in str(annotations.get(CONTAINER_EXIT_CODES) or "").split(","):
            name, _, value = part.partition("=")
            if name.strip() in codes and value.strip().lstrip("-").isdigit():
                codes[name.strip()] = int(value)
        return codes

    def _finish(self, pod: Obj, now: datetime) -> None:
        ts = timestamp(now)
        codes = self._exit_codes(pod)
        failed = any(codes.values())
        policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
        if policy == "Always" or (policy == "OnFailure" and failed):
            self._crash_loop(pod, codes, now)
            return
        new = clone(pod)
        status = new.setdefault("status", {})
        self._terminated(status, codes, ts)
        status["phase"] = "Failed" if failed else "Succeeded"
        self.store.replace(PODS, new)

    def _crash_loop(self, pod: Obj, codes: dict[str, int], now: datetime) -> None:
        """The containers exited and will restart in place, after the CrashLoopBackOff delay."""
        ts = timestamp(now)
        uid = pod["metadata"]["uid"]
        new = clone(pod)
        status = new.setdefault("status", {})
        ran = 0.0
        for cs in status.get("containerStatuses") or []:
            code = codes.get(cs.get("name", ""), 0)
            started = (cs.get("state", {}).get("running") or {}).get("startedAt", ts)
            ran = max(ran, (now - datetime.fromisoformat(started.replace("Z", "+00:00"))).total_seconds())
            cs["lastState"] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                              "startedAt": started, "finishedAt": ts}}
        previous = self._delays.get(uid)
        b = self.backoff
        delay = b.initial if previous is None or ran >= b.reset_after else min(previous * 2, b.cap)
        self._delays[uid] = delay
        meta = pod["metadata"]
        for cs in status.get("containerStatuses") or []:
            cs["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": (
                f"back-off {delay:g}s restarting failed container={cs.get('name', '')} "
                f"pod={meta.get('name', '')}_{meta.get('namespace', '')}({uid})")}}
            cs["ready"] = False
            cs["started"] = False
        self._set_ready(status, False, ts, "ContainersNotReady")
        self.store.replace(PODS, new)
        self._schedule(now + timedelta(seconds=delay), "restart", uid)

    def _restart(self, pod: Obj, now: datetime) -> None:
        ts = timestamp(now)
        new = clone(pod)
        status = new.setdefault("status", {})
        for cs in status.get("containerStatuses") or []:
            cs["state"] = {"running": {"startedAt": ts}}
            cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
            cs["ready"] = True
            cs["started"] = True
        self._set_ready(status, True, ts, None)
        self.store.replace(PODS, new)
        self._schedule(now + timedelta(seconds=self._run_seconds(pod)), "finish", pod["metadata"]["uid"])

    @staticmethod
    def _set_ready(status: dict[str, Any], ready: bool, ts: str, reason: str | None) -> None:
        for cond in status.get("conditions") or []:
            if cond.get("type") in ("Ready", "ContainersReady"):
                if cond.get("status") != ("True" if ready else "False"):
                    cond["lastTransitionTime"] = ts
                cond["status"] = "True" if ready else "False"
                if reason:
                    cond["reason"] = reason
                else:
                    cond.pop("reason", None)

    def _evict(self, pod: Obj, now: datetime) -> None:
        """Node-pressure eviction: DisruptionTarget first, then the containers are killed."""
        ts = timestamp(now)
        new = clone(pod)
        status = new.setdefault("status", {})
        self._disrupted(status, ts)
        self._terminated(status, {c.get("name", ""): 137 for c in self._containers(pod)}, ts)
        status["phase"] = "Failed"
        status["reason"] = "Evicted"
        status["message"] = "The node was low on resource: memory."
        self.store.replace(PODS, new)

    @staticmethod
    def _disrupted(status: dict[str, Any], ts: str) -> None:
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                           "message": "The node was low on resource: memory.", "lastProbeTime": None,
                           "lastTransitionTime": ts})
        status["conditions"] = conditions

    def _terminated(self, status: dict[str, Any], codes: dict[str, int], ts: str) -> None:
        for cs in status.get("containerStatuses") or []:
            code = codes.get(cs.get("name", ""), 0)
            started = (cs.get("state", {}).get("running") or {}).get("startedAt", ts)
            cs["state"] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                          "startedAt": started, "finishedAt": ts,
                                          "containerID": cs.get("containerID", "")}}
            cs["ready"] = False
            cs["started"] = False
        ready_reason = "PodFailed" if any(codes.values()) else "PodCompleted"
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
            if EVICT in (meta.get("annotations") or {}):
                self._disrupted(status, timestamp(now))
            code = 143 if sigterm else 137
            self._terminated(status, {c.get("name", ""): code for c in self._containers(pod)}, timestamp(now))
            status["phase"] = "Failed"
            current = self.store.replace(PODS, new)
        self.lifecycle.delete(resources.STORAGE_OWNER[PODS], current, {"gracePeriodSeconds": 0})
