"""Tier 2: the Kubernetes activities against kubesim, and the error taxonomy (STYLE rule 7)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.cronjob import (
    _BURST,
    FULL_COLLECTION_EVERY,
    QUIET,
    CronJobActivities,
    _full_collection_due,
    after_creations,
    collect_when_quiet,
    in_burst,
)
from activities.errors import to_application_error
from activities.ttl import TTLActivities
from kube import errors
from kube.client import Kube
from kube.config import load_access
from tests.conftest import utcnow
from tests.k8s import create_job, finish_job, second
from workflows.models.common import EventInput, ObjectRef, ObserveInput
from workflows.models.cronjob import (
    CRONJOB_COMPONENT,
    CreateJobInput,
    SetSuspendInput,
    SyncCronJobInput,
)
from workflows.models.ttl import DeleteExpiredInput

STATUS_TABLE = [
    # status, Status reason, class, retryable
    (404, "NotFound", errors.NotFound, False),
    (409, "AlreadyExists", errors.AlreadyExists, False),
    (409, "Conflict", errors.Conflict, True),
    (422, "Invalid", errors.Invalid, False),
    (403, "Forbidden", errors.Forbidden, False),
    (400, "BadRequest", errors.BadRequest, False),
    (429, "TooManyRequests", errors.TooManyRequests, True),
    (500, "InternalError", errors.ServerError, True),
    (503, "ServiceUnavailable", errors.ServerError, True),
]


@pytest.mark.parametrize("status,reason,cls,retryable", STATUS_TABLE, ids=[f"{s} {r}" for s, r, *_ in STATUS_TABLE])
def test_status_maps_to_one_error_class(status: int, reason: str, cls: type, retryable: bool) -> None:
    body = f'{{"kind":"Status","reason":"{reason}","message":"boom","code":{status}}}'
    err = errors.from_response(status, body, {"Retry-After": "3"})
    assert type(err) is cls and err.retryable is retryable
    app = to_application_error(err)
    assert app.type == cls.__name__ and app.non_retryable is (not retryable)
    assert app.next_retry_delay == (timedelta(seconds=3) if retryable else None)


def test_a_non_status_body_never_reaches_the_message() -> None:
    err = errors.from_response(500, "<html>secret token=abc</html>")
    assert "secret" not in err.message


def ref_of(job: dict) -> ObjectRef:
    m = job["metadata"]
    return ObjectRef(kind="Job", namespace=m["namespace"], name=m["name"], uid=m["uid"])


def test_injected_500_and_429_become_retryable_application_errors(kube: Kube, kubesim_server, namespace) -> None:
    job = create_job(kube, namespace, "faulty", ttl=0)
    finish_job(kube, namespace, "faulty", second(utcnow()))
    acts = TTLActivities(kube)
    seen: set[str] = set()
    try:
        for code in (500, 429) * 3:  # one code at a time: kubesim picks among several at random
            kubesim_server.faults.set(error_rate=1.0, codes=(code,), retry_after_seconds=2)
            with pytest.raises(ApplicationError) as info:
                ActivityEnvironment().run(acts.delete_expired, DeleteExpiredInput(ref=ref_of(job)))
            assert info.value.__cause__ is None  # no client exception leaks into the workflow
            assert info.value.non_retryable is False
            seen.add(info.value.type or "")
            if info.value.type == "TooManyRequests":
                assert info.value.next_retry_delay == timedelta(seconds=2)
    finally:
        kubesim_server.faults.clear()
    assert seen == {"ServerError", "TooManyRequests"}
    assert ActivityEnvironment().run(acts.delete_expired, DeleteExpiredInput(ref=ref_of(job))).deleted


def test_an_invalid_object_is_a_permanent_error(kube: Kube, namespace) -> None:
    with pytest.raises(errors.Invalid) as info:
        create_job(kube, namespace, "bad", ttl=-1)
    assert "ttlSecondsAfterFinished" in info.value.message and not info.value.retryable


def test_delete_expired_spares_a_recreated_namesake(kube: Kube, namespace) -> None:
    old = create_job(kube, namespace, "twin", ttl=0)
    kube.delete("Job", namespace, "twin", propagation="Background")
    create_job(kube, namespace, "twin", ttl=0)
    finish_job(kube, namespace, "twin", second(utcnow()))
    res = ActivityEnvironment().run(TTLActivities(kube).delete_expired, DeleteExpiredInput(ref=ref_of(old)))
    assert not res.deleted and res.observation.gone
    assert kube.get("Job", namespace, "twin") is not None


def test_delete_expired_does_not_delete_before_expiry(kube: Kube, namespace) -> None:
    job = create_job(kube, namespace, "young", ttl=3600)
    finish_job(kube, namespace, "young", second(utcnow()))
    res = ActivityEnvironment().run(TTLActivities(kube).delete_expired, DeleteExpiredInput(ref=ref_of(job)))
    assert not res.deleted and res.expire_at is not None and res.observation.needs_cleanup()
    assert kube.get("Job", namespace, "young") is not None


def test_delete_expired_keeps_a_held_job(kube: Kube, namespace) -> None:  # TTL-HOLD
    job = create_job(kube, namespace, "held", ttl=0)
    kube.patch("Job", namespace, "held", {"metadata": {"annotations": {"batchd.io/ttl-hold": "INC-7"}}})
    finish_job(kube, namespace, "held", second(utcnow()))
    res = ActivityEnvironment().run(TTLActivities(kube).delete_expired, DeleteExpiredInput(ref=ref_of(job)))
    assert not res.deleted and res.observation.hold == "INC-7" and res.observation.needs_cleanup()
    assert kube.get("Job", namespace, "held") is not None


class _HoldAfterRead(Kube):
    """A client that lets someone hold the object between the activity's read and its delete."""

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        obj = super().get(kind, namespace, name)
        if obj is not None and "batchd.io/ttl-hold" not in (obj["metadata"].get("annotations") or {}):
            super().patch(kind, namespace, name, {"metadata": {"annotations": {"batchd.io/ttl-hold": "late"}}})
        return obj


