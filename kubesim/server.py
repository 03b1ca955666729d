"""kubesim's HTTP layer: routing, discovery, verbs, Status errors, fault injection, audit,
admin endpoints and watch streaming.

Layer: kubesim (imports nothing from batchd). Built and served by :class:`kubesim.KubeSim`;
all handlers run on one event loop together with the garbage collector and the kubelet, so
store access needs no locks.

A request to ``/api`` or ``/apis`` is parsed into a :class:`Route` (resource, namespace,
name, subresource, RBAC verb), recorded in the audit, possibly faulted, then dispatched. Every
:class:`~kubesim.errors.ApiError` becomes its Status response in :meth:`ApiServer.handle`.
Writes honour ``fieldValidation`` (Strict rejects unknown fields, Warn answers with ``Warning``
headers, Ignore or absent drops them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import secrets
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import yaml
from aiohttp import web

from kubesim import apply as ssa
from kubesim import logs, openapi_v2, podadmission, protobuf, resources, schema, strategy, tables
from kubesim import patch as patches
from kubesim.admission import AdmissionPlugin
from kubesim.codec import dumps, loads
from kubesim.errors import (
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    invalid,
    no_method,
    no_resource,
    not_found,
)
from kubesim.gc import NAMESPACES, PODS, Lifecycle, is_deleting
from kubesim.resources import Resource
from kubesim.store import (
    CLOSE,
    Clock,
    Filter,
    Obj,
    StorageKey,
    Store,
    WatchEvent,
    parse_field_selector,
    parse_label_selector,
    timestamp,
)

log = logging.getLogger(__name__)

JSON = "application/json"
# What a create or update body may be, as the API server lists them (the first three) plus the
# aliases clients send.
BODY_MEDIA_TYPES = (JSON, "application/yaml", protobuf.MEDIA_TYPE, "application/x-yaml", "text/yaml")
GIT_VERSION = "v1.32.0"
VERSION_INFO = {
    "major": "1", "minor": "32", "gitVersion": GIT_VERSION, "gitCommit": "kubesim",
    "gitTreeState": "clean", "buildDate": "2024-12-11T00:00:00Z", "goVersion": "go1.23.3",
    "compiler": "gc", "platform": "linux/amd64",
}
DENY_CREATE_ANNOTATION = "kubesim.batchd.io/deny-create"
# kube-apiserver's generateName suffix alphabet (no vowels, no confusable digits).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# DELETE returns the object itself for these (ReturnDeletedObject in their registries).
RETURNS_DELETED_OBJECT = frozenset({("", "pods"), ("", "namespaces")})
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: how long a read at a resourceVersion the store has not reached waits before it is refused
RV_WAIT_SECONDS = 3.0
#: the Go package of each group's internal types, as conversion errors name them
INTERNAL_PACKAGES = {"": "core", "events.k8s.io": "core", "coordination.k8s.io": "coordination"}
JOB_DELETE_WARNING = ("child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
                      "to remove them or set propagationPolicy=Orphan to suppress this warning")


class AuditKey(NamedTuple):
    """One audited request shape, in RBAC terms."""

    verb: str
    group: str
    resource: str
    subresource: str


@dataclass
class Faults:
    """Injected failures. Set from any thread; read by the request handler."""

    error_rate: float = 0.0
    codes: tuple[int, ...] = (500,)
    retry_after_seconds: int = 1
    latency_seconds: float = 0.0

    def set(
        self,
        error_rate: float = 0.0,
        codes: tuple[int, ...] | list[int] = (500, 429),
        retry_after_seconds: int = 1,
        latency_seconds: float = 0.0,
    ) -> None:
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError("error_rate must be within [0, 1]")
        if not codes or any(c not in (429, 500, 502, 503, 504) for c in codes):
            raise ValueError("codes must be among 429, 500, 502, 503, 504")
        self.codes = tuple(int(c) for c in codes)
        self.retry_after_seconds = int(retry_after_seconds)
        self.latency_seconds = float(latency_seconds)
        self.error_rate = float(error_rate)

    def clear(self) -> None:
        self.error_rate = 0.0
        self.latency_seconds = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"error_rate": self.error_rate, "codes": list(self.codes),
                "retry_after_seconds": self.retry_after_seconds, "latency_seconds": self.latency_seconds}

    def error(self) -> ApiError | None:
        """The fault to answer with for this request, if any."""
        if self.error_rate <= 0.0 or random.random() >= self.error_rate:
            return None
        code = random.choice(self.codes)
        if code == 429:
            return ApiError(429, "TooManyRequests",
                            "the server has received too many requests and has asked us to try again later",
                            retry_after_seconds=self.retry_after_seconds)
        reasons = {500: "InternalError", 502: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
        return ApiError(code, reasons[code], "Internal error occurred: kubesim injected fault")


@dataclass(frozen=True)
class Route:
    """A parsed resource request."""

    res: Resource
    namespace: str | None  # None: all namespaces (or cluster-scoped)
    name: str | None
    subresource: str | None
    verb: str


class _ProtobufBody(dict[str, Any]):
    """A protobuf body's object, with the paths of the messages that carried fields kubesim's
    wire table does not describe (JSON bodies keep unknown fields in the object itself)."""

    def __init__(self, obj: dict[str, Any], unknown: tuple[str, ...]) -> None:
        super().__init__(obj)
        self.unknown = unknown


class _DryRunWrites:
    """Store writes that keep nothing: a server-side dry run of a delete goes through every step
    (the delete rules, finalizers, grace periods), stores nothing, sends no watch event and
    consumes no resourceVersion."""

    def replace(self, key: StorageKey, obj: Obj) -> Obj:
        return obj

    def remove(self, key: StorageKey, obj: Obj) -> Obj:
        return obj


class _Bookmark:
    """Queued into a watcher to send a BOOKMARK at the rv current when it was queued."""

    __slots__ = ("rv",)

    def __init__(self, rv: int) -> None:
        self.rv = rv


def _dry_run(request: web.BaseRequest, options_kind: str) -> bool:
    """Whether the request asks for a server-side dry run (``dryRun=All``; other values are
    refused as the API server's options validation refuses them)."""
    values = request.query.getall("dryRun", [])
    _check_dry_run(values, options_kind)
    return bool(values)


def _check_dry_run(values: list[str], options_kind: str) -> None:
    if any(value != "All" for value in values):
        listed = "[" + ",".join(json.dumps(v) for v in values) + "]"  # the whole list, as Go prints it
        raise invalid(options_kind, "", [Cause("dryRun", "FieldValueNotSupported",
                                               f'Unsupported value: {listed}: supported values: "All"')],
                      "meta.k8s.io")


def _field_manager(request: web.BaseRequest) -> str | None:
    """The manager a write names (``fieldManager``), or None."""
    return request.query.get("fieldManager") or None


def _agent_manager(request: web.BaseRequest) -> str:
    """The manager of a write that names none: its User-Agent's product, as the API server
    derives it (``kubectl/v1.32.4 (linux/amd64) …`` → ``kubectl``)."""
    return (request.headers.get("User-Agent") or "unknown").split("/", 1)[0][:128] or "unknown"


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def _openapi_v2(accept: str) -> web.Response:
    """Protobuf when asked for (kubectl up to 1.28 asks for nothing else), else JSON."""
    if any(media in accept for media in openapi_v2.ACCEPTED_PROTOBUF):
        return web.Response(body=openapi_v2.document_protobuf(), content_type=openapi_v2.MEDIA_TYPE_PROTOBUF)
    return web.Response(text=openapi_v2.document_json(), content_type="application/json")


def _response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=dumps(body), status=status, content_type=JSON)


