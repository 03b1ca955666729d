"""Registry strategies: what kube-apiserver does to an object between decoding and storing it.

Layer: kubesim (imports nothing from batchd; CronJob schedules are parsed by the standalone
``cronexpr``, batchd's parser too). Called by the kubesim server on every create and update (main
resource and ``/status``) after it assigned the server-owned metadata (uid, name,
namespace, creationTimestamp) and before it stores the object. Objects are plain JSON dicts as
received over HTTP; every function returns a new dict and never mutates its arguments.

Per kind this does, in upstream order: prune unknown fields (:mod:`kubesim.schema`), apply the
defaults of ``pkg/apis/*/v1/defaults.go``, run the strategy's ``PrepareForCreate`` /
``PrepareForUpdate`` (status and spec separation, generation, Job selector generation) and the
validation of ``pkg/apis/*/validation``. A failed validation raises ``422 Invalid`` with one
cause per field, worded as upstream's ``field.Error`` (clients and tests match on the text).

Rule ids (``# API-13``) are those of ``docs/kubesim.md`` (API rules).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, TypeGuard

import cronexpr
from kubesim import schema
from kubesim.codec import clone
from kubesim.errors import ApiError, Cause, invalid

Obj = dict[str, Any]

__all__ = [
    "prepare_create",
    "prepare_update",
]

# --------------------------------------------------------------------------------------------
# field.Error: upstream's error types and how their messages read
# --------------------------------------------------------------------------------------------

_OMIT = object()  # field.OmitValueType{}: the message carries no value


def _go_value(value: Any) -> str:
    """Render a bad value as Go's ``field.Error.ErrorBody`` does for the common types."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # Go %q for printable text
    # Go prints structs with %#v; JSON is the readable equivalent for dict-shaped values.
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass
class _Errs:
    """An ``field.ErrorList`` under construction."""

    causes: list[Cause] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.causes)

    def extend(self, other: _Errs) -> None:
        self.causes.extend(other.causes)

    def invalid(self, path: str, value: Any, detail: str = "") -> None:
        body = "Invalid value" if value is _OMIT else f"Invalid value: {_go_value(value)}"
        self.causes.append(
            Cause(path, "FieldValueInvalid", body + (f": {detail}" if detail else ""))
        )

    def required(self, path: str, detail: str = "") -> None:
        self.causes.append(
            Cause(path, "FieldValueRequired", "Required value" + (f": {detail}" if detail else ""))
        )

    def not_supported(self, path: str, value: Any, supported: list[str]) -> None:
        listed = ", ".join(json.dumps(s) for s in supported)
        self.causes.append(
            Cause(
                path,
                "FieldValueNotSupported",
                f"Unsupported value: {_go_value(value)}: supported values: {listed}",
            )
        )

    def forbidden(self, path: str, detail: str) -> None:
        self.causes.append(Cause(path, "FieldValueForbidden", f"Forbidden: {detail}"))

    def too_long(self, path: str, max_len: int) -> None:
        unit = "byte" if max_len == 1 else "bytes"
        self.causes.append(
            Cause(path, "FieldValueTooLong", f"Too long: may not be more than {max_len} {unit}")
        )

    def too_many(self, path: str, actual: int, max_items: int) -> None:
        self.causes.append(
            Cause(
                path,
                "FieldValueTooMany",
                f"Too many: {actual}: must have at most {max_items} items",
            )
        )

    def duplicate(self, path: str, value: Any) -> None:
        self.causes.append(
            Cause(path, "FieldValueDuplicate", f"Duplicate value: {_go_value(value)}")
        )

    def nonnegative(self, path: str, value: Any) -> None:
        # apivalidation.ValidateNonnegativeField
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            self.invalid(path, value, "must be greater than or equal to 0")

    def immutable(self, path: str, new: Any, old: Any) -> None:
        if not _sem_equal(new, old):
            self.invalid(path, new, "field is immutable")


# --------------------------------------------------------------------------------------------
# apimachinery name / label syntax (k8s.io/apimachinery/pkg/util/validation)
# --------------------------------------------------------------------------------------------


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, ex in enumerate(examples):
        if i > 0:
            out += " or "
        out += f"'{ex}', "
    return out + f"regex used for validation is '{fmt}')"


_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
_HTTP_PATH_RE = re.compile(_HTTP_PATH_FMT)
_QUALIFIED_NAME_ERR = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character",
    _QUALIFIED_NAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)


# The name checks are pure and see the same few label keys, values and names on every write.
_NAME_CACHE = 16_384


def _max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def _length_and_pattern(
    value: str, max_len: int, pattern: re.Pattern[str], msg: str, *examples: str
) -> tuple[str, ...]:
    errs: list[str] = []
    if len(value) > max_len:
        errs.append(_max_len_error(max_len))
    if not pattern.fullmatch(value):
        errs.append(_regex_error(msg, pattern.pattern, *examples))
    return tuple(errs)


@lru_cache(maxsize=_NAME_CACHE)
def is_dns1123_label(value: str) -> tuple[str, ...]:
    return _length_and_pattern(
        value,
        63,
        _DNS1123_LABEL_RE,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character",
        "my-name",
        "123-abc",
    )


@lru_cache(maxsize=_NAME_CACHE)
def is_dns1123_subdomain(value: str) -> tuple[str, ...]:
    return _length_and_pattern(
        value,
        253,
        _DNS1123_SUBDOMAIN_RE,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character",
        "example.com",
    )


@lru_cache(maxsize=_NAME_CACHE)
def is_qualified_name(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return (
            f"a qualified name {_QUALIFIED_NAME_ERR} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')",
        )
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len_error(63))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + _QUALIFIED_NAME_ERR)
    return tuple(errs)


@lru_cache(maxsize=_NAME_CACHE)
def is_valid_label_value(value: str) -> tuple[str, ...]:
    return _length_and_pattern(
        value,
        63,
        _LABEL_VALUE_RE,
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character",
        "MyValue",
        "my_value",
        "12345",
    )


def _is_path_segment_name(value: str) -> list[str]:
    # path.ValidatePathSegmentName: what every object name must satisfy to sit in a URL.
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


# --------------------------------------------------------------------------------------------
# Small helpers over JSON dicts
# --------------------------------------------------------------------------------------------


def _d(obj: Any, *keys: str) -> Any:
    """Walk nested dicts; None when any step is missing."""
    cur = obj
    for k in keys:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(k)
    return cur


def _ensure(obj: Obj, key: str) -> Obj:
    val = obj.get(key)
    if not isinstance(val, dict):
        val = {}
        obj[key] = val
    return val


