"""Schedule math for CronJobs: what is due, missed-run and wake-up arithmetic, Job names.

Layer: workflows, pure (no I/O, no wall clock, no temporalio). Callers: the CronJob workflow,
which imports it through ``workflow.unsafe.imports_passed_through()`` (``ZoneInfo`` only works
outside the sandbox), and the bridge, to validate a spec.
Every time is passed in as an aware datetime; a naive one is a bug and raises ValueError.
Results are whole-second UTC datetimes.

Parsing and the next activation are robfig/cron v3's, in the top-level :mod:`cronexpr` (the
parser kubesim's API server validation uses too); this module adds what the upstream CronJob
controller does with them (KEP-19; docs/cronjob.md CJ-8 to CJ-21, CJ-30, CJ-33): the
``timeZone`` and ``TZ`` rules, the Events' reasons and wording, ``mostRecentScheduleTime``, the
wake-up, and batchd's catch-up, jitter and Job names.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal

import cronexpr
from workflows.times import plus_seconds

#: Upstream's ``nextScheduleDelta`` (CJ-21): requeue padding for clock skew. Optional here, see
#: ``next_wakeup``.
NEXT_SCHEDULE_DELTA = timedelta(milliseconds=100)
#: CJ-18: more missed start times than this is "many" (Warning ``TooManyMissedTimes``).
MANY_MISSED = 100

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)

Missed = Literal["none", "few", "many"]


class ScheduleError(Exception):
    """A schedule or time zone that cannot be evaluated; the workflow turns it into an Event.

    Attributes:
        reason: the upstream Event reason: ``UnparseableSchedule`` (CJ-11), ``UnknownTimeZone``
            (CJ-10, CJ-33) or ``InvalidSchedule`` (CJ-15).
        message: the Event message, worded as upstream.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ScheduleWarning:
    """A Warning Event to emit while still scheduling (CJ-8: ``UnsupportedSchedule``)."""

    reason: str
    message: str


@dataclass(frozen=True)
class MostRecent:
    """Result of ``most_recent_schedule_time`` (CJ-14 to CJ-17)."""

    due: datetime | None
    """The single most recent activation at or before ``now`` to act on; None if none."""
    missed: Missed
    """``none`` (at most one activation since earliest), ``few``, or ``many`` (> 100, CJ-18)."""


@dataclass(frozen=True)
class Schedule:
    """A parsed ``spec.schedule``, with any more schedules of ``batchd.io/schedules`` (CJ-SCHEDULES):
    robfig's schedules, which run at their union, and the text they came from."""

    source: str
    """The schedules as written, for messages."""
    parsed: cronexpr.Schedule
    """``spec.schedule`` as evaluated: in ``spec.timeZone`` unless the text has its own ``TZ=``."""
    more: tuple[cronexpr.Schedule, ...] = ()
    """The annotation's schedules, in ``spec.timeZone``."""

    @property
    def every_seconds(self) -> int | None:
        """Set for a lone ``@every``: whole seconds, at least 1 (CJ-5)."""
        return None if self.more else self.parsed.every_seconds

    def next(self, after: datetime) -> datetime | None:
        """First activation of any of the schedules strictly after ``after`` (CJ-7); see
        :meth:`cronexpr.Schedule.next`. Two schedules on one instant activate once.

        Returns:
            A whole-second UTC datetime, or None if nothing matches within 5 years.

        Raises:
            ValueError: ``after`` is naive.
        """
        first = self.parsed.next(after)
        for schedule in self.more:
            t = schedule.next(after)
            if t is not None and (first is None or t < first):
                first = t
        return first


