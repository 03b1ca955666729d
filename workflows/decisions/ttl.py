"""TTL-after-finished's pass as steps (upstream's ``processTTL``), pure.

Layer: workflows (pure; no Temporal API, no I/O, no clock). The rules themselves (whether
cleanup applies, when the object expires, a hold) live with the observation in
workflows/models/ttl.py, because the deleting activity applies them again to its fresh read. Here
is what one pass does with them: wait, delete, or re-read, as steps for workflows/execute.py;
tests/unit/test_ttl_decisions.py drives the same pass against a fake.

A pass decides from the latest observation; a new one (a signal: the TTL patched, the object
deleted) ends any wait at once and the next pass decides again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from workflows.execute import Call, Log, Steps, Wait
from workflows.models.common import ObserveInput
from workflows.models.ttl import (
    TTL_HOLD_ANNOTATION,
    DeleteExpiredInput,
    DeleteExpiredResult,
    TTLObservation,
    TTLResult,
    delete_expired,
    read_ttl_object,
    time_left,
)
from workflows.times import NEVER, iso


@dataclass(frozen=True, slots=True)
class Advertise:
    """A step: show the observation taken in (its decision key), so a restarting bridge does not
    send it again (WATCH-3)."""

    observation: TTLObservation


@dataclass(frozen=True, slots=True)
class ShowExpiry:
    """A step: show when the object expires (``ExpiresAt``, :data:`NEVER` beyond range) and any
    hold; None: cleanup no longer applies, so no expiry is shown."""

    expire_at: datetime | None
    observation: TTLObservation | None = None


class Books:
    """The latest observation, whether one came since the pass took it, and the expiry shown."""

    def __init__(self, observation: TTLObservation, expire_at: datetime | None) -> None:
        self.observation = observation
        self.changed = False
        self.expire_at = expire_at

    def observe(self, obs: TTLObservation) -> None:
        """A signal's observation; a namesake with another uid is another object, never ours."""
        if obs.ref.uid == self.observation.ref.uid:
            self.observation = obs
            self.changed = True

    def take(self) -> TTLObservation:
        self.changed = False
        return self.observation

    def replace(self, obs: TTLObservation) -> None:
        """A step's fresh read, unless a signal that arrived while it ran is newer."""
        if not self.changed:
            self.observation = obs


def process_ttl(b: Books, clock: Callable[[], datetime]) -> Steps[TTLResult | None]:
    """One pass: the final result, or None to decide again (after a wait, or a fresh read)."""
    obs = b.take()
    if obs.gone:
        return TTLResult(outcome="gone", expire_at=b.expire_at)
    yield Advertise(obs)
    if not obs.needs_cleanup():
        return (yield from _confirm_not_needed(b))
    what = f"{obs.ref.kind} {obs.ref.key()}"
    left = time_left(obs, clock())
    if left is None:
        yield Log("warning", f"finished {what} has no finish time; waiting for a change")
        yield Wait()
        return None
    yield ShowExpiry(left.expire_at or NEVER, obs)
    if left.remaining is None:  # TIME-1: an expiry beyond datetime's range never comes
        yield Wait()
        return None
    if not left.expired:
        if left.finish_in_future:
            yield Log("warning", f"{what} finished in the future (clock skew?); cleanup deferred to {iso(left.expire_at)}")
        # The timer re-arms from scratch on every change: a raised TTL sleeps longer, a lowered
        # one wakes at once, and the next pass decides again either way.
        yield Wait(left.remaining, f"TTL of {what} expires {iso(left.expire_at)}" + held(obs))
        return None
    if obs.held:  # TTL-HOLD: expired, kept until the hold goes (or the object does)
        yield Log("info", f"{what} expired but is held: {obs.hold_reason}")
        yield Wait()
        return None
    return (yield from _clean_up(b, obs))


def _clean_up(b: Books, obs: TTLObservation) -> Steps[TTLResult | None]:
    """At expiry: fresh GET, re-check, delete (TTL-11 to TTL-13)."""
    res: DeleteExpiredResult = yield Call(delete_expired, DeleteExpiredInput(ref=obs.ref),
                                          summary=f"delete {obs.ref.kind} {obs.ref.key()} if expired")
    if res.deleted:
        yield Log("info", f"deleted {obs.ref.kind} {obs.ref.key()}")
        return TTLResult(outcome="deleted", expire_at=res.expire_at, deleted_at=res.deleted_at)
    b.replace(res.observation)
    if res.observation.gone:
        return TTLResult(outcome="gone", expire_at=b.expire_at)
    if not res.observation.needs_cleanup():
        return TTLResult(outcome="not_needed", expire_at=b.expire_at)
    return None  # the fresh copy expires later (TTL raised), is held, or changed: decide again


def _confirm_not_needed(b: Books) -> Steps[TTLResult | None]:
    """An observation said cleanup no longer applies; a stale signal must not end us, so re-read."""
    ref = b.observation.ref
    fresh: TTLObservation = yield Call(read_ttl_object, ObserveInput(ref=ref), summary=f"read {ref.kind} {ref.key()}")
    b.replace(fresh)
    if fresh.needs_cleanup():
        return None
    if b.expire_at is not None:
        yield ShowExpiry(None)
    return TTLResult(outcome="gone" if fresh.gone else "not_needed", expire_at=b.expire_at)


def held(obs: TTLObservation) -> str:
    """The words a timer summary or the current details add for a held object."""
    if obs.held_by is not None:  # FAIL-CLOSED
        return f"; held: {obs.held_by}"
    return f"; held ({TTL_HOLD_ANNOTATION}): {obs.hold or 'no reason given'}" if obs.held else ""
