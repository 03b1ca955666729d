"""Tier-1 tables for workflows/decisions/job.py: the Job controller's pure sync decisions.

Rule ids are those of docs/job.md (JOB-n) and docs/kubesim.md (API-n). ``Sim`` applies a plan the way the Job
workflow does (deletes, creates, step 1 record, step 2 release, step 3 fold) against a tiny
in-memory cluster with a fake kubelet, can "crash" after any step and re-sync from a fresh
snapshot, and checks every status write against the API's rules API-29 to API-47. Every ``now`` is
a fixed instant; the real clock is never read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_core import to_json

from workflows.decisions.job import (
    MAX_BACKOFF,
    Books,
    after_sync,
    after_verdict,
    backoff_remaining,
    cycle_message,
    decided_end,
    ended,
    fold,
    new_backoff_record,
    plan_sync,
    prune_finalizers_removed,
    sync,
)
from workflows.execute import Call, Emit, Patched, execute
from workflows.models.common import Condition
from workflows.models.job import (
    BackoffRecord,
    CreatePodsResult,
    Cycle,
    Dependencies,
    Dependency,
    JobMemory,
    JobOptions,
    JobSnapshot,
    JobSpecView,
    JobStatusView,
    PodInfo,
    PodsResult,
    SyncPlan,
    create_job_pods,
    cycle_of,
    delete_job_pods,
    find_job_cycle,
    observe_job,
    read_job_dependencies,
    release_job_pods,
    release_unmatched_job_pods,
    shortest_cycle,
    write_job_status,
)
from workflows.models.jobpods import (
    SNAPSHOT_BUDGET,
    WINDOW,
    bound_snapshot,
    fit_snapshot,
    format_indexes,
    parse_indexes,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def pod(name: str, phase: str = "Running", *, index: int | None = None, deleting: bool = False,
        fin: bool = True, ready: bool = False, created: datetime | None = None,
        finished: datetime | None = None, restarts: int = 0, uid: str | None = None) -> PodInfo:
    """A Pod row; uid defaults to ``u-<name>``."""
    return PodInfo(name=name, uid=uid or f"u-{name}", index=index, phase=phase, deleting=deleting,
                   has_finalizer=fin, ready=ready, creation_time=created, finish_time=finished,
                   restart_count=restarts)


def cond(type_: str, status: str = "True", reason: str | None = None, message: str | None = None,
         at: datetime = NOW - 100 * S) -> Condition:
    return Condition(type=type_, status=status, reason=reason, message=message, last_transition_time=at)


def make_snapshot(*pods: PodInfo, status: JobStatusView | None = None, deleting: bool = False,
                  gone: bool = False, **spec: Any) -> JobSnapshot:
    """A snapshot of Job ``ns/job``; a status defaults to a started Job (JOB-83)."""
    return JobSnapshot(namespace="ns", name="job", uid="job-uid", deleting=deleting, gone=gone,
                       spec=JobSpecView(**spec),
                       status=status or JobStatusView(start_time=NOW - 100 * S), pods=list(pods))


def ctype(status: JobStatusView | None, type_: str) -> Condition | None:
    assert status is not None
    return next((c for c in status.conditions if c.type == type_), None)


def is_true(status: JobStatusView, type_: str) -> bool:
    c = ctype(status, type_)
    return c is not None and c.status == "True"


def check_write(old: JobStatusView, new: JobStatusView, spec: JobSpecView) -> None:
    """What kubesim's Job status strategy enforces (API-29 to API-47)."""
    for key in ("active", "ready", "terminating", "succeeded", "failed"):
        assert getattr(new, key) >= 0, key  # API-29
    uids = new.uncounted_succeeded + new.uncounted_failed
    assert all(uids) and len(set(uids)) == len(uids)  # API-29
    assert new.ready <= new.active  # API-47
    assert new.failed >= old.failed and new.succeeded >= old.succeeded  # API-32, API-33
    for t in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"):
        assert not is_true(old, t) or is_true(new, t), t  # API-34, API-29
    complete, failed = is_true(new, "Complete"), is_true(new, "Failed")
    assert not (complete and (failed or is_true(new, "FailureTarget")))  # API-35
    assert not (is_true(new, "SuccessCriteriaMet") and (failed or is_true(new, "FailureTarget")))
    assert not complete or is_true(new, "SuccessCriteriaMet")  # API-45
    assert not failed or is_true(new, "FailureTarget")  # API-45
    assert (new.completion_time is not None) == complete  # API-44
    assert old.completion_time is None or new.completion_time == old.completion_time  # API-43
    if complete or failed:  # API-38 to API-40, API-46
        assert new.active == new.ready == new.terminating == 0 and not uids
        assert new.start_time is not None
    if old.start_time is not None and new.start_time != old.start_time:
        assert spec.suspend  # API-41 (as kubesim enforces it)
    if new.completion_time and new.start_time:
        assert new.completion_time >= new.start_time  # API-42
    if spec.completion_mode == "NonIndexed":
        assert new.completed_indexes == ""  # API-36
    else:
        assert spec.completions is not None
        assert format_indexes(parse_indexes(new.completed_indexes, spec.completions)) == new.completed_indexes


class Crash(Exception):
    """The workflow stops where ``Sim.sync`` was asked to crash."""


#: the order of a sync's stages, as ``Sim.sync(crash_after=…)`` names them
STAGES = ("observe", "create", "record", "release", "fold", "events")


class Sim:
    """A Job, its Pods and the workflow's books; ``sync`` runs the workflow's own sync
    (``decisions.job.sync`` on the executor) with this Sim as the fake side that plays the cluster.

    ``window`` (JOB-92): the most Pods a snapshot holds one by one; None holds them all.
    """

    window: int | None = None

    def __init__(self, *, gc_finished: bool = False, **spec: Any) -> None:
        self.spec = JobSpecView(**spec)
        self.status = JobStatusView()
        self.pods: dict[str, PodInfo] = {}
        self.books = Books("ns", "job", "job-uid", JobMemory(), suffix=lambda: "")
        self.now = NOW
        self.created = 0
        self.events: list[str] = []
        self.succeeded_uids: set[str] = set()  # Pods that reached Succeeded (ground truth)
        self.failed_uids: set[str] = set()
        self.gc_finished = gc_finished  # PodGC deletes finished Pods once their finalizer is gone
        self.deleting = self.gone = False
        self.relabeled: set[str] = set()  # JOB-26: Pods whose labels no longer match the selector
        self.released: dict[str, PodInfo] = {}  # JOB-26: Pods no longer the Job's
        self.options = JobOptions()  # batchd's annotations on the Job
        self.others: dict[str, Dependency] = {}  # JOB-AFTER: other Jobs of the namespace, by name
        self.awaits: dict[str, list[str]] = {}  # JOB-AFTER: what those of them that have not begun wait for
        self.searches = 0  # JOB-AFTER: searches for a cycle
        self._stage = 0
        self._crash_after: int | None = None
        self._writes = 0

    @property
    def memory(self) -> JobMemory:
        return self.books.memory

    @memory.setter
    def memory(self, memory: JobMemory) -> None:
        self.books.memory = memory

    def snapshot(self) -> JobSnapshot:
        snap = JobSnapshot(namespace="ns", name="job", uid="job-uid", spec=self.spec,
                           status=self.status, deleting=self.deleting, gone=self.gone,
                           pods=[p for n, p in self.pods.items() if n not in self.relabeled],
                           unmatched=[p for n, p in self.pods.items() if n in self.relabeled], options=self.options)
        return snap if self.window is None else bound_snapshot(snap, self.memory, window=self.window)

    def write(self, new: JobStatusView) -> None:
        check_write(self.status, new, self.spec)
        self.status = new

    def set(self, name: str, **update: Any) -> None:
        if name in self.pods:
            self.pods[name] = self.pods[name].model_copy(update=update)

    def sync(self, crash_after: str | None = None) -> SyncPlan:
        """One sync as the workflow runs it; ``crash_after`` (a stage of :data:`STAGES`) stops it there."""
        self._stage, self._writes = 0, 0
        self._crash_after = None if crash_after is None else STAGES.index(crash_after)
        with contextlib.suppress(Crash):
            asyncio.run(execute(sync(self.books, lambda: self.now), self))
        return self.books.plan or SyncPlan()  # none while it waits (JOB-AFTER), or if it crashed first

    async def perform(self, step: Any) -> Any:
        """The fake cluster's answer to one step of the sync."""
        if isinstance(step, Emit):
            self._enter(STAGES.index("events") if self._stage >= STAGES.index("record") else self._stage)
            self.events.append(step.event.reason)
            return None
        if isinstance(step, Patched):
            return True
        if not isinstance(step, Call):
            return None  # a log line or a metric
        return self._call(step.activity, step.arg)

    def _enter(self, stage: int) -> None:
        if self._crash_after is not None and stage > self._crash_after:
            raise Crash
        self._stage = max(self._stage, stage)

    def _call(self, activity: Any, arg: Any) -> Any:
        if activity is observe_job:
            return self.snapshot()
        if activity is read_job_dependencies:
            return Dependencies(jobs=[self.others.get(n, Dependency(name=n)) for n in arg.names])
        if activity is find_job_cycle:
            self.searches += 1
            return Cycle(path=shortest_cycle(arg.name, arg.after, lambda name: self.awaits.get(name, [])))
        if activity is write_job_status:
            step_one = self._writes == 0 and self.books.plan is not None and self.books.plan.record is not None
            self._enter(STAGES.index("record" if step_one else "fold"))
            self._writes += 1
            self.write(arg.status)
            return PodsResult(resource_version=str(self._writes))
        if activity is release_job_pods:
            self._enter(STAGES.index("release"))
            for name in arg.pods:  # step 2
                self.set(name, has_finalizer=False)
            self.gc()
            return PodsResult(names=arg.pods)
        self._enter(STAGES.index("create"))
        if activity is release_unmatched_job_pods:  # JOB-26: ownerReference and finalizer removed in one patch
            for name in arg.pods:
                self.released[name] = self.pods.pop(name).model_copy(update={"has_finalizer": False})
            return PodsResult(names=list(arg.pods))
        if activity is delete_job_pods:
            for name in arg.pods:  # JOB-74: finalizer kept; JOB-17: released and deleted
                self.set(name, deleting=True, **({"has_finalizer": False} if arg.release else {}))
            self.gc()
            return PodsResult(names=arg.pods)
        assert activity is create_job_pods, activity
        names = []
        for want in arg.pods:
            self.created += 1
            name = f"job-{self.created}" if want.index is None else f"job-{want.index}-{self.created}"
            self.pods[name] = pod(name, "Pending", index=want.index, created=self.now).model_copy(update={
                "failure_count": want.failure_count or 0, "ignored_failure_count": want.ignored_failure_count})
            names.append(name)
        self.gc()
        return CreatePodsResult(created=names)

    def gc(self) -> None:
        for name, p in list(self.pods.items()):
            finished = p.phase in ("Succeeded", "Failed")
            if not p.has_finalizer and finished and (p.deleting or self.gc_finished):
                del self.pods[name]

    def kubelet(self, *, fail: Sequence[str] = ()) -> None:
        """One tick: deleted Pods stop (Failed, JOB-62), Running ones finish, Pending ones start."""
        self.now += S
        for name, p in list(self.pods.items()):
            if p.phase in ("Succeeded", "Failed"):
                continue
            if p.deleting:
                self.set(name, phase="Failed", ready=False, finish_time=self.now)
            elif p.phase == "Running":
                phase = "Failed" if name in fail else "Succeeded"
                (self.failed_uids if phase == "Failed" else self.succeeded_uids).add(p.uid)
                self.set(name, phase=phase, ready=False, finish_time=self.now)
            else:
                self.set(name, phase="Running", ready=True)
        self.gc()

    def finished(self) -> bool:
        return is_true(self.status, "Complete") or is_true(self.status, "Failed")

    def run(self, crash_after: str | None = None, rounds: int = 60) -> None:
        """Sync (crashing, then re-syncing, if asked) and tick until the Job finishes."""
        for _ in range(rounds):
            if crash_after:
                self.sync(crash_after)
            self.sync()
            if self.finished():
                return
            self.kubelet()
        raise AssertionError(f"not finished: {self.status}")

    def assert_clean(self) -> None:
        """No finalizer left behind; nothing active; nothing uncounted."""
        assert [p.name for p in self.pods.values() if p.has_finalizer] == []
        assert self.status.active == self.status.terminating == 0
        assert self.status.uncounted_succeeded == self.status.uncounted_failed == []


