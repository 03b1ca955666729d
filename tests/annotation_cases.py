"""FAIL-CLOSED: one table of batchd.io/* annotation values, valid and invalid, that the worker's
readers (tests/unit/test_annotations.py) and the ``batchd-annotations`` admission policy on
kube-apiserver (tests/e2e/test_admission_policy.py) must both accept or both refuse.

Each case is an object (a Job or a CronJob, its name and annotations, and a CronJob's Job template
annotations) and whether it is valid. :func:`refusals` is what the worker says of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workflows.models.common import ObjectMeta
from workflows.models.cronjob import CronJob, CronJobObservation
from workflows.models.job import JobOptions


@dataclass(frozen=True)
class Case:
    kind: Literal["Job", "CronJob"]
    annotations: dict[str, str]
    valid: bool
    template: dict[str, str] = field(default_factory=dict)  # a CronJob's jobTemplate annotations
    name: str = "x"

    def id(self) -> str:
        shown = ",".join(f"{k.removeprefix('batchd.io/')}={v!r}" for k, v in {**self.annotations, **self.template}.items())
        return f"{self.kind}:{shown[:80]}:{'ok' if self.valid else 'refused'}"


def refusals(case: Case) -> list[str]:
    """What the worker's readers say is wrong with ``case`` (nothing: valid). A Job that names itself in
    ``batchd.io/after`` reads well, and then fails as a cycle of one; the policy refuses it."""
    if case.kind == "Job":
        opts = JobOptions.of(case.annotations)
        own = [f"{case.name} waits for itself"] if case.name in opts.after else []
        return [p for p in (opts.problem, opts.held) if p] + own
    obs = CronJobObservation.of(CronJob(metadata=ObjectMeta(name=case.name, annotations=case.annotations)))
    opts = JobOptions.of(case.template)
    return [p for p in (obs.problem, obs.held, opts.problem, opts.held) if p]


def _cj(valid: bool, **annotations: str) -> Case:
    return Case("CronJob", {f"batchd.io/{k.replace('_', '-')}": v for k, v in annotations.items()}, valid)


def _job(valid: bool, **annotations: str) -> Case:
    return Case("Job", {f"batchd.io/{k.replace('_', '-')}": v for k, v in annotations.items()}, valid)


_EXPRESSIONS_OK = ["0 9 * * 1-5", "@daily", "@hourly", "*/15 * * * *\n0 0 1 * *", "0 9 * * 1-5; 30 17 * * *",
                   "0 0 * JAN-MAR MON", "0 0 * * mon-fri", "? ? ? ? ?", "0 0 1,15 * *", "0 0 1,,15 * *",
                   "0/30 * * * *", "1-10/3 * * * *", "*/100 * * * *", "0 0 * * */2", "0 0 30 2 *",
                   "0\t0 * * *", " 0 0 * * * ", "007 0 * * *", "0 0 * * sun",
                   "*/9223372036854775807 * * * *", ";".join(["0 0 * * *"] * 50)]
_EXPRESSIONS_BAD = ["TZ=UTC 0 0 * * *", "CRON_TZ=UTC 0 0 * * *", "@every 1h", "@every", "@sometimes", "@Daily",
                    "60 * * * *", "5-1 * * * *", "*/0 * * * *", "* * * * 7", "0 0 * * monday", "* * * *",
                    "* * * * * *", "*-5 * * * *", "+5 * * * *", "0 0 0 * *", "0 0 * 13 *", "0 0 * 0 *",
                    "*/9223372036854775808 * * * *", "0 0 * * *\u00a0", "0 0 * * *\r", "0 0 * jan *x",
                    "1--2 * * * *", "1/2/3 * * * *", "0 0 1 jan-0 *", "a * * * *", "100 * * * *",
                    ";".join(["0 0 * * *"] * 51)]
_TIMES_OK = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123456789+05:30", "2024-02-29T00:00:00Z",
             "2000-02-29T12:00:00-23:59", "1970-01-01T00:00:00Z", "2999-12-31T23:59:59Z", "2026-04-30T00:00:00Z"]
_TIMES_BAD = ["2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-01-01 00:00:00Z",
              "2026-01-01T00:00:00", "2026-01-01t00:00:00z", "1969-12-31T23:59:59Z", "3000-01-01T00:00:00Z",
              "2026-01-01T24:00:00Z", "2026-01-01T00:00:60Z", "2026-01-01T00:00:00+24:00", "2026-1-1T00:00:00Z",
              "2026-01-01T00:00:00.1234567890Z", "2026-01-01", "", "now"]
_COUNTS_OK = ["1", "01", "2147483647", "0000000001"]
_COUNTS_BAD = ["0", "-1", "2147483648", "00000000001", "1.0", "", " 1", "1 ", "\uff11", "+1", "9999999999"]

CASES: list[Case] = [
    *(_cj(v in _COUNTS_OK, max_runs=v) for v in _COUNTS_OK + _COUNTS_BAD),
    *(_cj(v in _COUNTS_OK, suspend_after_failures=v) for v in _COUNTS_OK + _COUNTS_BAD),
    *(_cj(ok, jitter_percent=v) for v, ok in [("0", True), ("50", True), ("51", False), ("x", False), ("", False)]),
    *(_cj(ok, concurrency_group=v) for v, ok in [("etl", True), ("a" * 63, True), ("a" * 64, False),
                                                   ("ETL", False), ("-a", False), ("a-", False), ("a.b", False),
                                                   ("", False), ("0", True)]),
    *(_cj(ok, concurrency_group="g", concurrency_limit=v) for v, ok in [("1", True), ("10000", True), ("0", False),
                                                                        ("10001", False), ("two", False)]),
    _cj(False, concurrency_limit="2"),
    *(_cj(ok, catch_up=v) for v, ok in [("latest", True), ("all", True), ("All", False), ("", False)]),
    *(_cj(v in _TIMES_OK, active_from=v) for v in _TIMES_OK + _TIMES_BAD),
    *(_cj(v in _TIMES_OK, active_until=v) for v in _TIMES_OK[:2] + _TIMES_BAD[:4]),
    _cj(True, active_from="2026-01-01T00:00:00Z", active_until="2026-01-01T00:00:00Z"),
    _cj(True, active_from="2026-01-01T01:00:00+01:00", active_until="2026-01-01T00:00:00Z"),
    _cj(False, active_from="2026-01-02T00:00:00Z", active_until="2026-01-01T00:00:00Z"),
    _cj(False, active_from="bad", active_until="2026-01-01T00:00:00Z"),
    *(_cj(ok, backfill=v) for v, ok in [
        ("2026-01-01T00:00:00Z/2026-01-07T00:00:00Z", True), ("2026-01-01T00:00:00Z/2026-01-01T00:00:00Z", True),
        ("2026-01-01T00:00:00Z/2026-01-07T00:00:00+05:30 one-at-a-time", True),
        ("2026-01-01T01:00:00+01:00/2026-01-01T00:00:00Z", True), ("2999-12-31T23:59:59Z/2999-12-31T23:59:59Z", True),
        ("2026-01-07T00:00:00Z/2026-01-01T00:00:00Z", False), ("2026-01-01T00:00:00Z", False),
        ("2026-01-01T00:00:00Z/", False), ("/2026-01-01T00:00:00Z", False), ("", False),
        ("2026-01-01T00:00:00Z/2026-01-07T00:00:00Z one at a time", False),
        ("2026-01-01T00:00:00Z/2026-01-07T00:00:00Z  one-at-a-time", False),
        ("2026-01-01T00:00:00Z/2026-01-07T00:00:00Z ", False), ("2026-01-01T00:00:00Z / 2026-01-07T00:00:00Z", False),
        ("2026-01-01T00:00:00Z/2026-01-07T00:00:00Z/2026-01-08T00:00:00Z", False),
        ("2026-02-29T00:00:00Z/2026-03-01T00:00:00Z", False), ("2026-01-01T00:00:00/2026-01-07T00:00:00Z", False),
        ("2026-01-01T00:00:00Z/3000-01-01T00:00:00Z", False)]),
    *(_cj(v in _EXPRESSIONS_OK, schedules=v) for v in _EXPRESSIONS_OK + _EXPRESSIONS_BAD),
    *(_cj(v in _EXPRESSIONS_OK, skip=v) for v in _EXPRESSIONS_OK[:6] + _EXPRESSIONS_BAD[:12]),
    _cj(True, skip=""), _cj(True, skip=" ;\n"),
    _cj(True, **{"suspend-reason": "anything", "next-schedule-time": "whatever"}),  # batchd's own, not read
    *(_job(ok, after=v) for v, ok in [("a", True), ("a,b", True), ("a, b", True), (" a ,\n b ", True), ("", True),
                                      (",", True), ("a,,b", True), ("A", False), ("a_b", False), ("a b", False),
                                      (",".join(f"j{i}" for i in range(100)), True),
                                      (",".join(f"j{i}" for i in range(101)), False), ("a" * 253, True),
                                      ("a" * 254, False), ("a\u00a0", False)]),
    Case("Job", {"batchd.io/after": "x"}, False, name="x"),
    Case("Job", {"batchd.io/after": "a, x"}, False, name="x"),
    Case("Job", {"batchd.io/after": "xy"}, True, name="x"),
    *(_job(ok, backoff_base_seconds=v) for v, ok in [("0", True), ("10", True), ("-1", False), ("ten", False)]),
    _job(True, backoff_base_seconds="10", backoff_max_seconds="10"),
    _job(False, backoff_base_seconds="10", backoff_max_seconds="9"),
    _job(False, backoff_max_seconds="2147483648"),
    *(_job(ok, delete_succeeded_pods=v) for v, ok in [("true", True), ("false", True), ("yes", False), ("", False)]),
    *(_job(ok, ttl_seconds_after_success=v) for v, ok in [("0", True), ("9223372036854775807", True),
                                                          ("09223372036854775807", False), ("9223372036854775808", False),
                                                          ("00000000000000000001", False), ("-1", False), ("1h", False)]),
    *(_job(ok, ttl_seconds_after_failure=v) for v, ok in [("3600", True), ("x", False)]),
    *(_job(True, ttl_hold=v) for v in ["", "investigating"]),
    Case("CronJob", {}, False, template={"batchd.io/after": "A"}),
    Case("CronJob", {}, True, template={"batchd.io/after": "migrate", "batchd.io/ttl-seconds-after-failure": "60"}),
    Case("CronJob", {}, False, template={"batchd.io/ttl-seconds-after-success": "-5"}),
]
