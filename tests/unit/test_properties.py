"""Tier 1: every decision is total over what the API server accepts (TIME-1 in docs/design.md).

Property tests (Hypothesis) over the pure TTL decisions, the schedule math and the bridge's
routing: integer fields drawn across their full API range (int32 and int64 bounds included),
instants across ``datetime``'s whole range, every schedule grammar form and every IANA zone.
Each property says the function returns (never raises on valid input) and that its answer is
consistent: a TTL never expires before finish + TTL, a schedule time is never in the future of
``now`` nor before the starting deadline, a wake-up is never in the past. The Job controller's
decisions have their own properties in test_job_properties.py.
"""

from __future__ import annotations

import asyncio
import zoneinfo
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workflows import cron
from workflows.models.common import INT64_MAX, Job, ObjectRef, Pod
from workflows.models.cronjob import CronJob, CronJobObservation, JobSummary
from workflows.models.ttl import POD_TTL_LABEL, TTLObservation, time_left
from workflows.times import NEVER, iso, plus_seconds

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NON_NEGATIVE_INT64 = st.integers(0, INT64_MAX)
INSTANTS = st.datetimes(timezones=st.just(UTC))  # datetime.min .. datetime.max, microseconds included
ZONES = st.one_of(st.none(), st.sampled_from(sorted(zoneinfo.available_timezones())))
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rfc3339(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t.year >= 1000 else t.isoformat().replace("+00:00", "Z")


# -- times ------------------------------------------------------------------------------


@PROPERTY
@given(t=INSTANTS, seconds=st.one_of(INT64, st.integers(-(10**70), 10**70)))
def test_plus_seconds_is_the_sum_or_never(t: datetime, seconds: int) -> None:
    got = plus_seconds(t, seconds)
    low, high = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
    micros = (t - low) // timedelta(microseconds=1) + seconds * 10**6  # integers never overflow
    in_range = 0 <= micros <= (high - low) // timedelta(microseconds=1)
    assert (got is not None) == in_range
    if got is not None:
        assert got - t == timedelta(seconds=seconds)
        text = iso(got)
        assert text is not None
        if got >= NEVER:
            assert text == "never"
        else:  # metav1.Time's form: four-digit year, whole seconds, Z; it parses back to the second
            assert len(text) == 20 and text.endswith("Z")
            assert datetime.fromisoformat(text) == got.replace(microsecond=0)


# -- TTL-after-finished ------------------------------------------------------------------


def ttl_observation(ttl: int | None, finish: datetime | None, *, kind: str = "Job") -> TTLObservation:
    return TTLObservation(ref=ObjectRef(kind=kind, namespace="ns", name="n", uid="u"),  # type: ignore[arg-type]
                          ttl_seconds=ttl, finished=True, finish_time=finish)


@PROPERTY
@given(ttl=NON_NEGATIVE_INT64, finish=INSTANTS, now=INSTANTS)
def test_time_left_returns_and_never_expires_before_finish_plus_ttl(ttl: int, finish: datetime, now: datetime) -> None:
    left = time_left(ttl_observation(ttl, finish), now)
    assert left is not None
    if left.expire_at is None:  # never: finish + TTL is past datetime.max
        assert left.remaining is None and not left.expired
        assert (datetime.max.replace(tzinfo=UTC) - finish).total_seconds() < ttl
    else:
        assert left.expire_at - finish == timedelta(seconds=ttl)
        assert left.expired == (now >= left.expire_at)
        assert left.finish_in_future == (finish > now)


@PROPERTY
@given(label=st.one_of(st.text(max_size=63), st.integers(0, 10**63 - 1).map(str), st.just("9" * 63)),
       restart=st.sampled_from(["Never", "OnFailure", "Always", None]))
def test_any_pod_ttl_label_is_a_ttl_or_a_problem(label: str, restart: str | None) -> None:
    pod = Pod.model_validate({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {POD_TTL_LABEL: label}},
        "spec": {"restartPolicy": restart} if restart else {},
        "status": {"phase": "Succeeded", "containerStatuses": [
            {"name": "c", "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-22T10:00:00Z"}}}]},
    })
    obs = TTLObservation.of_pod(pod)
    assert (obs.ttl_seconds is None) == (obs.problem is not None)  # a TTL, or a TTLNotApplied reason
    if obs.ttl_seconds is not None:
        assert 0 <= obs.ttl_seconds <= INT64_MAX and str(obs.ttl_seconds) == label.lstrip("0").rjust(1, "0")
        left = time_left(obs, datetime(2026, 11, 22, 10, tzinfo=UTC))
        assert left is not None
    TTLObservation.model_validate_json(obs.model_dump_json())  # and it crosses a signal intact


# -- schedules ---------------------------------------------------------------------------


