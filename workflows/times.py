"""Instants every controller shares: arithmetic that is total, "never", and how one is written.

Layer: workflows (pure, standard library only). Callers: the TTL decision
(workflows/models/ttl.py), the schedule math (workflows/cron.py), the CronJob and Job workflows,
the activities (the times they write to the API), the bridge and the CLI.

The API accepts durations that ``datetime`` cannot add: ``ttlSecondsAfterFinished`` up to
2^31−1 s after a finish time near year 9999, ``startingDeadlineSeconds`` and
``activeDeadlineSeconds`` up to 2^63−1 s, a Pod TTL label of any length. An instant beyond
``datetime``'s range is one that never comes: :func:`plus_seconds` returns None for it, and
callers read None as "no expiry", "no deadline" (TIME-1 in docs/design.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import overload

#: What the ``ExpiresAt`` search attribute holds for an expiry that never comes: the last
#: second ``datetime`` can hold, so ``ExpiresAt < "…"`` never matches it and it sorts last.
NEVER = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def plus_seconds(t: datetime, seconds: int | float) -> datetime | None:
    """``t + seconds``, or None when the sum is outside what ``datetime`` holds (never).

    Args:
        t: an aware instant.
        seconds: any number the API accepts, negative included.

    Returns:
        The instant, or None if it is beyond ``datetime``'s range on either side.
    """
    try:
        return t + timedelta(seconds=seconds)
    except OverflowError:
        return None


@overload
def rfc3339(t: datetime) -> str: ...
@overload
def rfc3339(t: None) -> None: ...
@overload
def rfc3339(t: datetime | None) -> str | None: ...


def rfc3339(t: datetime | None) -> str | None:
    """``2026-11-22T10:00:00Z``: the one form batchd writes an instant in, to the API and to people.

    It is what ``metav1.Time`` marshals to (Go's RFC 3339 in UTC, sub-seconds truncated), which
    every time field batchd writes is: Job status times and conditions, CronJob status, its
    annotations, an Event's ``firstTimestamp``/``lastTimestamp``. Microseconds belong only in
    ``MicroTime`` fields (``events.k8s.io`` ``eventTime``, a Lease's times: :func:`micro_time`).
    Writing people the same form
    (timer summaries, ``describe``, the CLI) means an instant reads the same in the Temporal UI
    as in ``kubectl get -o yaml``. The year is always four digits (``%Y`` would not pad it).

    Args:
        t: an aware instant, or None.

    Returns:
        The text, or None for None.
    """
    if t is None:
        return None
    return t.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def micro_time(t: datetime) -> str:
    """``2026-11-22T10:00:00.000000Z``: a ``metav1.MicroTime`` (a Lease's ``acquireTime``, ``renewTime``)."""
    u = t.astimezone(UTC)
    return f"{u.year:04d}-{u:%m-%dT%H:%M:%S}.{u.microsecond:06d}Z"


def iso(t: datetime | None, *, never: str = "never") -> str | None:
    """:func:`rfc3339` for people: ``never`` at :data:`NEVER` (an expiry that never comes).

    Args:
        t: an aware instant, or None.
        never: how to write :data:`NEVER`.

    Returns:
        The text, or None for None.
    """
    if t is not None and t >= NEVER:
        return never
    return rfc3339(t)