def _norm(value: Any) -> Any:
    """Drop nulls and empty maps/lists, as Go's semantic equality treats nil and empty alike."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            nv = _norm(v)
            if nv is None or nv == {} or nv == []:
                continue
            out[k] = nv
        return out
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def _sem_equal(a: Any, b: Any) -> bool:
    # Equal values normalise equally: the plain comparison (in C) settles the common case of an
    # unchanged field without building two normalised copies.
    return a == b or bool(_norm(a) == _norm(b))


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# ObjectMeta validation (apimachinery ValidateObjectMeta / ValidateObjectMetaUpdate)
# --------------------------------------------------------------------------------------------

_TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
NameFn = Callable[[str], Sequence[str]]


def _validate_labels(labels: Any, path: str, errs: _Errs) -> None:
    if not isinstance(labels, dict):
        return
    for k, v in labels.items():
        for m in is_qualified_name(k):
            errs.invalid(path, k, m)
        for m in is_valid_label_value(v if isinstance(v, str) else str(v)):
            errs.invalid(path, v, m)


def _validate_annotations(annotations: Any, path: str, errs: _Errs) -> None:
    if not isinstance(annotations, dict):
        return
    total = 0
    for k, v in annotations.items():
        for m in is_qualified_name(k.lower()):
            errs.invalid(path, k, m)
        total += len(k) + len(v if isinstance(v, str) else str(v))
    if total > _TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.too_long(path, _TOTAL_ANNOTATION_SIZE_LIMIT)


def _validate_object_meta(meta: Obj, name_fn: NameFn, errs: _Errs) -> None:
    name = meta.get("name") or ""
    if not name:
        errs.required("metadata.name", "name or generateName is required")
    else:
        for m in name_fn(name):
            errs.invalid("metadata.name", name, m)
    # Every kind but Lease gets its generation from the server; a Lease keeps the client's.
    errs.nonnegative("metadata.generation", meta.get("generation"))
    _validate_labels(meta.get("labels"), "metadata.labels", errs)
    _validate_annotations(meta.get("annotations"), "metadata.annotations", errs)
    finalizers = meta.get("finalizers") or []
    for i, f in enumerate(finalizers):
        for m in is_qualified_name(f):
            errs.invalid(f"metadata.finalizers[{i}]", f, m)
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.invalid(
            "metadata.finalizers",
            finalizers,
            "finalizer orphan and foregroundDeletion cannot be both set",
        )
    controllers = []
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        p = f"metadata.ownerReferences[{i}]"
        api_version = ref.get("apiVersion") or ""
        if not api_version or api_version.endswith("/"):
            errs.invalid(p + ".apiVersion", api_version, "version must not be empty")
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errs.invalid(f"{p}.{key}", ref.get(key) or "", "must not be empty")
        if ref.get("controller") is True:
            controllers.append(f"{ref.get('kind')}/{ref.get('name')}")
    if len(controllers) > 1:
        errs.invalid(
            "metadata.ownerReferences",
            meta.get("ownerReferences"),
            f'Only one reference can have Controller set to true. Found "true" in references for '
            f"{controllers[0]} and {controllers[1]}",
        )


def _validate_object_meta_update(meta: Obj, old_meta: Obj, errs: _Errs) -> None:
    for key in ("name", "namespace"):
        if (meta.get(key) or "") != (old_meta.get(key) or ""):
            errs.invalid(f"metadata.{key}", meta.get(key) or "", "field is immutable")
    if old_meta.get("deletionTimestamp"):
        old_f = set(old_meta.get("finalizers") or [])
        extra = sorted(f for f in meta.get("finalizers") or [] if f not in old_f)
        if extra:
            listed = ", ".join(json.dumps(f) for f in extra)
            errs.forbidden(
                "metadata.finalizers",
                f"no new finalizers can be added if the object is being deleted, found new finalizers []string{{{listed}}}",
            )


def _carry_server_meta(new: Obj, old: Obj) -> None:
    """What the generic store's BeforeUpdate restores: fields no update may change."""
    meta = _ensure(new, "metadata")
    old_meta = old.get("metadata") or {}
    for key in (
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ):
        if key in old_meta:
            meta[key] = old_meta[key]  # scalars
        else:
            meta.pop(key, None)


# --------------------------------------------------------------------------------------------
# Pods: defaults (pkg/apis/core/v1/defaults.go) and validation
# --------------------------------------------------------------------------------------------


def _default_container(c: Obj) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if not c.get("imagePullPolicy"):
        image = c.get("image") or ""
        # Upstream: ":latest" or no tag (digests count as a tag) pulls Always.
        tag = image.rsplit("/", 1)[-1]
        if "@" in tag:
            c["imagePullPolicy"] = "IfNotPresent"
        elif ":" not in tag or tag.endswith(":latest"):
            c["imagePullPolicy"] = "Always"
        else:
            c["imagePullPolicy"] = "IfNotPresent"
    c.setdefault("resources", {})  # a non-pointer struct: always serialised, even empty
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for env in c.get("env") or []:
        ref = _d(env, "valueFrom", "fieldRef")
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")
    for probe_key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(probe_key)
        if isinstance(probe, dict):
            probe.setdefault("timeoutSeconds", 1)
            probe.setdefault("periodSeconds", 10)
            probe.setdefault("successThreshold", 1)
            probe.setdefault("failureThreshold", 3)
            if isinstance(probe.get("httpGet"), dict):
                probe["httpGet"].setdefault("path", "/")
                probe["httpGet"].setdefault("scheme", "HTTP")


def _default_pod_spec(spec: Obj) -> None:
    """SetDefaults_PodSpec plus the container defaults; applies to Pods and pod templates."""
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "default-scheduler"
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _default_container(c)


def _default_template(template: Any) -> None:
    if isinstance(template, dict):
        _default_pod_spec(_ensure(template, "spec"))


def _default_pod(pod: Obj) -> None:
    spec = _ensure(pod, "spec")
    _default_pod_spec(spec)
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    # SetDefaults_Pod: limits without requests make the requests equal to the limits.
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            res = c.get("resources") if isinstance(c, dict) else None
            if isinstance(res, dict) and isinstance(res.get("limits"), dict):
                requests = res.setdefault("requests", {})
                for name, qty in res["limits"].items():
                    requests.setdefault(name, qty)


_QTY_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QTY_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def _quantity(value: Any) -> Decimal | None:
    text = str(value).strip()
    m = _QTY_RE.match(text)
    if not m or m.group(2) not in _QTY_SUFFIX:
        return None
    try:
        return Decimal(m.group(1)) * _QTY_SUFFIX[m.group(2)]
    except InvalidOperation:
        return None