@pytest.fixture(autouse=True, params=[None, 2], ids=["whole snapshots", "windows of 2 Pods"])
def sim_window(request: pytest.FixtureRequest) -> Any:
    """Every simulated Job runs twice: reading its Pods whole, and through windows of 2 (JOB-92)."""
    Sim.window = request.param
    yield request.param
    Sim.window = None


CRASHES = [None, "create", "record", "release"]
CRASH_IDS = ["no crash", "crash after create", "crash after step 1", "crash after step 2"]


# --- happy paths through several syncs, with crashes between steps (JOB-30 to JOB-34, JOB-39, JOB-46, JOB-47) ---


@pytest.mark.parametrize("gc_finished", [False, True], ids=["pods kept", "podgc deletes released pods"])
@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_nonindexed_runs_to_complete_counting_each_pod_once(crash: str | None, gc_finished: bool) -> None:
    sim = Sim(completions=5, parallelism=2, gc_finished=gc_finished)
    sim.run(crash)
    assert sim.status.succeeded == len(sim.succeeded_uids) == 5 and sim.status.failed == 0
    c = ctype(sim.status, "Complete")
    assert c and c.reason == "CompletionsReached" and c.message == "Reached expected number of succeeded pods"  # JOB-78
    assert sim.status.completion_time == c.last_transition_time  # JOB-77
    assert ctype(sim.status, "SuccessCriteriaMet") is not None  # JOB-76
    assert sim.events.count("Completed") >= 1 and "TooManySucceededPods" not in sim.events  # JOB-80
    sim.assert_clean()


@pytest.mark.parametrize("gc_finished", [False, True], ids=["pods kept", "podgc deletes released pods"])
@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_indexed_runs_to_complete_with_every_index_once(crash: str | None, gc_finished: bool) -> None:
    sim = Sim(completions=7, parallelism=3, completion_mode="Indexed", gc_finished=gc_finished)
    sim.run(crash)
    assert sim.status.completed_indexes == "0-6" and sim.status.succeeded == 7  # JOB-47, JOB-48
    assert sim.status.uncounted_succeeded == []  # JOB-30: no uids for Indexed successes
    assert sorted(p.index for p in sim.pods.values() if p.index is not None) == (
        list(range(7)) if not gc_finished else [])
    sim.assert_clean()


def test_indexed_creates_lowest_pending_indexes_first() -> None:  # JOB-21
    status = JobStatusView(start_time=NOW, completed_indexes="0,2", succeeded=2)
    plan = plan_sync(make_snapshot(pod("a", index=1), status=status, completions=8, parallelism=4,
                                   completion_mode="Indexed"), JobMemory(), NOW)
    assert [c.index for c in plan.create] == [3, 4, 5]


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_work_queue_job_completes_after_first_success_and_the_rest_finish(crash: str | None) -> None:
    sim = Sim(completions=None, parallelism=3)  # JOB-14, JOB-53
    sim.run(crash)
    assert sim.status.succeeded == 3 and sim.created == 3
    sim.assert_clean()


def test_succeeded_after_counted_failed_stays_failed() -> None:  # JOB-39, JOB-59
    status = JobStatusView(start_time=NOW, uncounted_failed=["u-a"])
    plan = plan_sync(make_snapshot(pod("a", "Succeeded"), status=status, completions=2), JobMemory(), NOW)
    assert plan.record is None or plan.record.uncounted_succeeded == []
    assert plan.release == ["a"]
    folded = fold(plan.record or status, [pod("a", "Succeeded")], {"u-a"}, JobSpecView(), NOW)
    assert (folded.succeeded, folded.failed) == (0, 1)


def test_too_many_succeeded_pods_warns() -> None:  # JOB-54
    pods = [pod(n, "Succeeded") for n in "abc"]
    plan = plan_sync(make_snapshot(*pods, completions=2, parallelism=3), JobMemory(), NOW)
    assert [e.reason for e in plan.events] == ["TooManySucceededPods", "Completed"]
    assert plan.record and plan.record.uncounted_succeeded == ["u-a", "u-b", "u-c"]


# --- Pods deleted mid-run (JOB-44, JOB-59, JOB-33) -----------------------------------------


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_pod_deleted_by_someone_mid_run_is_counted_failed_once_and_replaced(crash: str | None) -> None:
    sim = Sim(completions=2, parallelism=2)
    sim.sync()
    sim.kubelet()  # both running
    victim = next(iter(sim.pods))
    sim.set(victim, deleting=True, finish_time=sim.now)  # kubectl delete: finalizer holds it
    if crash:
        sim.sync(crash)
    sim.sync()
    assert sim.status.failed + len(sim.status.uncounted_failed) == 1
    sim.now += 30 * S  # past the 10 s backoff (JOB-61)
    sim.run()
    assert (sim.status.failed, sim.status.succeeded) == (1, 2)
    sim.assert_clean()


# --- backoff (JOB-69 to JOB-73, JOB-20, JOB-61) --------------------------------------------


