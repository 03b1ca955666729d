"""Operator commands of the ``batchd`` CLI: ``ttl …``, ``describe job|cronjob``, ``cronjob …``.

Layer: worker. Called by worker/cli.py, which only parses flags and exits with the code
:func:`main` (Temporal) or :func:`kube_main` (Kubernetes) returns. Most commands read Temporal —
visibility (search attributes, memos), workflow descriptions, histories, queries — or send
Updates. ``ttl hold|release|extend`` write the object in Kubernetes instead: the annotation or
field is the source of truth any ``kubectl`` can also set, and the bridge carries the change to
the workflow. The identities relied on are batchd's public contract (workflows/identity.py).

Exit codes: 0 success, 1 failure (unreachable server, failed update or query, timeout, refused
write), 3 no such object or workflow. Usage errors (2) are click's, raised before any client exists.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.cronjob import build_job
from kube.client import Kube
from kube.errors import Conflict, KubeError, NotFound
from workflows.decisions import cronjob as decide
from workflows.identity import (
    EXPIRES_AT,
    K8S_KIND,
    K8S_NAME,
    K8S_NAMESPACE,
    K8S_UID,
    SEARCH_ATTRIBUTES,
    TTL_HOLD_MEMO,
    cronjob_workflow_id,
    group_workflow_id,
)
from workflows.models.common import INT64_MAX
from workflows.models.cronjob import (
    BACKFILL_ANNOTATION,
    BACKFILL_TAKEN_ANNOTATION,
    CreateJobInput,
    CronJob,
    CronJobObservation,
    parse_backfill,
)
from workflows.models.job import TTL_AFTER_FAILURE_ANNOTATION, TTL_AFTER_SUCCESS_ANNOTATION
from workflows.models.ttl import POD_TTL_LABEL, TTL_HOLD_ANNOTATION, parse_ttl
from workflows.times import NEVER, iso

#: Exit codes (the CLI's contract; click itself exits 2 on usage errors).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3

TTL_WORKFLOW_TYPE = "TTLAfterFinished"
_BATCHD_ATTRIBUTES = {k.name for k in SEARCH_ATTRIBUTES}
#: Updates the CronJob workflow (workflow type ``CronJob``) accepts.
CRONJOB_UPDATES = ("trigger", "suspend", "resume", "backfill")

# A Kubernetes namespace is a DNS-1123 label; names of Jobs and CronJobs are DNS-1123 subdomains.
# Checking them here also keeps every value we splice into a visibility query free of quotes.
_NS = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class NotFoundError(Exception):
    """The object has no workflow (exit code 3)."""


class OpError(Exception):
    """A command failed for a reason worth one line on stderr (exit code 1)."""


class RefusedError(OpError):
    """The workflow refused the request as given, e.g. a backfill of over 1,000 times (exit code 2)."""


def parse_ref(value: str) -> tuple[str, str]:
    """Split ``NS/NAME`` and check both parts are valid Kubernetes names.

    Args:
        value: the argument as typed, e.g. ``team-a/etl-42``.

    Returns:
        ``(namespace, name)``.

    Raises:
        ValueError: the value is not ``NS/NAME`` or a part is not a valid name.
    """
    ns, sep, name = value.partition("/")
    if not sep or not _NS.match(ns) or not _NAME.match(name):
        raise ValueError(f"expected NAMESPACE/NAME (lowercase DNS names), got {value!r}")
    return ns, name


def is_namespace(value: str) -> bool:
    """Whether ``value`` is a valid Kubernetes namespace name (a DNS-1123 label)."""
    return bool(_NS.match(value))


def _failed(err: NotFoundError | OpError) -> tuple[int, str, str]:
    """The exit code and stderr line of a command's own failure, for :func:`main` and :func:`kube_main`."""
    if isinstance(err, NotFoundError):
        return EXIT_NOT_FOUND, "", str(err)
    if isinstance(err, RefusedError):
        return EXIT_USAGE, "", str(err)
    return EXIT_FAILURE, "", str(err)