def _qos_class(spec: Obj) -> str:
    """qos.GetPodQOS: Guaranteed, Burstable or BestEffort from cpu/memory requests and limits."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    any_set = False
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        c_limits = {
            k: _quantity(v) for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")
        }
        c_requests = {
            k: _quantity(v)
            for k, v in (res.get("requests") or {}).items()
            if k in ("cpu", "memory")
        }
        for k, v in c_requests.items():
            if v is not None and v != 0:
                any_set = True
                requests[k] = requests.get(k, Decimal(0)) + v
        for k, v in c_limits.items():
            if v is not None and v != 0:
                any_set = True
                limits[k] = limits.get(k, Decimal(0)) + v
        if set(k for k, v in c_limits.items() if v) != {"cpu", "memory"}:
            guaranteed = False
    if not any_set:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


_RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_PULL_POLICIES = ["Always", "IfNotPresent", "Never"]


def _validate_pod_spec(spec: Any, path: str, errs: _Errs) -> None:
    if not isinstance(spec, dict):
        errs.required(path + ".containers")
        return
    containers = spec.get("containers") or []
    if not containers:
        errs.required(path + ".containers")
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            cp = f"{path}.{key}[{i}]"
            name = c.get("name") or ""
            if not name:
                errs.required(cp + ".name")
            else:
                for m in is_dns1123_label(name):
                    errs.invalid(cp + ".name", name, m)
                if name in names:
                    errs.duplicate(cp + ".name", name)
                names.add(name)
            if not (c.get("image") or "").strip():
                errs.required(cp + ".image")
            policy = c.get("imagePullPolicy")
            if policy and policy not in _PULL_POLICIES:
                errs.not_supported(cp + ".imagePullPolicy", policy, _PULL_POLICIES)
            for j, port in enumerate(c.get("ports") or []):
                cport = port.get("containerPort")
                if _is_int(cport) and not 1 <= cport <= 65535:
                    errs.invalid(
                        f"{cp}.ports[{j}].containerPort",
                        cport,
                        "must be between 1 and 65535, inclusive",
                    )
    restart = spec.get("restartPolicy") or ""
    if not restart:
        errs.required(path + ".restartPolicy")
    elif restart not in _RESTART_POLICIES:
        errs.not_supported(path + ".restartPolicy", restart, _RESTART_POLICIES)
    ads = spec.get("activeDeadlineSeconds")
    if _is_int(ads) and ads <= 0:
        errs.invalid(
            path + ".activeDeadlineSeconds", ads, "must be between 1 and 2147483647, inclusive"
        )
    tgps = spec.get("terminationGracePeriodSeconds")
    if _is_int(tgps) and tgps < 0:
        errs.invalid(
            path + ".terminationGracePeriodSeconds", tgps, "must be greater than or equal to 0"
        )


def _validate_pod_template(template: Any, path: str, errs: _Errs) -> None:
    template = template if isinstance(template, dict) else {}
    meta = template.get("metadata") or {}
    _validate_labels(meta.get("labels"), path + ".metadata.labels", errs)
    _validate_annotations(meta.get("annotations"), path + ".metadata.annotations", errs)
    _validate_pod_spec(template.get("spec"), path + ".spec", errs)


_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _validate_pod_update(new: Obj, old: Obj, errs: _Errs) -> None:
    spec = new.get("spec") or {}
    old_spec = clone(old.get("spec") or {})  # made to match ``spec`` where changes are allowed
    # Mutable: images, activeDeadlineSeconds (set or lowered), tolerations (additions only).
    for key in ("containers", "initContainers"):
        new_cs = spec.get(key) or []
        old_cs = old_spec.get(key) or []
        if len(new_cs) == len(old_cs):
            for nc, oc in zip(new_cs, old_cs, strict=True):
                if isinstance(nc, dict) and isinstance(oc, dict):
                    oc["image"] = nc.get("image")
    new_ads, old_ads = spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if new_ads != old_ads:
        if new_ads is None or (old_ads is not None and _is_int(new_ads) and new_ads > old_ads):
            errs.invalid(
                "spec.activeDeadlineSeconds",
                new_ads,
                "must be less than or equal to previous value",
            )
        old_spec["activeDeadlineSeconds"] = new_ads
    old_tol = old_spec.get("tolerations") or []
    new_tol = spec.get("tolerations") or []
    if all(t in new_tol for t in old_tol):
        old_spec["tolerations"] = new_tol
    if (
        old_spec.get("terminationGracePeriodSeconds", 0) < 0
        and spec.get("terminationGracePeriodSeconds") == 1
    ):
        old_spec["terminationGracePeriodSeconds"] = 1
    if not _sem_equal(spec, old_spec):
        changed = sorted(
            k for k in set(spec) | set(old_spec) if not _sem_equal(spec.get(k), old_spec.get(k))
        )
        errs.forbidden(
            "spec",
            _POD_UPDATE_FORBIDDEN + "\n  changed: " + ", ".join(f"spec.{k}" for k in changed),
        )
    for i, c in enumerate(spec.get("containers") or []):
        if not (c.get("image") or "").strip():
            errs.required(f"spec.containers[{i}].image")


def _validate_pod_status_update(new: Obj, old: Obj, errs: _Errs) -> None:
    old_phase = _d(old, "status", "phase")
    new_phase = _d(new, "status", "phase")
    # A terminal phase is final: the kubelet and the Job controller rely on it.
    if old_phase in ("Succeeded", "Failed") and new_phase != old_phase:
        errs.forbidden(
            "status.phase", f"cannot transition from terminal phase {old_phase} to {new_phase}"
        )


# --------------------------------------------------------------------------------------------
# Label selectors
# --------------------------------------------------------------------------------------------

_SELECTOR_OPS = ["In", "NotIn", "Exists", "DoesNotExist"]


def _validate_label_selector(sel: Any, path: str, errs: _Errs) -> None:
    if not isinstance(sel, dict):
        return
    _validate_labels(sel.get("matchLabels"), path + ".matchLabels", errs)
    for i, req in enumerate(sel.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op = req.get("operator")
        values = req.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                errs.required(p + ".values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.forbidden(
                    p + ".values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
        else:
            errs.invalid(p + ".operator", op, "not a valid selector operator")
        for m in is_qualified_name(req.get("key") or ""):
            errs.invalid(p + ".key", req.get("key") or "", m)


def _selector_matches(sel: Obj, labels: dict[str, str]) -> bool:
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for req in sel.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _selector_is_valid(sel: object) -> TypeGuard[Obj]:
    if not isinstance(sel, dict):
        return False
    return all(r.get("operator") in _SELECTOR_OPS for r in sel.get("matchExpressions") or [])


# --------------------------------------------------------------------------------------------
# Jobs: defaults (API-1 to API-7), selector generation (API-9, API-10),
# validation (API-11 to API-20, API-26 to API-47)
# --------------------------------------------------------------------------------------------

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
_MAX_INT32 = 2**31 - 1
_MAX_PARALLELISM_INDEXED = 100_000
_MAX_FAILED_INDEXES = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000
_PARALLELISM_HIGH_COMPLETIONS = 10_000
_MAX_MANAGED_BY = 63
_MAX_PFP_RULES = 20
_MAX_EXIT_CODES = 255
_MAX_POD_CONDITIONS = 20
_MAX_SUCCESS_RULES = 20
_MAX_SUCCEEDED_INDEXES_LEN = 64 * 1024


def _default_job_spec_fields(spec: Obj) -> None:
    """SetDefaults_Job's spec part (API-1 to API-6)."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1  # API-1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1  # API-2
    if spec.get("backoffLimit") is None:
        # API-3: per-index backoff makes the global limit effectively unbounded
        spec["backoffLimit"] = _MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"  # API-4
    if spec.get("suspend") is None:
        spec["suspend"] = False
    pfp = spec.get("podFailurePolicy")
    if isinstance(pfp, dict):
        for rule in pfp.get("rules") or []:
            for pattern in rule.get("onPodConditions") or []:
                if not pattern.get("status"):
                    pattern["status"] = "True"  # API-6
    if spec.get("podReplacementPolicy") is None:
        # API-5
        spec["podReplacementPolicy"] = "Failed" if pfp is not None else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False


def _default_job(job: Obj) -> None:
    spec = _ensure(job, "spec")
    _default_job_spec_fields(spec)
    _default_template(spec.get("template"))


def _generate_selector(job: Obj) -> None:
    """generateSelectorIfNeeded (API-9, API-10)."""
    spec = job["spec"]
    if spec.get("manualSelector") is True:
        return
    meta = job.get("metadata") or {}
    template = _ensure(spec, "template")
    t_labels = _ensure(_ensure(template, "metadata"), "labels")
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        t_labels.setdefault(key, meta.get("name") or "")
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        t_labels.setdefault(key, meta.get("uid") or "")
    selector = _ensure(spec, "selector")
    match_labels = _ensure(selector, "matchLabels")
    match_labels.setdefault(CONTROLLER_UID_LABEL, meta.get("uid") or "")


def _copy_template_labels(job: Obj) -> None:
    # API-7. Upstream's defaulter copies the template's label map when the Job has none; the
    # map is shared with the template (and defaults run again when the object is read back from
    # storage), so the Job ends up carrying the generated job-name/controller-uid labels too, as
    # `kubectl get job -o yaml` on a real cluster shows.
    meta = _ensure(job, "metadata")
    t_labels = _d(job, "spec", "template", "metadata", "labels")
    if t_labels and not meta.get("labels"):
        meta["labels"] = dict(t_labels)


