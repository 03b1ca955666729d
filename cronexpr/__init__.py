"""CronJob schedules as Kubernetes reads them: robfig/cron v3 ``ParseStandard`` and ``Next``.

Layer: its own top-level package, pure (standard library only, no wall clock, no randomness) and
importing nothing from batchd or kubesim. Callers: ``workflows/cron.py``, the CronJob controller's
schedule maths, which workflow code imports passed through Temporal's sandbox; and
``kubesim/strategy/cronjob.py``, the API server's CronJob validation. With one parser the emulated API
server refuses exactly the schedules batchd cannot evaluate, in the words the real one uses
(docs/cronjob.md CJ-3 to CJ-7, docs/kubesim.md API-51).

Semantics are those of robfig/cron v3.0.1, the version Kubernetes vendors: ``Parser.Parse`` for
the standard five fields with descriptors (parser.go), ``SpecSchedule.Next`` (spec.go) and
``ConstantDelaySchedule`` (constantdelay.go), on Go's ``time`` arithmetic, with the parts of Go's
``time.ParseDuration``, ``time.LoadLocation`` and ``strconv`` that the results and the error texts
depend on. What the parser accepts and what ``Next`` returns were checked against robfig/cron
v3.0.1 itself (Debian golang-github-robfig-cron-dev) on 28,000 random schedules, zones and start
times; the error texts follow v3.0.1's parser.go and Go's strconv and time sources.

croniter is deliberately not used: it disagrees with robfig on the grammar (accepts ``7``, 6 or 7
fields, ``L``/``W``/``#``, no ``@every``, no ``TZ=``), on ``*/1`` in a day field (croniter ORs the
day fields, robfig ANDs them) and on the spring-forward gap (croniter fires at the end of the gap,
robfig skips that day).

Where this differs from robfig on purpose:
- A schedule without ``TZ=`` is evaluated in UTC, not in the process's local zone; ``Local`` is
  UTC too.
- ``TZ=<zone>`` with nothing after it makes v3.0.1 slice out of bounds and panic; here it is a
  :class:`ParseError`.
- A schedule that can never match (an empty field such as ``,``) has no next activation at once,
  where robfig searches five years minute by minute to find none.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import MAXYEAR, MINYEAR, UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["ParseError", "Schedule", "load_location", "parse_duration", "parse_standard", "quote"]

_STAR = 1 << 63  # robfig's starBit: the field was a bare ``*`` or ``?`` (CJ-6)
_SECOND = timedelta(seconds=1)
_MONTHS = {n: i for i, n in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_DAYS = {n: i for i, n in enumerate("sun mon tue wed thu fri sat".split())}
# (min, max, names) per field, in ParseStandard's order (CJ-3).
_BOUNDS: list[tuple[int, int, dict[str, int]]] = [
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
]
_DESCRIPTORS = {  # minute, hour, dom, month, dow spellings of robfig's predefined schedules (CJ-5)
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Go's unicode.IsSpace, on which strings.Fields splits and strings.TrimSpace trims. Python's own
# str.split() would also split on U+001C-U+001F, which Go keeps inside a field.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_GO_FIELD = re.compile(f"[^{_GO_SPACE}]+")
_GO_TRIM = re.compile(f"^[{_GO_SPACE}]+|[{_GO_SPACE}]+\\Z")
_GO_INT = re.compile(r"[+-]?[0-9]+")  # what strconv.Atoi accepts
_GO_UNITS = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,  # micro sign
    "\u03bcs": 10**3,  # Greek mu
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_GO_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")  # digits, fraction, unit
_QUOTE_ESCAPES = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
    '"': '\\"', "\\": "\\\\",
}  # fmt: skip


class ParseError(ValueError):
    """A schedule robfig refuses; ``str()`` is robfig's error text, which the API server returns
    for ``spec.schedule`` and the controller puts in its ``UnparseableSchedule`` Event."""


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: robfig's bit sets (bit 63 = star) or a constant ``@every`` delay."""

    location: tzinfo
    """Zone whose wall clock the fields are matched in: UTC unless the spec had ``TZ=``."""
    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    every_seconds: int | None = None
    """Set for ``@every``: whole seconds, at least 1 (CJ-5)."""

    def next(self, after: datetime) -> datetime | None:
        """First activation strictly after ``after`` (CJ-7).

        Args:
            after: an aware instant; its sub-second part is ignored, as in robfig.

        Returns:
            A whole-second UTC datetime, or None if nothing matches within 5 years (or before the
            end of ``datetime``'s range).

        Raises:
            ValueError: ``after`` is naive.
        """
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError(f"after must be a timezone-aware datetime, got naive {after!r}")
        start = after.astimezone(UTC).replace(microsecond=0)
        try:
            if self.every_seconds is not None:  # ConstantDelaySchedule.Next
                return start + timedelta(seconds=self.every_seconds)
            return None if _never(self) else _next_spec(self, start + _SECOND)
        except OverflowError:  # past datetime.max: nothing "within 5 years" either
            return None


