"""bench/compare: upstream's batch controllers and batchd's, on one real control plane, one after the other.

    .venv/bin/python -m bench.compare [--workloads cronjob,job,ttl] [--cronjobs 250] [--minutes 2]
                                      [--completions 2000] [--parallelism 200] [--ttl-jobs 500]
                                      [--upstream-qps 20/30,100/200] [--temporal dev,postgres] [--json PATH]

The defaults are sized to finish within half an hour on a 2-core machine; the issue's sizes by
flag: ``--cronjobs 250,500,1000 --minutes 5``, ``--completions 10000 --parallelism 1000`` (or
``100000`` and ``10000``), ``--ttl-jobs 2000``.

One control plane (worker/cluster.py, built by ``make upstream``). Each case (a workload at a
size; ``--cronjobs`` takes several sizes) runs once per phase, one phase after the other, each in a
namespace of its own that is deleted before the next:

1. kube-controller-manager with its ``job``, ``cronjob`` and ``ttl-after-finished`` controllers, as it
   ships (``--kube-api-qps 20 --kube-api-burst 30``, 5 concurrent syncs of each);
2. the same at 100 / 200, the setting kubernetes#113478 measured;
3. batchd (``batchd worker --job-scope all --ttl-scope all``, its own defaults, as the batchd
   ServiceAccount), with those three controllers off, on each Temporal server ``--temporal`` names:
   the dev server (``dev``) and temporal-server on PostgreSQL (``postgres``, bench/temporal.py), a
   fresh one per case.

Figures (printed, never asserted), per workload:

- ``cronjob``: N every-minute CronJobs, ``--minutes`` measured schedule times: Jobs made / expected;
  creation skew p50 / p99 / max (a Job's ``creationTimestamp``, whole seconds, minus its scheduled
  time); the controller's CPU-seconds per Job made; peak RSS.
- ``job``: one Indexed Job of ``--completions`` with ``--parallelism``, Pods played by kwok for 1 s:
  time to Complete, Pods/s, Kubernetes API requests per Pod by the controller's own identities (from
  kube-apiserver's audit log), leader election included on both sides (batchd's Lease is its own
  identity's; kube-controller-manager, elected as it ships, renews its Lease as itself), CPU per Pod.
- ``ttl``: ``--ttl-jobs`` Jobs of one Pod each with ``ttlSecondsAfterFinished`` spread over 0–60 s
  (``--ttl-spread``):
  deletion lateness p50 / p99 / max (the bench's watch sees the DELETE, minus completion time plus
  TTL), CPU per deletion.

The controller's CPU is kube-controller-manager's (all its controllers: it is one process), or
batchd's worker and, apart, the Temporal server's (with PostgreSQL's). A row per figure and per
kube-controller-manager setting and Temporal server (``[20/30 vs dev]``): upstream, batchd, and
their ratio batchd / upstream. batchd sets no API rate limit of its own: its requests are bounded
only by its 64 concurrent activities (``--max-concurrent-activities``), as the legend says.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import (
    TEMPORAL_SERVERS,
    DeletionWatch,
    TemporalServer,
    kube_for,
    percentile,
    proc_mb,
    role_cpu_seconds,
    run_then_exit,
    temporal_server,
    workdir,
    worker_process,
)
from kube.client import Kube, resource_path
from kube.errors import KubeError
from worker.cluster import CONTROLLER_MANAGER_LEASE, UPSTREAM_CONTROLLERS, ControlPlane
from workflows.models.common import Job, finished_condition

WORKLOADS = ("cronjob", "job", "ttl")
#: kube-controller-manager's API rate: as it ships, and as kubernetes#113478 measured it
UPSTREAM_QPS = ((20, 30), (100, 200))
#: the identities kube-controller-manager's batch controllers act as (--use-service-account-credentials)
UPSTREAM_USERS = tuple(f"system:serviceaccount:kube-system:{name}" for name in UPSTREAM_CONTROLLERS.values())
BATCHD_USER = "system:serviceaccount:batchd-system:batchd"  # deploy/base
RUN = {"kubesim.batchd.io/run-seconds": "1"}  # kwok's stages play the Pod (worker/cluster.py)


@dataclass
class Side:
    """Who runs the batch controllers in a phase, and what they cost: CPU and peak RSS by process."""

    name: str  # "20/30", "dev"
    users: tuple[str, ...]
    lease: tuple[str, str] | None  # a leader's Lease (namespace, name) renewed under another identity
    pids: Callable[[], dict[str, list[int]]]  # role -> pids, read at the start and the end
    cpu0: dict[str, float] = field(default_factory=dict)

    def begin(self) -> None:
        self.cpu0 = role_cpu_seconds(self.pids())

    def cpu(self) -> dict[str, float]:
        return {role: now - self.cpu0.get(role, 0.0) for role, now in role_cpu_seconds(self.pids()).items()}

    def memory_mb(self) -> dict[str, float]:
        """Each role's peak RSS, or for a role of several processes (PostgreSQL's, whose shared
        buffers each of them maps) their proportional set sizes summed, as they are now."""
        return {f"peak RSS (MiB): {role}" if len(pids) == 1 else f"PSS (MiB): {role}":
                proc_mb(pids[0], "status", "VmHWM") if len(pids) == 1 else
                sum(proc_mb(pid, "smaps_rollup", "Pss") for pid in pids)
                for role, pids in self.pids().items()}


# -- the workloads ------------------------------------------------------------------------------

def pod_template() -> dict[str, Any]:
    return {"metadata": {"annotations": dict(RUN)},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}


def cronjob_workload(_: ControlPlane, kube: Kube, ns: str, side: Side, *, cronjobs: int, minutes: int) -> dict[str, float]:
    # the first measured time leaves the set-up (and batchd's 60 s armed lead) 60 to 120 s
    first = (datetime.now(UTC) + timedelta(seconds=120)).replace(second=0, microsecond=0)
    last = first + timedelta(minutes=minutes - 1)
    for i in range(cronjobs):
        kube.create("CronJob", ns, {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {
            "name": f"cj-{i}", "labels": {"batchd.io/managed": "true"}}, "spec": {
            "schedule": "* * * * *", "successfulJobsHistoryLimit": minutes + 3, "failedJobsHistoryLimit": minutes + 3,
            "jobTemplate": {"spec": {"template": pod_template()}}}})  # every measured Job kept to be counted
    _sleep_until(first - timedelta(seconds=5))
    side.begin()
    _sleep_until(last + timedelta(seconds=50))  # the last time's Jobs made, however late (up to the next minute)
    cpu = side.cpu()
    skews, made = [], 0
    for job in kube.list("Job", ns)["items"]:
        meta = job["metadata"]
        stamp = (meta.get("annotations") or {}).get("batch.kubernetes.io/cronjob-scheduled-timestamp")
        if stamp is None:
            continue
        scheduled = _time(stamp)
        if first <= scheduled <= last:
            made += 1
            skews.append((_time(meta["creationTimestamp"]) - scheduled).total_seconds())
    figures = {"Jobs made": made, "Jobs expected": cronjobs * minutes,
               "creation skew p50 (s)": percentile(skews, 50), "creation skew p99 (s)": percentile(skews, 99),
               "creation skew max (s)": max(skews, default=math.nan)}
    return {**figures, **_cost(cpu, made, "Job"), **_rss(side)}


def job_workload(plane: ControlPlane, kube: Kube, ns: str, side: Side, *, completions: int,
                 parallelism: int) -> dict[str, float]:
    audit = _AuditTail(plane.audit_log)
    side.begin()
    started = time.monotonic()
    kube.create("Job", ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "indexed"}, "spec": {
        "completionMode": "Indexed", "completions": completions, "parallelism": parallelism,
        "backoffLimit": completions, "template": pod_template()}})
    while not _finished(kube.get("Job", ns, "indexed")):
        time.sleep(1)
    took = time.monotonic() - started
    cpu = side.cpu()
    requests = audit.count(side.users, side.lease)
    return {"time to Complete (s)": took, "Pods/s": completions / took,
            "API requests per Pod": requests / completions, **_cost(cpu, completions, "Pod"), **_rss(side)}


def ttl_workload(_: ControlPlane, kube: Kube, ns: str, side: Side, *, jobs: int, spread: int) -> dict[str, float]:
    watch = _Deletions(kube, ns)
    watch.start()
    side.begin()
    try:
        for i in range(jobs):
            kube.create("Job", ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"ttl-{i}"}, "spec": {
                "ttlSecondsAfterFinished": i * (spread + 1) // jobs, "template": pod_template()}})
        deadline = time.monotonic() + 600 + jobs * 0.5
        while len(watch.lateness) < jobs and time.monotonic() < deadline:
            time.sleep(1)
        cpu = side.cpu()
    finally:
        watch.stop()
    late = list(watch.lateness.values())
    return {"Jobs deleted": len(late), "Jobs": jobs, "deletion lateness p50 (s)": percentile(late, 50),
            "deletion lateness p99 (s)": percentile(late, 99), "deletion lateness max (s)": max(late, default=math.nan),
            **_cost(cpu, len(late), "deletion"), **_rss(side)}


class _Deletions(DeletionWatch):
    """Each Job's deletion lateness: when the watch saw it go, minus its completion time plus its
    TTL (the object of the DELETED event carries both)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        super().__init__(kube, "Job", namespace)
        self.lateness: dict[str, float] = {}

    def observe(self, ev: dict[str, Any]) -> None:
        job = ev["object"]
        done = (job.get("status") or {}).get("completionTime")
        if ev["type"] == "DELETED" and done:
            due = _time(done) + timedelta(seconds=job["spec"].get("ttlSecondsAfterFinished") or 0)
            self.lateness[job["metadata"]["name"]] = (datetime.now(UTC) - due).total_seconds()


