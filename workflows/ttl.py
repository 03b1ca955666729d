"""TTL-after-finished (KEP-592) as one durable workflow per finished Job or Pod.

Layer: workflows (deterministic). Started and signalled by the bridge's TTL router
(worker/routers.py) with signal-with-start on ``job-ttl/{ns}/{name}/{uid}`` or
``pod-ttl/{ns}/{name}/{uid}``; calls the activities ``read_ttl_object`` and ``delete_expired``,
declared in workflows/models/ttl.py.

The flow mirrors upstream's ``processJob`` / ``processTTL`` with the workqueue's in-memory
``AddAfter`` replaced by a durable timer that survives worker restarts:

1. ``process_ttl``: decide from the latest observation (signal or fresh read) whether the
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

import contextlib
from datetime import datetime

from temporalio import workflow

# Pure, deterministic modules: passed through so the sandbox does not rebuild every pydantic
# model class for each workflow run (that cost dominated a workflow's CPU and memory).
with workflow.unsafe.imports_passed_through():
    from workflows.identity import EXPIRES_AT, OBSERVED_KEY_MEMO, OBSERVED_MEMO, TTL_HOLD_MEMO
    from workflows.models.common import ObserveInput
    from workflows.models.ttl import (
        TTL_HOLD_ANNOTATION,
        DeleteExpiredInput,
        TTLInput,
        TTLObservation,
        TTLResult,
        delete_expired,
        read_ttl_object,
        time_left,
    )
    from workflows.policies import K8S_CALL_TIMEOUT, K8S_RETRY
    from workflows.times import NEVER, iso


#: workflow.patched id of the memo; histories from before it replay without the upserts
OBSERVED_MEMO_PATCH = "ttl-observed-memo"


@workflow.defn(name="TTLAfterFinished")
class TTLAfterFinishedWorkflow:
    """Deletes one Job or Pod once its TTL after finishing has expired."""

    @workflow.init
    def __init__(self, inp: TTLInput) -> None:
        self._obs = inp.observation
        self._changed = False
        # The bridge starts the workflow showing the observation's key, expiry and hold (WATCH-3),
        # so the first pass upserts none of them: each upsert is a billed action. A workflow
        # started before that shows nothing at start and upserts all three, as it always did.
        self._keyed = OBSERVED_KEY_MEMO in workflow.memo()
        self._advertised: str | None = workflow.memo_value(OBSERVED_KEY_MEMO, None, type_hint=str)
        self._expire_at: datetime | None = workflow.info().typed_search_attributes.get(EXPIRES_AT)
        self._hold_advertised: str | None = workflow.memo_value(TTL_HOLD_MEMO, None, type_hint=str)
        self._details: str | None = None

    @workflow.signal(name="observe")
    def observe(self, obs: TTLObservation) -> None:
        """The bridge saw the object change (or disappear). Only updates state; ``run`` decides."""
        if obs.ref.uid != self._obs.ref.uid:
            return  # a namesake with another uid is another object, never ours
        self._obs = obs
        self._changed = True

    @workflow.query(name="describe")
    def describe(self) -> dict[str, object]:
        """The latest observation and the pending expiry, for ``batchd describe``."""
        return {
            "observation": self._obs.model_dump(mode="json", by_alias=False),
            "expireAt": iso(self._expire_at),
        }

    @workflow.run
    async def run(self, inp: TTLInput) -> TTLResult:
        while True:
            result = await self.process_ttl()
            if result is not None:
                return result
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(TTLInput(observation=self._obs))

    async def process_ttl(self) -> TTLResult | None:
        """One pass of the decision; returns the final result, or None to decide again."""
        obs = self._take()
        if obs.gone:
            return TTLResult(outcome="gone", expire_at=self._expire_at)
        self._advertise(obs)
        if not obs.needs_cleanup():
            return await self.confirm_not_needed()
        left = time_left(obs, workflow.now())
        if left is None:
            workflow.logger.warning(
                "finished %s %s has no finish time; waiting for a change", obs.ref.kind, obs.ref.key()
            )
            await workflow.wait_condition(lambda: self._changed)
            return None
        self._set_expiry(left.expire_at, obs)
        if left.remaining is None:  # TIME-1: an expiry beyond datetime's range never comes
            await workflow.wait_condition(lambda: self._changed)
            return None
        if not left.expired:
            if left.finish_in_future:
                workflow.logger.warning(
                    "%s %s finished in the future (clock skew?); cleanup deferred to %s",
                    obs.ref.kind, obs.ref.key(), iso(left.expire_at),
                )
            # The timer re-arms from scratch on every change: a raised TTL sleeps longer, a
            # lowered one wakes at once, and the loop decides again either way.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._changed,
                    timeout=left.remaining,
                    timeout_summary=f"TTL of {obs.ref.kind} {obs.ref.key()} expires {iso(left.expire_at)}"
                                    + _held(obs),
                )
            return None
        if obs.held:  # TTL-HOLD: expired, kept until the hold goes (or the object does)
            workflow.logger.info("%s %s expired but is held: %s", obs.ref.kind, obs.ref.key(), obs.hold)
            await workflow.wait_condition(lambda: self._changed)
            return None
        return await self.clean_up(obs)

    async def clean_up(self, obs: TTLObservation) -> TTLResult | None:
        """At expiry: fresh GET, re-check, delete (TTL-11 to TTL-13)."""
        res = await workflow.execute_local_activity(
            delete_expired,
            DeleteExpiredInput(ref=obs.ref),
            start_to_close_timeout=K8S_CALL_TIMEOUT,
            retry_policy=K8S_RETRY,
            summary=f"delete {obs.ref.kind} {obs.ref.key()} if expired",
        )
        if res.deleted:
            workflow.logger.info("deleted %s %s", obs.ref.kind, obs.ref.key())
            return TTLResult(outcome="deleted", expire_at=res.expire_at, deleted_at=res.deleted_at)
        self._replace(res.observation)
        if res.observation.gone:
            return TTLResult(outcome="gone", expire_at=self._expire_at)
        if not res.observation.needs_cleanup():
            return TTLResult(outcome="not_needed", expire_at=self._expire_at)
        return None  # the fresh copy expires later (TTL raised), is held, or changed: decide again

    async def confirm_not_needed(self) -> TTLResult | None:
        """A signal said cleanup no longer applies; a stale signal must not end us, so re-read."""
        fresh = await workflow.execute_local_activity(
            read_ttl_object,
            ObserveInput(ref=self._obs.ref),
            start_to_close_timeout=K8S_CALL_TIMEOUT,
            retry_policy=K8S_RETRY,
            summary=f"read {self._obs.ref.kind} {self._obs.ref.key()}",
        )
        self._replace(fresh)
        if fresh.needs_cleanup():
            return None
        if self._expire_at is not None:
            workflow.upsert_search_attributes([EXPIRES_AT.value_unset()])
        return TTLResult(outcome="gone" if fresh.gone else "not_needed", expire_at=self._expire_at)

    def _take(self) -> TTLObservation:
        self._changed = False
        return self._obs

    def _replace(self, obs: TTLObservation) -> None:
        # A signal that arrived while the activity ran is newer than the activity's read.
        if not self._changed:
            self._obs = obs

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

    def _set_expiry(self, expire_at: datetime | None, obs: TTLObservation) -> None:
        """Advertise the expiry and any hold (search attribute, memo, current details); None: it never comes."""
        expire_at = expire_at or NEVER  # sorts last, and no ``ExpiresAt < …`` query matches it
        if expire_at != self._expire_at:
            self._expire_at = expire_at
            workflow.upsert_search_attributes([EXPIRES_AT.value_set(expire_at)])
        if obs.hold != self._hold_advertised:  # never the case in histories from before holds
            self._hold_advertised = obs.hold
            workflow.upsert_memo({TTL_HOLD_MEMO: obs.hold})
        ref = self._obs.ref
        details = f"TTL of {ref.kind} {ref.key()} (uid {ref.uid}) expires {iso(expire_at)}" + _held(obs)
        if details != self._details:
            self._details = details
            workflow.set_current_details(details)


def _held(obs: TTLObservation) -> str:
    """The words a timer summary or the current details add for a held object."""
    return f"; held ({TTL_HOLD_ANNOTATION}): {obs.hold or 'no reason given'}" if obs.held else ""