@pytest.mark.parametrize(
    ("failures", "elapsed", "remaining"),
    [
        (0, 0, 0),  # JOB-69: n = 0, no delay
        (1, 0, 10),
        (1, 4, 6),
        (1, 10, 0),
        (1, 50, 0),
        (2, 0, 20),
        (3, 5, 35),
        (6, 0, 320),
        (7, 0, 600),  # 640 s capped at 10 min
        (30, 100, 500),  # cap, no overflow
    ],
    ids=["no failure", "first failure", "first failure 4s ago", "exactly elapsed", "long ago",
         "second doubles", "third 5s ago", "sixth", "seventh hits 10 min cap", "thirtieth capped"],
)
def test_backoff_remaining(failures: int, elapsed: int, remaining: int) -> None:
    record = BackoffRecord(failures_after_last_success=failures, last_failure_time=NOW - elapsed * S)
    assert backoff_remaining(record, NOW) == remaining * S
    assert MAX_BACKOFF == timedelta(minutes=10)


@pytest.mark.parametrize(
    ("before", "succeeded_at", "failed_at", "after"),
    [
        ((2, -50), [], [], (2, -50)),
        ((2, -50), [], [-30, -20], (4, -20)),  # failures only add up
        ((2, -50), [-10], [], (0, None)),  # a success resets
        ((2, -50), [-25], [-30, -20, -5], (2, -5)),  # only failures strictly after the success
        ((0, None), [-5], [-5], (0, None)),  # same instant is not after
    ],
    ids=["nothing new", "failures add", "success resets", "failures after success", "tie is not after"],
)
def test_new_backoff_record(before: tuple[int, int | None], succeeded_at: list[int],
                            failed_at: list[int], after: tuple[int, int | None]) -> None:  # JOB-70
    def rec(n: int, t: int | None) -> BackoffRecord:
        return BackoffRecord(failures_after_last_success=n, last_failure_time=None if t is None else NOW + t * S)
    got = new_backoff_record(rec(*before), [pod(f"s{i}", "Succeeded", finished=NOW + t * S) for i, t in enumerate(succeeded_at)],
                             [pod(f"f{i}", "Failed", finished=NOW + t * S) for i, t in enumerate(failed_at)], NOW)
    assert got == rec(*after)


@pytest.mark.parametrize(
    ("finished_ago", "creates", "requeue"),
    [(3, 0, 7), (9.5, 0, 1), (10, 1, None), (60, 1, None)],
    ids=["7s left: requeue 7s", "0.5s left: requeue at least 1s", "delay over: replace", "long ago: replace"],
)
def test_failed_pod_replacement_waits_for_backoff(finished_ago: float, creates: int, requeue: int | None) -> None:
    snap = make_snapshot(pod("a", "Failed", finished=NOW - timedelta(seconds=finished_ago)), completions=1)
    plan = plan_sync(snap, JobMemory(), NOW)  # JOB-20, JOB-73
    assert len(plan.create) == creates
    assert plan.requeue_after == (None if requeue is None else requeue * S)
    assert plan.backoff.failures_after_last_success == 1 and plan.counted_backoff == ["u-a"]


@pytest.mark.parametrize(("notes", "waits"), [
    ({}, [10, 20, 40]),
    ({"batchd.io/backoff-base-seconds": "2", "batchd.io/backoff-max-seconds": "5"}, [2, 4, 5]),
    ({"batchd.io/backoff-base-seconds": "1"}, [1, 2, 4]),
    ({"batchd.io/backoff-base-seconds": "x"}, [10, 20, 40]),
], ids=["upstream's", "base and cap", "base only", "invalid: upstream's, and a warning"])
def test_a_jobs_annotations_set_its_backoff(notes: dict[str, str], waits: list[int]) -> None:  # JOB-BACKOFF
    sim = Sim(completions=1, backoff_limit=6)
    sim.options = JobOptions.of(notes)
    seen = []
    for _ in range(3):
        sim.sync()  # a Pod is created
        sim.kubelet()
        [running] = [n for n, p in sim.pods.items() if p.phase == "Running"]
        sim.kubelet(fail=[running])
        plan = sim.sync()
        seen.append(int(plan.requeue_after.total_seconds()) if plan.requeue_after else None)
        sim.now += plan.requeue_after or timedelta(0)
    assert seen == waits
    assert ("InvalidAnnotation" in sim.events) == ("x" in notes.values())


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
@pytest.mark.parametrize("mode", ["NonIndexed", "Indexed"])
def test_succeeded_pods_are_deleted_once_counted(mode: str, crash: str | None) -> None:  # JOB-DELETE-SUCCEEDED
    sim = Sim(completions=5, parallelism=2, completion_mode=mode)
    sim.options = JobOptions.of({"batchd.io/delete-succeeded-pods": "true"})
    succeeded_left = []
    for _ in range(40):
        if crash:
            sim.sync(crash)
        sim.sync()
        succeeded_left.append(sum(1 for p in sim.pods.values() if p.phase == "Succeeded"))
        if sim.finished():
            break
        sim.kubelet()
    assert is_true(sim.status, "Complete") and sim.status.succeeded == 5 and len(sim.succeeded_uids) == 5
    assert sim.status.completed_indexes == ("0-4" if mode == "Indexed" else "")
    assert max(succeeded_left) == 0  # none outlives the sync that counts it
    sim.assert_clean()


AFTER_ROWS = [
    # name, read, seen, reported, verdict, seen after, waiting
    ("all complete", [Dependency(name="a", uid="1", outcome="Complete")], {}, [], "met", {}, []),
    ("one running", [Dependency(name="a", uid="1"), Dependency(name="b", uid="2", outcome="Complete")], {}, [],
     "wait", {"a": "1"}, ["a"]),
    ("not created yet", [Dependency(name="a")], {}, [], "wait", {}, ["a"]),
    ("one failed", [Dependency(name="a", uid="1", outcome="Failed")], {}, [], "failed", {}, []),
    ("deleted unfinished", [Dependency(name="a")], {"a": "1"}, [], "failed", {"a": "1"}, []),
    ("replaced by a namesake", [Dependency(name="a", uid="2")], {"a": "1"}, [], "failed", {"a": "1"}, []),
    ("deleted after it completed, as the bridge saw", [Dependency(name="a")], {"a": "1"},
     [Dependency(name="a", uid="1", outcome="Complete", gone=True)], "met", {"a": "1"}, []),
    ("the bridge saw it deleted unfinished", [Dependency(name="a")], {"a": "1"},
     [Dependency(name="a", uid="1", gone=True)], "failed", {"a": "1"}, []),
    ("a namesake's end is not this one's", [Dependency(name="a", uid="2")], {},
     [Dependency(name="a", uid="1", outcome="Failed", gone=True)], "wait", {"a": "2"}, ["a"]),
]


@pytest.mark.parametrize(("read", "seen", "reported", "verdict", "seen_after", "waiting"),
                         [r[1:] for r in AFTER_ROWS], ids=[r[0] for r in AFTER_ROWS])
def test_after_verdict(read: list[Dependency], seen: dict[str, str], reported: list[Dependency], verdict: str,
                       seen_after: dict[str, str], waiting: list[str]) -> None:  # JOB-AFTER
    got = after_verdict(read, seen, reported)
    assert got[:3] == (verdict, seen_after, waiting)


def test_a_report_that_a_completed_job_is_gone_keeps_its_outcome() -> None:  # JOB-AFTER
    m = ended(JobMemory(), Dependency(name="a", uid="1", outcome="Complete"))
    m = ended(m, Dependency(name="a", uid="1", gone=True))
    assert m.after_ended == [Dependency(name="a", uid="1", outcome="Complete", gone=True)]
    assert after_verdict([Dependency(name="a")], {"a": "1"}, m.after_ended)[0] == "met"
    other = ended(m, Dependency(name="a", uid="2", gone=True))  # a namesake's end is its own
    assert other.after_ended == [Dependency(name="a", uid="2", gone=True)]


@pytest.mark.parametrize("end", ["Complete", "Failed", "deleted"])
def test_a_job_waits_for_the_jobs_it_names(end: str) -> None:  # JOB-AFTER
    sim = Sim(completions=2, parallelism=2)
    sim.options = JobOptions.of({"batchd.io/after": "a, b"})
    sim.others = {"a": Dependency(name="a", uid="ua"), "b": Dependency(name="b", uid="ub", outcome="Complete")}
    for _ in range(3):
        sim.sync()
        sim.kubelet()
    assert sim.pods == {} and sim.status.start_time is None and sim.books.waiting == ["a"]
    assert sim.events == ["WaitingForDependencies"]
    sim.others["a"] = Dependency(name="a") if end == "deleted" else Dependency(name="a", uid="ua", outcome=end)
    if end == "Complete":
        sim.run()
        assert is_true(sim.status, "Complete") and sim.status.succeeded == 2
        return
    sim.sync()
    assert ctype(sim.status, "FailureTarget").reason == "DependencyFailed"  # type: ignore[union-attr]
    sim.sync()
    assert is_true(sim.status, "Failed") and sim.created == 0
    assert ctype(sim.status, "Failed").reason == "DependencyFailed"  # type: ignore[union-attr]


