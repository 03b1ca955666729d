"""FAIL-CLOSED under fuzz: every batchd.io/* annotation batchd reads, drawn valid and invalid from
tests/annotation_cases.py, on Jobs and CronJobs that run, with random changes while they run;
then the invariants, read from the objects the API server holds.

Each case is a small world of its own in one namespace: a consumer Job with ``after`` and its
producers; an every-2-seconds CronJob with a window, a run limit, a skip calendar, a breaker or
jitter; three CronJobs in a concurrency group; a finished Job with per-outcome TTLs. What the
fuzzer wrote, and when, is a :class:`Timeline` per annotation; an invariant is checked only where
the value had been in force for ``GRACE`` (the worker sees a change some time after it is made).
The invariants:

- no Pod before every Job its ``after`` names is Complete, and none while ``after`` holds the Job;
- no scheduled Job beyond ``max-runs``, at a ``skip`` time, outside the window, or while the
  CronJob is held;
- a backfill's Jobs only at times in the range of a value that reads, and each value run at most once;
- a concurrency group never above its limit;
- no object deleted while held, nor before its TTL;
- no workflow task failure (every workflow's history is read) but the server's refusal of a
  completion that a signal raced (``UnhandledCommand``), which is retried with the signal.

tests/integration/test_annotation_fuzz.py runs it on both backends; ``python -m bench.fuzz
--annotations`` runs it longer, with a seed of its own.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client

import cronexpr
from kube.client import Kube
from kube.errors import KubeError
from tests.annotation_cases import CASES
from tests.k8s import finish_job
from tests.k8s import job_manifest as hand_job
from workflows.models.common import ObjectMeta
from workflows.models.cronjob import (
    CRONJOB_ANNOTATIONS,
    SCHEDULED_TIMESTAMP_ANNOTATION,
    CronJob,
    CronJobObservation,
    parse_backfill,
)
from workflows.models.job import JOB_ANNOTATIONS, JOB_MANAGED_BY, JobOptions

#: how long a value must have been in force before an invariant holds the worker to it
GRACE = timedelta(seconds=3)
CREATED = datetime(1970, 1, 1, tzinfo=UTC)  # when a value an object was created with came in force
SECOND = timedelta(seconds=1)
MANUAL = "cronjob.kubernetes.io/instantiate"


def pools() -> dict[str, tuple[list[str], list[str]]]:
    """Per annotation, the table's valid and invalid values."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for case in CASES:
        if case.template or not (len(case.annotations) == 1 or case.valid):
            continue  # an invalid pair: which of the two is wrong is the pair's
        for name, value in case.annotations.items():
            if name in CRONJOB_ANNOTATIONS or name in JOB_ANNOTATIONS:
                out.setdefault(name, ([], []))[0 if case.valid else 1].append(value)
    counts = out["batchd.io/max-runs"][1]
    return {name: (valid, invalid or counts) for name, (valid, invalid) in out.items()}


@dataclass
class Timeline:
    """The values one annotation of one object had, each from when the fuzzer wrote it."""

    changes: list[tuple[datetime, str | None]] = field(default_factory=list)

    def set(self, at: datetime, value: str | None) -> None:
        self.changes.append((at, value))

    def at(self, t: datetime) -> tuple[str | None, bool]:
        """The value in force at ``t``, a time the API server wrote (whole seconds, so anywhere in
        the second after it), and whether it had been in force for GRACE before that second and
        through it."""
        before = [(at, v) for at, v in self.changes if at <= t]
        if not before:
            return None, False
        at, value = before[-1]
        through = not any(t < at <= t + SECOND for at, _ in self.changes)
        return value, t - at >= GRACE and through

    def never_changed(self) -> bool:
        return len(self.changes) <= 1


def _ts(raw: str | None) -> datetime | None:
    return datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == kind and c["status"] == "True"), None)


def job_manifest(name: str, *, run_seconds: float, exit_code: int = 0, backoff_limit: int | None = None,
                 notes: dict[str, str] | None = None) -> dict[str, Any]:
    """A Job batchd runs, whose Pod the fake kubelet (or kwok) ends after ``run_seconds``."""
    spec: dict[str, Any] = {"managedBy": JOB_MANAGED_BY, "completions": 1, "parallelism": 1, "template": {
        "metadata": {"annotations": {"kubesim.batchd.io/run-seconds": str(run_seconds),
                                     "kubesim.batchd.io/exit-code": str(exit_code)}},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox:1.36"}]}}}
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "annotations": notes or {}},
            "spec": spec}


