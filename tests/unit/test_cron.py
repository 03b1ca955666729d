"""Tier-1 tables for workflows/cron.py: robfig/cron v3 schedule semantics (parsed and evaluated by
cronexpr) as the CronJob controller uses them (docs/cronjob.md CJ-3 to CJ-21, CJ-30, CJ-31,
CJ-33). cronexpr's own error texts and its agreement with kubesim are in test_cronexpr.py.

Expected values were checked against robfig/cron v3.0.1 itself (a throwaway Go program over
Debian's golang-github-robfig-cron-dev, not part of this repo). Every ``now`` is a fixed
instant; the real clock is never read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from workflows.cron import (
    NEXT_SCHEDULE_DELTA,
    MostRecent,
    Schedule,
    ScheduleError,
    ScheduleWarning,
    check_more,
    jitter,
    job_name,
    missed_times,
    most_recent_schedule_time,
    next_wakeup,
    parse_schedule,
    schedule_times,
    scheduled_timestamp_annotation,
)


def at(text: str) -> datetime:
    """An aware instant from ISO text, e.g. ``2026-03-08T06:30:00Z``."""
    return datetime.fromisoformat(text)


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def nexts(schedule: Schedule, start: datetime, count: int) -> list[str | None]:
    out: list[str | None] = []
    t: datetime | None = start
    for _ in range(count):
        assert t is not None
        t = schedule.next(t)
        out.append(iso(t))
        if t is None:
            break
    return out


def parse(schedule: str, zone: str | None = None) -> Schedule:
    parsed, _ = parse_schedule(schedule, zone)
    return parsed


# --- Next: grammar, descriptors, day rules, calendars, DST (CJ-3 to CJ-7, CJ-9) ----------------

NEXT_CASES = [
    # (id, schedule, spec.timeZone, start, expected activations)
    ("@yearly is midnight on 1 January", "@yearly", None, "2026-05-05T10:00:00Z",
     ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
    ("@annually is @yearly", "@annually", None, "2026-05-05T10:00:00Z",
     ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
    ("@monthly is midnight on the 1st", "@monthly", None, "2026-01-31T12:00:00Z",
     ["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"]),
    ("@weekly is midnight on Sunday", "@weekly", None, "2026-01-01T00:00:00Z",
     ["2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"]),
    ("@daily is strictly after an activation instant", "@daily", None, "2026-01-01T00:00:00Z",
     ["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"]),
    ("@midnight is @daily", "@midnight", None, "2026-01-01T00:00:00Z",
     ["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"]),
    ("@hourly from half a second before the hour", "@hourly", None, "2026-01-01T10:59:59.500000Z",
     ["2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"]),
    ("@every 1h30m drops the start's sub-second part", "@every 1h30m", None,
     "2026-01-01T00:00:00.500000Z", ["2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"]),
    ("@every 90s", "@every 90s", None, "2026-01-01T00:00:00Z",
     ["2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z"]),
    ("@every 500ms is raised to 1s", "@every 500ms", None, "2026-01-01T00:00:00Z",
     ["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]),
    ("@every 1.5s is truncated to whole seconds", "@every 1.5s", None, "2026-01-01T00:00:00Z",
     ["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]),
    ("@every 0 is raised to 1s", "@every 0", None, "2026-01-01T00:00:00Z",
     ["2026-01-01T00:00:01Z"]),
    ("@every with a negative duration is raised to 1s", "@every -5m", None,
     "2026-01-01T00:00:00Z", ["2026-01-01T00:00:01Z"]),
    ("@every ignores the time zone", "@every 2h", "Asia/Kolkata", "2026-01-01T00:00:00Z",
     ["2026-01-01T02:00:00Z"]),
    ("month and weekday names, any case", "0 9 * jan-MAR Mon-fri", None, "2026-03-31T10:00:00Z",
     ["2027-01-01T09:00:00Z", "2027-01-04T09:00:00Z"]),
    ("a/n means a to max by n", "5/15 * * * *", None, "2026-01-01T10:00:00Z",
     ["2026-01-01T10:05:00Z", "2026-01-01T10:20:00Z", "2026-01-01T10:35:00Z",
      "2026-01-01T10:50:00Z", "2026-01-01T11:05:00Z"]),
    ("? means any in every field", "? ? ? ? ?", None, "2026-01-01T10:00:00Z",
     ["2026-01-01T10:01:00Z", "2026-01-01T10:02:00Z"]),
    ("range with a step", "0 0-12/6 * * *", None, "2026-01-01T00:00:00Z",
     ["2026-01-01T06:00:00Z", "2026-01-01T12:00:00Z", "2026-01-02T00:00:00Z"]),
    ("comma list of values and ranges", "0 0 1,15-16 * *", None, "2026-01-01T00:00:00Z",
     ["2026-01-15T00:00:00Z", "2026-01-16T00:00:00Z", "2026-02-01T00:00:00Z"]),
    # CJ-6: both day fields restricted -> either matches (1 Feb 2026 is a Sunday).
    ("day-of-month and day-of-week both restricted: either matches", "0 0 1 * 1", None,
     "2026-01-26T00:00:00Z", ["2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z",
                              "2026-02-09T00:00:00Z"]),
    ("day-of-month * and a weekday: only that weekday", "0 0 * * 1", None,
     "2026-01-01T00:00:00Z", ["2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"]),
    ("day-of-month ? and a weekday: only that weekday", "0 0 ? * 1", None,
     "2026-01-01T00:00:00Z", ["2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"]),
    # robfig v3 getRange clears the star bit for a step > 1 (parser_test: "*/2" has no starBit).
    ("*/2 in day-of-month is a restriction, so the days are ORed", "0 0 */2 * 1", None,
     "2026-01-01T00:00:00Z", ["2026-01-03T00:00:00Z", "2026-01-05T00:00:00Z",
                              "2026-01-07T00:00:00Z"]),
    ("*/1 in day-of-month keeps the star, so the days are ANDed", "0 0 */1 * 1", None,
     "2026-01-01T00:00:00Z", ["2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"]),
    ("Feb 29 waits for the next leap year", "0 0 29 2 *", None, "2026-01-01T00:00:00Z",
     ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]),
    ("day 31 skips the short months", "0 0 31 * *", None, "2026-01-01T00:00:00Z",
     ["2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z",
      "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"]),
    ("Feb 29 eight years away (2096 -> 2104) is beyond robfig's 5-year search", "0 0 29 2 *",
     None, "2096-03-01T00:00:00Z", [None]),
    ("31 February never comes within 5 years", "0 0 31 2 *", None, "2026-01-01T00:00:00Z",
     [None]),
    ("timeZone evaluates the fields on the zone's wall clock", "0 9 * * *", "Asia/Kolkata",
     "2026-01-01T00:00:00Z", ["2026-01-01T03:30:00Z", "2026-01-02T03:30:00Z"]),
    ("empty timeZone loads as UTC, as Go's LoadLocation does", "0 9 * * *", "",
     "2026-01-01T00:00:00Z", ["2026-01-01T09:00:00Z"]),
    ("no timeZone is UTC", "0 9 * * *", None, "2026-01-01T00:00:00Z",
     ["2026-01-01T09:00:00Z"]),
    # DST, robfig semantics (see the comment above _next_spec).
    ("spring-forward gap in New York skips 02:30 that day, to the next day", "30 2 * * *",
     "America/New_York", "2026-03-07T17:00:00Z",
     ["2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"]),
    ("hourly across spring-forward goes 01:00 EST then 03:00 EDT", "0 * * * *",
     "America/New_York", "2026-03-08T05:30:00Z",
     ["2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"]),
    ("fall-back repeat in New York runs 01:30 twice (EDT then EST)", "30 1 * * *",
     "America/New_York", "2026-10-31T17:00:00Z",
     ["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"]),
    ("02:00 on the fall-back day runs once, in EST", "0 2 * * *", "America/New_York",
     "2026-10-31T17:00:00Z", ["2026-11-01T07:00:00Z", "2026-11-02T07:00:00Z"]),
    ("Santiago's missing midnight on 2026-09-06 is skipped", "0 0 * * *", "America/Santiago",
     "2026-09-05T00:00:00Z", ["2026-09-05T04:00:00Z", "2026-09-07T03:00:00Z"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("schedule", "zone", "start", "expected"),
    [c[1:] for c in NEXT_CASES],
    ids=[c[0] for c in NEXT_CASES],
)
def test_next_activations(
    schedule: str, zone: str | None, start: str, expected: list[str | None]
) -> None:
    assert nexts(parse(schedule, zone), at(start), len(expected)) == expected


def test_next_returns_whole_second_utc() -> None:
    # CJ-7
    result = parse("@every 1s").next(at("2026-01-01T00:00:00.999999+05:30"))
    assert result == at("2025-12-31T18:30:01Z")
    assert result is not None and result.tzinfo is UTC and result.microsecond == 0


# croniter agrees with robfig wherever there is no DST, no ``*/1`` day field and no grammar
# extension; this cross-check keeps the port honest on ordinary schedules.
AGREEING = [
    "*/5 * * * *", "0 9 * * mon-fri", "15 14 1 * *", "0 0 */2 * 1", "0 0 1,15 * 5",
    "5/15 0-12/3 * jan,jul *", "0 0 29 2 *", "0 0 31 * *", "@hourly", "@weekly", "@yearly",
]  # fmt: skip


@pytest.mark.parametrize("schedule", AGREEING)
def test_agrees_with_croniter_in_utc(schedule: str) -> None:
    start = at("2026-01-01T00:00:00Z")
    reference = croniter(schedule, start)  # explicit start: never the wall clock
    expected = [iso(reference.get_next(datetime)) for _ in range(12)]
    assert nexts(parse(schedule), start, 12) == expected


# --- Parse errors, zones and warnings (CJ-3 to CJ-5, CJ-8 to CJ-11) ----------------------------

UNPARSEABLE = [
    ("empty schedule", ""),
    ("four fields", "* * * *"),
    ("six fields (no seconds field)", "0 * * * * *"),
    ("7 is not Sunday", "0 0 * * 7"),
    ("minute 60", "60 * * * *"),
    ("hour 24", "0 24 * * *"),
    ("day-of-month 0", "0 0 0 * *"),
    ("month 13", "0 0 * 13 *"),
    ("range backwards", "5-3 * * * *"),
    ("step 0", "*/0 * * * *"),
    ("negative step", "*/-12 * * * *"),
    ("too many hyphens", "1-2-3 * * * *"),
    ("too many slashes", "*/2/3 * * * *"),
    ("not a number", "x * * * *"),
    ("month name in the day-of-week field", "0 0 * * jan"),
    ("L is not supported", "0 0 L * *"),
    ("W is not supported", "0 0 1W * *"),
    ("# is not supported", "0 0 * * 1#2"),
    ("unknown descriptor", "@reboot"),
    ("descriptors are case-sensitive", "@Daily"),
    ("descriptor with trailing space", "@daily "),
    ("descriptor after leading space", " @daily"),
    ("@every without a duration", "@every"),
    ("@every with an unknown unit", "@every 1x"),
    ("@every with a missing unit", "@every 1"),
    ("@every with a space inside the duration", "@every 1h 30m"),
    ("@every beyond Go's Duration range", "@every 2562048h"),
    ("TZ= with an unknown zone", "TZ=Nowhere/City 0 0 * * *"),
    ("TZ= with nothing after it", "TZ=UTC"),
]


@pytest.mark.parametrize("schedule", [c[1] for c in UNPARSEABLE], ids=[c[0] for c in UNPARSEABLE])
def test_unparseable_schedule(schedule: str) -> None:
    # CJ-3 to CJ-5, CJ-11
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(schedule, None)
    assert caught.value.reason == "UnparseableSchedule"
    assert caught.value.message.startswith("unparseable schedule: ")


UNKNOWN_ZONES = [
    ("unknown zone name", "0 0 * * *", "Mars/Olympus_Mons"),
    ("a zone directory is not a zone", "0 0 * * *", "America"),
    ("path escapes are rejected", "0 0 * * *", "../etc/passwd"),
    ("the zone is checked before the TZ-in-schedule rule", "TZ=UTC 0 0 * * *", "Nowhere/City"),
]


@pytest.mark.parametrize(
    ("schedule", "zone"), [c[1:] for c in UNKNOWN_ZONES], ids=[c[0] for c in UNKNOWN_ZONES]
)
def test_unknown_time_zone(schedule: str, zone: str) -> None:
    # CJ-10, CJ-23
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(schedule, zone)
    assert caught.value.reason == "UnknownTimeZone"


@pytest.mark.parametrize(
    ("schedule", "zone", "first"),
    [
        ("TZ=Asia/Tokyo 0 9 * * *", "America/New_York", "2026-01-01T00:00:00Z"),
        ("CRON_TZ=Asia/Tokyo 0 9 * * *", None, "2026-01-01T00:00:00Z"),
        ("TZ=Asia/Tokyo @daily", "Europe/Berlin", "2025-12-31T15:00:00Z"),
    ],
    ids=["TZ= wins over timeZone", "CRON_TZ= alone", "TZ= before a descriptor"],
)
def test_tz_in_schedule_warns_and_ignores_time_zone(
    schedule: str, zone: str | None, first: str
) -> None:
    # CJ-8
    parsed, warnings = parse_schedule(schedule, zone)
    assert [w.reason for w in warnings] == ["UnsupportedSchedule"]
    assert iso(parsed.next(at("2025-12-31T12:00:00Z"))) == first


def test_plain_schedule_has_no_warnings() -> None:
    assert parse_schedule("0 9 * * *", "Europe/Berlin")[1] == []


def test_warning_is_a_value() -> None:
    warning = parse_schedule("TZ=UTC 0 0 * * *", None)[1][0]
    assert warning == ScheduleWarning(warning.reason, warning.message)
    assert '"TZ=UTC 0 0 * * *"' in warning.message


# --- Catch-up math: mostRecentScheduleTime (CJ-12 to CJ-17, CJ-20) -----------------------------

HOURLY, MINUTELY = "0 * * * *", "* * * * *"
MOST_RECENT = [
    # (id, schedule, zone, earliest, now, startingDeadlineSeconds, due, missed)
    ("nothing due before the first activation", HOURLY, None,
     "2026-01-01T10:00:00Z", "2026-01-01T10:30:00Z", None, None, "none"),
    ("the first activation exactly at now is due", HOURLY, None,
     "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z", None, "2026-01-01T11:00:00Z", "none"),
    ("one due and the next not reached counts as none missed", HOURLY, None,
     "2026-01-01T10:00:00Z", "2026-01-01T11:59:59Z", None, "2026-01-01T11:00:00Z", "none"),
    ("few missed: only the most recent runs", HOURLY, None,
     "2026-01-01T10:00:00Z", "2026-01-01T13:30:00Z", None, "2026-01-01T13:00:00Z", "few"),
    ("100 missed is still few", MINUTELY, None,
     "2026-01-01T10:00:00Z", "2026-01-01T11:40:00Z", None, "2026-01-01T11:40:00Z", "few"),
    ("101 missed is many", MINUTELY, None,
     "2026-01-01T10:00:00Z", "2026-01-01T11:41:00Z", None, "2026-01-01T11:41:00Z", "many"),
    ("days of hourly misses: many, the latest runs", HOURLY, None,
     "2026-01-01T00:00:00Z", "2026-01-10T10:30:00Z", None, "2026-01-10T10:00:00Z", "many"),
    ("deadline clamps earliest to now - sds", HOURLY, None,
     "2026-01-01T00:00:00Z", "2026-01-03T13:30:00Z", 3600, "2026-01-03T13:00:00Z", "none"),
    ("a miss older than the deadline is dropped silently", HOURLY, None,
     "2026-01-01T00:00:00Z", "2026-01-03T13:30:00Z", 600, None, "none"),
    ("startingDeadlineSeconds 0 never schedules, even on the instant", HOURLY, None,
     "2026-01-01T00:00:00Z", "2026-01-03T13:00:00Z", 0, None, "none"),
    ("a deadline longer than the gap changes nothing", HOURLY, None,
     "2026-01-01T10:00:00Z", "2026-01-01T13:30:00Z", 86400, "2026-01-01T13:00:00Z", "few"),
    ("@every 90s catches up to its latest slot", "@every 90s", None,
     "2026-01-01T10:00:00Z", "2026-01-01T10:10:00Z", None, "2026-01-01T10:09:00Z", "few"),
    ("weekdays across a weekend find Thursday", "0 9 * * 1-5", None,
     "2026-01-09T09:00:00Z", "2026-01-15T10:00:00Z", None, "2026-01-15T09:00:00Z", "few"),
    # Upstream estimates the count from the first interval (1 day here), starts the walk on
    # Saturday and so never sees Friday: nothing runs until Monday. Kept for parity.
    ("upstream quirk: a weekday miss before the weekend is not run", "0 9 * * 1-5", None,
     "2026-01-05T09:00:00Z", "2026-01-11T10:00:00Z", None, None, "few"),
    ("after the first 01:30 EDT the repeated 01:30 EST is due", "30 1 * * *", "America/New_York",
     "2026-11-01T05:30:00Z", "2026-11-01T06:45:00Z", None, "2026-11-01T06:30:00Z", "none"),
    ("earliest in the future (clock skew) means nothing due", HOURLY, None,
     "2026-01-01T12:00:00Z", "2026-01-01T10:30:00Z", None, None, "none"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("schedule", "zone", "earliest", "now", "sds", "due", "missed"),
    [c[1:] for c in MOST_RECENT],
    ids=[c[0] for c in MOST_RECENT],
)
def test_most_recent_schedule_time(
    schedule: str,
    zone: str | None,
    earliest: str,
    now: str,
    sds: int | None,
    due: str | None,
    missed: str,
) -> None:
    result = most_recent_schedule_time(
        parse(schedule, zone), earliest=at(earliest), now=at(now), starting_deadline_seconds=sds
    )
    assert result == MostRecent(None if due is None else at(due), missed)  # type: ignore[arg-type]


# (id, schedule, earliest, now, sds, keep, first kept, kept count, first dropped, dropped count)
MISSED = [
    ("nothing missed", HOURLY, "2026-01-01T10:00:00Z", "2026-01-01T10:30:00Z", None, 100, None, 0, None, 0),
    ("one due", HOURLY, "2026-01-01T10:00:00Z", "2026-01-01T11:30:00Z", None, 100, "2026-01-01T11:00:00Z", 1, None, 0),
    ("every missed time, oldest first", HOURLY, "2026-01-01T10:00:00Z", "2026-01-01T13:00:00Z", None, 100,
     "2026-01-01T11:00:00Z", 3, None, 0),
    ("the deadline bounds the window", MINUTELY, "2026-01-01T10:00:00Z", "2026-01-01T11:00:30Z", 300, 100,
     "2026-01-01T10:56:00Z", 5, None, 0),
    ("100 missed: all kept", MINUTELY, "2026-01-01T10:00:00Z", "2026-01-01T11:40:00Z", None, 100,
     "2026-01-01T10:01:00Z", 100, None, 0),
    ("101 missed: the oldest dropped", MINUTELY, "2026-01-01T10:00:00Z", "2026-01-01T11:41:00Z", None, 100,
     "2026-01-01T10:02:00Z", 100, "2026-01-01T10:01:00Z", 1),
    ("a year down: the latest kept, the 100 before them dropped", MINUTELY, "2025-01-01T00:00:00Z",
     "2026-01-01T00:00:00Z", None, 100, "2025-12-31T22:21:00Z", 100, "2025-12-31T20:41:00Z", 100),
    ("weekdays across a weekend find the Friday upstream's estimate skips", "0 9 * * 1-5",
     "2026-01-05T09:00:00Z", "2026-01-11T10:00:00Z", None, 100, "2026-01-06T09:00:00Z", 4, None, 0),
    ("weekdays over years: the search reaches back far enough", "0 9 * * 1-5", "2020-01-01T00:00:00Z",
     "2026-01-01T00:00:00Z", None, 10, "2025-12-18T09:00:00Z", 10, "2025-12-04T09:00:00Z", 10),
    ("startingDeadlineSeconds 0 catches up nothing", HOURLY, "2026-01-01T00:00:00Z", "2026-01-01T13:00:00Z", 0,
     100, None, 0, None, 0),
]  # fmt: skip


@pytest.mark.parametrize(("schedule", "earliest", "now", "sds", "keep", "first", "count", "dropped", "n_dropped"),
                         [c[1:] for c in MISSED], ids=[c[0] for c in MISSED])
def test_missed_times(schedule: str, earliest: str, now: str, sds: int | None, keep: int, first: str | None,
                      count: int, dropped: str | None, n_dropped: int) -> None:
    # CJ-CATCH-UP: every missed time in the window (CJ-12, CJ-13), the latest ``keep``; the work is bounded
    sched = parse(schedule)
    result = missed_times(sched, earliest=at(earliest), now=at(now), starting_deadline_seconds=sds, keep=keep)
    assert (len(result.times), len(result.dropped)) == (count, n_dropped)
    assert (result.times[:1], result.dropped[:1]) == ([at(first)] if first else [], [at(dropped)] if dropped else [])
    chain = result.dropped + result.times
    assert all(sched.next(a) == b for a, b in zip(chain, chain[1:], strict=False))  # consecutive, none skipped
    assert not chain or chain[-1] <= at(now) and sched.next(chain[-1]) > at(now)  # up to the last due


@pytest.mark.parametrize(
    ("schedule", "first", "last", "expected"),
    [
        ("*/5 * * * *", "2026-01-01T10:00:00Z", "2026-01-01T10:15:00Z", ["10:00", "10:05", "10:10", "10:15"]),
        ("*/5 * * * *", "2026-01-01T10:00:01Z", "2026-01-01T10:14:59Z", ["10:05", "10:10"]),
        ("*/5 * * * *", "2026-01-01T10:01:00Z", "2026-01-01T10:04:00Z", []),
        ("@every 10m", "2026-01-01T10:00:00Z", "2026-01-01T10:25:00Z", ["10:00", "10:10", "10:20"]),
        ("30 8 * * *", "2026-01-01T10:30:00+02:00", "2026-01-01T08:30:00Z", ["08:30"]),
    ],
)
def test_schedule_times_includes_both_ends(schedule: str, first: str, last: str, expected: list[str]) -> None:
    # CJ-BACKFILL: the times from --from to --to, both included
    found = schedule_times(parse(schedule), first=datetime.fromisoformat(first), last=at(last), limit=1000)
    assert [t.strftime("%H:%M") for t in found or []] == expected


def test_schedule_times_over_the_limit_is_none() -> None:
    sched = parse(MINUTELY)
    assert len(schedule_times(sched, first=at("2026-01-01T00:00:00Z"), last=at("2026-01-01T16:39:00Z"), limit=1000)
               or []) == 1000
    assert schedule_times(sched, first=at("2026-01-01T00:00:00Z"), last=at("2026-01-01T16:40:00Z"), limit=1000) is None


@pytest.mark.parametrize("schedule", ["0 0 31 2 *", "0 0 30 2 *"])
def test_impossible_date_is_invalid_schedule(schedule: str) -> None:
    # CJ-15
    with pytest.raises(ScheduleError) as caught:
        most_recent_schedule_time(
            parse(schedule),
            earliest=at("2026-01-01T00:00:00Z"),
            now=at("2026-06-01T00:00:00Z"),
            starting_deadline_seconds=None,
        )
    assert caught.value.reason == "InvalidSchedule"
    assert "less than 1 second" in caught.value.message


# --- Wake-up: nextScheduleTimeDuration (CJ-21) -------------------------------------------------

WAKEUPS = [
    # (id, schedule, earliest, now, expected wake-up)
    ("nothing due: the first activation after earliest", HOURLY,
     "2026-01-01T10:00:00Z", "2026-01-01T10:30:00Z", "2026-01-01T11:00:00Z"),
    ("something due: the activation after it", HOURLY,
     "2026-01-01T10:00:00Z", "2026-01-01T13:30:00Z", "2026-01-01T14:00:00Z"),
    ("many missed: the activation after the latest", HOURLY,
     "2026-01-01T00:00:00Z", "2026-01-10T10:30:00Z", "2026-01-10T11:00:00Z"),
    ("missed but nothing due (upstream quirk): the activation after now", "0 9 * * 1-5",
     "2026-01-05T09:00:00Z", "2026-01-11T10:00:00Z", "2026-01-12T09:00:00Z"),
    ("earliest in the future: the activation after earliest", HOURLY,
     "2026-01-01T12:00:00Z", "2026-01-01T10:30:00Z", "2026-01-01T13:00:00Z"),
    ("impossible date: never", "0 0 31 2 *",
     "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("schedule", "earliest", "now", "expected"),
    [c[1:] for c in WAKEUPS],
    ids=[c[0] for c in WAKEUPS],
)
def test_next_wakeup(schedule: str, earliest: str, now: str, expected: str | None) -> None:
    assert iso(next_wakeup(parse(schedule), earliest=at(earliest), now=at(now))) == expected


def test_next_wakeup_ignores_the_deadline_clamp() -> None:
    # CJ-13, CJ-21: a CronJob whose misses are all too late still wakes at its next slot.
    schedule = parse(HOURLY)
    earliest, now = at("2026-01-01T00:00:00Z"), at("2026-01-03T13:30:00Z")
    assert most_recent_schedule_time(
        schedule, earliest=earliest, now=now, starting_deadline_seconds=600
    ) == MostRecent(None, "none")
    assert next_wakeup(schedule, earliest=earliest, now=now) == at("2026-01-03T14:00:00Z")


def test_next_wakeup_pad_is_upstreams_100ms_when_asked() -> None:
    # CJ-21
    woke = next_wakeup(
        parse(HOURLY),
        earliest=at("2026-01-01T10:00:00Z"),
        now=at("2026-01-01T10:30:00Z"),
        pad=NEXT_SCHEDULE_DELTA,
    )
    assert woke == at("2026-01-01T11:00:00.100000Z")


# --- Job name and scheduled-timestamp annotation (CJ-30, CJ-31, CJ-33) -------------------------

JOB_NAMES = [
    ("minutes since the epoch", "hello", "2026-01-15T10:00:00Z", "hello-29474520"),
    ("seconds within the minute are dropped", "hello", "2026-01-15T10:00:59Z", "hello-29474520"),
    ("the epoch is minute 0", "x", "1970-01-01T00:00:00Z", "x-0"),
    ("an offset-aware input names the same instant", "hello", "2026-01-15T05:00:00-05:00",
     "hello-29474520"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "scheduled", "expected"), [c[1:] for c in JOB_NAMES], ids=[c[0] for c in JOB_NAMES]
)
def test_job_name(name: str, scheduled: str, expected: str) -> None:
    assert job_name(name, at(scheduled)) == expected


def test_two_activations_in_one_minute_share_a_job_name() -> None:
    # CJ-31: the second one takes the AlreadyExists path.
    first, second, third = (
        at(str(t)) for t in nexts(parse("@every 30s"), at("2026-01-15T09:59:30Z"), 3)
    )
    assert (iso(first), iso(third)) == ("2026-01-15T10:00:00Z", "2026-01-15T10:01:00Z")
    assert job_name("c", first) == job_name("c", second) != job_name("c", third)


ANNOTATIONS = [
    ("unset timeZone is UTC with Z", None, "2026-01-15T10:00:00Z", "2026-01-15T10:00:00Z"),
    ("empty timeZone is UTC with Z", "", "2026-01-15T10:00:00Z", "2026-01-15T10:00:00Z"),
    ("New York in winter", "America/New_York", "2026-01-15T10:00:00Z",
     "2026-01-15T05:00:00-05:00"),
    ("New York in summer", "America/New_York", "2026-07-15T10:00:00Z",
     "2026-07-15T06:00:00-04:00"),
    ("the repeated hour shows its own offset", "America/New_York", "2026-11-01T06:30:00Z",
     "2026-11-01T01:30:00-05:00"),
    ("half-hour offset", "Asia/Kolkata", "2026-01-15T10:00:00Z", "2026-01-15T15:30:00+05:30"),
    ("quarter-hour offset", "Asia/Kathmandu", "2026-01-15T10:00:00Z",
     "2026-01-15T15:45:00+05:45"),
    ("a zero offset prints Z, as Go's RFC3339 does", "Europe/London", "2026-01-15T10:00:00Z",
     "2026-01-15T10:00:00Z"),
    ("whole seconds only", None, "2026-01-15T10:00:00.250000Z", "2026-01-15T10:00:00Z"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("zone", "scheduled", "expected"),
    [c[1:] for c in ANNOTATIONS],
    ids=[c[0] for c in ANNOTATIONS],
)
def test_scheduled_timestamp_annotation(zone: str | None, scheduled: str, expected: str) -> None:
    assert scheduled_timestamp_annotation(at(scheduled), zone) == expected


def test_annotation_with_unknown_zone_is_an_error() -> None:
    # CJ-33; an unknown zone makes no Job (CJ-10).
    with pytest.raises(ScheduleError) as caught:
        scheduled_timestamp_annotation(at("2026-01-15T10:00:00Z"), "Nowhere/City")
    assert caught.value.reason == "UnknownTimeZone"


# --- Jitter (beyond upstream: batchd.io/jitter-percent) ----------------------------------------


def test_jitter_is_deterministic_and_pinned() -> None:
    # Running workflows replay with this value: changing the hash is a breaking change.
    args = {"percent": 10, "interval": timedelta(hours=1), "key": "default/nightly"}
    first = jitter(at("2026-01-15T10:00:00Z"), **args)  # type: ignore[arg-type]
    assert first == jitter(at("2026-01-15T10:00:00Z"), **args)  # type: ignore[arg-type]
    assert first == timedelta(minutes=4, seconds=22, milliseconds=636)


@pytest.mark.parametrize("percent", [1, 10, 50])
def test_jitter_stays_within_percent_of_interval(percent: int) -> None:
    interval = timedelta(minutes=5)
    bound = interval * percent / 100
    delays = {
        jitter(
            at("2026-01-15T10:00:00Z") + k * interval,
            percent=percent,
            interval=interval,
            key=f"ns/cj-{k % 7}",
        )
        for k in range(300)
    }
    assert all(timedelta(0) <= d < bound for d in delays)
    assert len(delays) > 100  # spread, not a constant


def test_jitter_differs_between_cronjobs_on_one_schedule() -> None:
    scheduled, interval = at("2026-01-15T10:00:00Z"), timedelta(hours=1)
    delays = {jitter(scheduled, percent=20, interval=interval, key=f"ns/c{i}") for i in range(20)}
    assert len(delays) > 15


@pytest.mark.parametrize(
    ("percent", "interval"),
    [(0, timedelta(hours=1)), (50, timedelta(0)), (1, timedelta(milliseconds=50))],
    ids=["percent 0", "zero interval", "span under a millisecond"],
)
def test_jitter_zero_span_is_no_delay(percent: int, interval: timedelta) -> None:
    assert jitter(at("2026-01-15T10:00:00Z"), percent=percent, interval=interval, key="k") == (
        timedelta(0)
    )


@pytest.mark.parametrize(
    ("percent", "interval"),
    [(-1, timedelta(hours=1)), (51, timedelta(hours=1)), (True, timedelta(hours=1)),
     (10, timedelta(seconds=-1))],
    ids=["percent below 0", "percent above 50", "bool is not a percent", "negative interval"],
)  # fmt: skip
def test_jitter_rejects_bad_arguments(percent: int, interval: timedelta) -> None:
    with pytest.raises(ValueError):
        jitter(at("2026-01-15T10:00:00Z"), percent=percent, interval=interval, key="k")


# --- Naive datetimes are bugs ------------------------------------------------------------------

NAIVE = datetime(2026, 1, 15, 10, 0)
AWARE = at("2026-01-15T10:00:00Z")
_SCHEDULE = parse(HOURLY)
NAIVE_CALLS: list[tuple[str, Callable[[], object]]] = [
    ("Schedule.next", lambda: _SCHEDULE.next(NAIVE)),
    ("@every next", lambda: parse("@every 1m").next(NAIVE)),
    ("most_recent earliest", lambda: most_recent_schedule_time(
        _SCHEDULE, earliest=NAIVE, now=AWARE, starting_deadline_seconds=None)),
    ("most_recent now", lambda: most_recent_schedule_time(
        _SCHEDULE, earliest=AWARE, now=NAIVE, starting_deadline_seconds=None)),
    ("next_wakeup", lambda: next_wakeup(_SCHEDULE, earliest=AWARE, now=NAIVE)),
    ("job_name", lambda: job_name("c", NAIVE)),
    ("annotation", lambda: scheduled_timestamp_annotation(NAIVE, None)),
    ("jitter", lambda: jitter(NAIVE, percent=10, interval=timedelta(hours=1), key="k")),
]  # fmt: skip


@pytest.mark.parametrize("call", [c[1] for c in NAIVE_CALLS], ids=[c[0] for c in NAIVE_CALLS])
def test_naive_datetime_is_rejected(call: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        call()


def test_aware_non_utc_input_is_accepted() -> None:
    berlin = datetime(2026, 1, 15, 11, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert _SCHEDULE.next(berlin) == at("2026-01-15T11:00:00Z")


def test_several_schedules_run_at_their_union_in_the_cronjobs_zone() -> None:  # CJ-SCHEDULES
    sched, _ = parse_schedule("0 9 * * *", "Europe/Berlin", ["30 12 * * 1-5", "0 9 * * *", "@hourly"])
    after = datetime(2026, 6, 5, 9, 10, tzinfo=UTC)  # a Friday, 11:10 in Berlin
    times = []
    t: datetime | None = after
    for _ in range(4):
        t = sched.next(t) if t else None
        times.append(t)
    assert times == [datetime(2026, 6, 5, 10, 0, tzinfo=UTC), datetime(2026, 6, 5, 10, 30, tzinfo=UTC),  # 12:30
                     datetime(2026, 6, 5, 11, 0, tzinfo=UTC), datetime(2026, 6, 5, 12, 0, tzinfo=UTC)]
    assert sched.source == "0 9 * * *; 30 12 * * 1-5; 0 9 * * *; @hourly"
    assert sched.every_seconds is None
    most = most_recent_schedule_time(sched, earliest=after, now=datetime(2026, 6, 5, 10, 45, tzinfo=UTC),
                                     starting_deadline_seconds=None)
    assert most.due == datetime(2026, 6, 5, 10, 30, tzinfo=UTC)


@pytest.mark.parametrize(("expression", "refused"), [
    ("30 12 * * 1-5", None), ("@daily", None),
    ("61 * * * *", "above maximum"), ("TZ=UTC 0 * * * *", "timeZone"), ("@every 5m", "@every"), ("x", "x"),
])
def test_what_may_join_a_union(expression: str, refused: str | None) -> None:  # CJ-SCHEDULES
    why = check_more(expression)
    assert why is None if refused is None else refused in (why or "")
