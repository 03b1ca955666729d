"""TTL-after-finished (docs/ttl.md): which objects, what the decision reads, the decision, its contract.

Layer: workflows (pure). Everything TTL-after-finished decides is here, once: which objects it
considers (``ttl_in_scope``, ``pod_ttl_in_scope``, TTL-1, TTL-17), whether one qualifies and the
Warning that says why not (``TTLObservation.problem``, ``not_applied``, TTL-19, TTL-OUTCOME),
whether cleanup applies (``needs_cleanup``) and when it expires (``time_left``, ``still_waiting``).
All are pure over an observation plus ``now``, so the workflow, the delete activity's fresh
re-check and the bridge's TTL router (worker/routers.py) ask the same questions and only act on
the answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Literal

from workflows.models.common import (
    COMPLETE,
    FAILED,
    INT64_MAX,
    INVALID_ANNOTATION,
    POD_FINISHED_PHASES,
    EventInput,
    Job,
    K8sModel,
    ObjectRef,
    Observation,
    ObserveInput,
    Pod,
    declare_activity,
    finished_condition,
)
from workflows.models.job import (
    JOB_MANAGED_BY,
    TTL_AFTER_FAILURE_ANNOTATION,
    TTL_AFTER_SUCCESS_ANNOTATION,
    JobOptions,
)
from workflows.times import NEVER, plus_seconds

#: Label (Pods) and value of ``spec.managedBy`` (Jobs) that hand an object to batchd.
POD_TTL_LABEL = "batchd.io/ttl-seconds-after-finished"
#: batchd's TTL extensions (docs/ttl.md, TTL-HOLD and TTL-OUTCOME): a hold (its value is the
#: reason) on a Job or TTL-labelled Pod, and per-outcome TTLs on a Job.
TTL_HOLD_ANNOTATION = "batchd.io/ttl-hold"
TTL_ANNOTATIONS = (TTL_AFTER_SUCCESS_ANNOTATION, TTL_AFTER_FAILURE_ANNOTATION)
#: The reason of the Warning Event on an object whose TTL is not applied (TTL-19, TTL-OUTCOME).
TTL_NOT_APPLIED = "TTLNotApplied"
#: The Event source of the TTL controller's Events.
TTL_COMPONENT = "batchd-ttl-after-finished"


def ttl_in_scope(job: Job, scope: str) -> bool:
    """TTL-1: whether batchd handles this Job's TTL.

    Args:
        job: the Job.
        scope: ``--ttl-scope``: ``"managed"``, the Jobs batchd runs itself (``spec.managedBy``
            ``batchd.io/job-controller``); ``"all"``, every Job.
    """
    return scope == "all" or job.spec.managed_by == JOB_MANAGED_BY


def pod_ttl_in_scope(labels: Mapping[str, str]) -> bool:
    """TTL-17: a Pod is considered when it carries the TTL label; TTL-19 then says whether it qualifies.

    It takes the labels alone so the bridge can pass over the Pods of Jobs, which it watches by
    the thousand, without parsing them.
    """
    return POD_TTL_LABEL in labels


class TTLObservation(Observation):
    """The part of a Job or Pod the TTL decision reads, as seen at ``resource_version``.

    ``gone`` marks an object that no longer exists (404, or its name now has another uid).
    ``finished`` with a ``None`` ``finish_time`` is the state upstream treats as an error
    (TTL-5): the object finished but carries no time to count from.
    ``problem`` names why a Pod is outside TTL control although it asks for a TTL (owned by a
    Job, restarting Always, an unparseable label); the bridge turns it into a Warning Event.
    ``ttl_seconds`` is the TTL in force: for a finished Job, its outcome's annotation if set
    (TTL-OUTCOME), else ``spec.ttlSecondsAfterFinished``.
    ``hold`` is the reason of a ``batchd.io/ttl-hold`` annotation: while set, nothing is deleted
    (TTL-HOLD). ``held_by`` names the Job's annotations batchd cannot read, which hold it too
    (FAIL-CLOSED).
    """

    ADDED = frozenset({"held_by"})

    ref: ObjectRef
    resource_version: str = ""
    ttl_seconds: int | None = None
    finished: bool = False
    finish_time: datetime | None = None
    deleting: bool = False
    gone: bool = False
    problem: str | None = None
    hold: str | None = None
    held_by: str | None = None

    @property
    def held(self) -> bool:
        """TTL-HOLD: a hold annotation is present (an empty reason holds too), or FAIL-CLOSED holds it."""
        return self.hold is not None or self.held_by is not None

    @property
    def hold_reason(self) -> str | None:
        """What holds the object, as ``batchd ttl list`` and the timer's summary show it."""
        return self.hold if self.hold is not None else self.held_by

    @classmethod
    def of_job(cls, job: Job) -> TTLObservation:
        """Observe a Job (TTL-2, TTL-3: the first Complete/Failed=True condition's transition time).

        The TTL in force is the finished outcome's per-outcome annotation, if any, else the spec
        field (TTL-OUTCOME). An annotation batchd cannot read holds the Job (FAIL-CLOSED): a typo
        must never delete a Job sooner than its owner meant.
        """
        finished = finished_condition(job.status.conditions)
        meta = job.metadata
        opts = JobOptions.of(meta.annotations)
        ttl = job.spec.ttl_seconds_after_finished
        # held for the TTL controller only if the Job asks it for a TTL: else the Job controller's
        # Warning is the only one
        asks = ttl is not None or any(key in meta.annotations for key in TTL_ANNOTATIONS)
        by_outcome = {COMPLETE: opts.ttl_after_success, FAILED: opts.ttl_after_failure}
        if finished is not None and by_outcome[finished.type] is not None:
            ttl = by_outcome[finished.type]
        return cls(
            ref=ObjectRef(kind="Job", namespace=meta.namespace, name=meta.name, uid=meta.uid),
            resource_version=meta.resource_version,
            ttl_seconds=ttl,
            finished=finished is not None,
            finish_time=finished.last_transition_time if finished else None,
            deleting=meta.deletion_timestamp is not None,
            hold=meta.annotations.get(TTL_HOLD_ANNOTATION),
            held_by=opts.held if asks else None,
        )

    @classmethod
    def of_pod(cls, pod: Pod) -> TTLObservation:
        """Observe a Pod labelled ``batchd.io/ttl-seconds-after-finished`` (the KEP's future work).

        The Pod's finish time is its latest container ``terminated.finishedAt``.
        """
        meta = pod.metadata
        ttl: int | None = None
        problem: str | None = None
        raw = meta.labels.get(POD_TTL_LABEL)
        if raw is not None:
            ttl, problem = parse_ttl(raw, f"label {POD_TTL_LABEL}")
        owner = meta.controller_ref()
        if ttl is not None and owner is not None and owner.kind == "Job":
            problem = f"Pod is owned by Job {owner.name}; the Job's ttlSecondsAfterFinished governs it"
        elif ttl is not None and pod.spec.restart_policy not in ("OnFailure", "Never"):
            problem = f"restartPolicy {pod.spec.restart_policy or 'Always'} Pods never finish; the TTL label needs OnFailure or Never"
        if problem is not None:
            ttl = None
        finished = pod.status.phase in POD_FINISHED_PHASES
        finish_times = [
            s.state.terminated.finished_at
            for s in (*pod.status.container_statuses, *pod.status.init_container_statuses)
            if s.state.terminated is not None and s.state.terminated.finished_at is not None
        ]
        return cls(
            ref=ObjectRef(kind="Pod", namespace=meta.namespace, name=meta.name, uid=meta.uid),
            resource_version=meta.resource_version,
            ttl_seconds=ttl,
            finished=finished,
            finish_time=max(finish_times) if finished and finish_times else None,
            deleting=meta.deletion_timestamp is not None,
            problem=problem,
            hold=meta.annotations.get(TTL_HOLD_ANNOTATION),
        )

    def not_applied(self) -> EventInput | None:
        """TTL-19, FAIL-CLOSED: the Warning Event that says why a TTL the object asks for is not applied.

        None when there is nothing to say. The bridge records it once per object and problem.
        """
        if self.held_by is not None:
            return EventInput(ref=self.ref, type="Warning", reason=INVALID_ANNOTATION, message=self.held_by,
                              component=TTL_COMPONENT)
        if self.problem is None:
            return None
        return EventInput(ref=self.ref, type="Warning", reason=TTL_NOT_APPLIED, message=self.problem,
                          component=TTL_COMPONENT)

    def needs_cleanup(self) -> bool:
        """Whether TTL cleanup applies at all (TTL-4): a TTL, finished, not being deleted."""
        return not self.gone and not self.deleting and self.ttl_seconds is not None and self.finished

    def shown_expiry(self) -> datetime | None:
        """The ``ExpiresAt`` its workflow shows: the expiry (:data:`NEVER` beyond range), None while
        it has none (cleanup does not apply, or no finish time yet, TTL-5)."""
        if not self.needs_cleanup() or self.ttl_seconds is None or self.finish_time is None:
            return None
        return expiry(self.finish_time, self.ttl_seconds) or NEVER


