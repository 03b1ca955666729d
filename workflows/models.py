"""The contract between workflows and activities: pydantic models and the pure TTL decisions.

Layer: workflows (pure; imported by workflows/, activities/ and worker/). Holds

* subset models of the Kubernetes objects batchd reads (only the fields it uses; unknown
  fields are ignored so any server version parses),
* the inputs and results of every workflow, signal, update and activity (one model in, one
  out, frozen, new fields only with defaults),
* the TTL-after-finished decisions of KEP-592 (``needs_cleanup``, ``time_left``), pure over a
  model plus ``now`` so the workflow and the delete activity's fresh re-check share them.

Spec references are to ``shared/spec/cronjob-and-ttl.md`` (A*).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from workflows.times import plus_seconds

#: Label (Pods) and value of ``spec.managedBy`` (Jobs) that hand an object to batchd.
POD_TTL_LABEL = "batchd.io/ttl-seconds-after-finished"
#: batchd's TTL extensions (docs/ttl.md, TTL-HOLD and TTL-OUTCOME): a hold (its value is the
#: reason) on a Job or TTL-labelled Pod, and per-outcome TTLs on a Job.
TTL_HOLD_ANNOTATION = "batchd.io/ttl-hold"
TTL_AFTER_SUCCESS_ANNOTATION = "batchd.io/ttl-seconds-after-success"
TTL_AFTER_FAILURE_ANNOTATION = "batchd.io/ttl-seconds-after-failure"
JOB_MANAGED_BY = "batchd.io/job-controller"
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
#: The largest integer the API's own fields hold; a Pod TTL label beyond it is refused.
INT64_MAX = 2**63 - 1


class _K8s(BaseModel):
    """Base of the Kubernetes subset models: camelCase on the wire, unknown fields ignored."""

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    )


class OwnerReference(_K8s):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(_K8s):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference with ``controller: true``, if any."""
        return next((o for o in self.owner_references if o.controller), None)


class Condition(_K8s):
    type: str
    status: str
    last_transition_time: datetime | None = None
    reason: str | None = None
    message: str | None = None


class JobSpec(_K8s):
    ttl_seconds_after_finished: int | None = None
    managed_by: str | None = None
    suspend: bool | None = None


class JobStatus(_K8s):
    conditions: list[Condition] = Field(default_factory=list)


class Job(_K8s):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus = Field(default_factory=JobStatus)


class ContainerStateTerminated(_K8s):
    exit_code: int | None = None
    finished_at: datetime | None = None


class ContainerState(_K8s):
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(_K8s):
    name: str = ""
    state: ContainerState = Field(default_factory=ContainerState)


class PodSpec(_K8s):
    restart_policy: str | None = None


class PodStatus(_K8s):
    phase: str | None = None
    container_statuses: list[ContainerStatus] = Field(default_factory=list)
    init_container_statuses: list[ContainerStatus] = Field(default_factory=list)


class Pod(_K8s):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)


# --------------------------------------------------------------------------------------------
# TTL-after-finished (KEP-592): what the decision reads, and the decision itself.

class ObjectRef(_K8s):
    """Names one object instance; ``uid`` pins it, so a recreated namesake is another object."""

    kind: Literal["Job", "Pod", "CronJob"]
    namespace: str
    name: str
    uid: str

    def key(self) -> str:
        """``namespace/name``, as logs and Events write it."""
        return f"{self.namespace}/{self.name}"


