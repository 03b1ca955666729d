"""Instants every controller shares: arithmetic that is total, and "never".

Layer: workflows (pure, standard library only). Callers: the TTL decision
(workflows/models/ttl.py), the schedule math (workflows/cron.py), the CronJob and Job workflows,
the bridge and the CLI.

The API accepts durations that ``datetime`` cannot add: ``ttlSecondsAfterFinished`` up to
2^31−1 s after a finish time near year 9999, ``startingDeadlineSeconds`` and
``activeDeadlineSeconds`` up to 2^63−1 s, a Pod TTL label of any length. An instant beyond
``datetime``'s range is one that never comes: :func:`plus_seconds` returns None for it, and
callers read None as "no expiry", "no deadline" (README: TIME-1).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

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


def iso(t: datetime | None, *, never: str = "never") -> str | None:
    """``2026-11-22T10:00:00Z`` (UTC, sub-second digits kept if any), ``never`` at :data:`NEVER`.

    Args:
        t: an aware instant, or None.
        never: how to write :data:`NEVER`.

    Returns:
        The text, or None for None.
    """
    if t is None:
        return None
    if t >= NEVER:
        return never
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")