def _validate_generated_selector(job: Obj, require_prefixed: bool, errs: _Errs) -> None:
    spec = job.get("spec") or {}
    if spec.get("manualSelector") is True or not isinstance(spec.get("selector"), dict):
        return
    meta = job.get("metadata") or {}
    uid = meta.get("uid") or ""
    name = meta.get("name") or ""
    if not uid:
        errs.required("metadata.uid")
    t_labels = _d(spec, "template", "metadata", "labels") or {}
    wanted = [(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)]
    if require_prefixed:
        wanted += [(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]
    for key, value in wanted:
        p = f"spec.template.metadata.labels[{key}]"
        if key not in t_labels:
            errs.required(p, value)
        elif t_labels[key] != value:
            errs.invalid(p, t_labels, f"must be '{value}'")
    expected = dict(wanted)
    if _selector_is_valid(spec["selector"]) and not _selector_matches(spec["selector"], expected):
        errs.invalid("spec.selector", spec["selector"], "`selector` not auto-generated")


def _parse_index_interval(text: str, completions: int) -> tuple[int, int]:
    parts = text.split("-")
    if len(parts) > 2:
        raise ValueError(
            f"the fragment \"{text}\" violates the requirement that an index interval can have at most two parts separated by '-'"
        )

    def atoi(s: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]+", s):
            raise ValueError(f'cannot convert string to integer for index: "{s}"')
        return int(s)

    x = atoi(parts[0])
    if x >= completions:
        raise ValueError(f'too large index: "{parts[0]}"')
    if len(parts) == 1:
        return x, x
    y = atoi(parts[1])
    if y >= completions:
        raise ValueError(f'too large index: "{parts[1]}"')
    if x >= y:
        raise ValueError(f"non-increasing order, previous: {x}, current: {y}")
    return x, y


def _validate_indexes_format(text: str, completions: int) -> int:
    """validateIndexesFormat (JOB-48, API-36): returns the number of indexes or raises ValueError."""
    if not text:
        return 0
    last: int | None = None
    total = 0
    for interval in text.split(","):
        x, y = _parse_index_interval(interval, completions)
        if last is not None and last >= x:
            raise ValueError(f"non-increasing order, previous: {last}, current: {x}")
        total += y - x + 1
        last = y
    return total


def _index_set(text: str, completions: int) -> set[int]:
    out: set[int] = set()
    for interval in (text or "").split(","):
        try:
            x, y = _parse_index_interval(interval, completions)
        except ValueError:
            continue
        out.update(range(x, y + 1))
    return out


def _validate_job_spec(spec: Obj, path: str, errs: _Errs) -> None:
    """validateJobSpec: shared by Jobs and CronJob job templates (API-13 to API-18, API-24, API-26, API-27)."""
    for key in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ):
        errs.nonnegative(f"{path}.{key}", spec.get(key))  # API-24
    completions = spec.get("completions")
    parallelism = spec.get("parallelism")
    blpi = spec.get("backoffLimitPerIndex")
    mfi = spec.get("maxFailedIndexes")
    if mfi is not None and blpi is None:
        errs.required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified")
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        _validate_managed_by(managed_by, f"{path}.managedBy", errs)
    mode = spec.get("completionMode")
    if mode is not None:
        if mode not in ("NonIndexed", "Indexed"):
            errs.not_supported(f"{path}.completionMode", mode, ["NonIndexed", "Indexed"])
        if mode == "Indexed":  # API-14, API-15
            if completions is None:
                errs.required(f"{path}.completions", "when completion mode is Indexed")
            if _is_int(parallelism) and parallelism > _MAX_PARALLELISM_INDEXED:
                errs.invalid(
                    f"{path}.parallelism",
                    parallelism,
                    f"must be less than or equal to {_MAX_PARALLELISM_INDEXED} when completion mode is Indexed",
                )
            if _is_int(completions) and _is_int(mfi) and mfi > completions:
                errs.invalid(
                    f"{path}.maxFailedIndexes", mfi, "must be less than or equal to completions"
                )
            if _is_int(mfi) and mfi > _MAX_FAILED_INDEXES:
                errs.invalid(
                    f"{path}.maxFailedIndexes",
                    mfi,
                    f"must be less than or equal to {_MAX_FAILED_INDEXES}",
                )
            if _is_int(completions) and completions > _COMPLETIONS_SOFT_LIMIT and blpi is not None:
                suffix = f"when completions are above {_COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                if mfi is None:
                    errs.required(
                        f"{path}.maxFailedIndexes",
                        f"must be specified when completions is above {_COMPLETIONS_SOFT_LIMIT}",
                    )
                if _is_int(parallelism) and parallelism > _PARALLELISM_HIGH_COMPLETIONS:
                    errs.invalid(
                        f"{path}.parallelism",
                        parallelism,
                        f"must be less than or equal to {_PARALLELISM_HIGH_COMPLETIONS} {suffix}",
                    )
                if _is_int(mfi) and mfi > _PARALLELISM_HIGH_COMPLETIONS:
                    errs.invalid(
                        f"{path}.maxFailedIndexes",
                        mfi,
                        f"must be less than or equal to {_PARALLELISM_HIGH_COMPLETIONS} {suffix}",
                    )
    if mode in (None, "NonIndexed"):
        if blpi is not None:
            errs.invalid(f"{path}.backoffLimitPerIndex", blpi, "requires indexed completion mode")
        if mfi is not None:
            errs.invalid(f"{path}.maxFailedIndexes", mfi, "requires indexed completion mode")
    pfp = spec.get("podFailurePolicy")
    if pfp is not None:
        _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy", errs)
    sp = spec.get("successPolicy")
    if sp is not None:
        if mode != "Indexed":
            errs.invalid(f"{path}.successPolicy", sp, "requires indexed completion mode")
        else:
            _validate_success_policy(spec, f"{path}.successPolicy", errs)
    prp = spec.get("podReplacementPolicy")
    if prp is not None:  # API-17
        if pfp is not None:
            if prp != "Failed":
                errs.not_supported(f"{path}.podReplacementPolicy", prp, ["Failed"])
        elif prp not in ("Failed", "TerminatingOrFailed"):
            errs.not_supported(
                f"{path}.podReplacementPolicy", prp, ["Failed", "TerminatingOrFailed"]
            )
    template = spec.get("template")
    _validate_pod_template(template, f"{path}.template", errs)
    # API-13: pod defaulting turns a missing restartPolicy into Always, so both read
    # as "required" here.
    restart = _d(template, "spec", "restartPolicy") or ""
    rp_path = f"{path}.template.spec.restartPolicy"
    if restart in ("", "Always"):
        errs.required(rp_path, 'valid values: "OnFailure", "Never"')
    elif restart not in ("OnFailure", "Never"):
        errs.not_supported(rp_path, restart, ["OnFailure", "Never"])
    elif pfp is not None and restart != "Never":
        errs.invalid(
            rp_path, restart, 'only "Never" is supported when podFailurePolicy is specified'
        )


def _validate_managed_by(value: Any, path: str, errs: _Errs) -> None:
    """API-26, API-27: a domain-prefixed path of at most 63 characters with exactly one '/'."""
    if not isinstance(value, str) or not value:
        errs.required(path)
        return
    segments = value.split("/", 1)
    if len(segments) != 2 or not segments[0] or not segments[1] or "/" in segments[1]:
        # API-27: the newest API rule admits exactly one '/', which IsDomainPrefixedPath's
        # wording already describes ("acme.io/foo").
        errs.invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')
    else:
        host, rest = segments
        for m in is_dns1123_subdomain(host):
            errs.invalid(path, host, m)
        if not _HTTP_PATH_RE.fullmatch(rest):
            errs.invalid(path, rest, _regex_error("Invalid path", _HTTP_PATH_FMT))
    if len(value) > _MAX_MANAGED_BY:
        errs.too_long(path, _MAX_MANAGED_BY)


_PFP_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
_PFP_OPERATORS = ["In", "NotIn"]
_CONDITION_STATUSES = ["False", "True", "Unknown"]


def _validate_pod_failure_policy(spec: Obj, path: str, errs: _Errs) -> None:
    """API-16: the structural rules of podFailurePolicy."""
    rules = _d(spec, "podFailurePolicy", "rules") or []
    if len(rules) > _MAX_PFP_RULES:
        errs.too_many(path + ".rules", len(rules), _MAX_PFP_RULES)
    tspec = _d(spec, "template", "spec") or {}
    names = {
        c.get("name") for c in (tspec.get("containers") or []) + (tspec.get("initContainers") or [])
    }
    for i, rule in enumerate(rules):
        rp = f"{path}.rules[{i}]"
        action = rule.get("action") or ""
        if not action:
            errs.required(
                rp + ".action", "valid values: " + json.dumps(_PFP_ACTIONS).replace(",", " ")[1:-1]
            )
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                errs.invalid(rp + ".action", action, "requires the backoffLimitPerIndex to be set")
        elif action not in _PFP_ACTIONS:
            errs.not_supported(rp + ".action", action, _PFP_ACTIONS)
        on_exit = rule.get("onExitCodes")
        on_conds = rule.get("onPodConditions") or []
        if on_exit is not None:
            ep = rp + ".onExitCodes"
            op = on_exit.get("operator") or ""
            if not op:
                errs.required(ep + ".operator", 'valid values: ["In" "NotIn"]')
            elif op not in _PFP_OPERATORS:
                errs.not_supported(ep + ".operator", op, _PFP_OPERATORS)
            cname = on_exit.get("containerName")
            if cname is not None and cname not in names:
                errs.invalid(
                    ep + ".containerName",
                    cname,
                    "must be one of the container or initContainer names in the pod template",
                )
            values = on_exit.get("values") or []
            if not values:
                errs.invalid(ep + ".values", values, "at least one value is required")
            elif len(values) > _MAX_EXIT_CODES:
                errs.too_many(ep + ".values", len(values), _MAX_EXIT_CODES)
            seen: set[int] = set()
            for j, v in enumerate(values):
                if op == "In" and v == 0:
                    errs.invalid(f"{ep}.values[{j}]", v, "must not be 0 for the In operator")
                if v in seen:
                    errs.duplicate(f"{ep}.values[{j}]", v)
                seen.add(v)
            if any(values[j - 1] > values[j] for j in range(1, len(values))):
                errs.invalid(ep + ".values", values, "must be ordered")
        if on_conds:
            cp = rp + ".onPodConditions"
            if len(on_conds) > _MAX_POD_CONDITIONS:
                errs.too_many(cp, len(on_conds), _MAX_POD_CONDITIONS)
            for j, pattern in enumerate(on_conds):
                for m in is_qualified_name(pattern.get("type") or ""):
                    errs.invalid(f"{cp}[{j}].type", pattern.get("type") or "", m)
                status = pattern.get("status") or ""
                if not status:
                    errs.required(f"{cp}[{j}].status", 'valid values: ["False" "True" "Unknown"]')
                elif status not in _CONDITION_STATUSES:
                    errs.not_supported(f"{cp}[{j}].status", status, _CONDITION_STATUSES)
        if on_exit is not None and on_conds:
            errs.invalid(
                rp, _OMIT, "specifying both OnExitCodes and OnPodConditions is not supported"
            )
        if on_exit is None and not on_conds:
            errs.invalid(rp, _OMIT, "specifying one of OnExitCodes and OnPodConditions is required")


