"""Go's ``time.Parse`` for the two layouts apimachinery decodes times with, and its errors.

Layer: kubesim (imports nothing from batchd). Called by :mod:`kubesim.schema` when it decodes a
``metav1.Time`` (layout ``time.RFC3339``) or ``metav1.MicroTime`` (``RFC3339Micro``) field, so a
time the API server's decoder refuses is refused here with the decoder's words (the server wraps
them in its ``400 BadRequest``), and a MicroTime is stored as the server marshals it.

Go's general parser is followed chunk by chunk, leniencies included: the hour may have one digit,
a fraction may follow ``,`` as well as ``.``, and a zone offset may reach ``24:60``. Where RFC3339
takes any fraction after the seconds, RFC3339Micro's ``.000000`` takes exactly six digits, so
``…T10:00:00Z`` is no MicroTime.
"""

from __future__ import annotations

from calendar import monthrange
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["RFC3339", "RFC3339_MICRO", "GoTime", "GoTimeError", "micro_text", "parse"]

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"


class GoTimeError(ValueError):
    """A value ``time.Parse`` refuses; the message is Go's ``ParseError.Error()``."""


@dataclass(frozen=True)
class GoTime:
    """What a parse found: the wall clock as written and the zone offset in seconds east."""

    year: int
    month: int
    day: int
    hour: int
    minute: int
    second: int
    nanosecond: int
    offset: int


def _quote(s: str) -> str:
    """Go's ``time.quote``: printable ASCII as is (``"`` and ``\\`` escaped), other bytes ``\\xNN``."""
    out = ['"']
    for ch in s:
        if " " <= ch < "\x80":
            out.append("\\" + ch if ch in '"\\' else ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
    out.append('"')
    return "".join(out)


def _digit(s: str, i: int) -> bool:
    return i < len(s) and "0" <= s[i] <= "9"


def parse(value: str, layout: str) -> GoTime:
    """``time.Parse(layout, value)`` for :data:`RFC3339` or :data:`RFC3339_MICRO`.

    Raises:
        GoTimeError: in Go's words, e.g. ``parsing time "x" as "2006-01-02T15:04:05Z07:00":
            cannot parse "x" as "2006"``.
    """
    micro = layout == RFC3339_MICRO

    def cannot(elem: str, rest: str) -> GoTimeError:
        return GoTimeError(f"parsing time {_quote(value)} as {_quote(layout)}: cannot parse "
                           f"{_quote(rest)} as {_quote(elem)}")

    def out_of_range(what: str) -> GoTimeError:
        return GoTimeError(f"parsing time {_quote(value)}: {what} out of range")

    def literal(rest: str, text: str) -> str:
        if not rest.startswith(text):
            raise cannot(text, rest)
        return rest[len(text):]

    def number(rest: str, elem: str, fixed: bool) -> tuple[int, str]:
        # getnum: one or two digits, exactly two when the layout element is zero-padded.
        if not _digit(rest, 0) or (fixed and not _digit(rest, 1)):
            raise cannot(elem, rest)
        if not _digit(rest, 1):
            return int(rest[0]), rest[1:]
        return int(rest[:2]), rest[2:]

    rest = value
    if len(rest) < 4 or not all(_digit(rest, i) for i in range(4)):
        raise cannot("2006", rest)
    year, rest = int(rest[:4]), rest[4:]
    rest = literal(rest, "-")
    month, rest = number(rest, "01", True)
    if not 1 <= month <= 12:
        raise out_of_range("month")
    rest = literal(rest, "-")
    day, rest = number(rest, "02", True)
    rest = literal(rest, "T")
    hour, rest = number(rest, "15", False)
    if hour >= 24:
        raise out_of_range("hour")
    rest = literal(rest, ":")
    minute, rest = number(rest, "04", True)
    if minute >= 60:
        raise out_of_range("minute")
    rest = literal(rest, ":")
    second, rest = number(rest, "05", True)
    if second >= 60:
        raise out_of_range("second")
    nanos = 0
    if micro:
        if len(rest) < 7 or rest[0] not in ".," or not all(_digit(rest, i) for i in range(1, 7)):
            raise cannot(".000000", rest)
        nanos, rest = int(rest[1:7]) * 1000, rest[7:]
    elif len(rest) >= 2 and rest[0] in ".," and _digit(rest, 1):
        n = 2
        while _digit(rest, n):
            n += 1
        nanos, rest = int(rest[1:min(n, 10)].ljust(9, "0")), rest[n:]
    offset = 0
    if rest.startswith("Z"):
        rest = rest[1:]
    else:
        if len(rest) < 6 or rest[3] != ":" or not all(_digit(rest, i) for i in (1, 2, 4, 5)):
            raise cannot("Z07:00", rest)
        hours, minutes = int(rest[1:3]), int(rest[4:6])
        if minutes > 60:  # Go checks the hour first, so the minute's message wins
            raise out_of_range("time zone offset minute")
        if hours > 24:
            raise out_of_range("time zone offset hour")
        if rest[0] not in "+-":
            raise cannot("Z07:00", rest)
        offset = (hours * 60 + minutes) * 60 * (-1 if rest[0] == "-" else 1)
        rest = rest[6:]
    if rest:
        raise GoTimeError(f"parsing time {_quote(value)}: extra text: {_quote(rest)}")
    if not 1 <= day <= monthrange(year, month)[1]:
        raise out_of_range("day")
    return GoTime(year, month, day, hour, minute, second, nanos, offset)


def micro_text(t: GoTime) -> str | None:
    """``MicroTime.MarshalJSON``: UTC, six fraction digits (None where Python's calendar, which
    starts at year 1, cannot shift the time to UTC)."""
    try:
        local = datetime(t.year, t.month, t.day, t.hour, t.minute, t.second, t.nanosecond // 1000, tzinfo=UTC)
        u = local - timedelta(seconds=t.offset)
    except (ValueError, OverflowError):
        return None
    return f"{u.year:04d}-{u:%m-%dT%H:%M:%S}.{u.microsecond:06d}Z"
