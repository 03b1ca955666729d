"""The types kubesim serves, read from the official ``kubernetes`` Python client's models.

Layer: kubesim (imports nothing from batchd). :func:`prune` is called by
:mod:`kubesim.strategy` on every write, so unknown fields in a built-in kind's body are dropped
as the real server's typed decoding drops them. :func:`openapi_v3_index` and
:func:`openapi_v3_document` are served by the kubesim server at ``/openapi/v3`` so that
``kubectl apply``/``create`` (client-side validation) and ``kubectl explain`` work.

Every client model class carries ``openapi_types`` (python attribute → type string such as
``'str'``, ``'List[V1Container]'``, ``'Dict[str, str]'``) and ``attribute_map`` (python attribute
→ JSON name). Those are the generated form of upstream's OpenAPI definitions, so walking them
reproduces the schemas. The built documents and the per-type pruners (compiled from those
types once, so a write walks no type strings) are cached: the only module-level mutable state.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any, ClassVar, Protocol

import kubernetes.client as k8s

from kubesim import gofields, gotime, protobuf
from kubesim.codec import clone
from kubesim.errors import ApiError, bad_request

__all__ = [
    "definition_name",
    "model_for",
    "openapi_v3_document",
    "openapi_v3_index",
    "openapi_v3_schemas",
    "prune",
    "strict_decoding_error",
    "unknown_fields",
]

# (group, plural) → (client model name, group-version path, kind)
_ROOT_MODELS: dict[tuple[str, str], tuple[str, str]] = {
    ("batch", "jobs"): ("V1Job", "apis/batch/v1"),
    ("batch", "cronjobs"): ("V1CronJob", "apis/batch/v1"),
    ("", "pods"): ("V1Pod", "api/v1"),
    ("", "namespaces"): ("V1Namespace", "api/v1"),
    ("", "events"): ("CoreV1Event", "api/v1"),
    ("events.k8s.io", "events"): ("EventsV1Event", "apis/events.k8s.io/v1"),
    ("coordination.k8s.io", "leases"): ("V1Lease", "apis/coordination.k8s.io/v1"),
}

# Types of apimachinery's meta/v1 package (the client names them V1...).
_META_TYPES = frozenset(
    {
        "ObjectMeta",
        "ListMeta",
        "ManagedFieldsEntry",
        "OwnerReference",
        "LabelSelector",
        "LabelSelectorRequirement",
        "Status",
        "StatusDetails",
        "StatusCause",
        "DeleteOptions",
        "Preconditions",
        "Condition",
    }
)
# Types of the batch/v1 package; every other V1 type reachable from our kinds is core/v1.
_BATCH_TYPES = frozenset(
    {
        "Job",
        "JobList",
        "JobSpec",
        "JobStatus",
        "JobCondition",
        "JobTemplateSpec",
        "CronJob",
        "CronJobList",
        "CronJobSpec",
        "CronJobStatus",
        "PodFailurePolicy",
        "PodFailurePolicyRule",
        "PodFailurePolicyOnExitCodesRequirement",
        "PodFailurePolicyOnPodConditionsPattern",
        "SuccessPolicy",
        "SuccessPolicyRule",
        "UncountedTerminatedPods",
        "JobSchedulingConfiguration",
    }
)
# Types of the coordination/v1 package.
_COORDINATION_TYPES = frozenset({"Lease", "LeaseList", "LeaseSpec"})
_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_FIELDS_V1 = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"

# Which client 'str' / 'Dict[str, str]' fields are resource.Quantity upstream (the client
# flattens Quantity to a string; the server accepts numbers there too).
_QUANTITY_FIELDS = frozenset(
    {
        ("V1ResourceRequirements", "limits"),
        ("V1ResourceRequirements", "requests"),
        ("V1VolumeResourceRequirements", "limits"),
        ("V1VolumeResourceRequirements", "requests"),
        ("V1ContainerStatus", "allocated_resources"),
        ("V1PodSpec", "overhead"),
        ("V1EmptyDirVolumeSource", "size_limit"),
        ("V1ResourceFieldSelector", "divisor"),
        ("V1NodeStatus", "capacity"),
        ("V1NodeStatus", "allocatable"),
    }
)
# 'object' fields that are intstr.IntOrString upstream; the other 'object' fields are free-form.
_INT_OR_STRING_FIELDS = frozenset(
    {"port", "target_port", "max_unavailable", "min_available", "max_surge"}
)
# The client's 'datetime' fields that are MicroTime upstream (the rest are Time).
_MICRO_TIME_FIELDS = frozenset(
    {
        ("CoreV1Event", "event_time"),
        ("EventsV1Event", "event_time"),
        ("V1LeaseSpec", "acquire_time"),
        ("V1LeaseSpec", "renew_time"),
    }
)

# Strategic-merge metadata kubectl reads from the schema to compute apply patches:
# (model, python attribute) → (patch strategy, merge key).
_PATCH_META: dict[tuple[str, str], tuple[str, str | None]] = {
    ("V1ObjectMeta", "finalizers"): ("merge", None),
    ("V1ObjectMeta", "owner_references"): ("merge", "uid"),
    ("V1PodSpec", "containers"): ("merge", "name"),
    ("V1PodSpec", "init_containers"): ("merge", "name"),
    ("V1PodSpec", "ephemeral_containers"): ("merge", "name"),
    ("V1PodSpec", "volumes"): ("merge,retainKeys", "name"),
    ("V1PodSpec", "image_pull_secrets"): ("merge", "name"),
    ("V1PodSpec", "host_aliases"): ("merge", "ip"),
    ("V1PodSpec", "scheduling_gates"): ("merge", "name"),
    ("V1PodSpec", "resource_claims"): ("merge,retainKeys", "name"),
    ("V1Container", "env"): ("merge", "name"),
    ("V1Container", "ports"): ("merge", "containerPort"),
    ("V1Container", "volume_mounts"): ("merge", "mountPath"),
    ("V1Container", "volume_devices"): ("merge", "devicePath"),
    ("V1EphemeralContainer", "env"): ("merge", "name"),
    ("V1EphemeralContainer", "volume_mounts"): ("merge", "mountPath"),
    ("V1PodStatus", "conditions"): ("merge", "type"),
    ("V1JobStatus", "conditions"): ("merge", "type"),
    ("V1CronJobStatus", "active"): ("merge", None),
    ("V1NamespaceStatus", "conditions"): ("merge", "type"),
}

_LIST_RE = re.compile(r"^(?:List|list)\[(.+)\]$")
_DICT_RE = re.compile(r"^(?:Dict|dict)\((?:str), *(.+)\)$|^(?:Dict|dict)\[str, *(.+)\]$")


def definition_name(model: str) -> str:
    """Upstream's OpenAPI definition name for a client model class name."""
    if model.startswith("CoreV1"):
        return "io.k8s.api.core.v1." + model[len("CoreV1") :]
    if model.startswith("EventsV1"):
        return "io.k8s.api.events.v1." + model[len("EventsV1") :]
    m = re.match(r"^V1(.+)$", model)
    if not m:
        # A name several groups define carries its group: RbacV1Subject is rbac/v1 Subject.
        grouped = re.match(r"^([A-Z][a-z]+)V1([A-Z].*)$", model)
        if not grouped:
            raise KeyError(model)
        return f"io.k8s.api.{grouped.group(1).lower()}.v1.{grouped.group(2)}"
    name = m.group(1)
    if name in _META_TYPES:
        return "io.k8s.apimachinery.pkg.apis.meta.v1." + name
    if name in _BATCH_TYPES:
        return "io.k8s.api.batch.v1." + name
    if name in _COORDINATION_TYPES:
        return "io.k8s.api.coordination.v1." + name
    return "io.k8s.api.core.v1." + name


