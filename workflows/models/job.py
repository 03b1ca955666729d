"""The Job controller (docs/job.md): snapshots, the sync plan, and the activity contract.

Layer: workflows (pure). ``job_snapshot`` and ``pod_info`` turn raw API dicts into the models the
pure planner (workflows/decisions/job.py) reads.
"""

from __future__ import annotations

import base64
import functools
import re
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PlainSerializer,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from workflows.models.common import (
    INT64_MAX,
    MAX_INT32,
    POD_FINISHED_PHASES,
    Annotations,
    Condition,
    EventType,
    Job,
    K8sModel,
    Unreadable,
    declare_activity,
    finished_condition,
)

JOB_MANAGED_BY = "batchd.io/job-controller"
#: The ``spec.managedBy`` of Kubernetes' own Job controller (what an unset field means).
BUILTIN_JOB_CONTROLLER = "kubernetes.io/job-controller"
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
POD_JOB_LABEL = "batchd.io/job-controller"  # on every Pod batchd creates: lets the bridge watch only those
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
#: JOB-91: set to ``released`` on a finished Pod by the patch that removes its tracking finalizer
TRACKING_LABEL = "batchd.io/job-tracking"
#: the component of the Events batchd's Job controller records
JOB_COMPONENT = "batchd-job-controller"
_GO_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts

CompletionMode = Literal["NonIndexed", "Indexed"]
ReplacementPolicy = Literal["TerminatingOrFailed", "Failed"]


class ContainerExit(K8sModel):
    """One container status as podFailurePolicy reads it (POL-5)."""

    name: str = ""
    exit_code: int | None = None  # state.terminated.exitCode; None while not terminated
    init: bool = False  # from initContainerStatuses


class PodCondition(K8sModel):
    """A Pod condition's type and status, all onPodConditions compares (POL-8)."""

    type: str
    status: str = "True"


class PodInfo(K8sModel):
    """What the Job controller reads of one of its Pods (a row of a :class:`JobSnapshot`)."""

    name: str
    uid: str
    namespace: str = ""
    index: int | None = None  # completion index (Indexed Jobs); None if missing or invalid (JOB-13)
    phase: str = "Pending"
    deleting: bool = False  # deletionTimestamp set
    has_finalizer: bool = True  # batch.kubernetes.io/job-tracking still present (JOB-28)
    ready: bool = False
    creation_time: datetime | None = None
    finish_time: datetime | None = None  # JOB-71 (a)-(d), filled in by the activity
    restart_count: int = 0  # all containers and init containers (JOB-66)
    #: containerStatuses then initContainerStatuses, in list order (POL-5)
    containers: list[ContainerExit] = Field(default_factory=list)
    conditions: list[PodCondition] = Field(default_factory=list)
    failure_count: int = 0  # job-index-failure-count annotation, read as upstream does (POL-22)
    ignored_failure_count: int = 0  # job-index-ignored-failure-count annotation (POL-22)

    @property
    def finished(self) -> bool:
        """Succeeded or Failed: a phase a Pod never leaves."""
        return self.phase in POD_FINISHED_PHASES

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave out the fields that hold their default: a snapshot's window holds hundreds of
        Pods (JOB-92), and a running Pod's row shrinks from about 360 bytes to 150."""
        out: dict[str, Any] = handler(self)
        for name, keys, default in _pod_info_defaults():
            if getattr(self, name) == default:
                for key in keys:
                    out.pop(key, None)
        return out


@functools.cache
def _pod_info_defaults() -> list[tuple[str, tuple[str, ...], Any]]:
    """Each field of :class:`PodInfo`, its keys on the wire and its default, found once: pydantic's
    ``get_default`` inspects a default factory's signature at every call."""
    return [(name, (field.serialization_alias or name, name), field.get_default(call_default_factory=True))
            for name, field in PodInfo.model_fields.items()]


class OnExitCodesRequirement(K8sModel):
    """``podFailurePolicy.rules[].onExitCodes`` (POL-5 to POL-7)."""

    container_name: str | None = None
    operator: str = ""
    values: list[int] = Field(default_factory=list)


class OnPodConditionsPattern(K8sModel):
    """One of ``podFailurePolicy.rules[].onPodConditions`` (POL-8; status defaults to True, API-6)."""

    type: str
    status: str = "True"