def parse_ttl(raw: str, what: str) -> tuple[int | None, str | None]:
    """A TTL written as text (a label or an annotation): ``(seconds, None)`` or ``(None, problem)``."""
    if not (raw.isascii() and raw.isdigit()):
        return None, f"{what}={raw!r} is not a non-negative integer number of seconds"
    if len(significant := raw.lstrip("0")) > 19 or int(significant or "0") > INT64_MAX:  # int() refuses 4,300 digits
        return None, f"{what}={raw!r} is larger than {INT64_MAX}, the largest TTL batchd takes"
    return int(raw), None


class TimeLeft(K8sModel):
    """Result of :func:`time_left`: how long until expiry, and the expiry instant.

    Both are None when the expiry is beyond what ``datetime`` holds: it never comes (TIME-1).
    """

    remaining: timedelta | None
    expire_at: datetime | None
    finish_in_future: bool = False

    @property
    def expired(self) -> bool:
        """TTL-6: expired when nothing remains."""
        return self.remaining is not None and self.remaining <= timedelta(0)


def expiry(finish_time: datetime, ttl_seconds: int) -> datetime | None:
    """TTL-6: ``finish_time + ttl_seconds``, or None when that is too far to represent (never)."""
    return plus_seconds(finish_time, ttl_seconds)