def model_for(group: str, plural: str) -> type | None:
    """The client model class of a served resource, or None for kinds kubesim does not type."""
    entry = _ROOT_MODELS.get((group, plural))
    return getattr(k8s, entry[0]) if entry else None


def _go_type(model: str) -> str:
    """The Go type name of a client model (``V1JobSpec`` → ``JobSpec``)."""
    for prefix in ("CoreV1", "EventsV1", "V1"):
        if model.startswith(prefix):
            return model[len(prefix):]
    return model


def _int_format(owner: str, attr: str) -> str | None:
    """``int32`` or ``int64`` for an integer attribute of a client model (None: not described)."""
    cls = _model(owner) if owner else None
    if cls is None:
        return None
    json_name = cls.attribute_map.get(attr, attr)
    return protobuf.int_format(owner, json_name)


class _ClientModel(Protocol):
    """What kubesim reads of an official client model class (besides pydantic's ``model_fields``)."""

    openapi_types: ClassVar[dict[str, str]]  # python attribute -> client type string
    attribute_map: ClassVar[dict[str, str]]  # python attribute -> JSON name


def _model(name: str) -> type[_ClientModel] | None:
    cls = getattr(k8s, name, None)
    return cls if cls is not None and hasattr(cls, "openapi_types") else None


@cache
def _json_fields(model: str) -> dict[str, tuple[str, str]]:
    """JSON field name → (python attribute, client type string) of a model."""
    cls = _model(model)
    assert cls is not None, model
    return {cls.attribute_map[attr]: (attr, t) for attr, t in cls.openapi_types.items()}