@pytest.mark.parametrize(("after", "awaits", "cycle"), [
    ("job", {}, "job → job"),
    ("a", {"a": ["b"], "b": ["job"]}, "job → a → b → job"),
    ("a, c", {"a": ["b"], "b": ["a"], "c": ["job"]}, "job → c → job"),  # the shortest; a ⇄ b is not through it
    ("a", {"a": ["b"], "b": ["c"]}, None),  # a chain that ends
], ids=["itself", "through two", "the shortest of two", "no cycle"])
def test_a_job_in_a_cycle_fails_naming_it_and_searches_once_per_list(after: str, awaits: dict[str, list[str]],
                                                                    cycle: str | None) -> None:  # JOB-AFTER
    sim = Sim(completions=1, parallelism=1)
    sim.options = JobOptions.of({"batchd.io/after": after})
    sim.others = {n: Dependency(name=n, uid=f"u{n}") for n in ("a", "b", "c", "job")}
    sim.awaits = dict(awaits)  # changed below: not the parameter itself
    for _ in range(3):
        sim.sync()
    assert sim.searches == 1 and sim.created == 0
    if cycle is None:
        assert sim.events == ["WaitingForDependencies"] and not sim.status.conditions
        sim.awaits["c"] = ["job"]  # the cycle closes elsewhere: the list here is the same, no search
        sim.sync()
        assert sim.searches == 1
        sim.options = JobOptions.of({"batchd.io/after": "a, c"})  # a new list: searched again
        sim.sync()
        assert sim.searches == 2
        cycle = "job → c → job"
    failing = ctype(sim.status, "FailureTarget") or ctype(sim.status, "Failed")
    assert failing is not None and failing.reason == "DependencyFailed" and failing.message == f"cycle: {cycle}"
    sim.sync()
    assert is_true(sim.status, "Failed") and ctype(sim.status, "Failed").message == f"cycle: {cycle}"  # type: ignore[union-attr]


@pytest.mark.parametrize(("cycle", "message"), [
    (["a", "job", "b", "a"], "cycle: job → b → a → job"),  # a member: the cycle, from itself
    (["a", "b", "a"], "Job a failed"),  # a Job behind the cycle
    ([f"j{i}" for i in range(20)] + ["…", "j0"], "Job a failed"),  # too long to name it: it may be anywhere
])
def test_a_job_waiting_on_a_cycle_fails_with_the_cycle_if_it_is_in_it(cycle: list[str], message: str) -> None:
    if "job" not in cycle and len(cycle) > 3:
        cycle = [*cycle[:5], "job", *cycle[5:]]
    verdict, _, _, why = after_verdict([Dependency(name="a", uid="ua", outcome="Failed", cycle=cycle)], {}, [], me="job")
    assert (verdict, why) == ("failed", message)


def test_a_cycles_message_names_at_most_20_jobs() -> None:
    path = [f"j{i}" for i in range(30)] + ["j0"]
    assert cycle_message(path) == "cycle: " + " → ".join([f"j{i}" for i in range(20)] + ["…", "j0"])
    assert cycle_of(cycle_message(path)) == [f"j{i}" for i in range(20)] + ["…", "j0"]
    assert cycle_of("cycle: a → b → a") == ["a", "b", "a"] and cycle_of("Job a failed") is None


def test_backoff_counts_a_failure_once_across_a_crash_after_step_1() -> None:  # JOB-70, JOB-34
    snap = make_snapshot(pod("a", "Failed", finished=NOW), completions=1)
    first = plan_sync(snap, JobMemory(), NOW)
    assert first.record and first.record.uncounted_failed == ["u-a"]
    again = make_snapshot(pod("a", "Failed", finished=NOW), status=first.record, completions=1)
    assert plan_sync(again, JobMemory(), NOW).backoff.failures_after_last_success == 1  # memory lost
    stored = JobMemory(backoff=first.backoff, counted_backoff=first.counted_backoff)
    assert plan_sync(again, stored, NOW).backoff.failures_after_last_success == 1  # not 2


# --- failure conditions (JOB-63 to JOB-68, JOB-74 to JOB-77, JOB-50) -----------------------


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_backoff_limit_exceeded_sets_failure_target_then_failed(crash: str | None) -> None:
    sim = Sim(completions=3, parallelism=3, backoff_limit=1)
    sim.sync()
    sim.kubelet()
    names = list(sim.pods)
    sim.kubelet(fail=names[:2])  # two failures > backoffLimit 1; the third succeeds
    sim.pods[names[2]] = sim.pods[names[2]].model_copy(update={"phase": "Running", "ready": True})
    sim.succeeded_uids.clear()
    if crash:
        sim.sync(crash)
    plan = sim.sync()
    ft = ctype(sim.status, "FailureTarget")
    assert ft and (ft.reason, ft.message) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert not is_true(sim.status, "Failed")  # JOB-76: the deleted Pod is still terminating
    if not crash:
        assert plan.delete == [names[2]] and names[2] in plan.release  # JOB-74, JOB-50
    assert "BackoffLimitExceeded" in sim.events  # JOB-80 Warning
    sim.run()
    failed = ctype(sim.status, "Failed")
    assert failed and (failed.reason, failed.message) == (ft.reason, ft.message)  # JOB-75
    assert sim.status.completion_time is None  # JOB-77
    assert sim.status.failed == 3 and sim.status.succeeded == 0  # JOB-50: the running Pod counts failed
    sim.assert_clean()


@pytest.mark.parametrize(
    ("restarts", "phase", "limit", "fails"),
    [(1, "Running", 0, True), (0, "Running", 0, False), (2, "Running", 3, False),
     (3, "Pending", 3, True), (5, "Failed", 3, False)],
    ids=["limit 0: any restart", "limit 0: no restart", "below limit", "at limit (>=)", "terminal pods ignored"],
)
def test_on_failure_restart_counts(restarts: int, phase: str, limit: int, fails: bool) -> None:  # JOB-66
    snap = make_snapshot(pod("a", phase, restarts=restarts), restart_policy="OnFailure", backoff_limit=limit,
                         completions=5)
    rec = plan_sync(snap, JobMemory(), NOW).record
    got = ctype(rec, "FailureTarget") if rec else None
    assert (got is not None and got.reason == "BackoffLimitExceeded") == fails


@pytest.mark.parametrize(
    ("started_ago", "suspend", "reason", "requeue"),
    [(61, False, "DeadlineExceeded", None), (60, False, "DeadlineExceeded", None),
     (30, False, None, 30), (600, True, None, None)],
    ids=["past deadline", "exactly at deadline (>=)", "requeue for the deadline", "suspended Job cannot hit it"],
)
def test_active_deadline(started_ago: int, suspend: bool, reason: str | None, requeue: int | None) -> None:  # JOB-67, JOB-68
    status = JobStatusView(start_time=NOW - started_ago * S, active=1)
    plan = plan_sync(make_snapshot(pod("a", ready=True), status=status, active_deadline_seconds=60,
                                   suspend=suspend), JobMemory(), NOW)
    ft = ctype(plan.record, "FailureTarget") if plan.record else None
    assert (ft.reason if ft else None) == reason
    if reason:
        assert ft and ft.message == "Job was active longer than specified deadline"
        assert plan.delete == ["a"] and plan.record and plan.record.uncounted_failed == ["u-a"]  # JOB-74, JOB-50
        assert (plan.record.active, plan.record.ready, plan.record.terminating) == (0, 0, 1)
    assert plan.requeue_after == (None if requeue is None else requeue * S)


def test_existing_failure_target_keeps_failing_and_success_is_never_added() -> None:  # JOB-63, JOB-64, API-29
    status = JobStatusView(start_time=NOW, conditions=[cond("FailureTarget", reason="DeadlineExceeded", message="m")])
    plan = plan_sync(make_snapshot(pod("a", "Succeeded"), status=status, completions=1), JobMemory(), NOW)
    assert plan.record and ctype(plan.record, "SuccessCriteriaMet") is None
    done = fold(plan.record, [pod("a", "Succeeded")], {"u-a"}, JobSpecView(), NOW)
    assert is_true(done, "Failed") and ctype(done, "Failed").reason == "DeadlineExceeded"  # type: ignore[union-attr]


def test_job_failed_while_suspended_gets_a_start_time() -> None:  # JOB-84, API-39
    status = JobStatusView(conditions=[cond("Suspended", reason="JobSuspended", message="Job suspended")])
    sim_snap = make_snapshot(pod("a", "Failed", fin=True), status=status, suspend=True, backoff_limit=0)
    plan = plan_sync(sim_snap, JobMemory(), NOW)
    assert plan.record and ctype(plan.record, "FailureTarget") is not None
    done = fold(plan.record, sim_snap.pods, {"u-a"}, sim_snap.spec, NOW)
    assert is_true(done, "Failed") and done.start_time == NOW
    check_write(sim_snap.status, done, sim_snap.spec)


# --- podReplacementPolicy (JOB-55 to JOB-61, JOB-43, JOB-18) -------------------------------


