"""Tier-1 tables for the Job API's policies: podFailurePolicy, backoffLimitPerIndex,
successPolicy and elastic Indexed Jobs, over the pure functions of workflows/decisions/job.py.

Rule ids are the POL-n (and JOB-n) of docs/job.md; case names follow upstream's tables
(``TestMatchPodFailurePolicy``, ``TestMatchSuccessPolicy``, ``TestSyncJobWithJobBackoffLimitPerIndex``).
Every ``now`` is a fixed instant.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.test_job_decisions import (
    CRASH_IDS,
    CRASHES,
    NOW,
    S,
    Sim,
    cond,
    ctype,
    is_true,
    make_snapshot,
    pod,
    sim_window,  # noqa: F401 - autouse: every simulated Job here runs whole and through windows of 2 Pods
)
from workflows.decisions.job import (
    get_new_index_failure_counts,
    get_remaining_time_per_index,
    match_success_policy,
    plan_sync,
)
from workflows.models.job import (
    ContainerExit,
    JobMemory,
    JobSpecView,
    JobStatusView,
    PodCondition,
    PodFailurePolicy,
    PodInfo,
    SuccessPolicy,
)
from workflows.models.jobpods import (
    calculate_failed_indexes,
    get_pods_with_delayed_deletion_per_index,
    match_pod_failure_policy,
)


def failed(name: str = "p", *codes: int | tuple[str, int | None] | tuple[str, int | None, bool],
           conditions: tuple[tuple[str, str], ...] = (), **kw: Any) -> PodInfo:
    """A Failed Pod; each code is ``exit`` (container ``main``), ``(name, exit)`` or ``(name, exit, init)``."""
    containers = []
    for c in codes:
        if isinstance(c, int):
            containers.append(ContainerExit(name="main", exit_code=c))
        else:
            containers.append(ContainerExit(name=c[0], exit_code=c[1], init=bool(c[2]) if len(c) > 2 else False))
    base = pod(name, "Failed", finished=kw.pop("finished", NOW - 1000 * S), **kw)
    return base.model_copy(update={"namespace": "ns", "containers": containers,
                                   "conditions": [PodCondition(type=t, status=s) for t, s in conditions]})


def policy(*rules: dict[str, Any]) -> PodFailurePolicy:
    return PodFailurePolicy.model_validate({"rules": list(rules)})


def on_codes(action: str, operator: str, values: list[int], container: str | None = None) -> dict[str, Any]:
    req: dict[str, Any] = {"operator": operator, "values": values}
    if container is not None:
        req["containerName"] = container
    return {"action": action, "onExitCodes": req}


def on_conditions(action: str, *patterns: tuple[str, str]) -> dict[str, Any]:
    return {"action": action, "onPodConditions": [{"type": t, "status": s} for t, s in patterns]}


DISRUPTED = (("DisruptionTarget", "True"),)

# --- podFailurePolicy: match_pod_failure_policy (upstream TestMatchPodFailurePolicy) ----------

MATCH_CASES = [
    ("no policy: counted, no action", None, failed("p", 42), (None, True, None)),
    ("ignore rule matched for exit codes", policy(on_codes("Ignore", "In", [1, 2, 3])), failed("p", 2),
     (None, False, "Ignore")),
    ("FailJob rule matched for exit codes", policy(on_codes("FailJob", "In", [1, 2, 3])), failed("p", 2),
     ("Container main for pod ns/p failed with exit code 2 matching FailJob rule at index 0", True, "FailJob")),
    ("successful containers are skipped by the rules: exit code 0 with NotIn",
     policy(on_codes("FailJob", "NotIn", [111])), failed("p", 0, 111, 0), (None, True, None)),  # POL-7
    ("NotIn [0] matches any non-zero exit", policy(on_codes("FailJob", "NotIn", [0])), failed("p", 0, 7),
     ("Container main for pod ns/p failed with exit code 7 matching FailJob rule at index 0", True, "FailJob")),
    ("pod with no terminated container matches no exit-code rule", policy(on_codes("FailJob", "NotIn", [1])),
     failed("p", ("main", None)), (None, True, None)),  # POL-7
    ("rule on a container that does not exist does not match",
     policy(on_codes("FailJob", "In", [5], container="sidecar")), failed("p", 5), (None, True, None)),
    ("rule on a named container matches only that container",
     policy(on_codes("FailJob", "In", [5], container="side")), failed("p", ("main", 5), ("side", 5)),
     ("Container side for pod ns/p failed with exit code 5 matching FailJob rule at index 0", True, "FailJob")),
    ("init container checked after the containers", policy(on_codes("FailJob", "In", [3, 4])),
     failed("p", ("main", 4), ("init", 3, True)),
     ("Container main for pod ns/p failed with exit code 4 matching FailJob rule at index 0", True, "FailJob")),
    ("init container alone can match", policy(on_codes("Count", "In", [3])), failed("p", ("init", 3, True)),
     (None, True, "Count")),
    ("first matching rule wins", policy(on_codes("Ignore", "In", [2]), on_codes("FailJob", "In", [2])),
     failed("p", 2), (None, False, "Ignore")),
    ("non-matching rule is passed over, rule index in the message",
     policy(on_codes("Ignore", "In", [9]), on_codes("FailJob", "In", [2])), failed("p", 2),
     ("Container main for pod ns/p failed with exit code 2 matching FailJob rule at index 1", True, "FailJob")),
    ("unknown action for rule matching by exit codes - skip rule with unknown action",
     policy(on_codes("UnknownAction", "In", [2]), on_codes("Count", "In", [2])), failed("p", 2),
     (None, True, "Count")),  # POL-4
    ("unknown operator never matches", policy(on_codes("FailJob", "Between", [2])), failed("p", 2),
     (None, True, None)),  # POL-6
    ("ignore rule matched for pod conditions", policy(on_conditions("Ignore", ("DisruptionTarget", "True"))),
     failed("p", 137, conditions=DISRUPTED), (None, False, "Ignore")),
    ("FailJob rule matched for pod conditions", policy(on_conditions("FailJob", ("DisruptionTarget", "True"))),
     failed("p", 137, conditions=DISRUPTED),
     ("Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0", True, "FailJob")),
    ("pod condition status compared literally", policy(on_conditions("Ignore", ("DisruptionTarget", "False"))),
     failed("p", 1, conditions=DISRUPTED), (None, True, None)),  # POL-8
    ("Unknown status matches only Unknown", policy(on_conditions("Ignore", ("Custom", "Unknown"))),
     failed("p", 1, conditions=(("Custom", "Unknown"),)), (None, False, "Ignore")),
    ("FailIndex rule matched for exit codes", policy(on_codes("FailIndex", "In", [2])), failed("p", 2),
     (None, True, "FailIndex")),
    ("Count rule matched", policy(on_codes("Count", "NotIn", [0])), failed("p", 1), (None, True, "Count")),
]


@pytest.mark.parametrize("pfp, p, want", [c[1:] for c in MATCH_CASES], ids=[c[0] for c in MATCH_CASES])
def test_match_pod_failure_policy(pfp: PodFailurePolicy | None, p: PodInfo, want: tuple[Any, ...]) -> None:
    assert match_pod_failure_policy(pfp, p) == want


# --- podFailurePolicy: the sync (upstream TestSyncJobWithPodFailurePolicy-style) -------------

FAIL_ON_42 = {"rules": [on_codes("FailJob", "In", [42]), on_conditions("Ignore", ("DisruptionTarget", "True"))]}


def test_fail_job_rule_sets_failure_target_and_deletes_the_rest_without_retry() -> None:  # POL-11, POL-13, POL-14
    running = pod("r", "Running")
    snap = make_snapshot(failed("bad", 42), running, completions=3, parallelism=2, pod_failure_policy=FAIL_ON_42)
    plan = plan_sync(snap, JobMemory(), NOW)
    ft = ctype(plan.record, "FailureTarget")
    assert ft is not None and ft.reason == "PodFailurePolicy"
    assert ft.message == "Container main for pod ns/bad failed with exit code 42 matching FailJob rule at index 0"
    assert plan.create == [] and plan.delete == ["r"]  # POL-14: plain DELETE, finalizer kept
    assert plan.record is not None and sorted(plan.record.uncounted_failed) == ["u-bad", "u-r"]  # POL-15
    assert ("Warning", "PodFailurePolicy") in [(e.type, e.reason) for e in plan.events]  # POL-17


def test_fail_job_rule_with_a_terminating_pod_waits_for_it_before_failed() -> None:  # POL-16
    sim = Sim(completions=2, parallelism=2, pod_failure_policy=FAIL_ON_42)
    sim.sync()
    sim.kubelet()  # Pending -> Running
    first, second = sorted(sim.pods)
    sim.pods[first] = failed(first, 42, uid=sim.pods[first].uid)
    sim.sync()
    assert is_true(sim.status, "FailureTarget") and not is_true(sim.status, "Failed")
    assert sim.status.terminating == 1  # the other Pod was deleted and is still running
    sim.kubelet()  # it stops
    sim.sync()
    f = ctype(sim.status, "Failed")
    assert f is not None and f.reason == "PodFailurePolicy" and sim.status.terminating == 0
    assert sim.status.failed == 2 and sim.status.completion_time is None  # POL-15, POL-17
    sim.assert_clean()


def test_fail_job_outranks_backoff_limit_and_success() -> None:  # POL-11, JOB-63
    snap = make_snapshot(failed("a", 42), failed("b", 1), completions=1, backoff_limit=0,
                         pod_failure_policy=FAIL_ON_42)
    plan = plan_sync(snap, JobMemory(), NOW)
    assert (ft := ctype(plan.record, "FailureTarget")) is not None and ft.reason == "PodFailurePolicy"


def test_fail_job_is_not_evaluated_once_success_criteria_met() -> None:  # POL-11, POL-39
    status = JobStatusView(start_time=NOW - 100 * S, conditions=[cond("SuccessCriteriaMet", reason="SuccessPolicy")])
    snap = make_snapshot(failed("a", 42, finished=NOW - 50 * S, deleting=True), status=status, completions=1,
                         pod_failure_policy=FAIL_ON_42)
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.record is None or ctype(plan.record, "FailureTarget") is None
    # JOB-51: the success deleted it and it ended after, so its finalizer goes and it is not counted
    assert plan.release == ["a"] and (plan.record is None or plan.record.uncounted_failed == [])
    # ... and one that ended before it, left for a later sync (JOB-37, JOB-92), still counts
    before = make_snapshot(failed("b", 42, finished=NOW - 150 * S), status=status, completions=1,
                           pod_failure_policy=FAIL_ON_42)
    plan = plan_sync(before, JobMemory(), NOW)
    assert plan.release == ["b"] and plan.record is not None and plan.record.uncounted_failed == ["u-b"]
    assert ctype(plan.record, "FailureTarget") is None


def test_ignore_on_disruption_target_counts_nothing_and_replaces() -> None:  # POL-9, POL-10
    evicted = failed("ev", 137, conditions=DISRUPTED)
    snap = make_snapshot(evicted, completions=1, backoff_limit=0, pod_failure_policy=FAIL_ON_42)
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.record is not None and plan.record.uncounted_failed == [] and plan.record.failed == 0
    assert plan.release == ["ev"]  # the finalizer still goes
    assert len(plan.create) == 1  # its 10 s backoff ran out long ago
    assert ctype(plan.record, "FailureTarget") is None  # backoffLimit 0 not exceeded
    assert plan.backoff.failures_after_last_success == 1  # POL-10: it still feeds the backoff
    assert plan.policy_actions == ["Ignore"]  # POL-18


def test_ignored_failures_never_exhaust_backoff_limit_in_sim() -> None:  # POL-9
    sim = Sim(completions=1, backoff_limit=0, pod_failure_policy=FAIL_ON_42)
    for _ in range(3):
        sim.sync()
        sim.kubelet()
        (name,) = [n for n, p in sim.pods.items() if p.phase == "Running"]
        sim.pods[name] = failed(name, 137, conditions=DISRUPTED, uid=sim.pods[name].uid)
        sim.now += timedelta(minutes=11)  # past any backoff
    sim.run()
    assert is_true(sim.status, "Complete") and sim.status.failed == 0 and sim.created == 4


def test_running_pod_with_ignore_condition_is_not_counted_when_the_job_fails() -> None:  # POL-15
    disrupted = pod("d", "Running").model_copy(update={"conditions": [PodCondition(type="DisruptionTarget")]})
    snap = make_snapshot(failed("bad", 42), disrupted, completions=2, parallelism=2, pod_failure_policy=FAIL_ON_42)
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.record is not None and plan.record.uncounted_failed == ["u-bad"]
    assert sorted(plan.release) == ["bad", "d"]


def test_terminating_pod_is_not_judged_until_terminal() -> None:  # POL-1, POL-2
    gone = pod("t", "Running", deleting=True)
    plan = plan_sync(make_snapshot(gone, completions=1, pod_failure_policy=FAIL_ON_42), JobMemory(), NOW)
    assert plan.create == [] and plan.release == []
    assert plan.record is not None and plan.record.terminating == 1


def test_fail_index_without_backoff_limit_per_index_counts_as_count() -> None:  # POL-9, POL-25
    pfp = {"rules": [on_codes("FailIndex", "In", [3])]}  # validation forbids it; a skewed API may not
    snap = make_snapshot(failed("a", 3, index=0), completions=2, parallelism=2, completion_mode="Indexed",
                         backoff_limit=5, pod_failure_policy=pfp)
    plan = plan_sync(snap, JobMemory(), NOW)
    assert plan.record is not None and plan.record.uncounted_failed == ["u-a"]
    assert plan.record.failed_indexes is None and ctype(plan.record, "FailureTarget") is None


# --- backoffLimitPerIndex ---------------------------------------------------------------------

PER_INDEX: dict[str, Any] = {"completion_mode": "Indexed", "backoff_limit_per_index": 1, "backoff_limit": 2**31 - 1}


def test_new_index_failure_counts() -> None:  # POL-21
    spec = JobSpecView(pod_failure_policy=FAIL_ON_42, **PER_INDEX)
    counted = failed("a", 1, index=0).model_copy(update={"failure_count": 2, "ignored_failure_count": 1})
    ignored = failed("b", 1, index=0, conditions=DISRUPTED).model_copy(update={"failure_count": 2})
    assert get_new_index_failure_counts(spec, None) == (0, 0)
    assert get_new_index_failure_counts(spec, counted) == (3, 1)
    assert get_new_index_failure_counts(spec, ignored) == (2, 1)


@pytest.mark.parametrize(
    "pods, previous, want",
    [
        ([failed("a", 1, index=0)], "", set()),  # annotation 0 < limit 1: retried
        ([failed("a", 1, index=0).model_copy(update={"failure_count": 1})], "", {0}),  # last retry
        ([failed("a", 3, index=2)], "0", {0, 2}),  # FailIndex rule, whatever the count
        ([failed("a", 3, index=2, fin=False)], "", set()),  # without the finalizer: already counted
        ([failed("a", 3, index=7)], "", set()),  # out of range
        ([failed("a", 9, index=1, conditions=DISRUPTED).model_copy(update={"failure_count": 5})], "", set()),  # Ignore
        ([], "0-9", {0, 1, 2, 3}),  # POL-44: clamped to completions
    ],
    ids=["retry left", "limit reached", "FailIndex rule", "released pod", "index out of range",
         "ignored failure never fails the index", "previous set clamped"],
)
def test_calculate_failed_indexes(pods: list[PodInfo], previous: str, want: set[int]) -> None:  # POL-24, POL-25
    pfp = {"rules": [on_codes("FailIndex", "In", [3]), on_conditions("Ignore", ("DisruptionTarget", "True"))]}
    spec = JobSpecView(completions=4, parallelism=4, pod_failure_policy=pfp, **PER_INDEX)
    assert calculate_failed_indexes(spec, previous, pods, True) == want


def test_delayed_pod_is_the_one_with_the_highest_count_then_the_latest_finish() -> None:  # POL-23
    spec = JobSpecView(completions=3, parallelism=3, **PER_INDEX)
    a = failed("a", 1, index=0, finished=NOW - 50 * S).model_copy(update={"failure_count": 1})
    b = failed("b", 1, index=0, finished=NOW - 90 * S).model_copy(update={"failure_count": 2})
    c = failed("c", 1, index=1, finished=NOW - 50 * S)
    d = failed("d", 1, index=1, finished=NOW - 10 * S)
    e = failed("e", 1, index=2)
    got = get_pods_with_delayed_deletion_per_index(spec, [a, b, c, d, e], {2}, True)
    assert {i: p.name for i, p in got.items()} == {0: "b", 1: "d"}


@pytest.mark.parametrize("counts, finished_ago, remaining", [
    ((0, 0), 0, 10), ((0, 0), 4, 6), ((1, 0), 0, 20), ((1, 2), 0, 80), ((30, 0), 0, 600), ((0, 0), 11, 0),
], ids=["first failure", "partly waited", "second failure", "ignored failures lengthen the wait (POL-10)",
        "capped at 10 min", "waited enough"])
def test_get_remaining_time_per_index(counts: tuple[int, int], finished_ago: int, remaining: int) -> None:  # POL-28
    p = failed("a", 1, index=0, finished=NOW - finished_ago * S).model_copy(
        update={"failure_count": counts[0], "ignored_failure_count": counts[1]})
    assert get_remaining_time_per_index(p, NOW) == remaining * S
    assert get_remaining_time_per_index(None, NOW) == timedelta(0)


def test_per_index_replacement_carries_counts_keeps_the_old_pod_and_other_indexes_run() -> None:  # POL-20, POL-21, POL-23, JOB-73
    spec = dict(completions=3, parallelism=3, **PER_INDEX)
    old = failed("a", 1, index=0, finished=NOW - 11 * S)
    fresh_fail = failed("b", 1, index=1, finished=NOW - 2 * S)
    status = JobStatusView(start_time=NOW - 100 * S, failed_indexes="")
    plan = plan_sync(make_snapshot(old, fresh_fail, status=status, **spec), JobMemory(), NOW)
    assert [(c.index, c.failure_count, c.ignored_failure_count) for c in plan.create] == [(0, 1, 0), (2, 0, 0)]
    assert plan.release == []  # both failed Pods wait for their index's next Pod (POL-23)
    assert plan.requeue_after == 8 * S  # index 1 waits its own 10 s
    assert plan.record is not None and plan.record.failed_indexes == "" and plan.record.failed == 0  # POL-25


def test_failed_indexes_is_written_from_the_first_sync() -> None:  # POL-25
    plan = plan_sync(make_snapshot(status=JobStatusView(), completions=2, parallelism=1, **PER_INDEX),
                     JobMemory(), NOW)
    assert plan.record is not None and plan.record.failed_indexes == ""


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_index_that_always_fails_ends_failed_indexes_with_the_others_completed(crash: str | None) -> None:
    sim = Sim(completions=4, parallelism=4, **PER_INDEX)
    for _ in range(80):
        if crash:
            sim.sync(crash)
        sim.sync()
        if sim.finished():
            break
        sim.now += timedelta(seconds=30)  # past each index's backoff
        sim.kubelet(fail=[n for n, p in sim.pods.items() if p.index == 2])
    f = ctype(sim.status, "Failed")
    assert f is not None and (f.reason, f.message) == ("FailedIndexes", "Job has failed indexes")  # POL-29
    assert sim.status.failed_indexes == "2" and sim.status.completed_indexes == "0,1,3"
    assert sim.status.failed == 2 == len(sim.failed_uids)  # POL-26: two Pods of index 2 (limit 1 => 2 tries)
    assert sim.status.succeeded == 3
    sim.assert_clean()


def test_max_failed_indexes_exceeded_fails_at_once() -> None:  # POL-29, POL-30
    last = failed("a", 1, index=0).model_copy(update={"failure_count": 1})
    snap = make_snapshot(last, pod("r", index=1), completions=4, parallelism=2, max_failed_indexes=0,
                         status=JobStatusView(start_time=NOW - 100 * S, failed_indexes=""), **PER_INDEX)
    plan = plan_sync(snap, JobMemory(), NOW)
    ft = ctype(plan.record, "FailureTarget")
    assert ft is not None and ft.reason == "MaxFailedIndexesExceeded"
    assert plan.delete == ["r"] and plan.record is not None and plan.record.failed_indexes == "0"


def test_backoff_limit_is_checked_before_the_per_index_criteria() -> None:  # POL-19
    last = failed("a", 1, index=0).model_copy(update={"failure_count": 1})
    snap = make_snapshot(last, completions=4, parallelism=2, max_failed_indexes=0,
                         **{**PER_INDEX, "backoff_limit": 0})
    assert (ft := ctype(plan_sync(snap, JobMemory(), NOW).record, "FailureTarget")) is not None
    assert ft.reason == "BackoffLimitExceeded"


# --- successPolicy ---------------------------------------------------------------------------

SUCCESS_CASES = [
    ("rules.succeededIndexes is matched", [{"succeededIndexes": "0-2"}], {0, 1, 2, 5}, ("Matched rules at index 0", True)),
    ("rules.succeededIndexes is not matched", [{"succeededIndexes": "0-2"}], {0, 2}, ("", False)),
    ("rules.succeededCount is matched", [{"succeededCount": 2}], {3, 7}, ("Matched rules at index 0", True)),
    ("rules.succeededCount is not matched", [{"succeededCount": 3}], {3, 7}, ("", False)),
    ("rules.succeededIndexes and rules.succeededCount are matched", [{"succeededIndexes": "0-4", "succeededCount": 2}],
     {1, 4, 8}, ("Matched rules at index 0", True)),
    ("rules.succeededIndexes and rules.succeededCount are not matched",
     [{"succeededIndexes": "0-4", "succeededCount": 2}], {4, 8}, ("", False)),
    ("multiple rules; the second one matches", [{"succeededIndexes": "9"}, {"succeededCount": 1}], {0},
     ("Matched rules at index 1", True)),
    ("rule whose indexes all lie beyond completions is skipped", [{"succeededIndexes": "10-12"}, {"succeededCount": 1}],
     {0}, ("Matched rules at index 1", True)),
    ("no succeeded index never matches", [{"succeededCount": 0}], set(), ("", False)),
    ("succeededCount 0 matches once an index succeeded", [{"succeededCount": 0}], {3}, ("Matched rules at index 0", True)),
]


@pytest.mark.parametrize("rules, succeeded, want", [c[1:] for c in SUCCESS_CASES], ids=[c[0] for c in SUCCESS_CASES])
def test_match_success_policy(rules: list[dict[str, Any]], succeeded: set[int], want: tuple[str, bool]) -> None:
    assert match_success_policy(SuccessPolicy.model_validate({"rules": rules}), 10, succeeded) == want


def test_success_policy_met_deletes_the_rest_without_counting_them() -> None:  # POL-36, POL-37
    status = JobStatusView(start_time=NOW - 100 * S, completed_indexes="0")
    snap = make_snapshot(pod("s1", "Succeeded", index=1), pod("r2", index=2), pod("r3", index=3), status=status,
                         completions=4, parallelism=4, completion_mode="Indexed",
                         success_policy={"rules": [{"succeededCount": 2}]})
    plan = plan_sync(snap, JobMemory(), NOW)
    scm = ctype(plan.record, "SuccessCriteriaMet")
    assert scm is not None and (scm.reason, scm.message) == ("SuccessPolicy", "Matched rules at index 0")
    assert sorted(plan.delete) == ["r2", "r3"] and plan.create == []
    assert plan.record is not None and plan.record.uncounted_failed == [] and plan.record.completed_indexes == "0,1"


def test_success_policy_met_while_failures_are_pending() -> None:  # POL-37, POL-39
    status = JobStatusView(start_time=NOW - 100 * S, completed_indexes="0")
    snap = make_snapshot(pod("s1", "Succeeded", index=1), failed("f2", 1, index=2), pod("r3", index=3),
                         status=status, completions=4, parallelism=4, completion_mode="Indexed", backoff_limit=6,
                         success_policy={"rules": [{"succeededCount": 2}]})
    plan = plan_sync(snap, JobMemory(), NOW)
    assert (scm := ctype(plan.record, "SuccessCriteriaMet")) is not None and scm.reason == "SuccessPolicy"
    assert plan.record is not None and plan.record.uncounted_failed == ["u-f2"]  # failed on its own: counted


def test_failure_wins_over_success_policy_in_the_same_sync() -> None:  # POL-39
    status = JobStatusView(start_time=NOW - 100 * S, completed_indexes="0")
    snap = make_snapshot(pod("s1", "Succeeded", index=1), failed("f2", 1, index=2), status=status,
                         completions=4, parallelism=4, completion_mode="Indexed", backoff_limit=0,
                         success_policy={"rules": [{"succeededCount": 2}]})
    plan = plan_sync(snap, JobMemory(), NOW)
    assert ctype(plan.record, "SuccessCriteriaMet") is None
    assert (ft := ctype(plan.record, "FailureTarget")) is not None and ft.reason == "BackoffLimitExceeded"


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_success_policy_completes_with_reason_success_policy(crash: str | None) -> None:  # POL-38, POL-41
    sim = Sim(completions=5, parallelism=2, completion_mode="Indexed",
              success_policy={"rules": [{"succeededIndexes": "0-1"}]})
    sim.run(crash)
    c = ctype(sim.status, "Complete")
    assert c is not None and (c.reason, c.message) == ("SuccessPolicy", "Matched rules at index 0")
    assert sim.status.completed_indexes == "0,1" and sim.status.succeeded == 2  # POL-41: < completions
    sim.assert_clean()


# --- elastic Indexed Jobs --------------------------------------------------------------------


def test_scale_down_removes_the_highest_indexes_and_clamps_status() -> None:  # POL-43, POL-44
    status = JobStatusView(start_time=NOW - 100 * S, completed_indexes="0,4", succeeded=2)
    snap = make_snapshot(pod("p1", index=1), pod("p2", index=2), pod("p3", index=3), status=status,
                         completions=2, parallelism=2, completion_mode="Indexed")
    plan = plan_sync(snap, JobMemory(), NOW)
    assert sorted(plan.release_and_delete) == ["p2", "p3"] and plan.create == []
    assert plan.record is not None and plan.record.completed_indexes == "0" and plan.record.succeeded == 1


def test_finished_pod_beyond_new_completions_is_released_uncounted() -> None:  # POL-45
    snap = make_snapshot(pod("s5", "Succeeded", index=5), failed("f6", 1, index=6), completions=2, parallelism=2,
                         completion_mode="Indexed")
    plan = plan_sync(snap, JobMemory(), NOW)
    assert sorted(plan.release) == ["f6", "s5"]
    assert plan.record is not None and plan.record.uncounted_failed == [] and plan.record.completed_indexes == ""


@pytest.mark.parametrize("crash", CRASHES, ids=CRASH_IDS)
def test_scale_up_from_4_to_6_completes_all_six_indexes(crash: str | None) -> None:  # POL-46
    sim = Sim(completions=4, parallelism=4, completion_mode="Indexed")
    sim.sync()
    sim.kubelet()
    sim.spec = sim.spec.model_copy(update={"completions": 6, "parallelism": 6})
    sim.run(crash)
    assert sim.status.completed_indexes == "0-5" and sim.status.succeeded == 6
    sim.assert_clean()


def test_scale_to_zero_completes_once_pods_are_gone() -> None:  # POL-47
    sim = Sim(completions=3, parallelism=3, completion_mode="Indexed")
    sim.sync()
    sim.kubelet()
    sim.spec = sim.spec.model_copy(update={"completions": 0, "parallelism": 0})
    sim.run()
    assert is_true(sim.status, "Complete") and sim.status.succeeded == 0
    sim.assert_clean()
