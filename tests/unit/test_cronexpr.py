"""cronexpr: robfig/cron v3's parser and its error texts, Go's duration and zone parsing, and the
promise that makes it one parser: kubesim refuses exactly the schedules batchd cannot parse, with
the same words (docs/cronjob.md CJ-3 to CJ-7, docs/kubesim.md API-51).

Expected messages are robfig/cron v3.0.1's ``fmt.Errorf`` texts (parser.go) around Go's own
(``strconv.Atoi``, ``time.ParseDuration``, ``time.LoadLocation``). Next-activation tables live in
test_cron.py, which drives this parser through workflows/cron.py.
"""

from __future__ import annotations

import ast
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import cronexpr
from kubesim import strategy
from kubesim.errors import ApiError
from workflows.cron import ScheduleError, parse_schedule

ROOT = Path(__file__).resolve().parents[2]
START = datetime(2026, 1, 1, tzinfo=UTC)

REFUSED = [
    # (id, schedule, robfig's message)
    ("empty", "", "empty spec string"),
    ("four fields", "* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("six fields: no seconds field, and none is shown", "0 0 0 * * *",
     "expected exactly 5 fields, found 6: [0 0 0 * * *]"),
    ("nothing after a TZ= prefix and its space", "TZ=UTC ", "expected exactly 5 fields, found 0: []"),
    ("7 is not Sunday", "0 0 * * 7", "end of range (7) above maximum (6): 7"),
    ("day of month 0", "0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("a reversed range", "5-3 * * * *", "beginning of range (5) beyond end of range (3): 5-3"),
    ("step 0", "*/0 * * * *", "step of range should be a positive number: */0"),
    ("a negative step", "*/-12 * * * *", "negative number (-12) not allowed: -12"),
    ("too many hyphens", "1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("too many slashes", "*/2/3 * * * *", "too many slashes: */2/3"),
    ("an unknown name", "0 0 * * funday",
     'failed to parse int from funday: strconv.Atoi: parsing "funday": invalid syntax'),
    ("a month name in the day-of-week field", "0 0 * * jan",
     'failed to parse int from jan: strconv.Atoi: parsing "jan": invalid syntax'),
    ("L is not supported", "0 0 L * *",
     'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax'),
    ("an empty step", "*/ * * * *",
     'failed to parse int from : strconv.Atoi: parsing "": invalid syntax'),
    ("a number beyond int64", "99999999999999999999 * * * *",
     "failed to parse int from 99999999999999999999: strconv.Atoi: parsing "
     '"99999999999999999999": value out of range'),
    ("thousands of digits are out of range, not a crash", "1" * 5000 + " * * * *",
     f'failed to parse int from {"1" * 5000}: strconv.Atoi: parsing "{"1" * 5000}": value out of range'),
    # Go's strings.Fields does not split on U+001C, and strconv.Quote escapes it.
    ("a control character stays inside its field", "0 0 1\x1c2 * *",
     'failed to parse int from 1\x1c2: strconv.Atoi: parsing "1\\x1c2": invalid syntax'),
    ("an unknown descriptor", "@reboot", "unrecognized descriptor: @reboot"),
    ("descriptors are case-sensitive", "@Daily", "unrecognized descriptor: @Daily"),
    ("a descriptor with a trailing space", "@daily ", "unrecognized descriptor: @daily "),
    ("@every without a space", "@every", "unrecognized descriptor: @every"),
    ("@every with an empty duration", "@every ", 'failed to parse duration @every : time: invalid duration ""'),
    ("@every with an unknown unit", "@every 1x",
     'failed to parse duration @every 1x: time: unknown unit "x" in duration "1x"'),
    ("@every without a unit", "@every 10",
     'failed to parse duration @every 10: time: missing unit in duration "10"'),
    ("@every with a space inside the duration", "@every 1h 30m",
     'failed to parse duration @every 1h 30m: time: unknown unit "h " in duration "1h 30m"'),
    ("@every past Go's Duration range", "@every 2562048h",
     'failed to parse duration @every 2562048h: time: invalid duration "2562048h"'),
    ("@every: the time package quotes non-ASCII as bytes", "@every 1\u00e9",
     'failed to parse duration @every 1\u00e9: time: unknown unit "\\xc3\\xa9" in duration "1\\xc3\\xa9"'),
    ("TZ= with an unknown zone", "TZ=Nowhere/City 0 0 * * *",
     "provided bad location Nowhere/City: unknown time zone Nowhere/City"),
    ("TZ= with a path escape", "CRON_TZ=../etc 0 0 * * *",
     "provided bad location ../etc: time: invalid location name"),
    # robfig v3.0.1 panics here (slice bounds out of range); a refusal is the total answer.
    ("TZ= with nothing after it", "TZ=UTC", "invalid timezone specification: TZ=UTC"),
]  # fmt: skip

ACCEPTED = [
    "*/5 * * * *",
    "0,15,30,45 * * * *",
    "0-30/10 9-17 * * *",
    "5/15 * * * *",
    "0 0 1 JAN,feb,Mar *",
    "0 0 * * MON-fri",
    "? ? ? ? ?",
    "*-5 * * * *",  # robfig ignores what follows "*-"
    "0 0 ,1,, * *",  # empty list items are dropped
    "0  0 *\t* *",
    "0\u00a00 * * *",  # NBSP is white space to Go's strings.Fields
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "@every 1h30m",
    "@every 500ms",
    "@every -5m",
    "TZ=Asia/Tokyo 0 9 * * *",
    "CRON_TZ=UTC  @daily ",  # the remainder after the zone is trimmed
    "TZ=Local 0 0 * * *",
    ", * * * *",  # parses to a schedule that never fires
]


@pytest.mark.parametrize(
    ("schedule", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused_with_robfigs_words(schedule: str, message: str) -> None:
    with pytest.raises(cronexpr.ParseError) as caught:
        cronexpr.parse_standard(schedule)
    assert str(caught.value) == message


@pytest.mark.parametrize("schedule", ACCEPTED)
def test_accepted(schedule: str) -> None:
    assert isinstance(cronexpr.parse_standard(schedule), cronexpr.Schedule)


def cronjob(schedule: str) -> dict[str, Any]:
    template = {
        "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": "hello",
            "namespace": "default",
            "uid": "0b1c2d3e-0000-4000-8000-000000000001",
        },
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": template}}},
    }


def kubesim_schedule_causes(schedule: str) -> list[str]:
    """kubesim's spec.schedule causes on create, but for API-57's refusal of any TZ."""
    try:
        strategy.prepare_create("batch", "cronjobs", cronjob(schedule), now=START)
    except ApiError as err:
        return [
            c.message
            for c in err.causes
            if c.field == "spec.schedule" and "TZ or CRON_TZ" not in c.message
        ]
    return []


@pytest.mark.parametrize(
    "schedule",
    [c[1] for c in REFUSED if c[1]] + ACCEPTED,
    ids=[c[0] for c in REFUSED if c[1]] + ACCEPTED,
)
def test_kubesim_refuses_exactly_what_batchd_cannot_parse(schedule: str) -> None:
    # API-51 and CJ-11 over one table. The empty schedule is left out: the API server reports it
    # as a missing field (API-51), not as a parse error.
    try:
        parse_schedule(schedule, None)
    except ScheduleError as err:
        assert err.reason == "UnparseableSchedule"
        detail = err.message.split(f"{cronexpr.quote(schedule)} : ", 1)[1]
        [cause] = kubesim_schedule_causes(schedule)
        assert cause.startswith("Invalid value: ") and cause.endswith(f": {detail}")
    else:
        assert kubesim_schedule_causes(schedule) == []


def test_controller_message_quotes_the_schedule_as_go_does() -> None:
    # CJ-11: upstream's "unparseable schedule: %q : %s"; %q keeps printable non-ASCII as it is.
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("0 0 * * sön", None)
    assert caught.value.message == (
        'unparseable schedule: "0 0 * * sön" : failed to parse int from sön: '
        'strconv.Atoi: parsing "sön": invalid syntax'
    )


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("1h30m", 5400 * 10**9),
        ("1.5s", 1_500_000_000),
        ("-2m", -120 * 10**9),
        ("+0", 0),
        ("1.s", 10**9),
        (".5s", 5 * 10**8),
        ("1\u00b5s", 1000),
        ("1\u03bcs", 1000),
        ("0.1ns", 0),
        ("9223372036854775807ns", 2**63 - 1),
        ("-9223372036854775808ns", -(2**63)),
        # Go computes a fraction in float64: 0.999… with 19 nines rounds up to a whole second.
        ("1.9999999999999999999s", 2 * 10**9),
    ],
)
def test_go_durations(text: str, nanos: int) -> None:
    assert cronexpr.parse_duration(text) == nanos


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("-", 'time: invalid duration "-"'),
        (".s", 'time: invalid duration ".s"'),
        ("s", 'time: invalid duration "s"'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("1" * 5000 + "s", f'time: invalid duration "{"1" * 5000}s"'),
        ('1"', 'time: unknown unit "\\"" in duration "1\\""'),
    ],
)
def test_go_duration_errors(text: str, message: str) -> None:
    with pytest.raises(cronexpr.ParseError) as caught:
        cronexpr.parse_duration(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("schedule", "seconds"),
    [
        ("@every 0", 1),
        ("@every -5m", 1),
        ("@every 500ms", 1),
        ("@every 1.5s", 1),
        ("@every 1.9999999999999999999s", 2),
    ],
)
def test_every_is_whole_seconds_and_at_least_one(schedule: str, seconds: int) -> None:
    # CJ-5: robfig's Every raises a delay under 1 s to 1 s and truncates the rest.
    assert cronexpr.parse_standard(schedule).every_seconds == seconds


