"""What every kind's strategy shares: upstream's ``field.Error`` list, apimachinery's name and
label syntax, ObjectMeta validation, and small helpers over JSON dicts.

Layer: kubesim (imports nothing from batchd). Used by the per-kind modules of
:mod:`kubesim.strategy` and by its registry (server-owned metadata on update). Messages are worded
as upstream's (``k8s.io/apimachinery/pkg/util/validation``, ``pkg/api/validation/objectmeta.go``)
because clients and tests match on the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeGuard

from kubesim.errors import Cause

Obj = dict[str, Any]

# --------------------------------------------------------------------------------------------
# field.Error: upstream's error types and how their messages read
# --------------------------------------------------------------------------------------------

OMIT = object()  # field.OmitValueType{}: the message carries no value


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
    # Go marshals a struct's fields in their declaration order and a map's keys sorted.
    return json.dumps(_go_order(value), separators=(",", ":"))


# Declaration orders of the structs whose values appear in messages (the rest are maps, or internal
# types upstream prints its own way).
_STRUCT_ORDERS = (
    ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"),  # OwnerReference
    ("matchLabels", "matchExpressions"),  # LabelSelector
    ("key", "operator", "values"),  # LabelSelectorRequirement
)


def _go_order(value: Any) -> Any:
    if isinstance(value, list):
        return [_go_order(v) for v in value]
    if not isinstance(value, dict):
        return value
    keys = set(value)
    order = next((o for o in _STRUCT_ORDERS if keys and keys <= set(o) and len(keys) > 1), None)
    ordered = [k for k in order if k in value] if order else sorted(value)
    return {k: _go_order(value[k]) for k in ordered}


@dataclass
class Errs:
    """An ``field.ErrorList`` under construction."""

    causes: list[Cause] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the strategy warns of (Warning headers)

    def __bool__(self) -> bool:
        return bool(self.causes)

    def extend(self, other: Errs) -> None:
        self.causes.extend(other.causes)
        self.warnings.extend(other.warnings)

    def invalid(self, path: str, value: Any, detail: str = "") -> None:
        body = "Invalid value" if value is OMIT else f"Invalid value: {_go_value(value)}"
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
        if not sem_equal(new, old):
            self.invalid(path, new, "field is immutable")


# --------------------------------------------------------------------------------------------
# apimachinery name / label syntax (k8s.io/apimachinery/pkg/util/validation)
# --------------------------------------------------------------------------------------------


def regex_error(msg: str, fmt: str, *examples: str) -> str:
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
HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
HTTP_PATH_RE = re.compile(HTTP_PATH_FMT)
_QUALIFIED_NAME_ERR = regex_error(
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
        errs.append(regex_error(msg, pattern.pattern, *examples))
    return tuple(errs)


@lru_cache(maxsize=_NAME_CACHE)
def is_dns1123_label(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(_max_len_error(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")  # a subdomain of the right length: only its dots are wrong
        else:
            errs.append(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character", _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return tuple(errs)


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


def is_path_segment_name(value: str) -> list[str]:
    # path.ValidatePathSegmentName: what every object name must satisfy to sit in a URL.
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


# --------------------------------------------------------------------------------------------
# Small helpers over JSON dicts
# --------------------------------------------------------------------------------------------


def dig(obj: Any, *keys: str) -> Any:
    """Walk nested dicts; None when any step is missing."""
    cur = obj
    for k in keys:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(k)
    return cur


def ensure(obj: Obj, key: str) -> Obj:
    val = obj.get(key)
    if not isinstance(val, dict):
        val = {}
        obj[key] = val
    return val


def norm(value: Any) -> Any:
    """Drop nulls and empty maps/lists, as Go's semantic equality treats nil and empty alike."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            nv = norm(v)
            if nv is None or nv == {} or nv == []:
                continue
            out[k] = nv
        return out
    if isinstance(value, list):
        return [norm(v) for v in value]
    return value


def sem_equal(a: Any, b: Any) -> bool:
    # Equal values normalise equally: the plain comparison (in C) settles the common case of an
    # unchanged field without building two normalised copies.
    return a == b or bool(norm(a) == norm(b))


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# ObjectMeta validation (apimachinery ValidateObjectMeta / ValidateObjectMetaUpdate)
# --------------------------------------------------------------------------------------------

_TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})
NameFn = Callable[[str], Sequence[str]]


def validate_labels(labels: Any, path: str, errs: Errs) -> None:
    if not isinstance(labels, dict):
        return
    for k, v in labels.items():
        for m in is_qualified_name(k):
            errs.invalid(path, k, m)
        for m in is_valid_label_value(v if isinstance(v, str) else str(v)):
            errs.invalid(path, v, m)


def validate_annotations(annotations: Any, path: str, errs: Errs) -> None:
    if not isinstance(annotations, dict):
        return
    total = 0
    for k, v in annotations.items():
        for m in is_qualified_name(k.lower()):
            errs.invalid(path, k, m)
        total += len(k) + len(v if isinstance(v, str) else str(v))
    if total > _TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.too_long(path, _TOTAL_ANNOTATION_SIZE_LIMIT)


def validate_object_meta(meta: Obj, name_fn: NameFn, errs: Errs) -> None:
    name = meta.get("name") or ""
    if not name:
        errs.required("metadata.name", "name or generateName is required")
    else:
        for m in name_fn(name):
            errs.invalid("metadata.name", name, m)
    # Every kind but Lease gets its generation from the server; a Lease keeps the client's.
    errs.nonnegative("metadata.generation", meta.get("generation"))
    validate_labels(meta.get("labels"), "metadata.labels", errs)
    validate_annotations(meta.get("annotations"), "metadata.annotations", errs)
    controllers = []
    for ref in meta.get("ownerReferences") or []:
        p = "metadata.ownerReferences"  # upstream names the list, not the item
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
    finalizers = meta.get("finalizers") or []
    for f in finalizers:
        for m in is_qualified_name(f):
            errs.invalid("metadata.finalizers", f, m)
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.invalid(
            "metadata.finalizers",
            finalizers,
            "finalizer orphan and foregroundDeletion cannot be both set",
        )
    # the core API's own rule: a name without a domain must be one of the standard finalizers
    for i, f in enumerate(finalizers):
        if "/" not in f and f not in _STANDARD_FINALIZERS:
            errs.invalid(f"metadata.finalizers[{i}]", f, "name is neither a standard finalizer name nor is it fully qualified")


def validate_object_meta_update(meta: Obj, old_meta: Obj, errs: Errs) -> None:
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


def carry_server_meta(new: Obj, old: Obj) -> None:
    """What the generic store's BeforeUpdate restores: fields no update may change."""
    meta = ensure(new, "metadata")
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


def bump_generation(new: Obj, old: Obj) -> None:
    # Any spec change increments metadata.generation (API-21).
    meta = ensure(new, "metadata")
    old_gen = dig(old, "metadata", "generation")
    base = old_gen if is_int(old_gen) else 1
    meta["generation"] = base + 1 if not sem_equal(new.get("spec"), old.get("spec")) else base