def test_a_hold_written_after_the_read_stops_the_delete(kube: Kube, kubeconfig, namespace) -> None:
    job = create_job(kube, namespace, "race", ttl=0)
    finish_job(kube, namespace, "race", second(utcnow()))
    acts = TTLActivities(_HoldAfterRead(load_access(kubeconfig)))
    res = ActivityEnvironment().run(acts.delete_expired, DeleteExpiredInput(ref=ref_of(job)))
    assert not res.deleted and res.observation.hold == "late"  # the fresh read after the 409
    assert kube.get("Job", namespace, "race") is not None
    again = ActivityEnvironment().run(acts.delete_expired, DeleteExpiredInput(ref=ref_of(job)))
    assert not again.deleted and again.observation.held


def test_read_of_a_missing_object_is_gone(kube: Kube, namespace) -> None:
    ref = ObjectRef(kind="Pod", namespace=namespace, name="nope", uid="u")
    assert ActivityEnvironment().run(TTLActivities(kube).read_ttl_object, ObserveInput(ref=ref)).gone


# -- the armed CronJob creation (activities/cronjob.py create_cronjob_job_at) ---------------------

def _cronjob(kube: Kube, ns: str, name: str) -> dict:
    from tests.integration.test_cronjob import cronjob_manifest
    return kube.create("CronJob", ns, cronjob_manifest(name, "* * * * *"))


def _armed(cj: dict, **kw: object) -> CreateJobInput:
    m = cj["metadata"]
    due = second(utcnow())
    return CreateJobInput(namespace=m["namespace"], cronjob_name=m["name"], cronjob_uid=m["uid"],
                          job_name=f"{m['name']}-{int(due.timestamp()) // 60}", scheduled=due,
                          generation=m["generation"], **kw)  # type: ignore[arg-type]


