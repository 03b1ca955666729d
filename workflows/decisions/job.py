"""Pure decisions of the Job controller: one sync of upstream ``syncJob`` over a fresh snapshot.

Layer: workflows, pure (no I/O, no wall clock, no temporalio; Pod name suffixes come from the
caller). One sync is :func:`sync`, steps the Job workflow hands to the executor
(workflows/execute.py). Its first step reads the Job and its Pods into a :class:`JobSnapshot`
whose window holds the Pods the sync may act on and whose tally counts the others (JOB-92,
workflows/models/jobpods.py); :func:`plan_sync` turns it and the durable :class:`JobMemory` into a
:class:`SyncPlan`; the next steps carry it out with idempotent activities (release the Pods
that stopped matching the selector, deletes, creates, step 1 write ``record``, step 2 remove the
finalizers of ``release``), and :func:`fold` (step 3) gives the status to write if it changed. Every time is passed in as an aware
datetime; a naive one is a bug and raises ValueError.

Rule ids are those of ``docs/job.md``: ``JOB-n`` for the controller, ``POL-n`` for podFailurePolicy,
backoffLimitPerIndex, successPolicy, elastic Indexed Jobs and the metrics; ``API-n`` are the API
server's rules in ``docs/kubesim.md``. Every decision is
total over what the API server accepts: an instant beyond what ``datetime`` holds (a deadline of
2**63-1 seconds) means "never". Deliberate differences from upstream:

* Finalizer removals are remembered durably (``JobMemory.finalizers_removed``, JOB-38) and a
  failure's contribution to the backoff record is remembered by uid
  (``JobMemory.counted_backoff``), so a sync re-run after a crash between any two steps
  neither double counts nor loses a count (JOB-33, JOB-34, JOB-39, JOB-70). :func:`prune_finalizers_removed`
  keeps that memory bounded however many Pods the Job runs.
* The Job is not declared finished (``Complete``/``Failed``, step 3) while any Pod of the
  snapshot still holds the tracking finalizer and has not been released; this is what
  "cannot be marked finished" means after the MaxUncountedPods cap (JOB-37), and it guarantees
  that no finalizer is left behind once the Job has finished.
* Suspending clears ``status.startTime`` (KEP-5440, upstream since v1.35) so that resuming can
  set it to ``now`` (JOB-82) without breaking API-41 (kubesim enforces the pre-fix rule that an
  unsuspended Job's startTime cannot change). A Job resumed while its startTime is still set
  keeps it.
* A wake-up is never planned more than :data:`MAX_REQUEUE` ahead: a far deadline is simply
  looked at again then (upstream's work queue would hold the far instant in memory).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from workflows.execute import Call, Emit, Log, Notify, Patched, Steps
from workflows.jobmetrics import POD_FAILURES_HANDLED, PODS_CREATION, completion_mode
from workflows.models.common import (
    COMPLETE,
    FAILED,
    INVALID_ANNOTATION,
    JOB_COMPLETE_EVENT,
    JOB_FAILED_EVENT,
    CloudEvent,
    Condition,
    EventInput,
    EventType,
    ObjectRef,
    finished_condition,
)
from workflows.models.job import (
    AFTER_ANNOTATION,
    ARROW,
    CYCLE_PREFIX,
    JOB_COMPONENT,
    BackoffRecord,
    CreatePodsInput,
    CreatePodsResult,
    Cycle,
    CycleInput,
    DeletePodsInput,
    Dependencies,
    DependenciesInput,
    Dependency,
    JobEvent,
    JobMemory,
    JobOptions,
    JobSnapshot,
    JobSpecView,
    JobStatusView,
    ObserveJobInput,
    PodInfo,
    PodsResult,
    PodToCreate,
    ReleaseInput,
    ReleaseUnmatchedInput,
    SuccessPolicy,
    SyncPlan,
    WriteStatusInput,
    create_job_pods,
    delete_job_pods,
    find_job_cycle,
    observe_job,
    read_job_dependencies,
    release_job_pods,
    release_unmatched_job_pods,
    write_job_status,
)
from workflows.models.jobpods import (
    active_pods_order,
    calculate_failed_indexes,
    count_covered,
    format_indexes,
    get_fail_job_message,
    get_pods_with_delayed_deletion_per_index,
    is_active_pod,
    match_pod_failure_policy,
    parse_indexes,
    parse_intervals,
    pod_counts_as_failed,
    pod_failed,
)
from workflows.policies import Backoff
from workflows.times import plus_seconds

#: JOB-37: step 1 stops recording once new indexes + uncounted uids reach this many.
MAX_UNCOUNTED_PODS = 500
#: JOB-19: creates and scale-down deletes per sync.
MAX_POD_CREATE_DELETE_PER_SYNC = 500
#: JOB-69: Pod recreation backoff, base and cap.
DEFAULT_BACKOFF = timedelta(seconds=10)
MAX_BACKOFF = timedelta(minutes=10)
#: JOB-73: the shortest requeue.
MIN_REQUEUE = timedelta(seconds=1)
#: The longest planned wake-up; a farther deadline is re-examined then (issue 14: totality).
MAX_REQUEUE = timedelta(days=1)
#: How soon a sync that acted, or a Job that is finishing, is looked at again.
FOLLOW_THROUGH = timedelta(seconds=1)

FAILURE_TARGET, SUCCESS_CRITERIA_MET = "FailureTarget", "SuccessCriteriaMet"
SUSPENDED = "Suspended"
#: JOB-65, JOB-67, JOB-78: reasons and messages, worded as upstream.
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
#: POL-29: the per-index outcomes.
MAX_FAILED_INDEXES_EXCEEDED = ("MaxFailedIndexesExceeded",
                               "Job has exceeded the specified maximal number of failed indexes")
FAILED_INDEXES = ("FailedIndexes", "Job has failed indexes")
POD_FAILURE_POLICY = "PodFailurePolicy"  # POL-13
SUCCESS_POLICY = "SuccessPolicy"  # POL-36

# --- backoff (JOB-69, JOB-70, JOB-73) --------------------------------------------------------


def backoff_remaining(
    record: BackoffRecord,
    now: datetime,
    *,
    base: timedelta = DEFAULT_BACKOFF,
    cap: timedelta = MAX_BACKOFF,
) -> timedelta:
    """Time left before the next Pod may be created (JOB-69).

    Args:
        record: the backoff record after this sync's failures were added.
        now: the current instant (aware).
        base: delay after the first failure.
        cap: longest delay.

    Returns:
        ``min(base * 2**(n-1), cap) - (now - lastFailureTime)``, floored at zero; zero when
        there is no failure since the last success.

    Raises:
        ValueError: ``now`` is naive.
    """
    now = _aware(now)
    n, last = record.failures_after_last_success, record.last_failure_time
    if n <= 0 or last is None:
        return timedelta(0)
    delay = base
    for _ in range(1, n):
        delay *= 2
        if delay >= cap:
            delay = cap
            break
    elapsed = max(now - last, timedelta(0))
    return max(delay - elapsed, timedelta(0))


def new_backoff_record(
    record: BackoffRecord, succeeded: list[PodInfo], failed: list[PodInfo], now: datetime
) -> BackoffRecord:
    """Add the Pods that newly finished in this sync to the backoff record (JOB-70).

    Args:
        record: the record so far.
        succeeded: Pods newly Succeeded in this sync.
        failed: Pods newly failed in this sync and not yet in the record.
        now: finish time of a Pod that has none (JOB-71 gives one in practice).

    Returns:
        The new record: failures only add up; any success restarts the count with the
        failures that finished strictly after the latest success.
    """
    fail_times = sorted(_finish(p, now) for p in failed)
    if not succeeded:
        if not fail_times:
            return record
        return BackoffRecord(
            failures_after_last_success=record.failures_after_last_success + len(fail_times),
            last_failure_time=fail_times[-1],
        )
    last_success = max(_finish(p, now) for p in succeeded)
    after = [t for t in fail_times if t > last_success]
    return BackoffRecord(
        failures_after_last_success=len(after), last_failure_time=after[-1] if after else None
    )


# --- backoffLimitPerIndex (POL-19 to POL-32; the rules for one Pod are in models/jobpods.py) --


def get_new_index_failure_counts(spec: JobSpecView, pod_being_replaced: PodInfo | None) -> tuple[int, int]:
    """POL-21: the (failure, ignored) counts of the Pod that replaces ``pod_being_replaced``."""
    if pod_being_replaced is None:
        return 0, 0
    failures, ignored = pod_being_replaced.failure_count, pod_being_replaced.ignored_failure_count
    _, count_failed, _ = match_pod_failure_policy(spec.pod_failure_policy, pod_being_replaced)
    return (failures + 1, ignored) if count_failed else (failures, ignored + 1)


def get_remaining_time_per_index(
    last_failed_pod: PodInfo | None, now: datetime, *, base: timedelta = DEFAULT_BACKOFF,
    cap: timedelta = MAX_BACKOFF,
) -> timedelta:
    """POL-28: the wait before ``last_failed_pod``'s index may run again; zero without one."""
    if last_failed_pod is None:
        return timedelta(0)
    n = last_failed_pod.failure_count + last_failed_pod.ignored_failure_count + 1
    record = BackoffRecord(failures_after_last_success=n, last_failure_time=_finish(last_failed_pod, now))
    return backoff_remaining(record, now, base=base, cap=cap)


