"""Timeouts and retry policies of every Kubernetes activity, named once.

Layer: workflows (pure). Every ``execute_activity`` passes one of these; nothing relies on the
SDK defaults. Transient failures (429, 5xx, timeouts, conflicts) retry forever with capped
backoff, so an outage of the API server delays work but never loses it; permanent failures
(400, 403, 422) are raised by the activities as non-retryable ``ApplicationError``.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

#: A single Kubernetes request (plus a GET before it); the client's own read timeout is shorter.
K8S_CALL_TIMEOUT = timedelta(seconds=30)

#: Unlimited attempts: 1 s doubling to one minute. A ``Retry-After`` from the server overrides
#: the next delay (the activity raises with ``next_retry_delay``).
K8S_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=0,
)

#: Optional side effects (Events): a few tries, then give up — an Event is never worth a stall.
K8S_BEST_EFFORT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
)
