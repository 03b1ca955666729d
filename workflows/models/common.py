"""What every controller's contract shares: the Kubernetes subset models and object references.

Layer: workflows (pure; imported by workflows/, activities/ and worker/). The subset models read
only the fields batchd uses, and ignore unknown ones, so any server version parses. Inputs and
results of workflows, signals, updates and activities are frozen models, one in and one out (the
CronJob workflow's start argument, which the workflow empties, is the one exception); a new field
only ever comes with a default, so recorded histories keep decoding.

Each activity is declared once, in its controller's contract module, with
:func:`declare_activity`; activities/contract.py holds the implementing side.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, ClassVar, Literal, Self, TypeVar

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from temporalio import activity

#: The largest integer the API's own fields hold; a Pod TTL label beyond it is refused.
INT64_MAX = 2**63 - 1
#: The largest int32, the API's type for counts.
MAX_INT32 = 2**31 - 1


#: The wire format of every model here: camelCase, unknown fields ignored.
WIRE = ConfigDict(
    extra="ignore",
    populate_by_name=True,
    alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
)


class K8sModel(BaseModel):
    """Base of the Kubernetes subset models: camelCase on the wire, unknown fields ignored.

    Every instance shares its set of fields set (pydantic's ``model_fields_set``) with every other
    model whose set holds the same names. pydantic gives each instance a set of its own, which for a
    model of a dozen fields takes more memory than the model's values, and a worker caches thousands
    of workflows that each hold several models (docs/benchmarks.md). The models are frozen, so
    nothing adds to a set after validation; a copy with changes gets a set of its own from pydantic,
    which is then swapped for the shared one.
    """

    model_config = ConfigDict(frozen=True, **WIRE)

    def model_post_init(self, context: Any, /) -> None:
        _share_fields_set(self)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        _share_fields_set(copied)
        return copied


class Observation(K8sModel):
    """What a controller's workflow is told of its object, and the key that suppresses repeats.

    :meth:`decision_key` reads every field but those named in ``NOT_DECIDED``, so a field a new
    feature adds is in the key by default: the bridge sends an observation only when the key
    changed, and a field the key left out would never reach the workflow.
    """

    #: the fields no decision reads (a resourceVersion; what the workflow itself writes)
    NOT_DECIDED: ClassVar[frozenset[str]] = frozenset({"resource_version"})
    #: fields added after keys were recorded in histories (a TTL workflow's memo holds the key it
    #: was started with, and compares): while None, they leave the key as it was before them
    ADDED: ClassVar[frozenset[str]] = frozenset()

    def decision_key(self) -> str:
        """Every field a decision reads, as a short digest: equal keys lead to equal decisions."""
        unset = {name for name in self.ADDED if getattr(self, name) is None}
        fields = self.model_dump(mode="json", exclude=set(self.NOT_DECIDED) | unset)
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


#: One set object per distinct set of field names (see K8sModel); a handful per model class.
_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


def _share_fields_set(model: BaseModel) -> None:
    if not model.model_config.get("frozen"):
        return  # pydantic adds to the set of a model that can change
    names = model.__pydantic_fields_set__
    shared = _FIELDS_SETS.setdefault(frozenset(names), names)
    if shared is not names:
        object.__setattr__(model, "__pydantic_fields_set__", shared)


class OwnerReference(K8sModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(K8sModel):
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


def controller_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The owner reference with ``controller: true`` of a raw object's metadata, if any
    (:meth:`ObjectMeta.controller_ref` for a parsed one)."""
    return next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)


class Condition(K8sModel):
    type: str
    status: str
    last_transition_time: datetime | None = None
    reason: str | None = None
    message: str | None = None


#: The condition types that end a Job when their status is "True" (TTL-2, CJ-48, JOB-75, JOB-76).
COMPLETE, FAILED = "Complete", "Failed"


def finished_condition(conditions: Iterable[Condition]) -> Condition | None:
    """The condition that says a Job has finished, or None while it has not.

    A Job has finished when a ``Complete`` or ``Failed`` condition has status ``"True"``
    (TTL-2); ``FailureTarget`` and ``SuccessCriteriaMet`` only announce it. Of several, the first
    in list order counts: its type is the outcome and its ``lastTransitionTime`` the finish time
    (TTL-3, CJ-48). The TTL decision, the CronJob's Job summaries, the Job controller and the
    bridge all ask this one question.
    """
    return next((c for c in conditions if c.type in (COMPLETE, FAILED) and c.status == "True"), None)


class JobSpec(K8sModel):
    ttl_seconds_after_finished: int | None = None
    managed_by: str | None = None
    suspend: bool | None = None


class JobStatus(K8sModel):
    conditions: list[Condition] = Field(default_factory=list)