class PodFailurePolicyRule(K8sModel):
    action: str
    on_exit_codes: OnExitCodesRequirement | None = None
    on_pod_conditions: list[OnPodConditionsPattern] | None = None


class PodFailurePolicy(K8sModel):
    rules: list[PodFailurePolicyRule] = Field(default_factory=list)


class SuccessPolicyRule(K8sModel):
    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


class SuccessPolicy(K8sModel):
    rules: list[SuccessPolicyRule] = Field(default_factory=list)


class JobSpecView(K8sModel):
    """The Job spec fields the controller decides on (defaults as the API server applies them)."""

    completions: int | None = 1
    parallelism: int = 1
    completion_mode: CompletionMode = "NonIndexed"
    backoff_limit: int = 6
    active_deadline_seconds: int | None = None
    suspend: bool = False
    pod_replacement_policy: ReplacementPolicy = "TerminatingOrFailed"
    restart_policy: str = "Never"  # the Pod template's (JOB-66)
    pod_failure_policy: PodFailurePolicy | None = None  # POL-1 to POL-18
    backoff_limit_per_index: int | None = None  # I
    max_failed_indexes: int | None = None  # I
    success_policy: SuccessPolicy | None = None  # J


#: JOB-95: an index string longer than this travels packed in workflow payloads
INDEXES_INLINE = 4096
PACKED_PREFIX = "zlib:"
_CANONICAL_INT = re.compile(r"0|[1-9][0-9]*")


def pack_indexes(text: str) -> str:
    """JOB-95: an index string (JOB-48) as ``zlib:`` and the gaps between its interval bounds.

    As text, a Job of 100,000 indexes, every other one complete, has a ``completedIndexes`` of
    294 KB; packed, it is a few hundred bytes, and a random half of them 23 KB. Only a string
    that unpacks to exactly itself is packed (canonical integers, intervals in rising order);
    anything else, however long, is kept as it came.
    """
    gaps, reach = bytearray(), -1
    for part in text.split(","):
        first, dash, last = part.partition("-")
        if not _CANONICAL_INT.fullmatch(first) or (dash and not _CANONICAL_INT.fullmatch(last)):
            return text
        a, b = int(first), int(last) if dash else int(first)
        if a <= reach or b <= a and dash:
            return text
        for n in (a - reach - 1, b - a):
            while n > 0x7F:
                gaps.append(n & 0x7F | 0x80)
                n >>= 7
            gaps.append(n)
        reach = b
    return PACKED_PREFIX + base64.b64encode(zlib.compress(bytes(gaps))).decode()


def unpack_indexes(value: Any) -> Any:
    """The index string :func:`pack_indexes` packed; any other value as it is."""
    if not isinstance(value, str) or not value.startswith(PACKED_PREFIX):
        return value
    raw, numbers, n, shift = zlib.decompress(base64.b64decode(value[len(PACKED_PREFIX):])), [], 0, 0
    for byte in raw:
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            numbers.append(n)
            n, shift = 0, 0
    parts, reach = [], -1
    for gap, width in zip(numbers[::2], numbers[1::2], strict=True):
        a = reach + 1 + gap
        reach = a + width
        parts.append(f"{a}-{reach}" if width else str(a))
    return ",".join(parts)


def _packed(text: str | None, info: SerializationInfo) -> str | None:
    if text is None or len(text) <= INDEXES_INLINE or (info.context or {}).get("readable"):
        return text
    return pack_indexes(text)


#: An index string, packed in payloads once it is long (JOB-95); always text in the model.
IndexText = Annotated[str, BeforeValidator(unpack_indexes), PlainSerializer(_packed, when_used="json")]


class JobStatusView(K8sModel):
    """The Job status fields the controller owns."""

    active: int = 0
    ready: int = 0
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    completed_indexes: IndexText = ""
    failed_indexes: IndexText | None = None  # None if and only if backoffLimitPerIndex is unset (POL-25)
    uncounted_succeeded: list[str] = Field(default_factory=list)
    uncounted_failed: list[str] = Field(default_factory=list)
    start_time: datetime | None = None
    completion_time: datetime | None = None
    conditions: list[Condition] = Field(default_factory=list)