def test_zones_load_as_go_loads_them() -> None:
    assert cronexpr.load_location("") is UTC
    assert cronexpr.load_location("UTC") is UTC
    assert cronexpr.load_location("Local") is UTC  # batchd and kubesim read Local as UTC (CJ-9)
    assert cronexpr.load_location("Europe/Berlin").utcoffset(START) == timedelta(hours=1)
    for name, message in [
        ("Mars/Olympus_Mons", "unknown time zone Mars/Olympus_Mons"),
        ("local", "unknown time zone local"),
        ("/etc/localtime", "time: invalid location name"),
        ("Europe/../UTC", "time: invalid location name"),
    ]:
        with pytest.raises(LookupError) as caught:
            cronexpr.load_location(name)
        assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "quoted"),
    [("plain", '"plain"'), ('a"b\\c', '"a\\"b\\\\c"'), ("tab\there", '"tab\\there"'), ("sön", '"sön"'),
     ("\x00\x7f", '"\\x00\\x7f"'), ("\u00a0", '"\\u00a0"'), ("\U000e0001", '"\\U000e0001"')],
)  # fmt: skip
def test_quote_is_gos_strconv_quote(text: str, quoted: str) -> None:
    assert cronexpr.quote(text) == quoted


@pytest.mark.parametrize("schedule", ["0 , * * *", "0 0 * * ,", "0 0 , * ,", "0 0 * , *"])
def test_a_schedule_with_an_empty_field_never_fires(schedule: str) -> None:
    # robfig searches five years for these and finds nothing; so does the port, the slow way.
    parsed = cronexpr.parse_standard(schedule)
    assert parsed.next(START) is None
    assert cronexpr._next_spec(parsed, START) is None


def test_an_empty_minute_field_is_not_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    # Five years minute by minute took 4 s of a workflow task, once per call to next().
    def search(*_: object) -> None:
        raise AssertionError("searched")

    monkeypatch.setattr(cronexpr, "_next_spec", search)
    assert cronexpr.parse_standard(", * * * *").next(START) is None
    with pytest.raises(AssertionError, match="searched"):
        cronexpr.parse_standard("*/5 * * * *").next(START)


def test_next_refuses_a_naive_instant() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        cronexpr.parse_standard("@hourly").next(datetime(2026, 1, 1))


def test_imports_only_the_standard_library() -> None:
    # Workflow code imports cronexpr passed through the sandbox, and kubesim imports it: it may
    # depend on nothing but Python itself (import-linter checks batchd's packages only).
    imported: set[str] = set()
    for path in (ROOT / "cronexpr").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= sys.stdlib_module_names