def _field(low: int, high: int, names: list[str]) -> st.SearchStrategy[str]:
    value = st.one_of(st.integers(low, high).map(str), st.sampled_from(names) if names else st.nothing())
    bounds = st.tuples(st.integers(low, high), st.integers(low, high)).map(lambda ab: f"{min(ab)}-{max(ab)}")
    base = st.one_of(st.sampled_from(["*", "?"]), value, bounds)
    stepped = st.tuples(st.one_of(st.just("*"), bounds, st.integers(low, high).map(str)),
                        st.integers(1, high + 1)).map(lambda t: f"{t[0]}/{t[1]}")
    return st.lists(st.one_of(base, stepped), min_size=1, max_size=3).map(",".join)


MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
DAYS = "sun mon tue wed thu fri sat".split()
STANDARD = st.tuples(_field(0, 59, []), _field(0, 23, []), _field(1, 31, []), _field(1, 12, MONTHS),
                     _field(0, 6, DAYS)).map(" ".join)
DESCRIPTORS = st.sampled_from(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"])
EVERY = st.one_of(
    st.integers(1, 2562047 * 3600).map(lambda s: f"@every {s}s"),
    st.tuples(st.integers(0, 99), st.integers(0, 59)).map(lambda hm: f"@every {hm[0]}h{hm[1]}m1s"),
    st.sampled_from(["@every 500ms", "@every 1.5h", "@every 1s", "@every 45s", "@every 2562047h"]),
)
SCHEDULES = st.one_of(
    STANDARD, DESCRIPTORS, EVERY,
    st.tuples(st.sampled_from(["TZ=UTC ", "CRON_TZ=Europe/Berlin ", "TZ=Asia/Kolkata "]), STANDARD).map("".join),
    st.sampled_from(["0 0 31 2 *", "0 0 30 2 *", "0 0 29 2 *", "* * * * *"]),
)


def parsed(schedule: str, zone: str | None) -> cron.Schedule | None:
    try:
        return cron.parse_schedule(schedule, zone)[0]
    except cron.ScheduleError:
        return None


@PROPERTY
@given(schedule=st.one_of(SCHEDULES, st.text(max_size=40)), zone=st.one_of(ZONES, st.text(max_size=20)))
def test_any_schedule_text_parses_or_is_a_schedule_error(schedule: str, zone: str | None) -> None:
    try:
        cron.parse_schedule(schedule, zone)
    except cron.ScheduleError as err:
        assert err.reason in ("UnknownTimeZone", "UnparseableSchedule") and err.message


@PROPERTY
@given(schedule=SCHEDULES, zone=ZONES, earliest=INSTANTS, now=INSTANTS,
       sds=st.one_of(st.none(), NON_NEGATIVE_INT64, st.sampled_from([0, 1, 59, INT64_MAX, 2**31 - 1])))
def test_most_recent_schedule_time_is_due_within_the_deadline_and_the_wakeup_is_ahead(
        schedule: str, zone: str | None, earliest: datetime, now: datetime, sds: int | None) -> None:
    sched = parsed(schedule, zone)
    assume(sched is not None)
    assert sched is not None
    try:
        recent = cron.most_recent_schedule_time(sched, earliest=earliest, now=now, starting_deadline_seconds=sds)
    except cron.ScheduleError as err:
        assert err.reason == "InvalidSchedule"
    else:
        if recent.due is not None:
            assert earliest < recent.due <= now  # never in the future, never the time already taken
            deadline = plus_seconds(now, -sds) if sds is not None else None
            assert deadline is None or recent.due > deadline
            assert cron.job_name("cj", recent.due).startswith("cj-")
            wake = cron.next_in_another_minute(sched, cron.next_wakeup(sched, earliest=earliest, now=now), recent.due)
            assert wake is None or cron.job_name("cj", wake) != cron.job_name("cj", recent.due)
    wake = cron.next_wakeup(sched, earliest=earliest, now=now)
    assert wake is None or wake > now


@PROPERTY
@given(scheduled=INSTANTS, zone=ZONES)
def test_scheduled_annotation_and_job_name_exist_for_every_instant(scheduled: datetime, zone: str | None) -> None:
    text = cron.scheduled_timestamp_annotation(scheduled, zone)
    # RFC 3339; like Go's, the offset has no seconds, so a local-mean-time zone reads up to 59 s off
    assert abs(datetime.fromisoformat(text.replace("Z", "+00:00")) - scheduled.replace(microsecond=0)) < timedelta(minutes=1)
    if scheduled.year >= 1970:  # before the epoch Go's "/" truncates towards zero, and so do the names
        assert cron.job_name("cj", scheduled) == cron.job_name("cj", scheduled.replace(second=0, microsecond=0))


@PROPERTY
@given(scheduled=INSTANTS, percent=st.integers(0, 50),
       interval=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=366 * 300)))