async def main(connect: Callable[[], Awaitable[Client]], command: Callable[[Client], Awaitable[str]],
               *, timeout: float | None = None) -> tuple[int, str, str]:
    """Connect, run one command and map its outcome to an exit code.

    Args:
        connect: opens the Temporal client (worker.temporal.connect with the CLI's settings).
        command: the operation; returns the text to print on stdout.
        timeout: overall seconds before giving up (an Update waits for a worker to run it).

    Returns:
        ``(exit code, stdout text, stderr text)``.
    """
    try:
        client = await connect()
    except Exception as err:  # the SDK raises RuntimeError for every connection failure
        return EXIT_FAILURE, "", f"cannot connect to Temporal: {err}"
    try:
        return EXIT_OK, await asyncio.wait_for(command(client), timeout), ""
    except (NotFoundError, OpError) as err:
        return _failed(err)
    except TimeoutError:
        return EXIT_FAILURE, "", f"no answer within {timeout:g}s (is a batchd worker running on the task queue?)"
    except RPCError as err:
        return EXIT_FAILURE, "", f"Temporal: {err.status.name}: {err.message}"


# -- ttl list ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingExpiry:
    """One running TTL workflow as visibility shows it."""

    kind: str
    namespace: str
    name: str
    uid: str
    expires_at: datetime | None
    workflow_id: str
    run_id: str
    hold: str | None = None  # the reason, when the object is held (TTL-HOLD)


def ttl_query(namespace: str | None) -> str:
    """The visibility query of running TTL workflows, optionally of one Kubernetes namespace."""
    query = f'WorkflowType = "{TTL_WORKFLOW_TYPE}" AND ExecutionStatus = "Running"'
    if namespace:
        query += f' AND {K8S_NAMESPACE.name} = "{namespace}"'
    return query


async def pending_expiries(client: Client, *, namespace: str | None = None, limit: int | None = None) -> list[PendingExpiry]:
    """Running TTL workflows, soonest expiry first (those without an expiry last).

    SQL visibility cannot ORDER BY a custom attribute, so every running TTL workflow of the
    scope is listed and sorted here; ``limit`` cuts the sorted list, so it is the N soonest.
    """
    rows = [await _expiry(ex) async for ex in client.list_workflows(ttl_query(namespace))]
    far = datetime.max.replace(tzinfo=UTC)
    rows.sort(key=lambda r: (r.expires_at or far, r.namespace, r.name))
    return rows[:limit] if limit is not None else rows


async def _expiry(ex: WorkflowExecution) -> PendingExpiry:
    sa = ex.typed_search_attributes
    return PendingExpiry(
        kind=sa.get(K8S_KIND) or "", namespace=sa.get(K8S_NAMESPACE) or "", name=sa.get(K8S_NAME) or "",
        uid=sa.get(K8S_UID) or "", expires_at=sa.get(EXPIRES_AT), workflow_id=ex.id, run_id=ex.run_id,
        hold=await ex.memo_value(TTL_HOLD_MEMO, None),
    )


async def ttl_list(client: Client, *, namespace: str | None, limit: int | None, output: str,
                   now: datetime | None = None) -> str:
    """``batchd ttl list``: a table (or JSON list) of pending TTL expirations, soonest first."""
    now = now or datetime.now(UTC)
    rows = await pending_expiries(client, namespace=namespace, limit=limit)
    if output == "json":
        return _json([{
            "kind": r.kind, "namespace": r.namespace, "name": r.name, "uid": r.uid,
            "expiresAt": iso(r.expires_at),
            "inSeconds": round((r.expires_at - now).total_seconds(), 3) if r.expires_at and r.expires_at < NEVER else None,
            "held": r.hold is not None, "holdReason": r.hold,
            "workflowId": r.workflow_id, "runId": r.run_id,
        } for r in rows])
    return table(["KIND", "NAMESPACE", "NAME", "UID", "EXPIRES", "IN", "HELD", "WORKFLOW ID"], [
        [r.kind, r.namespace, r.name, r.uid, iso(r.expires_at) or "-",
         _until(r.expires_at, now), "-" if r.hold is None else (r.hold or "yes"), r.workflow_id] for r in rows
    ])


# -- ttl hold, release, extend: writes to Kubernetes ---------------------------------------

#: The largest ``spec.ttlSecondsAfterFinished`` the API server takes (the field is int32).
INT32_MAX = 2**31 - 1
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str) -> int:
    """Seconds in a duration such as ``90s``, ``2h`` or ``1h30m`` (hours, minutes, seconds).

    Raises:
        ValueError: not such a duration, or zero.
    """
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"expected a duration such as 90s, 2h or 1h30m, got {text!r}")
    h, m, s = (int(g or 0) for g in match.groups())
    if (seconds := h * 3600 + m * 60 + s) == 0:
        raise ValueError("the duration must be more than 0s")
    return seconds


