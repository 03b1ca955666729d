"""What the Job controller reads of its Pods: the per-Pod rules and the window a snapshot holds.

Layer: workflows, pure (models; imported by the decisions in workflows/decisions/job.py and by the
``observe_job`` activity). The rules that judge one Pod (active, failed, the podFailurePolicy
match, a failed index, the Pod an index waits on) live here, with the index strings, so that the
activity can tally the Pods a sync does not need one by one (:func:`bound_snapshot`, JOB-92) with
the very rules the decisions apply to the ones it does. Rule ids are those of docs/job.md.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_json

from workflows.models.common import finished_condition
from workflows.models.job import (
    ContainerExit,
    JobMemory,
    JobSnapshot,
    JobSpecView,
    PodCondition,
    PodFailurePolicy,
    PodInfo,
    PodTally,
)

#: POL-9: podFailurePolicy actions.
FAIL_JOB, IGNORE, COUNT, FAIL_INDEX = "FailJob", "Ignore", "Count", "FailIndex"
#: JOB-92: the most Pods a snapshot holds one by one, beside those the sync's bookkeeping names.
WINDOW = 500
#: JOB-92: the most bytes a recorded snapshot takes, three quarters of Temporal's warning limit
SNAPSHOT_BUDGET = 192 * 1024

_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}  # controller.ActivePods (JOB-15)
_GO_ATOI = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts (JOB-49)


# --- index strings (JOB-48, JOB-49) ----------------------------------------------------------


def format_indexes(indexes: Iterable[int]) -> str:
    """Format a set of completion indexes as ``status.completedIndexes`` (JOB-48).

    Args:
        indexes: non-negative indexes, in any order, duplicates allowed.

    Returns:
        Sorted, comma-separated; runs of 3 or more as ``a-b``, a pair as ``a,b``; ``""`` if
        empty. For example ``{1, 3, 4, 5, 7}`` gives ``1,3-5,7``.
    """
    out: list[str] = []
    ordered = sorted(set(indexes))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{ordered[i]}-{ordered[j]}")
        else:
            out.extend(str(x) for x in ordered[i : j + 1])
        i = j + 1
    return ",".join(out)


def parse_indexes(text: str, completions: int) -> set[int]:
    """Parse an index string leniently, as upstream ``parseIndexesFromString`` (JOB-49).

    A malformed interval is skipped; an interval starting at or above ``completions`` stops
    the parse; an interval end above ``completions - 1`` is clamped.

    Args:
        text: the string, e.g. ``status.completedIndexes``.
        completions: ``spec.completions``.

    Returns:
        The indexes, all in ``[0, completions)``.
    """
    result: set[int] = set()
    for first, last in parse_intervals(text, completions):
        result.update(range(first, last + 1))
    return result


def count_indexes(text: str, completions: int) -> int:
    """The number of indexes :func:`parse_indexes` would give, counted as intervals (any size)."""
    return count_covered(parse_intervals(text, completions))


def parse_intervals(text: str, completions: int) -> list[tuple[int, int]]:
    """:func:`parse_indexes` as inclusive intervals, so a rule like ``0-2147483646`` costs nothing."""
    out: list[tuple[int, int]] = []
    for part in text.split(","):
        limits = part.split("-")
        if not _GO_ATOI.fullmatch(limits[0]):
            continue
        first = int(limits[0])
        if first >= completions:
            break
        last = first
        if len(limits) > 1:
            if not _GO_ATOI.fullmatch(limits[1]):
                continue
            last = min(int(limits[1]), completions - 1)
        if last >= max(first, 0):
            out.append((max(first, 0), last))
    return out


def count_covered(intervals: list[tuple[int, int]]) -> int:
    """The number of distinct indexes the inclusive intervals cover."""
    count, reach = 0, -1
    for a, b in sorted(intervals):
        if b > reach:
            count += b - max(a, reach + 1) + 1
            reach = b
    return count


# --- the rules that judge one Pod (JOB-13, JOB-15, JOB-41, JOB-44, POL-1 to POL-24) -----------


def match_pod_failure_policy(
    pod_failure_policy: PodFailurePolicy | None, failed_pod: PodInfo
) -> tuple[str | None, bool, str | None]:
    """Judge one failed Pod against the rules, first match wins (POL-3 to POL-9; upstream's name).

    Args:
        pod_failure_policy: ``spec.podFailurePolicy`` (None: every failure counts).
        failed_pod: a Pod in phase Failed (or one counted as failed while the Job fails, POL-15).

    Returns:
        ``(fail_job_message, count_failed, action)``: the FailureTarget message when a FailJob
        rule matched (POL-13), whether the failure counts toward the limits (False only for
        Ignore), and the matched action (None when no rule matched, POL-18).
    """
    if pod_failure_policy is None:
        return None, True, None
    ref = f"{failed_pod.namespace}/{failed_pod.name}"
    for i, rule in enumerate(pod_failure_policy.rules):
        if rule.action not in (FAIL_JOB, IGNORE, COUNT, FAIL_INDEX):
            continue  # POL-4: an action from a newer API is skipped
        if rule.on_exit_codes is not None:
            container = match_on_exit_codes(failed_pod, rule.on_exit_codes.container_name,
                                            rule.on_exit_codes.operator, rule.on_exit_codes.values)
            if container is None:
                continue
            detail = (f"Container {container.name} for pod {ref} failed with exit code "
                      f"{container.exit_code} matching {rule.action} rule at index {i}")
        elif rule.on_pod_conditions is not None:
            condition = match_on_pod_conditions(failed_pod, rule.on_pod_conditions)
            if condition is None:
                continue
            detail = f"Pod {ref} has condition {condition.type} matching {rule.action} rule at index {i}"
        else:
            continue
        if rule.action == IGNORE:
            return None, False, IGNORE
        return (detail if rule.action == FAIL_JOB else None), True, rule.action
    return None, True, None


def match_on_exit_codes(
    pod: PodInfo, container_name: str | None, operator: str, values: Iterable[int]
) -> ContainerExit | None:
    """POL-5 to POL-7: the first terminated container (containers, then init containers) whose non-zero
    code satisfies the operator; exit code 0 and unknown operators never match."""
    wanted = set(values)
    for c in pod.containers:
        if c.exit_code is None or c.exit_code == 0:
            continue
        if container_name is not None and c.name != container_name:
            continue
        if (operator == "In" and c.exit_code in wanted) or (operator == "NotIn" and c.exit_code not in wanted):
            return c
    return None


def match_on_pod_conditions(pod: PodInfo, patterns: Iterable[Any]) -> PodCondition | None:
    """POL-8: the first Pod condition whose type and status equal some pattern's, compared literally."""
    wanted = [(p.type, p.status) for p in patterns]
    return next((c for c in pod.conditions if (c.type, c.status) in wanted), None)


def get_fail_job_message(spec: JobSpecView, pods: Iterable[PodInfo]) -> str | None:
    """POL-11, POL-12: the message of the first Failed Pod (any index) that matches a FailJob rule."""
    if spec.pod_failure_policy is None:
        return None
    for p in pods:
        if p.phase == "Failed":  # a podFailurePolicy implies the Failed replacement policy (POL-2)
            message, _, _ = match_pod_failure_policy(spec.pod_failure_policy, p)
            if message is not None:
                return message
    return None


def is_index_failed(spec: JobSpecView, pod: PodInfo, replace_failed_only: bool) -> bool:
    """POL-24: the Pod failed by a FailIndex rule, or in a counted way at its index's last retry."""
    if not pod_failed(pod, replace_failed_only):
        return False
    _, count_failed, action = match_pod_failure_policy(spec.pod_failure_policy, pod)
    if action == FAIL_INDEX:
        return True
    limit = spec.backoff_limit_per_index
    return count_failed and limit is not None and pod.failure_count >= limit


def calculate_failed_indexes(
    spec: JobSpecView, failed_indexes: str | None, pods: Iterable[PodInfo], replace_failed_only: bool
) -> set[int]:
    """POL-24, POL-25: the previous failed indexes (clamped to completions, POL-44) and the newly failed ones."""
    completions = spec.completions or 0
    out = parse_indexes(failed_indexes or "", completions)
    for p in pods:
        if (p.has_finalizer and p.index is not None and 0 <= p.index < completions
                and is_index_failed(spec, p, replace_failed_only)):
            out.add(p.index)
    return out


def get_pods_with_delayed_deletion_per_index(
    spec: JobSpecView, pods: Iterable[PodInfo], busy_indexes: set[int], replace_failed_only: bool,
) -> dict[int, PodInfo]:
    """POL-23: per retried index, the failed Pod whose finalizer waits for the replacement.

    Args:
        spec: the Job spec.
        pods: the Job's Pods.
        busy_indexes: indexes that succeeded, failed or have an active Pod: none of their Pods
            is held back.
        replace_failed_only: the effective podReplacementPolicy is Failed (JOB-56).

    Returns:
        For each index, the Pod with the highest failure + ignored count, the later finish
        time breaking a tie.
    """
    completions = spec.completions or 0
    out: dict[int, PodInfo] = {}
    for p in pods:
        if not (p.has_finalizer and p.index is not None and 0 <= p.index < completions):
            continue
        if p.index in busy_indexes or not pod_failed(p, replace_failed_only):
            continue
        best = out.get(p.index)
        if best is None or _delay_rank(p) > _delay_rank(best):
            out[p.index] = p
    return out


def _delay_rank(p: PodInfo) -> tuple[int, datetime]:
    return p.failure_count + p.ignored_failure_count, p.finish_time or p.creation_time or datetime.min.replace(tzinfo=UTC)


def pod_failed(p: PodInfo, replace_failed_only: bool) -> bool:
    """JOB-44, JOB-59, JOB-60: Failed, or terminating and not Succeeded under TerminatingOrFailed."""
    if p.phase == "Failed":
        return True
    return not replace_failed_only and p.deleting and p.phase != "Succeeded"


def is_active_pod(p: PodInfo) -> bool:
    return not p.finished and not p.deleting  # JOB-41


def active_pods_order(p: PodInfo) -> tuple[int, bool, int, tuple[int, float]]:
    """controller.ActivePods: pending < running, not ready < ready, more restarts, newer first."""
    created = (0, 0.0) if p.creation_time is None else (1, -p.creation_time.timestamp())
    return (_PHASE_RANK.get(p.phase, 0), p.ready, -p.restart_count, created)


def pod_counts_as_failed(spec: JobSpecView, p: PodInfo) -> bool:
    """POL-9: a failure counts, unless an Ignore rule matches it."""
    return match_pod_failure_policy(spec.pod_failure_policy, p)[1]


# --- the window of a snapshot (JOB-92) -------------------------------------------------------


def fit_snapshot(snap: JobSnapshot, memory: JobMemory, budget: int = SNAPSHOT_BUDGET) -> tuple[JobSnapshot, int]:
    """JOB-92: :func:`bound_snapshot` with the widest window, ``WINDOW`` or a half of it, that fits ``budget``.

    A row takes about 170 bytes; Pods with long names, many failing containers or many conditions
    a ``podFailurePolicy`` names take more, and then the window narrows rather than the snapshot
    grows. The Pods the bookkeeping names stay whatever their size.

    Returns:
        The snapshot, and its size in bytes as a payload (above ``budget`` only at a window of one).
    """
    window = WINDOW
    while True:
        bounded = bound_snapshot(snap, memory, window=window)
        size = len(to_json(bounded))
        if size <= budget or window == 1:
            return bounded, size
        window //= 2


def bound_snapshot(snap: JobSnapshot, memory: JobMemory, *, window: int = WINDOW) -> JobSnapshot:
    """JOB-92: keep at most ``window`` Pods one by one, chosen as a sync needs them; tally the rest.

    A sync acts on at most 500 Pods of each kind (JOB-19, JOB-37), so the decisions need each
    Pod only while it may be acted on, and counts and index sets of all the others. Held one by
    one, always: the Pods still holding the finalizer whose uid the bookkeeping names (the
    uncounted lists, the finalizer removals asked for, the failures in the backoff record: JOB-33,
    JOB-38, JOB-70). Then, up to
    ``window`` with those: the Pods an index waits on (POL-23), lowest index first; finished Pods still
    holding the finalizer, lowest index first; other Pods still holding it that are not active. And up to ``window``
    active Pods, in the order they would be removed (JOB-15, an Indexed Job's invalid and
    duplicated indexes first), apart, so that finished Pods never crowd out those a finishing Job
    must delete first (JOB-74).

    Args:
        snap: a snapshot holding every Pod the Job's LIST or cache showed.
        memory: the workflow's durable memory, whose uids the window must hold.
        window: the most Pods held beside those, of each of the two kinds.

    Returns:
        ``snap`` when it holds no more than ``window`` Pods; else a copy whose ``pods``
        are the window and whose ``rest`` tallies the others; each row carries only what the
        decisions read of it (:func:`_slimmer`), a Job's snapshot of a few Pods included.
    """
    spec, st = snap.spec, snap.status
    slim = _slimmer(spec.pod_failure_policy)
    pods = snap.pods
    if len(pods) <= window and len(snap.unmatched) <= window:
        return snap.model_copy(update={"pods": [slim(p) for p in pods]})
    removed = set(memory.finalizers_removed)
    # A named Pod that no longer holds the finalizer is left out: missing, it reads as released
    # (JOB-33), which it is, and it is no new failure either.
    named = {*st.uncounted_succeeded, *st.uncounted_failed, *removed}
    chosen: dict[str, PodInfo] = {p.uid: p for p in pods if p.uid in named and p.has_finalizer}
    budget = window - len(chosen)  # they leave the window as step 3 folds them, in a sync or two
    if spec.backoff_limit_per_index is None:  # per-index Jobs wait per index, not on that record (JOB-73)
        counted = set(memory.counted_backoff)
        chosen.update((p.uid, p) for p in pods if p.uid in counted and p.has_finalizer and p.uid not in chosen)
    live = not snap.gone and finished_condition(st.conditions) is None
    rfo = spec.pod_replacement_policy == "Failed" or spec.pod_failure_policy is not None
    delayed = _waiting_pods(snap, removed, rfo) if live else {}
    # Finished Pods lowest index first: recorded in that order, completedIndexes stays a few intervals
    # (recorded as they came, 100,000 Pods finishing together made it 113 KB of scattered runs).
    finished = heapq.nsmallest(budget, (p for p in pods if p.has_finalizer and (p.finished or pod_failed(p, rfo))),
                               key=_index_order) if budget > 0 else []
    _choose(chosen, budget, (delayed[ix] for ix in sorted(delayed)), finished,
            (p for p in pods if p.has_finalizer and (not live or not is_active_pod(p))))
    if live:
        _choose(chosen, window, _removal_order(snap))
    rest = [p for p in pods if p.uid not in chosen]
    tally = _tally(snap, list(chosen.values()), rest, removed, rfo,
                   [ix for ix, p in delayed.items() if p.uid not in chosen])
    kept = [slim(p) for p in chosen.values()]
    return snap.model_copy(update={"pods": kept, "unmatched": snap.unmatched[:window], "rest": tally})


def _slimmer(policy: PodFailurePolicy | None) -> Callable[[PodInfo], PodInfo]:
    """A window's row without what no decision reads of it: the finish time of an active Pod, the
    containers that did not exit non-zero and the conditions no ``onPodConditions`` pattern names
    (neither can match a rule, POL-5 to POL-8), and without a podFailurePolicy the namespace (only
    its messages name it, POL-13)."""
    types = {c.type for r in (policy.rules if policy else []) for c in r.on_pod_conditions or []}
    exits = any(r.on_exit_codes is not None for r in (policy.rules if policy else []))

    def slim(p: PodInfo) -> PodInfo:
        update: dict[str, Any] = {
            "containers": [c for c in p.containers if c.exit_code] if exits else [],
            "conditions": [c for c in p.conditions if c.type in types],
        }
        if is_active_pod(p):
            update["finish_time"] = None
        if policy is None:
            update["namespace"] = ""
        return p.model_copy(update=update)

    return slim


def _index_order(p: PodInfo) -> tuple[int, str]:
    return (-1 if p.index is None else p.index, p.name)


def _choose(chosen: dict[str, PodInfo], budget: int, *groups: Iterable[PodInfo]) -> None:
    """Add to ``chosen`` the first ``budget`` Pods of ``groups``, in order, that it does not hold yet."""
    for group in groups:
        for p in group:
            if budget <= 0:
                return
            if p.uid not in chosen:
                chosen[p.uid] = p
                budget -= 1


def _waiting_pods(snap: JobSnapshot, removed: set[str], rfo: bool) -> dict[int, PodInfo]:
    """POL-23 over every Pod: the failed Pod each retried index waits on (per-index Jobs only)."""
    spec, st = snap.spec, snap.status
    if spec.completion_mode != "Indexed" or spec.backoff_limit_per_index is None:
        return {}
    limit = spec.completions or 0
    uncounted = {*st.uncounted_succeeded, *st.uncounted_failed}
    busy = parse_indexes(st.completed_indexes, limit) | calculate_failed_indexes(spec, st.failed_indexes, snap.pods, rfo)
    for p in snap.pods:
        if p.index is None:
            continue
        if is_active_pod(p) or (p.phase == "Succeeded" and p.has_finalizer and p.uid not in removed
                             and p.uid not in uncounted and 0 <= p.index < limit):
            busy.add(p.index)
    return get_pods_with_delayed_deletion_per_index(spec, snap.pods, busy, rfo)


def _removal_order(snap: JobSnapshot) -> list[PodInfo]:
    """JOB-15: the active Pods as a scale-down removes them; an Indexed Job's invalid indexes and
    every Pod of a duplicated index first, so that the decision sees each duplicate with its rival."""
    active = [p for p in snap.pods if is_active_pod(p)]
    first: list[PodInfo] = []
    if snap.spec.completion_mode == "Indexed":
        limit = snap.spec.completions or 0
        by_index: dict[int, list[PodInfo]] = {}
        for p in active:
            if p.index is None or not 0 <= p.index < limit:
                first.append(p)
            else:
                by_index.setdefault(p.index, []).append(p)
        first += [p for group in by_index.values() if len(group) > 1 for p in group]
    seen = {p.uid for p in first}
    others = (p for p in active if p.uid not in seen)
    return first + heapq.nsmallest(WINDOW, others, key=active_pods_order)


def _tally(snap: JobSnapshot, window: list[PodInfo], rest: list[PodInfo], removed: set[str], rfo: bool,
           waiting: list[int]) -> PodTally:
    """The counts and index sets of the Pods left out of the window (:class:`PodTally`)."""
    spec, st = snap.spec, snap.status
    indexed = spec.completion_mode == "Indexed"
    limit = spec.completions or 0
    per_index = indexed and spec.backoff_limit_per_index is not None
    uncounted = {*st.uncounted_succeeded, *st.uncounted_failed}
    n: dict[str, int] = dict.fromkeys(("active", "ready", "terminating", "restarts", "holding", "new_succeeded",
                                       "new_failed", "new_ignored"), 0)
    succeeded_ix: set[int] = set()
    failed_ix: list[int] = []
    for p in rest:
        valid = not indexed or (p.index is not None and 0 <= p.index < limit)
        _count_state(n, p)
        tracked = p.has_finalizer and p.uid not in removed
        n["holding"] += tracked
        if per_index and p.has_finalizer and valid and is_index_failed(spec, p, rfo):
            failed_ix.append(p.index or 0)
        if not tracked or p.uid in uncounted or not valid:
            continue
        if p.phase == "Succeeded":
            n["new_succeeded"] += 1
            if indexed:
                succeeded_ix.add(p.index or 0)
        elif pod_failed(p, rfo):
            n["new_failed"] += 1
            n["new_ignored"] += not pod_counts_as_failed(spec, p)
    known = parse_indexes(st.completed_indexes, limit) | {
        p.index for p in window if p.index is not None and p.phase == "Succeeded" and p.has_finalizer
        and p.uid not in removed and p.uid not in uncounted}
    succeeded_ix -= known
    return PodTally(
        pods=len(rest), **n, new_indexes=len(succeeded_ix),
        new_succeeded_indexes=format_indexes(succeeded_ix) if spec.success_policy is not None else "",
        failed_indexes=format_indexes(failed_ix), fail_job_message=get_fail_job_message(spec, rest),
        pending_indexes=format_indexes(_pending(snap, removed, rfo, known | succeeded_ix, waiting)) if indexed else "",
    )


def _count_state(n: dict[str, int], p: PodInfo) -> None:
    """A Pod outside the window in the counts of active, ready and terminating Pods (JOB-41 to
    JOB-43) and of the restarts of those still running (JOB-66)."""
    if is_active_pod(p):
        n["active"] += 1
        n["ready"] += p.ready
    elif p.deleting and not p.finished:
        n["terminating"] += 1
    if p.phase in ("Pending", "Running"):
        n["restarts"] += p.restart_count


def _pending(snap: JobSnapshot, removed: set[str], rfo: bool, succeeded: set[int], waiting: list[int]) -> list[int]:
    """JOB-21, JOB-58, POL-27 over every Pod: the lowest indexes (at most 500) no Pod holds."""
    spec, limit = snap.spec, snap.spec.completions or 0
    busy = succeeded | set(waiting)
    busy |= calculate_failed_indexes(spec, snap.status.failed_indexes, snap.pods, rfo)
    busy.update(p.index for p in snap.pods if p.index is not None
                and (is_active_pod(p) or (rfo and p.deleting and not p.finished)))
    out: list[int] = []
    for ix in range(limit):
        if len(out) >= WINDOW:
            break
        if ix not in busy:
            out.append(ix)
    return out