def _cost(cpu: dict[str, float], count: int, per: str) -> dict[str, float]:
    """CPU-seconds per unit of work, all the side's processes together, and each apart when several."""
    out = {f"CPU-s per {per}": sum(cpu.values()) / count if count else math.nan}
    if len(cpu) > 1:
        out |= {f"CPU-s per {per}: {role}": seconds / count if count else math.nan for role, seconds in cpu.items()}
    return out


def _rss(side: Side) -> dict[str, float]:
    by_role = side.memory_mb()
    return {"peak RSS (MiB)": sum(by_role.values()), **(by_role if len(by_role) > 1 else {})}


class _AuditTail:
    """kube-apiserver's audit log from now on: requests counted by the identity that made them, and
    on a Lease (kube-controller-manager renews its own as itself, not as its controllers)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def count(self, users: tuple[str, ...], lease: tuple[str, str] | None) -> int:
        seen: set[str] = set()
        with self.path.open("rb") as f:
            f.seek(self.offset)
            for line in f:
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    ref = entry.get("objectRef") or {}
                    if ((entry.get("user") or {}).get("username") in users or
                            (ref.get("resource") == "leases" and (ref.get("namespace"), ref.get("name")) == lease)):
                        seen.add(entry["auditID"])  # a watch is logged when it starts and when it ends
        return len(seen)


def _finished(job: dict[str, Any] | None) -> bool:
    return job is not None and finished_condition(Job.model_validate(job).status.conditions) is not None


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _sleep_until(t: datetime) -> None:
    time.sleep(max(0.0, (t - datetime.now(UTC)).total_seconds()))


# -- the phases ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One workload at one size: what each phase runs."""

    workload: str  # one of WORKLOADS
    size: str  # as printed: "250 CronJobs x 5 min"
    run: Callable[[ControlPlane, Kube, str, Side], dict[str, float]]  # (plane, kube, namespace, side) -> figures


