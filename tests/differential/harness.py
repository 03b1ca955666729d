"""The differential harness: one case's requests sent to kubesim and to kube-apiserver, each
side's answers normalised to what the two servers can agree on, and the two compared leaf by leaf.

A :class:`Case` is a name and a sequence of steps (:class:`Call`, :class:`Poll`, :class:`Watch`,
:class:`Fact`).
Steps refer to the answers of earlier steps (a uid for a precondition, a resourceVersion to watch
from) with :class:`Ref`, so the same table drives both servers though each hands out its own
identities. Every answer goes into a transcript (status code, decoded body, warnings); the
transcripts are normalised (:func:`normalise`) and flattened into ``path -> value`` maps whose
differences are the result.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from kube.config import load_access

JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
#: every write names this manager unless a step says otherwise: kube-apiserver records managedFields
#: for every write, kubesim only for writes that name one (a kept difference pins the other case)
MANAGER = "differential"
#: kube-apiserver names the manager of a write without ``fieldManager`` after this product
AGENT = "differential-suite/1.0"


# -- the two servers ------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: Any
    warnings: list[str] = field(default_factory=list)


class Side:
    """One API server, spoken to in raw HTTP: the status code and the decoded body are the answer."""

    def __init__(self, name: str, kubeconfig: Path) -> None:
        self.name = name
        self.access = load_access(kubeconfig)
        url = urlsplit(self.access.server)
        https = url.scheme == "https"
        self.host, self.port = url.hostname or "127.0.0.1", url.port or (443 if https else 80)
        self.tls = ssl.create_default_context(cafile=self.access.ca_file) if https else None

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.tls is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self, ctype: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": AGENT}
        if ctype:
            headers["Content-Type"] = ctype
        authorization = self.access.authorization()
        if authorization:
            headers["Authorization"] = authorization
        return headers

    def request(self, method: str, path: str, body: Any = None, *, query: dict[str, Any] | None = None,
                ctype: str = JSON, timeout: float = 15.0) -> Reply:
        target = path + ("?" + urlencode(query, doseq=True) if query else "")
        data: bytes | None = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        conn = self._connect(timeout)
        try:
            conn.request(method, target, body=data, headers=self._headers(ctype if data is not None else None))
            resp = conn.getresponse()
            raw = resp.read()
            warnings = [_warning_text(w) for w in resp.headers.get_all("Warning") or []]
            return Reply(resp.status, _decode(raw), warnings)
        finally:
            conn.close()

    def watch(self, path: str, query: dict[str, Any], until: Callable[[list[dict[str, Any]]], bool],
              timeout: float, opened: Callable[[], None] = lambda: None) -> tuple[int, list[dict[str, Any]]]:
        """Read a watch's events until ``until`` holds, the stream ends or ``timeout`` passes;
        ``opened`` is called (in a thread of its own) once the watch has answered."""
        conn = self._connect(timeout)
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        try:
            conn.request("GET", path + "?" + urlencode({**query, "watch": "true"}), headers=self._headers(None))
            resp = conn.getresponse()
            if resp.status != 200:
                return resp.status, [{"type": "(response)", "object": _decode(resp.read())}]
            threading.Thread(target=opened, daemon=True).start()
            while time.monotonic() < deadline and not until(events):
                try:
                    line = resp.readline()
                except TimeoutError:
                    break
                if not line:
                    break
                if line.strip():
                    events.append(json.loads(line))
            return resp.status, events
        finally:
            conn.close()

    def wait(self, path: str, until: Callable[[Reply], bool], timeout: float) -> Reply:
        """GET ``path`` until ``until`` holds or ``timeout`` passes; the last answer."""
        deadline = time.monotonic() + timeout
        while True:
            reply = self.request("GET", path)
            if until(reply) or time.monotonic() > deadline:
                return reply
            time.sleep(0.05)


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _warning_text(header: str) -> str:
    """The text of a ``299 - "…"`` Warning header."""
    code, _, rest = header.partition(" ")
    _, _, text = rest.partition(" ")
    try:
        return str(json.loads(text))
    except ValueError:
        return text


# -- the table's vocabulary ------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """A value from an earlier step's answer: ``Ref("job", "metadata", "uid")``; ``Ref("ns")`` is
    the case's namespace."""

    label: str
    path: tuple[str | int, ...] = ()

    def __init__(self, label: str, *path: str | int) -> None:
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "path", path)

    def resolve(self, ctx: dict[str, Any]) -> Any:
        value = ctx[self.label]
        for key in self.path:
            value = value[key]
        return value


def resolve(value: Any, ctx: dict[str, Any]) -> Any:
    """Fill a step's path, query or body: Refs resolved, ``{ns}`` (and any ``{label}``) in strings
    formatted, callables called with the context."""
    if isinstance(value, Ref):
        return value.resolve(ctx)
    if callable(value):
        return value(ctx)
    if isinstance(value, str):
        return value.format_map(_Format(ctx)) if "{" in value else value
    if isinstance(value, dict):
        return {k: resolve(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, ctx) for v in value]
    return value