@pytest.mark.parametrize(
    ("policy", "phase", "counted", "released", "creates", "terminating"),
    [
        ("TerminatingOrFailed", "Running", True, True, 1, 1),  # JOB-59: failed at once, replaced
        ("Failed", "Running", False, False, 0, 1),  # JOB-60: occupies the slot until terminal
        ("Failed", "Failed", True, True, 1, 0),  # terminal: counted and replaced
    ],
    ids=["TerminatingOrFailed: terminating pod counted failed and replaced",
         "Failed: terminating pod neither counted nor replaced",
         "Failed: once terminal it is counted and replaced"],
)
def test_pod_replacement_policy_with_a_terminating_pod(policy: str, phase: str, counted: bool,
                                                        released: bool, creates: int, terminating: int) -> None:
    snap = make_snapshot(pod("a", phase, deleting=True, finished=NOW - 60 * S), completions=2,
                         parallelism=1, pod_replacement_policy=policy)
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.record is not None
    assert (plan.record.uncounted_failed == ["u-a"]) == counted
    assert (plan.release == ["a"]) == released
    assert len(plan.create) == creates and plan.record.terminating == terminating  # JOB-43
    assert plan.record.active == creates


def test_failed_policy_indexed_terminating_index_is_not_pending() -> None:  # JOB-58, JOB-21
    a = pod("a", deleting=True, index=0, finished=NOW - 60 * S)
    plan = plan_sync(make_snapshot(a, completions=4, parallelism=3, completion_mode="Indexed",
                                   pod_replacement_policy="Failed"), JobMemory(), NOW)
    assert [c.index for c in plan.create] == [1, 2]  # 3 - active 0 - terminating 1; index 0 busy
    plan = plan_sync(make_snapshot(a, completions=4, parallelism=3, completion_mode="Indexed",
                                   pod_replacement_policy="TerminatingOrFailed"), JobMemory(), NOW)
    assert [c.index for c in plan.create] == [0, 1, 2]  # JOB-58: pending as soon as it is deleted


@pytest.mark.parametrize("policy", ["TerminatingOrFailed", "Failed"])
def test_slow_terminating_pod_in_sim(policy: str) -> None:
    sim = Sim(completions=1, parallelism=1, pod_replacement_policy=policy)
    sim.sync()
    sim.kubelet()
    (name,) = sim.pods
    sim.set(name, deleting=True, finish_time=sim.now - 60 * S)
    plan = sim.sync()
    assert sim.status.terminating == 1
    assert len(plan.create) == (1 if policy == "TerminatingOrFailed" else 0)  # JOB-55
    sim.kubelet()  # the slow Pod reaches Failed
    sim.now += 60 * S
    sim.run()
    assert (sim.status.succeeded, sim.status.failed) == (1, 1)
    sim.assert_clean()


# --- suspend / resume (JOB-81 to JOB-83, JOB-17) -------------------------------------------


def test_suspend_then_resume() -> None:
    sim = Sim(completions=4, parallelism=2, active_deadline_seconds=3600)
    sim.sync()
    sim.kubelet()
    assert sim.status.start_time == NOW
    sim.spec = sim.spec.model_copy(update={"suspend": True})
    plan = sim.sync()
    assert sorted(plan.release_and_delete) == sorted(sim.pods) and plan.create == []  # JOB-81, no cap
    assert plan.release == [] and sim.status.failed == 0  # JOB-17: not counted
    s = ctype(sim.status, "Suspended")
    assert s and (s.status, s.reason, s.message) == ("True", "JobSuspended", "Job suspended")
    assert sim.status.start_time is None and sim.status.terminating == 2
    assert "Suspended" in sim.events
    sim.kubelet()
    sim.sync()
    assert sim.pods == {} and sim.status.terminating == 0 and sim.status.failed == 0
    sim.now += 100 * S
    sim.spec = sim.spec.model_copy(update={"suspend": False})
    plan = sim.sync()
    s = ctype(sim.status, "Suspended")
    assert s and (s.status, s.reason, s.message, s.last_transition_time) == ("False", "JobResumed", "Job resumed", sim.now)
    assert sim.status.start_time == sim.now and len(plan.create) == 2  # JOB-82
    assert plan.requeue_after == 3600 * S  # JOB-68 from the new startTime
    assert "Resumed" in sim.events
    sim.run()
    assert sim.status.succeeded == 4 and sim.status.failed == 0
    sim.assert_clean()


def test_job_created_suspended_has_no_start_time_and_never_resumed_gets_no_false_condition() -> None:
    plan = plan_sync(make_snapshot(status=JobStatusView(), suspend=True), JobMemory(), NOW)
    assert plan.record and plan.record.start_time is None and plan.create == []  # JOB-83
    assert [e.reason for e in plan.events] == ["Suspended"]
    plan = plan_sync(make_snapshot(status=JobStatusView()), JobMemory(), NOW)
    assert plan.record and ctype(plan.record, "Suspended") is None and plan.record.start_time == NOW  # JOB-82


def test_unchanged_condition_keeps_its_timestamp() -> None:  # JOB-79
    status = JobStatusView(conditions=[cond("Suspended", reason="JobSuspended", message="Job suspended")])
    plan = plan_sync(make_snapshot(status=status, suspend=True), JobMemory(), NOW)
    assert plan.record is None and plan.events == []


# --- Job deleting / gone / finished (JOB-35, JOB-36, JOB-3, JOB-4) ---------------------------


def test_deleting_job_records_finished_pods_and_releases_every_finalizer() -> None:
    pods = [pod("run"), pod("ok", "Succeeded"), pod("bad", "Failed"), pod("done", "Succeeded", fin=False)]
    plan = plan_sync(make_snapshot(*pods, deleting=True, completions=5, parallelism=5), JobMemory(), NOW)
    assert plan.create == [] and plan.delete == [] and plan.release_and_delete == []  # JOB-27
    assert sorted(plan.release) == ["bad", "ok", "run"]  # JOB-35
    assert plan.record and plan.record.uncounted_succeeded == ["u-ok"]
    assert plan.record.uncounted_failed == ["u-bad"]  # JOB-36: the running Pod is not counted


def test_gone_job_releases_every_finalizer_and_writes_nothing() -> None:
    pods = [pod("run"), pod("ok", "Succeeded"), pod("free", fin=False), pod("again", uid="u-r")]
    plan = plan_sync(make_snapshot(*pods, gone=True), JobMemory(finalizers_removed=["u-r"]), NOW)
    assert plan.record is None and sorted(plan.release) == ["again", "ok", "run"]
    assert plan.create == plan.delete == plan.release_and_delete == [] and not plan.finished


@pytest.mark.parametrize("final", ["Complete", "Failed"])
def test_finished_job_only_releases(final: str) -> None:  # JOB-4
    status = JobStatusView(start_time=NOW, conditions=[cond(final)], completion_time=NOW if final == "Complete" else None)
    memory = JobMemory(backoff=BackoffRecord(failures_after_last_success=3, last_failure_time=NOW))
    plan = plan_sync(make_snapshot(pod("late", "Failed"), pod("x", fin=False), status=status), memory, NOW)
    assert plan.finished and plan.release == ["late"] and plan.record is None
    assert plan.create == plan.delete == plan.release_and_delete == [] and plan.events == []
    assert plan.backoff == BackoffRecord()  # JOB-72: dropped once finished


# --- scale-down (JOB-15 to JOB-17, JOB-19) ---------------------------------------------------


def test_nonindexed_scale_down_removes_least_advanced_first() -> None:
    pods = [pod("old-ready", ready=True, created=NOW - 90 * S), pod("pending", "Pending"),
            pod("not-ready"), pod("new-ready", ready=True, created=NOW - 10 * S)]
    snap = make_snapshot(*pods, status=JobStatusView(start_time=NOW, active=4, ready=2), completions=10, parallelism=1)
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.release_and_delete == ["pending", "not-ready", "new-ready"] and plan.create == []
    assert plan.record and (plan.record.active, plan.record.ready, plan.record.terminating) == (1, 1, 3)
    assert plan.release == [] and plan.record.failed == 0  # JOB-17: never counted


def test_indexed_scale_down_out_of_range_and_duplicates_first_and_no_create() -> None:  # JOB-13, JOB-15, JOB-16
    pods = [pod("i0-pending", "Pending", index=0), pod("i0-run", index=0, ready=True),
            pod("i9", index=9), pod("noidx"), pod("i1", index=1, ready=True)]
    snap = make_snapshot(*pods, completions=4, parallelism=4, completion_mode="Indexed")
    plan = plan_sync(snap, JobMemory(), NOW)
    assert sorted(plan.release_and_delete) == ["i0-pending", "i9", "noidx"]
    assert plan.create == []  # JOB-16: deletion wins, indexes 2 and 3 next sync


def test_out_of_range_failed_pod_is_released_but_not_counted() -> None:  # JOB-13, JOB-36, JOB-52
    snap = make_snapshot(pod("i9", "Failed", index=9), completions=4, parallelism=1, completion_mode="Indexed")
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.release == ["i9"] and plan.record and plan.record.uncounted_failed == []
    assert plan.backoff == BackoffRecord()


# --- caps (JOB-19, JOB-37) ----------------------------------------------------------------------