class TTLObservation(_K8s):
    """The part of a Job or Pod the TTL decision reads, as seen at ``resource_version``.

    ``gone`` marks an object that no longer exists (404, or its name now has another uid).
    ``finished`` with a ``None`` ``finish_time`` is the state upstream treats as an error
    (A5): the object finished but carries no time to count from.
    ``problem`` names why the object is outside TTL control although it asks for a TTL (a Pod
    owned by a Job, a Pod that restarts Always, an unparseable label or per-outcome annotation);
    the bridge turns it into a Warning Event.
    ``ttl_seconds`` is the TTL in force: for a finished Job, its outcome's annotation if set
    (TTL-OUTCOME), else ``spec.ttlSecondsAfterFinished``.
    ``hold`` is the reason of a ``batchd.io/ttl-hold`` annotation: while set, nothing is deleted
    (TTL-HOLD).
    """

    ref: ObjectRef
    resource_version: str = ""
    ttl_seconds: int | None = None
    finished: bool = False
    finish_time: datetime | None = None
    deleting: bool = False
    gone: bool = False
    problem: str | None = None
    hold: str | None = None

    @property
    def held(self) -> bool:
        """TTL-HOLD: a hold annotation is present (an empty reason holds too)."""
        return self.hold is not None

    @classmethod
    def of_job(cls, job: Job) -> TTLObservation:
        """Observe a Job (A3, A4: the first Complete/Failed=True condition's transition time).

        The TTL in force is the finished outcome's per-outcome annotation, if any, else the spec
        field (TTL-OUTCOME). A bad per-outcome value, whatever the outcome, is a ``problem`` and no
        TTL at all: a typo must never delete a Job sooner than its owner meant.
        """
        finished = next(
            (c for c in job.status.conditions if c.type in ("Complete", "Failed") and c.status == "True"),
            None,
        )
        meta = job.metadata
        ttl = job.spec.ttl_seconds_after_finished
        problem: str | None = None
        by_outcome: dict[str, int] = {}
        for outcome, key in (("Complete", TTL_AFTER_SUCCESS_ANNOTATION), ("Failed", TTL_AFTER_FAILURE_ANNOTATION)):
            if (raw := meta.annotations.get(key)) is None:
                continue
            seconds, problem = parse_ttl(raw, f"annotation {key}")
            if seconds is None:
                break
            by_outcome[outcome] = seconds
        if problem is not None:
            ttl = None
        elif finished is not None and finished.type in by_outcome:
            ttl = by_outcome[finished.type]
        return cls(
            ref=ObjectRef(kind="Job", namespace=meta.namespace, name=meta.name, uid=meta.uid),
            resource_version=meta.resource_version,
            ttl_seconds=ttl,
            finished=finished is not None,
            finish_time=finished.last_transition_time if finished else None,
            deleting=meta.deletion_timestamp is not None,
            problem=problem,
            hold=meta.annotations.get(TTL_HOLD_ANNOTATION),
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
        finished = pod.status.phase in ("Succeeded", "Failed")
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

    def needs_cleanup(self) -> bool:
        """Whether TTL cleanup applies at all (A2, A10): a TTL, finished, not being deleted."""
        return not self.gone and not self.deleting and self.ttl_seconds is not None and self.finished


def parse_ttl(raw: str, what: str) -> tuple[int | None, str | None]:
    """A TTL written as text (a label or an annotation): ``(seconds, None)`` or ``(None, problem)``."""
    if not (raw.isascii() and raw.isdigit()):
        return None, f"{what}={raw!r} is not a non-negative integer number of seconds"
    if int(raw) > INT64_MAX:
        return None, f"{what}={raw!r} is larger than {INT64_MAX}, the largest TTL batchd takes"
    return int(raw), None


class TimeLeft(_K8s):
    """Result of :func:`time_left`: how long until expiry, and the expiry instant.

    Both are None when the expiry is beyond what ``datetime`` holds: it never comes (TIME-1).
    """

    remaining: timedelta | None
    expire_at: datetime | None
    finish_in_future: bool = False

    @property
    def expired(self) -> bool:
        """A6: expired when nothing remains."""
        return self.remaining is not None and self.remaining <= timedelta(0)


def expiry(finish_time: datetime, ttl_seconds: int) -> datetime | None:
    """A6: ``finish_time + ttl_seconds``, or None when that is too far to represent (never)."""
    return plus_seconds(finish_time, ttl_seconds)


def time_left(obs: TTLObservation, now: datetime) -> TimeLeft | None:
    """Expiry of an object that needs cleanup (A6–A8, A15); ``None`` when it has no finish time (A5).

    A finish time later than ``now`` is clock skew between the API server and the worker: the
    formula stays the same, which defers cleanup (A8); the flag lets the caller log a warning.

    Raises:
        ValueError: if ``now`` is naive or the object does not need cleanup.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if not obs.needs_cleanup() or obs.ttl_seconds is None:
        raise ValueError(f"{obs.ref.kind} {obs.ref.key()} does not need cleanup")
    if obs.finish_time is None:
        return None
    expire_at = expiry(obs.finish_time, obs.ttl_seconds)
    return TimeLeft(remaining=None if expire_at is None else expire_at - now, expire_at=expire_at,
                    finish_in_future=obs.finish_time > now)


class TTLInput(_K8s):
    """Start argument of the TTL workflow; the bridge's signal carries the same observation."""

    observation: TTLObservation


TTLOutcome = Literal["deleted", "gone", "not_needed"]


class TTLResult(_K8s):
    """How a TTL workflow ended."""

    outcome: TTLOutcome
    expire_at: datetime | None = None
    deleted_at: datetime | None = None


class DeleteExpiredInput(_K8s):
    """Delete ``ref`` if a fresh read still shows it expired (A11, A12)."""

    ref: ObjectRef


class DeleteExpiredResult(_K8s):
    """What the delete activity found: ``deleted`` (with the fresh expiry), or a fresh observation."""

    deleted: bool
    observation: TTLObservation
    expire_at: datetime | None = None
    deleted_at: datetime | None = None


class ObserveInput(_K8s):
    """Read ``ref`` fresh."""

    ref: ObjectRef


class EventInput(_K8s):
    """A Kubernetes Event on an object; identical Events are aggregated into one with a count."""

    ref: ObjectRef
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    component: str


# --------------------------------------------------------------------------------------------
# CronJob (KEP-19). Spec references are to shared/spec/cronjob-and-ttl.md (B*, C*, D*).

CRONJOB_MANAGED_LABEL = "batchd.io/managed"
NEXT_SCHEDULE_ANNOTATION = "batchd.io/next-schedule-time"
JITTER_ANNOTATION = "batchd.io/jitter-percent"
SUCCEEDED_RUNS_ANNOTATION = "batchd.io/successful-runs"
FAILED_RUNS_ANNOTATION = "batchd.io/failed-runs"
FAILURES_SINCE_SUCCESS_ANNOTATION = "batchd.io/failures-since-last-success"
SUSPEND_REASON_ANNOTATION = "batchd.io/suspend-reason"
SUSPENDED_AT_ANNOTATION = "batchd.io/suspended-at"
LAST_FAILURE_TIME_ANNOTATION = "batchd.io/last-failure-time"
LAST_FAILED_JOB_ANNOTATION = "batchd.io/last-failed-job"
CATCH_UP_ANNOTATION = "batchd.io/catch-up"  # CJ-CATCH-UP: "latest" (upstream, the default) or "all"
SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MANUAL_INSTANTIATE_ANNOTATION = "cronjob.kubernetes.io/instantiate"

ConcurrencyPolicy = Literal["Allow", "Forbid", "Replace"]
JobOutcome = Literal["Complete", "Failed"]


class ObjectReference(_K8s):
    """An entry of ``CronJob.status.active``."""

    api_version: str = "batch/v1"
    kind: str = "Job"
    name: str
    namespace: str
    uid: str
    resource_version: str | None = None


class CronJobSpec(_K8s):
    schedule: str = ""
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: ConcurrencyPolicy = "Allow"
    suspend: bool = False
    successful_jobs_history_limit: int | None = 3
    failed_jobs_history_limit: int | None = 1


class CronJobStatus(_K8s):
    active: list[ObjectReference] = Field(default_factory=list)
    last_schedule_time: datetime | None = None
    last_successful_time: datetime | None = None


class CronJob(_K8s):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CronJobSpec = Field(default_factory=CronJobSpec)
    status: CronJobStatus = Field(default_factory=CronJobStatus)


class CronJobObservation(_K8s):
    """What the CronJob workflow reads of its CronJob, as the bridge (or a fresh GET) saw it."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: datetime | None = None
    deleting: bool = False
    gone: bool = False
    spec: CronJobSpec = Field(default_factory=CronJobSpec)
    status: CronJobStatus = Field(default_factory=CronJobStatus)
    jitter_percent: int = 0
    problem: str | None = None  # e.g. an unparseable jitter annotation
    #: Not the CronJob's: the sending bridge's ``--cronjob-lead``, so a restarted worker's new
    #: setting reaches the running workflows (see ``CronJobInput.lead_seconds``).
    lead_seconds: float | None = None
    suspend_reason: str | None = None  # CJ-SUSPEND: the annotations, shown by ``describe``
    suspended_at: str | None = None
    catch_up: Literal["latest", "all"] = "latest"  # CJ-CATCH-UP

    def plan_key(self) -> tuple[Any, ...]:
        """What the workflow's plan (or its ``describe``) depends on: the bridge sends an observation
        only when this changed, and the workflow interrupts an armed creation only when this changed."""
        return (self.generation, self.deleting, self.jitter_percent, self.problem, self.suspend_reason,
                self.suspended_at, self.catch_up)

    @classmethod
    def of(cls, cj: CronJob) -> CronJobObservation:
        meta = cj.metadata
        jitter, problems = 0, []
        raw = meta.annotations.get(JITTER_ANNOTATION)
        if raw is not None:
            if raw.isdigit() and 0 <= int(raw) <= 50:
                jitter = int(raw)
            else:
                problems.append(f"annotation {JITTER_ANNOTATION}={raw!r} must be an integer from 0 to 50; jitter ignored")
        raw = meta.annotations.get(CATCH_UP_ANNOTATION, "latest")
        if raw not in ("latest", "all"):
            problems.append(f"annotation {CATCH_UP_ANNOTATION}={raw!r} must be \"latest\" or \"all\"; "
                            "only the latest missed time runs")
        catch_up: Literal["latest", "all"] = "all" if raw == "all" else "latest"
        return cls(
            namespace=meta.namespace, name=meta.name, uid=meta.uid, resource_version=meta.resource_version,
            generation=meta.generation or 0, creation_timestamp=meta.creation_timestamp,
            deleting=meta.deletion_timestamp is not None, spec=cj.spec, status=cj.status,
            jitter_percent=jitter, problem="; ".join(problems) or None,
            suspend_reason=meta.annotations.get(SUSPEND_REASON_ANNOTATION),
            suspended_at=meta.annotations.get(SUSPENDED_AT_ANNOTATION), catch_up=catch_up,
        )


class JobSummary(_K8s):
    """What a CronJob workflow tracks of one of its Jobs."""

    name: str
    uid: str
    owner_uid: str = ""
    outcome: JobOutcome | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    finished_at: datetime | None = None  # the Complete/Failed condition's transition (a failed Job has no completionTime)
    gone: bool = False

    @classmethod
    def of(cls, job: Job, raw_status: dict[str, object] | None = None) -> JobSummary:
        """Summarise a Job (C31: its first Complete/Failed=True condition decides the class)."""
        finished = next(
            (c for c in job.status.conditions if c.type in ("Complete", "Failed") and c.status == "True"), None
        )
        owner = job.metadata.controller_ref()
        status = raw_status or {}
        return cls(
            name=job.metadata.name, uid=job.metadata.uid, owner_uid=owner.uid if owner else "",
            outcome=finished.type if finished else None,  # type: ignore[arg-type]
            finished_at=finished.last_transition_time if finished else None,
            start_time=status.get("startTime"),  # type: ignore[arg-type]
            completion_time=status.get("completionTime"),  # type: ignore[arg-type]
        )


class CronJobRun(_K8s):
    """One finished run, kept (the last few) for ``describe``."""

    job_name: str
    outcome: JobOutcome | Literal["Missing"]
    finished_at: datetime | None = None


RunSource = Literal["schedule", "trigger", "backfill", "catch-up"]
RunOutcome = Literal["created", "skipped-concurrency", "replaced", "missed-deadline", "suspended",
                     "too-many-missed", "create-failed"]
RunResult = Literal["running", "Complete", "Failed", "deleted"]
LEDGER_SIZE = 100


class LedgerEntry(_K8s):
    """What happened at one schedule time, trigger or backfill (CJ-LEDGER): query ``history``."""

    scheduled_time: datetime
    source: RunSource = "schedule"
    outcome: RunOutcome
    job: str | None = None
    job_uid: str | None = None
    created_at: datetime | None = None
    result: RunResult | None = None


class CronJobCounters(_K8s):
    succeeded: int = 0
    failed: int = 0
    failures_since_last_success: int = 0


class CronJobState(_K8s):
    """Everything a CronJob workflow carries across continue-as-new."""

    observation: CronJobObservation
    active: list[ObjectReference] = Field(default_factory=list)
    last_schedule_time: datetime | None = None
    last_successful_time: datetime | None = None
    finished: list[JobSummary] = Field(default_factory=list)  # owned finished Jobs, for history limits
    counters: CronJobCounters = Field(default_factory=CronJobCounters)
    recent: list[CronJobRun] = Field(default_factory=list)
    reported: list[str] = Field(default_factory=list)  # warning keys already sent as Events
    counted: list[str] = Field(default_factory=list)  # uids of finished Jobs already counted
    ledger: list[LedgerEntry] = Field(default_factory=list)  # the last LEDGER_SIZE entries, oldest first
    suspended_since: datetime | None = None  # when the workflow first saw spec.suspend, until a pass without it
    last_failure_time: datetime | None = None
    last_failed_job: str | None = None
    #: CJ-BACKFILL ``--one-at-a-time``: the schedule times still to run, oldest first; the first is
    #: running once ``backfilling`` is set
    backfill: list[datetime] = Field(default_factory=list)
    backfilling: bool = False


class CronJobInput(_K8s):
    """Start argument of the CronJob workflow (fresh, or carried by continue-as-new)."""

    state: CronJobState
    #: How long before a schedule time the workflow hands the Job's creation to the worker, which
    #: then creates it on the second (0: the workflow wakes at the time itself). The bridge sends
    #: its ``--cronjob-lead`` with every ``observe`` signal; continue-as-new carries it here.
    lead_seconds: float = 0.0


class CreateJobInput(_K8s):
    """Create the Job for ``scheduled`` (or a manual run) from the CronJob's fresh template."""

    namespace: str
    cronjob_name: str
    cronjob_uid: str
    job_name: str
    scheduled: datetime
    scheduled_annotation: str | None = None  # C18, computed by the workflow (it owns the zone math)
    manual: bool = False
    # A creation armed ahead of its time (``create_cronjob_job_at``): wait until ``not_before``
    # (at most ``wait_at_most`` seconds, whatever the two clocks say), then create only if the
    # CronJob's spec is still at ``generation`` and the time is not past ``latest`` (B13).
    not_before: datetime | None = None
    wait_at_most: float = 0.0
    generation: int | None = None
    latest: datetime | None = None


CreateOutcome = Literal["created", "exists", "not_ours", "cronjob_gone", "invalid", "stale", "too_late"]


class CreateJobResult(_K8s):
    outcome: CreateOutcome
    job: ObjectReference | None = None
    finished: bool = False  # "exists": the Job found under that name has already finished
    message: str = ""
    generation: int = 0  # "stale": the CronJob's generation found


class DeleteJobsInput(_K8s):
    """Delete Jobs with Background propagation (Replace: C14; history limits: C33)."""

    namespace: str
    cronjob_name: str
    cronjob_uid: str
    jobs: list[ObjectReference]
    purpose: Literal["replace", "history"]


class DeleteJobsResult(_K8s):
    deleted: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)


