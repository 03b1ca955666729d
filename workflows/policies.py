"""Timeouts and retry policies of every Kubernetes activity, and the one doubling backoff, named once.

Layer: workflows (pure; the worker uses :class:`Backoff` too; workflows/execute.py applies the
policies). Every activity runs under one of these; nothing relies on the SDK defaults.
Transient failures (429, 5xx, timeouts, conflicts) retry forever with capped backoff, so an outage of the API server delays work but never loses it; permanent failures
(400, 403, 422) are raised by the activities as non-retryable ``ApplicationError``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Generic, TypeVar

from temporalio.common import RetryPolicy

T = TypeVar("T", float, timedelta)

#: A single Kubernetes request (plus a GET before it); the client's own read timeout is shorter.
K8S_CALL_TIMEOUT = timedelta(seconds=30)

#: Activities that touch up to 500 Pods (the Job's bulk calls).
BULK_TIMEOUT = timedelta(minutes=5)
#: Bulk activities heartbeat per Pod; a worker killed mid-batch is noticed in seconds, not minutes.
BULK_HEARTBEAT = timedelta(seconds=10)

#: Unlimited attempts: 1 s doubling to one minute. A ``Retry-After`` from the server overrides
#: the next delay (the activity raises with ``next_retry_delay``).
K8S_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=0,
)

#: NOTIFY-DELIVERY: a CloudEvent's POST, retried as a Kubernetes call is (K8S_RETRY): a sink down for
#: hours gets it within a minute of its return.
NOTIFY_TIMEOUT = timedelta(seconds=30)

#: Optional side effects (Events): a few tries, then give up — an Event is never worth a stall.
K8S_BEST_EFFORT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
)


class Backoff(Generic[T]):
    """A delay that doubles after each use up to ``cap``, and starts again from ``first`` on success.

    In seconds (``float``) or as a ``timedelta``. A workflow holds its own in memory: a new run
    starts again from ``first``.
    """

    def __init__(self, first: T, cap: T) -> None:
        self.first: T = first
        self.cap: T = cap
        self._next: T = first

    def next(self) -> T:
        """The delay to wait now; the one after is twice as long, at most ``cap``."""
        delay: T = self._next
        doubled: T = self._next * 2
        self._next = min(doubled, self.cap)
        return delay

    def reset(self) -> None:
        self._next = self.first