def parse_standard(spec: str) -> Schedule:
    """robfig/cron v3 ``ParseStandard``: five fields, a descriptor or ``@every``, after an optional
    ``TZ=<zone> `` or ``CRON_TZ=<zone> `` prefix (CJ-3 to CJ-5, CJ-8).

    Args:
        spec: the schedule text.

    Returns:
        The schedule.

    Raises:
        ParseError: robfig refuses it; the message is robfig's.
    """
    if not spec:
        raise ParseError("empty spec string")
    location: tzinfo = UTC
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space == -1:  # v3.0.1 panics here (see the module docstring)
            raise ParseError(f"invalid timezone specification: {spec}")
        name = spec[spec.index("=") + 1 : space]
        try:
            location = load_location(name)
        except LookupError as err:
            raise ParseError(f"provided bad location {name}: {err}") from None
        spec = _GO_TRIM.sub("", spec[space:])
    if spec.startswith("@"):
        if spec in _DESCRIPTORS:
            spec = _DESCRIPTORS[spec]
        elif spec.startswith("@every "):
            try:
                nanos = parse_duration(spec[len("@every ") :])
            except ParseError as err:
                raise ParseError(f"failed to parse duration {spec}: {err}") from None
            # robfig's Every: at least a second, then whole seconds (Go's % truncates; nanos > 0)
            return Schedule(location, every_seconds=max(nanos, 10**9) // 10**9)
        else:
            raise ParseError(f"unrecognized descriptor: {spec}")
    fields = _GO_FIELD.findall(spec)
    if len(fields) != 5:
        raise ParseError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    minute, hour, dom, month, dow = (_field(f, *b) for f, b in zip(fields, _BOUNDS, strict=True))
    return Schedule(location, minute, hour, dom, month, dow)


def _field(field: str, low: int, high: int, names: dict[str, int]) -> int:
    """getField and getRange: the bits of a comma-separated list of ranges (CJ-4)."""
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
                raise ParseError(f"too many hyphens: {expr}")
            if len(low_high) == 2:
                end = _int_or_name(low_high[1], names)
        step = 1
        if len(range_step) > 2:
            raise ParseError(f"too many slashes: {expr}")
        if len(range_step) == 2:
            step = _atoi(range_step[1])
            if len(low_high) == 1:
                end = high  # "N/step" means "N-max/step"
            if step > 1:  # v3: "*/2" is a restriction, so the day fields are ORed (CJ-6)
                extra = 0
        if start < low:
            raise ParseError(f"beginning of range ({start}) below minimum ({low}): {expr}")
        if end > high:
            raise ParseError(f"end of range ({end}) above maximum ({high}): {expr}")
        if start > end:
            raise ParseError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
        if step == 0:
            raise ParseError(f"step of range should be a positive number: {expr}")
        bits |= sum(1 << i for i in range(start, end + 1, step)) | extra
    return bits


def _int_or_name(expr: str, names: dict[str, int]) -> int:
    named = names.get(expr.lower())
    return _atoi(expr) if named is None else named


def _atoi(expr: str) -> int:
    """robfig's mustParseInt over Go's strconv.Atoi (64-bit), with their error texts."""
    if not _GO_INT.fullmatch(expr):
        raise ParseError(
            f"failed to parse int from {expr}: strconv.Atoi: parsing {quote(expr)}: invalid syntax"
        )
    # int() refuses more than 4,300 digits; anything past 19 is out of int64's range anyway
    num = int(expr) if len(expr.lstrip("+-").lstrip("0")) <= 19 else 2**63
    if not -(2**63) <= num < 2**63:
        raise ParseError(
            f"failed to parse int from {expr}: strconv.Atoi: parsing {quote(expr)}: value out of range"
        )
    if num < 0:
        raise ParseError(f"negative number ({num}) not allowed: {expr}")
    return num


def parse_duration(text: str) -> int:
    """Go's ``time.ParseDuration``, fractions computed in float64 as Go does.

    Args:
        text: for example ``1h30m``, ``1.5s``, ``-2m``.

    Returns:
        Nanoseconds, within Go's int64 ``Duration``.

    Raises:
        ParseError: Go refuses it; the message is Go's (``time: invalid duration "x"``).
    """
    invalid = ParseError(f"time: invalid duration {_time_quote(text)}")
    rest, negative = text, text[:1] == "-"
    if rest[:1] in ("-", "+"):
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        if not (rest[0] == "." or "0" <= rest[0] <= "9"):
            raise invalid
        part = _GO_PART.match(rest)
        assert part is not None  # every group may be empty
        whole, fraction, unit_text = part.group(1), part.group(2) or "", part.group(3)
        if not whole and not fraction:  # no digits: ".s", "-.s"
            raise invalid
        significant = whole.lstrip("0")  # int() refuses over 4,300 digits; 20 are past 2^63
        number = int(significant or "0") if len(significant) <= 19 else 2**64
        if number > 2**63:  # leadingInt overflows
            raise invalid
        if not unit_text:
            raise ParseError(f"time: missing unit in duration {_time_quote(text)}")
        if unit_text not in _GO_UNITS:
            raise ParseError(
                f"time: unknown unit {_time_quote(unit_text)} in duration {_time_quote(text)}"
            )
        rest = rest[part.end() :]
        unit = _GO_UNITS[unit_text]
        if number > 2**63 // unit:
            raise invalid
        value = number * unit
        digits, scale = _leading_fraction(fraction)
        if digits:
            value += int(float(digits) * (float(unit) / scale))
            if value > 2**63:
                raise invalid
        total += value
        if total > 2**63:
            raise invalid
    if not negative and total > 2**63 - 1:
        raise invalid
    return -total if negative else total


def _leading_fraction(digits: str) -> tuple[int, float]:
    """Go's leadingFraction: the digits as an integer and its scale; digits that would overflow
    uint64 past 2^63 are dropped, not an error."""
    value, scale = 0, 1.0
    for digit in digits:
        if value > (2**63 - 1) // 10 or value * 10 + int(digit) > 2**63:
            break
        value, scale = value * 10 + int(digit), scale * 10
    return value, scale


def load_location(name: str) -> tzinfo:
    """Go's ``time.LoadLocation`` over this process's zone database (the ``tzdata`` package, or
    the system's), with ``Local`` read as UTC.

    Args:
        name: an IANA zone name, ``""``, ``UTC`` or ``Local``.

    Returns:
        The zone.

    Raises:
        LookupError: the zone cannot be loaded; the message is Go's (``unknown time zone X``), but
            for a name that exists and is no zone (``America``), where Go names the read error.
    """
    if name in ("", "UTC", "Local"):
        return UTC
    if ".." in name or name[0] in "/\\":
        raise LookupError("time: invalid location name")
    try:
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise LookupError(f"unknown time zone {name}") from None


@functools.cache
def _zone(name: str) -> ZoneInfo:
    # ZoneInfo keeps only the 8 most recently used zones strongly; a worker with CronJobs in many
    # zones would read zone files from disk inside workflow tasks again and again. Only zones that
    # load are cached, so the cache holds at most the database's few hundred names.
    return ZoneInfo(name)


def quote(text: str) -> str:
    """Go's ``strconv.Quote`` (``%q``): how Go's messages show a string."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _QUOTE_ESCAPES:
            out.append(_QUOTE_ESCAPES[char])
        elif (
            char.isprintable()
        ):  # Go's IsPrint: letters, marks, numbers, punctuation, symbols, space
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _time_quote(text: str) -> str:
    """The ``time`` package's own quote: non-ASCII and control characters as ``\\x`` UTF-8 bytes."""
    out = ['"']
    for char in text:
        if char >= "\x80" or char < " ":
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + char if char in '"\\' else char)
    out.append('"')
    return "".join(out)