def test_jitter_stays_inside_its_share_of_the_interval(scheduled: datetime, percent: int, interval: timedelta) -> None:
    delay = cron.jitter(scheduled, percent=percent, interval=interval, key="ns/cj")
    assert timedelta(0) <= delay <= interval * percent / 100


# -- what the bridge builds from any object ------------------------------------------------


def job_object(ttl: int, finished_at: datetime, sds_like: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "resourceVersion": "7", "generation": sds_like},
        "spec": {"ttlSecondsAfterFinished": ttl, "activeDeadlineSeconds": sds_like, "backoffLimit": 2**31 - 1},
        "status": {"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": rfc3339(finished_at)}],
                   "startTime": rfc3339(finished_at), "completionTime": rfc3339(finished_at)},
    }


@PROPERTY
@given(ttl=st.one_of(INT32, NON_NEGATIVE_INT64), finished=INSTANTS, big=INT64, now=INSTANTS)
def test_observations_of_any_job_and_cronjob_are_built(ttl: int, finished: datetime, big: int, now: datetime) -> None:
    finished = finished.replace(microsecond=0)
    job = Job.model_validate(job_object(ttl, finished, big))
    obs = TTLObservation.of_job(job)
    if obs.needs_cleanup():
        assert time_left(obs, now) is not None
    JobSummary.of(job, job_object(ttl, finished, big)["status"])
    cj = CronJob.model_validate({
        "metadata": {"name": "c", "namespace": "ns", "uid": "u2", "generation": big,
                     "annotations": {"batchd.io/jitter-percent": str(big)}},
        "spec": {"schedule": "@every 1s", "startingDeadlineSeconds": big, "successfulJobsHistoryLimit": ttl},
        "status": {"lastScheduleTime": rfc3339(finished)},
    })
    observation = CronJobObservation.of(cj)
    assert observation.problem is not None or 0 <= observation.jitter_percent <= 50
    CronJobObservation.model_validate_json(observation.model_dump_json())


class _Recorder:
    """Stands in for the Temporal client and the Kubernetes client: records what the bridge sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def start_workflow(self, *_: Any, id: str, **kw: Any) -> None:
        self.sent.append(("start", id))

    def get_workflow_handle(self, wid: str) -> Any:
        recorder = self

        class Handle:
            async def signal(self, name: str, *args: Any) -> None:
                if args and hasattr(args[0], "model_dump_json"):
                    type(args[0]).model_validate_json(args[0].model_dump_json())  # crosses the wire
                recorder.sent.append((name, wid))

        return Handle()

    def record_event(self, *_: Any, **__: Any) -> None:
        self.sent.append(("event", ""))


@settings(max_examples=100, deadline=None)
@given(ttl=st.one_of(st.integers(0, 2**31 - 1), NON_NEGATIVE_INT64), finished=INSTANTS,
       label=st.one_of(st.integers(0, 10**63 - 1).map(str), st.text(max_size=8)), big=INT64)
def test_the_bridge_routes_any_object_and_never_drops_a_deletion(ttl: int, finished: datetime, label: str,
                                                                 big: int) -> None:
    from worker.bridge import Bridge, BridgeSettings

    finished = finished.replace(microsecond=0)
    rec = _Recorder()
    bridge = Bridge(rec, rec, BridgeSettings(ttl_scope="all"))  # type: ignore[arg-type]
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u3", "resourceVersion": "1",
                                       "labels": {POD_TTL_LABEL: label}},
           "spec": {"restartPolicy": "Never"},
           "status": {"phase": "Failed", "containerStatuses": [
               {"name": "c", "state": {"terminated": {"exitCode": 1, "finishedAt": rfc3339(finished)}}}]}}

    async def scenario() -> None:
        for obj in (job_object(ttl, finished, big), pod):
            for etype in ("ADDED", "MODIFIED", "DELETED"):
                await bridge.handle(etype, obj)

    asyncio.run(scenario())
    for wid, finish, ttl_of in (("job-ttl/ns/j/u1", finished, ttl), ("pod-ttl/ns/p/u3", finished, _ttl(label))):
        if ttl_of is None:
            assert ("start", wid) not in rec.sent  # a TTLNotApplied Warning instead
            continue
        assert ("start", wid) in rec.sent
        expire = plus_seconds(finish, ttl_of)
        if expire is None or expire > datetime.now(UTC) + timedelta(seconds=5):
            assert ("observe", wid) in rec.sent  # deleted before its expiry: the sleeping workflow is told


def _ttl(label: str) -> int | None:
    return int(label) if label.isascii() and label.isdigit() and int(label) <= INT64_MAX else None