class _Format(dict[str, Any]):
    def __init__(self, ctx: dict[str, Any]) -> None:
        super().__init__({k: v for k, v in ctx.items() if isinstance(v, str)})

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True)
class Call:
    """One request. ``label`` keeps the answer's body for later :class:`Ref`\\ s. ``manager``:
    the ``fieldManager`` of a write (``None`` names none); ``show``: what of the answer the
    transcript keeps (default: all of it)."""

    method: str
    path: Any
    body: Any = None
    query: Any = None
    ctype: str = JSON
    label: str | None = None
    manager: str | None = MANAGER
    show: Callable[[Reply], Any] | None = None


@dataclass(frozen=True)
class Poll:
    """GET ``path`` until ``until`` holds (a controller's work: the garbage collector's, the
    namespace controller's); the transcript keeps the last answer, or ``show`` of it."""

    path: Any
    until: Callable[[Reply], bool]
    timeout: float = 20.0
    label: str | None = None
    show: Callable[[Reply], Any] | None = None


@dataclass(frozen=True)
class Watch:
    """A watch on ``path`` with ``query``, read until ``until`` holds over the events read (or
    ``timeout``); the transcript keeps ``show`` of the events (default: all)."""

    path: Any
    query: Any
    until: Callable[[list[dict[str, Any]]], bool]
    timeout: float = 8.0
    show: Callable[[list[dict[str, Any]]], Any] | None = None
    #: requests sent once the watch is open (their answers are not kept)
    during: tuple[Call, ...] = ()


@dataclass(frozen=True)
class Fact:
    """No request: ``what`` of the answers so far (a relation between them, such as one
    resourceVersion being another), kept in the transcript under ``name``."""

    name: str
    what: Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Pause:
    """No request: give a controller ``seconds`` to take in what came before, where nothing
    observable says it has (the garbage collector's graph learning of a new dependent)."""

    seconds: float
    why: str


Step = Call | Poll | Watch | Fact | Pause


@dataclass(frozen=True)
class Case:
    """One row of the table: what it exercises, the steps, and whether its namespace must take
    Pods (on kube-apiserver, after the ServiceAccount controller made its ``default`` account)."""

    name: str
    steps: tuple[Step, ...]
    pods: bool = False
    #: namespaces the case makes itself, by suffix of its own (deleted afterwards)
    extra_namespaces: tuple[str, ...] = ()
    #: seconds it takes at least (a watch held open, a controller's retries): run such cases first
    seconds: float = 0.0


def run(side: Side, case: Case, ns: str) -> list[dict[str, Any]]:
    """The transcript of ``case`` on ``side`` in namespace ``ns``."""
    ctx: dict[str, Any] = {"ns": ns}
    transcript: list[dict[str, Any]] = []
    for i, step in enumerate(case.steps):
        if isinstance(step, Call):
            path = resolve(step.path, ctx)
            query = dict(resolve(step.query, ctx) or {})
            if step.manager and step.method in ("POST", "PUT", "PATCH") and "fieldManager" not in query:
                query["fieldManager"] = step.manager
            body = resolve(step.body, ctx)
            if step.ctype == APPLY and not isinstance(body, str):
                body = json.dumps(body)  # YAML's superset: JSON is an apply configuration
            reply = side.request(step.method, path, body, query=query, ctype=step.ctype)
            if step.label:
                ctx[step.label] = reply.body
            entry: dict[str, Any] = {"step": f"{step.method} {_generic(path, ns)}", "code": reply.status}
            entry["body"] = step.show(reply) if step.show else reply.body
            if reply.warnings:
                entry["warnings"] = reply.warnings
        elif isinstance(step, Poll):
            path = resolve(step.path, ctx)
            reply = side.wait(path, step.until, step.timeout)
            if step.label:
                ctx[step.label] = reply.body
            entry = {"step": f"poll {_generic(path, ns)}", "code": reply.status,
                     "body": step.show(reply) if step.show else reply.body}
        elif isinstance(step, Fact):
            entry = {"step": f"fact {step.name}", "value": step.what(ctx)}
        elif isinstance(step, Pause):
            time.sleep(step.seconds)
            entry = {"step": f"pause: {step.why}"}
        else:
            path = resolve(step.path, ctx)

            def opened(calls: tuple[Call, ...] = step.during) -> None:
                for call in calls:
                    query = {**(resolve(call.query, ctx) or {}), "fieldManager": MANAGER}
                    side.request(call.method, resolve(call.path, ctx), resolve(call.body, ctx), query=query,
                                 ctype=call.ctype)

            code, events = side.watch(path, resolve(step.query, ctx), step.until, step.timeout, opened)
            entry = {"step": f"watch {_generic(path, ns)}", "code": code,
                     "events": step.show(events) if step.show else events}
        entry["step"] = f"{i}: {entry['step']}"
        transcript.append(entry)
    return transcript