def _validate_success_policy(spec: Obj, path: str, errs: _Errs) -> None:
    """API-18."""
    rules = _d(spec, "successPolicy", "rules") or []
    completions = c if _is_int(c := spec.get("completions")) else 0
    if not rules:
        errs.required(
            path + ".rules",
            "at least one rules must be specified when the successPolicy is specified",
        )
    if len(rules) > _MAX_SUCCESS_RULES:
        errs.too_many(path + ".rules", len(rules), _MAX_SUCCESS_RULES)
    for i, rule in enumerate(rules):
        rp = f"{path}.rules[{i}]"
        count = rule.get("succeededCount")
        indexes = rule.get("succeededIndexes")
        if count is None and indexes is None:
            errs.required(
                rp, "at least one of succeededCount or succeededIndexes must be specified"
            )
        total = 0
        if indexes is not None:
            if len(indexes) > _MAX_SUCCEEDED_INDEXES_LEN:
                errs.too_long(rp + ".succeededIndexes", _MAX_SUCCEEDED_INDEXES_LEN)
            try:
                total = _validate_indexes_format(indexes, completions)
            except ValueError as e:
                errs.invalid(
                    rp + ".succeededIndexes", indexes, f"error parsing succeededIndexes: {e}"
                )
        if _is_int(count):
            errs.nonnegative(rp + ".succeededCount", count)
            if count > completions:
                errs.invalid(
                    rp + ".succeededCount",
                    count,
                    f"must be less than or equal to {completions} (the number of specified completions)",
                )
            if indexes is not None and count > total:
                errs.invalid(
                    rp + ".succeededCount",
                    count,
                    f"must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)",
                )


def _validate_job(job: Obj, require_prefixed: bool, errs: _Errs) -> None:
    """ValidateJob (API-11 to API-18, API-25)."""
    meta = job.get("metadata") or {}
    _validate_object_meta(meta, is_dns1123_subdomain, errs)
    _validate_generated_selector(job, require_prefixed, errs)
    spec = job.get("spec") or {}
    _validate_job_spec(spec, "spec", errs)
    selector = spec.get("selector")
    if selector is None:
        errs.required("spec.selector")
    else:
        _validate_label_selector(selector, "spec.selector", errs)
    if _selector_is_valid(selector):  # API-12
        t_labels = _d(spec, "template", "metadata", "labels") or {}
        if not _selector_matches(selector, t_labels):
            errs.invalid(
                "spec.template.metadata.labels",
                t_labels,
                "`selector` does not match template `labels`",
            )
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed" and _is_int(completions) and completions > 0:
        # API-14: the controller names pods' hostnames <name>-<index>.
        hostname = f"{meta.get('name') or ''}-{completions - 1}"
        if is_dns1123_label(hostname):
            errs.invalid(
                "metadata.name",
                meta.get("name") or "",
                f"will not able to create pod with invalid DNS label: {hostname}",
            )


def _validate_job_update(job: Obj, old: Obj, errs: _Errs) -> None:
    """ValidateJobSpecUpdate (API-19, API-20, API-28)."""
    spec = job.get("spec") or {}
    old_spec = old.get("spec") or {}
    # API-19: completions is immutable except for elastic Indexed Jobs.
    if spec.get("completionMode") != "Indexed":
        errs.immutable("spec.completions", spec.get("completions"), old_spec.get("completions"))
    elif (
        spec.get("completions") != old_spec.get("completions")
        and spec.get("completions") is not None
    ):
        if spec.get("completions") != spec.get("parallelism"):
            errs.invalid(
                "spec.completions",
                spec.get("completions"),
                "can only be modified in tandem with spec.parallelism",
            )
    errs.immutable("spec.selector", spec.get("selector"), old_spec.get("selector"))
    # API-20: the template may change only its scheduling directives, and only while the old
    # Job is suspended and has never started.
    template = spec.get("template") or {}
    old_template = old_spec.get("template") or {}
    if old_spec.get("suspend") is True and _d(old, "status", "startTime") is None:
        # The allowed changes are copied into (a copy of) the old template before comparing.
        old_template = clone(old_template)
        t_spec = template.get("spec") or {}
        o_spec = old_template.setdefault("spec", {})
        new_aff = t_spec.get("affinity")
        old_aff = o_spec.get("affinity")
        if new_aff is None and old_aff is not None:
            old_aff.pop("nodeAffinity", None)
            if not _norm(old_aff):
                o_spec.pop("affinity", None)
        elif new_aff is not None and old_aff is None:
            o_spec["affinity"] = {"nodeAffinity": new_aff.get("nodeAffinity")}
        elif new_aff is not None and old_aff is not None:
            old_aff["nodeAffinity"] = new_aff.get("nodeAffinity")
        for key in ("nodeSelector", "tolerations", "schedulingGates"):
            o_spec[key] = t_spec.get(key)
        o_meta = old_template.setdefault("metadata", {})
        t_meta = template.get("metadata") or {}
        for key in ("labels", "annotations"):
            o_meta[key] = t_meta.get(key)
    errs.immutable("spec.template", template, old_template)
    for key in (
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ):
        errs.immutable(f"spec.{key}", spec.get(key), old_spec.get(key))  # API-19, API-28


def _conditions_true(job: Obj, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True"
        for c in _d(job, "status", "conditions") or []
    )


def _is_finished(job: Obj) -> bool:
    return _conditions_true(job, "Complete") or _conditions_true(job, "Failed")


