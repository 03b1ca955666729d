"""A small generic Kubernetes client: JSON over HTTP/1.1 keep-alive connections.

Used by the activities, the bridge's informers (worker/informer.py), the lease and the CLI. It
speaks plain JSON dicts (parsed into the subset models of workflows/models/ by callers), puts a
timeout on every request, and raises only the :mod:`kube.errors` taxonomy.

Where to connect, TLS material, proxy and credentials come from an :class:`Access`
(kube/config.py: the kubeconfig or the Pod's service account, tokens renewed as they expire or
rotate); the requests themselves go through :mod:`http.client`, which costs less CPU a request
than the official client, and a burst of creations is bound by the worker's CPU
(docs/benchmarks.md).
"""

from __future__ import annotations

import base64
import collections
import hashlib
import http.client
import ipaddress
import logging
import select
import ssl
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import unquote, urlencode, urlsplit
from urllib.request import getproxies

import orjson
from opentelemetry import trace

from kube.config import Access, KubeConfigError
from kube.errors import KubeError, NotFound, Unreachable, from_response
from workflows.models.common import EventInput, ObjectRef
from workflows.times import rfc3339

_tracer = trace.get_tracer("batchd.kube")


def prestarted_pool(size: int, name: str) -> ThreadPoolExecutor:
    """A thread pool whose threads all exist before any activity runs.

    Activities then only hand work to idle threads and never start a thread themselves: a
    ``Thread.start`` called from an activity thread can hang with the executor's global lock held,
    stalling every later ``asyncio.to_thread``.
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
    "Lease": Resource("/apis/coordination.k8s.io/v1", "leases"),
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


_MAX_HEAD_LINE = 65536  # http.client's limits on a response head: a line, and the header lines
_MAX_HEADERS = 100


class _Response(http.client.HTTPResponse):
    """http.client's response, with the head read without the ``email`` package.

    http.client parses the header lines with the email package's feed parser, a large share of
    the client's CPU per request, and a burst of Job creations is bound by the worker's CPU
    (docs/benchmarks.md). The lines are plain ``name: value`` (RFC 9112 forbids folding; a folded
    line is still joined to the one before), read into the same :class:`HTTPMessage`.
    """

    def begin(self) -> None:
        if self.headers is not None:
            return
        version, status, reason = self._read_status()
        while status == http.client.CONTINUE:  # an interim response: its head, then the real one
            self._read_head()
            version, status, reason = self._read_status()
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = self._read_head()
        self.chunked = (self.headers.get("transfer-encoding") or "").lower() == "chunked"
        self.chunk_left = None
        self.will_close = self._check_close()
        length = self.headers.get("content-length")
        self.length = int(length) if length and length.isdecimal() and not self.chunked else None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200 \
                or self._method == "HEAD":
            self.length = 0
        if self.length is None and not self.chunked:
            self.will_close = True  # the body ends when the server closes

    def _read_head(self) -> http.client.HTTPMessage:
        fields: list[list[str]] = []
        for _ in range(_MAX_HEADERS + 1):
            line = self.fp.readline(_MAX_HEAD_LINE + 1)
            if len(line) > _MAX_HEAD_LINE:
                raise http.client.LineTooLong("header line")
            text = line.decode("iso-8859-1")
            if text in ("\r\n", "\n", ""):
                head = http.client.HTTPMessage()
                for name, value in fields:
                    head.set_raw(name, value)
                return head
            if text[0] in " \t" and fields:
                fields[-1][1] += " " + text.strip()
            else:
                name, _, value = text.partition(":")
                fields.append([name, value.strip()])
        raise http.client.HTTPException(f"got more than {_MAX_HEADERS} headers")


class _Connection(http.client.HTTPConnection):
    """One connection to the API server: TCP, then the proxy's CONNECT tunnel if any, then TLS."""

    response_class = _Response

    def __init__(self, host: str, port: int, *, timeout: float, context: ssl.SSLContext | None,
                 server_hostname: str) -> None:
        super().__init__(host, port, timeout=timeout)
        self.context, self.server_hostname = context, server_hostname
        self._head: list[bytes] | None = None
        self.readable = select.poll()  # the socket's, made once it connects; asked before each reuse

    def connect(self) -> None:
        super().connect()
        if self.context is not None:
            self.sock = self.context.wrap_socket(self.sock, server_hostname=self.server_hostname)
        self.readable = select.poll()
        self.readable.register(self.sock, select.POLLIN)

    def endheaders(self, message_body: Any = None, *, encode_chunked: bool = False) -> None:
        """Send the head and a bytes body in one write, where http.client makes two.

        Two writes are two segments (the socket has no Nagle delay) and the API server reads the
        head, then wakes again for the body; in a burst of creations that is work on both sides.
        """
        if not isinstance(message_body, bytes) or encode_chunked:
            super().endheaders(message_body, encode_chunked=encode_chunked)
            return
        self._head = []
        try:
            super().endheaders()
            head = b"".join(self._head)
        finally:
            self._head = None
        self.send(head + message_body)

    def send(self, data: Any) -> None:
        if self._head is not None:
            self._head.append(data)
        else:
            super().send(data)