# --- successPolicy (POL-33 to POL-41) --------------------------------------------------------


def match_success_policy(
    success_policy: SuccessPolicy | None, completions: int, succeeded_indexes: set[int]
) -> tuple[str, bool]:
    """POL-33 to POL-35: the first rule the succeeded indexes satisfy (upstream's name and argument order).

    Args:
        success_policy: ``spec.successPolicy`` (None never matches).
        completions: ``spec.completions``; rule indexes at or beyond it are dropped (JOB-49).
        succeeded_indexes: the indexes that succeeded, all below ``completions``.

    Returns:
        ``("Matched rules at index <i>", True)`` for the first matching rule, else ``("", False)``.
    """
    if success_policy is None or not succeeded_indexes:
        return "", False
    for i, rule in enumerate(success_policy.rules):
        if rule.succeeded_indexes is not None:
            required = parse_intervals(rule.succeeded_indexes, completions)
            if not required:
                continue  # POL-35: a rule that parses to nothing is skipped
            # Intervals may overlap if the string is not canonical; count each index once.
            contains = sum(1 for ix in succeeded_indexes if any(a <= ix <= b for a, b in required))
            total = count_covered(required)
            met = contains >= rule.succeeded_count if rule.succeeded_count is not None else contains == total
        else:
            met = rule.succeeded_count is not None and len(succeeded_indexes) >= rule.succeeded_count
        if met:
            return f"Matched rules at index {i}", True
    return "", False


def prune_finalizers_removed(snap: JobSnapshot, removed: Iterable[str]) -> list[str]:
    """The part of ``memory.finalizers_removed`` still worth keeping (JOB-38), to bound memory.

    A uid matters only while a fresh read still shows its Pod holding the finalizer: a Pod that
    is gone, or whose finalizer is gone, counts as released anyway (JOB-33). Call it on the
    snapshot a plan was computed from, before adding that sync's released uids.

    Args:
        snap: the fresh snapshot of this sync.
        removed: ``memory.finalizers_removed``.

    Returns:
        The uids to keep, in their original order.
    """
    holding = {p.uid for p in snap.pods if p.has_finalizer}
    return [u for u in removed if u in holding]


# --- step 3 (JOB-33, JOB-75 to JOB-77) -------------------------------------------------------


def fold(
    status: JobStatusView,
    pods: list[PodInfo],
    removed: set[str],
    spec: JobSpecView,
    now: datetime,
    *,
    held_elsewhere: int = 0,
) -> JobStatusView:
    """Step 3: count released Pods and, once nothing is pending, finish the Job (JOB-33, JOB-40, JOB-75 to JOB-77).

    Each uid in the uncounted lists whose Pod no longer holds the finalizer (uid in
    ``removed``, Pod missing from ``pods``, or ``has_finalizer`` False) moves into
    ``succeeded``/``failed``. Then, if ``FailureTarget``/``SuccessCriteriaMet`` is True, both
    lists are empty, ``active`` and ``terminating`` are 0 and no Pod of ``pods`` still holds an
    unreleased finalizer, ``Failed`` (same reason/message) or ``Complete`` (+ completionTime) is
    added with ``now`` as its time (API-38 to API-47, JOB-86).

    Args:
        status: the status as written in step 1 (``plan.record``), or the snapshot's if the
            plan had nothing to record.
        pods: the Pods of the snapshot the plan was computed from.
        removed: uids whose finalizer removal succeeded (``memory.finalizers_removed`` after
            step 2).
        spec: the Job's spec (Indexed Jobs count succeeded indexes, JOB-47).
        now: the current instant (aware).
        held_elsewhere: Pods outside the snapshot's window that still hold the finalizer
            (``snap.rest.holding``, JOB-92): while any does, the Job is not finished.

    Returns:
        The status to write; equal to ``status`` if there is nothing to do.

    Raises:
        ValueError: ``now`` is naive.
    """
    now = _aware(now)
    by_uid = {p.uid: p for p in pods}
    keep_s = [u for u in status.uncounted_succeeded if not _released(u, by_uid, removed)]
    keep_f = [u for u in status.uncounted_failed if not _released(u, by_uid, removed)]
    succeeded = status.succeeded + len(status.uncounted_succeeded) - len(keep_s)
    if spec.completion_mode == "Indexed" and spec.completions is not None:
        succeeded = len(parse_indexes(status.completed_indexes, spec.completions))  # JOB-47, POL-44
    out = status.model_copy(
        update={
            "uncounted_succeeded": keep_s,
            "uncounted_failed": keep_f,
            "succeeded": succeeded,
            "failed": status.failed + len(status.uncounted_failed) - len(keep_f),
        }
    )
    return _enact_job_finished(out, pods, removed, now, held_elsewhere)


def decided_end(conditions: list[Condition]) -> str | None:
    """``Complete`` or ``Failed`` once a Job's end is decided, else None: its finished condition,
    or the interim one (``SuccessCriteriaMet``, ``FailureTarget``) that becomes it (JOB-75, JOB-76)."""
    if (finished := finished_condition(conditions)) is not None:
        return finished.type
    return None if (interim := _interim_end(conditions)) is None else interim[1]


def _interim_end(conditions: list[Condition]) -> tuple[Condition, str] | None:
    """The interim condition that decides the Job's end, with the final condition type it becomes."""
    target = _true(conditions, FAILURE_TARGET) or _true(conditions, SUCCESS_CRITERIA_MET)
    return None if target is None else (target, FAILED if target.type == FAILURE_TARGET else COMPLETE)


def _enact_job_finished(
    status: JobStatusView, pods: list[PodInfo], removed: set[str], now: datetime, held_elsewhere: int = 0,
) -> JobStatusView:
    """Add Complete or Failed once the interim condition's Pods are all accounted (JOB-75 to JOB-77)."""
    if finished_condition(status.conditions) is not None:
        return status
    interim = _interim_end(status.conditions)
    if interim is None or status.uncounted_succeeded or status.uncounted_failed:
        return status  # JOB-40
    target, final = interim
    if status.terminating or status.active or status.ready:
        return status  # JOB-76, API-38, API-46
    if held_elsewhere or any(p.has_finalizer and p.uid not in removed for p in pods):
        return status  # JOB-37: Pods not yet recorded; no finalizer left behind
    conditions, _ = _ensure(status.conditions, final, "True", target.reason, target.message, now)
    return status.model_copy(
        update={
            "conditions": conditions,
            "start_time": status.start_time or now,  # API-39 (a Job failed while suspended)
            "completion_time": now if final == COMPLETE else status.completion_time,  # JOB-77
        }
    )


# --- one sync (upstream syncJob) -------------------------------------------------------------