def _validate_job_status_update(job: Obj, old: Obj, errs: _Errs) -> None:
    """ValidateJobStatusUpdate with the JobManagedBy options of the Job status strategy (API-29 to API-47).

    Most checks run only when a field they involve changed in this write (API-31), so a Job
    whose stored status is already odd can still receive unrelated status writes.
    """
    st = job.get("status") or {}
    ost = old.get("status") or {}
    spec = job.get("spec") or {}
    sp = "status"

    def num(s: Obj, key: str) -> int:
        v = s.get(key)
        return v if _is_int(v) else 0

    indexed = spec.get("completionMode") == "Indexed"
    complete, old_complete = _conditions_true(job, "Complete"), _conditions_true(old, "Complete")
    failed, old_failed = _conditions_true(job, "Failed"), _conditions_true(old, "Failed")
    ft, old_ft = _conditions_true(job, "FailureTarget"), _conditions_true(old, "FailureTarget")
    scm, old_scm = (
        _conditions_true(job, "SuccessCriteriaMet"),
        _conditions_true(old, "SuccessCriteriaMet"),
    )
    finished = complete or failed
    finished_changed = finished != (old_complete or old_failed)
    complete_changed = complete != old_complete
    failed_changed = failed != old_failed
    ft_changed = ft != old_ft
    scm_changed = scm != old_scm
    ci, oci = st.get("completedIndexes") or "", ost.get("completedIndexes") or ""
    fi, ofi = st.get("failedIndexes"), ost.get("failedIndexes")
    ci_changed = ci != oci
    fi_changed = fi != ofi
    active_changed = num(st, "active") != num(ost, "active")
    ready_changed = st.get("ready") != ost.get("ready")
    terminating_changed = st.get("terminating") != ost.get("terminating")
    start, old_start = _parse_time(st.get("startTime")), _parse_time(ost.get("startTime"))
    ct, old_ct = _parse_time(st.get("completionTime")), _parse_time(ost.get("completionTime"))
    start_changed = start != old_start
    ct_changed = ct != old_ct
    uncounted = st.get("uncountedTerminatedPods")
    uncounted_changed = not _sem_equal(uncounted, ost.get("uncountedTerminatedPods"))

    # validateJobStatus — always-on checks (API-29)
    for key in ("active", "succeeded", "failed", "ready", "terminating"):
        errs.nonnegative(f"{sp}.{key}", st.get(key))
    if isinstance(uncounted, dict):
        seen: set[str] = set()
        for kind in ("succeeded", "failed"):
            for i, uid in enumerate(uncounted.get(kind) or []):
                p = f"{sp}.uncountedTerminatedPods.{kind}[{i}]"
                if not uid:
                    errs.invalid(p, uid or "", "must not be empty")
                elif uid in seen:
                    errs.duplicate(p, uid)
                else:
                    seen.add(uid)
    cond = f"{sp}.conditions"
    if (complete_changed or failed_changed) and complete and failed:  # API-35
        errs.invalid(cond, _OMIT, "cannot set Complete=True and Failed=true conditions")
    if (complete_changed or ft_changed) and complete and ft:
        errs.invalid(cond, _OMIT, "cannot set Complete=True and FailureTarget=true conditions")
    if (complete_changed or ct_changed) and st.get("completionTime") and not complete:  # API-44
        errs.invalid(
            f"{sp}.completionTime",
            st.get("completionTime"),
            "cannot set completionTime when there is no Complete=True condition",
        )
    if (complete_changed or ct_changed) and not st.get("completionTime") and complete:
        errs.required(f"{sp}.completionTime", "completionTime is required for Complete jobs")
    if (start_changed or ct_changed) and start and ct and ct < start:  # API-42
        errs.invalid(
            f"{sp}.completionTime",
            st.get("completionTime"),
            "completionTime cannot be set before startTime",
        )
    if (failed_changed or fi_changed) and failed and not ft:  # API-45
        errs.invalid(
            cond, _OMIT, "cannot set Failed=True condition without the FailureTarget=true condition"
        )
    if (complete_changed or scm_changed) and complete and not scm:
        errs.invalid(
            cond,
            _OMIT,
            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        )
    if (finished_changed or active_changed) and finished and num(st, "active") > 0:  # API-38
        errs.invalid(f"{sp}.active", num(st, "active"), "active>0 is invalid for finished job")
    if (finished_changed or start_changed) and finished and not st.get("startTime"):  # API-39
        errs.required(f"{sp}.startTime", "startTime is required for finished job")
    if (
        (finished_changed or uncounted_changed) and finished and isinstance(uncounted, dict)
    ):  # API-40
        if (uncounted.get("succeeded") or []) or (uncounted.get("failed") or []):
            errs.invalid(
                f"{sp}.uncountedTerminatedPods",
                uncounted,
                "uncountedTerminatedPods needs to be empty for finished job",
            )
    completions = spec.get("completions")
    if ci_changed and _is_int(completions):  # API-36
        try:
            _validate_indexes_format(ci, completions)
        except ValueError as e:
            errs.invalid(f"{sp}.completedIndexes", ci, f"error parsing completedIndexes: {e}")
    if (
        fi_changed
        and _is_int(completions)
        and spec.get("backoffLimitPerIndex") is not None
        and fi is not None
    ):
        try:
            _validate_indexes_format(fi, completions)
        except ValueError as e:
            errs.invalid(f"{sp}.failedIndexes", fi, f"error parsing failedIndexes: {e}")
    if ci_changed and ci and not indexed:
        errs.invalid(
            f"{sp}.completedIndexes",
            ci,
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        )
    if fi_changed and spec.get("backoffLimitPerIndex") is None and fi is not None:  # API-37
        errs.invalid(
            f"{sp}.failedIndexes",
            fi,
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        )
    if (fi_changed or ci_changed) and _is_int(completions) and fi:
        overlap = _index_set(ci, completions) & _index_set(fi, completions)
        if overlap:
            errs.invalid(
                f"{sp}.failedIndexes",
                fi,
                f"failedIndexes and completedIndexes overlap at index: {min(overlap)}",
            )
    terminating = st.get("terminating")
    if (
        (finished_changed or terminating_changed)
        and finished
        and _is_int(terminating)
        and terminating > 0
    ):  # API-46
        errs.invalid(f"{sp}.terminating", terminating, "terminating>0 is invalid for finished job")
    ready = st.get("ready")
    if (
        (ready_changed or active_changed) and _is_int(ready) and ready > num(st, "active")
    ):  # API-47
        errs.invalid(f"{sp}.ready", ready, "cannot set more ready pods than active")
    if scm and failed:  # API-29
        errs.invalid(cond, _OMIT, "cannot set SuccessCriteriaMet=True and Failed=true conditions")
    if scm and ft:
        errs.invalid(
            cond, _OMIT, "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"
        )
    if spec.get("successPolicy") is not None and not scm and complete:
        errs.invalid(
            cond,
            _OMIT,
            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
        )

    # ValidateJobStatusUpdate — transitions
    for ctype in ("Failed", "Complete", "FailureTarget"):  # API-34
        if _conditions_true(old, ctype) and not _conditions_true(job, ctype):
            errs.invalid(cond, _OMIT, f"cannot disable the terminal {ctype}=True condition")
    if num(st, "failed") < num(ost, "failed"):  # API-32
        errs.invalid(f"{sp}.failed", num(st, "failed"), "cannot decrease the failed counter")
    elastic = indexed and spec.get("completions") == spec.get("parallelism")
    if not elastic and num(st, "succeeded") < num(ost, "succeeded"):  # API-33
        errs.invalid(
            f"{sp}.succeeded", num(st, "succeeded"), "cannot decrease the succeeded counter"
        )
    if ct is not None and old_ct is not None and ct != old_ct:  # API-43
        errs.invalid(
            f"{sp}.completionTime", st.get("completionTime"), "completionTime cannot be mutated"
        )
    if old_start is not None and start != old_start and spec.get("suspend") is not True:  # API-41
        errs.required(f"{sp}.startTime", "startTime cannot be removed for unsuspended job")
    if old_scm and not scm:
        errs.invalid(cond, _OMIT, "cannot disable the SuccessCriteriaMet=True condition")
    if old_complete and not old_scm and scm:
        errs.invalid(
            cond,
            _OMIT,
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        )


def _job_create(job: Obj, now: datetime, errs: _Errs) -> None:
    _default_job(job)
    job["status"] = {}  # API-8: status is cleared on create
    _ensure(job, "metadata")["generation"] = 1
    _generate_selector(job)
    _copy_template_labels(job)
    _validate_job(job, True, errs)


def _require_prefixed_on_update(old: Obj) -> bool:
    # API-11: the prefixed labels are required on update only if the old template had both.
    t_labels = _d(old, "spec", "template", "metadata", "labels") or {}
    return JOB_NAME_LABEL in t_labels and CONTROLLER_UID_LABEL in t_labels


def _job_update(job: Obj, old: Obj, errs: _Errs) -> None:
    _default_job(job)
    job["status"] = clone(old.get("status") or {})  # API-22
    _bump_generation(job, old)
    _copy_template_labels(job)
    _validate_job(job, _require_prefixed_on_update(old), errs)
    _validate_job_update(job, old, errs)


def _job_status_update(job: Obj, old: Obj, errs: _Errs) -> None:
    job["spec"] = clone(old.get("spec") or {})  # API-22
    _validate_job_status_update(job, old, errs)


def _bump_generation(new: Obj, old: Obj) -> None:
    # Any spec change increments metadata.generation (API-21).
    meta = _ensure(new, "metadata")
    old_gen = _d(old, "metadata", "generation")
    base = old_gen if _is_int(old_gen) else 1
    meta["generation"] = base + 1 if not _sem_equal(new.get("spec"), old.get("spec")) else base


# --------------------------------------------------------------------------------------------
# CronJobs: defaults (API-48), validation (API-50 to API-57, API-13, API-24)
# --------------------------------------------------------------------------------------------

_TZ_PART_RE = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")
_CONCURRENCY = ["Allow", "Forbid", "Replace"]