def parse_schedule(schedule: str, time_zone: str | None,
                   more: Sequence[str] = ()) -> tuple[Schedule, list[ScheduleWarning]]:
    """Parse ``spec.schedule`` in ``spec.timeZone`` as the controller's sync does (CJ-8 to CJ-11).

    The zone is checked first (CJ-10, CJ-23), then a schedule containing ``TZ`` is parsed as-is
    with a warning and ``time_zone`` ignored (CJ-8); otherwise it is parsed as
    ``TZ=<zone> <schedule>`` (CJ-9). An unset zone means UTC: upstream uses the
    controller-manager's local zone, which is UTC in practice. As in Go's ``time.LoadLocation``,
    ``""``, ``UTC`` and ``Local`` are UTC.

    Args:
        schedule: ``spec.schedule``.
        time_zone: ``spec.timeZone`` (IANA name) or None.
        more: ``batchd.io/schedules`` (CJ-SCHEDULES), each checked by :func:`check_more`.

    Returns:
        The parsed schedule (the union, with ``more``) and the warnings to emit as Events.

    Raises:
        ScheduleError: ``UnknownTimeZone`` or ``UnparseableSchedule``.
    """
    if time_zone is not None:
        _load_zone(time_zone)
    warnings: list[ScheduleWarning] = []
    if "TZ" in schedule:
        warnings.append(
            ScheduleWarning(
                "UnsupportedSchedule",
                f"CRON_TZ or TZ used in schedule "
                f"{cronexpr.quote(schedule)} is not officially supported, see "
                "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
            )
        )
        spec = schedule
    else:
        spec = f"TZ={time_zone} {schedule}" if time_zone is not None else schedule
    try:
        parsed = cronexpr.parse_standard(spec)
    except cronexpr.ParseError as err:
        raise ScheduleError(
            "UnparseableSchedule", f"unparseable schedule: {cronexpr.quote(schedule)} : {err}"
        ) from None
    zone = f"TZ={time_zone} " if time_zone is not None else ""
    union = tuple(cronexpr.parse_standard(zone + m) for m in more)  # checked as they were observed
    return Schedule("; ".join([schedule, *more]), parsed, union), warnings


def check_more(expression: str) -> str | None:
    """Why one schedule of ``batchd.io/schedules`` is refused (CJ-SCHEDULES), or None.

    It takes the syntax of ``spec.schedule`` and the CronJob's time zone, so neither ``TZ=`` nor
    ``@every`` (which counts from when it starts, not from the clock) can join a union.
    """
    if "TZ" in expression:
        return f"{cronexpr.quote(expression)}: a schedule here takes the CronJob's timeZone, not its own TZ"
    if expression.startswith("@every"):
        return f"{cronexpr.quote(expression)}: @every counts from when it starts, so it cannot join a union"
    try:
        cronexpr.parse_standard(expression)
    except cronexpr.ParseError as err:
        return f"{cronexpr.quote(expression)}: {err}"
    return None


def most_recent_schedule_time(
    schedule: Schedule, *, earliest: datetime, now: datetime, starting_deadline_seconds: int | None
) -> MostRecent:
    """Upstream ``mostRecentScheduleTime``: what is due now, how much was missed (CJ-12 to CJ-17).

    Only the latest due time is returned; earlier misses are never backfilled (CJ-17). Like
    upstream, the miss count is estimated from the first interval only, so for irregular
    schedules (``0 9 * * 1-5``) a miss just before a gap can go unreported.

    Args:
        schedule: the parsed schedule.
        earliest: ``status.lastScheduleTime``, else ``metadata.creationTimestamp`` (CJ-12).
        now: the current time (``workflow.now()``).
        starting_deadline_seconds: ``spec.startingDeadlineSeconds``; clamps ``earliest`` to
            ``now - sds`` (CJ-13), so older misses are dropped silently and 0 never schedules
            (CJ-20).
            Pass None for no deadline.

    Returns:
        The due time (or None) and the missed classification.

    Raises:
        ScheduleError: ``InvalidSchedule`` when two activations are under 1 s apart, which is how
            an impossible date such as ``0 0 31 2 *`` shows up (CJ-15).
        ValueError: a naive datetime.
    """
    now = _utc("now", now)
    start = _window_start(_utc("earliest", earliest), now, starting_deadline_seconds)
    if start is None:
        return MostRecent(None, "none")
    t1 = schedule.next(start)
    t2 = schedule.next(t1) if t1 is not None else None
    if t1 is not None and now < t1:
        return MostRecent(None, "none")
    if t1 is not None and t2 is not None and now < t2:
        return MostRecent(t1, "none")
    if t1 is None or t2 is None or t2 - t1 < _SECOND:
        raise ScheduleError(
            "InvalidSchedule",
            f"invalid schedule: {schedule.source} : "
            "time difference between two schedules is less than 1 second",
        )
    interval = round((t2 - t1) / _SECOND)
    missed_count = (now - t1) // _SECOND // interval + 1
    # Upstream starts one interval before the estimated last miss and walks forward with Next.
    due = None
    t = schedule.next(t1 + timedelta(seconds=(missed_count - 2) * interval))
    while t is not None and t <= now:
        due, t = t, schedule.next(t)
    return MostRecent(due, "many" if missed_count > MANY_MISSED else "few")