def kube_main(command: Callable[[], str]) -> tuple[int, str, str]:
    """Run one Kubernetes-side command and map its outcome to an exit code, as :func:`main` does."""
    try:
        return EXIT_OK, command(), ""
    except (NotFoundError, OpError) as err:
        return _failed(err)
    except KubeError as err:
        return EXIT_FAILURE, "", f"Kubernetes: {err}"


def ttl_hold(kube: Kube, kind: str, namespace: str, name: str, reason: str) -> str:
    """``batchd ttl hold``: set ``batchd.io/ttl-hold`` (its value is the reason)."""
    _patch_annotations(kube, kind, namespace, name, {TTL_HOLD_ANNOTATION: reason})
    return f"{kind} {namespace}/{name} held: {reason}"


def ttl_release(kube: Kube, kind: str, namespace: str, name: str) -> str:
    """``batchd ttl release``: remove ``batchd.io/ttl-hold``; an expired object is then deleted at once."""
    obj = _get(kube, kind, namespace, name)
    if TTL_HOLD_ANNOTATION not in ((obj.get("metadata") or {}).get("annotations") or {}):
        return f"{kind} {namespace}/{name} was not held"
    _patch_annotations(kube, kind, namespace, name, {TTL_HOLD_ANNOTATION: None})
    return f"{kind} {namespace}/{name} released"


def ttl_extend(kube: Kube, kind: str, namespace: str, name: str, seconds: int, *, attempts: int = 5) -> str:
    """``batchd ttl extend``: raise every TTL the object carries by ``seconds``.

    A Job's ``spec.ttlSecondsAfterFinished`` and its per-outcome annotations (so the one in
    force rises, whichever outcome it has or will have); a Pod's TTL label. The write carries
    the resourceVersion it was computed from, and is computed again on a conflict.
    """
    for _ in range(attempts):
        obj = _get(kube, kind, namespace, name)
        meta = obj.get("metadata") or {}
        changes: list[str] = []
        patch: dict[str, Any] = {"metadata": {"resourceVersion": meta.get("resourceVersion")}}
        keys: tuple[str, ...]
        if kind == "Job":
            ttl = (obj.get("spec") or {}).get("ttlSecondsAfterFinished")
            if ttl is not None:
                if ttl + seconds > INT32_MAX:
                    raise OpError(f"spec.ttlSecondsAfterFinished would be {ttl + seconds}, more than the field "
                                  f"holds ({INT32_MAX})")
                patch["spec"] = {"ttlSecondsAfterFinished": ttl + seconds}
                changes.append(f"spec.ttlSecondsAfterFinished {ttl} -> {ttl + seconds}")
            keys = (TTL_AFTER_SUCCESS_ANNOTATION, TTL_AFTER_FAILURE_ANNOTATION)
            where, texts = "annotations", meta.get("annotations") or {}
        else:
            keys, where, texts = (POD_TTL_LABEL,), "labels", meta.get("labels") or {}
        for key in keys:
            if (raw := texts.get(key)) is None:
                continue
            current, problem = parse_ttl(raw, f"{where[:-1]} {key}")
            if current is None or current + seconds > INT64_MAX:
                raise OpError(problem or f"{where[:-1]} {key}={raw!r} would be more than {INT64_MAX}")
            patch["metadata"].setdefault(where, {})[key] = str(current + seconds)
            changes.append(f"{key} {raw} -> {current + seconds}")
        if not changes:
            raise OpError(f"{kind} {namespace}/{name} has no TTL to extend")
        try:
            kube.patch(kind, namespace, name, patch)
        except Conflict:
            continue  # written meanwhile: compute again from the new version
        except NotFound:
            raise NotFoundError(f"{kind} {namespace}/{name} not found") from None
        return f"{kind} {namespace}/{name} TTL extended by {seconds}s: " + ", ".join(changes)
    raise OpError(f"{kind} {namespace}/{name} kept changing; TTL not extended (try again)")


def _get(kube: Kube, kind: str, namespace: str, name: str) -> dict[str, Any]:
    obj = kube.get(kind, namespace, name)
    if obj is None:
        raise NotFoundError(f"{kind} {namespace}/{name} not found")
    return obj