def test_the_status_write_records_the_events_after_it_and_returns_those_it_could_not(kube: Kube, namespace) -> None:
    cj = _cronjob(kube, namespace, "noted")
    m = cj["metadata"]
    ref = ObjectRef(kind="CronJob", namespace=namespace, name=m["name"], uid=m["uid"])
    seen = EventInput(ref=ref, type="Normal", reason="SawCompletedJob", message="Saw completed job: noted-1, condition: Complete",
                      component=CRONJOB_COMPONENT)
    lost = seen.model_copy(update={"ref": ref.model_copy(update={"namespace": f"{namespace}-none"})})  # 404
    res = ActivityEnvironment().run(CronJobActivities(kube).sync, SyncCronJobInput(
        namespace=namespace, name=m["name"], uid=m["uid"], active=[], last_successful_time=second(utcnow()),
        events=[seen, lost]))
    assert res.unrecorded == [lost] and not res.gone
    assert kube.get("CronJob", namespace, "noted")["status"]["lastSuccessfulTime"]
    [event] = [e for e in kube.list("Event", namespace)["items"] if e["reason"] == "SawCompletedJob"]
    assert event["involvedObject"]["uid"] == m["uid"] and event["count"] == 1


class _DeletedAfterRead(Kube):
    """A client whose every read of a CronJob is followed by that CronJob's deletion: the writes
    after it find it gone, as they can when an orphaning delete lands between the two."""

    def __init__(self, kube: Kube) -> None:
        self.__dict__.update(kube.__dict__)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = super().get(kind, namespace, name)
        if kind == "CronJob" and found is not None:
            super().delete(kind, namespace, name, grace_period_seconds=0)
            assert super().get(kind, namespace, name) is None
        return found


def test_a_cronjob_deleted_between_the_read_and_the_writes_is_gone_not_an_error(kube: Kube, namespace) -> None:
    for write in ("sync", "set_suspend"):
        m = _cronjob(kube, namespace, write.replace("_", "-"))["metadata"]
        acts = CronJobActivities(_DeletedAfterRead(kube))
        if write == "sync":
            res = ActivityEnvironment().run(acts.sync, SyncCronJobInput(
                namespace=namespace, name=m["name"], uid=m["uid"], active=[], last_successful_time=second(utcnow())))
        else:
            res = ActivityEnvironment().run(acts.set_suspend, SetSuspendInput(
                namespace=namespace, name=m["name"], uid=m["uid"], suspend=True, reason="r", at=second(utcnow())))
        assert res.gone, write