def _generic(path: str, ns: str) -> str:
    return path.replace(ns, "{ns}")


# -- normalising -------------------------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
#: per-server noise inside messages: resourceVersions the servers word into their errors
_MESSAGE_NOISE = (
    (re.compile(r"too old resource version: \d+ \(\d+\)"), "too old resource version: <rv> (<rv>)"),
    (re.compile(r"the ResourceVersion in the precondition \(\d+\) does not match the ResourceVersion in record \(\d+\)"),
     "the ResourceVersion in the precondition (<rv>) does not match the ResourceVersion in record (<rv>)"),
    (re.compile(r"Too large resource version: \d+, current: \d+"), "Too large resource version: <rv>, current: <rv>"),
    # an object quoted whole inside a message
    (re.compile(r'(resourceVersion\\*":\\*")\d+'), r"\1<rv>"),
)
_EMBEDDED_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
#: the projected token volume the ServiceAccount admission plugin names with a random suffix
_TOKEN_VOLUME = re.compile(r"\bkube-api-access-[a-z0-9]{5}\b")


def normalise(transcript: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    """The transcript without what two correct servers answer differently: uids (named after the
    object they identify), resourceVersions, recent timestamps, generateName suffixes,
    ``continue`` tokens and the namespace's name."""
    uids: dict[str, str] = {}
    generated: dict[str, str] = {}

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            meta = value.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("uid"), str):
                kind = value.get("kind") or "?"
                uids.setdefault(meta["uid"], f"<uid {kind}/{meta.get('name')}>")
                gen, name = meta.get("generateName"), meta.get("name")
                if isinstance(gen, str) and isinstance(name, str) and name.startswith(gen) and name != gen:
                    generated[name] = gen + "<suffix>"
            for v in value.values():
                collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)

    collect(transcript)
    # names first, so a uid's label shows the generated name in its normalised form
    uids = {u: _replace_names(label, generated) for u, label in uids.items()}
    now = datetime.now(UTC)

    def recent(s: str) -> bool:
        try:
            return abs(datetime.fromisoformat(s.replace("Z", "+00:00")) - now) < timedelta(hours=2)
        except ValueError:
            return False

    def text(s: str) -> str:
        if _TIME.match(s):
            return "<now>" if recent(s) else s
        s = _replace_names(s, generated)
        s = _UUID.sub(lambda m: uids.get(m.group(0), "<uid ?>"), s)
        for pattern, repl in _MESSAGE_NOISE:
            s = pattern.sub(repl, s)
        s = _EMBEDDED_TIME.sub(lambda m: "<now>" if recent(m.group(0)) else m.group(0), s)
        s = _TOKEN_VOLUME.sub("kube-api-access-<suffix>", s)
        return s.replace(ns, "{ns}")

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            out = {text(k): walk(v, k) for k, v in value.items()}
            causes = (out.get("details") or {}).get("causes") if out.get("reason") == "Conflict" else None
            if causes:
                # an apply conflict lists its causes in Go's map order: no order to compare
                out["details"]["causes"] = sorted(causes, key=lambda c: json.dumps(c, sort_keys=True))
            return out
        if isinstance(value, list):
            items = [walk(v, key) for v in value]
            if key == "managedFields":
                # both servers order entries by their time to the second, then by manager: the two
                # sides of a case cross a second's boundary at different steps
                items.sort(key=lambda e: tuple(str(e.get(k, "")) for k in
                                               ("operation", "manager", "apiVersion", "subresource")))
            return items
        if isinstance(value, str):
            if key == "resourceVersion" and value.isdigit():
                return "<rv>"
            if key == "continue" and value:
                return "<continue>"
            return text(value)
        return value

    return [walk(entry) for entry in transcript]


def _replace_names(s: str, generated: dict[str, str]) -> str:
    for name, repl in generated.items():
        if name in s:
            s = s.replace(name, repl)
    return s


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``path -> leaf`` pairs; an empty map or list is a leaf of its own."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from flatten(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


ABSENT = "<absent>"


def compare(kubesim: list[dict[str, Any]], cluster: list[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """The leaves that differ, by path: ``{path: (kubesim's, kube-apiserver's)}``; a leaf one side
    lacks is :data:`ABSENT` there."""
    a = dict(flatten({e["step"]: {k: v for k, v in e.items() if k != "step"} for e in kubesim}))
    b = dict(flatten({e["step"]: {k: v for k, v in e.items() if k != "step"} for e in cluster}))
    return {p: (a.get(p, ABSENT), b.get(p, ABSENT)) for p in sorted(set(a) | set(b)) if a.get(p, ABSENT) != b.get(p, ABSENT)}
