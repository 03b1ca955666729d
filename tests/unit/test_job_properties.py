"""Property tests (Hypothesis) over the Job controller's pure decisions (issue 14: totality).

Every integer field is drawn across its whole API range (int32 or int64, bounds included) and
every instant across ``datetime``'s range. The property: the decision returns, and its answer
is consistent — it never plans more Pods than parallelism allows or more than one sync may
create, never an index outside ``[0, completions)`` or one already running or done, never a
wake-up in the past, and every status it writes keeps ``ready <= active``.

Index-set strings (``completedIndexes``, ``failedIndexes``) are drawn from up to a dozen
indexes anywhere in the int32 range: the controller writes one index per Pod that finished.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workflows.decisions.job import (
    MAX_POD_CREATE_DELETE_PER_SYNC,
    MAX_REQUEUE,
    backoff_remaining,
    fold,
    get_remaining_time_per_index,
    match_success_policy,
    plan_sync,
)
from workflows.models.job import (
    BackoffRecord,
    ContainerExit,
    JobMemory,
    JobSnapshot,
    JobSpecView,
    JobStatusView,
    PodCondition,
    PodFailurePolicy,
    PodInfo,
    SuccessPolicy,
    pack_indexes,
    unpack_indexes,
)
from workflows.models.jobpods import (
    format_indexes,
    match_pod_failure_policy,
    parse_indexes,
)

INT32 = 2**31 - 1
INT64 = 2**63 - 1
int32 = st.integers(0, INT32)
int64 = st.integers(0, INT64)
any_int32 = st.integers(-(2**31), INT32)  # exit codes are signed
instants = st.datetimes(min_value=datetime.min, max_value=datetime.max, timezones=st.just(UTC))
# Extremes first: Hypothesis shrinks toward them anyway, this makes sure each run tries them.
edges = st.sampled_from([0, 1, INT32 - 1, INT32])
counts = st.one_of(edges, int32)
index_sets = st.sets(st.one_of(st.integers(0, 50), st.integers(0, INT32 - 1)), max_size=12)
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def pod_failure_policies(draw: st.DrawFn) -> PodFailurePolicy:
    rules: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 4))):
        action = draw(st.sampled_from(["FailJob", "Ignore", "Count", "FailIndex", "Unknown"]))
        if draw(st.booleans()):
            rules.append({"action": action, "onExitCodes": {
                "operator": draw(st.sampled_from(["In", "NotIn", "Other"])),
                "containerName": draw(st.sampled_from([None, "main", "side", "init"])),
                "values": sorted(draw(st.sets(st.one_of(st.integers(0, 5), any_int32), min_size=1, max_size=4)))}})
        else:
            rules.append({"action": action, "onPodConditions": [
                {"type": draw(st.sampled_from(["DisruptionTarget", "Custom"])),
                 "status": draw(st.sampled_from(["True", "False", "Unknown"]))}]})
    return PodFailurePolicy.model_validate({"rules": rules})


@st.composite
def success_policies(draw: st.DrawFn) -> SuccessPolicy:
    rules: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        rule: dict[str, Any] = {}
        if draw(st.booleans()):
            a = draw(st.one_of(st.integers(0, 10), int32))
            b = draw(st.one_of(st.integers(0, 10), int32))
            rule["succeededIndexes"] = f"{min(a, b)}-{max(a, b)}" if a != b else str(a)
        if draw(st.booleans()) or not rule:
            rule["succeededCount"] = draw(counts)
        rules.append(rule)
    return SuccessPolicy.model_validate({"rules": rules})


@st.composite
def pods(draw: st.DrawFn, n: int) -> PodInfo:
    return PodInfo(
        name=f"p{n}", uid=f"u{n}", namespace="ns",
        index=draw(st.one_of(st.none(), st.integers(0, 8), int32)),
        phase=draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"])),
        deleting=draw(st.booleans()), has_finalizer=draw(st.booleans()), ready=draw(st.booleans()),
        creation_time=draw(st.one_of(st.none(), instants)), finish_time=draw(st.one_of(st.none(), instants)),
        restart_count=draw(counts),
        containers=[ContainerExit(name=draw(st.sampled_from(["main", "side", "init"])),
                                  exit_code=draw(st.one_of(st.none(), any_int32)), init=draw(st.booleans()))
                    for _ in range(draw(st.integers(0, 2)))],
        conditions=[PodCondition(type="DisruptionTarget", status=draw(st.sampled_from(["True", "False"])))]
        if draw(st.booleans()) else [],
        failure_count=draw(counts), ignored_failure_count=draw(counts),
    )


@st.composite
def snapshots(draw: st.DrawFn) -> JobSnapshot:
    indexed = draw(st.booleans())
    completions = draw(st.one_of(st.none(), st.integers(0, 10), counts)) if not indexed else draw(
        st.one_of(st.integers(0, 10), counts))
    per_index = indexed and draw(st.booleans())
    spec = JobSpecView(
        completions=completions, parallelism=draw(st.one_of(st.integers(0, 10), counts)),
        completion_mode="Indexed" if indexed else "NonIndexed",
        backoff_limit=draw(counts), active_deadline_seconds=draw(st.one_of(st.none(), edges, int64,
                                                                            st.just(INT64))),
        suspend=draw(st.booleans()),
        pod_replacement_policy=draw(st.sampled_from(["TerminatingOrFailed", "Failed"])),
        restart_policy=draw(st.sampled_from(["Never", "OnFailure"])),
        pod_failure_policy=draw(st.one_of(st.none(), pod_failure_policies())),
        backoff_limit_per_index=draw(counts) if per_index else None,
        max_failed_indexes=draw(st.one_of(st.none(), counts)) if per_index else None,
        success_policy=draw(st.one_of(st.none(), success_policies())) if indexed else None,
    )
    limit = completions or 0
    status = JobStatusView(
        succeeded=draw(counts), failed=draw(counts),
        completed_indexes=format_indexes(i for i in draw(index_sets) if i < limit) if indexed else "",
        failed_indexes=format_indexes(i for i in draw(index_sets) if i < limit) if per_index else None,
        start_time=draw(st.one_of(st.none(), instants)),
    )
    members = [draw(pods(n)) for n in range(draw(st.integers(0, 8)))]
    return JobSnapshot(namespace="ns", name="job", uid="job-uid", spec=spec, status=status, pods=members,
                       deleting=draw(st.booleans()))


memories = st.builds(
    JobMemory,
    backoff=st.builds(BackoffRecord, failures_after_last_success=counts,
                      last_failure_time=st.one_of(st.none(), instants)),
)


@PROPS
@given(snap=snapshots(), memory=memories, now=instants)
def test_plan_sync_is_total_and_never_overshoots(snap: JobSnapshot, memory: JobMemory, now: datetime) -> None:
    plan = plan_sync(snap, memory, now)
    spec = snap.spec
    active = [p for p in snap.pods if p.phase not in ("Succeeded", "Failed") and not p.deleting]
    if plan.create:
        assert len(plan.create) <= MAX_POD_CREATE_DELETE_PER_SYNC
        assert len(active) + len(plan.create) <= spec.parallelism  # never more than parallelism allows
        assert not spec.suspend and not snap.deleting
    if spec.completion_mode == "Indexed":
        made = [c.index for c in plan.create]
        assert len(set(made)) == len(made)
        running = {p.index for p in active}
        done = parse_indexes(snap.status.completed_indexes, spec.completions or 0)
        failed = parse_indexes(snap.status.failed_indexes or "", spec.completions or 0)
        for ix in made:
            assert ix is not None and 0 <= ix < (spec.completions or 0)
            assert ix not in running and ix not in done and ix not in failed
    if plan.requeue_after is not None:  # never a wake-up in the past, never beyond the cap
        assert timedelta(0) < plan.requeue_after <= MAX_REQUEUE
    if plan.record is not None:
        assert 0 <= plan.record.ready <= plan.record.active
        assert plan.record.terminating >= 0
        assert (plan.record.failed_indexes is None) == (spec.backoff_limit_per_index is None
                                                         or spec.completion_mode != "Indexed")
        folded = fold(plan.record, snap.pods, set(memory.finalizers_removed), spec, now)
        assert folded.failed >= plan.record.failed


@PROPS
@given(failures=st.one_of(edges, st.integers(0, 2**63)), last=st.one_of(st.none(), instants), now=instants)
def test_backoff_remaining_is_bounded(failures: int, last: datetime | None, now: datetime) -> None:
    left = backoff_remaining(BackoffRecord(failures_after_last_success=failures, last_failure_time=last), now)
    assert timedelta(0) <= left <= timedelta(minutes=10)


@PROPS
@given(pod=pods(0), now=instants)
def test_per_index_wait_is_bounded(pod: PodInfo, now: datetime) -> None:
    assert timedelta(0) <= get_remaining_time_per_index(pod, now) <= timedelta(minutes=10)


@PROPS
@given(policy=st.one_of(st.none(), pod_failure_policies()), pod=pods(0))
def test_match_pod_failure_policy_is_consistent(policy: PodFailurePolicy | None, pod: PodInfo) -> None:
    message, count, action = match_pod_failure_policy(policy, pod)
    assert (message is not None) == (action == "FailJob")
    assert count == (action != "Ignore")
    assert action in (None, "FailJob", "Ignore", "Count", "FailIndex")


@PROPS
@given(policy=success_policies(), completions=st.one_of(st.integers(0, 10), counts), succeeded=index_sets)
def test_match_success_policy_is_total(policy: SuccessPolicy, completions: int, succeeded: set[int]) -> None:
    within = {i for i in succeeded if i < completions}
    message, met = match_success_policy(policy, completions, within)
    assert met == message.startswith("Matched rules at index ")
    assert not met or within  # POL-33: never without a succeeded index


@PROPS
@given(indexes=st.sets(st.one_of(st.integers(0, 300), st.integers(0, INT32 - 1)), max_size=200),
       text=st.text(alphabet="0123456789,-+ ", max_size=60))
def test_packed_index_strings_unpack_to_exactly_themselves(indexes: set[int], text: str) -> None:  # JOB-95
    canonical = format_indexes(indexes)
    packed = pack_indexes(canonical)
    assert packed.startswith("zlib:") == bool(indexes) and unpack_indexes(packed) == canonical
    assert unpack_indexes(pack_indexes(text)) == text  # any other string: kept as it came