def after_sync(snap: JobSnapshot, folded: JobStatusView, plan: SyncPlan, removed: set[str],
               released_unmatched: set[str]) -> tuple[bool, timedelta | None]:
    """Once a sync's steps are done: whether the workflow's work is over (JOB-5), else when to look again.

    Args:
        snap: the sync's snapshot.
        folded: the status the Job has after step 3.
        plan: the sync's plan.
        removed: the uids whose finalizer removal was requested, this sync's included (JOB-38).
        released_unmatched: the Pods JOB-26 released in this sync.

    Returns:
        ``(True, None)`` once the Job has finished or is gone and no Pod holds the finalizer;
        else ``False`` and the wait: the plan's, and at most a second while this sync acted or
        the Job is finishing, so that the work it started is followed through promptly.
    """
    holding = any(p.has_finalizer and p.uid not in removed and p.name not in released_unmatched
                  for p in [*snap.pods, *snap.unmatched])
    finished = finished_condition(folded.conditions) is not None
    if (snap.gone or finished) and not holding and not snap.rest.holding:
        return True, None
    requeue = plan.requeue_after
    if snap.gone or finished or plan.create or plan.release or plan.record:
        requeue = min(requeue or FOLLOW_THROUGH, FOLLOW_THROUGH)
    return False, requeue


def plan_sync(
    snap: JobSnapshot,
    memory: JobMemory,
    now: datetime,
    *,
    backoff_base: timedelta = DEFAULT_BACKOFF,
    backoff_cap: timedelta = MAX_BACKOFF,
) -> SyncPlan:
    """Decide one sync of a Job (upstream ``syncJob``): Pods to create/delete, the step-1 status.

    Args:
        snap: a fresh read of the Job and its Pods.
        memory: the workflow's durable memory (backoff record, released finalizers, JOB-38).
        now: the current instant (aware).
        backoff_base: first recreation delay (JOB-69; a Job's annotation may set it, JOB-BACKOFF).
        backoff_cap: longest recreation delay (JOB-69).

    Returns:
        The plan. A gone Job (``record`` None) or a finished one (``finished``, JOB-4) only
        releases the finalizers its Pods still hold (JOB-3).

    Raises:
        ValueError: ``now`` is naive.
    """
    now = _aware(now)
    holding = [p.name for p in [*snap.pods, *snap.unmatched] if p.has_finalizer]
    if snap.gone:
        return SyncPlan(release=holding)
    if finished_condition(snap.status.conditions) is not None:
        return SyncPlan(release=holding, finished=True)
    return _Sync(snap, memory, now, backoff_base, backoff_cap).sync_job()


def release_unmatched_pods(snap: JobSnapshot) -> tuple[list[str], list[str]]:
    """JOB-26 (upstream ``ClaimObject``): what becomes of Pods that stopped matching.

    ``snap.unmatched`` holds the Pods the Job controls (controller reference = its uid) whose
    labels no longer match its selector. They are not the Job's any more: never active, never
    counted (a uid already in the uncounted lists is folded as released, JOB-33). Upstream releases
    them unless the Job is being deleted, and its release patch removes the tracking finalizer
    with the reference. While the Job is being deleted upstream leaves them owned, so the garbage
    collector still deletes them with the Job; their finalizer then goes without counting, as
    every Pod's does while the Job is being deleted (JOB-36), so none holds it forever.

    Args:
        snap: a fresh snapshot of a live (not gone, not finished) Job.

    Returns:
        ``(release, drop_finalizer)``: Pod names whose ownerReference and finalizer to remove,
        and Pod names whose finalizer alone to remove.
    """
    if snap.deleting:
        return [], [p.name for p in snap.unmatched if p.has_finalizer]
    return [p.name for p in snap.unmatched], []