class SyncCronJobInput(_K8s):
    """Write the CronJob's status (C2) and batchd's annotations (next schedule time, counters)."""

    namespace: str
    name: str
    uid: str
    active: list[ObjectReference]
    last_schedule_time: datetime | None = None
    last_successful_time: datetime | None = None
    annotations: dict[str, str | None] = Field(default_factory=dict)


class SyncCronJobResult(_K8s):
    gone: bool = False


class SetSuspendInput(_K8s):
    """Set ``spec.suspend`` and batchd's suspend annotations (CJ-SUSPEND) in one patch."""

    namespace: str
    name: str
    uid: str
    suspend: bool
    reason: str | None = None
    #: ``batchd.io/suspended-at`` to write; None keeps the annotation as it is (a suspended
    #: CronJob that only gets a new reason) or, on resume, removes it
    at: datetime | None = None


class TriggerInput(_K8s):
    """Operator update ``trigger``: create a Job now (like ``kubectl create job --from=cronjob/x``)."""


class TriggerResult(_K8s):
    job_name: str


class SuspendInput(_K8s):
    """Operator updates ``suspend`` (optionally with a ``reason``) / ``resume``."""

    reason: str | None = None


class SuspendResult(_K8s):
    suspended: bool
    changed: bool


BACKFILL_LIMIT = 1000  # schedule times in one backfill call (CJ-BACKFILL)


