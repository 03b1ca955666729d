"""Schedule math for CronJobs: parse, next activation, missed-run and wake-up arithmetic.

Layer: workflows, pure (no I/O, no wall clock, no temporalio). Callers: the CronJob workflow,
which imports it through ``workflow.unsafe.imports_passed_through()`` (``ZoneInfo`` only works
outside the sandbox, notes/temporal-python-sdk.md §4), and the bridge, to validate a spec.
Every time is passed in as an aware datetime; a naive one is a bug and raises ValueError.
Results are whole-second UTC datetimes.

Semantics are those of robfig/cron v3 ``ParseStandard`` / ``SpecSchedule.Next`` as used by
the upstream CronJob controller (KEP-19; spec/cronjob-and-ttl.md B1-B24, C15, C18). croniter is
deliberately not used: it disagrees with robfig on the grammar (accepts ``7``, 6 or 7 fields,
``L``/``W``/``#``, no ``@every``, no ``TZ=``), on ``*/1`` in a day field (croniter ORs the day
fields, robfig ANDs them) and on the spring-forward gap (croniter fires at the end of the gap,
robfig skips that day). Rather than patching croniter in three places, ``_next_spec`` ports
robfig's ~60-line search loop, emulating Go's ``time`` semantics; tests cross-check it against
croniter wherever the two agree.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import deque
from dataclasses import dataclass
from datetime import MAXYEAR, MINYEAR, UTC, datetime, timedelta, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from workflows.times import plus_seconds

#: Upstream's ``nextScheduleDelta`` (B25): requeue padding for clock skew. Optional here, see
#: ``next_wakeup``.
NEXT_SCHEDULE_DELTA = timedelta(milliseconds=100)
#: B19: more missed start times than this is "many" (Warning ``TooManyMissedTimes``).
MANY_MISSED = 100

_STAR = 1 << 63  # robfig's starBit: the field was a bare ``*`` or ``?`` (B4)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_MONTHS = {n: i for i, n in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_DAYS = {n: i for i, n in enumerate("sun mon tue wed thu fri sat".split())}
# (min, max, names) per field, in ParseStandard's order (B1).
_BOUNDS: list[tuple[int, int, dict[str, int]]] = [
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
]
_DESCRIPTORS = {  # minute, hour, dom, month, dow spellings of robfig's predefined schedules
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_GO_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts
_GO_UNITS = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,
    "\u03bcs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_GO_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")

Missed = Literal["none", "few", "many"]


class ScheduleError(Exception):
    """A schedule or time zone that cannot be evaluated; the workflow turns it into an Event.

    Attributes:
        reason: the upstream Event reason: ``UnparseableSchedule`` (B11), ``UnknownTimeZone``
            (B10, C18) or ``InvalidSchedule`` (B15, B18).
        message: the Event message, worded as upstream.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ScheduleWarning:
    """A Warning Event to emit while still scheduling (B6: ``UnsupportedSchedule``)."""

    reason: str
    message: str


@dataclass(frozen=True)
class MostRecent:
    """Result of ``most_recent_schedule_time`` (B14-B17)."""

    due: datetime | None
    """The single most recent activation at or before ``now`` to act on; None if none."""
    missed: Missed
    """``none`` (at most one activation since earliest), ``few``, or ``many`` (> 100, B19)."""


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: robfig bit sets (bit 63 = star) or a constant ``@every`` delay."""

    source: str
    """The schedule as written in the spec, for messages."""
    location: tzinfo
    """Zone whose wall clock the fields are matched in (UTC unless TZ=/timeZone says otherwise)."""
    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    every_seconds: int | None = None
    """Set for ``@every``: whole seconds, at least 1 (B3)."""

    def next(self, after: datetime) -> datetime | None:
        """First activation strictly after ``after`` (B5).

        Args:
            after: an aware instant; its sub-second part is ignored, as in robfig.

        Returns:
            A whole-second UTC datetime, or None if nothing matches within 5 years.

        Raises:
            ValueError: ``after`` is naive.
        """
        start = _utc("after", after).replace(microsecond=0)
        if self.every_seconds is not None:  # ConstantDelaySchedule.Next
            return plus_seconds(start, self.every_seconds)
        try:
            return _next_spec(self, start + _SECOND)
        except OverflowError:  # search ran past datetime.max: nothing "within 5 years" either
            return None


def parse_schedule(schedule: str, time_zone: str | None) -> tuple[Schedule, list[ScheduleWarning]]:
    """Parse ``spec.schedule`` in ``spec.timeZone`` as the controller's sync does (B6-B11, C9).

    The zone is checked first (B10), then a schedule containing ``TZ`` is parsed as-is with a
    warning and ``time_zone`` ignored (B6); otherwise it is parsed as ``TZ=<zone> <schedule>``
    (B7). An unset zone means UTC: upstream uses the controller-manager's local zone, which is
    UTC in practice. As in Go's ``time.LoadLocation``, ``""``, ``UTC`` and ``Local`` are UTC.

    Args:
        schedule: ``spec.schedule``.
        time_zone: ``spec.timeZone`` (IANA name) or None.

    Returns:
        The parsed schedule and the warnings to emit as Events.

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
                f"{json.dumps(schedule)} is not officially supported, see "
                "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
            )
        )
        spec = schedule
    else:
        spec = f"TZ={time_zone} {schedule}" if time_zone is not None else schedule
    try:
        return _parse_standard(spec, schedule), warnings
    except ValueError as err:
        raise ScheduleError(
            "UnparseableSchedule", f"unparseable schedule: {json.dumps(schedule)} : {err}"
        ) from None


