"""The registry of resources kubesim serves: one :class:`Resource` per group/version/plural.

Layer: kubesim (imports nothing from batchd). Read by the server (routing, discovery), the
store (storage keys, scope) and the garbage collector (default propagation policy).

core/v1 ``events`` and events.k8s.io/v1 ``events`` share one storage key: an Event is stored
once (in its core/v1 shape, which is a superset) and converted for the other view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesim.errors import bad_request

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NS_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
SUB_VERBS = ("get", "patch", "update")
# Subresources with verbs of their own (the rest take SUB_VERBS).
SUB_ONLY_VERBS: dict[str, tuple[str, ...]] = {"finalize": ("update",), "log": ("get",)}


@dataclass(frozen=True)
class Resource:
    """One served resource, with what discovery says about it."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # Where objects live when two views of one kind (events) share them; else (group, plural).
    shared_storage: tuple[str, str] | None = None
    # kube-apiserver's DefaultGarbageCollectionPolicy: batch/v1 jobs keep Orphan for
    # backwards compatibility, everything else is Background.
    default_propagation: str = "Background"
    # The registry strategy's AllowCreateOnUpdate: a PUT of a missing object creates it.
    allow_create_on_update: bool = False
    # The registry strategy's AllowUnconditionalUpdate: a PUT without
    # metadata.resourceVersion overwrites whatever is stored (else it is refused as Invalid).
    allow_unconditional_update: bool = True
    # Whether the create strategy sets metadata.generation (kubesim sets 1 for every kind whose
    # registry is not known to leave it alone); False keeps what the client sent, usually none.
    sets_generation: bool = True
    # kube-apiserver keeps no watch cache for Events: a watch is served by etcd, from any
    # revision it has not compacted
    watch_cache: bool = True

    @property
    def storage(self) -> tuple[str, str]:
        """The store's key for this resource's objects."""
        return self.shared_storage or (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def qualified(self) -> str:
        """``jobs.batch`` / ``pods``: the name used in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "namespaces", "namespace", "Namespace", False, short_names=("ns",),
             subresources=("status", "finalize"), verbs=NS_VERBS, sets_generation=False),
    Resource("", "v1", "pods", "pod", "Pod", True, short_names=("po",), categories=("all",),
             subresources=("status", "log")),
    Resource("", "v1", "events", "event", "Event", True, short_names=("ev",), shared_storage=("", "events"),
             sets_generation=False, watch_cache=False),
    Resource("events.k8s.io", "v1", "events", "event", "Event", True, short_names=("ev",),
             shared_storage=("", "events"), sets_generation=False, watch_cache=False),
    Resource("batch", "v1", "jobs", "job", "Job", True, categories=("all",), subresources=("status",),
             default_propagation="Orphan"),
    Resource("batch", "v1", "cronjobs", "cronjob", "CronJob", True, short_names=("cj",),
             categories=("all",), subresources=("status",)),
    # Leader election is a compare-and-swap on a Lease's resourceVersion, so its registry refuses
    # a PUT that names none; it has no status and never sets a generation.
    Resource("coordination.k8s.io", "v1", "leases", "lease", "Lease", True, allow_create_on_update=True,
             allow_unconditional_update=False, sets_generation=False),
)

# (group, version, plural) -> Resource
BY_GVR: dict[tuple[str, str, str], Resource] = {(r.group, r.version, r.plural): r for r in RESOURCES}
# (group, plural) -> Resource; one version per group here.
BY_GR: dict[tuple[str, str], Resource] = {(r.group, r.plural): r for r in RESOURCES}
# (apiVersion, kind) -> Resource; for ownerReferences and bodies.
BY_KIND: dict[tuple[str, str], Resource] = {(r.api_version, r.kind): r for r in RESOURCES}
# Storage key -> the resource whose shape is stored (the core one for events).
STORAGE_OWNER: dict[tuple[str, str], Resource] = {}
for _res in RESOURCES:
    STORAGE_OWNER.setdefault(_res.storage, _res)

GROUP_VERSIONS: dict[str, list[str]] = {}
for _res in RESOURCES:
    versions = GROUP_VERSIONS.setdefault(_res.group, [])
    if _res.version not in versions:
        versions.append(_res.version)


# --- field selectors -----------------------------------------------------------------------------
# What each kind selects on (its registry's GetAttrs and field label conversion), and how each
# refuses another label: core kinds with their conversion's words, batch/v1 Jobs with theirs, the
# kinds with only the default metadata labels with the generic check's.
_META_LABELS = ("metadata.name", "metadata.namespace")
_OBJECT_REFERENCE = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
FIELD_LABELS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): (*_META_LABELS, "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                   "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
                   "status.nominatedNodeName"),
    ("", "events"): (*_META_LABELS, *(f"involvedObject.{f}" for f in _OBJECT_REFERENCE), "reason",
                     "reportingComponent", "source", "type"),
    ("events.k8s.io", "events"): (*_META_LABELS, *(f"regarding.{f}" for f in _OBJECT_REFERENCE), "reason",
                                  "reportingController", "type"),
    ("", "namespaces"): ("metadata.name", "status.phase"),
    ("batch", "jobs"): (*_META_LABELS, "status.successful"),
}


def _pod_ips(obj: dict[str, Any]) -> str:
    ips = (obj.get("status") or {}).get("podIPs") or []
    return ",".join(str(ip.get("ip") or "") for ip in ips if isinstance(ip, dict))


#: labels whose value is not simply the field's string form
_FIELD_VALUES: dict[tuple[str, str, str], Callable[[dict[str, Any]], str]] = {
    ("", "pods", "spec.hostNetwork"): lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
    ("", "pods", "status.podIPs"): _pod_ips,
    ("batch", "jobs", "status.successful"): lambda o: str(int((o.get("status") or {}).get("succeeded") or 0)),
    ("", "events", "source"): lambda o: str((o.get("source") or {}).get("component") or ""),
}


def field_label(res: Resource, label: str) -> Callable[[dict[str, Any]], str] | None:
    """How ``res`` reads a field selector's label off an object (None: by its path), or the 400
    refusing a label it does not select on."""
    labels = FIELD_LABELS.get((res.group, res.plural), _META_LABELS)
    if label not in labels:
        if (res.group, res.plural) == ("batch", "jobs"):
            raise bad_request(f'field label "{label}" not supported for {res.kind}')
        if (res.group, res.plural) in FIELD_LABELS:
            raise bad_request(f"field label not supported: {label}")
        raise bad_request(f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"')
    return _FIELD_VALUES.get((res.group, res.plural, label))


def serves(group: str, version: str | None) -> bool:
    """Whether a group (and version, when given) is served at all."""
    versions = GROUP_VERSIONS.get(group)
    return versions is not None and (version is None or version in versions)


def lookup(group: str, version: str, plural: str) -> Resource | None:
    """The resource served at ``group/version/plural``, or None."""
    return BY_GVR.get((group, version, plural))


def resource_list(group: str, version: str) -> dict[str, object] | None:
    """The ``APIResourceList`` discovery body for one group version, or None if not served."""
    served = [r for r in RESOURCES if r.group == group and r.version == version]
    if not served:
        return None
    entries: list[dict[str, object]] = []
    for r in served:
        entry: dict[str, object] = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": list(r.verbs),
            "storageVersionHash": "",
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        entries.append(entry)
        for sub in r.subresources:
            entries.append({
                "name": f"{r.plural}/{sub}",
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(SUB_ONLY_VERBS.get(sub, SUB_VERBS)),
            })
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}


def api_group_list() -> dict[str, object]:
    """The ``APIGroupList`` body of ``GET /apis``."""
    groups = []
    for group, versions in GROUP_VERSIONS.items():
        if not group:
            continue
        vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": vs, "preferredVersion": vs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> dict[str, object] | None:
    """The ``APIGroup`` body of ``GET /apis/<group>``."""
    versions = GROUP_VERSIONS.get(group)
    if not group or not versions:
        return None
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": vs, "preferredVersion": vs[0]}


def api_versions() -> dict[str, object]:
    """The ``APIVersions`` body of ``GET /api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


# --- the two views of an Event ------------------------------------------------------------------
# Stored shape: core/v1 Event. Field pairs (core, events.k8s.io) from
# k8s.io/kubernetes/pkg/apis/events/v1/conversion.go.
_EVENT_FIELDS = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reason", "reason"),
    ("type", "type"),
    ("action", "action"),
    ("related", "related"),
    ("series", "series"),
    ("eventTime", "eventTime"),
)