class BackfillInput(_K8s):
    """Operator update ``backfill`` (CJ-BACKFILL): a Job for every schedule time from ``from`` to ``to``."""

    start: datetime = Field(alias="from")
    to: datetime
    one_at_a_time: bool = False


class BackfillResult(_K8s):
    times: int  # schedule times in the range
    created: list[str] = Field(default_factory=list)
    existed: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)  # "<job>: <why>"
    queued: list[str] = Field(default_factory=list)  # one at a time: the Jobs still to come, in order


# --------------------------------------------------------------------------------------------
# Job controller (finalizer-based tracking, KEP-3939). Spec references: shared/spec/job.md.

POD_JOB_LABEL = "batchd.io/job-controller"  # on every Pod batchd creates: lets the bridge watch only those
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
MAX_INT32 = 2**31 - 1
_GO_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts

CompletionMode = Literal["NonIndexed", "Indexed"]
ReplacementPolicy = Literal["TerminatingOrFailed", "Failed"]


class ContainerExit(_K8s):
    """One container status as podFailurePolicy reads it (spec job-policies H6)."""

    name: str = ""
    exit_code: int | None = None  # state.terminated.exitCode; None while not terminated
    init: bool = False  # from initContainerStatuses


class PodCondition(_K8s):
    """A Pod condition's type and status, all onPodConditions compares (H9)."""

    type: str
    status: str = "True"