def most_recent_schedule_time(
    schedule: Schedule, *, earliest: datetime, now: datetime, starting_deadline_seconds: int | None
) -> MostRecent:
    """Upstream ``mostRecentScheduleTime``: what is due now, and how much was missed (B12-B17).

    Only the latest due time is returned; earlier misses are never backfilled (B17). Like
    upstream, the miss count is estimated from the first interval only, so for irregular
    schedules (``0 9 * * 1-5``) a miss just before a gap can go unreported.

    Args:
        schedule: the parsed schedule.
        earliest: ``status.lastScheduleTime``, else ``metadata.creationTimestamp`` (B12).
        now: the current time (``workflow.now()``).
        starting_deadline_seconds: ``spec.startingDeadlineSeconds``; clamps ``earliest`` to
            ``now - sds`` (B13), so older misses are dropped silently and 0 never schedules (B22).
            Pass None for no deadline.

    Returns:
        The due time (or None) and the missed classification.

    Raises:
        ScheduleError: ``InvalidSchedule`` when two activations are under 1 s apart, which is how
            an impossible date such as ``0 0 31 2 *`` shows up (B15).
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
    """Where the candidates for a run start (B12, B13): ``earliest``, moved up to ``now - sds``; None: no window."""
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

    The window is that of ``most_recent_schedule_time`` (B12, B13). The work is bounded however
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
    """When to evaluate the CronJob next: upstream's requeue instant (B24), as an absolute time.

    Computed without the startingDeadlineSeconds clamp. Base is the due time; else ``earliest``
    if nothing was missed, else ``now``; on ``InvalidSchedule``, ``now``. The result is
    ``Next(base) + pad``. ``pad`` defaults to zero because a durable timer plus
    ``workflow.now()`` has no clock skew to absorb; pass ``NEXT_SCHEDULE_DELTA`` for upstream's
    100 ms (B25).

    Args:
        schedule: the parsed schedule.
        earliest: as for ``most_recent_schedule_time`` (B12).
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

    Job names are per minute (C15), so every activation in the minute of a time already
    considered (created, found existing, or skipped by the concurrency policy) can only meet
    the same Job: a sub-minute ``@every`` wakes once a minute, as upstream's already-processed
    check makes it act once a minute (README: CJ-SUBMINUTE).

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
    """Minutes since the epoch as the Job name counts them (C15: Go's Unix() floor, then "/" truncating)."""
    seconds = (_utc("t", t) - _EPOCH) // _SECOND
    return abs(seconds) // 60 * (1 if seconds >= 0 else -1)


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    """Deterministic Job name ``<cronjob>-<minutes since the epoch>`` (C15, C16).

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
    """Value of ``batch.kubernetes.io/cronjob-scheduled-timestamp`` (C18).

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


# --- robfig/cron v3 parser (parser.go: Parse, normalizeFields, getRange) ---------------------