def cases(args: argparse.Namespace) -> list[Case]:
    out = []
    for workload in args.workloads:
        if workload == "cronjob":
            out += [Case(workload, f"{n} CronJobs x {args.minutes} min",
                         functools.partial(cronjob_workload, cronjobs=n, minutes=args.minutes)) for n in args.cronjobs]
        elif workload == "job":
            out.append(Case(workload, f"{args.completions} x {args.parallelism}", functools.partial(
                job_workload, completions=args.completions, parallelism=args.parallelism)))
        else:
            out.append(Case(workload, f"{args.ttl_jobs} Jobs", functools.partial(ttl_workload, jobs=args.ttl_jobs,
                                                                                     spread=args.ttl_spread)))
    return out


@contextlib.contextmanager
def batchd_side(plane: ControlPlane, server: TemporalServer, wd: Path) -> Iterator[Side]:
    with worker_process(server, plane.batchd_kubeconfig, wd, namespace="", task_queue=f"compare-{uuid.uuid4().hex[:6]}",
                        lease_namespace="batchd-system", extra=["--job-scope", "all", "--ttl-scope", "all"]) as worker:
        yield Side(server.kind, (BATCHD_USER,), None, lambda: {"worker": [worker.proc.pid], **server.roles()})


def upstream_side(plane: ControlPlane, qps: tuple[int, int]) -> Side:
    plane.reconfigure_controller_manager(UPSTREAM_CONTROLLERS, qps)
    return Side(f"{qps[0]}/{qps[1]}", UPSTREAM_USERS, CONTROLLER_MANAGER_LEASE,
                lambda: {"kube-controller-manager": [plane.pid("kube-controller-manager")]})