class PodInfo(_K8s):
    """What the Job controller reads of one of its Pods (a row of a :class:`JobSnapshot`)."""

    name: str
    uid: str
    namespace: str = ""
    index: int | None = None  # completion index (Indexed Jobs); None if missing or invalid (B9)
    phase: str = "Pending"
    deleting: bool = False  # deletionTimestamp set
    has_finalizer: bool = True  # batch.kubernetes.io/job-tracking still present (C1)
    ready: bool = False
    creation_time: datetime | None = None
    finish_time: datetime | None = None  # F14 (a)-(d), filled in by the activity
    restart_count: int = 0  # all containers and init containers (F4)
    #: containerStatuses then initContainerStatuses, in list order (H6)
    containers: list[ContainerExit] = Field(default_factory=list)
    conditions: list[PodCondition] = Field(default_factory=list)
    failure_count: int = 0  # job-index-failure-count annotation, read as upstream does (I6)
    ignored_failure_count: int = 0  # job-index-ignored-failure-count annotation (I6)


class OnExitCodesRequirement(_K8s):
    """``podFailurePolicy.rules[].onExitCodes`` (H6-H8)."""

    container_name: str | None = None
    operator: str = ""
    values: list[int] = Field(default_factory=list)


class OnPodConditionsPattern(_K8s):
    """One of ``podFailurePolicy.rules[].onPodConditions`` (H9; status defaults to True, A6)."""

    type: str
    status: str = "True"