class Job(K8sModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus = Field(default_factory=JobStatus)


class ContainerStateTerminated(K8sModel):
    exit_code: int | None = None
    finished_at: datetime | None = None


class ContainerState(K8sModel):
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(K8sModel):
    name: str = ""
    state: ContainerState = Field(default_factory=ContainerState)


class PodSpec(K8sModel):
    restart_policy: str | None = None


#: The phases a Pod never leaves: it has finished.
POD_FINISHED_PHASES = ("Succeeded", "Failed")


class PodStatus(K8sModel):
    phase: str | None = None
    container_statuses: list[ContainerStatus] = Field(default_factory=list)
    init_container_statuses: list[ContainerStatus] = Field(default_factory=list)


class Pod(K8sModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)


class ObjectRef(K8sModel):
    """Names one object instance; ``uid`` pins it, so a recreated namesake is another object."""

    kind: Literal["Job", "Pod", "CronJob"]
    namespace: str
    name: str
    uid: str

    def key(self) -> str:
        """``namespace/name``, as logs and Events write it."""
        return f"{self.namespace}/{self.name}"


#: FAIL-CLOSED: what a value batchd cannot read does to the object that carries it: ``hold`` for an
#: annotation that restricts whether, when or how often something runs, or when it is deleted;
#: ``ignore`` (with a Warning) for one that only adds, where holding would be the less safe choice
Unreadable = Literal["hold", "ignore"]
#: FAIL-CLOSED: the reason of the Warning Event that names an annotation batchd cannot read
INVALID_ANNOTATION = "InvalidAnnotation"

#: FAIL-CLOSED: the grammar of the values, which deploy/policy/admission-policy.yaml's CEL checks too
#: (tests/e2e/test_admission_policy.py puts one table through both): a count is 1 to 10 digits, a
#: TTL 1 to 19; a time is RFC 3339 with an upper-case T and an offset, in the years 1970 to 2999
_COUNT = re.compile(r"[0-9]{1,10}")
_SECONDS = re.compile(r"[0-9]{1,19}")
_INSTANT = re.compile(r"(19[7-9][0-9]|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3])"
                      r":[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def parse_instant(raw: str) -> datetime | None:
    """A time as batchd's annotations write it (``_INSTANT``, on a day the month has); None if it is not one."""
    if _INSTANT.fullmatch(raw):
        try:
            return datetime.fromisoformat(raw)
        except ValueError:
            pass  # a day the month does not have
    return None


class Annotations:
    """batchd's annotations on one object (a CronJob, a Job), read one by one; what cannot be read
    is collected by what it does (FAIL-CLOSED): ``held`` for an annotation of ``effects`` marked
    ``hold``, ``ignored`` for the others.

    The object's controller records each as a Warning Event ``InvalidAnnotation``; a held object
    runs nothing and is not deleted until the annotation is fixed or removed.
    """

    def __init__(self, annotations: Mapping[str, str], effects: Mapping[str, Unreadable]) -> None:
        self.annotations = annotations
        self.effects = effects
        self.held: list[str] = []
        self.ignored: list[str] = []

    def refuse(self, name: str, why: str, otherwise: str = "ignored") -> None:
        """``name``'s value cannot be read, because ``why``; ``otherwise`` says what an ignored one means."""
        raw = self.annotations.get(name, "")
        # both bounded: the message rides in the observation, a signal and the workflow's state
        why = why if len(why) <= 500 else why[:500] + "…"
        text = f"annotation {name}={raw[:200]!r}{'…' if len(raw) > 200 else ''} {why}"
        if self.effects[name] == "hold":
            self.held.append(text)
        else:
            self.ignored.append(f"{text}; {otherwise}")

    def number(self, name: str, least: int, most: int) -> int | None:
        raw = self.annotations.get(name)
        if raw is None:
            return None
        if (_SECONDS if most > MAX_INT32 else _COUNT).fullmatch(raw) and least <= int(raw) <= most:
            return int(raw)
        self.refuse(name, f"must be an integer from {least} to {most}")
        return None

    def instant(self, name: str) -> datetime | None:
        raw = self.annotations.get(name)
        if raw is None:
            return None
        if (at := parse_instant(raw)) is not None:
            return at
        self.refuse(name, "must be an RFC 3339 time with an offset, in the years 1970 to 2999 "
                          "(2026-01-01T00:00:00Z)")
        return None

    def choice(self, name: str, options: tuple[str, ...], otherwise: str = "ignored") -> str:
        """One of ``options``; the first when the annotation is absent or says something else."""
        raw = self.annotations.get(name, options[0])
        if raw not in options:
            self.refuse(name, f"must be {' or '.join(repr(o) for o in options)}", otherwise)
            return options[0]
        return raw

    def label(self, name: str) -> str | None:
        """A DNS label (RFC 1123), as Kubernetes names a Service."""
        raw = self.annotations.get(name)
        if raw is None or _DNS_LABEL.fullmatch(raw):
            return raw
        self.refuse(name, "must be a DNS label (lower case letters, digits and '-', at most 63)")
        return None

    def names(self, name: str, most: int) -> list[str]:
        """Object names (DNS subdomains) separated by commas, with blanks (space, tab, new line) around them."""
        raw = self.annotations.get(name, "")
        found = [n.strip(" \t\n") for n in raw.split(",")]
        found = [n for n in found if n]
        if len(found) > most or any(not _DNS_SUBDOMAIN.fullmatch(n) for n in found):
            self.refuse(name, f"must be at most {most} names separated by commas")
            return []
        return found

    def problem(self) -> str | None:
        """The ignored annotations, and why (a Warning ``InvalidAnnotation``)."""
        return "; ".join(self.ignored) or None

    def hold(self, consequence: str) -> str | None:
        """The annotations that hold the object, and ``consequence``; None if nothing holds it."""
        if not self.held:
            return None
        return f"{'; '.join(self.held)}; {consequence} until {'it is' if len(self.held) == 1 else 'they are'} " \
               "fixed or removed"


class ObserveInput(K8sModel):
    """Read ``ref`` fresh."""

    ref: ObjectRef


EventType = Literal["Normal", "Warning"]


class EventInput(K8sModel):
    """A Kubernetes Event on an object; identical Events are aggregated into one with a count."""

    ref: ObjectRef
    type: EventType
    reason: str
    message: str
    component: str


Declaration = TypeVar("Declaration", bound=Callable[..., object])

#: The attribute that marks an activity declaration, for the worker's check (activities/contract.py).
DECLARED = "__batchd_activity_declaration__"


def declare_activity(fn: Declaration) -> Declaration:
    """Declare an activity: its type name is the function's name, its argument and result its annotations.

    Workflows pass the declaration to ``workflow.execute_activity`` (or ``execute_local_activity``),
    which takes the name and the result type from it; the body never runs. An activity method
    implements it with ``@implements(declaration)`` (activities/contract.py), and the worker refuses
    to start unless every declaration has exactly one implementation, with the same types.
    The name is the activity type recorded in workflow histories: renaming a declaration breaks
    their replay.
    """
    setattr(fn, DECLARED, True)
    return activity.defn(fn)


@declare_activity
def record_event(inp: EventInput) -> None:
    """Record (or aggregate) a Kubernetes Event on ``inp.ref``; every workflow uses it, best effort."""
    raise NotImplementedError


#: NOTIFY-EVENTS: the CloudEvent types batchd sends to ``batchd worker --cloudevents-sink``
JOB_COMPLETE_EVENT = "io.batchd.job.complete"
JOB_FAILED_EVENT = "io.batchd.job.failed"
CRONJOB_MISSED_EVENT = "io.batchd.cronjob.missed"
CRONJOB_SUSPENDED_EVENT = "io.batchd.cronjob.suspended"


class CloudEvent(K8sModel):
    """NOTIFY-EVENTS: one occurrence, as a CloudEvent 1.0 (structured JSON). ``id`` is the same however
    often it is sent, so a receiver drops repeats."""

    id: str
    type: str
    source: str  # the object's API path
    subject: str  # its name
    time: datetime
    data: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def about(cls, ref: ObjectRef, type_: str, occurrence: str, time: datetime, data: dict[str, Any]) -> CloudEvent:
        """An event of ``ref``'s; ``occurrence`` tells it from the object's other events (its outcome, a time)."""
        plural = {"Job": "jobs", "CronJob": "cronjobs", "Pod": "pods"}[ref.kind]
        group = "/api/v1" if ref.kind == "Pod" else "/apis/batch/v1"
        return cls(id=f"{ref.uid}/{occurrence}", type=type_, source=f"{group}/namespaces/{ref.namespace}/{plural}/{ref.name}",
                   subject=ref.name, time=time, data={"namespace": ref.namespace, "name": ref.name, "uid": ref.uid, **data})

    def body(self) -> dict[str, Any]:
        """The structured-mode JSON body."""
        return {"specversion": "1.0", "id": self.id, "type": self.type, "source": self.source,
                "subject": self.subject, "time": self.time.isoformat().replace("+00:00", "Z"),
                "datacontenttype": "application/json", "data": self.data}


@declare_activity
def deliver_cloudevent(inp: CloudEvent) -> None:
    """NOTIFY-EVENTS: POST ``inp`` to the worker's sink (none set: nothing to do); failures are retried."""
    raise NotImplementedError