def time_left(obs: TTLObservation, now: datetime) -> TimeLeft | None:
    """Expiry of an object that needs cleanup (TTL-6 to TTL-9); ``None`` when it has no finish time (TTL-5).

    A finish time later than ``now`` is clock skew between the API server and the worker: the
    formula stays the same, which defers cleanup (TTL-8); the flag lets the caller log a warning.

    Raises:
        ValueError: if ``now`` is naive or the object does not need cleanup.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if not obs.needs_cleanup() or obs.ttl_seconds is None:
        raise ValueError(f"{obs.ref.kind} {obs.ref.key()} does not need cleanup")
    if obs.finish_time is None:
        return None
    return _time_left(obs.finish_time, obs.ttl_seconds, now)


def still_waiting(obs: TTLObservation, now: datetime) -> bool:
    """Whether the TTL workflow of an object, as last observed, still waits at ``now`` instead of deleting it.

    It waits on its expiry timer until the expiry (TTL-6, TTL-7), and with no timer while the
    finish time is missing (TTL-5), the expiry never comes (TIME-1) or a hold is set (TTL-HOLD).
    From the expiry on it is deleting the object itself. ``deleting`` plays no part: the bridge
    asks this of the last state before a deletion, which usually carries a deletionTimestamp.

    Raises:
        ValueError: if ``now`` is naive.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if obs.ttl_seconds is None or not obs.finished:
        return False
    if obs.finish_time is None or obs.held:
        return True
    return not _time_left(obs.finish_time, obs.ttl_seconds, now).expired


def _time_left(finish_time: datetime, ttl_seconds: int, now: datetime) -> TimeLeft:
    """TTL-6, TTL-8: the one expiry computation, for a finish time and TTL in force."""
    expire_at = expiry(finish_time, ttl_seconds)
    return TimeLeft(remaining=None if expire_at is None else expire_at - now, expire_at=expire_at,
                    finish_in_future=finish_time > now)


class TTLInput(K8sModel):
    """Start argument of the TTL workflow; the bridge's signal carries the same observation."""

    observation: TTLObservation


TTLOutcome = Literal["deleted", "gone", "not_needed"]


class TTLResult(K8sModel):
    """How a TTL workflow ended."""

    outcome: TTLOutcome
    expire_at: datetime | None = None
    deleted_at: datetime | None = None


class DeleteExpiredInput(K8sModel):
    """Delete ``ref`` if a fresh read still shows it expired (TTL-11, TTL-12)."""

    ref: ObjectRef


class DeleteExpiredResult(K8sModel):
    """What the delete activity found: ``deleted`` (with the fresh expiry), or a fresh observation."""

    deleted: bool
    observation: TTLObservation
    expire_at: datetime | None = None
    deleted_at: datetime | None = None


# -- activities (implemented by activities/ttl.py) ----------------------------------------------


@declare_activity
def read_ttl_object(inp: ObserveInput) -> TTLObservation:
    """GET the object fresh and observe it (gone: 404, or its name now has another uid)."""
    raise NotImplementedError


@declare_activity
def delete_expired(inp: DeleteExpiredInput) -> DeleteExpiredResult:
    """GET fresh, re-run the decision on the fresh copy, delete only if it is expired (TTL-11 to TTL-13)."""
    raise NotImplementedError