class _Sync:
    """The state of one live sync; methods mirror upstream's names (STYLE 2)."""

    def __init__(
        self, snap: JobSnapshot, memory: JobMemory, now: datetime, base: timedelta, cap: timedelta
    ) -> None:
        self.snap, self.spec, self.memory, self.now = snap, snap.spec, memory, now
        self.base, self.cap = base, cap
        self.removed = set(memory.finalizers_removed)
        self.indexed = self.spec.completion_mode == "Indexed"
        self.limit = self.spec.completions or 0  # Indexed: valid indexes are [0, limit) (JOB-13)
        # JOB-56, POL-2: a podFailurePolicy implies the Failed replacement policy.
        self.replace_failed_only = (self.spec.pod_replacement_policy == "Failed"
                                    or self.spec.pod_failure_policy is not None)
        self.per_index = self.indexed and self.spec.backoff_limit_per_index is not None  # I
        st = snap.status
        self._fold_first()
        self.conditions = list(st.conditions)
        self.start_time = st.start_time
        self.prev_indexes = parse_indexes(st.completed_indexes, self.limit) if self.indexed else set()
        self.rest = snap.rest  # JOB-92: the Pods outside the window, tallied
        self.active_pods = [p for p in snap.pods if is_active_pod(p)]  # JOB-41
        self.active = len(self.active_pods) + self.rest.active
        self.ready = sum(1 for p in self.active_pods if p.ready) + self.rest.ready  # JOB-42
        self.terminating = sum(1 for p in snap.pods if p.deleting and not p.finished) + self.rest.terminating  # JOB-43
        self.succeeded = self.failed = 0  # decision counts (JOB-45 to JOB-47)
        self.succeeded_indexes: set[int] = set()
        self.completed_indexes: set[int] = set(self.prev_indexes)
        self.finishing: Condition | None = None
        self.reached_max = False
        self.delete: list[str] = []
        self.release_and_delete: list[str] = []
        self.release: list[str] = []
        self.create: list[PodToCreate] = []
        self.events: list[JobEvent] = []
        self.requeue: list[timedelta] = []
        self.backoff = memory.backoff
        self.counted_backoff: list[str] = []
        self.failed_indexes: set[int] = set()
        self.delayed: dict[int, PodInfo] = {}  # POL-23: failed Pods kept until their index runs again
        self.policy_actions: list[str] = []  # POL-18: actions matched by Pods recorded in this sync
        self.action = "reconciling"  # POL-50: unless manageJob runs
        self.creation_reason = "new"  # POL-56

    def _fold_first(self) -> None:
        """JOB-34: step 3 runs at the start of every sync (a crash between steps 2 and 3)."""
        st, by_uid = self.snap.status, {p.uid: p for p in self.snap.pods}
        self.uncounted_s = [u for u in st.uncounted_succeeded if not _released(u, by_uid, self.removed)]
        self.uncounted_f = [u for u in st.uncounted_failed if not _released(u, by_uid, self.removed)]
        self.succeeded_total = st.succeeded + len(st.uncounted_succeeded) - len(self.uncounted_s)
        self.failed_total = st.failed + len(st.uncounted_failed) - len(self.uncounted_f)

    # -- the steps of syncJob --

    def sync_job(self) -> SyncPlan:
        """Run the sync in upstream's order and assemble the plan."""
        if self.start_time is None and not self.spec.suspend:
            self.start_time = self.now  # JOB-83
        self.count_new_finished_pods()
        self.finishing = self.past_failure_conditions()
        if self.indexed:
            self.indexed_job_conditions()
        if self.finishing is not None:
            self.delete_active_pods()
            if self.rest.active:
                return self.deletions_only()  # JOB-74, JOB-92: the condition comes with the last batch
        else:
            manage_called = not self.snap.deleting  # JOB-27
            if manage_called:
                self.manage_job()
            if self.complete():
                self.finishing = _condition(SUCCESS_CRITERIA_MET, *COMPLETIONS_REACHED, self.now)
            elif manage_called:
                self.update_suspend_condition()
        self.track_job_status()
        self.add_interim_condition()
        return self.build_plan()

    def count_new_finished_pods(self) -> None:
        """Decision counts (JOB-45 to JOB-47, JOB-52) and the backoff record (JOB-70, JOB-72)."""
        uncounted = set(self.uncounted_s) | set(self.uncounted_f)
        new = [p for p in self.snap.pods
               if self._tracked(p) and p.uid not in uncounted and self._valid(p)]
        new_succeeded = [p for p in new if p.phase == "Succeeded"]
        new_failed = [p for p in new if self._failed(p)]
        new_failed_uids = {p.uid for p in new_failed}
        rest = self.rest
        self.succeeded_indexes = self.prev_indexes | {
            p.index for p in new_succeeded if p.index is not None and self.indexed}
        if self.indexed:
            self.succeeded = len(self.succeeded_indexes) + rest.new_indexes  # JOB-47
            self.succeeded_indexes |= parse_indexes(rest.new_succeeded_indexes, self.limit)  # POL-33
        else:
            self.succeeded = (self.succeeded_total + len(self.uncounted_s) + len(new_succeeded)
                              + rest.new_succeeded)  # JOB-46
        ignored = sum(1 for p in new_failed if not pod_counts_as_failed(self.spec, p)) + rest.new_ignored
        self.failed = (self.failed_total + len(self.uncounted_f) + len(new_failed) + rest.new_failed
                       - ignored)  # JOB-45, POL-9
        # JOB-70 with a durable record: a failure counts once, even if step 1 already recorded it.
        counted = set(self.memory.counted_backoff)
        recorded = set(self.snap.status.uncounted_failed)
        for_backoff = [p for p in self.snap.pods if p.uid not in counted and self._failed(p)
                       and self._valid(p) and (p.uid in new_failed_uids or p.uid in recorded)]
        self.backoff = new_backoff_record(self.memory.backoff, new_succeeded, for_backoff, self.now)
        present = {p.uid for p in self.snap.pods}
        self.counted_backoff = [u for u in self.memory.counted_backoff if u in present]
        self.counted_backoff += [p.uid for p in for_backoff]

    def past_failure_conditions(self) -> Condition | None:
        """The finishing condition, first that applies (JOB-63 to JOB-68); requeue for the deadline (JOB-68)."""
        existing = _true(self.conditions, SUCCESS_CRITERIA_MET) or _true(self.conditions, FAILURE_TARGET)
        if existing is not None:
            return existing  # JOB-63, the first two; JOB-64
        message = get_fail_job_message(self.spec, self.snap.pods) or self.rest.fail_job_message
        if message is not None:
            return _condition(FAILURE_TARGET, POD_FAILURE_POLICY, message, self.now)  # POL-11 to POL-13
        if self.failed > self.spec.backoff_limit or self.past_backoff_limit_on_failure():
            return _condition(FAILURE_TARGET, *BACKOFF_LIMIT_EXCEEDED, self.now)  # JOB-65, JOB-66, JOB-84
        ads = self.spec.active_deadline_seconds
        if ads is None or self.spec.suspend or self.start_time is None:
            return None
        deadline = plus_seconds(self.start_time, ads)
        if deadline is None:
            return None  # beyond any representable instant: never
        left = deadline - self.now
        if left <= timedelta(0):
            return _condition(FAILURE_TARGET, *DEADLINE_EXCEEDED, self.now)  # JOB-67
        self.requeue.append(left)  # JOB-68
        return None

    def indexed_job_conditions(self) -> None:
        """JOB-63, sixth to eighth: failed indexes (POL-25, POL-29) and the success policy (POL-33 to POL-36), after the rest."""
        if self.per_index:
            self.failed_indexes = calculate_failed_indexes(
                self.spec, self.snap.status.failed_indexes, self.snap.pods, self.replace_failed_only)
            self.failed_indexes |= parse_indexes(self.rest.failed_indexes, self.limit)
            failed, limit = len(self.failed_indexes), self.spec.max_failed_indexes
            if self.finishing is None and limit is not None and failed > limit:
                self.finishing = _condition(FAILURE_TARGET, *MAX_FAILED_INDEXES_EXCEEDED, self.now)
            elif self.finishing is None and failed > 0 and failed + self.succeeded >= self.limit:
                self.finishing = _condition(FAILURE_TARGET, *FAILED_INDEXES, self.now)
            busy = self.succeeded_indexes | self.failed_indexes | self.active_indexes()
            self.delayed = get_pods_with_delayed_deletion_per_index(
                self.spec, self.snap.pods, busy, self.replace_failed_only)
        if self.finishing is None and self.spec.success_policy is not None:
            message, met = match_success_policy(self.spec.success_policy, self.limit, self.succeeded_indexes)
            if met:
                self.finishing = _condition(SUCCESS_CRITERIA_MET, SUCCESS_POLICY, message, self.now)

    def past_backoff_limit_on_failure(self) -> bool:
        """JOB-66: restartPolicy OnFailure counts container restarts of Pending/Running Pods."""
        if self.spec.restart_policy != "OnFailure":
            return False
        restarts = sum(p.restart_count for p in self.snap.pods if p.phase in ("Pending", "Running"))
        restarts += self.rest.restarts
        if self.spec.backoff_limit == 0:
            return restarts > 0
        return restarts >= self.spec.backoff_limit

    def delete_active_pods(self) -> None:
        """JOB-74: a finishing Job deletes every active Pod, keeping the finalizer (the window's at once, JOB-92)."""
        self.delete = [p.name for p in self.active_pods]
        self.terminating += self.active  # JOB-43
        self.active = self.ready = 0

    def deletions_only(self) -> SyncPlan:
        """JOB-92: a finishing Job with active Pods beyond the window deletes the window's, and nothing
        else, until the last batch: the finishing condition is derived again next sync (its Pods are
        neither recorded nor released meanwhile) and written with that batch, as JOB-74 wants."""
        return SyncPlan(delete=self.delete, backoff=self.memory.backoff, counted_backoff=self.memory.counted_backoff,
                        requeue_after=MIN_REQUEUE, action=self.action)

    def active_indexes(self) -> set[int]:
        """The indexes of the window's active Pods (JOB-21)."""
        return {p.index for p in self.active_pods if p.index is not None}

    def manage_job(self) -> None:
        """Suspend, scale down or create, never both (JOB-14 to JOB-21, JOB-57, JOB-58, JOB-81); the POL-50 action."""
        self.action = "pods_deleted"  # POL-50: the suspend path, even with nothing to delete
        if self.spec.suspend:
            self._scale_down(self.active_pods_for_removal(self.active))  # JOB-81, no cap (JOB-19) but the window's
            if self.active:
                self.requeue.append(MIN_REQUEUE)  # JOB-92: the rest next sync
            return
        want = self.want_active()
        rm = self.active_pods_for_removal(max(self.active - want, 0))
        if rm:
            self._scale_down(rm[:MAX_POD_CREATE_DELETE_PER_SYNC])  # JOB-15, JOB-19
        if self.active > want:
            self.requeue.append(MIN_REQUEUE)  # JOB-19, JOB-92: more to remove than one sync takes
        if rm or self.active > want:
            return  # JOB-16: deletion wins
        diff = want - self.active - (self.terminating if self.replace_failed_only else 0)  # JOB-18
        if diff <= 0:
            self.action = "tracking"
            return
        self.action = "pods_created"  # POL-50: attempted or held back by a backoff
        self.creation_reason = self.pods_creation_reason()
        remaining = timedelta(0)
        if not self.per_index:  # JOB-73: per-index Jobs wait per index instead
            remaining = backoff_remaining(self.backoff, self.now, base=self.base, cap=self.cap)
        if remaining > timedelta(0):
            self.requeue.append(max(remaining, MIN_REQUEUE))  # JOB-20, JOB-73
            return
        diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)  # JOB-19
        if self.per_index:
            self.create = self.pods_for_independent_indexes(self.first_pending_indexes(diff))
        elif self.indexed:
            self.create = [PodToCreate(index=i) for i in self.first_pending_indexes(diff)]  # JOB-21
        else:
            self.create = [PodToCreate() for _ in range(diff)]
        self.active += len(self.create)  # JOB-41, JOB-24

    def pods_for_independent_indexes(self, indexes: list[int]) -> list[PodToCreate]:
        """POL-20, POL-21, POL-28: the pending indexes whose own backoff is over, with their counts."""
        out: list[PodToCreate] = []
        waits: list[timedelta] = []
        for ix in indexes:
            last = self.delayed.get(ix)
            wait = get_remaining_time_per_index(last, self.now, base=self.base, cap=self.cap)
            if wait > timedelta(0):
                waits.append(wait)
                continue
            failures, ignored = get_new_index_failure_counts(self.spec, last)
            out.append(PodToCreate(index=ix, failure_count=failures, ignored_failure_count=ignored))
        if waits:
            self.requeue.append(max(min(waits), MIN_REQUEUE))
        return out

    def pods_creation_reason(self) -> str:
        """POL-56: the ``reason`` of the Pods this sync creates (upstream ``recordJobPodsCreationTotal``).

        It reads the podReplacementPolicy *field* (a podFailurePolicy defaults it to Failed, API-5),
        the decision count of failures and the terminating Pods.
        """
        if self.spec.pod_replacement_policy == "Failed" and self.failed > 0:
            return "recreate_failed"
        if self.failed > 0 or self.terminating > 0:
            return "recreate_terminating_or_failed"
        return "new"

    def want_active(self) -> int:
        """JOB-14: the number of Pods that should be active."""
        if self.spec.completions is None:
            return self.active if self.succeeded > 0 else self.spec.parallelism
        return max(0, min(self.spec.completions - self.succeeded, self.spec.parallelism))

    def active_pods_for_removal(self, rm_at_least: int) -> list[PodInfo]:
        """JOB-15: Indexed out-of-range and duplicate Pods first, then the least advanced."""
        rm: list[PodInfo] = []
        left = self.active_pods
        if self.indexed:
            rm, left = self._duplicated_index_pods()
        if len(rm) < rm_at_least:
            rm += sorted(left, key=active_pods_order)[: rm_at_least - len(rm)]
        return rm

    def _duplicated_index_pods(self) -> tuple[list[PodInfo], list[PodInfo]]:
        """Out-of-range Pods, and all but the most advanced Pod of each index (JOB-13, JOB-15)."""
        rm = [p for p in self.active_pods if not self._valid(p)]
        by_index: dict[int, list[PodInfo]] = {}
        for p in self.active_pods:
            if self._valid(p) and p.index is not None:
                by_index.setdefault(p.index, []).append(p)
        left: list[PodInfo] = []
        for index in sorted(by_index):
            group = sorted(by_index[index], key=active_pods_order)
            rm += group[:-1]
            left.append(group[-1])
        return rm, left

    def first_pending_indexes(self, count: int) -> list[int]:
        """JOB-21, JOB-58: the lowest indexes not succeeded, not active and (under Failed) not terminating."""
        busy = self.succeeded_indexes | self.failed_indexes  # POL-27: a failed index never runs again
        busy |= self.active_indexes()
        if self.replace_failed_only:
            busy.update(p.index for p in self.snap.pods
                        if p.index is not None and p.deleting and not p.finished)
        # JOB-92: beyond the window, the tally names the lowest indexes no Pod holds
        candidates = sorted(parse_indexes(self.rest.pending_indexes, self.limit)) if self.rest.pods else range(self.limit)
        out: list[int] = []
        for candidate in candidates:
            if len(out) >= count:
                break
            if candidate not in busy:
                out.append(candidate)
        return out

    def complete(self) -> bool:
        """JOB-53: enough successes and nothing active after this sync's deletions."""
        if self.spec.completions is None:
            return self.succeeded > 0 and self.active == 0
        return self.succeeded >= self.spec.completions and self.active == 0

    def update_suspend_condition(self) -> None:
        """JOB-81 to JOB-83: Suspended=True/False and the matching Event; startTime on resume."""
        if self.spec.suspend:
            self.conditions, changed = _ensure(self.conditions, SUSPENDED, "True", "JobSuspended",
                                               "Job suspended", self.now)
            if changed:
                self._event("Normal", "Suspended", "Job suspended")
            self.start_time = None  # KEP-5440: lets resume reset it (see module docstring)
            return
        self.conditions, changed = _ensure(self.conditions, SUSPENDED, "False", "JobResumed",
                                           "Job resumed", self.now)
        if changed:
            self._event("Normal", "Resumed", "Job resumed")
            self.start_time = self.start_time or self.now  # JOB-82

    def track_job_status(self) -> None:
        """Step 1 (JOB-30, JOB-35 to JOB-37, JOB-39, JOB-50 to JOB-52): uids to record and finalizers to release."""
        failing = self.finishing is not None and self.finishing.type != SUCCESS_CRITERIA_MET
        # JOB-51: once an earlier sync wrote SuccessCriteriaMet, a Pod deleted and ended after it
        # (the ones that sync deleted, met again after a worker restart between the write and the
        # release) had not failed before it, so it is not counted; one that failed on its own still
        # counts (more than one sync records: JOB-37, JOB-92).
        met = _true(self.conditions, SUCCESS_CRITERIA_MET)
        release_all = self.snap.deleting or self.finishing is not None  # JOB-35
        skip = set(self.release_and_delete)
        recorded = set(self.uncounted_s) | set(self.uncounted_f)
        new_indexes: set[int] = set()
        for p in sorted(self.snap.pods, key=lambda q: q.uid not in recorded):  # recorded first
            if not p.has_finalizer or p.name in skip:
                continue
            if p.uid in self.removed:
                self.release.append(p.name)  # JOB-38: already released; ask again
                continue
            failed = self._failed(p)
            if not (release_all or failed or p.phase == "Succeeded"):
                continue
            if not release_all and p.index is not None and _uid(self.delayed.get(p.index)) == p.uid:
                continue  # POL-23: its counts seed the index's next Pod
            self.release.append(p.name)
            self._record(p, (failed and not _stopped_by_success(p, met, self.now)) or failing, new_indexes)
            if len(new_indexes) + len(self.uncounted_s) + len(self.uncounted_f) >= MAX_UNCOUNTED_PODS:
                self.reached_max = True  # JOB-37
                break
        self.completed_indexes = self.prev_indexes | new_indexes

    def _record(self, p: PodInfo, count_failed: bool, new_indexes: set[int]) -> None:
        """JOB-30, JOB-36, JOB-39: record one released Pod as succeeded or failed, or not at all."""
        if p.phase == "Succeeded" and p.uid not in self.uncounted_f:
            if not self.indexed:
                if p.uid not in self.uncounted_s:
                    self.uncounted_s.append(p.uid)
            elif self._valid(p) and p.index is not None and p.index not in self.prev_indexes:
                new_indexes.add(p.index)
        elif count_failed and self._valid(p) and p.uid not in self.uncounted_f:
            if self.spec.pod_failure_policy is not None:
                _, counts, action = match_pod_failure_policy(self.spec.pod_failure_policy, p)
                if action is not None:
                    self.policy_actions.append(action)  # POL-18
                if not counts:
                    return  # POL-9: Ignore; the finalizer still goes
            self.uncounted_f.append(p.uid)  # JOB-44, JOB-50, JOB-52

    def add_interim_condition(self) -> None:
        """JOB-75, JOB-76, JOB-80, JOB-54: FailureTarget or SuccessCriteriaMet in the step-1 write.

        The finish Events are planned on every sync from the interim condition until the Job
        is finished (JOB-4 plans none), so a crash after step 1 cannot lose them; the workflow
        dedupes them.
        """
        cond = self.finishing
        if cond is None:
            return
        self.conditions, _ = _ensure(self.conditions, cond.type, "True", cond.reason,
                                     cond.message, self.now)
        if cond.type == FAILURE_TARGET:
            self._event("Warning", cond.reason or "", cond.message or "")
            return
        completions = self.spec.completions
        if completions is not None and self.succeeded > completions:
            self._event("Warning", "TooManySucceededPods",
                        "Too many succeeded pods running after completion count reached")
        self._event("Normal", "Completed", "Job completed")

    def build_plan(self) -> SyncPlan:
        """Assemble the step-1 status (None if unchanged) and the plan."""
        st = self.snap.status
        status = st.model_copy(update={
            "active": self.active, "ready": self.ready, "terminating": self.terminating,
            # POL-41, POL-44: succeeded indexes within the current completions; may drop on scale-down.
            "succeeded": len(self.completed_indexes) if self.indexed else self.succeeded_total,
            "failed": self.failed_total,
            "completed_indexes": format_indexes(self.completed_indexes) if self.indexed else "",
            "failed_indexes": format_indexes(self.failed_indexes) if self.per_index else None,  # POL-25
            "uncounted_succeeded": self.uncounted_s, "uncounted_failed": self.uncounted_f,
            "start_time": self.start_time, "conditions": self.conditions,
        })
        rest = self.rest
        release_all = self.snap.deleting or self.finishing is not None
        if self.reached_max or rest.new_succeeded or rest.new_failed or (release_all and rest.holding):
            self.requeue.append(MIN_REQUEUE)  # JOB-37, JOB-92: more to record or release than this sync took
        requeue = min(self.requeue) if self.requeue else None
        release_unmatched, drop_finalizer = release_unmatched_pods(self.snap)  # JOB-26
        return SyncPlan(
            record=None if status == st else status,
            create=self.create, events=self.events, backoff=self.backoff,
            counted_backoff=self.counted_backoff,
            requeue_after=None if requeue is None else min(requeue, MAX_REQUEUE),
            policy_actions=self.policy_actions,
            delete=self.delete, release_and_delete=self.release_and_delete,
            release=self.release + drop_finalizer, release_unmatched=release_unmatched,
            action=self.action, creation_reason=self.creation_reason,
        )

    # -- helpers --

    def _scale_down(self, pods: list[PodInfo]) -> None:
        """JOB-17: release the finalizer, then delete; the Pods become terminating (JOB-43)."""
        self.release_and_delete = [p.name for p in pods]
        self.active -= len(pods)
        self.ready -= sum(1 for p in pods if p.ready)
        self.terminating += len(pods)

    def _tracked(self, p: PodInfo) -> bool:
        """JOB-28, JOB-38: the Pod holds the finalizer and its removal was not requested."""
        return p.has_finalizer and p.uid not in self.removed

    def _valid(self, p: PodInfo) -> bool:
        """JOB-13, JOB-52: any Pod of a NonIndexed Job; an index in [0, completions) otherwise."""
        return not self.indexed or (p.index is not None and 0 <= p.index < self.limit)

    def _failed(self, p: PodInfo) -> bool:
        return pod_failed(p, self.replace_failed_only)

    def _event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.events.append(JobEvent(type=type_, reason=reason, message=message))