@dataclass(frozen=True)
class Endpoint:
    """Where and how to connect, read once from an :class:`Access`."""

    host: str
    port: int
    base_path: str  # the server URL's own path, e.g. behind an API gateway
    context: ssl.SSLContext | None  # None: plain HTTP
    server_hostname: str  # TLS: the name sent (SNI) and verified
    proxy: tuple[str, int] | None = None
    proxy_headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, access: Access, environ_proxies: dict[str, str] | None = None) -> Endpoint:
        """``environ_proxies``: as :func:`urllib.request.getproxies` reads them (the default)."""
        url = urlsplit(access.server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"unsupported Kubernetes API server URL {access.server!r}")
        https = url.scheme == "https"
        host, port = url.hostname, url.port or (443 if https else 80)
        proxy, proxy_headers = None, {}
        proxy_url = access.proxy or _environment_proxy(url.scheme, url.netloc, environ_proxies)
        if proxy_url:
            purl = urlsplit(proxy_url)
            if purl.scheme != "http" or not purl.hostname:  # SOCKS and https:// proxies too
                raise ValueError(f"unsupported proxy {proxy_url!r}: only http:// proxies are")
            proxy = (purl.hostname, purl.port or 80)
            if purl.username is not None:
                creds = f"{unquote(purl.username)}:{unquote(purl.password or '')}".encode()
                proxy_headers["Proxy-Authorization"] = "Basic " + base64.b64encode(creds).decode()
        return cls(host=host, port=port, base_path=url.path.rstrip("/"),
                   context=_ssl_context(access) if https else None,
                   server_hostname=access.tls_server_name or host,
                   proxy=proxy, proxy_headers=tuple(proxy_headers.items()))

    def connect(self, timeout: float) -> _Connection:
        host, port = self.proxy or (self.host, self.port)
        conn = _Connection(host, port, timeout=timeout, context=self.context, server_hostname=self.server_hostname)
        if self.proxy is not None and self.context is not None:
            conn.set_tunnel(self.host, self.port, headers=dict(self.proxy_headers))
        conn.connect()
        return conn

    @property
    def forwarded(self) -> bool:
        """Plain HTTP through a proxy: requests name the server and carry the proxy's headers."""
        return self.proxy is not None and self.context is None

    def target(self, path: str) -> str:
        """The request target: origin-form, or absolute-form when forwarded."""
        if self.forwarded:
            return f"http://{self.host}:{self.port}{self.base_path}{path}"
        return self.base_path + path


def _environment_proxy(scheme: str, netloc: str, proxies: dict[str, str] | None) -> str | None:
    """The environment's proxy for the server (``HTTPS_PROXY``/``HTTP_PROXY``, else ``ALL_PROXY``),
    unless ``NO_PROXY`` names it. A kubeconfig's ``proxy-url`` is used whatever ``NO_PROXY`` says,
    as kubectl does."""
    proxies = getproxies() if proxies is None else proxies
    proxy = proxies.get(scheme) or proxies.get("all")
    return None if not proxy or _bypasses(netloc, proxies.get("no", "")) else proxy


def _bypasses(netloc: str, no_proxy: str) -> bool:
    """``NO_PROXY``: ``*``, a domain (and its subdomains), a host with its port, an address or a CIDR range."""
    host = urlsplit(f"//{netloc}").hostname or ""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry == "*":
            return True
        if not entry:
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
        entry = entry.lstrip(".")
        if any(name == entry or name.endswith("." + entry) for name in (host, netloc.lower())):
            return True
    return False


