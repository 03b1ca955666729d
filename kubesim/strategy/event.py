"""Events, core/v1 and events.k8s.io/v1: both validated by upstream's ``legacyValidateEvent``,
events.k8s.io/v1 with the stricter rules of new-style Events on top.

Layer: kubesim. Called through :mod:`kubesim.strategy.registry`. Events have no ``/status``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubesim.strategy.common import (
    Errs,
    Obj,
    dig,
    ensure,
    is_dns1123_subdomain,
    is_path_segment_name,
    is_qualified_name,
    norm,
    validate_object_meta,
)

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
    errs: Errs,
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


def core_event_create(ev: Obj, now: datetime, errs: Errs) -> None:
    meta = ensure(ev, "metadata")
    # core/v1 keeps its legacy, lenient rules: names need only be URL path segments.
    validate_object_meta(meta, is_path_segment_name, errs)
    _validate_event_legacy(
        meta.get("namespace") or "",
        dig(ev, "involvedObject", "namespace") or "",
        ev.get("eventTime"),
        ev.get("reportingComponent") or "",
        ev.get("reportingInstance") or "",
        ev.get("action") or "",
        ev.get("reason") or "",
        ev.get("message") or "",
        "reportingComponent",
        errs,
    )


def events_v1_create(ev: Obj, now: datetime, errs: Errs) -> None:
    meta = ensure(ev, "metadata")
    _validate_event_legacy(
        meta.get("namespace") or "",
        dig(ev, "regarding", "namespace") or "",
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
    validate_object_meta(meta, is_dns1123_subdomain, errs)
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
    if norm(ev.get("deprecatedSource")):
        errs.invalid("source", "", "needs to be unset")


def event_update(ev: Obj, old: Obj, errs: Errs) -> None:
    validate_object_meta(ensure(ev, "metadata"), is_path_segment_name, errs)
