"""A concurrency group across CronJobs (CJ-GROUP, docs/cronjob.md) as one workflow per namespace and
group: ``cronjob-group/{ns}/{group}``.

Layer: workflows (deterministic). Members (CronJob workflows) report their whole view through the
activity ``tell_group``, a signal-with-start of ``report``: the group starts with its first
member's report and ends when its last member leaves. It answers each report, and each grant, with
the signal ``group_answer`` to ``cronjob/{ns}/{name}``. Signals both ways, as Temporal's mutex
samples do: an update would answer at once, but the server lets only 10 be in flight per workflow,
and 300 CronJobs of one group on one schedule report in the same second (bench/group.py).

Slots are held by the members' running Jobs. A member learns of its Jobs' ends from the bridge,
and reports; a Job that ended while no worker watched (deleted during an outage, say) is found by
re-reading the holders' Jobs every ``--group-recheck`` while someone waits, and its member is told
as the bridge would have told it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from workflows.decisions import group as decide
    from workflows.execute import Call, Wait, WorkflowSide
    from workflows.identity import cronjob_workflow_id
    from workflows.models.cronjob import (
        GroupAnswer,
        GroupInput,
        GroupReport,
        JobSummary,
        ReadJobsInput,
        ReadJobsResult,
        read_group_jobs,
    )

#: Continue-as-new beyond this many events (a report and its answer are a few).
HISTORY_EVENTS = 2000
#: How long a group without members waits before it ends: a report arriving as the run completes
#: would find it gone, so ending is not done in the same instant as the last leave.
EMPTY_GRACE = timedelta(minutes=1)


@workflow.defn(name="CronJobGroup")
class CronJobGroupWorkflow(WorkflowSide):
    """Grants the slots of one concurrency group to its members' schedule times, oldest wait first."""

    @workflow.init
    def __init__(self, inp: GroupInput) -> None:
        self.state = inp.state
        self._news = False

    @workflow.signal(name="report")
    def report(self, rep: GroupReport) -> None:
        """A member's whole view (or its leaving); it is answered with ``group_answer``."""
        if (rep.namespace, rep.group) != (self.state.namespace, self.state.group):
            workflow.logger.warning("group %s/%s: a report for %s/%s ignored", self.state.namespace,
                                    self.state.group, rep.namespace, rep.group)
            return
        self.state = decide.report(self.state, rep)
        self._news = True

    @workflow.query(name="describe")
    def describe(self) -> dict[str, Any]:
        """The limit, the members, who holds the slots and who waits, in order."""
        return decide.describe(self.state)

    @workflow.run
    async def run(self, inp: GroupInput) -> str:
        while True:
            self._news = False
            await self._answer()
            if not self.state.seats and not self.state.to_tell and not await self.perform(
                    Wait(EMPTY_GRACE, f"group {self.state.group} has no member; it ends unless one reports")):
                return "empty"
            recheck = timedelta(seconds=self.state.recheck_seconds) if decide.rechecking(self.state) else None
            if not await self.perform(Wait(recheck, f"re-read the holders of group {self.state.group}")) \
                    and recheck is not None:
                await self._recheck()
            info = workflow.info()
            if info.is_continue_as_new_suggested() or info.get_current_history_length() > HISTORY_EVENTS:
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._answer()
                workflow.continue_as_new(GroupInput(state=self.state))

    def woken(self) -> bool:
        return self._news or bool(self.state.to_tell)

    async def _recheck(self) -> None:
        """Re-read the holders' Jobs: an end no worker saw frees its slot, and its member is told."""
        self.state, batch = decide.to_reread(self.state)
        found: ReadJobsResult = await self.perform(Call(
            read_group_jobs, ReadJobsInput(namespace=self.state.namespace, jobs=batch),
            summary=f"re-read {len(batch)} holder(s) of group {self.state.group}"))
        self.state, told = decide.ended(self.state, found.ended)
        await asyncio.gather(*(self._signal(member, "job_observed", job) for member, job in told))

    async def _answer(self) -> None:
        """Signal the queued answers, all at once: one after another, each would wait for its own round trip."""
        self.state, answers = decide.told(self.state)
        await asyncio.gather(*(self._signal(member, "group_answer", answer) for member, answer in answers))

    async def _signal(self, member: str, name: str, arg: GroupAnswer | JobSummary) -> None:
        """Signal a member; one whose workflow is gone leaves the group (its CronJob was deleted)."""
        try:
            await workflow.get_external_workflow_handle(cronjob_workflow_id(self.state.namespace, member)).signal(
                name, arg)
        except FailureError as err:
            workflow.logger.warning("group %s/%s: member %s unreachable (%s); it leaves the group",
                                    self.state.namespace, self.state.group, member, err)
            self.state = decide.report(self.state, GroupReport(
                namespace=self.state.namespace, group=self.state.group, member=member, member_uid="", leave=True))