class PodTally(K8sModel):
    """What the decisions need of the Pods a :class:`JobSnapshot` leaves out of its window (JOB-92).

    Counts and index sets (in the format of JOB-48) over those Pods alone, but for
    ``pending_indexes``, which is over every Pod; the snapshot's ``pods`` hold the rest. Every
    field is 0 or empty for a snapshot that holds every Pod.
    """

    pods: int = 0
    active: int = 0  # JOB-41
    ready: int = 0  # JOB-42, of the active ones
    terminating: int = 0  # JOB-43
    restarts: int = 0  # container restarts of Pending and Running Pods (JOB-66)
    holding: int = 0  # hold the tracking finalizer and their removal was not requested (JOB-28, JOB-38)
    new_succeeded: int = 0  # JOB-46: tracked, not in the uncounted lists, valid, Succeeded
    new_failed: int = 0  # JOB-45: tracked, not in the uncounted lists, valid, failed (JOB-44)
    new_ignored: int = 0  # of those, failures an Ignore rule matches (POL-9)
    #: JOB-47: distinct indexes newly succeeded among them, neither in completedIndexes nor the window's
    new_indexes: int = 0
    new_succeeded_indexes: IndexText = ""  # those indexes, with a successPolicy only (POL-33)
    failed_indexes: IndexText = ""  # POL-24: indexes their Pods fail
    #: JOB-21: the lowest indexes (at most 500) that no Pod of the Job holds: not succeeded, not
    #: failed, not active, not terminating under the Failed policy (JOB-58), and not waiting on a
    #: failed Pod that is not in the window (POL-23)
    pending_indexes: IndexText = ""
    fail_job_message: str | None = None  # POL-11: the first FailJob match among them


#: JOB-BACKOFF: the Pod-recreation backoff's first delay and its cap, in seconds
BACKOFF_BASE_ANNOTATION = "batchd.io/backoff-base-seconds"
BACKOFF_MAX_ANNOTATION = "batchd.io/backoff-max-seconds"
#: JOB-DELETE-SUCCEEDED: a succeeded Pod is deleted once it is counted
DELETE_SUCCEEDED_ANNOTATION = "batchd.io/delete-succeeded-pods"
#: JOB-AFTER: Jobs (names, in the Job's namespace) that must be Complete before any Pod is created
AFTER_ANNOTATION = "batchd.io/after"


#: TTL-OUTCOME: the TTL of a Job that Completed, and of one that Failed, instead of ttlSecondsAfterFinished
TTL_AFTER_SUCCESS_ANNOTATION = "batchd.io/ttl-seconds-after-success"
TTL_AFTER_FAILURE_ANNOTATION = "batchd.io/ttl-seconds-after-failure"

#: FAIL-CLOSED: the annotations a user writes on a Job (or a CronJob's jobTemplate), and what a
#: value batchd cannot read does (docs/job.md has the table, with why). ``batchd.io/ttl-hold`` takes
#: any value.
JOB_ANNOTATIONS: dict[str, Unreadable] = {
    AFTER_ANNOTATION: "hold",
    TTL_AFTER_SUCCESS_ANNOTATION: "hold",
    TTL_AFTER_FAILURE_ANNOTATION: "hold",
    BACKOFF_BASE_ANNOTATION: "ignore",
    BACKOFF_MAX_ANNOTATION: "ignore",
    DELETE_SUCCEEDED_ANNOTATION: "ignore",
}
#: FAIL-CLOSED: what a held Job does not do
JOB_HELD = "the Job is held: it creates no Pod and is not deleted"


class JobOptions(K8sModel):
    """What batchd's annotations on a Job ask of its controllers, beyond the Job API."""

    backoff_base_seconds: int | None = None  # JOB-BACKOFF
    backoff_max_seconds: int | None = None
    delete_succeeded_pods: bool = False  # JOB-DELETE-SUCCEEDED
    after: list[str] = Field(default_factory=list)  # JOB-AFTER
    ttl_after_success: int | None = None  # TTL-OUTCOME
    ttl_after_failure: int | None = None
    problem: str | None = None  # FAIL-CLOSED: the annotations ignored, and why (a Warning InvalidAnnotation)
    held: str | None = None  # FAIL-CLOSED: the annotations that hold the Job, and why

    @classmethod
    def of(cls, annotations: Mapping[str, str]) -> JobOptions:
        read = Annotations(annotations, JOB_ANNOTATIONS)
        base = read.number(BACKOFF_BASE_ANNOTATION, 0, MAX_INT32)
        most = read.number(BACKOFF_MAX_ANNOTATION, 0, MAX_INT32)
        if base is not None and most is not None and most < base:
            read.refuse(BACKOFF_MAX_ANNOTATION, f"is below {BACKOFF_BASE_ANNOTATION}", "both are ignored")
            base = most = None
        return cls(backoff_base_seconds=base, backoff_max_seconds=most,
                   delete_succeeded_pods=read.choice(DELETE_SUCCEEDED_ANNOTATION, ("false", "true")) == "true",
                   after=read.names(AFTER_ANNOTATION, MAX_AFTER),
                   ttl_after_success=read.number(TTL_AFTER_SUCCESS_ANNOTATION, 0, INT64_MAX),
                   ttl_after_failure=read.number(TTL_AFTER_FAILURE_ANNOTATION, 0, INT64_MAX),
                   problem=read.problem(), held=read.hold(JOB_HELD))