@cache
def _required(model: str) -> tuple[str, ...]:
    """JSON names of required fields (the client's pydantic models mark exactly those)."""
    cls = _model(model)
    assert cls is not None
    fields = getattr(cls, "model_fields", {})
    return tuple(cls.attribute_map[a] for a in cls.openapi_types if a in fields and fields[a].is_required())


def _description(model: str, attr: str | None = None) -> str:
    """The upstream field or type description the client carries."""
    cls = _model(model)
    if cls is None:
        return ""
    if attr is None:
        doc = inspect.getdoc(cls) or ""
        return doc.split("\n\n")[0].strip() if not doc.startswith("Attributes:") else ""
    f = getattr(cls, "model_fields", {}).get(attr)
    return (f.description or "") if f is not None else ""


# --------------------------------------------------------------------------------------------
# Pruning
# --------------------------------------------------------------------------------------------


def _number_text(value: int | float) -> str:
    """A JSON number as Go's decoder quotes it (the literal: ``1e20``, ``1.5``, ``2147483648``)."""
    if isinstance(value, float):
        return repr(value).replace("e+", "e")
    return str(value)


def _type_error(struct: str, path: str, value: Any, want: str) -> ApiError:
    got = {
        bool: "bool",
        int: "number",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), "value")
    if got == "number" and want.startswith(("int", "uint")):
        # Go's decoder names the literal only when an integer field cannot hold it
        got = f"number {_number_text(value)}"
    field = f"{struct}.{path}" if struct else path
    return bad_request(f"json: cannot unmarshal {got} into Go struct field {field} of type {want}")


class _Mismatch(Exception):
    """A value of the wrong JSON type; the field path is collected while it unwinds, so the
    common case (no error) never formats a path."""

    def __init__(self, value: Any, want: str) -> None:
        super().__init__(want)
        self.value = value
        self.want = want
        self.keys: list[str] = []
        self.struct = ""  # the Go type of the innermost object holding the field


# A compiled pruner: returns the pruned copy of a value (None: drop it) or raises _Mismatch.
Pruner = Callable[[Any], Any]


def _keep_str(value: Any) -> Any:
    if type(value) is not str:
        raise _Mismatch(value, "string")
    return value


def _int_keeper(bits: int) -> Pruner:
    """An integer field of ``bits`` bits: Go's decoder takes only an integer literal in range
    (``1e3`` or ``5.0`` is a float literal, refused as for any integer field)."""
    low, high, want = -(1 << (bits - 1)), (1 << (bits - 1)) - 1, f"int{bits}"

    def keep(value: Any) -> Any:
        if type(value) is not int or not low <= value <= high:
            raise _Mismatch(value, want)
        return value

    return keep


_keep_int32 = _int_keeper(32)
_keep_int64 = _int_keeper(64)


def _keep_float(value: Any) -> Any:
    t = type(value)
    if t is int or t is float:
        return value
    raise _Mismatch(value, "float64")


def _keep_bool(value: Any) -> Any:
    if type(value) is not bool:
        raise _Mismatch(value, "bool")
    return value


class _BadTime(Exception):
    """A time string the API server's decoder refuses; the message is Go's."""