def cronjob_manifest(name: str, schedule: str, *, annotations: dict[str, str], run_seconds: float = 0.5) -> dict[str, Any]:
    """A CronJob batchd takes (``batchd.io/managed``) whose Jobs batchd runs too."""
    template = job_manifest(name, run_seconds=run_seconds)
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "labels": {"batchd.io/managed": "true"}, "annotations": annotations},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": template["spec"]}}}


class AnnotationFuzz:
    """Make the worlds (:meth:`start`), change them (:meth:`step`, while they run), then
    :meth:`check` the invariants; :attr:`counts` says how many of what."""

    def __init__(self, kube: Kube, ns: str, rng: random.Random) -> None:
        self.kube, self.ns, self.rng = kube, ns, rng
        self.pools = pools()
        self.timelines: dict[tuple[str, str, str], Timeline] = {}  # (kind, name, annotation)
        self.counts: Counter[str] = Counter()
        self.cases: list[tuple[str, str]] = []  # (what, name)
        self.gone: dict[str, tuple[datetime, datetime]] = {}  # TTL Jobs: (last seen, first missing)
        self.seen: dict[str, datetime] = {}
        self.finished: dict[str, tuple[datetime, bool]] = {}  # TTL Jobs: when, and whether Failed
        self.pending: list[tuple[datetime, Callable[[], None]]] = []
        self.began = datetime.now(UTC).replace(microsecond=0)  # the fuzz's backfills end minutes before

    def _value(self, name: str) -> str:
        valid, invalid = self.pools[name]
        self.counts["values"] += 1
        if self.rng.random() < 0.5:
            return self.rng.choice(valid)
        self.counts["invalid values"] += 1
        return self.rng.choice(invalid)

    def _write(self, kind: str, obj: str, annotations: dict[str, str | None]) -> None:
        now = datetime.now(UTC)
        try:
            self.kube.patch(kind, self.ns, obj, {"metadata": {"annotations": annotations}})
        except KubeError:
            return
        self.counts["changes"] += 1
        for key, value in annotations.items():
            self.timelines.setdefault((kind, obj, key), Timeline()).set(now, value)

    def _created(self, kind: str, obj: str, annotations: dict[str, str]) -> None:
        """A value the object was created with is in force from the start: no earlier one was."""
        for key, value in annotations.items():
            self.timelines.setdefault((kind, obj, key), Timeline()).set(CREATED, value)

    def _create(self, kind: str, body: dict[str, Any]) -> None:
        self.kube.create(kind, self.ns, body)

    def _later(self, seconds: float, action: Callable[[], None]) -> None:
        self.pending.append((datetime.now(UTC) + timedelta(seconds=seconds), action))

    # -- the worlds --------------------------------------------------------------------------

    def start(self, cases: int) -> None:
        """Make ``cases`` more worlds, each named after its number."""
        makers = [self._after, self._cron, self._ttl, self._cron, self._after, self._ttl, self._group]
        first = len(self.cases)
        for i in range(first, first + cases):
            makers[i % len(makers)](f"c{i}")

    def _after(self, case: str) -> None:
        producers = [f"{case}-p{k}" for k in range(2)]
        choices = [",".join(producers), producers[0], f"{producers[1]}, {producers[0]}", "",
                   *self.pools["batchd.io/after"][1]]

        def after() -> str:
            self.counts["values"] += 1
            return self.rng.choice(choices)

        notes = {"batchd.io/after": after()}
        if self.rng.random() < 0.5:  # the annotations that only tune: a Job they cannot be read on runs all the same
            extra = self.rng.choice(["batchd.io/backoff-base-seconds", "batchd.io/backoff-max-seconds",
                                     "batchd.io/delete-succeeded-pods"])
            notes[extra] = self._value(extra)
        consumer = f"{case}-c"
        self.kube.create("Job", self.ns, job_manifest(consumer, run_seconds=0.3, notes=notes))
        self._created("Job", consumer, notes)
        for k, p in enumerate(producers):
            fails = self.rng.random() < 0.2
            body = job_manifest(p, run_seconds=1 + k, exit_code=1 if fails else 0, backoff_limit=0)
            self._later(self.rng.uniform(0, 3), functools.partial(self._create, "Job", body))
        if self.rng.random() < 0.6:
            self._later(self.rng.uniform(1, 5), lambda: self._write("Job", consumer, {"batchd.io/after": after()}))
        self.cases.append(("after", consumer))

    def _cron_notes(self) -> dict[str, str]:
        now = datetime.now(UTC)
        window = {"batchd.io/active-from": (now + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "batchd.io/active-until": (now + timedelta(seconds=9)).strftime("%Y-%m-%dT%H:%M:%SZ")}
        name = self.rng.choice(["batchd.io/max-runs", "batchd.io/skip", "batchd.io/suspend-after-failures",
                                "batchd.io/jitter-percent", "batchd.io/catch-up", "batchd.io/schedules",
                                "window", "batchd.io/active-from", "batchd.io/backfill"])
        if name == "window":
            self.counts["values"] += 2
            return window
        value = self._value(name)
        if name == "batchd.io/max-runs" and value in self.pools[name][0]:
            value = str(self.rng.randint(1, 3))  # small enough to be reached
        if name == "batchd.io/backfill" and value in self.pools[name][0] and self.rng.random() < 0.7:
            # a few minutes before any CronJob of the run was created: its Jobs are the backfill's
            start = now - timedelta(minutes=self.rng.randint(10, 20))
            value = f"{start:%Y-%m-%dT%H:%M:%SZ}/{start + timedelta(minutes=self.rng.randint(0, 2)):%Y-%m-%dT%H:%M:%SZ}"
            value += " one-at-a-time" if self.rng.random() < 0.3 else ""
        return {name: value}

    def _cron(self, case: str) -> None:
        notes = self._cron_notes()
        self.kube.create("CronJob", self.ns, cronjob_manifest(case, "@every 2s", annotations=notes))
        self._created("CronJob", case, dict(notes))
        if self.rng.random() < 0.6:
            change = self._cron_notes() if self.rng.random() < 0.5 else {k: self._value(k) if k in self.pools else v
                                                                          for k, v in notes.items()}
            self._later(self.rng.uniform(2, 6), lambda: self._write("CronJob", case, dict(change)))
        self.cases.append(("cronjob", case))

    def _group(self, case: str) -> None:
        limit = str(self.rng.randint(1, 2))
        members = [f"{case}-m{k}" for k in range(3)]
        for m in members:
            notes = {"batchd.io/concurrency-group": case, "batchd.io/concurrency-limit": limit}
            self.kube.create("CronJob", self.ns, cronjob_manifest(m, "@every 2s", annotations=notes, run_seconds=3))
            self._created("CronJob", m, notes)
        if self.rng.random() < 0.5:  # one member's limit written wrongly: it is held, the others go on
            self._later(self.rng.uniform(1, 4), lambda: self._write("CronJob", members[0], {
                "batchd.io/concurrency-limit": self._value("batchd.io/concurrency-limit")}))
        self.cases.append(("group", case))

    def _ttl(self, case: str) -> None:
        name = f"{case}-t"
        key = self.rng.choice(["batchd.io/ttl-seconds-after-success", "batchd.io/ttl-seconds-after-failure"])
        value = self._value(key)
        if value in self.pools[key][0]:
            value = str(self.rng.randint(0, 3))
        body = hand_job(name, ttl=1)
        body["metadata"]["annotations"] = {key: value}
        self.kube.create("Job", self.ns, body)
        self._created("Job", name, {key: value})
        failed, at = self.rng.random() < 0.5, datetime.now(UTC).replace(microsecond=0)
        finish_job(self.kube, self.ns, name, at, failed=failed)
        self.finished[name] = (at, failed)
        if self.rng.random() < 0.6:
            self._later(self.rng.uniform(1, 5), lambda: self._write("Job", name, {key: self.rng.choice(
                [str(self.rng.randint(0, 2)), *self.pools[key][1]])}))
        self.cases.append(("ttl", name))

    def step(self) -> None:
        """Do what is due: the changes and creations planned for now, and watch the TTL Jobs."""
        now = datetime.now(UTC)
        due = [p for p in self.pending if p[0] <= now]
        self.pending = [p for p in self.pending if p[0] > now]
        for _, action in due:
            try:
                action()
            except KubeError:
                self.counts["refused"] += 1
        for what, name in self.cases:
            if what == "ttl" and name not in self.gone:
                if self.kube.get("Job", self.ns, name) is None:
                    self.gone[name] = (self.seen.get(name, now), now)
                else:
                    self.seen[name] = now

    # -- the invariants ----------------------------------------------------------------------

    async def check(self, client: Client) -> list[str]:
        """What went wrong; empty if every invariant held."""
        broken: list[str] = []
        jobs = self.kube.list("Job", self.ns)["items"]
        pods = self.kube.list("Pod", self.ns)["items"]
        by_name = {j["metadata"]["name"]: j for j in jobs}
        events = self.kube.list("Event", self.ns)["items"]
        for what, name in self.cases:
            if what == "after":
                broken += self._check_after(name, by_name, pods)
            elif what == "cronjob":
                broken += self._check_cron(name, jobs, events)
            elif what == "group":
                broken += self._check_group(name, jobs)
            else:
                broken += self._check_ttl(name)
        async for ex in client.list_workflows(f'K8sNamespace = "{self.ns}"'):
            async for event in client.get_workflow_handle(ex.id, run_id=ex.run_id).fetch_history_events():
                if event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    continue
                failed = event.workflow_task_failed_event_attributes
                if failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND:
                    # not the workflow's code: the server refused a completion because a signal came
                    # meanwhile (a dependency's end as the Job ends), and the task runs again with it
                    self.counts["completions raced by a signal"] += 1
                    continue
                broken.append(f"workflow {ex.id}: a task failed ({failed.cause}): {failed.failure.message[:500]}")
            self.counts["workflows"] += 1
        return broken

    def _check_after(self, name: str, by_name: dict[str, Any], pods: list[dict[str, Any]]) -> list[str]:
        job = by_name.get(name)
        if job is None:
            return []
        timeline = self.timelines[("Job", name, "batchd.io/after")]
        mine = sorted((_ts(p["metadata"]["creationTimestamp"]), p["metadata"]["name"]) for p in pods
                      if p["metadata"].get("labels", {}).get("batch.kubernetes.io/controller-uid") == job["metadata"]["uid"])
        broken = []
        for k, (created, pod) in enumerate(mine):
            assert created is not None
            value, stable = timeline.at(created)
            if not stable or value is None:
                continue
            opts = JobOptions.of({"batchd.io/after": value})
            if opts.held:
                broken.append(f"Pod {pod} of {name} created at {created} while held by after={value!r}")
            elif k == 0:  # the first: once its dependencies are met, a Job reads them no more (JOB-AFTER)
                for dep in opts.after:
                    done = _condition(by_name.get(dep) or {}, "Complete")
                    if done is None or (_ts(done["lastTransitionTime"]) or created) > created:
                        broken.append(f"Pod {pod} of {name} created at {created} before {dep} was Complete")
        return broken

    def _check_cron(self, name: str, jobs: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[str]:
        """Each scheduled Job against the annotations in force when it was created: a Job for a time
        that passed while the CronJob was held may be created once the hold ends (as after a
        suspension, CJ-25), but none while it holds."""
        scheduled = sorted((_ts(j["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION]),
                            _ts(j["metadata"]["creationTimestamp"])) for j in jobs
                           if any(o.get("name") == name for o in j["metadata"].get("ownerReferences") or [])
                           and MANUAL not in j["metadata"]["annotations"])
        notes = {key[2]: tl for key, tl in self.timelines.items() if key[:2] == ("CronJob", name)}
        broken = self._check_backfill(name, [t for t, _ in scheduled if t is not None and t < self.began],
                                      notes.get("batchd.io/backfill"), events)
        scheduled = [(t, created) for t, created in scheduled if t is not None and t >= self.began]
        self.counts["scheduled Jobs"] += len(scheduled)
        for t, created in scheduled:
            assert t is not None and created is not None
            values = {k: tl.at(created) for k, tl in notes.items()}
            if not all(stable for _, stable in values.values()):
                continue
            obs = CronJobObservation.of(CronJob(metadata=ObjectMeta(name=name, annotations={
                k: v for k, (v, _) in values.items() if v is not None})))
            if obs.held:
                broken.append(f"CronJob {name}: a Job for {t} created at {created} while held: {obs.held} "
                              f"({ {k: tl.changes for k, tl in notes.items()} })")
            if obs.active_from and t < obs.active_from or obs.active_until and t > obs.active_until:
                broken.append(f"CronJob {name}: a Job scheduled at {t} outside its window")
            for expression in obs.skip:
                if cronexpr.parse_standard(expression).next(t - timedelta(seconds=1)) == t:
                    broken.append(f"CronJob {name}: a Job scheduled at {t}, a skip time of {expression!r}")
        runs = notes.get("batchd.io/max-runs")
        if runs is not None and runs.never_changed():
            obs = CronJobObservation.of(CronJob(metadata=ObjectMeta(name=name, annotations={
                "batchd.io/max-runs": runs.changes[0][1] or ""})))
            if obs.max_runs is not None and len(scheduled) > obs.max_runs:
                broken.append(f"CronJob {name}: {len(scheduled)} scheduled Jobs, max-runs {obs.max_runs}")
            if obs.held and scheduled:
                broken.append(f"CronJob {name}: {len(scheduled)} scheduled Jobs, held from its creation")
        return broken

    def _check_backfill(self, name: str, times: list[datetime], timeline: Timeline | None,
                        events: list[dict[str, Any]]) -> list[str]:
        """CJ-BACKFILL-DOOR: the Jobs for times before the run began are a backfill's, each at a time
        in the range of a value that reads, one per minute; and each value ran at most once."""
        self.counts["backfilled Jobs"] += len(times)
        asked = [parse_backfill(v) for _, v in (timeline.changes if timeline else []) if v is not None]
        ranges = [(b.start, b.to) for b in asked if not isinstance(b, str)]
        broken = [f"CronJob {name}: a Job for {t}, in no backfill's range {ranges}" for t in times
                  if not any(start <= t <= to for start, to in ranges)]
        if len({t.replace(second=0) for t in times}) != len(times):
            broken.append(f"CronJob {name}: two backfilled Jobs in one minute: {times}")
        told = [e for e in events
                if e["involvedObject"]["name"] == name and e["reason"] in ("Backfilled", "InvalidBackfill")]
        if sum(e.get("count", 1) for e in told) > len(asked):
            broken.append(f"CronJob {name}: {len(told)} backfill Events for {len(asked)} values set")
        return broken

    def _check_group(self, group: str, jobs: list[dict[str, Any]]) -> list[str]:
        members = [f"{group}-m{k}" for k in range(3)]
        limits = {m: self.timelines[("CronJob", m, "batchd.io/concurrency-limit")] for m in members}
        limit = int(limits[members[1]].changes[0][1] or 1)
        spans = []
        for j in jobs:
            owner = next((o["name"] for o in j["metadata"].get("ownerReferences") or [] if o.get("kind") == "CronJob"), "")
            if owner in members:
                end = _condition(j, "Complete") or _condition(j, "Failed")
                spans.append((_ts(j["metadata"]["creationTimestamp"]),
                              _ts(end["lastTransitionTime"]) if end else datetime.max.replace(tzinfo=UTC)))
        self.counts["group Jobs"] += len(spans)
        broken = []
        for start, _ in spans:
            assert start is not None
            active = sum(1 for s, e in spans if s is not None and e is not None and s <= start < e)
            if active > limit:
                broken.append(f"group {group}: {active} Jobs active at {start}, limit {limit}")
        return broken

    def _check_ttl(self, name: str) -> list[str]:
        if name not in self.gone:
            return []
        seen, missing = self.gone[name]
        [(key, timeline)] = [(k[2], tl) for k, tl in self.timelines.items() if k[:2] == ("Job", name)]
        value, stable = timeline.at(seen)
        if not stable or value is None or timeline.at(missing)[0] != value:
            return []
        opts = JobOptions.of({key: value})
        if opts.held:
            return [f"Job {name} deleted between {seen} and {missing} while held: {opts.held}"]
        self.counts["TTL deletions"] += 1
        finished, failed = self.finished[name]
        ttl = (opts.ttl_after_failure if failed else opts.ttl_after_success)
        ttl = 1 if ttl is None else ttl  # the spec's
        if missing < finished + timedelta(seconds=ttl):
            return [f"Job {name} deleted by {missing}, before its TTL of {ttl} s from {finished}"]
        return []