def _window_start(earliest: datetime, now: datetime, starting_deadline_seconds: int | None) -> datetime | None:
    """Where the candidates for a run start (CJ-12, CJ-13): ``earliest``, moved up to ``now - sds``; None: no window."""
    if starting_deadline_seconds is None:
        return earliest
    deadline = plus_seconds(now, -starting_deadline_seconds)
    if deadline is not None:
        return max(earliest, deadline)
    # a window that opens after the end of time is empty; one reaching back past datetime.min is no clamp (TIME-1)
    return None if starting_deadline_seconds < 0 else earliest


@dataclass(frozen=True)
class MissedTimes:
    """Result of ``missed_times`` (CJ-CATCH-UP)."""

    times: list[datetime]
    """The missed activations to run, at most ``keep``, oldest first."""
    dropped: list[datetime]
    """Missed activations older than ``times`` that are not run (at most ``keep`` of them, the latest)."""


def missed_times(
    schedule: Schedule, *, earliest: datetime, now: datetime, starting_deadline_seconds: int | None, keep: int
) -> MissedTimes:
    """Every activation after ``earliest`` up to ``now``, within the deadline: the latest ``keep`` of them.

    The window is that of ``most_recent_schedule_time`` (CJ-12, CJ-13). The work is bounded however
    long the outage was: the search starts about ``2 * keep`` activations before ``now`` (estimated
    from the first interval, as upstream estimates its miss count) and reaches further back only
    while it finds too few.

    Raises:
        ValueError: a naive datetime.
    """
    now = _utc("now", now)
    window_start = _window_start(_utc("earliest", earliest), now, starting_deadline_seconds)
    if window_start is None:
        return MissedTimes([], [])
    earliest = window_start
    first = schedule.next(earliest)
    second = schedule.next(first) if first is not None else None
    if first is None or first > now:
        return MissedTimes([], [])
    span = max(second - first, _SECOND) * (2 * keep + 1) if second is not None else now - earliest
    while True:
        start = max(earliest, now - span)
        window: deque[datetime] = deque(maxlen=2 * keep + 1)
        t = schedule.next(start)
        while t is not None and t <= now:
            window.append(t)
            t = schedule.next(t)
        if len(window) > 2 * keep or start == earliest:
            found = list(window)
            return MissedTimes(found[-keep:], found[:-keep][-keep:])
        span *= 2


def schedule_times(schedule: Schedule, *, first: datetime, last: datetime, limit: int) -> list[datetime] | None:
    """The activations ``t`` with ``first <= t <= last``, oldest first; None if there are more than ``limit``.

    Raises:
        ValueError: a naive datetime.
    """
    first, last = _utc("first", first), _utc("last", last)
    found: list[datetime] = []
    if schedule.every_seconds is not None:  # a constant delay counts from where it starts: here, ``first``
        t: datetime | None = first if first.microsecond == 0 else first.replace(microsecond=0) + _SECOND
    else:
        t = schedule.next(first - _SECOND) if first.microsecond == 0 else schedule.next(first)
    while t is not None and t <= last:
        if len(found) == limit:
            return None
        found.append(t)
        t = schedule.next(t)
    return found


def next_wakeup(
    schedule: Schedule, *, earliest: datetime, now: datetime, pad: timedelta = timedelta(0)
) -> datetime | None:
    """When to evaluate the CronJob next: upstream's requeue instant (CJ-21), as an absolute time.

    Computed without the startingDeadlineSeconds clamp. Base is the due time; else ``earliest``
    if nothing was missed, else ``now``; on ``InvalidSchedule``, ``now``. The result is
    ``Next(base) + pad``. ``pad`` defaults to zero because a durable timer plus
    ``workflow.now()`` has no clock skew to absorb; pass ``NEXT_SCHEDULE_DELTA`` for upstream's
    100 ms (CJ-21).

    Args:
        schedule: the parsed schedule.
        earliest: as for ``most_recent_schedule_time`` (CJ-12).
        now: the current time.
        pad: added to the activation.

    Returns:
        The wake-up instant, or None if the schedule has no activation within 5 years.

    Raises:
        ValueError: a naive datetime.
    """
    earliest, now = _utc("earliest", earliest), _utc("now", now)
    try:
        recent = most_recent_schedule_time(
            schedule, earliest=earliest, now=now, starting_deadline_seconds=None
        )
    except ScheduleError:
        base = now
    else:
        base = recent.due or (earliest if recent.missed == "none" else now)
    activation = schedule.next(base)
    return None if activation is None else plus_seconds(activation, pad.total_seconds())


