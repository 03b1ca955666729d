"""CronJob (docs/cronjob.md): the observation, the workflow's state and its activity contract.

Layer: workflows (pure).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import Field
from pydantic.dataclasses import dataclass

from workflows.cron import check_more
from workflows.models.common import (
    MAX_INT32,
    WIRE,
    Annotations,
    CloudEvent,
    EventInput,
    Job,
    K8sModel,
    ObjectMeta,
    Observation,
    Unreadable,
    declare_activity,
    finished_condition,
    parse_instant,
)
from workflows.times import rfc3339

#: The component of the CronJob controller's Events (``source.component``, ``reportingComponent``).
CRONJOB_COMPONENT = "batchd-cronjob-controller"
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
#: CJ-SCHEDULES: more cron expressions, one per line or separated by ";", run with spec.schedule
SCHEDULES_ANNOTATION = "batchd.io/schedules"
ACTIVE_FROM_ANNOTATION = "batchd.io/active-from"  # CJ-WINDOW: RFC 3339 with an offset
ACTIVE_UNTIL_ANNOTATION = "batchd.io/active-until"
MAX_RUNS_ANNOTATION = "batchd.io/max-runs"  # CJ-MAX-RUNS
SKIP_ANNOTATION = "batchd.io/skip"  # CJ-SKIP: cron expressions whose times make no Job
SUSPEND_AFTER_FAILURES_ANNOTATION = "batchd.io/suspend-after-failures"  # CJ-BREAKER
CONCURRENCY_GROUP_ANNOTATION = "batchd.io/concurrency-group"  # CJ-GROUP: a DNS label, per namespace
CONCURRENCY_LIMIT_ANNOTATION = "batchd.io/concurrency-limit"  # CJ-GROUP: 1 when absent
MAX_GROUP_LIMIT = 10_000
#: CJ-BACKFILL-DOOR: ``FROM/TO`` (optionally `` one-at-a-time``) asks for a backfill, taken once per
#: value; batchd records the value it took in BACKFILL_TAKEN_ANNOTATION
BACKFILL_ANNOTATION = "batchd.io/backfill"
BACKFILL_TAKEN_ANNOTATION = "batchd.io/backfill-taken"
SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MANUAL_INSTANTIATE_ANNOTATION = "cronjob.kubernetes.io/instantiate"


ConcurrencyPolicy = Literal["Allow", "Forbid", "Replace"]
JobOutcome = Literal["Complete", "Failed"]


class ObjectReference(K8sModel):
    """An entry of ``CronJob.status.active``."""

    api_version: str = "batch/v1"
    kind: str = "Job"
    name: str
    namespace: str
    uid: str
    resource_version: str | None = None


class CronJobSpec(K8sModel):
    schedule: str = ""
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: ConcurrencyPolicy = "Allow"
    suspend: bool = False
    successful_jobs_history_limit: int | None = 3
    failed_jobs_history_limit: int | None = 1


class CronJobStatus(K8sModel):
    active: list[ObjectReference] = Field(default_factory=list)
    last_schedule_time: datetime | None = None
    last_successful_time: datetime | None = None


class CronJob(K8sModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CronJobSpec = Field(default_factory=CronJobSpec)
    status: CronJobStatus = Field(default_factory=CronJobStatus)


class CronJobObservation(Observation):
    """What the CronJob workflow reads of its CronJob, as the bridge (or a fresh GET) saw it."""

    #: its status is the workflow's own write; ``lead_seconds`` and ``cloudevents`` are the
    #: bridge's, which the workflow takes apart from the key
    NOT_DECIDED = frozenset({"resource_version", "status", "lead_seconds", "cloudevents", "backfill_taken"})
    ADDED = frozenset({"held", "backfill"})

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
    problem: str | None = None  # FAIL-CLOSED: the annotations ignored, and why (e.g. the jitter's)
    #: FAIL-CLOSED: the annotations that hold the CronJob (no Job from its schedule), and why
    held: str | None = None
    #: Not the CronJob's: the sending bridge's ``--cronjob-lead``, so a restarted worker's new
    #: setting reaches the running workflows (see ``CronJobInput.lead_seconds``).
    lead_seconds: float | None = None
    suspend_reason: str | None = None  # CJ-SUSPEND: the annotations, shown by ``describe``
    suspended_at: str | None = None
    catch_up: Literal["latest", "all"] = "latest"  # CJ-CATCH-UP
    schedules: list[str] = Field(default_factory=list)  # CJ-SCHEDULES: beside spec.schedule
    active_from: datetime | None = None  # CJ-WINDOW
    active_until: datetime | None = None
    max_runs: int | None = None  # CJ-MAX-RUNS
    skip: list[str] = Field(default_factory=list)  # CJ-SKIP
    suspend_after_failures: int | None = None  # CJ-BREAKER
    concurrency_group: str | None = None  # CJ-GROUP
    concurrency_limit: int = 1
    backfill: str | None = None  # CJ-BACKFILL-DOOR: the request, when it reads well
    backfill_taken: str | None = None  # what batchd last took (written by the workflow)
    #: NOTIFY-EVENTS: not the CronJob's either: whether the sending bridge's worker has a CloudEvents sink
    cloudevents: bool | None = None

    @classmethod
    def of(cls, cj: CronJob) -> CronJobObservation:
        meta = cj.metadata
        read = Annotations(meta.annotations, CRONJOB_ANNOTATIONS)
        catch_up: Literal["latest", "all"] = "all" if read.choice(
            CATCH_UP_ANNOTATION, ("latest", "all"), "only the latest missed time runs") == "all" else "latest"
        active_from, active_until = read.instant(ACTIVE_FROM_ANNOTATION), read.instant(ACTIVE_UNTIL_ANNOTATION)
        if active_from and active_until and active_until < active_from:
            read.refuse(ACTIVE_UNTIL_ANNOTATION, f"is before {ACTIVE_FROM_ANNOTATION}")
        group = read.label(CONCURRENCY_GROUP_ANNOTATION)
        limit = read.number(CONCURRENCY_LIMIT_ANNOTATION, 1, MAX_GROUP_LIMIT)
        if CONCURRENCY_LIMIT_ANNOTATION in meta.annotations and CONCURRENCY_GROUP_ANNOTATION not in meta.annotations:
            read.refuse(CONCURRENCY_LIMIT_ANNOTATION, f"is set without {CONCURRENCY_GROUP_ANNOTATION}")
        backfill = meta.annotations.get(BACKFILL_ANNOTATION)
        if backfill is not None and isinstance(asked := parse_backfill(backfill), str):
            read.refuse(BACKFILL_ANNOTATION, asked, "no backfill runs")
            backfill = None
        return cls(
            namespace=meta.namespace, name=meta.name, uid=meta.uid, resource_version=meta.resource_version,
            generation=meta.generation or 0, creation_timestamp=meta.creation_timestamp,
            deleting=meta.deletion_timestamp is not None, spec=cj.spec, status=cj.status,
            jitter_percent=read.number(JITTER_ANNOTATION, 0, 50) or 0,
            suspend_reason=meta.annotations.get(SUSPEND_REASON_ANNOTATION),
            suspended_at=meta.annotations.get(SUSPENDED_AT_ANNOTATION), catch_up=catch_up,
            schedules=expressions(read, SCHEDULES_ANNOTATION, "only spec.schedule runs"),
            active_from=active_from, active_until=active_until,
            max_runs=read.number(MAX_RUNS_ANNOTATION, 1, MAX_INT32),
            skip=expressions(read, SKIP_ANNOTATION),
            suspend_after_failures=read.number(SUSPEND_AFTER_FAILURES_ANNOTATION, 1, MAX_INT32),
            concurrency_group=group, concurrency_limit=limit or 1,
            backfill=backfill, backfill_taken=meta.annotations.get(BACKFILL_TAKEN_ANNOTATION),
            problem=read.problem(),
            held=read.hold("the CronJob is held: no Job is created from its schedule"),
        )


#: FAIL-CLOSED: the CronJob's own annotations a user writes, and what a value batchd cannot read does
#: (docs/cronjob.md has the table, with why). Its Jobs' annotations are the Job's (JOB_ANNOTATIONS).
CRONJOB_ANNOTATIONS: dict[str, Unreadable] = {
    ACTIVE_FROM_ANNOTATION: "hold",
    ACTIVE_UNTIL_ANNOTATION: "hold",
    MAX_RUNS_ANNOTATION: "hold",
    SKIP_ANNOTATION: "hold",
    SUSPEND_AFTER_FAILURES_ANNOTATION: "hold",
    CONCURRENCY_GROUP_ANNOTATION: "hold",
    CONCURRENCY_LIMIT_ANNOTATION: "hold",
    SCHEDULES_ANNOTATION: "ignore",
    CATCH_UP_ANNOTATION: "ignore",
    JITTER_ANNOTATION: "ignore",
    BACKFILL_ANNOTATION: "ignore",
}

#: CJ-SCHEDULES, CJ-SKIP: the most cron expressions one annotation holds
MAX_EXPRESSIONS = 50
#: CJ-SCHEDULES, CJ-SKIP: printable ASCII, tabs and new lines only, which the admission policy's CEL
#: splits as Python does; one item of a field: ``*``, ``?``, a value or a range, and a step
_CRON_TEXT = re.compile(r"[\x20-\x7e\t\n]*")
_CRON_ITEM = re.compile(r"(\*|\?|([0-9]+|[A-Za-z]+)(-([0-9]+|[A-Za-z]+))?)(/[0-9]+)?")


def expressions(read: Annotations, name: str, otherwise: str = "ignored") -> list[str]:
    """CJ-SCHEDULES, CJ-SKIP: cron expressions, one per line or separated by ";"; all refused if one
    is, or if there are more than MAX_EXPRESSIONS."""
    raw = read.annotations.get(name, "")
    if not _CRON_TEXT.fullmatch(raw):
        read.refuse(name, "must be printable ASCII, with tabs and new lines", otherwise)
        return []
    found = [e.strip() for line in raw.split("\n") for e in line.split(";") if e.strip()]
    refused = [why for e in found if (why := _cron_refused(e)) is not None]
    if len(found) > MAX_EXPRESSIONS:  # each is evaluated at every step of the schedule's maths
        refused = [f"holds {len(found)} expressions, more than {MAX_EXPRESSIONS}"]
    if refused:
        read.refuse(name, "; ".join(refused), otherwise)
        return []
    return found


def _cron_refused(expression: str) -> str | None:
    """Why one expression is refused: :func:`check_more`'s reasons, and items beyond the grammar of
    ``_CRON_ITEM`` (robfig's quirks, ``*-5`` or ``+5``, which the admission policy cannot follow)."""
    if not expression.startswith("@") and "TZ" not in expression:
        items = [i for f in expression.split() for i in f.split(",") if i]
        if bad := next((i for i in items if not _CRON_ITEM.fullmatch(i)), None):
            return f"{expression!r}: {bad!r} is not *, ?, a value, a range or one of them with a /step"
    return check_more(expression)


class JobSummary(K8sModel):
    """What a CronJob workflow tracks of one of its Jobs."""

    name: str
    uid: str
    owner_uid: str = ""
    outcome: JobOutcome | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    finished_at: datetime | None = None  # the Complete/Failed condition's transition (a failed Job has no completionTime)
    gone: bool = False
    #: uids of other Jobs of the CronJob, whose end was reported before, deleted since (CJ-46): a
    #: tuple, so the summaries a workflow keeps share one empty default
    also_gone: tuple[str, ...] = ()

    @classmethod
    def of(cls, job: Job, raw_status: dict[str, object] | None = None) -> JobSummary:
        """Summarise a Job (CJ-48: its first Complete/Failed=True condition decides the class)."""
        finished = finished_condition(job.status.conditions)
        owner = job.metadata.controller_ref()
        status = raw_status or {}
        # validated, not constructed: the outcome and the raw status times are checked and parsed here
        return cls.model_validate({
            "name": job.metadata.name, "uid": job.metadata.uid, "owner_uid": owner.uid if owner else "",
            "outcome": finished.type if finished else None,
            "finished_at": finished.last_transition_time if finished else None,
            "start_time": status.get("startTime"), "completion_time": status.get("completionTime"),
        })


class CronJobRun(K8sModel):
    """One finished run, kept (the last few) for ``describe``."""

    job_name: str
    outcome: JobOutcome | Literal["Missing"]
    finished_at: datetime | None = None


RunSource = Literal["schedule", "trigger", "backfill", "catch-up"]
RunOutcome = Literal["created", "skipped-concurrency", "replaced", "missed-deadline", "suspended",
                     "too-many-missed", "create-failed", "skipped-calendar", "waited-for-group", "held"]
RunResult = Literal["running", "Complete", "Failed", "deleted"]
LEDGER_SIZE = 100


@dataclass(frozen=True, slots=True, kw_only=True, config=WIRE)
class LedgerEntry:
    """What happened at one schedule time, trigger or backfill (CJ-LEDGER): query ``history``.

    A slotted dataclass, not a model: a workflow holds up to a hundred of these, and a frozen
    model's ``__dict__`` and set of fields set would make each entry far larger than its values
    (docs/benchmarks.md). The wire format is the models' own.
    """

    scheduled_time: datetime
    source: RunSource = "schedule"
    outcome: RunOutcome
    job: str | None = None
    job_uid: str | None = None
    created_at: datetime | None = None
    result: RunResult | None = None


class CronJobCounters(K8sModel):
    succeeded: int = 0
    failed: int = 0
    failures_since_last_success: int = 0


# -- concurrency groups (CJ-GROUP): a member and its group's workflow (workflows/group.py) --------

#: The most CronJobs one group holds; a member beyond them is told the group is full and waits.
MAX_MEMBERS = 500
#: Of a member's active Jobs, the group keeps this many references (the holders it re-reads); the
#: count it keeps whole. With MAX_MEMBERS, a group's state stays far below a payload's 2 MB.
MAX_REFS = 5
#: The most holders one re-read GETs (one local activity, well within its time limit); the next
#: re-read goes on from there, round the list.
RECHECK_BATCH = 50
#: The most holders and waiters an answer lists (the first of each; the counts are whole): a member
#: keeps its last answer, and each answer is in the group's history.
ANSWER_LIST = 5


class GroupReport(K8sModel):
    """A member's whole view, sent whenever it changes (signal ``report``); the group answers with
    :class:`GroupAnswer`. Whole views, not deltas: a repeat or a retry changes nothing."""

    namespace: str
    group: str
    member: str  # the CronJob's name
    member_uid: str
    limit: int = 1
    active: list[ObjectReference] = Field(default_factory=list)  # at most MAX_REFS
    active_count: int = 0  # all of the member's active Jobs: each holds a slot
    #: the schedule time waiting for a slot, and when the member's wait began (its place in the queue)
    want: datetime | None = None
    since: datetime | None = None
    leave: bool = False  # the CronJob left the group, or is gone


class Holder(K8sModel):
    cronjob: str
    job: str


class Waiter(K8sModel):
    cronjob: str
    scheduled_time: datetime
    since: datetime


class GroupAnswer(K8sModel):
    """Signal ``group_answer`` to a member, after its report and whenever a slot becomes its own:
    whether its waiting time has a slot, and the group as it stands (``describe`` on the member
    shows it)."""

    group: str = ""
    want: datetime | None = None  # the waiting time this answer is about (the member's, as last reported)
    granted: bool = False
    limit: int = 1
    position: int | None = None  # 1-based place in the queue while waiting
    used: int = 0  # slots held, by active Jobs and grants
    holders: list[Holder] = Field(default_factory=list)  # the first ANSWER_LIST
    queue: list[Waiter] = Field(default_factory=list)  # the first ANSWER_LIST, in order
    waiting: int = 0  # the whole queue's length
    refused: str | None = None  # the group is full (MAX_MEMBERS)


class Seat(K8sModel):
    """One member as its group holds it."""

    member: str
    uid: str
    limit: int = 1
    active: list[ObjectReference] = Field(default_factory=list)
    active_count: int = 0
    want: datetime | None = None
    since: datetime | None = None
    granted: datetime | None = None  # the wanted time given a slot, until the member reports its Job


class GroupState(K8sModel):
    namespace: str
    group: str
    seats: list[Seat] = Field(default_factory=list)
    #: the members to answer (``group_answer``): each has reported, or has been granted a slot
    to_tell: list[str] = Field(default_factory=list)
    reread_from: int = 0  # where the next re-read of the holders starts (RECHECK_BATCH at a time)
    recheck_seconds: float = 30.0


class Membership(K8sModel):
    """A member's side (CronJobState.seat): what it last told its group and heard back."""

    group: str
    want: datetime | None = None  # the schedule time waiting for a slot
    source: RunSource = "schedule"  # ``want``'s, for the ledger
    since: datetime | None = None  # when this wait began: the place in the group's queue
    granted: datetime | None = None  # ``want`` has its slot (``group_answer``)
    told: str = ""  # the key of the last report sent (decisions/cronjob.py: group_key)
    answer: GroupAnswer = Field(default_factory=GroupAnswer)
    answered_at: datetime | None = None

    def wait_over(self) -> Membership:
        """No time waiting any more: none wanted, no place in the queue, no slot."""
        return self.model_copy(update={"want": None, "since": None, "granted": None})


class GroupInput(K8sModel):
    state: GroupState


class ReadJobsInput(K8sModel):
    """Re-read the holders' Jobs (CJ-GROUP: a slot frees when its Job ends or goes, even unseen)."""

    namespace: str
    jobs: list[ObjectReference]


class ReadJobsResult(K8sModel):
    ended: list[JobSummary] = Field(default_factory=list)  # finished, or gone (``gone``)


class CronJobState(K8sModel):
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
    held_since: datetime | None = None  # FAIL-CLOSED: as suspended_since, for a hold
    last_failure_time: datetime | None = None
    last_failed_job: str | None = None
    #: CJ-BACKFILL ``--one-at-a-time``: the schedule times still to run, oldest first; the first is
    #: running once ``backfilling`` is set
    backfill: list[datetime] = Field(default_factory=list)
    backfilling: bool = False
    #: CJ-BACKFILL-DOOR: the ``batchd.io/backfill`` value taken (None once the annotation is removed)
    backfill_taken: str | None = None
    scheduled_runs: int = 0  # CJ-MAX-RUNS: Jobs created from the schedule while a limit is set
    failures_in_a_row: int = 0  # CJ-BREAKER: scheduled Jobs Failed since the last Complete
    outbox: list[CloudEvent] = Field(default_factory=list)  # NOTIFY-EVENTS: not yet delivered, oldest first
    seat: Membership | None = None  # CJ-GROUP: the CronJob's place in its concurrency group, once it reported


@dataclass(slots=True, kw_only=True, config=WIRE)
class CronJobInput:
    """Start argument of the CronJob workflow (fresh, or carried by continue-as-new).

    Not frozen, unlike the other inputs: the SDK keeps a workflow's argument for as long as its run
    lasts (in its own input record and in the frames of the run's first calls), so the workflow
    takes the state out (:meth:`take_state`) and the run's first state is not kept beside the
    current one. The wire format is the models' own.
    """

    state: CronJobState | None
    #: How long before a schedule time the workflow hands the Job's creation to the worker, which
    #: then creates it on the second (0: the workflow wakes at the time itself). The bridge sends
    #: its ``--cronjob-lead`` with every ``observe`` signal; continue-as-new carries it here.
    lead_seconds: float = 0.0
    #: The run continues as new beyond this many events plus a share of as many again
    #: (workflows/cronjob.py ``_history_limit``). The bridge and continue-as-new send the worker's
    #: ``HISTORY_EVENTS``; a run started before this field existed has none and replays with the
    #: 60 it was started under.
    run_events: int = 60

    def take_state(self) -> CronJobState:
        """The state, once: what is left holds none."""
        state, self.state = self.state, None
        if state is None:
            raise ValueError("CronJobInput.state was taken already")
        return state


class CreateJobInput(K8sModel):
    """Create the Job for ``scheduled`` (or a manual run) from the CronJob's fresh template."""

    namespace: str
    cronjob_name: str
    cronjob_uid: str
    job_name: str
    scheduled: datetime
    scheduled_annotation: str | None = None  # CJ-33, computed by the workflow (it owns the zone math)
    manual: bool = False
    # A creation armed ahead of its time (``create_cronjob_job_at``): wait until ``not_before``
    # (at most ``wait_at_most`` seconds, whatever the two clocks say), then create only if the
    # CronJob's spec is still at ``generation``, what its annotations decide is still ``observed``
    # (its observation's decision key: a hold, a window, a skip calendar changed since the plan
    # would make it "stale") and the time is not past ``latest`` (CJ-53).
    not_before: datetime | None = None
    wait_at_most: float = 0.0
    generation: int | None = None
    observed: str | None = None
    latest: datetime | None = None


CreateOutcome = Literal["created", "exists", "not_ours", "cronjob_gone", "invalid", "stale", "too_late"]


class CreateJobResult(K8sModel):
    outcome: CreateOutcome
    job: ObjectReference | None = None
    finished: bool = False  # "exists": the Job found under that name has already finished
    message: str = ""
    generation: int = 0  # "stale": the CronJob's generation found


class DeleteJobsInput(K8sModel):
    """Delete Jobs with Background propagation (Replace: CJ-29; history limits: CJ-50)."""

    namespace: str
    cronjob_name: str
    cronjob_uid: str
    jobs: list[ObjectReference]
    purpose: Literal["replace", "history"]


class DeleteJobsResult(K8sModel):
    deleted: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)


