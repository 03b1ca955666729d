"""Kubernetes errors (kube/errors.py) as the ``ApplicationError`` a workflow sees.

Layer: activities. The :func:`temporal_errors` decorator wraps every activity, so retryability
stays data across the boundary: a retryable :class:`KubeError` retries under the workflow's
retry policy (honouring ``Retry-After``), a permanent one fails the activity at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import timedelta
from typing import ParamSpec, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from kube.errors import KubeError


def to_application_error(err: KubeError) -> ApplicationError:
    """The ``ApplicationError`` a workflow sees for ``err``: its class name as type, retryability as data.

    Transient failures are marked BENIGN: they are expected on a busy cluster, so the SDK logs
    them quietly instead of with a traceback per attempt (the decorator logs one line).
    """
    delay = timedelta(seconds=err.retry_after) if err.retry_after and err.retryable else None
    return ApplicationError(
        f"{err.status or ''} {err.reason or type(err).__name__}: {err.message}".strip(),
        type=type(err).__name__,
        non_retryable=not err.retryable,
        next_retry_delay=delay,
        category=ApplicationErrorCategory.BENIGN if err.retryable else ApplicationErrorCategory.UNSPECIFIED,
    )


P = ParamSpec("P")
R = TypeVar("R")


def temporal_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate an activity so that a :class:`KubeError` leaves it as an ``ApplicationError``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except KubeError as err:
            if err.retryable:
                activity.logger.warning("%s: %s (will retry)", type(err).__name__, err.message)
            raise to_application_error(err) from None

    return wrapper