def _warn(resp: web.Response, warnings: list[str]) -> web.Response:
    """Add RFC 7234 ``Warning`` headers as kube-apiserver sends them (code 299, agent ``-``)."""
    for text in warnings:
        resp.headers.add("Warning", "299 - " + json.dumps(text))
    return resp


def _error_response(err: ApiError) -> web.Response:
    resp = _response(err.status(), err.code)
    if err.retry_after_seconds is not None:
        resp.headers["Retry-After"] = str(err.retry_after_seconds)
    return resp


class ApiServer:
    """The aiohttp application and every verb's semantics."""

    def __init__(self, store: Store, lifecycle: Lifecycle, clock: Clock, faults: Faults,
                 bookmark_interval: float = 1.0) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self.clock = clock
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.audit: Counter[AuditKey] = Counter()
        self.faulted: Counter[AuditKey] = Counter()  # the audited requests answered with an injected fault
        self.admission: tuple[AdmissionPlugin, ...] = ()  # optional plugins (kubesim/admission.py)

    def make_server(self) -> web.Server:
        """The low-level aiohttp server (one handler, no router or middlewares to walk per
        request); handler_cancellation ends a watch handler as soon as its client goes away.
        Must be called on the serving loop."""
        return web.Server(self.handle, handler_cancellation=True, access_log=None)

    # -- entry point ----------------------------------------------------------------------

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        try:
            if path.startswith("/api/") or path.startswith("/apis/") or path in ("/api", "/apis"):
                return await self._api(request)
            if path.startswith("/kubesim/"):
                return await self._admin(request)
            if path == "/version" or path == "/version/":
                return _response(VERSION_INFO)
            if path in ("/healthz", "/readyz", "/livez") or path.startswith(("/healthz/", "/readyz/", "/livez/")):
                return web.Response(text="ok", content_type="text/plain")
            if path.startswith("/openapi/v3"):
                return self._openapi(path)
            if path.rstrip("/") == "/openapi/v2":
                return _openapi_v2(request.headers.get("Accept", ""))
            raise no_resource()
        except ApiError as err:
            return _error_response(err)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as e:  # a kubesim bug must still answer like an apiserver
            log.exception("kubesim internal error on %s %s", request.method, path)
            return _error_response(ApiError(500, "InternalError", f"Internal error occurred: {e!r}"))

    def _openapi(self, path: str) -> web.Response:
        rest = path[len("/openapi/v3"):].strip("/")
        if not rest:
            return _response(schema.openapi_v3_index())
        doc = schema.openapi_v3_document(rest)
        if doc is None:
            raise no_resource()
        return _response(doc)

    # -- admin ----------------------------------------------------------------------------

    async def _admin(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path.rstrip("/")
        if path == "/kubesim/faults":
            if request.method == "GET":
                return _response(self.faults.as_dict())
            if request.method == "DELETE":
                self.faults.clear()
                return _response(self.faults.as_dict())
            if request.method == "POST":
                body = await request.json() if request.can_read_body else {}
                if not body:
                    self.faults.clear()
                else:
                    try:
                        self.faults.set(**body)
                    except (TypeError, ValueError) as e:
                        raise bad_request(str(e)) from e
                return _response(self.faults.as_dict())
        if path == "/kubesim/disconnect-watches" and request.method == "POST":
            return _response({"disconnected": self.disconnect_watches()})
        if path == "/kubesim/audit" and request.method == "GET":
            return _response({"requests": self.audit_rows()})
        if path == "/kubesim/audit" and request.method == "DELETE":
            self.audit.clear()
            self.faulted.clear()
            return _response({"requests": []})
        raise no_resource()

    def audit_rows(self) -> list[dict[str, Any]]:
        return [
            {"verb": k.verb, "group": k.group, "resource": k.resource, "subresource": k.subresource, "count": n,
             "faulted": self.faulted[k]}
            for k, n in sorted(self.audit.items())
        ]

    def disconnect_watches(self) -> int:
        """End every open watch stream (clients see a clean EOF and must re-watch)."""
        watchers = self.store.all_watchers()
        for w in watchers:
            w.close()
        return len(watchers)

    # -- routing --------------------------------------------------------------------------

    async def _api(self, request: web.BaseRequest) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if len(parts) >= 2:
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2] if len(parts) > 2 else None)
            if not resources.serves(group, version):
                # no handler for the group (version): the mux's own answer, not a Status
                return web.Response(status=404, text="404 page not found\n", content_type="text/plain")
        discovery = self._discovery(parts)
        if discovery is not None:
            return _response(discovery)
        route = self._route(parts, request)
        key = AuditKey(route.verb, route.res.group, route.res.plural, route.subresource or "")
        self.audit[key] += 1
        faults = self.faults
        if faults.latency_seconds > 0:
            await asyncio.sleep(faults.latency_seconds)
        fault = faults.error()
        if fault is not None:
            self.faulted[key] += 1
            return _error_response(fault)
        verb = route.verb
        if route.subresource == "log":
            return await self._log(route, request)
        if verb == "get":
            return await self._get(route, request)
        if verb == "list":
            return await self._list(route, request)
        if verb == "watch":
            return await self._watch(route, request)
        if verb == "create":
            return self._create(route, await self._body(request), request)
        if verb == "update":
            return self._update(route, await self._body(request), request)
        if verb == "patch":
            return await self._patch(route, request)
        if verb == "delete":
            return await self._delete(route, request)
        if verb == "deletecollection":
            return await self._deletecollection(route, request)
        raise no_method()

    def _discovery(self, parts: list[str]) -> dict[str, Any] | None:
        if parts == ["api"]:
            return resources.api_versions()
        if parts == ["apis"]:
            return resources.api_group_list()
        if parts[0] == "api" and len(parts) == 2:
            found = resources.resource_list("", parts[1])
            if found is None:
                raise no_resource()
            return found
        if parts[0] == "apis" and len(parts) == 2:
            group = resources.api_group(parts[1])
            if group is None:
                raise no_resource()
            return group
        if parts[0] == "apis" and len(parts) == 3:
            found = resources.resource_list(parts[1], parts[2])
            if found is None:
                raise no_resource()
            return found
        return None

    def _route(self, parts: list[str], request: web.BaseRequest) -> Route:
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        watch = _truthy(request.query.get("watch"))
        if rest and rest[0] == "watch":  # legacy /watch/ paths
            watch, rest = True, rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and not (
            len(rest) == 3 and rest[2] in ("status", "finalize")
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise no_resource()
        res = resources.lookup(group, version, rest[0])
        if res is None:
            raise no_resource()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in res.subresources:
            raise no_resource()
        if res.namespaced and name is not None and namespace is None:
            raise no_resource()
        if not res.namespaced and namespace is not None:
            raise no_resource()
        method = request.method
        if name is None:
            verbs = {"GET": "watch" if watch else "list", "POST": "create", "DELETE": "deletecollection"}
        else:
            verbs = {"GET": "watch" if watch else "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
        verb = verbs.get(method)
        allowed = resources.SUB_ONLY_VERBS.get(sub, resources.SUB_VERBS) if sub is not None else ()
        if verb is None or (sub is not None and verb not in allowed):
            raise no_method()
        if name is None and namespace is None and res.namespaced and verb == "create":
            raise no_method()
        if verb not in res.verbs and sub is None:
            raise no_method()
        return Route(res, namespace, name, sub, verb)

    async def _body(self, request: web.BaseRequest) -> Any:
        """The decoded body of a create or update: JSON, YAML, or protobuf (then a
        :class:`_ProtobufBody`, whose unknown fields ``fieldValidation`` judges)."""
        raw = await request.read()
        if not raw:
            return None
        ctype = request.content_type if request.headers.get("Content-Type") else JSON
        if ctype == protobuf.MEDIA_TYPE:
            try:
                decoded = protobuf.decode(raw)
            except protobuf.ProtobufError as e:
                raise bad_request(f"the body of the request was in an unknown format: {e}") from e
            return _ProtobufBody(decoded.obj, decoded.unknown)
        if ctype not in BODY_MEDIA_TYPES:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media types include: "
                           f"{', '.join(BODY_MEDIA_TYPES[:3])}")
        try:
            if "yaml" in ctype:
                return yaml.safe_load(raw)
            return loads(raw)
        except (ValueError, yaml.YAMLError) as e:
            raise bad_request(f"the body of the request was in an unknown format: {e}") from e

    # -- helpers --------------------------------------------------------------------------

    def _current(self, route: Route) -> Obj:
        assert route.name is not None
        obj = self.store.get(route.res.storage, route.namespace or "", route.name)
        if obj is None:
            raise not_found(route.res.plural, route.name, route.res.group)
        return obj

    def _view(self, res: Resource, obj: Obj) -> Obj:
        return resources.to_view(res, obj)

    def _filter(self, route: Route, request: web.BaseRequest) -> Filter:
        q = request.query
        return Filter(
            namespace=route.namespace if route.res.namespaced else None,
            labels=tuple(parse_label_selector(q.get("labelSelector"))),
            fields=tuple(dataclasses.replace(f, value_of=resources.field_label(route.res, f.label))
                         for f in parse_field_selector(q.get("fieldSelector"))),
            view=resources.view_function(route.res),
        )

    def _check_kind(self, res: Resource, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml")
        api_version = body.get("apiVersion")
        kind = body.get("kind")
        if (api_version and api_version != res.api_version) or (kind and kind != res.kind):
            raise self._undecodable(res, api_version or res.api_version, kind or res.kind)
        body["apiVersion"] = res.api_version
        body["kind"] = res.kind
        meta = body.get("metadata")
        if meta is None:
            body["metadata"] = meta = {}
        elif not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        return body

    @staticmethod
    def _undecodable(res: Resource, api_version: str, kind: str) -> ApiError:
        """The decoder's error for a body of another kind or version than the endpoint's: a kind
        the scheme knows fails to convert, any other is not registered."""
        version = api_version.rsplit("/", 1)[-1]
        prefix = f'{kind} in version "{version}" cannot be handled as a {res.kind}: '
        if (api_version, kind) not in resources.BY_KIND:
            return bad_request(f'{prefix}no kind "{kind}" is registered for version "{api_version}" in scheme '
                               '"pkg/runtime/scheme.go:110"')
        internal = INTERNAL_PACKAGES.get(res.group, res.group)
        return bad_request(f"{prefix}converting ({version}.{kind}) to ({internal}.{res.kind}): unknown conversion")

    # -- resourceVersions asked for ----------------------------------------------------

    @staticmethod
    def _parse_rv(value: str, *, listing: bool) -> int:
        """A resourceVersion parameter: storage refuses what is not an unsigned integer, a list in
        a 400 of its own, a get or watch as an internal error (500 without a reason)."""
        if not value.isdigit():
            detail = f"resourceVersion: Invalid value: {json.dumps(value)}: strconv.ParseUint: parsing {json.dumps(value)}: invalid syntax"
            if listing:
                raise bad_request(f"invalid resource version: {detail}")
            raise ApiError(500, "", detail)
        return int(value)

    async def _not_older_than(self, rv: int) -> None:
        """Wait (3 s at most, as the watch cache does) for the store to reach ``rv``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RV_WAIT_SECONDS
        while self.store.rv < rv:
            if loop.time() >= deadline:
                raise ApiError(504, "Timeout", f"Timeout: Too large resource version: {rv}, current: {self.store.rv}",
                               causes=[Cause("", "ResourceVersionTooLarge", "Too large resource version")],
                               retry_after_seconds=1)
            await asyncio.sleep(0.05)

    @staticmethod
    def _list_options(q: Any, *, watch: bool) -> None:
        """ValidateListOptions: what resourceVersionMatch and sendInitialEvents go with."""
        match, rv, cont = q.get("resourceVersionMatch", ""), q.get("resourceVersion", ""), q.get("continue", "")
        initial = q.get("sendInitialEvents")
        causes: list[Cause] = []

        def forbidden(path: str, detail: str) -> None:
            causes.append(Cause(path, "FieldValueForbidden", f"Forbidden: {detail}"))

        def not_supported(supported: list[str]) -> None:
            listed = ", ".join(json.dumps(v) for v in supported)
            causes.append(Cause("resourceVersionMatch", "FieldValueNotSupported",
                                f"Unsupported value: {json.dumps(match)}: supported values: {listed}"))

        if watch:
            if initial is not None and match != "NotOlderThan":
                forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
            if match:
                if initial is None:
                    forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless "
                                                      "sendInitialEvents is provided")
                if match != "NotOlderThan":
                    not_supported(["NotOlderThan"])
                if cont:
                    forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided")
        else:
            if match:
                if not rv:
                    forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided")
                if cont:
                    forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided")
                if match not in ("Exact", "NotOlderThan"):
                    not_supported(["Exact", "NotOlderThan", ""])
                if match == "Exact" and rv == "0":
                    forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
            if initial is not None:
                forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
        if causes:
            raise invalid("ListOptions", "", causes, "meta.k8s.io")

    # -- read verbs -----------------------------------------------------------------------

    async def _get(self, route: Route, request: web.BaseRequest) -> web.Response:
        rv = request.query.get("resourceVersion")
        if rv:
            await self._not_older_than(self._parse_rv(rv, listing=False))
        obj = self._current(route)
        table = tables.accepts_table(request.headers.get("Accept"))
        if table is not None:
            return _response(tables.object_table(
                table, route.res.storage, obj, self._view(route.res, obj), self.clock.now(),
                request.query.get("includeObject"),
            ))
        return _response(self._view(route.res, obj))

    async def _log(self, route: Route, request: web.BaseRequest) -> web.StreamResponse:
        """``pods/log`` for the fake kubelet's containers: see :mod:`kubesim.logs`."""
        q = request.query
        pod = self._current(route)
        container = logs.pick_container(pod, q.get("container"))
        previous, follow, stamps = _truthy(q.get("previous")), _truthy(q.get("follow")), _truthy(q.get("timestamps"))
        tail: int | None = None
        if q.get("tailLines"):
            try:
                tail = max(0, int(q["tailLines"]))
            except ValueError as e:
                raise bad_request(f"invalid tailLines {q['tailLines']!r}") from e
        lines = logs.lines(pod, container, previous=previous)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        shown = lines[-tail:] if tail is not None and tail < len(lines) else lines
        if tail == 0:
            shown = []
        await resp.write(b"".join(line.render(stamps) for line in shown))
        if follow and not previous:
            sent = len(lines)
            key, namespace, name = route.res.storage, route.namespace or "", pod["metadata"]["name"]
            uid = pod["metadata"]["uid"]
            while True:
                # The fake kubelet's transitions are store writes on this loop; a short poll
                # of the stored Pod sees each of them and costs nothing between them.
                await asyncio.sleep(0.05)
                current = self.store.get(key, namespace, name)
                if current is None or current["metadata"]["uid"] != uid:
                    break
                try:
                    now_lines = logs.lines(current, container, previous=False)
                except ApiError:
                    break  # the container's status is gone (the Pod is being replaced)
                if now_lines[0] != lines[0]:  # restarted: the new run's log follows the old one's
                    lines, sent = now_lines, 0
                lines = now_lines
                if len(lines) > sent:
                    await resp.write(b"".join(line.render(stamps) for line in lines[sent:]))
                    sent = len(lines)
                if logs.ended(current, container):
                    break
        await resp.write_eof()
        return resp

    async def _list(self, route: Route, request: web.BaseRequest) -> web.Response:
        q = request.query
        flt = self._filter(route, request)
        try:
            limit = int(q.get("limit") or 0)
        except ValueError as e:
            raise bad_request(f'strconv.ParseInt: parsing {json.dumps(q.get("limit"))}: invalid syntax') from e
        self._list_options(q, watch=False)
        exact: int | None = None
        rv_param = q.get("resourceVersion") or ""
        if rv_param and rv_param != "0":
            rv = self._parse_rv(rv_param, listing=True)
            await self._not_older_than(rv)
            # Exact, or a page of a list at a resourceVersion (read from storage, not the cache)
            if q.get("resourceVersionMatch") == "Exact" or (
                    not q.get("resourceVersionMatch") and limit > 0 and not q.get("continue")):
                exact = rv
        items, token, remaining, at = self.store.select(route.res.storage, flt, max(0, limit), q.get("continue"),
                                                        at=exact)
        res = route.res
        meta: dict[str, Any] = {"resourceVersion": str(at)}
        if token:
            meta["continue"] = token
            if not flt.labels and not flt.fields:  # with a selector the server cannot count what is left
                meta["remainingItemCount"] = remaining
        table = tables.accepts_table(request.headers.get("Accept"))
        if table is not None:
            pairs = [(o, flt.view(o) if flt.view else o) for o in items]
            return _response(tables.list_table(
                table, res.storage, pairs, self.clock.now(), meta, q.get("includeObject"),
            ))
        if flt.view is not None:
            items = [flt.view(o) for o in items]
        # a typed list's items carry no kind or apiVersion: the list says them once
        items = [{k: v for k, v in o.items() if k != "kind" and k != "apiVersion"} for o in items]
        return _response({"kind": res.list_kind, "apiVersion": res.api_version, "metadata": meta, "items": items})

    async def _watch(self, route: Route, request: web.BaseRequest) -> web.StreamResponse:
        q = request.query
        res = route.res
        flt = self._filter(route, request)
        rv_param = q.get("resourceVersion")
        self._list_options(q, watch=True)
        since: int | None = None
        if rv_param not in (None, "", "0"):
            since = self._parse_rv(rv_param, listing=False)
        # sendInitialEvents: the objects first (whatever the resourceVersion), then a bookmark
        # that says so; false: only what changes from the resourceVersion (or from now)
        initial_events = q.get("sendInitialEvents")
        if initial_events == "true":
            since = None
        elif initial_events is not None and since is None:
            since = self.store.rv
        timeout: float | None = None
        if q.get("timeoutSeconds"):
            try:
                timeout = float(q["timeoutSeconds"])
            except ValueError as e:
                raise bad_request("invalid timeoutSeconds") from e
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        resp.enable_chunked_encoding()
        try:
            watcher, initial = self.store.watch(res.storage, flt, since, cached=res.watch_cache)
        except ApiError as err:
            # As kube-apiserver: the watch opens, then a single ERROR event carries the Status.
            await resp.prepare(request)
            await resp.write(b'{"type":"ERROR","object":' + dumps(err.status()) + b"}\n")
            await resp.write_eof()
            return resp
        encode = self._watch_encoder(route, request, flt)
        loop = asyncio.get_running_loop()
        handles: list[asyncio.TimerHandle] = []
        queue = watcher.queue
        if timeout is not None:
            handles.append(loop.call_later(max(0.0, timeout), watcher.close))
        if bookmarks and self.bookmark_interval > 0:
            def bookmark() -> None:
                queue.put_nowait(_Bookmark(self.store.rv))
                handles.append(loop.call_later(self.bookmark_interval, bookmark))
            handles.append(loop.call_later(self.bookmark_interval, bookmark))
        try:
            await resp.prepare(request)
            lines = [encode(e) for e in initial]
            if since is None and bookmarks:  # the initial events end with a bookmark that says so
                lines.append(self._bookmark_line(res, self.store.rv, {INITIAL_EVENTS_END: "true"}))
            await resp.write(b"".join(lines))
            closed = False
            while not closed:
                item = await queue.get()
                chunks: list[bytes] = []
                while True:
                    if item is CLOSE:
                        closed = True
                        break
                    if isinstance(item, _Bookmark):
                        chunks.append(self._bookmark_line(res, item.rv))
                    else:
                        chunks.append(encode(item))
                    if queue.empty():
                        break
                    item = queue.get_nowait()
                if chunks:
                    await resp.write(b"".join(chunks))
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.store.unwatch(watcher)
            for h in handles:
                h.cancel()
        return resp

    def _watch_encoder(self, route: Route, request: web.BaseRequest,
                       flt: Filter) -> Callable[[WatchEvent], bytes]:
        """How this watch writes an event: the shared JSON line of its view, or (for kubectl's
        ``get -w``) a one-row Table, with column definitions in the first event only."""
        res = route.res
        view_name, view = res.api_version, flt.view
        version = tables.accepts_table(request.headers.get("Accept"))
        if version is None:
            return lambda event: event.line(view_name, view)
        include = request.query.get("includeObject")
        first = True

        def table_line(event: WatchEvent) -> bytes:
            nonlocal first
            table = tables.watch_table(version, res.storage, event.obj, view(event.obj) if view else event.obj,
                                       self.clock.now(), include, first)
            first = False
            return b'{"type":"' + event.type.encode() + b'","object":' + dumps(table) + b"}\n"

        return table_line

    def _bookmark_line(self, res: Resource, rv: int, annotations: dict[str, str] | None = None) -> bytes:
        """A bookmark: the empty object of the kind, as Go writes it, at a resourceVersion."""
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if annotations:
            meta["annotations"] = annotations
        obj = {"kind": res.kind, "apiVersion": res.api_version, **strategy.zero(res.group, res.plural), "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + dumps(obj) + b"}\n"

    # -- create ---------------------------------------------------------------------------

    def _create(self, route: Route, body: Any, request: web.BaseRequest) -> web.Response:
        dry_run = _dry_run(request, "CreateOptions")
        warnings = self._field_validation(route, request, "CreateOptions", body)
        if isinstance(body, _ProtobufBody):
            body = dict(body)
        obj = self.create_object(route.res, route.namespace, body, dry_run=dry_run,
                                 field_manager=_field_manager(request), warnings=warnings)
        return _warn(_response(self._view(route.res, obj), 201), warnings)

    def create_object(self, res: Resource, namespace: str | None, body: Any, *, dry_run: bool = False,
                      field_manager: str | None = None, managed: list[Any] | None = None,
                      warnings: list[str] | None = None) -> Obj:
        """Create semantics (also used to bootstrap the initial namespaces); returns stored obj
        (with ``dry_run``, the object as it would be stored, without a resourceVersion). The
        strategy's warnings are added to ``warnings``."""
        obj = self._check_kind(res, body)
        meta = obj["metadata"]
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = meta["generateName"] + "".join(secrets.choice(NAME_ALPHABET) for _ in range(5))
            meta["name"] = name
        if not name:
            raise invalid(res.kind, "", [Cause("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")], res.group)
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        if res.namespaced:
            self._check_namespace(res, namespace or "", name)
        for plugin in self.admission:
            plugin.validate(res, "", namespace or "", obj, None)
        if self.store.get(res.storage, namespace or "", name) is not None:
            raise already_exists(res.plural, name, res.group)
        now = self.clock.now()
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timestamp(now)
        if res.sets_generation:
            meta["generation"] = 1
        for system in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
            meta.pop(system, None)
        if managed is None and field_manager:
            # what the write sets is read off the decoded body, before admission and the strategy
            managed = ssa.create_entries(strategy.decoded(res.group, res.plural, obj),
                                         strategy.zero(res.group, res.plural), field_manager, "Update",
                                         timestamp(now))
        if res.storage == PODS:
            podadmission.admit_pod(obj)
        obj = strategy.prepare_create(res.group, res.plural, obj, now=now, warnings=warnings)
        if managed:
            obj["metadata"]["managedFields"] = managed
        obj = resources.from_view(res, obj)
        if res.storage == NAMESPACES:
            obj["spec"] = {**(obj.get("spec") or {}), "finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
            labels = obj["metadata"].setdefault("labels", {})
            labels["kubernetes.io/metadata.name"] = name
        if dry_run:
            return obj
        return self.store.create(res.storage, obj)

    def _check_namespace(self, res: Resource, namespace: str, name: str) -> None:
        ns = self.store.get(NAMESPACES, "", namespace)
        if ns is None:
            raise not_found("namespaces", namespace)
        if is_deleting(ns):
            raise ApiError(
                403, "Forbidden",
                f'{res.qualified} "{name}" is forbidden: unable to create new content in namespace {namespace} because it is being terminated',
                kind=res.plural, name=name, group=res.group or None,
                causes=[Cause("metadata.namespace", "NamespaceTerminating", f"namespace {namespace} is being terminated")],
            )
        self._admit(res, ns, name)

    @staticmethod
    def _admit(res: Resource, ns: Obj, name: str) -> None:
        """Emulate an admission webhook or a ResourceQuota refusing creates in a namespace.

        A namespace annotated ``kubesim.batchd.io/deny-create: "<resource>:<code>:<message>"``
        (code 403 or 422) refuses every create of that resource there, as a policy webhook
        (422/403) or an exhausted quota (403) does on a real cluster — the inputs a controller
        must handle without a retry storm.
        """
        rule = ((ns.get("metadata") or {}).get("annotations") or {}).get(DENY_CREATE_ANNOTATION)
        if not rule:
            return
        plural, _, rest = rule.partition(":")
        code, _, message = rest.partition(":")
        if plural != res.plural:
            return
        if code == "422":
            raise invalid(res.kind, name, [Cause("metadata", "FieldValueForbidden",
                                                 f'admission webhook "deny.kubesim.batchd.io" denied the request: {message}')],
                          res.group)
        raise ApiError(403, "Forbidden", f'{res.qualified} "{name}" is forbidden: {message}',
                       kind=res.plural, name=name, group=res.group or None)

    # -- update and patch -----------------------------------------------------------------

    def _update(self, route: Route, body: Any, request: web.BaseRequest) -> web.Response:
        dry_run = _dry_run(request, "UpdateOptions")
        warnings = self._field_validation(route, request, "UpdateOptions", body)
        if isinstance(body, _ProtobufBody):
            body = dict(body)
        res = route.res
        assert route.name is not None
        missing = self.store.get(res.storage, route.namespace or "", route.name) is None
        if missing and res.allow_create_on_update and route.subresource is None:
            obj = self._create_on_update(route, self._check_kind(res, body), dry_run=dry_run,
                                         field_manager=_field_manager(request), warnings=warnings)
            return _warn(_response(self._view(res, obj), 201), warnings)
        old = self._current(route)
        new = self._check_kind(res, body)
        result = self.update_object(route, old, new, dry_run=dry_run, field_manager=_field_manager(request),
                                    agent=_agent_manager(request), warnings=warnings)
        return _warn(_response(self._view(res, result)), warnings)

    def _create_on_update(self, route: Route, body: Obj, *, dry_run: bool, field_manager: str | None,
                          warnings: list[str]) -> Obj:
        """A PUT of a missing object of a kind whose registry allows it: the create path, with
        the name from the URL. The store has nothing to compare a resourceVersion with, so one
        in the body is dropped; a uid is a precondition nothing can meet."""
        res, name = route.res, route.name
        assert name is not None
        meta = body["metadata"]
        if meta.get("name") and meta["name"] != name:
            raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        if meta.get("uid"):
            raise conflict(res.plural, name, f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: ",
                           res.group)
        meta["name"] = name
        meta.pop("resourceVersion", None)
        return self.create_object(res, route.namespace, body, dry_run=dry_run, field_manager=field_manager,
                                  warnings=warnings)

    def _field_validation(self, route: Route, request: web.BaseRequest, options_kind: str,
                          obj: Any) -> list[str]:
        """Apply ``fieldValidation`` to a decoded body (or a patched object): Strict raises the
        strict decoding error, Warn returns one warning per unknown field, Ignore returns none.

        Absent behaves as Ignore here (kube-apiserver's default is Warn): kubectl always sends
        the parameter, and other clients then pay nothing for the unknown-field walk.
        """
        directive = request.query.get("fieldValidation")
        if not directive or directive == "Ignore":
            return []
        if directive not in ("Warn", "Strict"):
            message = f'Unsupported value: "{directive}": supported values: "", "Ignore", "Strict", "Warn"'
            raise invalid(options_kind, "", [Cause("fieldValidation", "FieldValueNotSupported", message)],
                          "meta.k8s.io")
        if not isinstance(obj, dict):
            return []  # not an object: the normal path reports it
        res = route.res
        if isinstance(obj, _ProtobufBody) and obj.unknown:
            found = [f'unknown field in protobuf message at "{p}"' for p in obj.unknown]
            if directive == "Strict":
                raise bad_request("strict decoding error: " + ", ".join(found))
            return found
        if directive == "Strict":
            err = schema.strict_decoding_error(res.group, res.plural, obj)
            if err is not None:
                raise err
            return []
        return [f'unknown field "{p}"' for p in schema.unknown_fields(res.group, res.plural, obj)]

    def update_object(self, route: Route, old: Obj, new: Obj, *, dry_run: bool = False,
                      field_manager: str | None = None, managed: list[Any] | None = None,
                      agent: str = "unknown", warnings: list[str] | None = None) -> Obj:
        """PUT semantics on ``new`` (in the route's view shape) against stored ``old`` (with
        ``dry_run``, the object as it would be stored, nothing written)."""
        res = route.res
        meta = new["metadata"]
        old_meta = old["metadata"]
        name = old_meta["name"]
        if meta.get("name") and meta["name"] != name:
            raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        if res.namespaced and meta.get("namespace") and meta["namespace"] != old_meta.get("namespace"):
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        rv = meta.get("resourceVersion")
        if not rv and not res.allow_unconditional_update:
            # The generic store words this as an Invalid on the resource, not the kind.
            raise invalid(res.plural, name, [Cause("metadata.resourceVersion", "FieldValueInvalid",
                                                   "Invalid value: 0: must be specified for an update")], res.group)
        if rv and rv != old_meta["resourceVersion"]:
            raise conflict(res.plural, name, "the object has been modified; please apply your changes to the latest version and try again", res.group)
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise conflict(res.plural, name, f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {old_meta['uid']}", res.group)
        # System fields the client cannot change through an update.
        for system in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "generation", "resourceVersion"):
            if system in old_meta:
                meta[system] = old_meta[system]
            else:
                meta.pop(system, None)
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        if res.storage == NAMESPACES:
            new["status"] = new.get("status") if route.subresource == "status" else old.get("status")
        for plugin in self.admission:
            plugin.validate(res, route.subresource or "", old_meta.get("namespace") or "", new, resources.to_view(res, old))
        now = self.clock.now()
        if managed is None and (field_manager or old_meta.get("managedFields")):
            # Ownership is tracked once someone names a manager, as the API server tracks it
            # always (untracked objects skip the field walk: most of kubesim's writes). What the
            # write changed is read off the decoded body, before the strategy.
            managed = ssa.update_entries(resources.to_view(res, old), strategy.decoded(res.group, res.plural, new),
                                         field_manager or agent, timestamp(now), route.subresource or "")
        new = strategy.prepare_update(
            res.group, res.plural, resources.to_view(res, old), new,
            subresource=route.subresource, now=now, warnings=warnings,
        )
        if managed:
            new["metadata"]["managedFields"] = managed
        new = resources.from_view(res, new)
        if new == old:
            return old  # a no-op update writes nothing and sends no event, as upstream
        if dry_run:
            return new
        stored, _ = self.lifecycle.write(res.storage, new)
        return stored

    async def _patch(self, route: Route, request: web.BaseRequest) -> web.Response:
        ctype = request.content_type
        if ctype == ssa.APPLY_PATCH:
            return await self._apply(route, request)
        if ctype not in (patches.MERGE_PATCH, patches.STRATEGIC_MERGE_PATCH, patches.JSON_PATCH):
            raise ApiError(
                415, "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{patches.JSON_PATCH}, {patches.MERGE_PATCH}, {patches.STRATEGIC_MERGE_PATCH}, {ssa.APPLY_PATCH}",
            )
        raw = await request.read()
        try:
            body = loads(raw) if raw else None
        except ValueError as e:
            raise bad_request(f"error decoding patch: {e}") from e
        if body is None:
            raise bad_request("empty patch")
        dry_run = _dry_run(request, "PatchOptions")
        old = self._current(route)
        current = resources.to_view(route.res, old)
        # Patches build new containers along the paths they change and share the rest with
        # their target; the update path then changes only the top level and metadata of its
        # input before strategy.prepare_update prunes it into a fresh copy. So copying those
        # two levels is enough to leave the stored snapshot untouched.
        base = {**current, "metadata": dict(current["metadata"])}
        new = patches.apply(ctype, base, body)
        warnings = self._field_validation(route, request, "PatchOptions", new)
        new = self._check_kind(route.res, new)
        result = self.update_object(route, old, new, dry_run=dry_run, field_manager=_field_manager(request),
                                    agent=_agent_manager(request), warnings=warnings)
        return _warn(_response(self._view(route.res, result)), warnings)

    async def _apply(self, route: Route, request: web.BaseRequest) -> web.Response:
        """Server-side apply (see :mod:`kubesim.apply`); creates the object when it is missing."""
        raw = await request.read()
        try:
            body = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError as e:
            raise bad_request(f"error decoding YAML: {e}") from e
        if not isinstance(body, dict):
            got = {list: "array", str: "string", bool: "bool", int: "number", float: "number"}.get(type(body), "null")
            raise bad_request("error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
                              f"unmarshal {got} into Go value of type map[string]interface {{}}")
        dry_run = _dry_run(request, "PatchOptions")
        manager = request.query.get("fieldManager")
        if not manager:
            raise invalid("PatchOptions", "", [Cause("fieldManager", "FieldValueRequired",
                                                     "Required value: is required for apply patch")], "meta.k8s.io")
        body = self._check_kind(route.res, body)
        assert route.name is not None
        if body["metadata"].get("name") not in (None, route.name):
            raise bad_request(f"the name of the object ({body['metadata']['name']}) does not match the name on "
                              f"the URL ({route.name})")
        warnings = self._field_validation(route, request, "PatchOptions", body)
        force = _truthy(request.query.get("force"))
        now = timestamp(self.clock.now())
        current = self.store.get(route.res.storage, route.namespace or "", route.name)
        if current is None:
            if route.subresource:
                raise not_found(route.res.plural, route.name, route.res.group)
            created = ssa.apply(None, body, manager, force=force, now=now)
            managed = created["metadata"].pop("managedFields")
            created["metadata"]["name"] = route.name
            obj = self.create_object(route.res, route.namespace, created, dry_run=dry_run, managed=managed,
                                     warnings=warnings)
            return _warn(_response(self._view(route.res, obj), 201), warnings)
        new = ssa.apply(resources.to_view(route.res, current), body, manager, force=force, now=now)
        managed = new["metadata"].pop("managedFields")
        new = self._check_kind(route.res, new)
        result = self.update_object(route, current, new, dry_run=dry_run, managed=managed, warnings=warnings)
        return _warn(_response(self._view(route.res, result)), warnings)

    # -- delete ---------------------------------------------------------------------------

    async def _delete_options(self, request: web.BaseRequest) -> dict[str, Any]:
        options: dict[str, Any] = {}
        raw = await request.read()
        if raw:
            try:
                parsed = loads(raw)
            except ValueError as e:
                raise bad_request(f"invalid DeleteOptions: {e}") from e
            if isinstance(parsed, dict):
                options.update(parsed)
        q = request.query
        dry_run = list(options.get("dryRun") or []) + list(q.getall("dryRun", []))
        if dry_run:
            options["dryRun"] = dry_run
        if q.get("propagationPolicy"):
            options["propagationPolicy"] = q["propagationPolicy"]
        if q.get("gracePeriodSeconds"):
            options["gracePeriodSeconds"] = q["gracePeriodSeconds"]
        if q.get("orphanDependents"):
            options["orphanDependents"] = _truthy(q["orphanDependents"])
        # ValidateDeleteOptions, before the object is looked up
        causes: list[Cause] = []
        policy = options.get("propagationPolicy")
        if policy is not None and options.get("orphanDependents") is not None:
            causes.append(Cause("propagationPolicy", "FieldValueInvalid", f"Invalid value: {json.dumps(policy)}: "
                                "orphanDependents and deletionPropagation cannot be both set"))
        if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
            causes.append(Cause("propagationPolicy", "FieldValueNotSupported", f"Unsupported value: {json.dumps(policy)}: "
                                'supported values: "Foreground", "Background", "Orphan", "nil"'))
        if causes:
            raise invalid("DeleteOptions", "", causes, "meta.k8s.io")
        _check_dry_run(dry_run, "DeleteOptions")
        return options

    @staticmethod
    def _delete_warnings(route: Route, options: dict[str, Any]) -> list[str]:
        """The Job registry's warning on a delete that leaves the Pods' fate to the default."""
        if route.res.storage == ("batch", "jobs") and options.get("propagationPolicy") is None \
                and options.get("orphanDependents") is None:
            return [JOB_DELETE_WARNING]
        return []

    async def _delete(self, route: Route, request: web.BaseRequest) -> web.Response:
        options = await self._delete_options(request)
        warnings = self._delete_warnings(route, options)
        try:
            obj = self._current(route)
        except ApiError as err:
            return _warn(_error_response(err), warnings)
        lifecycle = self.lifecycle
        if options.get("dryRun"):
            lifecycle = Lifecycle(_DryRunWrites(), self.clock)
        result, removed = lifecycle.delete(route.res, obj, options)
        res = route.res
        if removed and res.storage not in RETURNS_DELETED_OBJECT:
            meta = result["metadata"]
            return _warn(_response({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": meta["name"], "group": res.group, "kind": res.plural, "uid": meta["uid"]},
            }), warnings)
        status = 202 if not removed and options.get("orphanDependents") is False else 200
        return _warn(_response(self._view(res, result), status), warnings)

    async def _deletecollection(self, route: Route, request: web.BaseRequest) -> web.Response:
        options = await self._delete_options(request)
        flt = self._filter(route, request)
        items, _, _, _ = self.store.select(route.res.storage, flt)
        deleted = []
        for obj in items:
            try:
                result, _ = self.lifecycle.delete(route.res, obj, options)
            except ApiError as e:
                if e.code == 404:
                    continue
                raise
            deleted.append(self._view(route.res, result))
        res = route.res
        return _warn(_response({"kind": res.list_kind, "apiVersion": res.api_version,
                                "metadata": {"resourceVersion": str(self.store.rv)}, "items": deleted}),
                     self._delete_warnings(route, options))