class SyncCronJobInput(K8sModel):
    """Write the CronJob's status (CJ-45) and batchd's annotations (next schedule time, counters),
    then record ``events``, the pass's Events, once each (one local activity where there were
    one per Event and one for the status)."""

    namespace: str
    name: str
    uid: str
    active: list[ObjectReference]
    last_schedule_time: datetime | None = None
    last_successful_time: datetime | None = None
    annotations: dict[str, str | None] = Field(default_factory=dict)
    events: list[EventInput] = Field(default_factory=list)


class SyncCronJobResult(K8sModel):
    gone: bool = False
    #: the Events the one try did not record: the workflow records them with its retries
    unrecorded: list[EventInput] = Field(default_factory=list)


class SetSuspendInput(K8sModel):
    """Set ``spec.suspend`` and batchd's suspend annotations (CJ-SUSPEND) in one patch."""

    namespace: str
    name: str
    uid: str
    suspend: bool
    reason: str | None = None
    #: ``batchd.io/suspended-at`` to write; None keeps the annotation as it is (a suspended
    #: CronJob that only gets a new reason) or, on resume, removes it
    at: datetime | None = None

    def patch(self) -> dict[str, Any]:
        """The merge patch: one, so no reader sees ``spec.suspend`` without its reason and time."""
        notes: dict[str, str | None] = {SUSPEND_REASON_ANNOTATION: self.reason if self.suspend else None}
        if self.at is not None or not self.suspend:
            notes[SUSPENDED_AT_ANNOTATION] = rfc3339(self.at) if self.suspend else None
        return {"metadata": {"annotations": notes}, "spec": {"suspend": self.suspend}}