def _ssl_context(access: Access) -> ssl.SSLContext:
    """TLS as kubectl applies it: the kubeconfig's CA (else the system's), its client certificate,
    and no verification at all with ``insecure-skip-tls-verify``."""
    ctx = ssl.create_default_context(cafile=access.ca_file)
    if access.cert_file:
        ctx.load_cert_chain(access.cert_file, access.key_file)
    if not access.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})
_CLOSED_UNDER_US = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def _unreachable(exc: Exception, what: str = "") -> Unreachable:
    return Unreachable(0, "Unreachable", f"{what}{type(exc).__name__}: {exc}"[:300])


def _dropped(conn: _Connection) -> bool:
    """An idle kept connection the server has closed (or sent something unasked on) is readable.

    ``poll``, not ``select``: a busy process's descriptors can pass select's limit of 1,024.
    """
    return conn.sock is None or bool(conn.readable.poll(0))


class Kube:
    """JSON-in, JSON-out Kubernetes requests with timeouts and classified errors.

    Connections are kept and shared: a request takes an idle one (or opens one) and puts it back
    once the response is read, so there are at most as many as requests in flight.
    """

    def __init__(self, access: Access, *, timeout: tuple[float, float] = DEFAULT_TIMEOUT) -> None:
        self.access = access
        self.endpoint = Endpoint.of(access)
        self.timeout = timeout
        self._idle: collections.deque[_Connection] = collections.deque()  # append/pop are atomic

    # -- transport -----------------------------------------------------------------------

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "batchd"}
        if content_type:
            headers["Content-Type"] = content_type
        if self.endpoint.forwarded:
            headers.update(self.endpoint.proxy_headers)
        # Asked per request: exec-plugin and OIDC tokens are renewed as they expire, token files re-read.
        try:
            authorization = self.access.authorization()
        except KubeConfigError as err:  # a plugin or provider failing now may answer the retry
            raise _unreachable(err, "renewing the credentials: ") from None
        if authorization:
            headers["Authorization"] = authorization
        return headers

    def _open(self, method: str, path: str, query: dict[str, Any] | None, body: Any, content_type: str,
              timeout: tuple[float, float] | None, *, keep: bool) -> tuple[_Connection, http.client.HTTPResponse]:
        """Send one request and read the response head; the caller reads (or streams) the body."""
        connect_timeout, read_timeout = timeout or self.timeout
        target = self.endpoint.target(path)
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        if params:
            target += "?" + urlencode(params)
        data = None if body is None else orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
        headers = self._headers(content_type if data is not None else None)
        for attempt in (1, 2):
            conn = self._idle_connection() if keep else None
            reused = conn is not None
            try:
                if conn is None:
                    conn = self.endpoint.connect(connect_timeout)
                assert conn.sock is not None
                conn.sock.settimeout(read_timeout)
                conn.request(method, target, body=data, headers=headers)
                return conn, conn.getresponse()
            except (http.client.HTTPException, OSError) as exc:
                if conn is not None:
                    conn.close()
                # A kept connection the server closed just as we sent: safe to send again on a new
                # one when the request is idempotent (Go's net/http, and so client-go, do the same).
                if attempt == 1 and reused and method in _IDEMPOTENT and isinstance(exc, _CLOSED_UNDER_US):
                    continue
                raise _unreachable(exc) from None
        raise AssertionError("unreachable")

    def _idle_connection(self) -> _Connection | None:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return None
            if not _dropped(conn):
                return conn
            conn.close()

    def _send(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
              content_type: str = "application/json", timeout: tuple[float, float] | None = None) -> bytes:
        """One request on a kept connection; the body of a 2xx response, else the classified error.

        A span records it when a tracer provider is installed; without one the span would be a no-op
        that still costs a noticeable share of the request's own CPU (docs/benchmarks.md).
        """
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            status, data, headers = self._exchange(method, path, query, body, content_type, timeout)
        else:
            with _tracer.start_as_current_span(f"k8s {method}", kind=trace.SpanKind.CLIENT,
                                               attributes={"http.request.method": method, "url.path": path}) as span:
                status, data, headers = self._exchange(method, path, query, body, content_type, timeout)
                span.set_attribute("http.response.status_code", status)
        if not 200 <= status <= 299:
            raise from_response(status, data, headers)
        return data

    def _exchange(self, method: str, path: str, query: dict[str, Any] | None, body: Any, content_type: str,
                  timeout: tuple[float, float] | None) -> tuple[int, bytes, http.client.HTTPMessage]:
        conn, resp = self._open(method, path, query, body, content_type, timeout, keep=True)
        try:
            data = resp.read()
        except (http.client.HTTPException, OSError) as exc:
            conn.close()
            raise _unreachable(exc) from None
        if resp.will_close:
            conn.close()
        else:
            self._idle.append(conn)
        return resp.status, data, resp.headers

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        """Send one request and return the decoded JSON body."""
        data = self._send(method, path, **kw)
        try:
            out: dict[str, Any] = orjson.loads(data) if data else {}
        except ValueError:
            raise KubeError(0, "BadResponse", "response is not JSON") from None
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

    def replace(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object; its ``metadata.resourceVersion`` makes it a compare-and-swap (:class:`Conflict`)."""
        return self.request("PUT", resource_path(kind, namespace, name), body=body)

    def patch(self, kind: str, namespace: str, name: str, patch: Any, *, subresource: str | None = None,
              patch_type: str = "application/merge-patch+json") -> dict[str, Any]:
        """PATCH an object (JSON merge patch unless ``patch_type`` says otherwise)."""
        return self.request("PATCH", resource_path(kind, namespace, name, subresource), body=patch, content_type=patch_type)

    def delete(self, kind: str, namespace: str, name: str, *, uid: str | None = None,
               resource_version: str | None = None, propagation: str | None = None,
               grace_period_seconds: int | None = None) -> dict[str, Any] | None:
        """DELETE with optional uid and resourceVersion preconditions: the API's answer (the object,
        now being deleted or as it was removed, or a ``Status``); ``None`` if it was already gone (404).

        A failed precondition is a :class:`Conflict`.
        """
        opts: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            opts["preconditions"] = preconditions
        if propagation:
            opts["propagationPolicy"] = propagation
        if grace_period_seconds is not None:
            opts["gracePeriodSeconds"] = grace_period_seconds
        try:
            return self.request("DELETE", resource_path(kind, namespace, name), body=opts) or {}
        except NotFound:
            return None

    def watch(self, kind: str, namespace: str | None, *, resource_version: str, label_selector: str | None = None,
              field_selector: str | None = None, timeout_seconds: int = 300) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type", "object"}``) from ``resource_version`` with bookmarks.

        ERROR events are yielded as they come (a 410 arrives as one); the caller relists. A watch
        has a connection of its own, closed when the stream ends.
        """
        conn, resp = self._open("GET", resource_path(kind, namespace), {
            "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
            "labelSelector": label_selector, "fieldSelector": field_selector, "timeoutSeconds": timeout_seconds,
        }, None, "", (self.timeout[0], timeout_seconds + 30), keep=False)
        try:
            if not 200 <= resp.status <= 299:
                raise from_response(resp.status, resp.read(), resp.headers)
            while line := resp.readline():
                if line.strip():
                    yield orjson.loads(line)
        except (http.client.HTTPException, OSError) as exc:
            raise _unreachable(exc, "watch broken: ") from None
        finally:
            conn.close()

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
        stamp = rfc3339(now)
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


def try_record_event(kube: Kube, ev: EventInput, *, now: datetime, log: logging.Logger | logging.LoggerAdapter[Any]) -> bool:
    """Record ``ev`` outside a workflow (the bridge, an activity, the watchdog), once, best effort.

    A failure is a warning in ``log``, never an error: an Event is never worth failing what caused
    it. Whether it was recorded. (A workflow records through the retried ``record_event`` activity.)
    """
    try:
        kube.record_event(ev.ref, type=ev.type, reason=ev.reason, message=ev.message, component=ev.component, now=now)
    except KubeError as err:
        log.warning("could not record %s Event on %s %s: %s", ev.reason, ev.ref.kind, ev.ref.key(), err)
        return False
    return True