def _default_cronjob(cj: Obj) -> None:
    spec = _ensure(cj, "spec")
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"  # API-48
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("successfulJobsHistoryLimit") is None:
        spec["successfulJobsHistoryLimit"] = 3
    if spec.get("failedJobsHistoryLimit") is None:
        spec["failedJobsHistoryLimit"] = 1
    # Upstream's generated defaulter walks into the job template's pod spec (pod and container
    # defaults) but not into JobSpec: the Job defaults apply when the controller creates the Job.
    _default_template(_d(spec, "jobTemplate", "spec", "template"))


def _validate_time_zone(tz: Any, path: str, errs: _Errs) -> None:
    """API-53."""
    if tz is None:
        return
    if tz == "":
        errs.invalid(path, tz, "timeZone must be nil or non-empty string")
        return
    for part in tz.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART_RE.match(part):
            errs.invalid(path, tz, f"unknown time zone {tz}")
            return
    if tz.lower() == "local":
        errs.invalid(
            path,
            tz,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        )
    try:
        cronexpr.load_location(tz)
    except LookupError as e:
        if tz.lower() != "local":
            errs.invalid(path, tz, str(e))


def _validate_cronjob_spec(spec: Obj, old_spec: Obj | None, errs: _Errs) -> None:
    schedule = spec.get("schedule") or ""
    if not schedule:
        errs.required("spec.schedule")  # API-51
    else:
        try:  # the parser batchd evaluates schedules with, in robfig's words (API-51)
            cronexpr.parse_standard(schedule)
        except cronexpr.ParseError as e:
            errs.invalid("spec.schedule", schedule, str(e))
        allow_tz = old_spec is not None and "TZ" in (old_spec.get("schedule") or "")
        if allow_tz and "TZ" in schedule and spec.get("timeZone") is not None:  # API-57
            errs.invalid(
                "spec.schedule",
                schedule,
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            )
        elif not allow_tz and "TZ" in schedule:
            errs.invalid(
                "spec.schedule",
                schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            )
    errs.nonnegative("spec.startingDeadlineSeconds", spec.get("startingDeadlineSeconds"))  # API-52
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        _validate_time_zone(spec.get("timeZone"), "spec.timeZone", errs)  # API-53
    policy = spec.get("concurrencyPolicy") or ""
    if not policy:
        errs.required("spec.concurrencyPolicy")  # API-54
    elif policy not in _CONCURRENCY:
        errs.not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY)
    job_spec = _d(spec, "jobTemplate", "spec") or {}
    _validate_job_spec(job_spec, "spec.jobTemplate.spec", errs)
    if job_spec.get("selector") is not None:  # API-56
        errs.invalid(
            "spec.jobTemplate.spec.selector",
            job_spec.get("selector"),
            "`selector` will be auto-generated",
        )
    if job_spec.get("manualSelector") is True:
        errs.not_supported("spec.jobTemplate.spec.manualSelector", True, ["nil", "false"])
    errs.nonnegative(
        "spec.successfulJobsHistoryLimit", spec.get("successfulJobsHistoryLimit")
    )  # API-55
    errs.nonnegative("spec.failedJobsHistoryLimit", spec.get("failedJobsHistoryLimit"))


def _cronjob_create(cj: Obj, now: datetime, errs: _Errs) -> None:
    _default_cronjob(cj)
    cj["status"] = {}
    _ensure(cj, "metadata")["generation"] = 1
    meta = cj["metadata"]
    _validate_object_meta(meta, is_dns1123_subdomain, errs)
    _validate_cronjob_spec(cj.get("spec") or {}, None, errs)
    name = meta.get("name") or ""
    if len(name) > 52:  # API-50: create only; 63 minus the 11-character "-<minutes>" suffix
        errs.invalid("metadata.name", name, "must be no more than 52 characters")


def _cronjob_update(cj: Obj, old: Obj, errs: _Errs) -> None:
    _default_cronjob(cj)
    cj["status"] = clone(old.get("status") or {})
    _bump_generation(cj, old)
    _validate_object_meta(cj["metadata"], is_dns1123_subdomain, errs)
    _validate_cronjob_spec(cj.get("spec") or {}, old.get("spec") or {}, errs)


def _cronjob_status_update(cj: Obj, old: Obj, errs: _Errs) -> None:
    # Upstream's CronJob status strategy copies the spec and validates nothing else.
    cj["spec"] = clone(old.get("spec") or {})


# --------------------------------------------------------------------------------------------
# Pods, Namespaces, Events
# --------------------------------------------------------------------------------------------


