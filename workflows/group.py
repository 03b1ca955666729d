"""A concurrency group across CronJobs (CJ-GROUP, docs/cronjob.md) as one workflow per namespace and
group: ``cronjob-group/{ns}/{group}``.

Layer: workflows (deterministic). Members (CronJob workflows) report their whole view through the
activity ``tell_group``, an update-with-start of ``report``: the group starts with its first
member's report and ends when its last member leaves. Workflows cannot call each other's updates,
so the grants go back as signals (``group_grant``) to ``cronjob/{ns}/{name}``.

Slots are held by the members' running Jobs. A member learns of its Jobs' ends from the bridge,
and reports; a Job that ended while no worker watched (deleted during an outage, say) is found by
re-reading the holders' Jobs every ``--group-recheck`` while someone waits, and its member is told
as the bridge would have told it.
"""

from __future__ import annotations

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
        GroupGrant,
        GroupInput,
        GroupReport,
        JobSummary,
        ReadJobsInput,
        ReadJobsResult,
        read_group_jobs,
    )

#: Continue-as-new beyond this many events: each report is an update of a few events.
HISTORY_EVENTS = 2000


@workflow.defn(name="CronJobGroup")
class CronJobGroupWorkflow(WorkflowSide):
    """Grants the slots of one concurrency group to its members' schedule times, oldest wait first."""

    @workflow.init
    def __init__(self, inp: GroupInput) -> None:
        self.state = inp.state
        self._news = False

    @workflow.update(name="report")
    def report(self, rep: GroupReport) -> GroupAnswer:
        """A member's whole view (or its leaving); the answer says whether its waiting time has a slot."""
        self.state, answer = decide.report(self.state, rep)
        self._news = True
        return answer

    @report.validator
    def _validate_report(self, rep: GroupReport) -> None:
        if (rep.namespace, rep.group) != (self.state.namespace, self.state.group):
            raise ValueError(f"a report for group {rep.namespace}/{rep.group} sent to {self.state.namespace}/"
                             f"{self.state.group}")

    @workflow.query(name="describe")
    def describe(self) -> dict[str, Any]:
        """The limit, the members, who holds the slots and who waits, in order."""
        return decide.describe(self.state)

    @workflow.run
    async def run(self, inp: GroupInput) -> str:
        while True:
            await self._tell_grants()
            if not self.state.seats:
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self.state.seats:
                    return "empty"
            self._news = False
            recheck = timedelta(seconds=self.state.recheck_seconds) if decide.rechecking(self.state) else None
            if not await self.perform(Wait(recheck, f"re-read the holders of group {self.state.group}")) \
                    and recheck is not None:
                await self._recheck()
            info = workflow.info()
            if info.is_continue_as_new_suggested() or info.get_current_history_length() > HISTORY_EVENTS:
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._tell_grants()
                workflow.continue_as_new(GroupInput(state=self.state))

    def woken(self) -> bool:
        return self._news

    async def _recheck(self) -> None:
        """Re-read the holders' Jobs: an end no worker saw frees its slot, and its member is told."""
        self.state, batch = decide.to_reread(self.state)
        found: ReadJobsResult = await self.perform(Call(
            read_group_jobs, ReadJobsInput(namespace=self.state.namespace, jobs=batch),
            summary=f"re-read {len(batch)} holder(s) of group {self.state.group}"))
        self.state, told = decide.ended(self.state, found.ended)
        for member, job in told:
            await self._signal(member, "job_observed", job)

    async def _tell_grants(self) -> None:
        self.state, grants = decide.told(self.state)
        for member, due in grants:
            await self._signal(member, "group_grant", GroupGrant(group=self.state.group, due=due))

    async def _signal(self, member: str, name: str, arg: GroupGrant | JobSummary) -> None:
        """Signal a member; one whose workflow is gone leaves the group (its CronJob was deleted)."""
        try:
            await workflow.get_external_workflow_handle(cronjob_workflow_id(self.state.namespace, member)).signal(
                name, arg)
        except FailureError as err:
            workflow.logger.warning("group %s/%s: member %s unreachable (%s); it leaves the group",
                                    self.state.namespace, self.state.group, member, err)
            self.state, _ = decide.report(self.state, GroupReport(
                namespace=self.state.namespace, group=self.state.group, member=member, member_uid="", leave=True))
