"""The activities every workflow uses to tell the world: ``record_event`` (Kubernetes Events) and
``deliver_cloudevent`` (NOTIFY-EVENTS: CloudEvents to the operator's sink).

Layer: activities.
"""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

import orjson
from temporalio.exceptions import ApplicationError

from activities.contract import implements
from activities.errors import temporal_errors
from kube.client import Clock, Kube, SystemClock
from workflows.models import common as contract
from workflows.models.common import CloudEvent, EventInput


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


class CloudEventActivities:
    """NOTIFY-EVENTS: POSTs CloudEvents to ``sink``, the operator's URL (``--cloudevents-sink``); never a
    URL from a user's object."""

    def __init__(self, sink: str | None, timeout: float = 10.0) -> None:
        self.sink, self.timeout = sink, timeout

    @implements(contract.deliver_cloudevent)
    def deliver(self, inp: CloudEvent) -> None:
        """One POST in structured mode. 2xx: delivered. A refusal a retry cannot change (4xx but 408
        and 429) fails for good; anything else (unreachable, 5xx, 429) is retried by the policy."""
        if not self.sink:
            return
        url = urlsplit(self.sink)
        conn_type = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        conn = conn_type(url.hostname or "", url.port, timeout=self.timeout)
        try:
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            conn.request("POST", path, body=orjson.dumps(inp.body()),
                         headers={"Content-Type": "application/cloudevents+json; charset=utf-8"})
            resp = conn.getresponse()
            detail = resp.read(500).decode(errors="replace")
        except (OSError, http.client.HTTPException) as err:
            raise ApplicationError(f"CloudEvent sink unreachable: {err}", type="SinkUnreachable") from None
        finally:
            conn.close()
        if 200 <= resp.status < 300:
            return
        permanent = 400 <= resp.status < 500 and resp.status not in (408, 429)
        raise ApplicationError(f"CloudEvent sink answered {resp.status}: {detail}", type="SinkRefused",
                               non_retryable=permanent)
