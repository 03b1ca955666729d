"""Server-side printing: ``meta.k8s.io`` Tables for ``kubectl get``, as kube-apiserver builds them.

Layer: kubesim (imports nothing from batchd). Called by the server's get, list and watch handlers
when the ``Accept`` header asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` (kubectl's
default for human-readable output). Columns and cells follow upstream's printers
(``pkg/printers/internalversion/printers.go``); the server always fills the wide (priority 1)
columns, and kubectl hides them unless ``-o wide``. Ages are computed from ``now`` with
apimachinery's ``duration.HumanDuration``, so the caller passes the clock's time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubesim.store import Obj, parse_timestamp

__all__ = ["accepts_table", "human_duration", "list_table", "object_table", "watch_table"]

Column = tuple[str, str, int, str]  # name, type, priority, description
Printer = Callable[[Obj, datetime], list[Any]]

_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name automatically. "
    "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
    "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. "
    "It is not guaranteed to be set in happens-before order across separate operations. Clients "
    "may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the "
    "system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def accepts_table(accept: str | None) -> str | None:
    """The Table version (``v1`` or ``v1beta1``) the Accept header prefers, or None for JSON.

    Media ranges are taken in order (kubectl lists the Table ones before plain JSON)."""
    if not accept or "as=Table" not in accept:
        return None
    for media in accept.split(","):
        parts = [p.strip() for p in media.split(";")]
        params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if parts[0] not in ("application/json", "*/*", "application/*"):
            continue
        if params.get("as") != "Table":
            return None  # plain JSON preferred over a Table
        if params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return params["v"]
    return None


# --- durations --------------------------------------------------------------------------------


def human_duration(seconds_total: float) -> str:
    """apimachinery ``duration.HumanDuration``."""
    seconds = int(seconds_total)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _since(value: Any, now: datetime) -> str:
    """``translateTimestampSince``: ``<unknown>`` for a missing time."""
    if not value:
        return "<unknown>"
    try:
        return human_duration((now - parse_timestamp(value)).total_seconds())
    except ValueError:
        return "<unknown>"


def _d(obj: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def _containers_cells(containers: Any) -> list[str]:
    """``layoutContainerCells``: comma-joined names and images."""
    cs = [c for c in containers or [] if isinstance(c, dict)]
    return [",".join(c.get("name") or "" for c in cs), ",".join(c.get("image") or "" for c in cs)]


def _format_selector(sel: Any) -> str:
    """``metav1.FormatLabelSelector``."""
    if not isinstance(sel, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for req in sel.get("matchExpressions") or []:
        op, key, values = req.get("operator"), req.get("key", ""), req.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


# --- printers ---------------------------------------------------------------------------------

_JOB_COLUMNS: list[Column] = [
    ("Name", "string", 0, _NAME_DOC),
    ("Status", "string", 0, "Status of the job."),
    ("Completions", "string", 0, "The number of pods which reached phase Succeeded."),
    ("Duration", "string", 0, "Time required to complete the job."),
    ("Age", "string", 0, _AGE_DOC),
    ("Containers", "string", 1, "Names of each container in the template."),
    ("Images", "string", 1, "Images referenced by each container in the template."),
    ("Selector", "string", 1, "A label query over pods that should match the pod count."),
]


def _has_condition(obj: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in _d(obj, "status", "conditions") or [] if isinstance(c, dict))


def _job_row(job: Obj, now: datetime) -> list[Any]:
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    # printJob (1.32): the first matching condition wins, in this order.
    if _has_condition(job, "Complete"):
        state = "Complete"
    elif _has_condition(job, "Failed"):
        state = "Failed"
    elif job["metadata"].get("deletionTimestamp"):
        state = "Terminating"
    elif _has_condition(job, "Suspended"):
        state = "Suspended"
    elif _has_condition(job, "FailureTarget"):
        state = "FailureTarget"
    elif _has_condition(job, "SuccessCriteriaMet"):
        state = "SuccessCriteriaMet"
    else:
        state = "Running"
    succeeded = status.get("succeeded") or 0
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    if completions is not None:
        done = f"{succeeded}/{completions}"
    elif parallelism is not None and parallelism > 1:
        done = f"{succeeded}/1 of {parallelism}"
    else:
        done = f"{succeeded}/1"
    start, end = status.get("startTime"), status.get("completionTime")
    if not start:
        took = ""
    elif not end:
        took = _since(start, now)
    else:
        took = human_duration((parse_timestamp(end) - parse_timestamp(start)).total_seconds())
    names, images = _containers_cells(_d(spec, "template", "spec", "containers"))
    return [job["metadata"]["name"], state, done, took, _since(job["metadata"].get("creationTimestamp"), now),
            names, images, _format_selector(spec.get("selector"))]


_CRONJOB_COLUMNS: list[Column] = [
    ("Name", "string", 0, _NAME_DOC),
    ("Schedule", "string", 0, "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    ("Timezone", "string", 0, "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones."),
    ("Suspend", "boolean", 0, "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false."),
    ("Active", "integer", 0, "A list of pointers to currently running jobs."),
    ("Last Schedule", "string", 0, "Information when was the last time the job was successfully scheduled."),
    ("Age", "string", 0, _AGE_DOC),
    ("Containers", "string", 1, "Names of each container in the template."),
    ("Images", "string", 1, "Images referenced by each container in the template."),
    ("Selector", "string", 1, "A label query over pods that should match the pod count."),
]


def _cronjob_row(cj: Obj, now: datetime) -> list[Any]:
    spec = cj.get("spec") or {}
    status = cj.get("status") or {}
    last = status.get("lastScheduleTime")
    suspend = spec.get("suspend")
    job_spec = _d(spec, "jobTemplate", "spec") or {}
    names, images = _containers_cells(_d(job_spec, "template", "spec", "containers"))
    return [
        cj["metadata"]["name"], spec.get("schedule") or "", spec.get("timeZone") or "<none>",
        "<unset>" if suspend is None else ("True" if suspend else "False"),
        len(status.get("active") or []), _since(last, now) if last else "<none>",
        _since(cj["metadata"].get("creationTimestamp"), now),
        names, images, _format_selector(job_spec.get("selector")),
    ]


_POD_COLUMNS: list[Column] = [
    ("Name", "string", 0, _NAME_DOC),
    ("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
    ("Status", "string", 0, "The aggregate status of the containers in this pod."),
    ("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
    ("Age", "string", 0, _AGE_DOC),
    ("IP", "string", 1, "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
    ("Node", "string", 1, "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements."),
    ("Nominated Node", "string", 1, "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."),
    ("Readiness Gates", "string", 1, "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
]


def _pod_row(pod: Obj, now: datetime) -> list[Any]:
    """printPod for regular containers (init and sidecar containers are not modelled)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    statuses = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    ready = restarts = 0
    last_restart: str | None = None
    has_running = False
    for c in reversed(statuses):
        restarts += int(c.get("restartCount") or 0)
        finished = _d(c, "lastState", "terminated", "finishedAt")
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished
        state = c.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if isinstance(waiting, dict) and waiting.get("reason"):
            reason = waiting["reason"]
        elif isinstance(terminated, dict) and terminated.get("reason"):
            reason = terminated["reason"]
        elif isinstance(terminated, dict):
            signal = terminated.get("signal") or 0
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode') or 0}"
        elif c.get("ready") and isinstance(state.get("running"), dict):
            has_running = True
            ready += 1
    if reason == "Completed" and has_running:
        reason = "Running" if any(_d(c, "type") == "Ready" and c.get("status") == "True"
                                  for c in status.get("conditions") or []) else "NotReady"
    if pod["metadata"].get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif pod["metadata"].get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_cell = str(restarts)
    if last_restart:
        restarts_cell += f" ({_since(last_restart, now)} ago)"
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        true = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gates_cell = f"{true}/{len(gates)}"
    return [
        pod["metadata"]["name"], f"{ready}/{len(spec.get('containers') or [])}", reason, restarts_cell,
        _since(pod["metadata"].get("creationTimestamp"), now),
        status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>", gates_cell,
    ]