class PodFailurePolicyRule(_K8s):
    action: str
    on_exit_codes: OnExitCodesRequirement | None = None
    on_pod_conditions: list[OnPodConditionsPattern] | None = None


class PodFailurePolicy(_K8s):
    rules: list[PodFailurePolicyRule] = Field(default_factory=list)


class SuccessPolicyRule(_K8s):
    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


class SuccessPolicy(_K8s):
    rules: list[SuccessPolicyRule] = Field(default_factory=list)


class JobSpecView(_K8s):
    """The Job spec fields the controller decides on (defaults as the API server applies them)."""

    completions: int | None = 1
    parallelism: int = 1
    completion_mode: CompletionMode = "NonIndexed"
    backoff_limit: int = 6
    active_deadline_seconds: int | None = None
    suspend: bool = False
    pod_replacement_policy: ReplacementPolicy = "TerminatingOrFailed"
    restart_policy: str = "Never"  # the Pod template's (F4)
    pod_failure_policy: PodFailurePolicy | None = None  # spec job-policies H
    backoff_limit_per_index: int | None = None  # I
    max_failed_indexes: int | None = None  # I
    success_policy: SuccessPolicy | None = None  # J


class JobStatusView(_K8s):
    """The Job status fields the controller owns."""

    active: int = 0
    ready: int = 0
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    completed_indexes: str = ""
    failed_indexes: str | None = None  # None if and only if backoffLimitPerIndex is unset (I9)
    uncounted_succeeded: list[str] = Field(default_factory=list)
    uncounted_failed: list[str] = Field(default_factory=list)
    start_time: datetime | None = None
    completion_time: datetime | None = None
    conditions: list[Condition] = Field(default_factory=list)


class JobSnapshot(_K8s):
    """A fresh read of a Job and all its Pods, taken by the ``observe_job`` activity."""

    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    deleting: bool = False
    gone: bool = False
    spec: JobSpecView = Field(default_factory=JobSpecView)
    status: JobStatusView = Field(default_factory=JobStatusView)
    pods: list[PodInfo] = Field(default_factory=list)
    #: B23: Pods the Job controls whose labels no longer match its selector (to be released);
    #: never counted, never active
    unmatched: list[PodInfo] = Field(default_factory=list)


class BackoffRecord(_K8s):
    """Pod-recreation backoff (F12, F13), durable here where upstream keeps it in memory (F15)."""

    failures_after_last_success: int = 0
    last_failure_time: datetime | None = None


class JobMemory(_K8s):
    """What the Job workflow remembers across syncs beyond the API's status."""

    backoff: BackoffRecord = Field(default_factory=BackoffRecord)
    finalizers_removed: list[str] = Field(default_factory=list)  # uids (C11), durable instead of in-memory
    counted_backoff: list[str] = Field(default_factory=list)  # failed-pod uids already added to the backoff record


class PodToCreate(_K8s):
    index: int | None = None  # completion index for Indexed Jobs
    #: job-index-failure-count for the new Pod; None: the Job has no backoffLimitPerIndex (I4)
    failure_count: int | None = None
    ignored_failure_count: int = 0  # job-index-ignored-failure-count, written only when > 0 (I4)
    #: the name's random tail, drawn in the workflow: a creation retried after a worker died
    #: mid-batch meets its own Pod (409) instead of making a second one for the same index
    suffix: str | None = None


class JobEvent(_K8s):
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


class SyncPlan(_K8s):
    """The decisions of one sync (upstream ``syncJob``), computed purely from a snapshot and memory.

    The workflow applies them in this order, each an idempotent activity:
    ``release_unmatched`` → ``delete`` / ``release_and_delete`` → ``create`` → step 1 write ``record`` (if not None) →
    step 2 remove finalizers of ``release`` → step 3 :func:`fold` and write → ``finish``.
    """

    record: JobStatusView | None = None  # step 1: status with new uncounted uids, interim conditions, counts
    release: list[str] = Field(default_factory=list)  # step 2: pod names whose finalizer to remove
    create: list[PodToCreate] = Field(default_factory=list)
    delete: list[str] = Field(default_factory=list)  # plain DELETE, finalizer kept (F17: finishing)
    release_and_delete: list[str] = Field(default_factory=list)  # finalizer removed first, not counted (B13)
    events: list[JobEvent] = Field(default_factory=list)
    backoff: BackoffRecord = Field(default_factory=BackoffRecord)
    counted_backoff: list[str] = Field(default_factory=list)
    requeue_after: timedelta | None = None  # backoff wait or active deadline
    finished: bool = False  # the Job already carries Complete=True or Failed=True (C18)
    policy_actions: list[str] = Field(default_factory=list)  # H19: podFailurePolicy actions of recorded Pods
    #: B23, first of all: Pods to release (the Job's ownerReference and the tracking finalizer removed)
    release_unmatched: list[str] = Field(default_factory=list)
    #: L6: what the sync did, the ``action`` label of job_controller_job_sync* (reconciling, tracking,
    #: pods_created, pods_deleted)
    action: str = "reconciling"
    #: L12: the ``reason`` label of job_controller_job_pods_creation_total for ``create``
    creation_reason: str = "new"