def run_phase(case: Case, plane: ControlPlane, kube: Kube, side: Side) -> dict[str, float]:
    """The case in a namespace of its own, deleted (and waited for: its leftovers must not cost the
    next phase) before this returns."""
    began = time.monotonic()
    ns = f"compare-{case.workload}-{uuid.uuid4().hex[:6]}"
    kube.create("Namespace", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    figures: dict[str, float] = {}
    try:
        figures = case.run(plane, kube, ns, side)
        return figures
    finally:
        _empty(kube, ns)
        kube.delete("Namespace", "", ns)
        deadline = time.monotonic() + 900
        while kube.get("Namespace", "", ns) is not None and time.monotonic() < deadline:
            time.sleep(2)
        # the figures as they come: a later phase that fails loses nothing measured before it
        print(f"  {case.workload} {case.size}, {side.name}: {time.monotonic() - began:.0f} s {json.dumps(figures)}",
              flush=True)


def _empty(kube: Kube, ns: str) -> None:
    """Delete the phase's objects in three requests before its namespace: left to the namespace
    controller (at kube-controller-manager's 20 QPS) and kwok's graceful Pod deletions, thousands of
    them took minutes between phases. CronJobs first, so no new Job comes; Jobs orphaning their
    Pods, so the garbage collector has nothing to do; the Pods at once, without a grace period.
    kube-apiserver deletes a collection one object at a time (5,000 Jobs outlasted the 20 s read), so
    each request may take minutes; one that fails leaves the rest to the namespace's deletion."""
    for kind, options in (("CronJob", {}), ("Job", {"propagationPolicy": "Orphan"}), ("Pod", {"gracePeriodSeconds": 0})):
        try:
            kube.request("DELETE", resource_path(kind, ns), body={"kind": "DeleteOptions", "apiVersion": "v1", **options},
                         timeout=(10, 900))
        except KubeError as err:
            print(f"  emptying {ns}: {kind}s not deleted ({err}); the namespace's deletion will", flush=True)


def rows(case: Case, upstream: dict[str, dict[str, float]], batchd: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """A row per figure, kube-controller-manager setting and Temporal server; then batchd's cost
    by process, alone, per Temporal server."""
    def row(figure: str, theirs: float | None, ours: float) -> dict[str, Any]:
        return {"workload": case.workload, "size": case.size, "figure": figure, "upstream": theirs, "batchd": ours,
                "ratio": None if theirs is None else _ratio(ours, theirs)}

    return [row(f"{figure} [{qps} vs {kind}]", theirs, ours.get(figure, math.nan))
            for figure in next(iter(upstream.values()))
            for qps, figures in upstream.items() for kind, ours in batchd.items() for theirs in [figures[figure]]
            ] + [row(f"{figure} [{kind}]", None, value)
                 for kind, ours in batchd.items() for figure, value in ours.items() if ": " in figure]


def _ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs and not math.isnan(theirs) else math.nan


def print_table(table: list[dict[str, Any]]) -> None:
    def fmt(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    header = ("workload", "size", "figure", "upstream", "batchd", "ratio")
    cells = [header] + [tuple(fmt(r[k]) for k in header) for r in table]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))
    print(LEGEND)


LEGEND = ("[Q/B vs T]: kube-controller-manager at --kube-api-qps Q --kube-api-burst B beside batchd on the Temporal "
          "server T (dev: the dev server; postgres: temporal-server on PostgreSQL), which has no API rate limit, only its "
          "64 concurrent activities (--max-concurrent-activities). ratio: batchd / upstream.")


async def compare(args: argparse.Namespace) -> list[dict[str, Any]]:
    wd = workdir()
    print(f"bench.compare: state in {wd}", flush=True)
    began = time.monotonic()
    plane = ControlPlane(wd / "plane", audited_users=(*UPSTREAM_USERS, BATCHD_USER),
                         controller_manager_qps=args.upstream_qps[0])
    plane.start()
    kube = kube_for(plane.kubeconfig)
    todo = cases(args)
    try:
        upstream: dict[Case, dict[str, dict[str, float]]] = {case: {} for case in todo}
        for qps in args.upstream_qps:
            side = upstream_side(plane, qps)
            for case in todo:
                upstream[case][side.name] = run_phase(case, plane, kube, side)
        plane.reconfigure_controller_manager((), None)
        batchd: dict[Case, dict[str, dict[str, float]]] = {case: {} for case in todo}
        for kind in args.temporal:
            for case in todo:  # a fresh server each: its peak RSS is the case's
                async with temporal_server(kind, wd / f"{kind}-{uuid.uuid4().hex[:6]}") as server:
                    with batchd_side(plane, server, wd) as side:  # a worker of every namespace
                        batchd[case][kind] = await asyncio.to_thread(run_phase, case, plane, kube, side)
    finally:
        plane.stop()
    print(f"bench.compare: {(time.monotonic() - began) / 60:.0f} min", flush=True)
    return [r for case in todo for r in rows(case, upstream[case], batchd[case])]


def _ints(text: str) -> list[int]:
    try:
        return [int(n) for n in text.split(",")]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers, as 250,500,1000") from err


def _rates(text: str) -> tuple[tuple[int, int], ...]:
    try:
        return tuple((int(q), int(b)) for q, _, b in (pair.partition("/") for pair in text.split(",")))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: expected QPS/BURST pairs, as 20/30,100/200") from err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS), type=lambda s: [w for w in s.split(",") if w])
    ap.add_argument("--cronjobs", type=_ints, default=[250], metavar="N,…", help="a phase each (default: 250)")
    ap.add_argument("--minutes", type=int, default=2)
    ap.add_argument("--completions", type=int, default=2000)
    ap.add_argument("--parallelism", type=int, default=200)
    ap.add_argument("--ttl-jobs", type=int, default=500)
    ap.add_argument("--ttl-spread", type=int, default=60, metavar="SECONDS", help="TTLs from 0 to this (default: 60)")
    ap.add_argument("--upstream-qps", default=UPSTREAM_QPS, type=_rates, metavar="QPS/BURST,…",
                    help="kube-controller-manager's API rates, a phase each (default: 20/30,100/200)")
    ap.add_argument("--temporal", default=["dev"], type=lambda s: [t for t in s.split(",") if t], metavar="dev|postgres,…",
                    help="the Temporal servers batchd runs on, a phase each (default: dev)")
    ap.add_argument("--json", type=Path, default=None, metavar="PATH")
    args = ap.parse_args()
    for flag, given, known in (("--workloads", args.workloads, WORKLOADS), ("--temporal", args.temporal, TEMPORAL_SERVERS)):
        if unknown := set(given) - set(known):
            ap.error(f"{flag}: unknown {sorted(unknown)}; choose from {', '.join(known)}")
    run_then_exit(_report(args))


async def _report(args: argparse.Namespace) -> None:
    table = await compare(args)
    print_table(table)
    if args.json:
        finite = [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()} for row in table]
        args.json.write_text(json.dumps(finite, indent=1) + "\n")  # JSON has no NaN: a figure not had is null


if __name__ == "__main__":
    main()