# --- small pure helpers ----------------------------------------------------------------------


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got naive {now!r}")
    return now


def _released(uid: str, by_uid: dict[str, PodInfo], removed: set[str]) -> bool:
    """JOB-33: the Pod of an uncounted uid no longer holds the finalizer."""
    pod = by_uid.get(uid)
    return uid in removed or pod is None or not pod.has_finalizer


def _stopped_by_success(p: PodInfo, condition: Condition | None, now: datetime) -> bool:
    """JOB-51: the Pod was deleted and did not end before ``condition`` (SuccessCriteriaMet) was written."""
    if condition is None or not p.deleting:
        return False
    at = condition.last_transition_time
    return at is None or _finish(p, now) >= at


def _uid(p: PodInfo | None) -> str | None:
    return None if p is None else p.uid


def _finish(p: PodInfo, now: datetime) -> datetime:
    return p.finish_time or p.creation_time or now  # JOB-71


def _true(conditions: list[Condition], type_: str) -> Condition | None:
    """The condition of that type if its status is True (JOB-64)."""
    return next((c for c in conditions if c.type == type_ and c.status == "True"), None)


def _condition(type_: str, reason: str, message: str, now: datetime) -> Condition:
    return Condition(type=type_, status="True", reason=reason, message=message,
                     last_transition_time=now)