def test_create_cap_per_sync() -> None:  # JOB-19
    plan = plan_sync(make_snapshot(completions=2000, parallelism=800), JobMemory(), NOW)
    assert len(plan.create) == 500 and plan.record and plan.record.active == 500


def test_scale_down_cap_but_suspend_has_none() -> None:  # JOB-19, JOB-81
    pods = [pod(f"p{i}") for i in range(700)]
    plan = plan_sync(make_snapshot(*pods, completions=2000, parallelism=100), JobMemory(), NOW)
    assert len(plan.release_and_delete) == 500
    plan = plan_sync(make_snapshot(*pods, completions=2000, parallelism=100, suspend=True), JobMemory(), NOW)
    assert len(plan.release_and_delete) == 700


@pytest.mark.parametrize("mode", ["NonIndexed", "Indexed"])
def test_max_uncounted_pods_cap_delays_completion(mode: str) -> None:  # JOB-37
    sim = Sim(completions=600, parallelism=600, completion_mode=mode)
    sim.window = WINDOW  # JOB-92: as a worker reads them; the 500 of JOB-37 fit in its window
    for i in range(600):
        sim.pods[f"p{i}"] = pod(f"p{i}", "Succeeded", index=i if mode == "Indexed" else None)
    plan = sim.sync()
    assert len(plan.release) == 500 and plan.requeue_after == S
    assert is_true(sim.status, "SuccessCriteriaMet") and not is_true(sim.status, "Complete")
    assert sim.status.succeeded == 500
    sim.sync()
    assert is_true(sim.status, "Complete") and sim.status.succeeded == 600
    sim.assert_clean()


# --- fold (JOB-33, JOB-40, JOB-75 to JOB-77, API-38 to API-46) ----------------------------------


@pytest.mark.parametrize(
    ("pods", "removed", "counts", "left"),
    [
        ([pod("a", "Succeeded"), pod("b", "Failed")], {"u-a", "u-b"}, (1, 1), 0),
        ([pod("a", "Succeeded", fin=False), pod("b", "Failed", fin=False)], set(), (1, 1), 0),
        ([], set(), (1, 1), 0),
        ([pod("a", "Succeeded"), pod("b", "Failed")], {"u-a"}, (1, 0), 1),
    ],
    ids=["released this sync", "finalizer already gone", "pods already deleted", "one still holds it"],
)
def test_fold_moves_released_uids(pods: list[PodInfo], removed: set[str], counts: tuple[int, int], left: int) -> None:
    status = JobStatusView(start_time=NOW, uncounted_succeeded=["u-a"], uncounted_failed=["u-b"])
    out = fold(status, pods, removed, JobSpecView(completions=5), NOW)
    assert (out.succeeded, out.failed) == counts
    assert len(out.uncounted_succeeded) + len(out.uncounted_failed) == left


@pytest.mark.parametrize(
    ("update", "pods", "finishes"),
    [
        ({}, [], True),
        ({"terminating": 1}, [], False),  # JOB-76
        ({"uncounted_failed": ["u-z"]}, [pod("z", "Failed")], False),  # JOB-40
        ({}, [pod("late", "Succeeded")], False),  # JOB-37: not all recorded yet
        ({}, [pod("free", "Succeeded", fin=False)], True),
    ],
    ids=["all accounted", "terminating pods", "uncounted uid", "pod holding finalizer", "released pod"],
)
@pytest.mark.parametrize("interim", ["SuccessCriteriaMet", "FailureTarget"])
def test_fold_finishes_only_when_nothing_is_pending(interim: str, update: dict[str, Any],
                                                    pods: list[PodInfo], finishes: bool) -> None:
    status = JobStatusView(start_time=NOW - 10 * S, succeeded=1,
                           conditions=[cond(interim, reason="R", message="M")]).model_copy(update=update)
    out = fold(status, pods, set(), JobSpecView(), NOW)
    final = "Complete" if interim == "SuccessCriteriaMet" else "Failed"
    assert is_true(out, final) == finishes
    if finishes:
        c = ctype(out, final)
        assert c and (c.reason, c.message, c.last_transition_time) == ("R", "M", NOW)  # JOB-75, JOB-79
        assert out.completion_time == (NOW if final == "Complete" else None)  # JOB-77
        check_write(status, out, JobSpecView())


@pytest.mark.parametrize(
    ("snap", "conditions", "removed", "plan", "expect"),
    [
        (make_snapshot(pod("a", "Succeeded", fin=False)), [("Complete", "True")], set(), {}, (True, None)),
        (make_snapshot(gone=True), [], set(), {}, (True, None)),  # JOB-5: gone, nothing holds
        (make_snapshot(pod("a", "Succeeded")), [("Complete", "True")], set(), {}, (False, S)),  # JOB-3
        (make_snapshot(pod("a", "Succeeded")), [("Complete", "True")], {"u-a"}, {}, (True, None)),  # JOB-38
        (make_snapshot(pod("a")), [], set(), {"requeue_after": 30 * S}, (False, 30 * S)),
        (make_snapshot(pod("a")), [], set(), {}, (False, None)),  # nothing to wait for but a poke
        (make_snapshot(pod("a")), [], set(), {"requeue_after": 30 * S, "release": ["a"]}, (False, S)),
    ],
    ids=["finished, all released", "gone", "finished, one holds", "finished, its removal asked",
         "the plan's wait", "no wait", "acted: follow through"],
)
def test_after_sync_ends_once_nothing_holds_and_follows_through_what_it_started(
        snap: JobSnapshot, conditions: list[tuple[str, str]], removed: set[str], plan: dict[str, Any],
        expect: tuple[bool, timedelta | None]) -> None:  # JOB-5
    folded = snap.status.model_copy(update={"conditions": [Condition(type=t, status=v) for t, v in conditions]})
    assert after_sync(snap, folded, SyncPlan(**plan), removed, set()) == expect


# --- index strings (JOB-48, JOB-49) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("indexes", "text"),
    [(set(), ""), ({0}, "0"), ({0, 1}, "0,1"), ({0, 1, 2}, "0-2"), ({1, 3, 4, 5, 7}, "1,3-5,7"),
     ({5, 3, 1, 2}, "1-3,5"), ({0, 1, 3, 4}, "0,1,3,4"), ({9, 10, 11, 20, 21}, "9-11,20,21")],
    ids=["empty", "single", "pair stays a pair", "run of three", "upstream example", "unsorted input",
         "two pairs", "run then pair"],
)
def test_format_indexes(indexes: set[int], text: str) -> None:
    assert format_indexes(indexes) == text
    assert parse_indexes(text, 100) == indexes


@pytest.mark.parametrize(
    ("text", "completions", "indexes"),
    [
        ("", 5, set()),
        ("1,3-5,7", 10, {1, 3, 4, 5, 7}),
        ("x,2,3-y,4", 10, {2, 4}),  # bad intervals skipped
        ("1,6,2", 5, {1}),  # an interval at >= completions stops the parse
        ("2-9", 5, {2, 3, 4}),  # end clamped (elastic scale-down)
        ("0-2,3-4", 10, {0, 1, 2, 3, 4}),
        ("+3", 10, {3}),  # Go's Atoi accepts a sign
        (" 3", 10, set()),
        ("4-2", 10, set()),
    ],
    ids=["empty", "canonical", "garbage skipped", "stops at completions", "end clamped",
         "adjacent intervals merge", "plus sign", "space is garbage", "reversed interval"],
)
def test_parse_indexes_is_lenient(text: str, completions: int, indexes: set[int]) -> None:
    assert parse_indexes(text, completions) == indexes


# --- times ----------------------------------------------------------------------------------------


def test_a_job_using_every_policy_field_gets_no_warning() -> None:  # issue 11: UnsupportedField is gone
    snap = make_snapshot(
        completions=2, parallelism=2, completion_mode="Indexed", backoff_limit_per_index=1, max_failed_indexes=1,
        pod_failure_policy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
        success_policy={"rules": [{"succeededCount": 1}]})
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.events == [] and [c.index for c in plan.create] == [0, 1]


@pytest.mark.parametrize(
    "call",
    [lambda now: plan_sync(make_snapshot(), JobMemory(), now),
     lambda now: fold(JobStatusView(), [], set(), JobSpecView(), now),
     lambda now: backoff_remaining(BackoffRecord(), now)],
    ids=["plan_sync", "fold", "backoff_remaining"],
)
def test_naive_now_is_rejected(call: Any) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        call(datetime(2026, 3, 1, 12, 0))


def test_first_sync_initialises_status() -> None:  # JOB-83, JOB-41 to JOB-43
    plan = plan_sync(make_snapshot(status=JobStatusView(), completions=3, parallelism=2), JobMemory(), NOW)
    assert plan.record == JobStatusView(active=2, start_time=NOW)
    assert len(plan.create) == 2 and plan.requeue_after is None


# --- crash recovery at the start of a sync (JOB-34, JOB-38) ------------------------------------