def next_in_another_minute(schedule: Schedule, wake: datetime | None, considered: datetime) -> datetime | None:
    """The first activation from ``wake`` on that falls in a later minute than ``considered``.

    Job names are per minute (CJ-30), so every activation in the minute of a time already
    considered (created, found existing, or skipped by the concurrency policy) can only meet
    the same Job: a sub-minute ``@every`` wakes once a minute, as upstream's already-processed
    check makes it act once a minute (docs/cronjob.md CJ-SUBMINUTE).

    Args:
        schedule: the parsed schedule.
        wake: the next activation (``next_wakeup``), or None.
        considered: the schedule time the current pass acted on.

    Returns:
        ``wake`` itself when it is already in another minute; otherwise a later activation, or
        None if there is none.
    """
    minute = _minute(considered)
    while wake is not None and _minute(wake) == minute:  # at most 60 turns: activations are >= 1 s apart
        wake = schedule.next(wake)
    return wake


def _minute(t: datetime) -> int:
    """Minutes since the epoch as the Job name counts them (CJ-30: Go's Unix() floor, then "/" truncating)."""
    seconds = (_utc("t", t) - _EPOCH) // _SECOND
    return abs(seconds) // 60 * (1 if seconds >= 0 else -1)


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    """Deterministic Job name ``<cronjob>-<minutes since the epoch>`` (CJ-30, CJ-31).

    Args:
        cronjob_name: the CronJob's name.
        scheduled: the scheduled time.

    Returns:
        The Job name; equal for two activations in the same minute.

    Raises:
        ValueError: ``scheduled`` is naive.
    """
    return f"{cronjob_name}-{_minute(scheduled)}"


def scheduled_timestamp_annotation(scheduled: datetime, time_zone: str | None) -> str:
    """Value of ``batch.kubernetes.io/cronjob-scheduled-timestamp`` (CJ-33).

    Go's ``time.RFC3339`` in ``spec.timeZone`` (UTC when unset, even if the schedule has a
    ``TZ=`` prefix): whole seconds, and ``Z`` for any zero offset.

    Args:
        scheduled: the scheduled time.
        time_zone: ``spec.timeZone`` or None.

    Returns:
        For example ``2026-03-09T02:30:00-04:00``.

    Raises:
        ScheduleError: ``UnknownTimeZone``.
        ValueError: ``scheduled`` is naive.
    """
    utc = _utc("scheduled", scheduled)
    zone = _load_zone(time_zone or "")
    try:
        local = utc.astimezone(zone)
    except OverflowError:  # the zone's wall clock is past year 9999: the same instant, in UTC
        local = utc
    offset = local.utcoffset() or timedelta(0)
    stamp = f"{local.year:04d}-{local:%m-%dT%H:%M:%S}"  # %Y does not pad years before 1000
    if not offset:
        return f"{stamp}Z"
    sign, minutes = ("-" if offset < timedelta(0) else "+"), abs(offset) // timedelta(minutes=1)
    return f"{stamp}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def jitter(scheduled: datetime, *, percent: int, interval: timedelta, key: str) -> timedelta:
    """Deterministic per-run start delay for ``batchd.io/jitter-percent`` (beyond upstream).

    The delay is in ``[0, percent% of interval)`` at millisecond granularity, taken from a
    SHA-256 of ``key`` and the scheduled instant, so a replayed or restarted workflow computes
    the same delay and different CronJobs on the same schedule spread out.

    Args:
        scheduled: the scheduled time.
        percent: 0-50.
        interval: the gap to the next activation; the delay stays well inside it.
        key: a stable identity, e.g. ``namespace/name``.

    Returns:
        The delay to add to ``scheduled``.

    Raises:
        ValueError: ``percent`` outside 0-50, negative ``interval``, or naive ``scheduled``.
    """
    if isinstance(percent, bool) or not 0 <= percent <= 50:
        raise ValueError(f"jitter percent must be an integer in 0..50, got {percent!r}")
    if interval < timedelta(0):
        raise ValueError(f"jitter interval must not be negative, got {interval}")
    stamp = _utc("scheduled", scheduled).isoformat()
    span_ms = interval * percent / 100 // timedelta(milliseconds=1)
    digest = hashlib.sha256(f"{key}\x00{stamp}".encode()).digest()
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") * span_ms >> 64)


def _load_zone(name: str) -> tzinfo:
    try:
        return cronexpr.load_location(name)  # Local is UTC for batchd (CJ-9)
    except LookupError as err:
        raise ScheduleError("UnknownTimeZone", f"invalid timeZone: {cronexpr.quote(name)}: {err}") from None


def _utc(name: str, value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {value!r}")
    return value.astimezone(UTC)
