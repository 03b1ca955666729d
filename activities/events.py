"""The ``record_event`` activity every workflow uses for its Kubernetes Events.

Layer: activities.
"""

from __future__ import annotations

from activities.contract import implements
from activities.errors import temporal_errors
from kube.client import Clock, Kube, SystemClock
from workflows.models import common as contract
from workflows.models.common import EventInput


class EventActivities:
    """The ``record_event`` activity every workflow uses for its Kubernetes Events."""

    def __init__(self, kube: Kube, clock: Clock | None = None) -> None:
        self.kube = kube
        self.clock = clock or SystemClock()

    @implements(contract.record_event)
    @temporal_errors
    def record_event(self, inp: EventInput) -> None:
        """Record (or aggregate) an Event on ``inp.ref``."""
        self.kube.record_event(inp.ref, type=inp.type, reason=inp.reason, message=inp.message,
                               component=inp.component, now=self.clock.now())
