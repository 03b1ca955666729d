"""TTL-after-finished (KEP-592) as one durable workflow per finished Job or Pod.

Layer: workflows (deterministic). Started and signalled by the bridge's TTL router
(worker/routers.py) with signal-with-start on ``job-ttl/{ns}/{name}/{uid}`` or
``pod-ttl/{ns}/{name}/{uid}``; calls the activities ``read_ttl_object`` and ``delete_expired``,
declared in workflows/models/ttl.py.

The flow mirrors upstream's ``processJob`` / ``processTTL`` with the workqueue's in-memory
``AddAfter`` replaced by a durable timer that survives worker restarts. Each pass is
``process_ttl`` (workflows/decisions/ttl.py), whose steps this workflow hands to the executor:

1. decide from the latest observation (signal or fresh read) whether the
   object needs cleanup at all, and when it expires.
2. Sleep until the expiry on a timer whose summary names the object and the instant; a new
   observation (TTL patched, object deleted) wakes it at once and the decision is re-made.
3. At expiry, ``delete_expired`` re-reads the object, re-runs the decision on the fresh copy,
   and deletes with uid and resourceVersion preconditions and Foreground propagation (TTL-11,
   TTL-12); if the fresh copy expires later, is held or changed meanwhile, the loop decides again.

A held object (``batchd.io/ttl-hold``, TTL-HOLD in docs/ttl.md) keeps its expiry timer, whose
summary names the hold; once expired it waits, with no timer, for the hold to go.

Both Kubernetes calls are local activities: a GET plus a DELETE is short and idempotent, and a
local activity costs one marker event instead of a task-queue round trip (about half the
history and latency of a normal activity). Retries past a minute become durable timers.

The workflow ends only on authoritative facts: a deletion, a 404 or uid change, a DELETED watch
event, or a fresh read that shows cleanup no longer applies (TTL removed, deletion under way).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

# Pure, deterministic modules: passed through so the sandbox does not rebuild every pydantic
# model class for each workflow run (that cost dominated a workflow's CPU and memory).
with workflow.unsafe.imports_passed_through():
    from workflows.decisions import ttl as decide
    from workflows.execute import WorkflowSide, execute
    from workflows.identity import EXPIRES_AT, OBSERVED_KEY_MEMO, OBSERVED_MEMO, TTL_HOLD_MEMO
    from workflows.models.ttl import TTLInput, TTLObservation, TTLResult
    from workflows.times import iso


#: workflow.patched id of the memo; histories from before it replay without the upserts
OBSERVED_MEMO_PATCH = "ttl-observed-memo"


@workflow.defn(name="TTLAfterFinished")
class TTLAfterFinishedWorkflow(WorkflowSide):
    """Deletes one Job or Pod once its TTL after finishing has expired."""

    @workflow.init
    def __init__(self, inp: TTLInput) -> None:
        self.books = decide.Books(inp.observation, workflow.info().typed_search_attributes.get(EXPIRES_AT))
        # The bridge starts the workflow showing the observation's key, expiry and hold (WATCH-3),
        # so the first pass upserts none of them: each upsert is a billed action. A workflow
        # started before that shows nothing at start and upserts all three, as it always did.
        self._keyed = OBSERVED_KEY_MEMO in workflow.memo()
        self._advertised: str | None = workflow.memo_value(OBSERVED_KEY_MEMO, None, type_hint=str)
        self._hold_advertised: str | None = workflow.memo_value(TTL_HOLD_MEMO, None, type_hint=str)
        self._details: str | None = None

    @workflow.signal(name="observe")
    def observe(self, obs: TTLObservation) -> None:
        """The bridge saw the object change (or disappear). Only updates state; ``run`` decides."""
        self.books.observe(obs)

    @workflow.query(name="describe")
    def describe(self) -> dict[str, object]:
        """The latest observation and the pending expiry, for ``batchd describe``."""
        return {
            "observation": self.books.observation.model_dump(mode="json", by_alias=True),
            "expireAt": iso(self.books.expire_at),
            "held": self.books.observation.held_by,
        }

    @workflow.run
    async def run(self, inp: TTLInput) -> TTLResult:
        while True:
            result = await execute(decide.process_ttl(self.books, workflow.now), self)
            if result is not None:
                return result
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(TTLInput(observation=self.books.observation))

    def woken(self) -> bool:
        return self.books.changed

    async def perform(self, step: Any) -> Any:
        if isinstance(step, decide.Advertise):
            return self._advertise(step.observation)
        if isinstance(step, decide.ShowExpiry):
            return self._show_expiry(step)
        return await super().perform(step)

    def _advertise(self, obs: TTLObservation) -> None:
        """Keep the memo at the observation taken in, so a restarting bridge does not send it again."""
        if self._keyed:
            if (key := obs.decision_key()) != self._advertised:
                self._advertised = key
                workflow.upsert_memo({OBSERVED_KEY_MEMO: key})
        elif (obs.resource_version and obs.resource_version != self._advertised
              and workflow.patched(OBSERVED_MEMO_PATCH)):
            self._advertised = obs.resource_version
            workflow.upsert_memo({OBSERVED_MEMO: obs.resource_version})

    def _show_expiry(self, step: decide.ShowExpiry) -> None:
        """The expiry and any hold as search attribute, memo and current details; none once cleanup
        no longer applies."""
        obs, b = step.observation, self.books
        if step.expire_at is None or obs is None:
            workflow.upsert_search_attributes([EXPIRES_AT.value_unset()])
            return
        if step.expire_at != b.expire_at:
            b.expire_at = step.expire_at
            workflow.upsert_search_attributes([EXPIRES_AT.value_set(step.expire_at)])
        if obs.hold_reason != self._hold_advertised:  # never the case in histories from before holds
            self._hold_advertised = obs.hold_reason
            workflow.upsert_memo({TTL_HOLD_MEMO: obs.hold_reason})
        ref = b.observation.ref
        details = f"TTL of {ref.kind} {ref.key()} (uid {ref.uid}) expires {iso(step.expire_at)}" + decide.held(obs)
        if details != self._details:
            self._details = details
            workflow.set_current_details(details)
