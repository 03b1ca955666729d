"""Leases (coordination.k8s.io/v1): ``ValidateLease`` (API-58, API-59). A Lease has no status;
an update replaces it whole, and the server sets no generation (API-62).

Layer: kubesim. Called through :mod:`kubesim.strategy.registry`.
"""

from __future__ import annotations

from datetime import datetime

from kubesim.strategy.common import (
    Errs,
    Obj,
    ensure,
    is_dns1123_subdomain,
    is_int,
    is_qualified_name,
    validate_object_meta,
)

_LEASE_STRATEGIES = ["OldestEmulationVersion"]


def _validate_lease_spec(spec: Obj, errs: Errs) -> None:
    """ValidateLeaseSpec. ``holderIdentity`` is free-form; ``acquireTime`` and ``renewTime`` were
    checked when the body was decoded (API-60)."""
    duration = spec.get("leaseDurationSeconds")
    if is_int(duration) and duration <= 0:  # API-58
        errs.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0")
    transitions = spec.get("leaseTransitions")
    if is_int(transitions) and transitions < 0:
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


def lease_create(lease: Obj, now: datetime, errs: Errs) -> None:
    # The lease strategy sets no generation (API-62): the server left the client's, if any.
    validate_object_meta(ensure(lease, "metadata"), is_dns1123_subdomain, errs)
    # LeaseSpec is a struct, not a pointer: Go's encoder writes "spec": {} even when empty.
    _validate_lease_spec(ensure(lease, "spec"), errs)


def lease_update(lease: Obj, old: Obj, errs: Errs) -> None:
    # No status and no spec/status split: the new object replaces the old one whole.
    validate_object_meta(ensure(lease, "metadata"), is_dns1123_subdomain, errs)
    _validate_lease_spec(ensure(lease, "spec"), errs)
