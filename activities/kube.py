"""A small generic Kubernetes client over the official ``kubernetes`` ApiClient.

Layer: activities. Used by the activities (activities/ttl.py, ...) and by the bridge's informers
(worker/bridge.py). It speaks plain JSON dicts (parsed into the subset models of
workflows/models.py by callers), puts a timeout on every request, and raises only the
:mod:`activities.errors` taxonomy. Authentication, TLS and kubeconfig handling stay with the
official client: this module only builds paths and reads bodies.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from opentelemetry import trace
from temporalio import activity

from activities.errors import KubeError, NotFound, Unreachable, from_response, temporal_errors
from workflows.models import EventInput, ObjectRef

_tracer = trace.get_tracer("batchd.kube")


def prestarted_pool(size: int, name: str) -> ThreadPoolExecutor:
    """A thread pool whose threads all exist before any activity runs.

    Activities then only hand work to idle threads and never start a thread themselves: a full
    test run once hung in ``Thread.start`` called from an activity thread, with the executor's
    global lock held, stalling every later ``asyncio.to_thread``.
    """
    pool = ThreadPoolExecutor(size, thread_name_prefix=name)
    barrier = threading.Barrier(size + 1)
    for _ in range(size):
        pool.submit(barrier.wait)
    barrier.wait()
    return pool


class Clock(Protocol):
    """Source of the current time; tests inject a fixed or stepping one."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real UTC clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API."""

    prefix: str  # "/api/v1" or "/apis/batch/v1"
    plural: str
    namespaced: bool = True


RESOURCES: dict[str, Resource] = {
    "Job": Resource("/apis/batch/v1", "jobs"),
    "CronJob": Resource("/apis/batch/v1", "cronjobs"),
    "Pod": Resource("/api/v1", "pods"),
    "Event": Resource("/api/v1", "events"),
    "Namespace": Resource("/api/v1", "namespaces", namespaced=False),
}

#: (connect, read) seconds for ordinary requests; watches set their own read timeout.
DEFAULT_TIMEOUT = (5.0, 20.0)