def _patch_annotations(kube: Kube, kind: str, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
    try:
        kube.patch(kind, namespace, name, {"metadata": {"annotations": annotations}})
    except NotFound:
        raise NotFoundError(f"{kind} {namespace}/{name} not found") from None


# -- the Kubernetes door (docs/operations.md, "Who may do what") ------------------------------

#: ``--via kubernetes``: how often a backfill reads the CronJob while it waits for batchd to take it
TAKEN_POLL = 0.5


def cronjob_kube(kube: Kube, namespace: str, name: str, update: str, *, output: str, arg: dict[str, Any],
                 timeout: float) -> str:
    """``batchd cronjob trigger|suspend|resume|backfill --via kubernetes``: the same actions as the
    Updates, done as writes to the CronJob and its Jobs with the caller's kubeconfig, so the
    namespace's RBAC decides who may: ``create`` ``jobs`` to trigger, ``patch`` ``cronjobs`` for the rest.

    Raises:
        NotFoundError: no such CronJob.
        RefusedError: the backfill's range does not read, or batchd refused it (``InvalidBackfill``).
        OpError: batchd did not take the backfill within ``timeout`` seconds.
        KubeError: the API server refused a request (403 without the RBAC rule).
    """
    assert update in CRONJOB_UPDATES
    cj = _get(kube, "CronJob", namespace, name)
    if update == "backfill":
        return _backfill_via_kube(kube, cj, arg, output=output, timeout=timeout)
    state = decide.new_state(CronJobObservation.of(CronJob.model_validate(cj)))
    now = datetime.now(UTC)
    if update == "trigger":
        run = decide.trigger(state, now)
        job = build_job(cj, CreateJobInput(namespace=namespace, cronjob_name=name, cronjob_uid=state.observation.uid,
                                           job_name=run.name, scheduled=now, manual=True))
        # as kubectl create job --from makes it: blocking the CronJob's deletion would need update on cronjobs/finalizers
        del job["metadata"]["ownerReferences"][0]["blockOwnerDeletion"]
        kube.create("Job", namespace, job)
        result: dict[str, Any] = {"jobName": run.name}
    else:
        patch = decide.suspend_change(state, update == "suspend", arg.get("reason"), now)
        if patch is not None:
            kube.patch("CronJob", namespace, name, patch.patch())
        result = {"suspended": update == "suspend", "changed": patch is not None}
    return _render_mapping({"cronJob": f"{namespace}/{name}", "via": "kubernetes", "update": update,
                            "result": result}, output)


def _backfill_via_kube(kube: Kube, cj: dict[str, Any], arg: dict[str, Any], *, output: str, timeout: float) -> str:
    """CJ-BACKFILL-DOOR: set ``batchd.io/backfill``, wait until batchd took it, and print its Event.

    A value taken before is removed first, and set again once batchd saw it go, so the same range
    asked twice runs twice, as the Update does (the second finds its Jobs existing).
    """
    meta = cj["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    text = f"{arg['from']}/{arg['to']}" + (" one-at-a-time" if arg.get("oneAtATime") else "")
    if isinstance(why := parse_backfill(text), str):
        raise RefusedError(f"{BACKFILL_ANNOTATION}={text!r} {why}")
    deadline = time.monotonic() + timeout
    notes = meta.get("annotations") or {}
    if notes.get(BACKFILL_ANNOTATION) == text:
        _patch_annotations(kube, "CronJob", namespace, name, {BACKFILL_ANNOTATION: None})
        _until_taken(kube, namespace, name, None, deadline)
    asked = f"{BACKFILL_ANNOTATION}={text}"
    before = _backfill_events(kube, namespace, uid, asked)
    _patch_annotations(kube, "CronJob", namespace, name, {BACKFILL_ANNOTATION: text})
    _until_taken(kube, namespace, name, text, deadline)
    while True:  # recorded right after the status write that says it was taken: a new Event, or a count gone up
        said = [e for key, e in _backfill_events(kube, namespace, uid, asked).items()
                if key not in before or before[key].get("count") != e.get("count")]
        if said or time.monotonic() > deadline:
            break
        time.sleep(TAKEN_POLL)
    if not said:
        raise OpError(f"batchd took {asked} but recorded no Event about it within the timeout")
    event = said[-1]
    if event["reason"] == "InvalidBackfill":
        raise RefusedError(f"{event['message']} (CronJob {namespace}/{name})")
    doc = {"cronJob": f"{namespace}/{name}", "via": "kubernetes", "update": "backfill", "event": event["reason"],
           "message": event["message"]}
    return _json(doc) if output == "json" else event["message"]


def _backfill_events(kube: Kube, namespace: str, uid: str, asked: str) -> dict[str, dict[str, Any]]:
    """The CronJob's Events about the backfill ``asked``, by name (an Event's count rises when it recurs)."""
    events = kube.list("Event", namespace, field_selector=f"involvedObject.uid={uid}")["items"]
    return {e["metadata"]["name"]: e for e in events
            if e.get("reason") in ("Backfilled", "InvalidBackfill") and (e.get("message") or "").startswith(asked)}


def _until_taken(kube: Kube, namespace: str, name: str, value: str | None, deadline: float) -> None:
    """Wait until ``batchd.io/backfill-taken`` says ``value`` (None: absent)."""
    while True:
        notes = (_get(kube, "CronJob", namespace, name)["metadata"].get("annotations") or {})
        if notes.get(BACKFILL_TAKEN_ANNOTATION) == value:
            return
        if time.monotonic() > deadline:
            raise OpError(f"batchd did not take {BACKFILL_ANNOTATION} on CronJob {namespace}/{name} in time "
                          f"({BACKFILL_TAKEN_ANNOTATION} says {notes.get(BACKFILL_TAKEN_ANNOTATION)!r}): "
                          "is a batchd worker running for this namespace?")
        time.sleep(TAKEN_POLL)


# -- describe ------------------------------------------------------------------------------


async def describe_object(client: Client, kind: str, namespace: str, name: str, *, output: str,
                          now: datetime | None = None, max_workflows: int = 10) -> str:
    """``batchd describe job|cronjob NS/NAME``: every workflow of the object with its timers.

    Workflows are found by the search attributes the bridge and workflows set (``K8sKind``,
    ``K8sNamespace``, ``K8sName``); for a CronJob the deterministic ID ``cronjob/{ns}/{name}``
    is also tried, so a workflow whose attributes are not yet visible is still found.

    Raises:
        NotFoundError: no workflow has ever existed for the object.
    """
    now = now or datetime.now(UTC)
    query = (f'{K8S_KIND.name} = "{kind}" AND {K8S_NAMESPACE.name} = "{namespace}" '
             f'AND {K8S_NAME.name} = "{name}"')
    found = [ex async for ex in client.list_workflows(query, limit=max_workflows)]
    handles = [client.get_workflow_handle(ex.id, run_id=ex.run_id) for ex in found]
    if kind == "CronJob" and not any(ex.id == cronjob_workflow_id(namespace, name) for ex in found):
        handles.append(client.get_workflow_handle(cronjob_workflow_id(namespace, name)))
    details = [d for d in await asyncio.gather(*(workflow_details(client, h, now) for h in handles)) if d]
    if not details:
        raise NotFoundError(f"no batchd workflow for {kind} {namespace}/{name}")
    # Running first, then the most recently started.
    details.sort(key=lambda d: (d["status"] != "RUNNING", -_epoch(d["startTime"])))
    # FAIL-CLOSED: what holds the object, as its running workflows see it
    held = next((d["describe"]["held"] for d in details if isinstance(d["describe"], dict) and d["describe"].get("held")),
                None)
    doc = {"kind": kind, "namespace": namespace, "name": name, "held": held, "workflows": details}
    return _json(doc) if output == "json" else render_describe(doc)


async def workflow_details(client: Client, handle: WorkflowHandle[Any, Any], now: datetime) -> dict[str, Any] | None:
    """Status, ``describe`` query, pending timers and activities of one run; None if it does not exist."""
    try:
        desc = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    running = desc.status == WorkflowExecutionStatus.RUNNING
    handle = client.get_workflow_handle(desc.id, run_id=desc.run_id)  # pin the run we described
    state: Any = None
    state_error: str | None = None
    if running:  # a closed run answers queries only by replay on a worker: not worth the wait
        try:
            state = await handle.query("describe", rpc_timeout=timedelta(seconds=10))
        except (WorkflowQueryFailedError, WorkflowQueryRejectedError, RPCError) as err:
            state_error = str(err)
    timers = await pending_timers(client, handle, now) if running else []
    return {
        "workflowId": desc.id, "runId": desc.run_id, "type": desc.workflow_type,
        "status": desc.status.name if desc.status else "UNKNOWN", "taskQueue": desc.task_queue,
        "startTime": iso(desc.start_time), "closeTime": iso(desc.close_time),
        "searchAttributes": {k.name: _jsonable(v) for k, v in _pairs(desc.typed_search_attributes)
                             if k.name in _BATCHD_ATTRIBUTES},
        "describe": state, "describeError": state_error,
        "pendingTimers": timers,
        "pendingActivities": [_activity(a, now) for a in desc.raw_description.pending_activities],
    }


async def pending_timers(client: Client, handle: WorkflowHandle[Any, Any], now: datetime) -> list[dict[str, Any]]:
    """Timers started and neither fired nor canceled, from the run's history.

    ``DescribeWorkflowExecution`` has no timer section, so the history is the only source:
    a TimerStarted event fires at its event time + ``start_to_fire_timeout``, and its summary
    (``user_metadata.summary``) says why the workflow waits.
    """
    started: dict[int, dict[str, Any]] = {}
    converter = client.data_converter.payload_converter
    async for ev in handle.fetch_history_events():
        if ev.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            attrs = ev.timer_started_event_attributes
            at = ev.event_time.ToDatetime(tzinfo=UTC)
            fires = at + attrs.start_to_fire_timeout.ToTimedelta()
            summary = (converter.from_payload(ev.user_metadata.summary, str)
                       if ev.HasField("user_metadata") and ev.user_metadata.HasField("summary") else "")
            started[ev.event_id] = {"timerId": attrs.timer_id, "summary": summary, "startedAt": iso(at),
                                    "firesAt": iso(fires), "inSeconds": round((fires - now).total_seconds(), 3)}
        elif ev.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            started.pop(ev.timer_fired_event_attributes.started_event_id, None)
        elif ev.event_type == EventType.EVENT_TYPE_TIMER_CANCELED:
            started.pop(ev.timer_canceled_event_attributes.started_event_id, None)
    return sorted(started.values(), key=lambda t: t["firesAt"])


def _activity(a: Any, now: datetime) -> dict[str, Any]:
    scheduled = a.scheduled_time.ToDatetime(tzinfo=UTC) if a.HasField("scheduled_time") else None
    return {
        "activityId": a.activity_id, "type": a.activity_type.name,
        "state": PendingActivityState.Name(a.state).removeprefix("PENDING_ACTIVITY_STATE_"),
        "attempt": a.attempt, "scheduledAt": iso(scheduled),
        "lastFailure": a.last_failure.message if a.HasField("last_failure") else None,
    }


def _label(key: str) -> str:
    """``nextScheduleTime`` → ``Next Schedule Time``, ``failuresInARow`` → ``Failures In A Row``,
    ``resource_version`` → ``Resource Version``, as ``kubectl describe`` labels fields."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", key).replace("_", " ").split()
    return " ".join(w[:1].upper() + w[1:] for w in words)


def _described(value: Any, indent: int) -> list[str]:
    """A state as ``kubectl describe`` prints an object: labelled lines, nested blocks indented,
    ``<none>`` for what is empty or unset."""
    pad = " " * indent
    if isinstance(value, dict):
        nested = {key for key, item in value.items()
                  if isinstance(item, dict) and item or isinstance(item, list) and any(isinstance(x, dict) for x in item)}
        # one value column for the block, at column 28 unless a label is longer
        width = max([28 - indent, *(len(_label(key)) + 2 for key in value if key not in nested)])
        lines: list[str] = []
        for key, item in value.items():
            if key in nested:
                lines += [f"{pad}{_label(key)}:", *_described(item, indent + 2)]
            else:
                lines.append(f"{pad}{_label(key) + ':':<{width}}{_scalar(item)}")
        return lines
    if isinstance(value, list):
        return [line for item in value for line in _block(item, indent)]
    return [f"{pad}{_scalar(value)}"]


def _block(item: Any, indent: int) -> list[str]:
    """One list entry: a dict as a block whose first line carries the dash."""
    lines = _described(item, indent + 2) if isinstance(item, dict) else [f"{' ' * (indent + 2)}{_scalar(item)}"]
    return [f"{' ' * indent}- {lines[0].lstrip()}", *lines[1:]] if lines else []


def _scalar(value: Any) -> str:
    if value is None or value == [] or value == {} or value == "":
        return "<none>"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ", ".join(_scalar(v) for v in value)
    return str(value)


def render_describe(doc: dict[str, Any]) -> str:
    """The human form of ``describe``: one block per workflow."""
    lines = [f"{doc['kind']} {doc['namespace']}/{doc['name']}: {len(doc['workflows'])} workflow(s)"]
    if doc.get("held"):
        lines.append(f"held: {doc['held']}")
    for wf in doc["workflows"]:
        fields = {"Type": wf["type"], "Status": wf["status"], "Run": wf["runId"], "Task queue": wf["taskQueue"],
                  "Started": wf["startTime"], "Closed": wf["closeTime"], **wf["searchAttributes"]}
        lines += ["", f"Workflow: {wf['workflowId']}"]
        lines += [f"  {key + ':':<15} {value}" for key, value in fields.items() if value is not None]
        if wf["describe"] is not None:
            lines += ["  State (query describe; -o json for the raw form):"] + _described(wf["describe"], 4)
        elif wf["describeError"]:
            lines.append(f"  State:          query describe failed: {wf['describeError']}")
        lines.append("  Pending timers:" + ("" if wf["pendingTimers"] else " none"))
        if wf["pendingTimers"]:
            rows = [[t["timerId"], t["firesAt"], humanize(timedelta(seconds=t["inSeconds"])), t["summary"]]
                    for t in wf["pendingTimers"]]
            lines += ["    " + line for line in table(["TIMER", "FIRES", "IN", "SUMMARY"], rows).splitlines()]
        lines.append("  Pending activities:" + ("" if wf["pendingActivities"] else " none"))
        if wf["pendingActivities"]:
            rows = [[a["activityId"], a["type"], a["state"], str(a["attempt"]), a["lastFailure"] or ""]
                    for a in wf["pendingActivities"]]
            lines += ["    " + line for line in
                      table(["ID", "TYPE", "STATE", "ATTEMPT", "LAST FAILURE"], rows).splitlines()]
    return "\n".join(lines)


# -- cronjob -------------------------------------------------------------------------------


async def cronjob_update(client: Client, namespace: str, name: str, update: str, *, output: str,
                         arg: dict[str, Any] | None = None) -> str:
    """``batchd cronjob trigger|suspend|resume|backfill``: send the Update with ``arg`` and print its result.

    Raises:
        NotFoundError: no running workflow ``cronjob/{ns}/{name}``.
        RefusedError: the workflow refused the input (``InvalidBackfill``).
        OpError: the workflow rejected or failed the update.
    """
    assert update in CRONJOB_UPDATES
    wid = cronjob_workflow_id(namespace, name)
    handle, update_id = client.get_workflow_handle(wid), f"batchd-cli-{uuid.uuid4()}"
    try:
        for attempt in range(UPDATE_ATTEMPTS):
            try:  # one id for every attempt: the server takes an update once, however often it is sent
                result = await handle.execute_update(update, arg or {}, id=update_id)
                break
            except RPCError as err:
                if not _not_ready(err) or attempt == UPDATE_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.25 * 2 ** attempt)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise NotFoundError(f"no running workflow {wid} ({err.message})") from None
        raise
    except WorkflowUpdateFailedError as err:
        if isinstance(err.cause, ApplicationError) and err.cause.type == "InvalidBackfill":
            raise RefusedError(f"{err.cause} ({wid})") from None
        raise OpError(f"{update} failed on {wid}: {_cause(err)}") from None
    if update == "backfill" and output != "json":
        return _backfill_table(result)
    return _render_mapping({"workflowId": wid, "update": update, "result": result}, output)


#: Tries of an update the server refused as not ready (0.25 s doubling between them: about 8 s).
UPDATE_ATTEMPTS = 6


def _not_ready(err: RPCError) -> bool:
    """The server refused an update because the workflow's task had just failed (``WorkflowNotReady``).

    A continue-as-new whose task meets a new signal fails once (UnhandledCommand) and is retried at
    once; an update that arrives in that moment is refused, never taken, so sending it again is safe.
    """
    return err.status == RPCStatusCode.FAILED_PRECONDITION and any(
        d.type_url.endswith("WorkflowNotReadyFailure") for d in err.grpc_status.details)


def _backfill_table(result: dict[str, Any]) -> str:
    """One row per Job of a backfill, in schedule order within each kind, then the counts."""
    kinds = ("created", "existed", "failed", "queued")
    rows = [[job, kind] for kind in kinds for job in result.get(kind, [])]
    counts = ", ".join(f"{len(result.get(kind, []))} {kind}" for kind in kinds)
    summary = f"{result.get('times', 0)} schedule time(s): {counts}"
    return f"{table(['JOB', 'RESULT'], rows)}\n{summary}" if rows else summary


async def cronjob_describe(client: Client, namespace: str, name: str, *, output: str) -> str:
    """``batchd cronjob describe``: the CronJob workflow's ``describe`` query and, for a member of a
    concurrency group (CJ-GROUP), the group workflow's own, current one as ``group``."""
    wid = cronjob_workflow_id(namespace, name)
    state = await _cronjob_query(client, wid, "describe")
    doc = {"workflowId": wid, **(state if isinstance(state, dict) else {"state": state})}
    seat = doc.get("concurrencyGroup")
    if isinstance(seat, dict) and seat.get("name"):
        try:
            doc["group"] = await _cronjob_query(client, group_workflow_id(namespace, seat["name"]), "describe")
        except NotFoundError:
            doc["group"] = None  # not started yet, or ended with its last member
    if output == "json":
        return _json(doc)
    held = doc.pop("held", None)  # FAIL-CLOSED: first, as `batchd describe` shows it
    return "\n".join([*([f"held: {held}"] if held else []), *_described(doc, 0)])


async def cronjob_history(client: Client, namespace: str, name: str, *, output: str) -> str:
    """``batchd cronjob history``: the run ledger (query ``history``), oldest first."""
    entries = await _cronjob_query(client, cronjob_workflow_id(namespace, name), "history")
    if output == "json":
        return _json(entries)
    return table(["SCHEDULED", "SOURCE", "OUTCOME", "JOB", "CREATED", "RESULT"],
                 [[e["scheduledTime"], e["source"], e["outcome"], e["job"] or "-", e["createdAt"] or "-",
                   e["result"] or "-"] for e in entries])


async def _cronjob_query(client: Client, wid: str, query: str) -> Any:
    """Raises: NotFoundError: no workflow ``wid``; OpError: the query failed."""
    try:
        return await client.get_workflow_handle(wid).query(query)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise NotFoundError(f"no workflow {wid}") from None
        raise
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as err:
        raise OpError(f"query {query} failed on {wid}: {err}") from None


def _cause(err: BaseException) -> str:
    cause = err.__cause__
    return str(cause) if cause else str(err)


# -- formatting ----------------------------------------------------------------------------


def _until(t: datetime | None, now: datetime) -> str:
    if t is None:
        return "-"
    return "never" if t >= NEVER else humanize(t - now)


def humanize(delta: timedelta) -> str:
    """A short duration such as ``59m58s``, ``3d04h`` or ``overdue 5s``."""
    secs = int(delta.total_seconds())
    prefix = "overdue " if secs < 0 else ""
    secs = abs(secs)
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    if d:
        text = f"{d}d{h:02d}h"
    elif h:
        text = f"{h}h{m:02d}m"
    elif m:
        text = f"{m}m{s:02d}s"
    else:
        text = f"{s}s"
    return prefix + text


def table(header: list[str], rows: Iterable[list[Any]]) -> str:
    """Left-aligned columns separated by two spaces (kubectl's look)."""
    cells = [header] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def _render_mapping(doc: dict[str, Any], output: str) -> str:
    if output == "json":
        return _json(doc)
    rows = [[k, v if isinstance(v, str) else json.dumps(v, default=str)] for k, v in _flatten(doc)]
    return table(["FIELD", "VALUE"], rows)


def _flatten(doc: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in doc.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _pairs(sa: Any) -> Iterable[tuple[SearchAttributeKey[Any], Any]]:
    return ((p.key, p.value) for p in sa)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _epoch(stamp: str | None) -> float:
    return datetime.fromisoformat(stamp).timestamp() if stamp else 0.0


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2, default=str)