# --- robfig/cron v3 SpecSchedule.Next (spec.go), with Go's time arithmetic -------------------
#
# DST behaviour follows from porting the loop with Go semantics (t.Add is absolute time,
# AddDate/time.Date are wall-clock).
# - Spring-forward gap, e.g. 30 2 * * * America/New_York on 2026-03-08: the hour loop steps
#   01:00 EST -> 03:00 EDT, hour 2 never occurs, so that day is skipped (next: 03-09 02:30 EDT).
#   robfig/cron PR #541 (open, "Don't skip crons when time jumps forward due to DST") confirms
#   v3 skips; croniter instead fires at 03:00 EDT.
# - Fall-back repeat, e.g. 30 1 * * * on 2026-11-01: the minute loop steps through both
#   01:xx hours in absolute time, so the job runs twice (01:30 EDT and 01:30 EST).
# - A day whose midnight does not exist (America/Santiago 2026-09-06): spec.go's day loop
#   moves 23:00 forward / 01:00 back to the day's start, as upstream.


def _never(s: Schedule) -> bool:
    """No instant can match: a field with no value at all (``,`` parses to nothing)."""
    values = ~_STAR
    if not (s.minute & values and s.hour & values and s.month & values):
        return True
    dom, dow = s.dom & values, s.dow & values
    if (s.dom | s.dow) & _STAR:  # the day fields are ANDed (_day_matches)
        return not (dom and dow)
    return not (dom or dow)


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