async def test_an_armed_creation_waits_until_its_time_then_creates(kube: Kube, namespace) -> None:
    cj = _cronjob(kube, namespace, "armed")
    at = utcnow() + timedelta(seconds=1.5)
    res = await ActivityEnvironment().run(CronJobActivities(kube).create_job_at,
                                          _armed(cj, not_before=at, wait_at_most=5.0))
    assert res.outcome == "created" and res.job is not None
    job = kube.get("Job", namespace, res.job.name)
    created = datetime.fromisoformat(job["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    assert created >= second(at)  # whole seconds on the API side


async def test_an_armed_creation_never_waits_longer_than_told(kube: Kube, namespace) -> None:
    # A workflow on a virtual clock (or a worker clock far behind) asks for a time hours ahead.
    cj = _cronjob(kube, namespace, "capped")
    started = utcnow()
    res = await ActivityEnvironment().run(CronJobActivities(kube).create_job_at,
                                          _armed(cj, not_before=started + timedelta(hours=3), wait_at_most=0.5))
    assert res.outcome == "created" and utcnow() - started < timedelta(seconds=30)


async def test_an_armed_creation_refuses_a_changed_spec(kube: Kube, namespace) -> None:
    cj = _cronjob(kube, namespace, "changed")
    inp = _armed(cj)
    kube.patch("CronJob", namespace, "changed", {"spec": {"suspend": True}})  # generation 1 -> 2
    res = await ActivityEnvironment().run(CronJobActivities(kube).create_job_at, inp)
    assert (res.outcome, res.generation) == ("stale", 2)
    assert kube.get("Job", namespace, inp.job_name) is None


async def test_an_armed_creation_past_its_starting_deadline_creates_nothing(kube: Kube, namespace) -> None:
    cj = _cronjob(kube, namespace, "late")  # CJ-13: the run would start after its deadline
    inp = _armed(cj, latest=utcnow() - timedelta(seconds=1))
    res = await ActivityEnvironment().run(CronJobActivities(kube).create_job_at, inp)
    assert res.outcome == "too_late" and kube.get("Job", namespace, inp.job_name) is None


async def test_an_armed_creation_for_a_recreated_cronjob_creates_nothing(kube: Kube, namespace) -> None:
    old = _cronjob(kube, namespace, "twin")
    kube.delete("CronJob", namespace, "twin", propagation="Background")
    _cronjob(kube, namespace, "twin")
    inp = _armed(old)
    res = await ActivityEnvironment().run(CronJobActivities(kube).create_job_at, inp)
    assert res.outcome == "cronjob_gone" and kube.get("Job", namespace, inp.job_name) is None


async def test_a_creation_builds_from_the_informers_copy_without_a_get(kube: Kube, namespace, monkeypatch) -> None:
    cj = _cronjob(kube, namespace, "cached")
    copy = {**cj, "spec": {**cj["spec"], "jobTemplate": {**cj["spec"]["jobTemplate"], "metadata": {"labels": {"from": "cache"}}}}}
    asked: list[tuple[str, str]] = []

    def cache(ns: str, uid: str) -> dict | None:
        asked.append((ns, uid))
        return copy

    monkeypatch.setattr(kube, "get_instance", lambda *a: pytest.fail(f"unexpected GET {a}"))
    res = await ActivityEnvironment().run(CronJobActivities(kube, cached=cache).create_job_at, _armed(cj))
    assert res.outcome == "created" and asked == [(namespace, cj["metadata"]["uid"])]
    assert kube.get("Job", namespace, res.job.name)["metadata"]["labels"] == {"from": "cache"}


@pytest.mark.parametrize("lag", ["newer generation", "deleting", "unknown"])
async def test_an_informer_copy_that_disagrees_with_the_plan_is_checked_with_a_get(kube: Kube, namespace, lag: str) -> None:
    cj = _cronjob(kube, namespace, "lagging")
    meta = cj["metadata"]
    copy = {"newer generation": {**cj, "metadata": {**meta, "generation": meta["generation"] + 1}},
            "deleting": {**cj, "metadata": {**meta, "deletionTimestamp": "2026-01-01T00:00:00Z"}},
            "unknown": None}[lag]
    acts = CronJobActivities(kube, cached=lambda ns, uid: copy)
    res = await ActivityEnvironment().run(acts.create_job_at, _armed(cj))
    assert res.outcome == "created"  # the API server, not the cache, had the last word
    kube.patch("CronJob", namespace, "lagging", {"spec": {"suspend": True}})
    res = await ActivityEnvironment().run(acts.create_job_at, _armed(cj).model_copy(update={"job_name": "lagging-2"}))
    assert (res.outcome, res.generation) == ("stale", 2)


async def test_the_garbage_collector_and_the_bridge_wait_while_a_burst_of_creations_runs(kube: Kube, namespace) -> None:
    cjs = [_cronjob(kube, namespace, f"burst-{i}") for i in range(3)]
    collecting: list[bool] = []
    bursting: list[bool] = []  # what the SDK metrics' forwarding asks (worker/telemetry.py)
    armed: set[datetime | None] = set()  # the time full collections keep away from (collect_when_quiet)
    read: list[float] = []

    def cache(ns: str, uid: str) -> dict | None:  # called as each creation runs, in the pool's thread
        collecting.append(gc.isenabled())
        bursting.append(in_burst())
        armed.add(_BURST.next_due())
        time.sleep(0.3)  # a slow burst, so the bridge's wait below starts inside it
        read.append(time.monotonic())
        return None

    async def bridge() -> float:  # the bridge's next event, arriving once the burst has begun
        while not collecting:
            await asyncio.sleep(0.01)
        await after_creations()
        return time.monotonic()

    acts = CronJobActivities(kube, cached=cache)
    due = utcnow() + timedelta(seconds=0.5)
    *results, dispatched = await asyncio.gather(
        *(ActivityEnvironment().run(acts.create_job_at, _armed(cj, not_before=due)) for cj in cjs), bridge())
    assert [r.outcome for r in results] == ["created"] * 3
    assert collecting == [False] * 3 and gc.isenabled()
    assert bursting == [True] * 3 and not in_burst()
    assert len(read) == 3 and dispatched >= max(read)
    assert armed == {due} and _BURST.next_due() is None


def test_a_full_collection_waits_for_its_interval_and_keeps_away_from_a_burst() -> None:
    every, quiet, long_ago = FULL_COLLECTION_EVERY, QUIET, 10 * QUIET
    assert not _full_collection_due(every - 1, False, None, long_ago)  # not yet
    assert _full_collection_due(every, False, None, long_ago)  # nothing armed
    assert _full_collection_due(every, False, quiet + 1, long_ago)  # the next time is far enough
    assert not _full_collection_due(every, False, quiet - 1, long_ago)  # too close to a time
    assert not _full_collection_due(every, False, None, quiet - 1)  # a burst just over
    assert not _full_collection_due(every, True, None, long_ago)  # a burst runs
    assert _full_collection_due(3 * every, False, 1.0, 1.0)  # creations every few seconds: not put off for good
    assert not _full_collection_due(3 * every, True, None, long_ago)  # but never inside a burst


async def test_the_worker_makes_its_own_full_collections_and_gives_the_thresholds_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import activities.cronjob as cronjob_activities

    monkeypatch.setattr(cronjob_activities, "FULL_COLLECTION_EVERY", 0.05)
    monkeypatch.setattr(_BURST, "ended", 0.0)  # no burst of the tests above just over
    collections: list[tuple[int, ...]] = []
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(gc.get_threshold()) or 0)
    before = gc.get_threshold()
    task = asyncio.create_task(collect_when_quiet(poll=0.01))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the oldest generation is left to the task, the younger ones to the interpreter
    assert 2 <= len(collections) <= 6 and all(t[:2] == before[:2] and t[2] >= 2**30 for t in collections)
    assert gc.get_threshold() == before


async def test_a_burst_hands_its_completions_back_one_after_another(kube: Kube, namespace,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Each completion is a call to the Temporal server held in the SDK's core until answered:
    # a burst's all at once were a transient 75 MiB at 2,000 CronJobs (docs/benchmarks.md).
    from activities import cronjob as module

    monkeypatch.setattr(module, "COMPLETION_RATE", 10)  # 0.1 s apart, so the test sees the spacing
    cjs = [_cronjob(kube, namespace, f"paced-{i}") for i in range(3)]
    acts = CronJobActivities(kube)
    delays: list[float] = []
    place_in_line = module._Burst.completion_delay
    monkeypatch.setattr(module._Burst, "completion_delay", lambda burst: delays.append(place_in_line(burst)) or delays[-1])
    began = time.monotonic()
    due = utcnow() + timedelta(seconds=0.5)
    returned: list[float] = []

    async def create(cj: dict) -> str:
        res = await ActivityEnvironment().run(acts.create_job_at, _armed(cj, not_before=due))
        returned.append(time.monotonic())
        return res.outcome

    assert await asyncio.gather(*(create(cj) for cj in cjs)) == ["created"] * 3
    # each waits its place in line once the whole burst is made: the last two tenths at least (a
    # loaded machine only delays them, so the gaps between them are not asserted)
    assert sorted(delays) == pytest.approx([0.0, 0.1, 0.2]) and returned[-1] - began >= 0.2


async def test_a_burst_is_created_by_at_most_creators_threads_and_a_failure_stays_its_own(
        kube: Kube, namespace, monkeypatch: pytest.MonkeyPatch) -> None:
    from activities import cronjob as module

    cjs = [_cronjob(kube, namespace, f"many-{i}") for i in range(6)]
    broken = cjs[3]["metadata"]["uid"]
    lock = threading.Lock()
    running, most, threads = 0, 0, set()

    def cache(ns: str, uid: str) -> dict | None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.add(threading.get_ident())
        time.sleep(0.05)
        with lock:
            running -= 1
        if uid == broken:
            raise errors.ServerError(500, "InternalError", "the API server broke for this one")
        return None

    acts = CronJobActivities(kube, cached=cache)  # a pool of 16 threads
    monkeypatch.setattr(module, "CREATORS", 2)
    due = utcnow() + timedelta(seconds=0.5)
    results = await asyncio.gather(
        *(ActivityEnvironment().run(acts.create_job_at, _armed(cj, not_before=due)) for cj in cjs),
        return_exceptions=True)
    failed = results.pop(3)
    assert isinstance(failed, ApplicationError) and "broke for this one" in str(failed)
    assert [r.outcome for r in results] == ["created"] * 5  # type: ignore[union-attr]
    assert most <= 2 and len(threads) <= 2


async def test_a_creation_queued_as_the_last_creator_leaves_gets_a_creator(kube: Kube, namespace,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The creator found the queue empty and is on its way out, but the event loop, which counts
    # the creators, has not yet heard: the creation queued then must not wait for a next one.
    from activities import cronjob as module

    first, second_ = (_cronjob(kube, namespace, f"edge-{i}") for i in range(2))
    acts = CronJobActivities(kube)
    monkeypatch.setattr(module, "CREATORS", 1)
    burst = module._Burst()
    inp = _armed(first)
    made = acts._queue(burst, inp)
    deadline = time.monotonic() + 10
    # Blocking the event loop from here on, so the creator's hand-back cannot run yet.
    while kube.get("Job", namespace, inp.job_name) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the creator finds the queue empty and posts its hand-back
    assert burst.creators == 1 and not made.done()
    also = acts._queue(burst, _armed(second_))
    (res, _), (again, _) = await asyncio.wait_for(asyncio.gather(made, also), 10)
    assert res.outcome == again.outcome == "created" and burst.creators == 0


async def test_a_creation_cancelled_while_it_queues_is_not_made(kube: Kube, namespace,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from activities import cronjob as module

    first, second_ = (_cronjob(kube, namespace, f"gone-{i}") for i in range(2))
    release = threading.Event()

    def cache(ns: str, uid: str) -> dict | None:  # the first creation holds the only creator
        release.wait(10)
        return None

    acts = CronJobActivities(kube, cached=cache)
    monkeypatch.setattr(module, "CREATORS", 1)
    burst = module._Burst()
    made = acts._queue(burst, _armed(first))  # the one creator waits in it
    dropped_inp = _armed(second_)
    dropped = acts._queue(burst, dropped_inp)
    dropped.cancel()
    release.set()
    res, _ = await asyncio.wait_for(made, 10)
    for _ in range(1000):  # until the creator has handed back (it made the first, then looked again)
        if not burst.creators:
            break
        await asyncio.sleep(0.01)
    assert burst.creators == 0 and res.outcome == "created" and kube.get("Job", namespace, dropped_inp.job_name) is None


def test_a_burst_spreads_its_completions_at_the_rate_and_within_the_spread() -> None:
    from activities.cronjob import COMPLETION_RATE, COMPLETION_SPREAD, _Burst

    alone = _Burst(size=1)
    assert alone.completion_delay() == 0.0
    burst = _Burst(size=500)
    delays = [burst.completion_delay() for _ in range(500)]
    assert delays[1] == pytest.approx(1 / COMPLETION_RATE) and delays[-1] == pytest.approx(499 / COMPLETION_RATE)
    big = _Burst(size=10 * int(COMPLETION_RATE * COMPLETION_SPREAD))
    assert max(big.completion_delay() for _ in range(big.size)) < COMPLETION_SPREAD


def test_a_retried_pod_creation_meets_its_own_pods_and_makes_no_second(kube: Kube, namespace) -> None:
    # A worker killed mid-batch: the retry carries the same names (drawn in the workflow), so the
    # Pods the first attempt made answer 409 and count as made; a stranger's namesake does not.
    from activities.job import JobActivities
    from tests.integration.test_job import job_manifest, pods_of
    from workflows.models.job import CreatePodsInput, PodToCreate

    job = kube.create("Job", namespace, job_manifest("again", completions=3, parallelism=3, indexed=True,
                                                     suspend=True))
    inp = CreatePodsInput(namespace=namespace, name="again", uid=job["metadata"]["uid"],
                          pods=[PodToCreate(index=i, suffix=f"x{i}bcd") for i in range(3)])
    acts = JobActivities(kube)
    first = ActivityEnvironment().run(acts.create_pods, inp)
    assert sorted(first.created) == ["again-0-x0bcd", "again-1-x1bcd", "again-2-x2bcd"]
    kube.create("Pod", namespace, {"metadata": {"name": "again-2-x9bcd"},
                                   "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
    retry = inp.model_copy(update={"pods": [*inp.pods[:2], PodToCreate(index=2, suffix="x9bcd")]})
    second_ = ActivityEnvironment().run(acts.create_pods, retry)
    assert sorted(second_.created)[:2] == ["again-0-x0bcd", "again-1-x1bcd"]
    assert second_.created[2].startswith("again-2-") and second_.created[2] != "again-2-x9bcd"
    names = {p["metadata"]["name"] for p in pods_of(kube, namespace, job)}
    assert names == {"again-0-x0bcd", "again-1-x1bcd", "again-2-x2bcd", second_.created[2]}


def test_a_relabeled_pod_is_found_by_name_and_released_from_its_job(kube: Kube, namespace) -> None:
    # JOB-26: the selector's LIST no longer shows it; the expected name is read, set
    # apart as unmatched, and released with upstream's patch (ownerReference by uid + finalizer)
    from activities.job import JobActivities
    from tests.integration.test_job import job_manifest
    from workflows.models.job import (
        JOB_TRACKING_FINALIZER,
        CreatePodsInput,
        ObserveJobInput,
        PodToCreate,
        ReleaseUnmatchedInput,
    )

    manifest = job_manifest("loose", completions=2, parallelism=2, run_seconds=60, suspend=True)
    manifest["spec"].update({"manualSelector": True, "selector": {"matchLabels": {"app": "loose"}}})
    job = kube.create("Job", namespace, manifest)
    uid = job["metadata"]["uid"]
    acts = JobActivities(kube)
    made = ActivityEnvironment().run(acts.create_pods, CreatePodsInput(
        namespace=namespace, name="loose", uid=uid, pods=[PodToCreate(), PodToCreate()]))
    stray, kept = sorted(made.created)
    kube.patch("Pod", namespace, stray, {"metadata": {"labels": {"app": "debug"}}})
    observe = ObserveJobInput(namespace=namespace, name="loose", uid=uid)
    blind = ActivityEnvironment().run(acts.observe, observe)
    assert [p.name for p in blind.pods] == [kept] and blind.unmatched == []  # not expected: not looked for
    snap = ActivityEnvironment().run(acts.observe, observe.model_copy(update={"expect": [kept, stray, "deleted"]}))
    assert [p.name for p in snap.pods] == [kept] and [p.name for p in snap.unmatched] == [stray]
    res = ActivityEnvironment().run(acts.release_unmatched, ReleaseUnmatchedInput(
        namespace=namespace, job_uid=uid, pods={stray: snap.unmatched[0].uid}))
    assert res.names == [stray]
    meta = kube.get("Pod", namespace, stray)["metadata"]
    assert not meta.get("ownerReferences") and JOB_TRACKING_FINALIZER not in (meta.get("finalizers") or [])
    again = ActivityEnvironment().run(acts.release_unmatched, ReleaseUnmatchedInput(
        namespace=namespace, job_uid=uid, pods={stray: snap.unmatched[0].uid, "deleted": "x"}))
    assert sorted(again.names) == ["deleted", stray]  # nothing left to release is done
    after = ActivityEnvironment().run(acts.observe, observe.model_copy(update={"expect": [kept, stray]}))
    assert [p.name for p in after.pods] == [kept] and after.unmatched == []  # an orphan now, not matching


def test_a_finished_pod_released_is_labelled_and_left_out_of_the_next_read(kube: Kube, namespace) -> None:
    # JOB-91: the finished Pod's release labels it and the Job's LIST no longer shows it; a running
    # Pod released (a Job being deleted) keeps counting as active; a template's copy of the label is dropped
    from activities.job import JobActivities
    from tests.integration.test_job import job_manifest
    from workflows.models.job import (
        JOB_TRACKING_FINALIZER,
        TRACKING_LABEL,
        CreatePodsInput,
        ObserveJobInput,
        PodToCreate,
        ReleaseInput,
    )

    manifest = job_manifest("tally", completions=2, parallelism=2, run_seconds=60, suspend=True)
    manifest["spec"]["template"]["metadata"].setdefault("labels", {})[TRACKING_LABEL] = "released"
    job = kube.create("Job", namespace, manifest)
    acts = JobActivities(kube)
    observe = ObserveJobInput(namespace=namespace, name="tally", uid=job["metadata"]["uid"])
    made = ActivityEnvironment().run(acts.create_pods, CreatePodsInput(
        namespace=namespace, name="tally", uid=job["metadata"]["uid"], pods=[PodToCreate(), PodToCreate()]))
    done, running_ = sorted(made.created)
    assert sorted(p.name for p in ActivityEnvironment().run(acts.observe, observe).pods) == [done, running_]
    res = ActivityEnvironment().run(acts.release_finalizers, ReleaseInput(
        namespace=namespace, pods=[done, running_], finished=[done]))
    assert sorted(res.names) == [done, running_]
    labels = {n: kube.get("Pod", namespace, n)["metadata"].get("labels", {}).get(TRACKING_LABEL) for n in made.created}
    assert labels == {done: "released", running_: None}
    assert not any(JOB_TRACKING_FINALIZER in (kube.get("Pod", namespace, n)["metadata"].get("finalizers") or [])
                   for n in made.created)
    snap = ActivityEnvironment().run(acts.observe, observe)
    assert [(p.name, p.has_finalizer) for p in snap.pods] == [(running_, False)]


def test_a_snapshot_above_the_payload_limit_is_refused_with_its_size(kube: Kube, namespace, monkeypatch) -> None:
    # JOB-92: recorded, it would fail every workflow task without a word on the Job; refused, the
    # workflow records the reason as a Warning Event (SyncFailed) and tries again later
    from activities import job as job_activities
    from tests.integration.test_job import job_manifest
    from workflows.models.job import CreatePodsInput, JobMemory, ObserveJobInput, PodToCreate

    job = kube.create("Job", namespace, job_manifest("huge", completions=2, parallelism=2, suspend=True))
    uid = job["metadata"]["uid"]
    acts = job_activities.JobActivities(kube)
    ActivityEnvironment().run(acts.create_pods, CreatePodsInput(
        namespace=namespace, name="huge", uid=uid, pods=[PodToCreate(), PodToCreate()]))
    observe = ObserveJobInput(namespace=namespace, name="huge", uid=uid, memory=JobMemory())
    assert len(ActivityEnvironment().run(acts.observe, observe).pods) == 2
    monkeypatch.setattr(job_activities, "SNAPSHOT_LIMIT", 100)
    with pytest.raises(ApplicationError) as refused:
        ActivityEnvironment().run(acts.observe, observe)
    assert refused.value.type == "SnapshotTooLarge" and refused.value.non_retryable
    assert "bytes with 2 Pods" in str(refused.value)