def _parse_standard(spec: str, source: str) -> Schedule:
    if not spec:
        raise ValueError("empty spec string")
    location: tzinfo = UTC
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space == -1:  # v3.0.1 panics here (slice bounds); later robfig returns this error
            raise ValueError(f"invalid timezone specification: {spec}")
        name = spec[spec.index("=") + 1 : space]
        try:
            location = _load_zone(name)
        except ScheduleError:
            raise ValueError(f"provided bad location {name}: unknown time zone {name}") from None
        spec = spec[space:].strip()
    if spec.startswith("@"):
        if spec.startswith("@every "):
            return Schedule(source, location, every_seconds=_every_seconds(spec[7:]))
        if spec not in _DESCRIPTORS:
            raise ValueError(f"unrecognized descriptor: {spec}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise ValueError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    bits = [_field_bits(f, *b) for f, b in zip(fields, _BOUNDS, strict=True)]
    return Schedule(source, location, *bits)


def _field_bits(field: str, low: int, high: int, names: dict[str, int]) -> int:
    bits = 0
    for expr in filter(None, field.split(",")):  # Go's FieldsFunc drops empty items
        range_step = expr.split("/")
        low_high = range_step[0].split("-")
        extra = 0
        if low_high[0] in ("*", "?"):  # robfig ignores anything after "*-"
            start, end, extra = low, high, _STAR
        else:
            start = end = _int_or_name(low_high[0], names)
            if len(low_high) > 2:
                raise ValueError(f"too many hyphens: {expr}")
            if len(low_high) == 2:
                end = _int_or_name(low_high[1], names)
        step = 1
        if len(range_step) > 2:
            raise ValueError(f"too many slashes: {expr}")
        if len(range_step) == 2:
            step = _int_or_name(range_step[1], {})
            if len(low_high) == 1:
                end = high  # "N/step" means "N-max/step"
            if step > 1:  # v3: "*/2" is a restriction, so the day fields are ORed (B4)
                extra = 0
        if start < low:
            raise ValueError(f"beginning of range ({start}) below minimum ({low}): {expr}")
        if end > high:
            raise ValueError(f"end of range ({end}) above maximum ({high}): {expr}")
        if start > end:
            raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
        if step == 0:
            raise ValueError(f"step of range should be a positive number: {expr}")
        bits |= sum(1 << i for i in range(start, end + 1, step)) | extra
    return bits


def _int_or_name(expr: str, names: dict[str, int]) -> int:
    if expr.lower() in names:
        return names[expr.lower()]
    if not _GO_INT.fullmatch(expr):
        raise ValueError(f"failed to parse int from {expr}: invalid syntax")
    if not -(2**63) <= int(expr) < 2**63:
        raise ValueError(f"failed to parse int from {expr}: value out of range")
    if int(expr) < 0:
        raise ValueError(f"negative number ({int(expr)}) not allowed: {expr}")
    return int(expr)


def _every_seconds(text: str) -> int:
    """Go's ``time.ParseDuration``, then robfig's ``Every``: whole seconds, at least 1 (B3)."""
    invalid = ValueError(f"failed to parse duration @every {text}: invalid duration {text!r}")
    rest, negative = text, text[:1] == "-"
    rest = rest[1:] if rest[:1] in ("-", "+") else rest
    if rest == "0":
        return 1
    if not rest:
        raise invalid
    total = 0
    while rest:
        part = _GO_DURATION_PART.match(rest)
        assert part is not None  # every group may be empty, so the pattern always matches
        whole, frac, unit = part.group(1), part.group(2) or "", part.group(3)
        if not whole and not frac:
            raise invalid
        if unit not in _GO_UNITS:
            raise ValueError(f"failed to parse duration @every {text}: unknown unit {unit!r}")
        scale = _GO_UNITS[unit]
        total += int(whole or 0) * scale + int(frac or 0) * scale // 10 ** len(frac)
        if total > 2**63 - (0 if negative else 1):
            raise invalid
        rest = rest[part.end() :]
    nanos = -total if negative else total
    return max(nanos // 10**9, 1)


# --- robfig/cron v3 SpecSchedule.Next (spec.go), with Go's time arithmetic -------------------
#
# DST behaviour follows from porting the loop with Go semantics (t.Add is absolute time,
# AddDate/time.Date are wall-clock; robfig/cron spec.go, read via the search index). Parser and
# Next were checked against robfig/cron v3.0.1 itself (Debian golang-github-robfig-cron-dev, the
# version Kubernetes vendors) on 28,000 random schedules, zones and start times: no difference.
# - Spring-forward gap, e.g. 30 2 * * * America/New_York on 2026-03-08: the hour loop steps
#   01:00 EST -> 03:00 EDT, hour 2 never occurs, so that day is skipped (next: 03-09 02:30 EDT).
#   robfig/cron PR #541 (open, "Don't skip crons when time jumps forward due to DST") confirms
#   v3 skips; croniter instead fires at 03:00 EDT.
# - Fall-back repeat, e.g. 30 1 * * * on 2026-11-01: the minute loop steps through both
#   01:xx hours in absolute time, so the job runs twice (01:30 EDT and 01:30 EST).
# - A day whose midnight does not exist (America/Santiago 2026-09-06): spec.go's day loop
#   moves 23:00 forward / 01:00 back to the day's start, as upstream.


def _next_spec(s: Schedule, t: datetime) -> datetime | None:
    loc = s.location
    w = t.astimezone(loc)
    year_limit, added = w.year + 5, False

    def date(y: int, mo: int, d: int, h: int = 0, mi: int = 0, sec: int = 0) -> datetime:
        return _go_date(loc, y, mo, d, h, mi, sec)

    while True:  # each "continue" is spec.go's "goto WRAP"
        w = t.astimezone(loc)
        if w.year > year_limit:
            return None
        while not s.month >> w.month & 1:
            if not added:
                added, t = True, date(w.year, w.month, 1)
                w = t.astimezone(loc)
            t = date(w.year, w.month + 1, w.day, w.hour, w.minute, w.second)  # AddDate(0, 1, 0)
            w = t.astimezone(loc)
            if w.month == 1:
                break
        else:
            while not _day_matches(s, w):
                if not added:
                    added, t = True, date(w.year, w.month, w.day)
                    w = t.astimezone(loc)
                t = date(w.year, w.month, w.day + 1, w.hour, w.minute, w.second)  # AddDate(0,0,1)
                w = t.astimezone(loc)
                if w.hour:  # midnight fell into a DST change: move to the day's start
                    t += timedelta(hours=24 - w.hour if w.hour > 12 else -w.hour)
                    w = t.astimezone(loc)
                if w.day == 1:
                    break
            else:
                t, added, done = _advance(s, t, added)
                if done:
                    return t
    # unreachable: the loop only exits by return


def _advance(s: Schedule, t: datetime, added: bool) -> tuple[datetime, bool, bool]:
    """The hour, minute and second loops of spec.go; returns (t, added, found)."""
    loc = s.location
    w = t.astimezone(loc)
    while not s.hour >> w.hour & 1:
        if not added:
            added, t = True, _go_date(loc, w.year, w.month, w.day, w.hour, 0, 0)
        t += timedelta(hours=1)
        w = t.astimezone(loc)
        if w.hour == 0:
            return t, added, False
    while not s.minute >> w.minute & 1:
        if not added:
            added, t = True, t.replace(second=0)  # Truncate(time.Minute) is on absolute time
        t += timedelta(minutes=1)
        w = t.astimezone(loc)
        if w.minute == 0:
            return t, added, False
    while w.second:  # ParseStandard's seconds field is always "0"
        added, t = True, t + _SECOND
        w = t.astimezone(loc)
        if w.second == 0:
            return t, added, False
    return t, added, True


def _day_matches(s: Schedule, w: datetime) -> bool:
    dom_match = bool(s.dom >> w.day & 1)
    dow_match = bool(s.dow >> (w.weekday() + 1) % 7 & 1)  # Go's Weekday: Sunday is 0
    if (s.dom | s.dow) & _STAR:
        return dom_match and dow_match
    return dom_match or dow_match


def _go_date(loc: tzinfo, y: int, mo: int, d: int, h: int, mi: int, sec: int) -> datetime:
    """Go's ``time.Date`` in ``loc``: normalises overflowing fields, then resolves the wall time.

    Go takes the offset in force at the wall time read as UTC, and if that instant falls outside
    the offset's period, the offset at the corrected instant. So a time in a spring-forward gap
    lands an hour early (02:30 -> 01:30 EST) and a repeated time takes its first occurrence.
    """
    y, mo = y + (mo - 1) // 12, (mo - 1) % 12 + 1
    if not MINYEAR <= y <= MAXYEAR:
        raise OverflowError(f"year {y} is outside datetime's range")  # Schedule.next: no activation
    naive = datetime(y, mo, 1, tzinfo=UTC) + timedelta(days=d - 1, hours=h, minutes=mi, seconds=sec)
    first = naive.astimezone(loc).utcoffset() or timedelta(0)
    return naive - ((naive - first).astimezone(loc).utcoffset() or timedelta(0))


@functools.cache
def _zone(name: str) -> ZoneInfo:
    # ZoneInfo keeps only the 8 most recently used zones strongly; a worker with CronJobs in many
    # zones would read zone files from disk inside workflow tasks again and again.
    return ZoneInfo(name)


def _load_zone(name: str) -> tzinfo:
    if name in ("", "UTC", "Local"):  # Go's LoadLocation; Local is UTC for batchd (B7)
        return UTC
    try:
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            "UnknownTimeZone", f"invalid timeZone: {json.dumps(name)}: unknown time zone {name}"
        ) from None


def _utc(name: str, value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {value!r}")
    return value.astimezone(UTC)