#: JOB-AFTER: the most Jobs one Job waits for (each is read at every sync of the wait)
MAX_AFTER = 100


class JobSnapshot(K8sModel):
    """A fresh read of a Job and its Pods, taken by the ``observe_job`` activity.

    ``pods`` is a window of at most a few hundred Pods, those a sync can act on (JOB-92), and
    ``rest`` tallies the others, so the snapshot's size does not grow with the Job's.
    """

    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    deleting: bool = False
    gone: bool = False
    spec: JobSpecView = Field(default_factory=JobSpecView)
    status: JobStatusView = Field(default_factory=JobStatusView)
    pods: list[PodInfo] = Field(default_factory=list)
    #: JOB-26: Pods the Job controls whose labels no longer match its selector (to be released);
    #: never counted, never active
    unmatched: list[PodInfo] = Field(default_factory=list)
    rest: PodTally = Field(default_factory=PodTally)  # JOB-92: the Pods not in ``pods``
    pods_rv: int = 0  # JOB-93: the resourceVersion the Pods were read at (0: a LIST)
    options: JobOptions = Field(default_factory=JobOptions)


class BackoffRecord(K8sModel):
    """Pod-recreation backoff (JOB-69, JOB-70), durable here where upstream keeps it in memory (JOB-72)."""

    failures_after_last_success: int = 0
    last_failure_time: datetime | None = None


class Dependency(K8sModel):
    """JOB-AFTER: one Job another waits for, as a read or the bridge saw it."""

    name: str
    uid: str = ""  # "" : no such Job
    outcome: Literal["Complete", "Failed"] | None = None
    gone: bool = False  # deleted (with ``outcome`` None: before it finished)
    #: JOB-AFTER: a Job that failed in a cycle: the cycle, as its Failed condition names it
    cycle: list[str] | None = None

    @classmethod
    def of(cls, job: Job, *, gone: bool = False) -> Dependency:
        """How ``job`` ended, if it has, as a read or the bridge sees it."""
        end = finished_condition(job.status.conditions)
        return cls.model_validate({"name": job.metadata.name, "uid": job.metadata.uid, "gone": gone,
                                   "outcome": end.type if end else None,
                                   "cycle": cycle_of(end.message) if end and end.type == "Failed" else None})


class DependenciesInput(K8sModel):
    namespace: str
    names: list[str]


class Dependencies(K8sModel):
    jobs: list[Dependency] = Field(default_factory=list)


#: JOB-AFTER: the message a Job in a cycle fails with starts so, and names the Jobs with ARROW between
CYCLE_PREFIX = "cycle: "
ARROW = " → "
#: JOB-AFTER: the most Jobs a search for a cycle reads; a longer chain is not searched to its end
MAX_CYCLE_SEARCH = 1_000
#: The condition types that, True, say a Job's end is decided (JOB-75, JOB-76)
JOB_ENDS = ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet")


def cycle_of(message: str | None) -> list[str] | None:
    """JOB-AFTER: the cycle a Failed condition's message names (``cycle: a → b → a``), else None."""
    if not message or not message.startswith(CYCLE_PREFIX):
        return None
    names = message[len(CYCLE_PREFIX):].split(ARROW)
    return names if len(names) >= 2 and names[0] == names[-1] else None


