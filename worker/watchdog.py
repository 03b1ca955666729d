"""Stuck workflows made visible: a workflow whose tasks keep failing becomes an Event and an ERROR line.

Layer: worker. Started by worker/app.py beside the bridge; reads Temporal visibility and
writes Kubernetes Events through :class:`kube.client.Kube`.

batchd's decisions are total over what the API accepts (TIME-1 in docs/design.md), so a workflow task that
fails is a bug. The Temporal server marks such a workflow with the search attribute
``TemporalReportedProblems`` after a few consecutive failures (its dynamic config
``system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute``, 5 by default). The
watchdog lists those on its task queues (the main one and the TTL one) every ``interval``
seconds and, once per run:

* logs an ERROR line with the workflow id and the problem;
* records a Warning Event ``WorkflowTaskFailing`` on the object the workflow manages (named by
  the ``K8s*`` search attributes), so ``kubectl describe`` shows it;
* ends the workflow if that object is gone (404, or its name now has another uid): a deletion
  must still reach a workflow that cannot run its own code to hear of it.

A run whose problem clears and comes back is reported again. Every replica runs one; Events
aggregate by content and termination is idempotent, so two watchdogs only double a count.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError, RPCStatusCode

from kube.client import Kube, try_record_event
from kube.errors import KubeError
from workflows.identity import K8S_KIND, K8S_NAME, K8S_NAMESPACE, K8S_UID, ttl_task_queue
from workflows.models.common import EventInput, ObjectRef

log = logging.getLogger("batchd.watchdog")

COMPONENT = "batchd-watchdog"
REASON = "WorkflowTaskFailing"


class Watchdog:
    """Reports batchd workflows whose tasks keep failing (see the module docstring)."""

    def __init__(self, client: Client, kube: Kube, *, task_queue: str, interval: float = 15.0) -> None:
        self.client, self.kube, self.interval = client, kube, interval
        self.query = ('TemporalReportedProblems IS NOT NULL AND ExecutionStatus = "Running" AND '
                      f'TaskQueue IN ("{task_queue}", "{ttl_task_queue(task_queue)}")')
        self._reported: set[tuple[str, str]] = set()  # (workflow id, run id) reported and still failing

    async def run(self) -> None:
        while True:
            try:
                await self.check()
            except RPCError as err:
                log.warning("watchdog: could not list workflows with reported problems: %s", err)
            await asyncio.sleep(self.interval)

    async def check(self) -> list[str]:
        """One look; returns the ids of the workflows newly reported."""
        stuck = [ex async for ex in self.client.list_workflows(self.query)]
        self._reported &= {(ex.id, ex.run_id) for ex in stuck}  # cleared problems: report a recurrence again
        reported = []
        for ex in stuck:
            ref = _managed_object(ex)
            if (ex.id, ex.run_id) not in self._reported:
                await self._report(ex, ref)
                self._reported.add((ex.id, ex.run_id))
                reported.append(ex.id)
            if ref is not None:
                await self._end_if_gone(ex, ref)
        return reported

    async def _report(self, ex: WorkflowExecution, ref: ObjectRef | None) -> None:
        problems = ", ".join(str(p) for p in ex.search_attributes.get("TemporalReportedProblems") or [])
        log.error("workflow %s (run %s) keeps failing its tasks: %s", ex.id, ex.run_id, problems,
                  extra={"workflow_id": ex.id, "run_id": ex.run_id})
        if ref is None:
            return
        message = (f"batchd's workflow {ex.id} keeps failing its tasks ({problems}); its decisions for this "
                   f"{ref.kind} wait until that is fixed. See the batchd worker's log.")
        event = EventInput(ref=ref, type="Warning", reason=REASON, message=message, component=COMPONENT)
        await asyncio.to_thread(try_record_event, self.kube, event, now=datetime.now(UTC), log=log)

    async def _end_if_gone(self, ex: WorkflowExecution, ref: ObjectRef) -> None:
        try:
            if await asyncio.to_thread(self.kube.get_instance, ref.kind, ref.namespace, ref.name, ref.uid) is not None:
                return
        except KubeError as err:
            log.warning("watchdog: could not read %s %s: %s", ref.kind, ref.key(), err)
            return
        try:
            await self.client.get_workflow_handle(ex.id, run_id=ex.run_id).terminate(
                reason=f"{ref.kind} {ref.key()} (uid {ref.uid}) was deleted while this workflow's tasks kept failing")
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return
        log.error("workflow %s ended: its %s %s is gone", ex.id, ref.kind, ref.key())


def _managed_object(ex: WorkflowExecution) -> ObjectRef | None:
    sa = ex.typed_search_attributes
    kind, ns, name, uid = sa.get(K8S_KIND), sa.get(K8S_NAMESPACE), sa.get(K8S_NAME), sa.get(K8S_UID)
    if kind not in ("Job", "Pod", "CronJob") or not ns or not name or not uid:
        return None
    return ObjectRef.model_validate({"kind": kind, "namespace": ns, "name": name, "uid": uid})