def core_event_to_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """Stored core/v1 Event -> events.k8s.io/v1 Event, written as Go writes it: empty strings and
    zero counts left out, the non-pointer structs and times there even when unset."""
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": obj["metadata"]}
    for core, v1 in _EVENT_FIELDS:
        value = obj.get(core)
        if value is not None and value != "" and value != {} and value != 0:
            out[v1] = value
    if "series" in out:
        series = out["series"]
        out["series"] = {"count": series.get("count", 0), "lastObservedTime": series.get("lastObservedTime")}
    for key in ("regarding", "deprecatedSource"):
        out.setdefault(key, {})
    for key in ("eventTime", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"):
        out.setdefault(key, None)
    return out


def v1_event_to_core(obj: dict[str, Any]) -> dict[str, Any]:
    """events.k8s.io/v1 Event -> the stored core/v1 Event (with what Go writes of it when unset)."""
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "v1", "metadata": obj.get("metadata") or {}}
    for core, v1 in _EVENT_FIELDS:
        value = obj.get(v1)
        if value is not None:
            out[core] = value
    for key in ("involvedObject", "source"):
        out.setdefault(key, {})
    for key in ("reportingComponent", "reportingInstance"):
        out.setdefault(key, "")
    for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
        out.setdefault(key, None)
    return out


def to_view(res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """The stored object as ``res`` serves it."""
    if res.group == "events.k8s.io":
        return core_event_to_v1(obj)
    return obj


def from_view(res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """An object in ``res``'s shape, converted to the stored shape."""
    if res.group == "events.k8s.io":
        return v1_event_to_core(obj)
    return obj


def view_function(res: Resource) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """``to_view`` bound to ``res``, or None when the view is the stored shape."""
    if res.group == "events.k8s.io":
        return core_event_to_v1
    return None