@pytest.mark.parametrize(
    ("pods", "removed", "moved"),
    [
        ([pod("a", "Succeeded", fin=False), pod("b", "Failed", fin=False)], [], (1, 1)),
        ([], [], (1, 1)),
        ([pod("a", "Succeeded"), pod("b", "Failed")], ["u-a", "u-b"], (1, 1)),
        ([pod("a", "Succeeded"), pod("b", "Failed")], [], (0, 0)),
    ],
    ids=["crash after step 2: finalizers gone", "crash after step 2: pods deleted since",
         "removal remembered durably (JOB-38)", "crash after step 1: still held, not counted yet"],
)
def test_sync_starts_with_step_3(pods: list[PodInfo], removed: list[str], moved: tuple[int, int]) -> None:
    status = JobStatusView(start_time=NOW, uncounted_succeeded=["u-a"], uncounted_failed=["u-b"])
    plan = plan_sync(make_snapshot(*pods, status=status, completions=5, parallelism=0),
                     JobMemory(finalizers_removed=removed), NOW)
    rec = plan.record or status
    assert (rec.succeeded, rec.failed) == moved  # JOB-34
    assert len(rec.uncounted_succeeded) + len(rec.uncounted_failed) == 2 - sum(moved)
    assert sorted(plan.release) == sorted(p.name for p in pods if p.has_finalizer)  # released (again)
    done = fold(rec, pods, {*removed, *(f"u-{n}" for n in plan.release)}, JobSpecView(), NOW)
    assert (done.succeeded, done.failed) == (1, 1)  # never twice


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_job_deleted_mid_run_frees_every_finalizer(crash: str | None) -> None:  # JOB-35, JOB-36, JOB-3
    sim = Sim(completions=6, parallelism=3)
    sim.sync()
    sim.kubelet()
    sim.kubelet()  # three succeed
    sim.sync()
    sim.kubelet()  # three more running
    sim.kubelet(fail=[n for n, p in sim.pods.items() if p.phase == "Running"][:1])  # one fails
    sim.deleting = True  # Foreground deletion: the Job waits for its Pods
    if crash:
        sim.sync(crash)
    for _ in range(3):  # JOB-92: a window of 2 Pods takes two syncs
        plan = sim.sync()
        assert plan.create == []
    assert [p.name for p in sim.pods.values() if p.has_finalizer] == []
    assert (sim.status.succeeded, sim.status.failed) == (5, 1)  # finished Pods counted once
    assert not sim.finished()
    sim.pods["orphan"] = pod("orphan")  # e.g. created just before the deletion
    sim.gone = True
    plan = sim.sync()
    assert plan.record is None and plan.release == ["orphan"]


def test_prune_finalizers_removed_keeps_only_uids_a_fresh_read_still_shows_held() -> None:  # JOB-38
    snap = make_snapshot(pod("held"), pod("free", fin=False))
    assert prune_finalizers_removed(snap, ["u-gone", "u-free", "u-held"]) == ["u-held"]


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_pruned_memory_still_counts_each_pod_once(crash: str | None) -> None:
    sim = Sim(completions=6, parallelism=3, gc_finished=True)
    for _ in range(40):
        sim.memory = sim.memory.model_copy(update={
            "finalizers_removed": prune_finalizers_removed(sim.snapshot(), sim.memory.finalizers_removed)})
        if crash:
            sim.sync(crash)
        sim.sync()
        if sim.finished():
            break
        sim.kubelet()
    assert sim.status.succeeded == 6
    assert prune_finalizers_removed(sim.snapshot(), sim.memory.finalizers_removed) == []
    sim.assert_clean()


# --- release of Pods that stopped matching the selector (JOB-26) -----------------------------------


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_a_relabeled_running_pod_is_released_not_counted_and_replaced(crash: str | None) -> None:
    sim = Sim(completions=3, parallelism=2)
    sim.sync()
    sim.kubelet()  # job-1 and job-2 Running
    sim.relabeled.add("job-1")
    plan = sim.sync(crash)
    assert plan.release_unmatched == ["job-1"] and len(plan.create) == 1  # released first, replaced at once
    assert plan.action == "pods_created"
    sim.run(crash)
    assert (sim.status.succeeded, sim.status.failed, sim.created) == (3, 0, 4)
    assert "job-1" not in sim.pods and not sim.released["job-1"].has_finalizer  # not the Job's any more
    sim.assert_clean()


@pytest.mark.parametrize(
    ("unmatched", "status", "counts", "release_unmatched"),
    [
        (pod("run"), JobStatusView(), (0, 0), ["run"]),
        (pod("ok", "Succeeded"), JobStatusView(), (0, 0), ["ok"]),
        (pod("bad", "Failed"), JobStatusView(), (0, 0), ["bad"]),
        (pod("ok", "Succeeded"), JobStatusView(uncounted_succeeded=["u-ok"]), (1, 0), ["ok"]),
        (pod("gone", "Succeeded", fin=False), JobStatusView(), (0, 0), ["gone"]),
    ],
    ids=["running: released, not active", "succeeded before counted: never counted",
         "failed before counted: neither counted nor toward backoff", "uid already uncounted: folded as released (JOB-33)",
         "finalizer already gone: the reference still goes"],
)
def test_unmatched_pods_are_released_and_never_counted(unmatched: PodInfo, status: JobStatusView,
                                                       counts: tuple[int, int], release_unmatched: list[str]) -> None:
    st = status.model_copy(update={"start_time": NOW - 100 * S})
    snap = make_snapshot(pod("mine"), status=st, completions=5, parallelism=1).model_copy(
        update={"unmatched": [unmatched]})
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.release_unmatched == release_unmatched
    assert plan.release == [] and plan.create == [] and plan.backoff == BackoffRecord()
    rec = plan.record or st
    assert (rec.succeeded, rec.failed) == counts and rec.active == 1
    assert unmatched.uid not in rec.uncounted_succeeded + rec.uncounted_failed


@pytest.mark.parametrize(
    ("state", "release_unmatched", "release"),
    [
        ({"deleting": True}, [], ["run"]),
        ({"gone": True}, [], ["run"]),
        ({"status": JobStatusView(start_time=NOW, completion_time=NOW, conditions=[cond("Complete")])}, [], ["run"]),
        ({}, ["run"], []),
    ],
    ids=["job being deleted: kept owned (the GC deletes it), finalizer dropped uncounted (JOB-36)",
         "job gone: finalizer dropped (JOB-3)", "job finished: finalizer dropped (JOB-3)", "live job: released"],
)
def test_unmatched_pod_of_a_job_that_is_not_live_only_loses_its_finalizer(
        state: dict[str, Any], release_unmatched: list[str], release: list[str]) -> None:
    snap = make_snapshot(completions=5, **state).model_copy(update={"unmatched": [pod("run")]})
    plan = plan_sync(snap, JobMemory(), NOW)
    assert (plan.release_unmatched, plan.release) == (release_unmatched, release)
    assert plan.record is None or plan.record.uncounted_failed == []


# --- metric labels decided by the sync: action (POL-50) and creation reason (POL-56) -------------


@pytest.mark.parametrize(
    ("snap", "action"),
    [
        (make_snapshot(suspend=True), "pods_deleted"),
        (make_snapshot(pod("a"), pod("b"), completions=5, parallelism=1), "pods_deleted"),
        (make_snapshot(completions=2, parallelism=2), "pods_created"),
        (make_snapshot(pod("f", "Failed", finished=NOW - S), completions=1), "pods_created"),
        (make_snapshot(pod("f", "Failed", index=0, finished=NOW - S), completions=1, completion_mode="Indexed",
                       backoff_limit_per_index=1), "pods_created"),
        (make_snapshot(pod("a"), completions=1), "tracking"),
        (make_snapshot(pod("a", "Succeeded"), completions=1), "tracking"),
        (make_snapshot(pod("f", "Failed"), completions=1, backoff_limit=0), "reconciling"),
        (make_snapshot(pod("a"), completions=2, deleting=True), "reconciling"),
        (make_snapshot(status=JobStatusView(start_time=NOW - 100 * S, conditions=[cond("FailureTarget")])),
         "reconciling"),
    ],
    ids=["suspend path, nothing to delete", "excess pods deleted", "pods created",
         "creation held back by the backoff", "per-index creation held back", "nothing to do",
         "completions reached", "finishing condition found", "job being deleted", "interim condition present"],
)
def test_sync_action_label(snap: JobSnapshot, action: str) -> None:  # POL-50
    assert plan_sync(snap, JobMemory(), NOW).action == action


@pytest.mark.parametrize(
    ("snap", "reason"),
    [
        (make_snapshot(completions=2), "new"),
        (make_snapshot(pod("f", "Failed", finished=NOW - 100 * S), completions=2), "recreate_terminating_or_failed"),
        (make_snapshot(pod("f", "Failed", finished=NOW - 100 * S), completions=2, pod_replacement_policy="Failed"),
         "recreate_failed"),
        (make_snapshot(pod("t", deleting=True), pod("a"), completions=3, parallelism=3,
                       pod_replacement_policy="Failed"), "recreate_terminating_or_failed"),
        (make_snapshot(status=JobStatusView(start_time=NOW, failed=1), completions=2), "recreate_terminating_or_failed"),
        (make_snapshot(status=JobStatusView(start_time=NOW, failed=1), completions=2,
                       pod_replacement_policy="Failed"), "recreate_failed"),
    ],
    ids=["first pods", "a failure, TerminatingOrFailed", "a failure, policy field Failed",
         "a terminating pod, no failure", "failures counted earlier", "failures counted earlier, Failed"],
)
def test_pods_creation_reason_label(snap: JobSnapshot, reason: str) -> None:  # POL-56
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.create and plan.creation_reason == reason