class TriggerInput(K8sModel):
    """Operator update ``trigger``: create a Job now (like ``kubectl create job --from=cronjob/x``)."""


class TriggerResult(K8sModel):
    job_name: str


class SuspendInput(K8sModel):
    """Operator updates ``suspend`` (optionally with a ``reason``) / ``resume``."""

    reason: str | None = None


class SuspendResult(K8sModel):
    suspended: bool
    changed: bool


BACKFILL_LIMIT = 1000  # schedule times in one backfill call (CJ-BACKFILL)


class BackfillInput(K8sModel):
    """Operator update ``backfill`` (CJ-BACKFILL): a Job for every schedule time from ``from`` to ``to``."""

    start: datetime = Field(alias="from")
    to: datetime
    one_at_a_time: bool = False


_BACKFILL = re.compile(r"([^/ ]+)/([^/ ]+)( one-at-a-time)?")


def parse_backfill(text: str) -> BackfillInput | str:
    """CJ-BACKFILL-DOOR: the backfill a ``batchd.io/backfill`` value asks for, or why it cannot be read."""
    m = _BACKFILL.fullmatch(text)
    start, to = (parse_instant(m[1]), parse_instant(m[2])) if m else (None, None)
    if m is None or start is None or to is None or start > to:
        return ("must be FROM/TO, two RFC 3339 times with an offset in the years 1970 to 2999, FROM not after TO "
                "(2026-01-01T00:00:00Z/2026-01-07T00:00:00Z), optionally followed by ' one-at-a-time'")
    return BackfillInput.model_validate({"from": start, "to": to, "one_at_a_time": m[3] is not None})


