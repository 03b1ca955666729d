"""The one executor: carries out the typed steps a controller's decision yields, in a workflow or
against a fake.

Layer: workflows. A decision that needs the world's answer between two steps (a creation's
result decides the ledger, a status write's new resourceVersion the next write) is a generator:
it yields a step, is sent the step's result, and returns its outcome. It reads and writes no
Temporal API, so a table test drives the very same generator with a fake :class:`Side` and runs
the loop production runs (tests/unit/test_cronjob_decisions.py, tests/unit/test_job_decisions.py).

:func:`execute` drives such a generator; :class:`WorkflowSide` performs each step inside a
workflow: a :class:`Call` as an activity under the policies of workflows/policies.py, an
:class:`Emit` as a best-effort Event, a :class:`Wait` as a durable timer that news cuts short, a
:class:`Patched` as ``workflow.patched``. A workflow with a
step of its own (the CronJob's armed creation) extends ``WorkflowSide.perform``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Protocol, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows.models.common import CloudEvent, EventInput, deliver_cloudevent, record_event
    from workflows.policies import (
        BULK_HEARTBEAT,
        BULK_TIMEOUT,
        K8S_BEST_EFFORT_RETRY,
        K8S_CALL_TIMEOUT,
        K8S_RETRY,
        NOTIFY_TIMEOUT,
    )

In = TypeVar("In")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Call(Generic[In]):
    """A Kubernetes side effect: one declared activity and its input; its result is sent back.

    ``bulk``: the heartbeating kind that touches up to 500 Pods on the task queue; otherwise a
    local activity (one object's read or write).
    """

    activity: Callable[[In], Any]
    arg: In
    summary: str | None = None
    bulk: bool = False


@dataclass(frozen=True, slots=True)
class Emit:
    """Record a Kubernetes Event, best effort: a few tries, then a warning in the log."""

    event: EventInput


@dataclass(frozen=True, slots=True)
class Notify:
    """NOTIFY-DELIVERY: deliver a CloudEvent to the worker's sink, retried until it is taken (at least once)."""

    event: CloudEvent


@dataclass(frozen=True, slots=True)
class Patched:
    """Whether this run takes the code path named ``patch_id`` (``workflow.patched``): True for
    a new run; a recorded history answers as it was recorded."""

    patch_id: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait until the workflow has news (a signal, an update) or ``timeout`` passes (None: no
    timer); sent back True for news, False when the time is up. ``summary`` names the timer."""

    timeout: timedelta | None = None
    summary: str | None = None


@dataclass(frozen=True, slots=True)
class Log:
    """A line in the worker's log, at ``level`` ("info", "warning" or "error")."""

    level: str
    message: str


Step = Call[Any] | Emit | Notify | Patched | Wait | Log
#: A decision with steps: yields steps, is sent each one's result, returns its outcome.
Steps = Generator[Any, Any, R]


class Side(Protocol):
    """Where steps take effect: Kubernetes through activities, or a test's fake cluster."""

    async def perform(self, step: Any) -> Any: ...


async def execute(steps: Steps[R], side: Side) -> R:
    """Carry out every step ``steps`` yields on ``side``, in order, and return its outcome.

    A step that raises (an activity failed for good) ends the decision: the error reaches the
    caller, and the generator is closed.
    """
    result: Any = None
    try:
        while True:
            try:
                step = steps.send(result)
            except StopIteration as end:
                return end.value  # type: ignore[no-any-return]
            result = await side.perform(step)
    finally:
        steps.close()


class WorkflowSide:
    """Performs steps inside a workflow (only call it from workflow code)."""

    def woken(self) -> bool:
        """Whether the workflow has news that ends a :class:`Wait`; each workflow says what counts."""
        raise NotImplementedError

    async def perform(self, step: Any) -> Any:
        if isinstance(step, Call):
            if step.bulk:
                return await workflow.execute_activity(
                    step.activity, step.arg, start_to_close_timeout=BULK_TIMEOUT, heartbeat_timeout=BULK_HEARTBEAT,
                    retry_policy=K8S_RETRY, summary=step.summary)
            return await workflow.execute_local_activity(
                step.activity, step.arg, start_to_close_timeout=K8S_CALL_TIMEOUT, retry_policy=K8S_RETRY,
                summary=step.summary)
        if isinstance(step, Emit):
            return await record_event_best_effort(step.event)
        if isinstance(step, Notify):
            try:
                return await workflow.execute_activity(
                    deliver_cloudevent, step.event, start_to_close_timeout=NOTIFY_TIMEOUT, retry_policy=K8S_RETRY,
                    summary=f"CloudEvent {step.event.type}")
            except ActivityError as err:  # the sink refused it for good (a 4xx): retrying cannot help
                workflow.logger.error("CloudEvent %s (%s) not delivered: %s", step.event.id, step.event.type,
                                      err.cause or err)
                return None
        if isinstance(step, Wait):
            try:
                await workflow.wait_condition(self.woken, timeout=step.timeout, timeout_summary=step.summary)
            except TimeoutError:
                return False
            return True
        if isinstance(step, Patched):
            return workflow.patched(step.patch_id)
        if isinstance(step, Log):
            return getattr(workflow.logger, step.level)("%s", step.message)
        raise TypeError(f"no such step: {step!r}")


async def record_event_best_effort(ev: EventInput) -> None:
    """Record a Kubernetes Event from a workflow: a few tries, then a warning in the log, never a
    failure, since an Event is never worth stalling the object it is about."""
    try:
        await workflow.execute_local_activity(
            record_event, ev, start_to_close_timeout=K8S_CALL_TIMEOUT, retry_policy=K8S_BEST_EFFORT_RETRY,
            summary=f"event {ev.reason}")
    except ActivityError:
        workflow.logger.warning("could not record Event %s on %s %s", ev.reason, ev.ref.kind, ev.ref.key())