def resource_path(kind: str, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
    """REST path of a collection (``name`` None) or an object; ``namespace`` None means all namespaces."""
    res = RESOURCES[kind]
    path = res.prefix
    if res.namespaced and namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{res.plural}"
    if name is not None:
        path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
    return path


class Kube:
    """JSON-in, JSON-out Kubernetes requests with timeouts and classified errors."""

    def __init__(self, api_client: ApiClient, *, timeout: tuple[float, float] = DEFAULT_TIMEOUT) -> None:
        self.api_client = api_client
        self.timeout = timeout

    # -- transport -----------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ) -> Any:
        with _tracer.start_as_current_span(f"k8s {method}", kind=trace.SpanKind.CLIENT,
                                           attributes={"http.request.method": method, "url.path": path}) as span:
            resp = self._send_once(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
            span.set_attribute("http.response.status_code", resp.status)
            return resp

    def _send_once(self, method: str, path: str, *, query: dict[str, Any] | None, body: Any, content_type: str,
                   timeout: Any) -> Any:
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            _, url, hdrs, ser_body, post = self.api_client.param_serialize(
                method, path, query_params=params, header_params=headers, body=body, auth_settings=["BearerToken"]
            )
            resp = self.api_client.call_api(method, url, hdrs, ser_body, post, _request_timeout=timeout or self.timeout)
        except ApiException as exc:  # raised by the REST layer for some failures
            raise from_response(exc.status or 0, exc.body, exc.headers) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(0, "Unreachable", f"{type(exc).__name__}: {exc}"[:300]) from None
        if not 200 <= resp.status <= 299:
            raise from_response(resp.status, resp.read(), resp.headers)
        return resp

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        """Send one request and return the decoded JSON body."""
        resp = self._send(method, path, **kw)
        data = resp.read()
        try:
            out: dict[str, Any] = json.loads(data) if data else {}
        except ValueError:
            raise KubeError(resp.status, "BadResponse", "response is not JSON") from None
        return out

    # -- verbs ---------------------------------------------------------------------------

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """GET one object; ``None`` when it does not exist."""
        try:
            return self.request("GET", resource_path(kind, namespace, name))
        except NotFound:
            return None

    def get_instance(self, kind: str, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        """GET one object instance: ``None`` when the name is gone or now belongs to another uid."""
        obj = self.get(kind, namespace, name)
        return obj if obj is not None and obj["metadata"].get("uid") == uid else None

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None, limit: int | None = None, continue_: str | None = None) -> dict[str, Any]:
        """One page of a list."""
        return self.request("GET", resource_path(kind, namespace), query={
            "labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit, "continue": continue_,
        })

    def create(self, kind: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST a new object."""
        return self.request("POST", resource_path(kind, namespace), body=body)

    def patch(self, kind: str, namespace: str, name: str, patch: Any, *, subresource: str | None = None,
              patch_type: str = "application/merge-patch+json") -> dict[str, Any]:
        """PATCH an object (JSON merge patch unless ``patch_type`` says otherwise)."""
        return self.request("PATCH", resource_path(kind, namespace, name, subresource), body=patch, content_type=patch_type)

    def delete(self, kind: str, namespace: str, name: str, *, uid: str | None = None,
               propagation: str | None = None, grace_period_seconds: int | None = None) -> bool:
        """DELETE with an optional uid precondition; ``False`` if it was already gone (404)."""
        opts: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if uid:
            opts["preconditions"] = {"uid": uid}
        if propagation:
            opts["propagationPolicy"] = propagation
        if grace_period_seconds is not None:
            opts["gracePeriodSeconds"] = grace_period_seconds
        try:
            self.request("DELETE", resource_path(kind, namespace, name), body=opts)
        except NotFound:
            return False
        return True

    def watch(self, kind: str, namespace: str | None, *, resource_version: str, label_selector: str | None = None,
              timeout_seconds: int = 300) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type", "object"}``) from ``resource_version`` with bookmarks.

        ERROR events are yielded as they come (a 410 arrives as one); the caller relists.
        """
        resp = self._send("GET", resource_path(kind, namespace), query={
            "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
            "labelSelector": label_selector, "timeoutSeconds": timeout_seconds,
        }, timeout=(self.timeout[0], timeout_seconds + 30))
        raw = resp.response
        buf = b""
        try:
            for chunk in raw.stream(64 * 1024, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(0, "Unreachable", f"watch broken: {type(exc).__name__}") from None
        finally:
            raw.release_conn()

    # -- events --------------------------------------------------------------------------

    def record_event(self, ref: ObjectRef, *, type: str, reason: str, message: str, component: str,
                     now: datetime, api_version: str | None = None) -> None:
        """Create a core/v1 Event on ``ref``, or bump the count of the identical one.

        The name is derived from the object, reason and message, so a retried or replayed
        recording aggregates into one Event (as the upstream recorder's correlator does) instead
        of creating duplicates.
        """
        digest = hashlib.sha256(f"{ref.uid}|{type}|{reason}|{message}".encode()).hexdigest()[:16]
        name = f"{ref.name}.{digest}"
        stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ref.namespace},
            "involvedObject": {
                "kind": ref.kind, "namespace": ref.namespace, "name": ref.name, "uid": ref.uid,
                "apiVersion": api_version or ("batch/v1" if ref.kind in ("Job", "CronJob") else "v1"),
            },
            "type": type, "reason": reason, "message": message,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            self.create("Event", ref.namespace, body)
            return
        except KubeError as err:
            if err.reason != "AlreadyExists":
                raise
        existing = self.get("Event", ref.namespace, name) or {}
        self.patch("Event", ref.namespace, name, {"count": int(existing.get("count") or 1) + 1, "lastTimestamp": stamp})


class EventActivities:
    """The ``record_event`` activity every workflow uses for its Kubernetes Events."""

    def __init__(self, kube: Kube, clock: Clock | None = None) -> None:
        self.kube = kube
        self.clock = clock or SystemClock()

    @activity.defn(name="record_event")
    @temporal_errors
    def record_event(self, inp: EventInput) -> None:
        """Record (or aggregate) an Event on ``inp.ref``."""
        self.kube.record_event(inp.ref, type=inp.type, reason=inp.reason, message=inp.message,
                               component=inp.component, now=self.clock.now())
