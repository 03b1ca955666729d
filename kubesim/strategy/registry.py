"""Which strategy serves which kind, and the two entry points the server calls.

Layer: kubesim. :func:`prepare_create` and :func:`prepare_update` are called by the kubesim server
on every create and update; they prune the body (:mod:`kubesim.schema`), run the kind's strategy
and raise ``422 Invalid`` with every cause the strategy collected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from kubesim import schema
from kubesim.errors import ApiError, invalid
from kubesim.strategy.common import Errs, Obj, carry_server_meta, dig, validate_object_meta_update
from kubesim.strategy.cronjob import (
    cronjob_create,
    cronjob_defaults,
    cronjob_status_update,
    cronjob_update,
)
from kubesim.strategy.event import core_event_create, event_update, events_v1_create
from kubesim.strategy.job import job_create, job_defaults, job_status_update, job_update
from kubesim.strategy.lease import lease_create, lease_update
from kubesim.strategy.namespace import (
    namespace_create,
    namespace_defaults,
    namespace_finalize,
    namespace_status_update,
    namespace_update,
)
from kubesim.strategy.pod import pod_create, pod_defaults, pod_status_update, pod_update

DefaultFn = Callable[[Obj], None]
CreateFn = Callable[[Obj, datetime, Errs], None]
UpdateFn = Callable[[Obj, Obj, Errs], None]


@dataclass(frozen=True)
class _Kind:
    kind: str
    create: CreateFn
    update: UpdateFn
    status_update: UpdateFn | None
    defaults: DefaultFn | None = None  # what decoding the body sets, before any strategy


_KINDS: dict[tuple[str, str], _Kind] = {
    ("batch", "jobs"): _Kind("Job", job_create, job_update, job_status_update, job_defaults),
    ("batch", "cronjobs"): _Kind("CronJob", cronjob_create, cronjob_update, cronjob_status_update,
                                 cronjob_defaults),
    ("", "pods"): _Kind("Pod", pod_create, pod_update, pod_status_update, pod_defaults),
    ("", "namespaces"): _Kind(
        "Namespace", namespace_create, namespace_update, namespace_status_update, namespace_defaults
    ),
    ("", "events"): _Kind("Event", core_event_create, event_update, None),
    ("events.k8s.io", "events"): _Kind("Event", events_v1_create, event_update, None),
    ("coordination.k8s.io", "leases"): _Kind("Lease", lease_create, lease_update, None),
}


def _raise_if(errs: Errs, kind: _Kind, group: str, obj: Obj) -> None:
    if errs:
        # both groups' Events are the core registry's: its errors name the core kind
        group = "" if group == "events.k8s.io" else group
        raise invalid(kind.kind, dig(obj, "metadata", "name") or "", errs.causes, group)


def decoded(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` as the API server holds a decoded body: pruned and defaulted, before
    admission and the strategy (what the managed fields of a create or update are taken from).
    Refusals wait for :func:`prepare_create` and :func:`prepare_update`: this raises nothing."""
    kind = _KINDS.get((group, plural))
    if kind is None:
        return obj
    try:
        out = schema.prune(group, plural, obj)
    except ApiError:
        return obj
    if kind.defaults is not None:
        kind.defaults(out)
    return out


@cache
def zero(group: str, plural: str) -> dict[str, Any]:
    """The empty object of a kind as Go writes it (shared: read it, never change it)."""
    return schema.prune(group, plural, {})


def prepare_create(
    group: str, plural: str, obj: dict[str, Any], *, now: datetime, warnings: list[str] | None = None
) -> dict[str, Any]:
    """Prune, default, prepare and validate a new object; raise ``ApiError`` 422 when invalid.

    The server has already set ``metadata.uid``/``name``/``namespace``/``creationTimestamp``.
    Unknown kinds come back unchanged.
    """
    kind = _KINDS.get((group, plural))
    if kind is None:
        return obj
    out = schema.prune(group, plural, obj)  # a fresh copy: the strategy may change it
    errs = Errs()
    kind.create(out, now, errs)
    _raise_if(errs, kind, group, out)
    if warnings is not None:
        warnings.extend(errs.warnings)
    return out


def prepare_update(
    group: str,
    plural: str,
    old: dict[str, Any],
    new: dict[str, Any],
    *,
    subresource: str | None,
    now: datetime,
    warnings: list[str] | None = None,
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
    carry_server_meta(out, old)
    errs = Errs()
    # The generic update checks ObjectMeta first; each kind's update validation checks it again
    # (below), so a bad metadata change is reported twice, as upstream reports it.
    validate_object_meta_update(out.get("metadata") or {}, old.get("metadata") or {}, errs)
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
        namespace_finalize(out, old, errs)
    else:
        # Other subresources are treated as main-resource writes.
        kind.update(out, old, errs)
    validate_object_meta_update(out.get("metadata") or {}, old.get("metadata") or {}, errs)
    _raise_if(errs, kind, group, out)
    if warnings is not None:
        warnings.extend(errs.warnings)
    return out