@pytest.mark.parametrize(("conditions", "end"), [
    ([], None),
    ([("SuccessCriteriaMet", "True")], "Complete"),  # JOB-76: the success is decided
    ([("FailureTarget", "True")], "Failed"),  # JOB-75
    ([("FailureTarget", "False")], None),  # JOB-64: only True counts
    ([("SuccessCriteriaMet", "True"), ("Complete", "True")], "Complete"),
    ([("Suspended", "True")], None),
])
def test_decided_end_counts_an_interim_condition_as_the_end_it_becomes(conditions, end) -> None:
    assert decided_end([Condition(type=t, status=s) for t, s in conditions]) == end


# --- a snapshot bounded by one sync's work (JOB-92) -----------------------------------------


def _crowd(n: int, **spec: Any) -> JobSnapshot:
    """A Job of ``n`` Pods: a tenth pending, six tenths running (half ready), two succeeded, one failed."""
    kinds = ["Pending"] + ["Running"] * 6 + ["Succeeded"] * 2 + ["Failed"]
    pods = [pod(f"p{i}", kinds[i % 10], index=i if spec.get("completion_mode") == "Indexed" else None,
                ready=kinds[i % 10] == "Running" and i % 2 == 0, created=NOW - 60 * S, finished=NOW - S,
                uid=f"{i:08d}-0000-4000-8000-000000000000") for i in range(n)]
    return make_snapshot(*pods, completions=n, parallelism=n, backoff_limit=n, **spec)


@pytest.mark.parametrize("mode", ["NonIndexed", "Indexed"])
def test_a_snapshot_of_100000_pods_is_recorded_under_temporals_warning_limit(mode: str) -> None:
    from temporalio.contrib.pydantic import pydantic_data_converter

    whole = _crowd(100_000, completion_mode=mode)
    bounded = bound_snapshot(whole, JobMemory())
    size = len(pydantic_data_converter.payload_converter.to_payloads([bounded])[0].data)
    assert size < 256 * 1024, size  # the dev server warns above 256 KB, fails the task above 2 MB
    assert len(bounded.pods) <= 2 * WINDOW and bounded.rest.pods == 100_000 - len(bounded.pods)
    a, b = plan_sync(whole, JobMemory(), NOW), plan_sync(bounded, JobMemory(), NOW)
    assert a.record is not None and b.record is not None
    for field in ("active", "ready", "terminating", "succeeded", "failed", "completed_indexes"):
        assert getattr(b.record, field) == getattr(a.record, field), field
    assert len(b.release) == len(a.release) == 500  # JOB-37
    assert [c.index for c in b.create] == [c.index for c in a.create]  # JOB-21


def test_a_window_of_long_rows_narrows_to_stay_within_the_snapshot_budget() -> None:  # JOB-92
    crowd = _crowd(5_000, completion_mode="Indexed")
    # names of 253 characters (the API's limit): a full window's rows would take 500 KB
    whole = crowd.model_copy(update={"pods": [p.model_copy(update={"name": f"{i:05d}" + "n" * 248})
                                              for i, p in enumerate(crowd.pods)]})
    assert len(to_json(bound_snapshot(whole, JobMemory()))) > SNAPSHOT_BUDGET
    fitted, size = fit_snapshot(whole, JobMemory())
    assert size == len(to_json(fitted)) <= SNAPSHOT_BUDGET and 0 < len(fitted.pods) < 2 * WINDOW
    a, b = plan_sync(whole, JobMemory(), NOW), plan_sync(fitted, JobMemory(), NOW)
    assert a.record is not None and b.record is not None
    for field in ("active", "ready", "terminating", "failed"):
        assert getattr(b.record, field) == getattr(a.record, field), field
    # fewer finished Pods are recorded a sync, the lowest indexes first; the rest in the next ones
    assert 0 < b.record.succeeded < a.record.succeeded
    assert [c.index for c in b.create] == [c.index for c in a.create]  # JOB-21


def test_the_index_strings_of_100000_indexes_travel_packed_under_the_warning_limit() -> None:  # JOB-95
    from temporalio.contrib.pydantic import pydantic_data_converter

    # the longest strings 100,000 indexes make: every other index complete, the others failed
    done, failed = format_indexes(range(0, 100_000, 2)), format_indexes(range(1, 100_000, 2))
    snap = make_snapshot(completions=100_000, parallelism=100_000, backoff_limit_per_index=0,
                         status=JobStatusView(completed_indexes=done, failed_indexes=failed, succeeded=50_000))
    assert len(done) + len(failed) > 512 * 1024
    converter = pydantic_data_converter.payload_converter
    [payload] = converter.to_payloads([snap])
    assert len(payload.data) < 16 * 1024, len(payload.data)
    [back] = converter.from_payloads([payload], [JobSnapshot])
    assert back == snap and back.status.completed_indexes == done
    short = JobStatusView(completed_indexes="0-9,11")  # short strings stay readable in the UI
    assert b'"completedIndexes":"0-9,11"' in converter.to_payloads([short])[0].data


def test_a_finishing_job_deletes_the_pods_beyond_the_window_before_it_writes_the_condition() -> None:  # JOB-74
    sim = Sim(completions=9, parallelism=9, backoff_limit=0)
    sim.window = 2
    sim.sync()
    sim.kubelet()
    sim.kubelet(fail=list(sim.pods)[:1])  # one failure > backoffLimit 0; the other eight succeed
    for name, p in sim.pods.items():
        if p.phase == "Succeeded":
            sim.pods[name] = p.model_copy(update={"phase": "Running", "ready": True})
    deleted = []
    for _ in range(3):
        plan = sim.sync()
        assert plan.record is None and plan.release == [] and len(plan.delete) == 2  # only the window's
        deleted += plan.delete
    plan = sim.sync()
    assert is_true(sim.status, "FailureTarget") and len(set(deleted + plan.delete)) == 8
    sim.run()
    assert is_true(sim.status, "Failed") and sim.status.failed == 9  # JOB-50: each Pod counted once
    sim.assert_clean()


def test_an_index_whose_waiting_pod_is_beyond_the_window_is_not_created_afresh() -> None:  # POL-23, JOB-92
    waiting = [pod(f"f{i}", "Failed", index=i, finished=NOW - 100 * S) for i in range(6)]
    snap = make_snapshot(*waiting, completions=6, parallelism=6, completion_mode="Indexed",
                         backoff_limit_per_index=3, failed_indexes="")
    whole = plan_sync(snap, JobMemory(), NOW)
    bounded = bound_snapshot(snap, JobMemory(), window=2)
    assert bounded.rest.pending_indexes == "0,1"  # 2 to 5 wait on Pods beyond the window
    plan = plan_sync(bounded, JobMemory(), NOW)
    assert [(c.index, c.failure_count) for c in plan.create] == [(0, 1), (1, 1)]
    assert [(c.index, c.failure_count) for c in whole.create] == [(i, 1) for i in range(6)]


def test_a_per_index_job_with_thousands_of_waiting_pods_keeps_its_window() -> None:  # JOB-92, JOB-73
    waiting = [pod(f"f{i}", "Failed", index=i, finished=NOW - S) for i in range(3000)]
    snap = make_snapshot(*waiting, completions=3000, parallelism=3000, completion_mode="Indexed",
                         backoff_limit_per_index=1, failed_indexes="")
    memory = JobMemory(counted_backoff=[p.uid for p in waiting])  # each failure already in the (unused) record
    bounded = bound_snapshot(snap, memory)
    assert len(bounded.pods) == WINDOW and bounded.rest.pods == 2500
    assert [p.index for p in bounded.pods] == list(range(WINDOW))  # the lowest waiting indexes


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_failures_recorded_after_the_success_condition_still_count(crash: str | None) -> None:  # JOB-51, JOB-92
    """More Pods to record than a sync takes: the sync that meets the completions writes
    SuccessCriteriaMet before the Pods that failed on their own are all recorded (found with
    100,000 Pods, 481 failures of 10,000 went uncounted)."""
    sim = Sim(completions=None, parallelism=6, backoff_limit=10)  # a work queue: done at its first success
    sim.window = 1
    sim.sync()
    sim.kubelet()
    sim.kubelet(fail=list(sim.pods)[:3])  # three fail, three succeed, in the same second
    sim.run(crash)
    assert (sim.status.succeeded, sim.status.failed) == (3, 3) and len(sim.failed_uids) == 3
    sim.assert_clean()