def shortest_cycle(name: str, after: list[str], awaits: Callable[[str], list[str]]) -> list[str] | None:
    """JOB-AFTER: breadth first from Job ``name``, which waits for ``after``, through what each Job
    ``awaits``, for the shortest way back to it (``[a, b, a]``); None if there is none within
    MAX_CYCLE_SEARCH Jobs."""
    came_from: dict[str, str] = {}
    queue = deque([name])
    while queue and len(came_from) < MAX_CYCLE_SEARCH:
        at = queue.popleft()
        for dep in after if at == name else awaits(at):
            if dep == name:
                path = [at]
                while path[-1] != name:
                    path.append(came_from[path[-1]])
                return [*reversed(path), name]
            if dep not in came_from:
                came_from[dep] = at
                queue.append(dep)
    return None


class CycleInput(K8sModel):
    """JOB-AFTER: look for a way back to ``name`` through the ``after`` of the Jobs it waits for."""

    namespace: str
    name: str
    after: list[str]


class Cycle(K8sModel):
    """JOB-AFTER: the shortest cycle through the Job, from it back to it (``[a, b, a]``); None: none found."""

    path: list[str] | None = None


class JobMemory(K8sModel):
    """What the Job workflow remembers across syncs beyond the API's status."""

    backoff: BackoffRecord = Field(default_factory=BackoffRecord)
    finalizers_removed: list[str] = Field(default_factory=list)  # uids (JOB-38), durable instead of in-memory
    counted_backoff: list[str] = Field(default_factory=list)  # failed-pod uids already added to the backoff record
    #: JOB-93: the Pods' resourceVersion the next sync's read must have reached: the newest this
    #: workflow read or wrote (0: none known, as for a run started before it was kept)
    pods_rv: int = 0
    #: JOB-93: the Job's resourceVersion as this workflow last read or wrote it; a copy of the Job
    #: older than that is never acted on (0: none known)
    job_rv: int = 0
    reported: list[str] = Field(default_factory=list)  # the latest Events recorded, as reason:message
    #: JOB-AFTER: the uid each awaited Job had when seen unfinished; the ends the bridge reported;
    #: whether every one has Completed (then the Job runs, and they are read no more)
    after_seen: dict[str, str] = Field(default_factory=dict)
    after_ended: list[Dependency] = Field(default_factory=list)
    after_met: bool = False
    #: JOB-AFTER: the list of Jobs a search for a cycle last went out from: one search per change of it
    after_searched: list[str] | None = None


class PodToCreate(K8sModel):
    index: int | None = None  # completion index for Indexed Jobs
    #: job-index-failure-count for the new Pod; None: the Job has no backoffLimitPerIndex (POL-20)
    failure_count: int | None = None
    ignored_failure_count: int = 0  # job-index-ignored-failure-count, written only when > 0 (POL-20)
    #: the name's random tail, drawn in the workflow: a creation retried after a worker died
    #: mid-batch meets its own Pod (409) instead of making a second one for the same index
    suffix: str | None = None


class JobEvent(K8sModel):
    type: EventType
    reason: str
    message: str


class SyncPlan(K8sModel):
    """The decisions of one sync (upstream ``syncJob``), computed purely from a snapshot and memory.

    The workflow applies them in this order, each an idempotent activity:
    ``release_unmatched`` → ``delete`` / ``release_and_delete`` → ``create`` → step 1 write ``record`` (if not None) →
    step 2 remove finalizers of ``release`` → step 3 :func:`fold` and write → ``finish``.
    """

    record: JobStatusView | None = None  # step 1: status with new uncounted uids, interim conditions, counts
    release: list[str] = Field(default_factory=list)  # step 2: pod names whose finalizer to remove
    create: list[PodToCreate] = Field(default_factory=list)
    delete: list[str] = Field(default_factory=list)  # plain DELETE, finalizer kept (JOB-74: finishing)
    release_and_delete: list[str] = Field(default_factory=list)  # finalizer removed first, not counted (JOB-17)
    events: list[JobEvent] = Field(default_factory=list)
    backoff: BackoffRecord = Field(default_factory=BackoffRecord)
    counted_backoff: list[str] = Field(default_factory=list)
    requeue_after: timedelta | None = None  # backoff wait or active deadline
    finished: bool = False  # the Job already carries Complete=True or Failed=True (JOB-4)
    policy_actions: list[str] = Field(default_factory=list)  # POL-18: podFailurePolicy actions of recorded Pods
    #: JOB-26, first of all: Pods to release (the Job's ownerReference and the tracking finalizer removed)
    release_unmatched: list[str] = Field(default_factory=list)
    #: POL-50: what the sync did, the ``action`` label of job_controller_job_sync* (reconciling, tracking,
    #: pods_created, pods_deleted)
    action: str = "reconciling"
    #: POL-56: the ``reason`` label of job_controller_job_pods_creation_total for ``create``
    creation_reason: str = "new"


