"""Namespaces (core/v1): the namespace strategy's spec, status and name label, and its
validation, for the main resource, ``/status`` and ``/finalize``.

Layer: kubesim. Called through :mod:`kubesim.strategy.registry`.
"""

from __future__ import annotations

from datetime import datetime

from kubesim.codec import clone
from kubesim.strategy.common import (
    Errs,
    Obj,
    dig,
    ensure,
    is_dns1123_label,
    is_qualified_name,
    validate_object_meta,
)

_NS_NAME_LABEL = "kubernetes.io/metadata.name"


def namespace_common(ns: Obj) -> None:
    # The namespace strategy keeps an immutable name label on every namespace (since 1.21).
    meta = ensure(ns, "metadata")
    ensure(meta, "labels")[_NS_NAME_LABEL] = meta.get("name") or ""


def namespace_defaults(ns: Obj) -> None:
    """SetDefaults_Namespace: the name label."""
    namespace_common(ns)


def validate_namespace(ns: Obj, errs: Errs) -> None:
    validate_object_meta(ensure(ns, "metadata"), is_dns1123_label, errs)
    for i, f in enumerate(dig(ns, "spec", "finalizers") or []):
        for m in is_qualified_name(f):
            errs.invalid(f"spec.finalizers[{i}]", f, m)


def namespace_create(ns: Obj, now: datetime, errs: Errs) -> None:
    ns["spec"] = {"finalizers": ["kubernetes"]}
    ns["status"] = {"phase": "Active"}
    namespace_common(ns)
    validate_namespace(ns, errs)


def namespace_update(ns: Obj, old: Obj, errs: Errs) -> None:
    # Main writes keep the old finalizers (those change through /finalize) and status.
    ns["spec"] = clone(old.get("spec") or {})
    ns["status"] = clone(old.get("status") or {})
    namespace_common(ns)
    validate_namespace(ns, errs)


def namespace_status_update(ns: Obj, old: Obj, errs: Errs) -> None:
    ns["spec"] = clone(old.get("spec") or {})
    namespace_common(ns)
    validate_namespace(ns, errs)
    # ValidateNamespaceStatusUpdate (its path spells the Go field, "Phase")
    phase = dig(ns, "status", "phase")
    if not dig(ns, "metadata", "deletionTimestamp"):
        if phase != "Active":
            errs.invalid("status.Phase", phase or "", "may only be 'Active' if `deletionTimestamp` is empty")
    elif phase != "Terminating":
        errs.invalid("status.Phase", phase or "", "may only be 'Terminating' if `deletionTimestamp` is not empty")


def namespace_finalize(ns: Obj, old: Obj, errs: Errs) -> None:
    # namespaces/finalize changes spec.finalizers only; status stays as stored.
    ns["status"] = clone(old.get("status") or {})
    namespace_common(ns)
    validate_namespace(ns, errs)