def _keep_time(value: Any) -> Any:
    if type(value) is not str:
        raise _Mismatch(value, "metav1.Time")
    try:
        gotime.parse(value, gotime.RFC3339)
    except gotime.GoTimeError as e:
        raise _BadTime(str(e)) from None
    # Upstream re-marshals a Time in UTC at second precision; kept as written here, that being
    # the form every writer of kubesim's kinds sends.
    return value


def _keep_micro_time(value: Any) -> Any:
    if type(value) is not str:
        raise _Mismatch(value, "metav1.MicroTime")
    try:
        parsed = gotime.parse(value, gotime.RFC3339_MICRO)
    except gotime.GoTimeError as e:
        raise _BadTime(str(e)) from None
    return gotime.micro_text(parsed) or value


@cache
def _pruner(type_str: str, owner: str, attr: str) -> Pruner:
    """The pruner of one field type, built once per (type, owning model, attribute)."""
    m = _LIST_RE.match(type_str)
    if m:
        item = _pruner(m.group(1), owner, attr)
        want = "[]" + m.group(1)

        def prune_list(value: Any) -> Any:
            if type(value) is not list:
                raise _Mismatch(value, want)
            return [p for p in (item(v) for v in value if v is not None) if p is not None]

        return prune_list
    m = _DICT_RE.match(type_str)
    if m:
        inner = m.group(1) or m.group(2)
        want = "map[string]" + inner
        if (owner, attr) in _QUANTITY_FIELDS:
            # Quantity values: strings or numbers, kept as sent.
            def prune_quantities(value: Any) -> Any:
                if type(value) is not dict:
                    raise _Mismatch(value, want)
                return clone(value)

            return prune_quantities
        if inner == "str":
            # Free-form string maps (labels, annotations, nodeSelector): the common case.
            def prune_strings(value: Any) -> Any:
                if type(value) is not dict:
                    raise _Mismatch(value, want)
                out = {}
                for k, v in value.items():
                    if v is None:
                        continue
                    if type(v) is not str:
                        raise _Mismatch(v, "string")
                    out[k] = v
                return out

            return prune_strings
        entry = _pruner(inner, owner, attr)

        def prune_map(value: Any) -> Any:
            if type(value) is not dict:
                raise _Mismatch(value, want)
            out = {}
            for k, v in value.items():
                if v is not None:
                    p = entry(v)
                    if p is not None:
                        out[k] = p
            return out

        return prune_map
    if type_str == "str":
        return clone if (owner, attr) in _QUANTITY_FIELDS else _keep_str
    if type_str == "int":
        fmt = _int_format(owner, attr)
        return _keep_int32 if fmt == "int32" else _keep_int64
    if type_str == "float":
        return _keep_float
    if type_str == "bool":
        return _keep_bool
    if type_str == "datetime":
        return _keep_micro_time if (owner, attr) in _MICRO_TIME_FIELDS else _keep_time
    if _model(type_str) is not None:
        return _model_pruner(type_str)
    return clone  # free-form 'object' (int-or-string, raw extensions), bytes, date


def _model_pruner(model: str) -> Pruner:
    fields: dict[str, Pruner] | None = None  # built on first use: models refer to each other
    dropped: frozenset[str] = frozenset()  # left out when empty or zero (gofields)
    filled: tuple[tuple[str, Callable[[], Any]], ...] = ()  # written even when unset

    def prune_model(value: Any) -> Any:
        nonlocal fields, dropped, filled
        if type(value) is not dict:
            raise _Mismatch(value, model)
        if fields is None:
            fields = {
                key: _pruner(t, model, attr) for key, (attr, t) in _json_fields(model).items()
            }
            dropped, filled = _go_shape(model, fields)
        out = {}
        for key, v in value.items():
            p = fields.get(key)
            if p is None or v is None:
                continue  # unknown field: dropped, as the typed decoder drops it; null: nil
            try:
                pv = p(v)
            except _Mismatch as e:
                e.keys.append(key)
                if not e.struct:
                    e.struct = _go_type(model)
                raise
            if pv is None or (not pv and key in dropped):
                continue
            out[key] = pv
        for key, zero in filled:
            if key not in out:
                out[key] = zero()
        return out

    return prune_model