def _ensure(
    conditions: list[Condition], type_: str, status: str, reason: str | None,
    message: str | None, now: datetime,
) -> tuple[list[Condition], bool]:
    """JOB-79: rewrite a condition whose status/reason/message changed; never append a False one."""
    out = list(conditions)
    for i, c in enumerate(out):
        if c.type == type_:
            if (c.status, c.reason, c.message) == (status, reason, message):
                return out, False
            out[i] = Condition(type=type_, status=status, reason=reason, message=message,
                               last_transition_time=now)
            return out, True
    if status == "False":
        return out, False
    out.append(Condition(type=type_, status=status, reason=reason, message=message,
                         last_transition_time=now))
    return out, True


# --- one sync as steps (workflows/execute.py) ----------------------------------------------------

#: the Events (reason and message) a Job's workflow remembers having recorded
REPORTED = 50
#: JOB-26 release: a new activity, only ever scheduled for Pods that stopped matching their selector
RELEASE_UNMATCHED_PATCH = "release-unmatched-pods"
#: JOB-AFTER: a new activity, the search for a cycle, once per list of Jobs awaited
AFTER_CYCLE_PATCH = "after-cycle-search"
#: JOB-AFTER: the most Jobs a cycle's message names
MAX_CYCLE_SHOWN = 20
ELLIPSIS = "…"
#: the longest wait after Pod creations refused as a quota refuses them (403)
CREATE_BACKOFF_MAX = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class CountMetric:
    """A step: add ``value`` to the ``job_controller_*`` counter ``name`` (POL-48 to POL-56)."""

    name: str
    value: int
    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class StatusWritten:
    """A step: a status write succeeded; its rises are counted (POL-51, POL-52, POL-55)."""

    before: JobStatusView
    after: JobStatusView
    spec: JobSpecView


@dataclass(eq=False)
class Books:
    """What one Job's syncs keep between steps and between syncs; the workflow holds one, and so
    does a table test. ``memory`` is the durable part, carried across continue-as-new."""

    ns: str
    name: str
    uid: str
    memory: JobMemory
    #: names for the Pods this sync creates: random and replayed identically in a workflow
    suffix: Callable[[], str]
    expect: list[str] = field(default_factory=list)  # JOB-26: Pods the next LIST should show
    last: JobSnapshot | None = None
    plan: SyncPlan | None = None
    #: how the Job ends, as decided by a status read or written: still its result (JOB-5) if the
    #: Job is deleted (its TTL, say) before the last finalizer is released
    finished: str | None = None
    syncs: int = 0
    sample: tuple[str, str] | None = None  # POL-49: (completion_mode, action) of this sync
    errored: bool = False  # POL-49: this sync met an error (result="error")
    again: bool = False  # the sync changed the Job in a way that asks for another sync at once
    waiting: list[str] = field(default_factory=list)  # JOB-AFTER: the Jobs it waits for
    notify: bool = False  # NOTIFY-EVENTS: a CloudEvent when the Job finishes
    create_backoff: Backoff[timedelta] = field(
        default_factory=lambda: Backoff(timedelta(seconds=10), CREATE_BACKOFF_MAX))

    def reached(self, rv: int) -> None:
        """JOB-93: the next sync's read of the Pods must have reached ``rv``, which this one read or wrote."""
        if rv > self.memory.pods_rv:
            self.memory = self.memory.model_copy(update={"pods_rv": rv})

    def saw_job(self, rv: str) -> None:
        """JOB-93: the Job was read or written at ``rv``; no later read may act on an older copy."""
        if rv.isdigit() and int(rv) > self.memory.job_rv:
            self.memory = self.memory.model_copy(update={"job_rv": int(rv)})

    def note_end(self, status: JobStatusView) -> None:
        """Remember how a status the Job is known to carry (read, or written) decides its end (JOB-5).

        A sync writes SuccessCriteriaMet (step 1) and Complete only once the Pods are counted
        (step 3); a Job deleted in between still ends its workflow with Complete.
        """
        if (end := decided_end(status.conditions)) is not None:
            self.finished = end