def _ts(raw: object) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    return datetime.fromisoformat(raw.replace("Z", "+00:00"))


def _failure_count(annotations: dict[str, Any], key: str) -> int:
    """POL-22: an annotation that is missing, not a Go integer, negative or beyond int32 reads as 0."""
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
    """Summarise a Pod as the Job controller reads it (JOB-13 index, JOB-28 finalizer, JOB-42 ready, JOB-71 finish time)."""
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    annotations = meta.get("annotations") or {}
    idx_raw = annotations.get(COMPLETION_INDEX_ANNOTATION)
    index = int(idx_raw) if isinstance(idx_raw, str) and idx_raw.isdigit() else None
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    terminated = [((s.get("state") or {}).get("terminated") or {}) for s in statuses]
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    # JOB-71: (a) every container terminated -> latest finishedAt; (b) Ready=False transition;
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


def job_snapshot(job: dict[str, Any] | None, pods: Sequence[dict[str, Any] | PodInfo], *, namespace: str, name: str,
                 uid: str, unmatched: Sequence[dict[str, Any] | PodInfo] = ()) -> JobSnapshot:
    """A :class:`JobSnapshot` from a fresh GET of the Job (None: gone) and its Pods, as the API
    returned them or as :func:`pod_info` read them (the worker's watch, JOB-93).

    ``unmatched`` are Pods the Job controls whose labels no longer match its selector (JOB-26).

    Pods that finished, no longer hold the tracking finalizer and are not in the uncounted lists
    are already counted (JOB-28) and play no part in any decision: they are left out, which keeps
    snapshots (and so workflow history) proportional to the Pods in flight, not to completions.
    """
    uncounted_uids = set()
    if job is not None:
        unc = ((job.get("status") or {}).get("uncountedTerminatedPods") or {})
        uncounted_uids = {*(unc.get("succeeded") or []), *(unc.get("failed") or [])}
    infos = [i for i in map(_info, pods) if i.has_finalizer or not i.finished or i.uid in uncounted_uids]
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
        pods=infos, unmatched=[_info(p) for p in unmatched], options=JobOptions.of(meta.get("annotations") or {}),
    )


def _info(pod: dict[str, Any] | PodInfo) -> PodInfo:
    return pod if isinstance(pod, PodInfo) else pod_info(pod)


def sync_key(job: Job) -> tuple[object, ...]:
    """What of a Job's own object is news to its workflow: its spec (the generation), a deletion
    under way, its end, batchd's annotations (:class:`JobOptions`). A sync re-reads everything
    else, and its Pods' changes poke on their own; its status is the workflow's own write, so a
    change there is not news."""
    meta = job.metadata
    ours = tuple(sorted((k, v) for k, v in meta.annotations.items() if k.startswith("batchd.io/")))  # JobOptions
    return (meta.generation, meta.deletion_timestamp is not None, finished_condition(job.status.conditions) is not None,
            ours)


def job_in_scope(job: Job, scope: str) -> bool:
    """JOB-1: whether batchd runs this Job.

    Args:
        job: the Job.
        scope: ``--job-scope``: ``"managed"``, the Jobs whose ``spec.managedBy`` names batchd;
            ``"all"``, also every Job that names no controller or the built-in one (where no
            kube-controller-manager runs Jobs, as in ``batchd dev``).
    """
    managed_by = job.spec.managed_by
    return managed_by == JOB_MANAGED_BY or (scope == "all" and managed_by in (None, "", BUILTIN_JOB_CONTROLLER))


class JobInput(K8sModel):
    """Start argument of the Job workflow (fresh, or carried by continue-as-new)."""

    namespace: str
    name: str
    uid: str
    memory: JobMemory = Field(default_factory=JobMemory)
    expect: list[str] = Field(default_factory=list)  # ObserveJobInput.expect of the next sync (JOB-26)
    notify: bool = False  # NOTIFY-EVENTS: the bridge's worker has a CloudEvents sink