def _go_shape(model: str, fields: dict[str, Pruner]) -> tuple[frozenset[str], tuple[tuple[str, Callable[[], Any]], ...]]:
    """What Go's encoder leaves out of a model (empty maps and ``omitempty`` lists, ``omitempty``
    scalars at zero) and what it writes though unset (non-pointer structs, times and scalars,
    lists without ``omitempty``), from :mod:`kubesim.gofields`."""
    keep_empty = gofields.fields("KEEP_EMPTY", model)
    dropped = set(gofields.fields("OMIT_ZERO", model))
    for key, (_, t) in _json_fields(model).items():
        if _DICT_RE.match(t) or (_LIST_RE.match(t) and key not in keep_empty):
            dropped.add(key)
    filled: list[tuple[str, Callable[[], Any]]] = []
    for key in sorted(gofields.fields("STRUCTS", model)):
        if key in fields:
            filled.append((key, functools.partial(fields[key], {})))
    for key in sorted(gofields.fields("TIMES", model) | keep_empty):
        if key in fields:
            filled.append((key, functools.partial(_constant, None)))
    for key, zero in gofields.zero_values(model):
        if key in fields:
            filled.append((key, functools.partial(_constant, zero)))
    return frozenset(dropped), tuple(filled)


def _constant(value: Any) -> Any:
    return value