def _ts(raw: object) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    return datetime.fromisoformat(raw.replace("Z", "+00:00"))


def _failure_count(annotations: dict[str, Any], key: str) -> int:
    """I6: an annotation that is missing, not a Go integer, negative or beyond int32 reads as 0."""
    raw = annotations.get(key)
    if not isinstance(raw, str) or not _GO_INT.fullmatch(raw):
        return 0
    value = int(raw)
    return value if 0 <= value <= MAX_INT32 else 0


def _container_exits(status: dict[str, Any]) -> list[ContainerExit]:
    out: list[ContainerExit] = []
    for key, init in (("containerStatuses", False), ("initContainerStatuses", True)):
        for cs in status.get(key) or []:
            term = (cs.get("state") or {}).get("terminated")
            code = term.get("exitCode") if isinstance(term, dict) else None
            out.append(ContainerExit(name=cs.get("name") or "", init=init,
                                     exit_code=int(code) if isinstance(code, int) else (0 if term is not None else None)))
    return out


def pod_info(raw: dict[str, Any]) -> PodInfo:
    """Summarise a Pod as the Job controller reads it (B9 index, C1 finalizer, D2 ready, F14 finish time)."""
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    annotations = meta.get("annotations") or {}
    idx_raw = annotations.get(COMPLETION_INDEX_ANNOTATION)
    index = int(idx_raw) if isinstance(idx_raw, str) and idx_raw.isdigit() else None
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    terminated = [((s.get("state") or {}).get("terminated") or {}) for s in statuses]
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    # F14: (a) every container terminated -> latest finishedAt; (b) Ready=False transition;
    # (c) deletionTimestamp - grace; (d) creationTimestamp
    finish: datetime | None = None
    finished_at = [_ts(t.get("finishedAt")) for t in terminated if t]
    if statuses and len(finished_at) == len(statuses) and all(finished_at):
        finish = max(f for f in finished_at if f)
    elif (conditions.get("Ready") or {}).get("status") == "False" and _ts(conditions["Ready"].get("lastTransitionTime")):
        finish = _ts(conditions["Ready"].get("lastTransitionTime"))
    elif (deleted := _ts(meta.get("deletionTimestamp"))) is not None:
        finish = deleted - timedelta(seconds=int(meta.get("deletionGracePeriodSeconds") or 0))
    else:
        finish = _ts(meta.get("creationTimestamp"))
    return PodInfo(
        name=meta.get("name", ""), uid=meta.get("uid", ""), namespace=meta.get("namespace", ""), index=index,
        phase=status.get("phase") or "Pending", deleting=bool(meta.get("deletionTimestamp")),
        has_finalizer=JOB_TRACKING_FINALIZER in (meta.get("finalizers") or []), ready=ready,
        creation_time=_ts(meta.get("creationTimestamp")), finish_time=finish,
        restart_count=sum(int(s.get("restartCount") or 0) for s in statuses),
        containers=_container_exits(status),
        conditions=[PodCondition(type=c["type"], status=c.get("status") or "")
                    for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type")],
        failure_count=_failure_count(annotations, INDEX_FAILURE_COUNT_ANNOTATION),
        ignored_failure_count=_failure_count(annotations, INDEX_IGNORED_FAILURE_COUNT_ANNOTATION),
    )


def job_snapshot(job: dict[str, Any] | None, pods: list[dict[str, Any]], *, namespace: str, name: str,
                 uid: str, unmatched: list[dict[str, Any]] | None = None) -> JobSnapshot:
    """A :class:`JobSnapshot` from a fresh GET of the Job (None: gone) and the LIST of its Pods.

    ``unmatched`` are Pods the Job controls whose labels no longer match its selector (B23).

    Pods that finished, no longer hold the tracking finalizer and are not in the uncounted lists
    are already counted (C1) and play no part in any decision: they are left out, which keeps
    snapshots (and so workflow history) proportional to the Pods in flight, not to completions.
    """
    uncounted_uids = set()
    if job is not None:
        unc = ((job.get("status") or {}).get("uncountedTerminatedPods") or {})
        uncounted_uids = {*(unc.get("succeeded") or []), *(unc.get("failed") or [])}
    infos = [i for i in map(pod_info, pods)
             if i.has_finalizer or i.phase not in ("Succeeded", "Failed") or i.uid in uncounted_uids]
    if job is None or (job.get("metadata") or {}).get("uid") != uid:
        return JobSnapshot(namespace=namespace, name=name, uid=uid, gone=True, pods=infos)
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    template_spec = ((spec.get("template") or {}).get("spec") or {})
    uncounted = status.get("uncountedTerminatedPods") or {}
    return JobSnapshot(
        namespace=namespace, name=name, uid=uid, resource_version=meta.get("resourceVersion", ""),
        deleting=bool(meta.get("deletionTimestamp")),
        spec=JobSpecView(
            completions=spec.get("completions"), parallelism=spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1,
            completion_mode=spec.get("completionMode") or "NonIndexed",
            backoff_limit=spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6,
            active_deadline_seconds=spec.get("activeDeadlineSeconds"), suspend=bool(spec.get("suspend")),
            pod_replacement_policy=spec.get("podReplacementPolicy") or "TerminatingOrFailed",
            restart_policy=template_spec.get("restartPolicy") or "Never",
            pod_failure_policy=spec.get("podFailurePolicy"), success_policy=spec.get("successPolicy"),
            backoff_limit_per_index=spec.get("backoffLimitPerIndex"), max_failed_indexes=spec.get("maxFailedIndexes"),
        ),
        status=JobStatusView(
            active=status.get("active") or 0, ready=status.get("ready") or 0, terminating=status.get("terminating") or 0,
            succeeded=status.get("succeeded") or 0, failed=status.get("failed") or 0,
            completed_indexes=status.get("completedIndexes") or "",
            failed_indexes=status.get("failedIndexes"),
            uncounted_succeeded=list(uncounted.get("succeeded") or []), uncounted_failed=list(uncounted.get("failed") or []),
            start_time=_ts(status.get("startTime")), completion_time=_ts(status.get("completionTime")),
            conditions=[Condition.model_validate(c) for c in status.get("conditions") or []],
        ),
        pods=infos, unmatched=[pod_info(p) for p in unmatched or []],
    )


class JobInput(_K8s):
    """Start argument of the Job workflow (fresh, or carried by continue-as-new)."""

    namespace: str
    name: str
    uid: str
    memory: JobMemory = Field(default_factory=JobMemory)
    expect: list[str] = Field(default_factory=list)  # ObserveJobInput.expect of the next sync (B23)


class ObserveJobInput(_K8s):
    namespace: str
    name: str
    uid: str
    #: Pods the workflow last saw holding the tracking finalizer (and those it just created): one
    #: missing from the selector's LIST was relabeled or lost its finalizer to someone, so the
    #: activity reads it by name (B23 release); in the steady state every one is listed, at no cost
    expect: list[str] = Field(default_factory=list)


class WriteStatusInput(_K8s):
    """Write the controller-owned status, only if the Job is still at ``resource_version``.

    The precondition makes a write computed from an older read (a replayed snapshot after a
    worker died mid-sync) fail as ``stale`` instead of overwriting newer counts.
    """

    namespace: str
    name: str
    uid: str
    resource_version: str
    status: JobStatusView
    indexed: bool = False


class CreatePodsInput(_K8s):
    namespace: str
    name: str
    uid: str
    indexes: list[int | None] = Field(default_factory=list)
    #: the Pods to create with their per-index counts (I4); when set, ``indexes`` is ignored
    pods: list[PodToCreate] = Field(default_factory=list)


class CreatePodsResult(_K8s):
    created: list[str] = Field(default_factory=list)
    failed: int = 0  # attempts that failed for another reason (5xx, timeouts, …)
    refused: int = 0  # attempts refused with 422 or 403 (namespace-terminating refusals not included, B19)
    invalid: str | None = None  # 422: the template is rejected; retrying cannot help
    forbidden: str | None = None  # 403 (quota-like): back off
    gone: bool = False


class ReleaseInput(_K8s):
    namespace: str
    pods: list[str]


class ReleaseUnmatchedInput(_K8s):
    """B23: take the Job's ownerReference (and the tracking finalizer) off Pods that stopped matching."""

    namespace: str
    job_uid: str
    pods: dict[str, str]  # name -> uid (the patch's uid precondition)


class DeletePodsInput(_K8s):
    namespace: str
    pods: list[str]
    release: bool = False


class PodsResult(_K8s):
    names: list[str] = Field(default_factory=list)
    gone: bool = False
    stale: bool = False  # a status write's resourceVersion precondition failed
    resource_version: str = ""  # after a successful status write
