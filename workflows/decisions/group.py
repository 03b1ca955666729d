"""A concurrency group's decisions (CJ-GROUP, docs/cronjob.md), pure: its members' reports and the
holders found ended in; slots granted out.

Layer: workflows (pure; no Temporal API, no I/O, no clock). The group's workflow
(workflows/group.py) folds each member's :class:`GroupReport` in with :func:`report`, each re-read
of its holders with :func:`ended`, and signals :func:`told`'s answers: one to each member that
reported, and to each one a slot has just been granted.

The rules:

* a slot is held by each active Job of a member, and by each schedule time granted a slot whose
  Job its member has not reported yet;
* the limit is the smallest any member asks for;
* waiting members are served oldest wait first (``since``, then the name), each for one schedule
  time at a time; a newer time that supersedes a member's waiting one keeps its place, and its
  slot once granted.
"""

from __future__ import annotations

from typing import Any

from workflows.models.cronjob import (
    ANSWER_LIST,
    MAX_MEMBERS,
    MAX_REFS,
    RECHECK_BATCH,
    GroupAnswer,
    GroupReport,
    GroupState,
    Holder,
    JobSummary,
    ObjectReference,
    Seat,
    Waiter,
)
from workflows.times import rfc3339 as iso


def limit(state: GroupState) -> int:
    """Members that disagree on the limit get the smallest."""
    return min((s.limit for s in state.seats), default=1)


def used(state: GroupState) -> int:
    return sum(s.active_count + (s.granted is not None) for s in state.seats)


def queue(state: GroupState) -> list[Seat]:
    """The members waiting for a slot, first served first."""
    waiting = [s for s in state.seats if s.want is not None and s.granted is None]
    return sorted(waiting, key=lambda s: (s.since or s.want, s.member))


def report(state: GroupState, rep: GroupReport) -> GroupState:
    """Take a member's whole view in (or its leaving), grant what is free, and queue its answer."""
    old = next((s for s in state.seats if s.member == rep.member), None)
    others = [s for s in state.seats if s.member != rep.member]
    if rep.leave:
        return _allocate(state.model_copy(update={"seats": others}))
    if old is None and len(others) >= MAX_MEMBERS:
        return _answering(state, rep.member)  # refused: see answer()
    same = old is not None and old.uid == rep.member_uid
    # a slot granted stays the member's while it waits, for a newer time too (it supersedes the old one)
    granted = rep.want if same and old is not None and old.granted is not None else None
    seat = Seat(member=rep.member, uid=rep.member_uid, limit=rep.limit, active=rep.active[:MAX_REFS],
                active_count=max(rep.active_count, len(rep.active)), want=rep.want, since=rep.since,
                granted=granted)
    return _allocate(_answering(state.model_copy(update={"seats": sorted([*others, seat], key=lambda s: s.member)}),
                                rep.member))


def ended(state: GroupState, jobs: list[JobSummary]) -> tuple[GroupState, list[tuple[str, JobSummary]]]:
    """Holders found finished or gone by re-reading their Jobs: their slots free, and each member is
    told (as its bridge would have told it, had a worker seen the end)."""
    done = {j.uid: j for j in jobs}
    told: list[tuple[str, JobSummary]] = []
    seats = []
    for s in state.seats:
        gone = [a for a in s.active if a.uid in done]
        told += [(s.member, done[a.uid].model_copy(update={"owner_uid": s.uid})) for a in gone]
        seats.append(s.model_copy(update={"active": [a for a in s.active if a.uid not in done],
                                          "active_count": max(0, s.active_count - len(gone))}))
    return _allocate(state.model_copy(update={"seats": seats})), told


def holders(state: GroupState) -> list[ObjectReference]:
    """The holders the group knows by reference."""
    return [a for s in state.seats for a in s.active]


def to_reread(state: GroupState) -> tuple[GroupState, list[ObjectReference]]:
    """The next RECHECK_BATCH holders to re-read, round the list from where the last re-read stopped."""
    known = holders(state)
    start = state.reread_from % len(known) if known else 0
    batch = (known[start:] + known[:start])[:RECHECK_BATCH]
    return state.model_copy(update={"reread_from": start + len(batch)}), batch


def rechecking(state: GroupState) -> bool:
    """Re-read the holders only while someone waits: otherwise a stale holder blocks no one."""
    return bool(queue(state)) and bool(holders(state))


def told(state: GroupState) -> tuple[GroupState, list[tuple[str, GroupAnswer]]]:
    """The answers to signal now, each as the group stands now; the state forgets them."""
    return state.model_copy(update={"to_tell": []}), [(m, answer(state, m)) for m in state.to_tell]


def _answering(state: GroupState, member: str) -> GroupState:
    return state if member in state.to_tell else state.model_copy(update={"to_tell": [*state.to_tell, member]})


def _allocate(state: GroupState) -> GroupState:
    free = limit(state) - used(state)
    if free <= 0:
        return state
    chosen = {s.member for s in queue(state)[:free]}
    state = state.model_copy(update={
        "seats": [s.model_copy(update={"granted": s.want}) if s.member in chosen else s for s in state.seats]})
    for member in sorted(chosen):
        state = _answering(state, member)
    return state


def answer(state: GroupState, member: str) -> GroupAnswer:
    waiting = queue(state)
    seat = next((s for s in state.seats if s.member == member), None)
    position = next((i + 1 for i, s in enumerate(waiting) if s.member == member), None)
    refused = None if seat is not None or len(state.seats) < MAX_MEMBERS else (
        f"concurrency group {state.group} already has {MAX_MEMBERS} CronJobs, the most one holds")
    return GroupAnswer(
        group=state.group, want=seat.want if seat is not None else None, refused=refused,
        granted=seat is not None and seat.want is not None and seat.granted == seat.want,
        limit=limit(state), position=position, used=used(state), waiting=len(waiting),
        holders=[Holder(cronjob=s.member, job=a.name) for s in state.seats for a in s.active][:ANSWER_LIST],
        queue=[Waiter(cronjob=s.member, scheduled_time=s.want, since=s.since or s.want)
               for s in waiting[:ANSWER_LIST] if s.want is not None])


def describe(state: GroupState) -> dict[str, Any]:
    """The group's ``describe`` query (``batchd cronjob describe`` shows it beside the member's): all of
    it, not an answer's first few."""
    return {
        "namespace": state.namespace, "group": state.group, "limit": limit(state), "used": used(state),
        "members": [{"cronjob": s.member, "limit": s.limit, "active": s.active_count} for s in state.seats],
        "holders": [{"cronjob": s.member, "job": a.name} for s in state.seats for a in s.active]
        + [{"cronjob": s.member, "granted": iso(s.granted)} for s in state.seats if s.granted is not None],
        "queue": [{"cronjob": s.member, "scheduledTime": iso(s.want), "waitingSince": iso(s.since or s.want)}
                  for s in queue(state) if s.want is not None],
    }