def prune(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Drop unknown fields recursively, as kube-apiserver's decoding does for built-in kinds.

    Free-form maps (labels, annotations, nodeSelector, resource limits…) keep all their keys;
    ``null`` values are dropped (a nil pointer is not serialised). A value of the wrong JSON
    type, or a time Go's ``time.Parse`` refuses, raises ``400 BadRequest`` as the real decoder
    does; a MicroTime comes back as the server marshals it (UTC, six fraction digits). The
    result is a new object that shares nothing with ``obj`` (callers may mutate it freely; this
    is the one deep copy of a write). Unknown kinds come back unchanged.
    """
    entry = _ROOT_MODELS.get((group, plural))
    if entry is None:
        return obj
    try:
        out: dict[str, Any] = _pruner(entry[0], "", "")(obj)
    except (_Mismatch, _BadTime) as e:
        if isinstance(e, _Mismatch):
            err = _type_error(e.struct, ".".join(reversed(e.keys)), e.value, e.want)
        else:
            err = bad_request(str(e))
        # As the API server words a body its decoder refuses.
        kind, version = obj.get("kind") or _go_type(entry[0]), entry[1].rsplit("/", 1)[-1]
        err.message = f'{kind} in version "{version}" cannot be handled as a {kind}: {err.message}'
        raise err from None
    # apiVersion and kind identify the object even when the body left them out.
    for key in ("apiVersion", "kind"):
        if key in obj and key not in out:
            out[key] = obj[key]
    return out


def _unknown(value: Any, type_str: str, path: str, out: list[str]) -> None:
    if value is None:
        return
    m = _LIST_RE.match(type_str)
    if m:
        if isinstance(value, list):
            for i, v in enumerate(value):
                _unknown(v, m.group(1), f"{path}[{i}]", out)
        return
    m = _DICT_RE.match(type_str)
    if m:
        inner = m.group(1) or m.group(2)
        if isinstance(value, dict) and _model(inner) is not None:
            for k, v in value.items():
                _unknown(v, inner, f"{path}[{k}]", out)
        return
    if _model(type_str) is None or not isinstance(value, dict):
        return
    fields = _json_fields(type_str)
    for key, v in value.items():
        sub = f"{path}.{key}" if path else key
        if key not in fields:
            out.append(sub)
        else:
            _unknown(v, fields[key][1], sub, out)


def unknown_fields(group: str, plural: str, obj: dict[str, Any]) -> list[str]:
    """Paths of the fields :func:`prune` would drop (``spec.foo``, ``spec.x[0].bar``), in order."""
    entry = _ROOT_MODELS.get((group, plural))
    if entry is None:
        return []
    out: list[str] = []
    _unknown({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}, entry[0], "", out)
    return out


def strict_decoding_error(group: str, plural: str, obj: dict[str, Any]) -> ApiError | None:
    """The ``400 BadRequest`` a ``fieldValidation=Strict`` write with unknown fields gets.

    For the server: call on the request body (create/update) or the patched object (patch)
    when the query has ``fieldValidation=Strict`` (kubectl's default with validation on). With
    ``Warn``, send each unknown field as a ``Warning: unknown field "<path>"`` header instead.
    """
    paths = unknown_fields(group, plural, obj)
    if not paths:
        return None
    model = model_for(group, plural)
    kind = definition_name(model.__name__).rsplit(".", 1)[-1] if model else plural
    listed = ", ".join(f'unknown field "{p}"' for p in paths)
    return bad_request(
        f'{kind} in version "v1" cannot be handled as a {kind}: strict decoding error: {listed}'
    )


# --------------------------------------------------------------------------------------------
# OpenAPI v3
# --------------------------------------------------------------------------------------------

# group-version path → [(group, version, kind, plural, namespaced, subresources, client model)]
_GV_RESOURCES: dict[str, list[tuple[str, str, str, str, bool, tuple[str, ...], str]]] = {
    "api/v1": [
        ("", "v1", "Pod", "pods", True, ("status",), "V1Pod"),
        ("", "v1", "Namespace", "namespaces", False, ("status",), "V1Namespace"),
        ("", "v1", "Event", "events", True, (), "CoreV1Event"),
    ],
    "apis/batch/v1": [
        ("batch", "v1", "Job", "jobs", True, ("status",), "V1Job"),
        ("batch", "v1", "CronJob", "cronjobs", True, ("status",), "V1CronJob"),
    ],
    "apis/events.k8s.io/v1": [
        ("events.k8s.io", "v1", "Event", "events", True, (), "EventsV1Event"),
    ],
    "apis/coordination.k8s.io/v1": [
        ("coordination.k8s.io", "v1", "Lease", "leases", True, (), "V1Lease"),
    ],
}
_LIST_MODELS = {
    "V1Pod": "V1PodList",
    "V1Namespace": "V1NamespaceList",
    "CoreV1Event": "CoreV1EventList",
    "V1Job": "V1JobList",
    "V1CronJob": "V1CronJobList",
    "EventsV1Event": "EventsV1EventList",
    "V1Lease": "V1LeaseList",
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": "#/components/schemas/" + name}


def _field_schema(type_str: str, owner: str, attr: str, pending: list[str]) -> dict[str, Any]:
    m = _LIST_RE.match(type_str)
    if m:
        return {"type": "array", "items": _field_schema(m.group(1), owner, attr, pending)}
    m = _DICT_RE.match(type_str)
    if m:
        inner = m.group(1) or m.group(2)
        if (owner, attr) in _QUANTITY_FIELDS:
            return {"type": "object", "additionalProperties": _ref(_QUANTITY)}
        return {
            "type": "object",
            "additionalProperties": _field_schema(inner, owner, attr, pending),
        }
    if type_str == "str":
        if (owner, attr) in _QUANTITY_FIELDS:
            return _ref(_QUANTITY)
        return {"type": "string"}
    if type_str == "int":
        return {"type": "integer", "format": _int_format(owner, attr) or "int32"}
    if type_str == "float":
        return {"type": "number", "format": "double"}
    if type_str == "bool":
        return {"type": "boolean"}
    if type_str == "bytes":
        return {"type": "string", "format": "byte"}
    if type_str == "datetime":
        return _ref(_MICRO_TIME if (owner, attr) in _MICRO_TIME_FIELDS else _TIME)
    if type_str == "object":
        if attr in _INT_OR_STRING_FIELDS:
            return _ref(_INT_OR_STRING)
        if attr == "fields_v1":
            return _ref(_FIELDS_V1)
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if _model(type_str) is not None:
        pending.append(type_str)
        return _ref(definition_name(type_str))
    return {}


def _model_schema(model: str, pending: list[str]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for json_name, (attr, t) in _json_fields(model).items():
        s = _field_schema(t, model, attr, pending)
        pm = _PATCH_META.get((model, attr))
        if pm is not None:
            s = dict(s)
            s["x-kubernetes-patch-strategy"] = pm[0]
            if pm[1]:
                s["x-kubernetes-patch-merge-key"] = pm[1]
                s["x-kubernetes-list-type"] = "map"
                s["x-kubernetes-list-map-keys"] = [pm[1]]
        desc = _description(model, attr)
        if desc:
            s = dict(s)
            s["description"] = desc
        if "$ref" in s and len(s) > 1:
            # OpenAPI 3.0 ignores siblings of $ref; upstream wraps the reference in allOf.
            ref = s.pop("$ref")
            s = {"allOf": [{"$ref": ref}], **s}
        props[json_name] = s
    schema: dict[str, Any] = {"type": "object", "properties": props}
    doc = _description(model)
    if doc:
        schema["description"] = doc
    required = _required(model)
    if required:
        schema["required"] = list(required)
    return schema


_SCALARS: dict[str, dict[str, Any]] = {
    _TIME: {
        "type": "string",
        "format": "date-time",
        "description": "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.",
    },
    _MICRO_TIME: {
        "type": "string",
        "format": "date-time",
        "description": "MicroTime is version of Time with microsecond level precision.",
    },
    _QUANTITY: {
        "description": "Quantity is a fixed-point representation of a number.",
        "oneOf": [{"type": "string"}, {"type": "number"}],
    },
    _INT_OR_STRING: {
        "description": "IntOrString is a type that can hold an int32 or a string.",
        "format": "int-or-string",
        "oneOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    },
    _FIELDS_V1: {
        "type": "object",
        "description": "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format.",
    },
}


def _schemas_for(models: list[str]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    pending = list(models)
    seen: set[str] = set()
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        schemas[definition_name(model)] = _model_schema(model, pending)
    for name, s in _SCALARS.items():
        schemas[name] = s
    return schemas


def _gvk(group: str, version: str, kind: str) -> list[dict[str, str]]:
    return [{"group": group, "kind": kind, "version": version}]


def _param(name: str, where: str, description: str, required: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "description": description,
        "required": required,
        "schema": {"type": "string", "uniqueItems": True},
    }


def _op(
    action: str,
    gvk: dict[str, str],
    op_id: str,
    body_ref: str | None,
    resp_ref: str,
    patch: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": op_id,
        "responses": {
            "200": {
                "description": "OK",
                "content": {"application/json": {"schema": _ref(resp_ref)}},
            }
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
    params = [
        _param(
            "dryRun", "query", "When present, indicates that modifications should not be persisted."
        )
    ]
    if action in ("post", "put", "patch"):
        params.append(
            _param(
                "fieldManager",
                "query",
                "fieldManager is a name associated with the actor or entity that is making these changes.",
            )
        )
        # Advertised as kube-apiserver does (>= 1.27): kubectl then validates with
        # `fieldValidation=Strict` on the server (see :func:`strict_decoding_error`) instead of
        # its client-side validator, which needs the protobuf /openapi/v2 document.
        params.append(
            _param(
                "fieldValidation",
                "query",
                "fieldValidation instructs the server on how to handle objects in the request "
                "(POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: "
                "Ignore, Warn, Strict.",
            )
        )
    if patch:
        params.append(_param("force", "query", 'Force is going to "force" Apply requests.'))
        op["requestBody"] = {
            "content": {
                t: {"schema": _ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch")}
                for t in (
                    "application/apply-patch+yaml",
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                )
            },
            "required": True,
        }
    elif body_ref:
        op["requestBody"] = {"content": {"*/*": {"schema": _ref(body_ref)}}, "required": True}
    op["parameters"] = params
    return op


def _paths_for(gv_path: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, version, kind, plural, namespaced, subresources, model in _GV_RESOURCES[gv_path]:
        gvk = {"group": group, "version": version, "kind": kind}
        defn = definition_name(model)
        list_defn = definition_name(_LIST_MODELS[model])
        base = "/" + gv_path + ("/namespaces/{namespace}" if namespaced else "") + "/" + plural
        stem = ("Namespaced" if namespaced else "") + kind
        # Upstream's operation ids (listCoordinationV1NamespacedLease) name the group without
        # its ".k8s.io", and the core group "Core".
        group_words = group.removesuffix(".k8s.io").split(".") if group else ["core"]
        suffix = "".join(w.capitalize() for w in group_words) + version.capitalize()
        path_params = (
            [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}]
            if namespaced
            else []
        )
        paths[base] = {
            "get": _op("list", gvk, f"list{suffix}{stem}", None, list_defn),
            "post": _op("post", gvk, f"create{suffix}{stem}", defn, defn),
            "parameters": path_params,
        }
        item_params = [
            {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
            *path_params,
        ]
        paths[base + "/{name}"] = {
            "get": _op("get", gvk, f"read{suffix}{stem}", None, defn),
            "put": _op("put", gvk, f"replace{suffix}{stem}", defn, defn),
            "patch": _op("patch", gvk, f"patch{suffix}{stem}", None, defn, patch=True),
            "delete": _op(
                "delete",
                gvk,
                f"delete{suffix}{stem}",
                None,
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
            ),
            "parameters": item_params,
        }
        for sub in subresources:
            paths[base + "/{name}/" + sub] = {
                "get": _op("get", gvk, f"read{suffix}{stem}Status", None, defn),
                "put": _op("put", gvk, f"replace{suffix}{stem}Status", defn, defn),
                "patch": _op("patch", gvk, f"patch{suffix}{stem}Status", None, defn, patch=True),
                "parameters": item_params,
            }
    return paths


@cache
def _document(gv_path: str) -> str:
    """The serialized document (built once; callers get a fresh copy via json.loads)."""
    resources = _GV_RESOURCES[gv_path]
    roots = [r[6] for r in resources] + [_LIST_MODELS[r[6]] for r in resources]
    roots += ["V1Status", "V1DeleteOptions"]
    schemas = _schemas_for(roots)
    schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Patch"] = {
        "type": "object",
        "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
    }
    for group, version, kind, _plural, _ns, _subs, model in resources:
        schemas[definition_name(model)]["x-kubernetes-group-version-kind"] = _gvk(
            group, version, kind
        )
        schemas[definition_name(_LIST_MODELS[model])]["x-kubernetes-group-version-kind"] = _gvk(
            group, version, kind + "List"
        )
    # Status and DeleteOptions are served in every group version, as upstream lists them.
    versions = [("", "v1")] + sorted({(r[0], r[1]) for r in resources if r[0]})
    schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Status"]["x-kubernetes-group-version-kind"] = [
        {"group": g, "kind": "Status", "version": v} for g, v in versions
    ]
    schemas["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"][
        "x-kubernetes-group-version-kind"
    ] = [{"group": g, "kind": "DeleteOptions", "version": v} for g, v in versions]
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": _paths_for(gv_path),
        "components": {"schemas": dict(sorted(schemas.items()))},
    }
    return json.dumps(doc, sort_keys=False, separators=(",", ":"))


@cache
def _hashes() -> dict[str, str]:
    return {p: hashlib.sha512(_document(p).encode()).hexdigest().upper() for p in _GV_RESOURCES}


def openapi_v3_index() -> dict[str, Any]:
    """The ``/openapi/v3`` discovery document: one entry per served group version."""
    return {
        "paths": {
            p: {"serverRelativeURL": f"/openapi/v3/{p}?hash={h}"}
            for p, h in sorted(_hashes().items())
        }
    }


def openapi_v3_document(path: str) -> dict[str, Any] | None:
    """The OpenAPI 3.0 document of a group version (``"apis/batch/v1"``), or None if not served.

    Accepts the path with or without a leading ``/openapi/v3/`` and a ``?hash=`` suffix.
    """
    key = path.split("?", 1)[0].strip("/")
    if key.startswith("openapi/v3/"):
        key = key[len("openapi/v3/") :]
    if key not in _GV_RESOURCES:
        return None
    loaded: dict[str, Any] = json.loads(_document(key))
    return loaded


def openapi_v3_hash(path: str) -> str | None:
    """The stable hash of a group version's document (for ETag / cache headers)."""
    key = path.split("?", 1)[0].strip("/")
    if key.startswith("openapi/v3/"):
        key = key[len("openapi/v3/") :]
    return _hashes().get(key)


def openapi_v3_schemas(*models: str) -> dict[str, Any]:
    """The component schemas of client models (``"V1Deployment"``), built as the served documents are.

    For checking manifests of kinds kubesim does not serve (a Deployment, a ClusterRole) against
    the same OpenAPI rules as the served ones; keyed by :func:`definition_name`.
    """
    return _schemas_for(list(models))