def sync(b: Books, clock: Callable[[], datetime]) -> Steps[tuple[str | None, timedelta | None]]:
    """One sync (upstream ``syncJob``): observe, act, the tracking protocol, the Events.

    Returns the final outcome (the workflow ends) or None, and when to look again.
    """
    b.syncs += 1
    b.plan = None  # this sync's, once made
    snap = yield from _observe(b)
    opts = snap.options
    for problem in (opts.problem, opts.held):
        if problem and not snap.gone:
            yield from report(b, "Warning", INVALID_ANNOTATION, problem)
    if opts.held and not _begun(snap):
        return None, None  # FAIL-CLOSED: as a wait for dependencies, until the annotation changes
    if (yield from _dependencies(b, snap, clock)):
        return None, None  # JOB-AFTER: a wait without a timer, until the bridge reports a change
    plan = b.plan = plan_sync(snap, b.memory, clock(), **_backoff(opts))
    if opts.held and plan.create:  # FAIL-CLOSED: a Job held once it has begun tracks its Pods, and adds none
        plan = b.plan = plan.model_copy(update={"create": []})
    b.sample = None if snap.gone or plan.finished else (completion_mode(snap.spec), plan.action)
    b.expect = _expected_pods(b, snap, plan)
    released_unmatched = yield from _release_unmatched(b, snap, plan)  # JOB-26, before all else
    if plan.delete:
        yield from _delete(b, plan.delete, release=False)
    if plan.release_and_delete:
        yield from _delete(b, plan.release_and_delete, release=True)
    create_backoff = None
    if plan.create and not snap.gone:
        create_backoff = yield from _create(b, plan.create, plan.creation_reason, clock)
    folded = yield from _track(b, snap, plan, clock)
    if folded is None:
        return None, timedelta(0)  # the Job moved on since the snapshot: look again
    for ev in plan.events:
        yield from report(b, ev.type, ev.reason, ev.message)
    done, requeue = after_sync(snap, folded, plan, set(b.memory.finalizers_removed), released_unmatched)
    if done:
        yield Log("info", f"Job {b.ns}/{b.name} {'is gone' if snap.gone else 'finished'}; "
                          "no Pod holds the tracking finalizer")
        if b.notify and b.finished is not None:
            yield Notify(finished_event(b, folded, clock()))
        return b.finished or "gone", None  # not gone: just set from the finished condition
    return None, requeue if create_backoff is None else create_backoff  # refused: wait, whatever else is due


def _begun(snap: JobSnapshot) -> bool:
    """Whether the Job has begun: a start time, a Pod, or an end. One that has not is held
    before anything (FAIL-CLOSED), as one waiting for its dependencies is (JOB-AFTER)."""
    return (snap.gone or snap.status.start_time is not None or bool(snap.pods) or snap.rest.pods > 0
            or decided_end(snap.status.conditions) is not None)


def _dependencies(b: Books, snap: JobSnapshot, clock: Callable[[], datetime]) -> Steps[bool]:
    """JOB-AFTER: True while no Pod may be created: a Job awaited has not Completed, or one has
    failed (or was deleted unfinished) and this sync marked the Job failing."""
    names = snap.options.after
    if not names or b.memory.after_met or snap.gone or snap.deleting or decided_end(snap.status.conditions):
        b.waiting = []
        return False
    read: Dependencies = yield Call(read_job_dependencies, DependenciesInput(namespace=b.ns, names=names))
    verdict, seen, b.waiting, why = after_verdict(read.jobs, b.memory.after_seen, b.memory.after_ended, me=b.name)
    b.memory = b.memory.model_copy(update={"after_seen": seen, "after_met": verdict == "met"})
    if verdict == "wait" and b.memory.after_searched != names and (yield Patched(AFTER_CYCLE_PATCH)):
        found: Cycle = yield Call(find_job_cycle, CycleInput(namespace=b.ns, name=b.name, after=names))
        b.memory = b.memory.model_copy(update={"after_searched": names})
        if found.path is not None:
            verdict, why = "failed", cycle_message(found.path)
    if verdict == "met":
        return False
    if verdict == "failed":
        yield from _fail(b, "DependencyFailed", why, clock())
    else:
        yield from report(b, "Normal", "WaitingForDependencies",
                          f"waiting for Job(s) {', '.join(b.waiting)} to complete ({AFTER_ANNOTATION})")
    return True


def cycle_message(path: list[str]) -> str:
    """JOB-AFTER: ``cycle: a → b → a``; a cycle of more than MAX_CYCLE_SHOWN Jobs shows its first ones."""
    shown = path if len(path) <= MAX_CYCLE_SHOWN + 1 else [*path[:MAX_CYCLE_SHOWN], ELLIPSIS, path[-1]]
    return CYCLE_PREFIX + ARROW.join(shown)


def ended(memory: JobMemory, dep: Dependency) -> JobMemory:
    """JOB-AFTER: keep the end the bridge reported of a Job awaited; a later report that it is gone
    keeps the outcome an earlier one gave the same Job."""
    before = next((d for d in memory.after_ended if d.name == dep.name), None)
    if before is not None and before.uid == dep.uid and dep.outcome is None:
        dep = dep.model_copy(update={"outcome": before.outcome})
    return memory.model_copy(update={"after_ended": [*(d for d in memory.after_ended if d.name != dep.name), dep]})


def after_verdict(jobs: list[Dependency], seen: dict[str, str], ended: list[Dependency], *,
                  me: str = "") -> tuple[Literal["met", "wait", "failed"], dict[str, str], list[str], str]:
    """JOB-AFTER: whether the Jobs awaited all Completed (``met``), one failed or was deleted
    before it finished (``failed``, and why), or the Job waits on; the uids seen unfinished, and
    the Jobs still awaited.

    ``jobs``: a fresh read; ``ended``: the ends the bridge reported, which stand for a Job the
    read finds unfinished no more (deleted right after it Completed, by its TTL, say). A Job
    awaited that failed in a cycle through ``me`` fails ``me`` with that cycle, seen from ``me``.
    """
    reported = {d.name: d for d in ended}
    seen, waiting = dict(seen), []
    for live in jobs:
        end = reported.get(live.name)
        d = end if live.outcome is None and end is not None and live.uid in ("", end.uid) else live
        known = seen.get(d.name)
        if d.outcome == "Failed":
            cycle = d.cycle or []
            if me in cycle[:-1] and ELLIPSIS not in cycle:
                at = cycle.index(me)
                return "failed", seen, [], cycle_message([*cycle[at:-1], *cycle[:at], me])
            return "failed", seen, [], f"Job {d.name} failed"
        if d.outcome == "Complete":
            continue
        if d.gone or (known and d.uid != known):
            return "failed", seen, [], f"Job {d.name} was deleted before it finished"
        if d.uid:
            seen[d.name] = d.uid
        waiting.append(d.name)
    return ("wait" if waiting else "met"), seen, waiting, ""


def _backoff(opts: JobOptions) -> dict[str, timedelta]:
    """JOB-BACKOFF: the Pod-recreation backoff the Job's annotations set (else JOB-69's)."""
    base = DEFAULT_BACKOFF if opts.backoff_base_seconds is None else timedelta(seconds=opts.backoff_base_seconds)
    cap = MAX_BACKOFF if opts.backoff_max_seconds is None else timedelta(seconds=opts.backoff_max_seconds)
    return {"backoff_base": base, "backoff_cap": max(cap, base)}


def finished_event(b: Books, status: JobStatusView, now: datetime) -> CloudEvent:
    """NOTIFY-EVENTS: ``io.batchd.job.complete`` or ``io.batchd.job.failed``, once per Job."""
    interim = _interim_end(status.conditions)
    condition = finished_condition(status.conditions) or (interim[0] if interim else None)
    outcome = b.finished or FAILED
    return CloudEvent.about(
        ObjectRef(kind="Job", namespace=b.ns, name=b.name, uid=b.uid),
        JOB_COMPLETE_EVENT if outcome == COMPLETE else JOB_FAILED_EVENT, outcome.lower(),
        condition.last_transition_time if condition and condition.last_transition_time else now,
        {"outcome": outcome, "reason": condition.reason if condition else None,
         "message": condition.message if condition else None, "succeeded": status.succeeded,
         "failed": status.failed, "completedIndexes": status.completed_indexes or None,
         "startTime": status.start_time.isoformat() if status.start_time else None,
         "completionTime": status.completion_time.isoformat() if status.completion_time else None})


def report(b: Books, type_: EventType, reason: str, message: str) -> Steps[None]:
    """Record an Event once per reason and message (kept across continue-as-new, as the CronJob's)."""
    key = f"{reason}:{message}"
    if key in b.memory.reported:
        return
    b.memory = b.memory.model_copy(update={"reported": [*b.memory.reported, key][-REPORTED:]})
    yield Emit(EventInput(ref=ObjectRef(kind="Job", namespace=b.ns, name=b.name, uid=b.uid),
                          type=type_, reason=reason, message=message, component=JOB_COMPONENT))


