"""CJ-GROUP, pure: the group's decisions (workflows/decisions/group.py) and its members' side of them
(workflows/decisions/cronjob.py), no workflow and no server.

:class:`Members` runs several CronJobs' passes against one in-memory group: each ``tell_group``
is the group's very :func:`group.report`, and its answers are delivered as the workflow delivers
them (``group_answer`` to the member), so the protocol is exercised whole.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from tests.unit.test_cronjob_decisions import JUST_AFTER, Cluster, T, always, state
from workflows.cron import job_name
from workflows.decisions import cronjob as decide
from workflows.decisions import group
from workflows.execute import Call, execute
from workflows.models.cronjob import (
    MAX_MEMBERS,
    MAX_REFS,
    RECHECK_BATCH,
    CronJobState,
    GroupAnswer,
    GroupReport,
    GroupState,
    JobSummary,
    ObjectReference,
    tell_group,
)

HOURLY_AT = [T + timedelta(hours=h) for h in range(4)]


def report(member: str, *, want: datetime | None = None, since: datetime | None = None, limit: int = 1,
           active: int = 0, uid: str | None = None) -> GroupReport:
    refs = [ObjectReference(name=f"{member}-{i}", namespace="ns", uid=f"{member}-{i}") for i in range(active)]
    return GroupReport(namespace="ns", group="g", member=member, member_uid=uid or f"uid-{member}", limit=limit,
                       active=refs, active_count=active, want=want, since=since or want)


def fold(*reports: GroupReport) -> GroupState:
    s = GroupState(namespace="ns", group="g")
    for rep in reports:
        s = group.report(s, rep)
    return s


def tell(s: GroupState, rep: GroupReport) -> tuple[GroupState, dict[str, GroupAnswer]]:
    """One report, and the answers it makes the group send."""
    s, answers = group.told(group.report(s, rep))
    return s, dict(answers)


def test_the_smallest_limit_of_the_members_holds_and_active_jobs_and_grants_use_slots() -> None:
    s, _ = group.told(fold(report("a", limit=3, active=1), report("b", limit=2, active=1)))
    s, answers = tell(s, report("c", limit=5, want=T))
    assert group.limit(s) == 2 and group.used(s) == 2
    assert [x.member for x in group.queue(s)] == ["c"]
    assert answers["c"].want == T and not answers["c"].granted and answers["c"].position == 1
    s, answers = tell(s, report("b", limit=2, active=0))  # b's Job ended: c gets its slot
    assert set(answers) == {"b", "c"} and answers["c"].granted and not answers["b"].granted
    assert answers["c"].limit == 2 and group.used(s) == 2 and s.to_tell == []


def test_the_longest_wait_goes_first_and_a_newer_time_keeps_its_place_and_its_slot() -> None:
    s = fold(report("holder", active=1), report("late", want=HOURLY_AT[1]), report("b", want=HOURLY_AT[0]),
             report("a", want=HOURLY_AT[0]))
    assert [x.member for x in group.queue(s)] == ["a", "b", "late"]  # since, then the name
    s, answers = tell(s, report("a", want=HOURLY_AT[2], since=HOURLY_AT[0]))  # superseded, still first
    assert answers["a"].position == 1
    s, answers = tell(s, report("holder"))
    assert answers["a"].granted and answers["a"].want == HOURLY_AT[2]
    s, answers = tell(s, report("a", want=HOURLY_AT[3], since=HOURLY_AT[0]))  # superseded again, still granted
    assert answers["a"].granted and answers["a"].want == HOURLY_AT[3] and group.used(s) == 1
    s, answers = tell(s, report("a", active=1))  # its Job runs: the grant becomes the Job
    assert group.used(s) == 1 and not answers["a"].granted and [x.member for x in group.queue(s)] == ["b", "late"]


def test_a_member_that_leaves_or_is_recreated_frees_what_it_held() -> None:
    s, _ = group.told(fold(report("a", active=1), report("b", want=T)))
    s, answers = tell(s, GroupReport(namespace="ns", group="g", member="a", member_uid="", leave=True))
    assert [x.member for x in s.seats] == ["b"] and list(answers) == ["b"] and answers["b"].granted  # none to a
    s, answers = tell(s, report("b", want=T, uid="recreated"))  # a namesake: the old one's grant is not its
    assert group.used(s) == 1 and answers["b"].granted  # granted again, as the queue's first


def test_a_group_is_refused_beyond_its_most_members() -> None:
    s, _ = group.told(fold(*(report(f"m{i}") for i in range(MAX_MEMBERS))))
    s2, answers = tell(s, report("one-more", want=T))
    assert answers["one-more"].refused and "500" in answers["one-more"].refused and s2 == s
    _, answers = tell(s, report("m0", want=T))  # a member already in is not
    assert answers["m0"].refused is None


def test_holders_found_ended_free_their_slots_and_their_members_are_told() -> None:
    s, _ = group.told(fold(report("a", active=2, limit=2), report("b", want=T, limit=2)))
    assert not group.rechecking(fold(report("a", active=2)))  # no one waits: no re-read
    assert group.rechecking(s) and [h.name for h in group.holders(s)] == ["a-0", "a-1"]
    s, told = group.ended(s, [JobSummary(name="a-1", uid="a-1", gone=True)])
    assert told == [("a", JobSummary(name="a-1", uid="a-1", owner_uid="uid-a", gone=True))]
    assert group.used(s) == 2 and s.to_tell == ["b"]  # a-0 and b's grant
    assert group.describe(s)["holders"] == [{"cronjob": "a", "job": "a-0"},
                                            {"cronjob": "b", "granted": "2026-05-19T10:00:00Z"}]


# -- the members' side, against one shared group ------------------------------------------------

class Members:
    """CronJobs whose passes share one group: their ``tell_group`` calls are the group's decisions,
    and the answers the group queues reach the members as the ``group_answer`` signal does."""

    def __init__(self, **states: CronJobState) -> None:
        self.states = states
        self.group = GroupState(namespace="ns", group="g")
        self.created: dict[str, list[str]] = {name: [] for name in states}
        self.reasons: dict[str, list[str]] = {name: [] for name in states}
        self.wakes: dict[str, datetime | None] = {}

    def sync(self, name: str, now: datetime) -> None:
        members = self

        class Side(Cluster):
            async def perform(self, step: Any) -> Any:
                if isinstance(step, Call) and step.activity is tell_group:
                    members.group = group.report(members.group, step.arg)
                    return None
                return await super().perform(step)

        side = Side(self.states[name])
        end = asyncio.run(execute(decide.run_pass(side, now, armed=False, subminute=always, clock=lambda: now),
                                  side))
        self.states[name], self.wakes[name] = side.state, end.wake
        self.created[name] += side.created
        self.reasons[name] += [e.reason for e in side.events]
        self.group, answers = group.told(self.group)
        woken = []
        for member, answer in answers:
            self.states[member], events, changed = decide.answered(self.states[member], answer, now)
            self.reasons[member] += [e.reason for e in events]
            if changed and self.states[member].seat and self.states[member].seat.granted:
                woken.append(member)
        for member in woken:  # a grant wakes its member's workflow for a pass at once
            self.sync(member, now)

    def finish(self, name: str, now: datetime) -> None:
        [job] = self.states[name].active
        self.states[name], _, _ = decide.job_observed(
            self.states[name], JobSummary(name=job.name, uid=job.uid, owner_uid=f"uid-{name}", outcome="Complete",
                                          completion_time=now), now)
        self.sync(name, now)

    def ledger(self, name: str) -> list[tuple[datetime, str]]:
        return [(x.scheduled_time, x.outcome) for x in self.states[name].ledger]


def member(name: str, limit: int = 1, **kw: Any) -> CronJobState:
    s = state(**kw)
    notes = {"name": name, "uid": f"uid-{name}", "concurrency_group": "g", "concurrency_limit": limit}
    return s.model_copy(update={"observation": s.observation.model_copy(update=notes)})


def test_a_member_without_a_slot_waits_and_its_grant_creates_the_job() -> None:
    m = Members(a=member("a"), b=member("b"))
    m.sync("a", JUST_AFTER)
    m.sync("b", JUST_AFTER)
    assert m.created == {"a": [job_name("a", T)], "b": []}
    assert m.ledger("a") == [(T, "created")] and m.ledger("b") == [(T, "waited-for-group")]
    assert m.reasons["b"] == ["WaitingForGroup"]
    d = decide.describe(m.states["b"], JUST_AFTER, wake=m.wakes["b"], armed_for=None)["concurrencyGroup"]
    assert (d["name"], d["position"], d["waitingFor"]) == ("g", 1, "2026-05-19T10:00:00Z")
    assert d["holders"] == [{"cronjob": "a", "job": job_name("a", T)}]
    m.finish("a", JUST_AFTER + timedelta(seconds=5))  # a's end is reported: the group grants b, which creates
    assert m.created["b"] == [job_name("b", T)] and m.ledger("b") == [(T, "waited-for-group"), (T, "created")]
    assert group.used(m.group) == 1 and m.states["b"].seat is not None and m.states["b"].seat.want is None


def test_a_wait_past_the_starting_deadline_is_missed_and_wakes_at_the_deadline() -> None:
    b = member("b", deadline=600)
    m = Members(a=member("a"), b=b.model_copy(update={"observation": b.observation.model_copy(update={"cloudevents": True})}))
    m.sync("a", JUST_AFTER)
    m.sync("b", JUST_AFTER)
    assert m.wakes["b"] == T + timedelta(seconds=600)  # before the next hour: to give up on time
    assert m.states["b"].outbox == []  # waiting is no missed run (NOTIFY-EVENTS): it may still run
    m.sync("b", T + timedelta(seconds=600))
    assert m.ledger("b") == [(T, "waited-for-group"), (T, "missed-deadline")]
    assert [e.data["outcome"] for e in m.states["b"].outbox] == ["missed-deadline"]
    assert m.created["b"] == [] and [x.member for x in group.queue(m.group)] == []


def test_a_trigger_takes_a_slot_without_waiting_and_leaving_the_group_tells_it() -> None:
    m = Members(a=member("a"))
    m.sync("a", JUST_AFTER - timedelta(minutes=2))  # joins, nothing due yet
    run = decide.trigger(m.states["a"], JUST_AFTER)
    assert not decide.needs_slot(m.states["a"], run)
    assert decide.needs_slot(m.states["a"], decide.Run(job_name("a", T), T))
    assert not decide.needs_slot(m.states["a"], decide.Run(job_name("a", T), T, replace=(
        ObjectReference(name="x", namespace="ns", uid="x"),)))
    s = m.states["a"]
    m.states["a"] = s.model_copy(update={"observation": s.observation.model_copy(update={"concurrency_group": None})})
    m.sync("a", JUST_AFTER)
    assert m.states["a"].seat is None and m.group.seats == [] and m.created["a"] == [job_name("a", T)]


def test_a_namesake_recreated_unseen_takes_over_the_seat_and_a_member_without_the_group_leaves() -> None:
    m = Members(a=member("a"))
    m.sync("a", JUST_AFTER)
    assert [(s.member, s.uid, s.active_count) for s in m.group.seats] == [("a", "uid-a", 1)]
    obs = m.states["a"].observation.model_copy(update={"uid": "uid-a2", "concurrency_group": None})
    m.states["a"] = decide.observe(m.states["a"], obs).state  # its DELETED event was missed
    m.sync("a", JUST_AFTER + timedelta(seconds=1))
    assert m.group.seats == [] and m.states["a"].seat is None  # the old seat is given up, not kept


def test_a_re_read_takes_at_most_a_batch_of_holders_and_goes_round_them() -> None:
    s = fold(*(report(f"m{i:03d}", active=MAX_REFS, limit=10_000) for i in range(30)), report("w", want=T))
    every = [a.uid for a in group.holders(s)]
    assert len(every) == 150
    seen: list[str] = []
    for _ in range(3):
        s, batch = group.to_reread(s)
        assert len(batch) == RECHECK_BATCH
        seen += [a.uid for a in batch]
    assert seen == every  # three batches: each holder once, in order
    s, batch = group.to_reread(s)
    assert [a.uid for a in batch] == every[:RECHECK_BATCH]  # and round again