_NAMESPACE_COLUMNS: list[Column] = [
    ("Name", "string", 0, _NAME_DOC),
    ("Status", "string", 0, "The status of the namespace"),
    ("Age", "string", 0, _AGE_DOC),
]


def _namespace_row(ns: Obj, now: datetime) -> list[Any]:
    return [ns["metadata"]["name"], _d(ns, "status", "phase") or "",
            _since(ns["metadata"].get("creationTimestamp"), now)]


_EVENT_COLUMNS: list[Column] = [
    ("Last Seen", "string", 0, "Time since the most recent occurrence of this event."),
    ("Type", "string", 0, "Type of this event (Normal, Warning), new types could be added in the future."),
    ("Reason", "string", 0, "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
    ("Object", "string", 0, "The object that this event is about."),
    ("Subobject", "string", 1, "The subobject that this event is about."),
    ("Source", "string", 1, "The component reporting this event. Should be a short machine understandable string."),
    ("Message", "string", 0, "A human-readable description of the status of this operation."),
    ("First Seen", "string", 1, "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
    ("Count", "string", 1, "The number of times this event has occurred."),
    ("Name", "string", 1, _NAME_DOC),
]


def _event_row(ev: Obj, now: datetime) -> list[Any]:
    """printEvent over the stored (core/v1) shape of an Event."""
    first = _since(ev["firstTimestamp"], now) if ev.get("firstTimestamp") else _since(ev.get("eventTime"), now)
    last = _since(ev["lastTimestamp"], now) if ev.get("lastTimestamp") else first
    count = ev.get("count") or 0
    series = ev.get("series")
    if isinstance(series, dict):
        last = _since(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif count == 0:
        count = 1
    involved = ev.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = ev.get("source") or {}
    if source.get("component"):
        origin = source["component"] + (f", {source['host']}" if source.get("host") else "")
    else:
        origin = ev.get("reportingComponent") or ""
        if ev.get("reportingInstance"):
            origin += f", {ev['reportingInstance']}"
    return [last, ev.get("type") or "", ev.get("reason") or "", target, involved.get("fieldPath") or "",
            origin, (ev.get("message") or "").strip(), first, count, ev["metadata"]["name"]]


_LEASE_COLUMNS: list[Column] = [
    ("Name", "string", 0, _NAME_DOC),
    ("Holder", "string", 0, "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field."),
    ("Age", "string", 0, _AGE_DOC),
]


def _lease_row(lease: Obj, now: datetime) -> list[Any]:
    # printLease: an unset holder prints as an empty cell, not <none>.
    return [lease["metadata"]["name"], _d(lease, "spec", "holderIdentity") or "",
            _since(lease["metadata"].get("creationTimestamp"), now)]


_DEFAULT_COLUMNS: list[Column] = [("Name", "string", 0, _NAME_DOC), ("Created At", "date", 0, _AGE_DOC)]


def _default_row(obj: Obj, now: datetime) -> list[Any]:
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp") or ""]


# (group, plural) of the stored shape -> columns and row printer
PRINTERS: dict[tuple[str, str], tuple[list[Column], Printer]] = {
    ("batch", "jobs"): (_JOB_COLUMNS, _job_row),
    ("batch", "cronjobs"): (_CRONJOB_COLUMNS, _cronjob_row),
    ("", "pods"): (_POD_COLUMNS, _pod_row),
    ("", "namespaces"): (_NAMESPACE_COLUMNS, _namespace_row),
    ("", "events"): (_EVENT_COLUMNS, _event_row),
    ("coordination.k8s.io", "leases"): (_LEASE_COLUMNS, _lease_row),
}


# --- tables -----------------------------------------------------------------------------------


def _column_definitions(columns: list[Column]) -> list[dict[str, Any]]:
    out = []
    for name, ctype, priority, doc in columns:
        col: dict[str, Any] = {"name": name, "type": ctype, "format": "", "description": doc, "priority": priority}
        if name == "Name":
            col["format"] = "name"
        out.append(col)
    return out


def _row(storage: tuple[str, str], obj: Obj, view: Obj, now: datetime, include: str,
         api_version: str) -> dict[str, Any]:
    _, printer = PRINTERS.get(storage, (_DEFAULT_COLUMNS, _default_row))
    row: dict[str, Any] = {"cells": printer(obj, now)}
    if include == "Object":
        row["object"] = view
    elif include != "None":
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": api_version,
                         "metadata": view["metadata"]}
    return row


def _table(version: str, storage: tuple[str, str], headers: bool, meta: dict[str, Any],
           rows: list[dict[str, Any]]) -> dict[str, Any]:
    columns, _ = PRINTERS.get(storage, (_DEFAULT_COLUMNS, _default_row))
    table: dict[str, Any] = {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}", "metadata": meta}
    table["columnDefinitions"] = _column_definitions(columns) if headers else None
    table["rows"] = rows
    return table


def _include(param: str | None) -> str:
    return param if param in ("None", "Object", "PartialObjectMetadata") else "PartialObjectMetadata"


def list_table(version: str, storage: tuple[str, str], items: list[tuple[Obj, Obj]], now: datetime,
               meta: dict[str, Any], include_object: str | None) -> dict[str, Any]:
    """A Table for a list: ``items`` are (stored object, object as served) pairs."""
    include = _include(include_object)
    api_version = f"meta.k8s.io/{version}"
    rows = [_row(storage, obj, view, now, include, api_version) for obj, view in items]
    return _table(version, storage, True, meta, rows)


def object_table(version: str, storage: tuple[str, str], obj: Obj, view: Obj, now: datetime,
                 include_object: str | None) -> dict[str, Any]:
    """A one-row Table for a get."""
    meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
    return list_table(version, storage, [(obj, view)], now, meta, include_object)


def watch_table(version: str, storage: tuple[str, str], obj: Obj, view: Obj, now: datetime,
                include_object: str | None, first: bool) -> dict[str, Any]:
    """The Table a watch event carries: column definitions only in the first, as upstream saves
    bandwidth (kubectl reuses the last columns it saw)."""
    include = _include(include_object)
    row = _row(storage, obj, view, now, include, f"meta.k8s.io/{version}")
    meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
    return _table(version, storage, first, meta, [row])