def _observe(b: Books) -> Steps[JobSnapshot]:
    """Read the Job and its Pods, and keep what the read says in the durable memory."""
    last = b.last
    b.errored = False
    b.sample = (None if last is None or last.gone or finished_condition(last.status.conditions) is not None
                else (completion_mode(last.spec), "reconciling"))  # if the read fails
    snap: JobSnapshot = yield Call(observe_job, ObserveJobInput(namespace=b.ns, name=b.name, uid=b.uid,
                                                                expect=b.expect, memory=b.memory))
    b.last = snap
    b.reached(snap.pods_rv)
    b.saw_job(snap.resource_version)
    if not snap.gone:
        b.note_end(snap.status)
    keep = prune_finalizers_removed(snap, b.memory.finalizers_removed)  # bounded memory
    if keep != b.memory.finalizers_removed:
        b.memory = b.memory.model_copy(update={"finalizers_removed": keep})
    return snap


def _expected_pods(b: Books, snap: JobSnapshot, plan: SyncPlan) -> list[str]:
    """JOB-26: the Pods the next sync's LIST must show, unless relabeled (those holding the finalizer
    whose removal is not requested; the Pods this sync creates are added as they are made)."""
    removed = set(b.memory.finalizers_removed)
    dropped = {*plan.release, *plan.release_and_delete}
    return sorted(p.name for p in snap.pods if p.has_finalizer and p.uid not in removed and p.name not in dropped)


def _release_unmatched(b: Books, snap: JobSnapshot, plan: SyncPlan) -> Steps[set[str]]:
    """JOB-26: take the Job's ownerReference and finalizer off the Pods that stopped matching; their names."""
    if not plan.release_unmatched or not (yield Patched(RELEASE_UNMATCHED_PATCH)):
        return set()
    uids = {p.name: p.uid for p in snap.unmatched}
    done: PodsResult = yield Call(release_unmatched_job_pods, ReleaseUnmatchedInput(
        namespace=b.ns, job_uid=b.uid, pods={n: uids[n] for n in plan.release_unmatched}), bulk=True)
    return set(done.names)


def _delete(b: Books, pods: list[str], *, release: bool) -> Steps[None]:
    res: PodsResult = yield Call(delete_job_pods, DeletePodsInput(namespace=b.ns, pods=pods, release=release),
                                 bulk=True)
    b.reached(res.pods_rv)


def _create(b: Books, pods: list[PodToCreate], reason: str, clock: Callable[[], datetime]) -> Steps[timedelta | None]:
    """Create Pods; a rejected template fails the Job, a quota-like refusal backs off (the wait)."""
    pods = [p.model_copy(update={"suffix": b.suffix()}) for p in pods]
    res: CreatePodsResult = yield Call(create_job_pods, CreatePodsInput(
        namespace=b.ns, name=b.name, uid=b.uid, indexes=[p.index for p in pods], pods=pods,
        job_rv=b.memory.job_rv), bulk=True)
    b.expect += res.created
    b.reached(res.pods_rv)
    # POL-56: each attempt once; creates refused because the namespace is terminating are in neither
    yield CountMetric(PODS_CREATION, len(res.created), {"reason": reason, "status": "succeeded"})
    if res.failed + res.refused:
        b.errored = True
        yield CountMetric(PODS_CREATION, res.failed + res.refused, {"reason": reason, "status": "failed"})
    if res.invalid:
        yield from report(b, "Warning", "FailedCreate", f"Error creating: {res.invalid}")
        yield from _fail(b, "PodCreationFailed", f"Pod creation was rejected: {res.invalid}", clock())
        return None
    if res.forbidden:
        yield from report(b, "Warning", "FailedCreate", f"Error creating: {res.forbidden}")
        return b.create_backoff.next()
    b.create_backoff.reset()
    return None


def _fail(b: Books, reason: str, message: str, now: datetime) -> Steps[None]:
    """Mark the Job failing (FailureTarget); the next syncs finish it as upstream would (JOB-75)."""
    snap = b.last
    if snap is None or snap.gone or finished_condition(snap.status.conditions) is not None:
        return
    conditions = [c for c in snap.status.conditions if c.type != FAILURE_TARGET] + [
        Condition(type=FAILURE_TARGET, status="True", reason=reason, message=message, last_transition_time=now)]
    status = snap.status.model_copy(update={"conditions": conditions, "start_time": snap.status.start_time or now})
    yield from _write(b, status, snap.status, snap, snap.resource_version)
    b.again = True


def _track(b: Books, snap: JobSnapshot, plan: SyncPlan, clock: Callable[[], datetime]) -> Steps[JobStatusView | None]:
    """The tracking protocol (JOB-30 to JOB-34): record, release, fold. The status the Job now
    has, or None if a write found the Job changed since the snapshot."""
    status, rv = snap.status, snap.resource_version
    if plan.record is not None and not snap.gone:  # step 1
        written = yield from _write(b, plan.record, snap.status, snap, rv)
        if written is None:
            return None
        status, rv = plan.record, written
        b.note_end(status)
    # The plan's backoff record counts the failures just recorded: kept now, because once step 2
    # labels their Pods released the next snapshot will not show them again (JOB-91).
    b.memory = b.memory.model_copy(update={"backoff": plan.backoff, "counted_backoff": plan.counted_backoff})
    for action, n in sorted(Counter(plan.policy_actions).items()):  # POL-53, POL-18: once step 1 is written
        yield CountMetric(POD_FAILURES_HANDLED, n, {"action": action})
    if plan.release:  # step 2
        yield from _release(b, snap, plan.release)
    if snap.options.delete_succeeded_pods and (succeeded := _released_succeeded(snap, plan)):
        yield from _delete(b, succeeded, release=False)  # JOB-DELETE-SUCCEEDED: recorded in step 1, so still counted
    folded = fold(status, snap.pods, set(b.memory.finalizers_removed), snap.spec, clock(),
                  held_elsewhere=snap.rest.holding)
    if folded != status and not snap.gone:  # step 3
        if (yield from _write(b, folded, status, snap, rv)) is None:
            return None
        b.note_end(folded)
    return folded


def _released_succeeded(snap: JobSnapshot, plan: SyncPlan) -> list[str]:
    """JOB-DELETE-SUCCEEDED: the succeeded Pods whose finalizer is off (this sync's step 2, or one
    cut short before its step 3): their uids are in the status, so deleting them changes no count."""
    released = set(plan.release)
    return [p.name for p in snap.pods
            if p.phase == "Succeeded" and not p.deleting and (p.name in released or not p.has_finalizer)]


def _release(b: Books, snap: JobSnapshot, names: list[str]) -> Steps[None]:
    """Step 2: remove the Pods' finalizers; their uids join the durable memory (JOB-38)."""
    uids = {p.name: p.uid for p in [*snap.pods, *snap.unmatched]}
    ended = {p.name for p in snap.pods if p.finished}
    res: PodsResult = yield Call(release_job_pods, ReleaseInput(
        namespace=b.ns, pods=names, finished=[n for n in names if n in ended]), bulk=True)
    b.reached(res.pods_rv)
    b.memory = b.memory.model_copy(update={"finalizers_removed": [
        *b.memory.finalizers_removed, *(uids[n] for n in res.names if n in uids)]})


def _write(b: Books, status: JobStatusView, before: JobStatusView, snap: JobSnapshot, rv: str) -> Steps[str | None]:
    """Write ``status`` over ``before`` if the Job is still at ``rv``; the new resourceVersion, or None if stale/gone."""
    res: PodsResult = yield Call(write_job_status, WriteStatusInput(
        namespace=b.ns, name=b.name, uid=b.uid, resource_version=rv, status=status,
        indexed=snap.spec.completion_mode == "Indexed"))
    if res.gone or res.stale:
        b.errored = True  # upstream's status update fails the sync (POL-49 result="error")
        return None
    b.saw_job(res.resource_version)
    yield StatusWritten(before, status, snap.spec)
    return res.resource_version