def _pod_create(pod: Obj, now: datetime, errs: _Errs) -> None:
    _default_pod(pod)
    spec = pod["spec"]
    # podStrategy.PrepareForCreate: the status is reset to Pending with the computed QoS class.
    pod["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
    _validate_object_meta(_ensure(pod, "metadata"), is_dns1123_subdomain, errs)
    _validate_pod_spec(spec, "spec", errs)


def _pod_update(pod: Obj, old: Obj, errs: _Errs) -> None:
    _default_pod(pod)
    pod["status"] = clone(old.get("status") or {})
    _validate_object_meta(_ensure(pod, "metadata"), is_dns1123_subdomain, errs)
    _validate_pod_update(pod, old, errs)


def _pod_status_update(pod: Obj, old: Obj, errs: _Errs) -> None:
    pod["spec"] = clone(old.get("spec") or {})
    # The pods/status endpoint may not touch owner references (old kubelets corrupted them).
    meta = _ensure(pod, "metadata")
    if "ownerReferences" in (old.get("metadata") or {}):
        meta["ownerReferences"] = clone(old["metadata"]["ownerReferences"])
    else:
        meta.pop("ownerReferences", None)
    _validate_pod_status_update(pod, old, errs)


_NS_NAME_LABEL = "kubernetes.io/metadata.name"


def _namespace_common(ns: Obj) -> None:
    # The namespace strategy keeps an immutable name label on every namespace (since 1.21).
    meta = _ensure(ns, "metadata")
    _ensure(meta, "labels")[_NS_NAME_LABEL] = meta.get("name") or ""


def _validate_namespace(ns: Obj, errs: _Errs) -> None:
    _validate_object_meta(_ensure(ns, "metadata"), is_dns1123_label, errs)
    for i, f in enumerate(_d(ns, "spec", "finalizers") or []):
        for m in is_qualified_name(f):
            errs.invalid(f"spec.finalizers[{i}]", f, m)


def _namespace_create(ns: Obj, now: datetime, errs: _Errs) -> None:
    ns["spec"] = {"finalizers": ["kubernetes"]}
    ns["status"] = {"phase": "Active"}
    _namespace_common(ns)
    _validate_namespace(ns, errs)


def _namespace_update(ns: Obj, old: Obj, errs: _Errs) -> None:
    # Main writes keep the old finalizers (those change through /finalize) and status.
    ns["spec"] = clone(old.get("spec") or {})
    ns["status"] = clone(old.get("status") or {})
    _namespace_common(ns)
    _validate_namespace(ns, errs)


def _namespace_status_update(ns: Obj, old: Obj, errs: _Errs) -> None:
    ns["spec"] = clone(old.get("spec") or {})
    _namespace_common(ns)
    _validate_namespace(ns, errs)


_REASON_LIMIT = 128
_ACTION_LIMIT = 128
_REPORTING_INSTANCE_LIMIT = 128
_NOTE_LIMIT = 1024


def _validate_event_legacy(
    namespace: str,
    involved_ns: str,
    event_time: Any,
    reporting_controller: str,
    reporting_instance: str,
    action: str,
    reason: str,
    message: str,
    controller_field: str,
    errs: _Errs,
) -> None:
    """legacyValidateEvent, over the internal field names upstream reports."""
    if not event_time:
        if not involved_ns:
            if namespace not in ("", "default"):
                errs.invalid(
                    "involvedObject.namespace", involved_ns, "does not match event.namespace"
                )
        elif namespace != involved_ns:
            errs.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            errs.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
        if not reporting_controller:
            errs.required(controller_field)
        for m in is_qualified_name(reporting_controller):
            errs.invalid(controller_field, reporting_controller, m)
        if not reporting_instance:
            errs.required("reportingInstance")
        if len(reporting_instance) > _REPORTING_INSTANCE_LIMIT:
            errs.invalid(
                "reportingInstance", "", f"can have at most {_REPORTING_INSTANCE_LIMIT} characters"
            )
        if not action:
            errs.required("action")
        if len(action) > _ACTION_LIMIT:
            errs.invalid("action", "", f"can have at most {_ACTION_LIMIT} characters")
        if not reason:
            errs.required("reason")
        if len(reason) > _REASON_LIMIT:
            errs.invalid("reason", "", f"can have at most {_REASON_LIMIT} characters")
        if len(message) > _NOTE_LIMIT:
            errs.invalid("message", "", f"can have at most {_NOTE_LIMIT} characters")
    for m in is_dns1123_subdomain(namespace):
        errs.invalid("namespace", namespace, m)


def _core_event_create(ev: Obj, now: datetime, errs: _Errs) -> None:
    meta = _ensure(ev, "metadata")
    # core/v1 keeps its legacy, lenient rules: names need only be URL path segments.
    _validate_object_meta(meta, _is_path_segment_name, errs)
    _validate_event_legacy(
        meta.get("namespace") or "",
        _d(ev, "involvedObject", "namespace") or "",
        ev.get("eventTime"),
        ev.get("reportingComponent") or "",
        ev.get("reportingInstance") or "",
        ev.get("action") or "",
        ev.get("reason") or "",
        ev.get("message") or "",
        "reportingComponent",
        errs,
    )


def _events_v1_create(ev: Obj, now: datetime, errs: _Errs) -> None:
    meta = _ensure(ev, "metadata")
    _validate_event_legacy(
        meta.get("namespace") or "",
        _d(ev, "regarding", "namespace") or "",
        ev.get("eventTime"),
        ev.get("reportingController") or "",
        ev.get("reportingInstance") or "",
        ev.get("action") or "",
        ev.get("reason") or "",
        ev.get("note") or "",
        "reportingController",
        errs,
    )
    # events.k8s.io/v1 adds the strict rules of new-style Events.
    _validate_object_meta(meta, is_dns1123_subdomain, errs)
    if not ev.get("eventTime"):
        errs.required("eventTime")
    if ev.get("type") not in ("Normal", "Warning"):
        errs.invalid("type", "", f"has invalid value: {ev.get('type') or ''}")
    if ev.get("deprecatedFirstTimestamp"):
        errs.invalid("firstTimestamp", "", "needs to be unset")
    if ev.get("deprecatedLastTimestamp"):
        errs.invalid("lastTimestamp", "", "needs to be unset")
    if ev.get("deprecatedCount"):
        errs.invalid("count", "", "needs to be unset")
    if _norm(ev.get("deprecatedSource")):
        errs.invalid("source", "", "needs to be unset")


def _event_update(ev: Obj, old: Obj, errs: _Errs) -> None:
    _validate_object_meta(_ensure(ev, "metadata"), _is_path_segment_name, errs)


# --------------------------------------------------------------------------------------------
# Leases
# --------------------------------------------------------------------------------------------

_LEASE_STRATEGIES = ["OldestEmulationVersion"]


def _validate_lease_spec(spec: Obj, errs: _Errs) -> None:
    """ValidateLeaseSpec. ``holderIdentity`` is free-form; ``acquireTime`` and ``renewTime`` were
    checked when the body was decoded (API-60)."""
    duration = spec.get("leaseDurationSeconds")
    if _is_int(duration) and duration <= 0:  # API-58
        errs.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0")
    transitions = spec.get("leaseTransitions")
    if _is_int(transitions) and transitions < 0:
        errs.invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0")
    # strategy and preferredHolder are validated as with the CoordinatedLeaderElection gate on;
    # a 1.32 server with default gates drops them in PrepareForCreate/PrepareForUpdate instead.
    strategy = spec.get("strategy")
    if isinstance(strategy, str):  # API-59
        # ValidateCoordinatedLeaseStrategy appends "strategy" to a path that already ends in it.
        path = "spec.strategy.strategy"
        if "/" not in strategy:
            if strategy not in _LEASE_STRATEGIES:
                errs.not_supported(path, strategy, _LEASE_STRATEGIES)
        else:
            for m in is_qualified_name(strategy):
                errs.invalid(path, strategy, m)
    if spec.get("preferredHolder") and not strategy:
        errs.forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined")


def _lease_create(lease: Obj, now: datetime, errs: _Errs) -> None:
    # The lease strategy sets no generation (API-62): the server left the client's, if any.
    _validate_object_meta(_ensure(lease, "metadata"), is_dns1123_subdomain, errs)
    # LeaseSpec is a struct, not a pointer: Go's encoder writes "spec": {} even when empty.
    _validate_lease_spec(_ensure(lease, "spec"), errs)


def _lease_update(lease: Obj, old: Obj, errs: _Errs) -> None:
    # No status and no spec/status split: the new object replaces the old one whole.
    _validate_object_meta(_ensure(lease, "metadata"), is_dns1123_subdomain, errs)
    _validate_lease_spec(_ensure(lease, "spec"), errs)


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------

CreateFn = Callable[[Obj, datetime, _Errs], None]
UpdateFn = Callable[[Obj, Obj, _Errs], None]


@dataclass(frozen=True)
class _Kind:
    kind: str
    create: CreateFn
    update: UpdateFn
    status_update: UpdateFn | None


def _no_status(obj: Obj, old: Obj, errs: _Errs) -> None:
    return None


_KINDS: dict[tuple[str, str], _Kind] = {
    ("batch", "jobs"): _Kind("Job", _job_create, _job_update, _job_status_update),
    ("batch", "cronjobs"): _Kind(
        "CronJob", _cronjob_create, _cronjob_update, _cronjob_status_update
    ),
    ("", "pods"): _Kind("Pod", _pod_create, _pod_update, _pod_status_update),
    ("", "namespaces"): _Kind(
        "Namespace", _namespace_create, _namespace_update, _namespace_status_update
    ),
    ("", "events"): _Kind("Event", _core_event_create, _event_update, None),
    ("events.k8s.io", "events"): _Kind("Event", _events_v1_create, _event_update, None),
    ("coordination.k8s.io", "leases"): _Kind("Lease", _lease_create, _lease_update, None),
}


def _raise_if(errs: _Errs, kind: _Kind, group: str, obj: Obj) -> None:
    if errs:
        raise invalid(kind.kind, _d(obj, "metadata", "name") or "", errs.causes, group)


def prepare_create(
    group: str, plural: str, obj: dict[str, Any], *, now: datetime
) -> dict[str, Any]:
    """Prune, default, prepare and validate a new object; raise ``ApiError`` 422 when invalid.

    The server has already set ``metadata.uid``/``name``/``namespace``/``creationTimestamp``.
    Unknown kinds come back unchanged.
    """
    kind = _KINDS.get((group, plural))
    if kind is None:
        return obj
    out = schema.prune(group, plural, obj)  # a fresh copy: the strategy may change it
    errs = _Errs()
    kind.create(out, now, errs)
    _raise_if(errs, kind, group, out)
    return out


def prepare_update(
    group: str,
    plural: str,
    old: dict[str, Any],
    new: dict[str, Any],
    *,
    subresource: str | None,
    now: datetime,
) -> dict[str, Any]:
    """Prepare and validate an update of ``old`` to ``new``; raise ``ApiError`` 422 when invalid.

    ``subresource`` None is a write to the main resource (status changes are ignored);
    ``"status"`` is a ``/status`` write (spec changes are ignored). Server-owned metadata
    (uid, creationTimestamp, deletionTimestamp, generation) is carried over from ``old``;
    ``metadata.generation`` is bumped when the spec changed.
    """
    kind = _KINDS.get((group, plural))
    if kind is None:
        return new
    out = schema.prune(group, plural, new)  # a fresh copy: the strategy may change it
    _carry_server_meta(out, old)
    errs = _Errs()
    if subresource is None:
        kind.update(out, old, errs)
    elif subresource == "status":
        if kind.status_update is None:
            raise ApiError(
                404,
                "NotFound",
                f"the server could not find the requested resource ({plural}/status)",
            )
        kind.status_update(out, old, errs)
    elif subresource == "finalize" and kind.kind == "Namespace":
        # namespaces/finalize changes spec.finalizers only; status stays as stored.
        out["status"] = clone(old.get("status") or {})
        _namespace_common(out)
        _validate_namespace(out, errs)
    else:
        # Other subresources are treated as main-resource writes.
        kind.update(out, old, errs)
    _validate_object_meta_update(out.get("metadata") or {}, old.get("metadata") or {}, errs)
    _raise_if(errs, kind, group, out)
    return out