class ObserveJobInput(K8sModel):
    namespace: str
    name: str
    uid: str
    #: Pods the workflow last saw holding the tracking finalizer (and those it just created): one
    #: missing from the selector's LIST was relabeled or lost its finalizer to someone, so the
    #: activity reads it by name (JOB-26 release); in the steady state every one is listed, at no cost
    expect: list[str] = Field(default_factory=list)
    #: JOB-92: what the window must hold (the Pods whose finalizer removal was requested, and those
    #: counted in the backoff record); None: the whole snapshot, as an older workflow asks
    memory: JobMemory | None = None


class WriteStatusInput(K8sModel):
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


class CreatePodsInput(K8sModel):
    namespace: str
    name: str
    uid: str
    indexes: list[int | None] = Field(default_factory=list)
    #: the Pods to create with their per-index counts (POL-20); when set, ``indexes`` is ignored
    pods: list[PodToCreate] = Field(default_factory=list)
    job_rv: int = 0  # JOB-93: the Job's resourceVersion the workflow last read or wrote


class CreatePodsResult(K8sModel):
    created: list[str] = Field(default_factory=list)
    failed: int = 0  # attempts that failed for another reason (5xx, timeouts, …)
    refused: int = 0  # attempts refused with 422 or 403 (namespace-terminating refusals not included, JOB-23)
    invalid: str | None = None  # 422: the template is rejected; retrying cannot help
    forbidden: str | None = None  # 403 (quota-like): back off
    gone: bool = False
    pods_rv: int = 0  # JOB-93: the newest resourceVersion of the Pods made


class ReleaseInput(K8sModel):
    namespace: str
    pods: list[str]
    #: JOB-91: those of ``pods`` that had finished when read: their patch also labels them released
    finished: list[str] = Field(default_factory=list)


class ReleaseUnmatchedInput(K8sModel):
    """JOB-26: take the Job's ownerReference (and the tracking finalizer) off Pods that stopped matching."""

    namespace: str
    job_uid: str
    pods: dict[str, str]  # name -> uid (the patch's uid precondition)


class DeletePodsInput(K8sModel):
    namespace: str
    pods: list[str]
    release: bool = False


class PodsResult(K8sModel):
    names: list[str] = Field(default_factory=list)
    gone: bool = False
    stale: bool = False  # a status write's resourceVersion precondition failed
    resource_version: str = ""  # after a successful status write
    pods_rv: int = 0  # JOB-93: the newest resourceVersion the Pod writes left


# -- activities (implemented by activities/job.py) ----------------------------------------------


@declare_activity
def observe_job(inp: ObserveJobInput) -> JobSnapshot:
    """GET the Job and read its Pods (the worker's watch, JOB-93, or a LIST), claimed as upstream claims them
    (JOB-25), as one snapshot bounded by one sync's work (JOB-92)."""
    raise NotImplementedError


@declare_activity
def write_job_status(inp: WriteStatusInput) -> PodsResult:
    """Replace the controller-owned status fields (tracking steps 1 and 3)."""
    raise NotImplementedError


@declare_activity
def create_job_pods(inp: CreatePodsInput) -> CreatePodsResult:
    """Create Pods in slow-start batches of 1, 2, 4, … (JOB-22); stop after a batch with an error."""
    raise NotImplementedError


@declare_activity
def release_job_pods(inp: ReleaseInput) -> PodsResult:
    """Tracking step 2: remove the tracking finalizer from each Pod (404 counts as done, JOB-32)."""
    raise NotImplementedError


@declare_activity
def release_unmatched_job_pods(inp: ReleaseUnmatchedInput) -> PodsResult:
    """JOB-26: release Pods whose labels stopped matching, as upstream's ``ReleasePod``."""
    raise NotImplementedError


@declare_activity
def read_job_dependencies(inp: DependenciesInput) -> Dependencies:
    """JOB-AFTER: GET each Job the Job waits for: its uid and how it ended, if it has."""
    raise NotImplementedError


@declare_activity
def find_job_cycle(inp: CycleInput) -> Cycle:
    """JOB-AFTER: follow ``after`` through the Jobs that have not begun, for the shortest way back to the Job."""
    raise NotImplementedError


@declare_activity
def delete_job_pods(inp: DeletePodsInput) -> PodsResult:
    """Delete Pods; with ``release`` the finalizer goes first so they are never counted (JOB-17)."""
    raise NotImplementedError