class BackfillResult(K8sModel):
    times: int  # schedule times in the range
    created: list[str] = Field(default_factory=list)
    existed: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)  # "<job>: <why>"
    queued: list[str] = Field(default_factory=list)  # one at a time: the Jobs still to come, in order


# -- activities (implemented by activities/cronjob.py) ------------------------------------------


@declare_activity
def create_cronjob_job(inp: CreateJobInput) -> CreateJobResult:
    """Build the Job from the CronJob's current template and create it (CJ-30 to CJ-39)."""
    raise NotImplementedError


@declare_activity
async def create_cronjob_job_at(inp: CreateJobInput) -> CreateJobResult:
    """Wait in the worker until ``not_before``, then create the Job as ``create_cronjob_job`` does.

    Runs on the timed task queue (``timed_task_queue``), where a worker holds many armed creations at once.
    """
    raise NotImplementedError


@declare_activity
def delete_cronjob_jobs(inp: DeleteJobsInput) -> DeleteJobsResult:
    """Delete Jobs with Background propagation (CJ-29, CJ-50); 404 counts as deleted."""
    raise NotImplementedError


@declare_activity
def sync_cronjob(inp: SyncCronJobInput) -> SyncCronJobResult:
    """Write ``status`` (active, lastScheduleTime, lastSuccessfulTime) and batchd's annotations."""
    raise NotImplementedError


@declare_activity
def set_cronjob_suspend(inp: SetSuspendInput) -> SyncCronJobResult:
    """Patch ``spec.suspend``, with the suspend reason and time beside it, in one patch (CJ-SUSPEND)."""
    raise NotImplementedError


@declare_activity
async def tell_group(inp: GroupReport) -> None:
    """Send a member's report to its group's workflow, starting it if it does not run (signal-with-start);
    the answer comes back as the signal ``group_answer``. A ``leave`` to a group that does not run
    starts none."""
    raise NotImplementedError


@declare_activity
def read_group_jobs(inp: ReadJobsInput) -> ReadJobsResult:
    """GET each Job; return those finished or gone (404, or another uid under the name)."""
    raise NotImplementedError
