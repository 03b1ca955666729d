"""Object storage for kubesim: objects, the global resourceVersion, watch fan-out with event
history, label and field selectors, and list pagination.

Layer: kubesim (imports nothing from batchd). Called by the HTTP handlers (server.py), the
deletion logic and garbage collector (gc.py) and the fake kubelet (kubelet.py), all on the
server's event loop, so no locking is needed.

Stored objects are never mutated in place: every write stores a new dict. Watch events and the
event history hold references to those snapshots, so fan-out costs no copies, and each event's
JSON encoding is computed once per view and shared by every watcher (kubectl's Table watches,
whose rows show ages, encode per watcher). A watch with a selector sees an object's change across
the selector as DELETED or ADDED, as the real watch cache does.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from kubesim.codec import dumps
from kubesim.errors import ApiError, bad_request, gone

Obj = dict[str, Any]
StorageKey = tuple[str, str]  # (group, plural) of the stored shape
ObjKey = tuple[str, str]  # (namespace or "", name)


class Clock(Protocol):
    """Where kubesim reads time; tests inject a fake one."""

    def now(self) -> datetime:  # UTC-aware
        ...


class RealClock:
    """The wall clock, UTC-aware."""

    def now(self) -> datetime:
        return datetime.now(UTC)  # noqa: TID251 - kubesim is the wall-clock boundary


def timestamp(t: datetime) -> str:
    """RFC 3339 at second precision with ``Z``, as metav1.Time marshals."""
    u = t.astimezone(UTC)
    # Go writes four year digits ("0001"); strftime's %Y leaves years below 1000 unpadded.
    return f"{u.year:04d}-{u:%m-%dT%H:%M:%S}Z"


def micro_timestamp(t: datetime) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime marshals (events' eventTime)."""
    u = t.astimezone(UTC)
    return f"{u.year:04d}-{u:%m-%dT%H:%M:%S.%f}Z"


def parse_timestamp(value: str) -> datetime:
    """Parse a metav1.Time / MicroTime string to an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# --- selectors --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    """One label selector requirement (operator in ``in notin exists ! gt lt``)."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!":
            return self.key not in labels
        if self.op == "in":
            return self.key in labels and labels[self.key] in self.values
        if self.op in ("gt", "lt"):
            try:
                have, want = int(labels[self.key]), int(next(iter(self.values)))
            except (KeyError, ValueError, StopIteration):
                return False
            return have > want if self.op == "gt" else have < want
        # notin and != match objects without the label, as upstream.
        return labels.get(self.key) not in self.values if self.key in labels else True


# The label selector grammar, as apimachinery's lexer and parser read it (their error messages
# are what clients see): tokens are identifiers, the keywords in and notin, and the symbols below.
_SYMBOLS = ("!=", "==", "=", "!", "(", ")", ",", ">", "<")
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = " \t\r\n"
_END = ("end", "")
_BINARY = "in, notin, =, ==, !=, gt, lt"
_OPERATORS = {"in": "in", "notin": "notin", "=": "in", "==": "in", "!=": "notin", ">": "gt", "<": "lt"}


def _label_tokens(text: str) -> list[tuple[str, str]]:
    """(kind, literal) pairs: kind is "id", a keyword, a symbol, "error" or "end"."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append(_END)
            return tokens
        if text[i] in _SPECIAL:
            # the longest run of symbols that still spells one
            j, found = i, None
            while j < n and text[j] in _SPECIAL:
                if text[i:j + 1] in _SYMBOLS:
                    found = j + 1
                elif found is not None:
                    break
                j += 1
            if found is None:
                tokens.append(("error", f"error expected: keyword found '{text[i:j]}'"))
                i = j
            else:
                tokens.append((text[i:found], text[i:found]))
                i = found
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
            j += 1
        word = text[i:j]
        tokens.append((word if word in ("in", "notin") else "id", word))
        i = j


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.tokens = _label_tokens(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        kind, lit = self.tokens[self.pos]
        return ("id", lit) if values and kind in ("in", "notin") else (kind, lit)

    def take(self, values: bool = True) -> tuple[str, str]:
        token = self.peek(values)
        self.pos += 1
        return token

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self.peek()
            if kind == "end":
                return reqs
            if kind not in ("id", "!"):
                raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except ValueError as e:
                raise ValueError(f"unable to parse requirement: {e}") from None
            kind, lit = self.take()
            if kind == "end":
                return reqs
            if kind != ",":
                raise ValueError(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self.peek()
            if kind not in ("id", "!"):
                raise ValueError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        kind, key = self.take()
        negated = kind == "!"
        if negated:
            kind, key = self.take()
        if kind != "id":
            raise ValueError(f"found '{key}', expected: identifier")
        from kubesim.strategy.common import is_qualified_name  # the strategies import the store

        problems = is_qualified_name(key)
        if problems:
            raise ValueError(f"<nil>: Invalid value: {json.dumps(key)}: {'; '.join(problems)}")
        if self.peek()[0] in ("end", ","):
            return Requirement(key, "!" if negated else "exists")
        if negated:  # "!key" takes no operator: what follows is the parser's next complaint
            return Requirement(key, "!")
        kind, lit = self.take(values=False)
        if kind not in _OPERATORS:
            raise ValueError(f"found '{lit}', expected: {_BINARY}")
        op = _OPERATORS[kind]
        values = self.set_values() if kind in ("in", "notin") else self.exact_value()
        from kubesim.strategy.common import is_valid_label_value

        errors: list[str] = []
        if op in ("gt", "lt"):
            for n, v in enumerate(sorted(values)):
                try:
                    int(v)
                except ValueError:
                    errors.append(f"values[{n}]: Invalid value: {json.dumps(v)}: "
                                  "for 'Gt', 'Lt' operators, the value must be an integer")
        for n, v in enumerate(sorted(values)):
            problems = is_valid_label_value(v)
            if problems:
                errors.append(f"values[{n}][{key}]: Invalid value: {json.dumps(v)}: {'; '.join(problems)}")
        if errors:
            raise ValueError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
        return Requirement(key, op, frozenset(values))

    def set_values(self) -> set[str]:
        kind, lit = self.take()
        if kind != "(":
            raise ValueError(f"found '{lit}' expected: '('")
        kind, lit = self.peek()
        if kind == ")":
            self.take()
            return {""}
        if kind not in ("id", ","):
            raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            kind, item = self.take()
            if kind == "id":
                values.add(item)
                nxt, lit2 = self.peek()
                if nxt == ")":
                    break
                if nxt != ",":
                    raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            elif kind == ",":
                if not values:
                    values.add("")  # "(," and ",," and ",)" name the empty value
                if self.peek()[0] == ")":
                    values.add("")
                    break
                if self.peek()[0] == ",":
                    self.take()
                    values.add("")
            else:
                raise ValueError(f"found '{item}', expected: ',', or identifier")
        kind, _ = self.take()
        if kind != ")":
            raise ValueError(f"found '{lit}', expected: ')'")
        return values

    def exact_value(self) -> set[str]:
        if self.peek()[0] in ("end", ","):
            return {""}
        kind, lit = self.take()
        if kind != "id":
            raise ValueError(f"found '{lit}', expected: identifier")
        return {lit}


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse ``labelSelector``; a malformed one is a 400 in the parser's words."""
    if not text:
        return []
    try:
        return _LabelParser(text).parse()
    except ValueError as e:
        raise bad_request(str(e)) from None


@dataclass(frozen=True)
class FieldRequirement:
    """``label=value`` or ``label!=value``: ``value_of`` reads the label's value off an object."""

    label: str
    value: str
    negate: bool
    value_of: Callable[[Obj], str] | None = None

    def matches(self, obj: Obj) -> bool:
        have = self.value_of(obj) if self.value_of else field_value(obj, tuple(self.label.split(".")))
        return (have == self.value) != self.negate


def field_value(obj: Obj, path: tuple[str, ...]) -> str:
    """The string form of a field for field selectors; a missing field is ``""``."""
    node: Any = obj
    for part in path:
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
        if node is None:
            return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, (dict, list)):
        return ""
    return str(node)


def parse_field_selector(text: str | None) -> list[FieldRequirement]:
    """Parse ``fieldSelector`` (``=``, ``==``, ``!=``, comma-joined, ``\\`` escapes) into
    requirements on labels; whether a kind selects on a label is the caller's to say."""
    if not text:
        return []
    reqs: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        for op in ("!=", "==", "="):
            at = _find_unescaped(term, op)
            if at >= 0:
                label, raw = term[:at], term[at + len(op):]
                reqs.append(FieldRequirement(label, _unescape_field_value(raw), op == "!="))
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
    return reqs


def _find_unescaped(text: str, needle: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(needle, i):
            return i
        i += 1
    return -1


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if text[i] == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(text[i])
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape_field_value(raw: str) -> str:
    out, i = [], 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\":
            if i + 1 >= len(raw) or raw[i + 1] not in "\\,=":
                nxt = raw[i + 1] if i + 1 < len(raw) else ""
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{nxt}")
            out.append(raw[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise bad_request(f"invalid field selector: unescaped character in value: {ord(ch)}")
        out.append(ch)
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class Filter:
    """What a list or watch asks for: namespace, label and field selectors, and the view.

    ``view`` converts a stored object to the shape the client asked for (events.k8s.io events)
    before field selectors see it, so ``regarding.name`` works on that view.
    """

    namespace: str | None = None
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()
    view: Callable[[Obj], Obj] | None = None

    def matches(self, obj: Obj) -> bool:
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if self.labels:
            labels = meta.get("labels") or {}
            if not all(r.matches(labels) for r in self.labels):
                return False
        if self.fields:
            shaped = self.view(obj) if self.view else obj
            if not all(r.matches(shaped) for r in self.fields):
                return False
        return True

    def select(self, event: WatchEvent) -> WatchEvent | None:
        """The event a watcher with this filter sees, if any, as the watch cache decides it:
        a change that makes an object stop matching is a DELETED (of its previous state, at
        the new resourceVersion) and one that makes it start matching is an ADDED."""
        if not self.matches(event.obj):
            if event.prev is not None and (self.labels or self.fields) and self.matches(event.prev):
                return event.variant("DELETED")
            return None
        if event.prev is not None and (self.labels or self.fields) and not self.matches(event.prev):
            return event.variant("ADDED")
        return event


_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")


def _decode_continue_token(token: str) -> dict[str, Any]:
    """A continue token's fields, or the 400 the API server answers with, in Go's words."""
    def refuse(detail: str) -> ApiError:
        return bad_request(f"invalid continue token: continue key is not valid{detail}")

    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    bad = next((i for i, ch in enumerate(token) if ch not in alphabet), None)
    if bad is None and len(token) % 4 == 1:
        bad = len(token) - 1
    if bad is not None:
        raise refuse(f": illegal base64 data at input byte {bad}")
    data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    text = data.lstrip(b" \t\r\n")
    if not text:
        raise refuse(": unexpected end of JSON input")
    if text[:1] not in b'{["-0123456789tfn':
        raise refuse(f": invalid character {_go_quote_char(text[0])} looking for beginning of value")
    try:
        parsed = json.loads(data)
    except ValueError:
        raise refuse(": unexpected end of JSON input") from None
    if parsed is not None and not isinstance(parsed, dict):
        kind = {list: "array", str: "string", bool: "bool"}.get(type(parsed), "number")
        raise refuse(f": json: cannot unmarshal {kind} into Go value of type storage.continueToken")
    parsed = parsed or {}
    version = parsed.get("v") if isinstance(parsed.get("v"), str) else ""
    if version != "meta.k8s.io/v1":
        raise refuse(f": server does not recognize this encoded version {version}")
    rv = parsed.get("rv")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise refuse(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    start = parsed.get("start")
    if not isinstance(start, str) or not start:
        raise refuse(": encoded start key empty (version meta.k8s.io/v1)")
    return {"rv": rv, "start": start}


def _go_quote_char(c: int) -> str:
    """A byte as Go's JSON decoder quotes it in an error."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    ch = chr(c)
    if ch.isprintable():
        return f"'{ch}'"
    escapes = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r"}
    if c in escapes:
        return f"'{escapes[c]}'"
    return f"'\\x{c:02x}'" if c < 0x80 else f"'\\u{c:04x}'"


# --- events and watchers ----------------------------------------------------------------------


@dataclass(eq=False)
class WatchEvent:
    """One change: type (ADDED, MODIFIED, DELETED), the object snapshot and its storage key.

    A MODIFIED event also holds ``prev``, the stored object it replaced, so that selective
    watches can tell objects entering and leaving their selection (:meth:`Filter.select`); a
    DELETED one holds ``before``, the stored object it removed (a list at an older
    resourceVersion puts it back).
    """

    type: str
    obj: Obj
    key: StorageKey
    rv: int
    prev: Obj | None = None
    before: Obj | None = None
    # Encoded ``{"type":..,"object":..}\n`` lines per view name, computed on first use.
    lines: dict[str, bytes] = field(default_factory=dict)
    # The ADDED / DELETED forms of a MODIFIED event, built once and shared by the watchers.
    variants: dict[str, WatchEvent] = field(default_factory=dict)

    def variant(self, kind: str) -> WatchEvent:
        """This change seen by a watch whose selection it enters (ADDED, the new object) or
        leaves (DELETED, the previous object at this event's resourceVersion)."""
        found = self.variants.get(kind)
        if found is None:
            if kind == "ADDED":
                found = WatchEvent("ADDED", self.obj, self.key, self.rv)
            else:
                assert self.prev is not None
                prev = self.prev
                obj = {**prev, "metadata": {**prev["metadata"], "resourceVersion": str(self.rv)}}
                found = WatchEvent("DELETED", obj, self.key, self.rv)
            self.variants[kind] = found
        return found

    def line(self, view_name: str, view: Callable[[Obj], Obj] | None) -> bytes:
        cached = self.lines.get(view_name)
        if cached is None:
            body = view(self.obj) if view else self.obj
            cached = b'{"type":"' + self.type.encode() + b'","object":' + dumps(body) + b"}\n"
            self.lines[view_name] = cached
        return cached


CLOSE = object()  # sentinel pushed to a watcher's queue to end its stream
BOOKMARK = object()  # sentinel asking the stream to send a bookmark now


class Watcher:
    """One open watch: a filter and a queue the store fans matching events into."""

    def __init__(self, key: StorageKey, flt: Filter) -> None:
        self.key = key
        self.filter = flt
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    def offer(self, event: WatchEvent) -> None:
        selected = self.filter.select(event)
        if selected is not None:
            self.queue.put_nowait(selected)

    def close(self) -> None:
        self.queue.put_nowait(CLOSE)


Listener = Callable[[WatchEvent], None]


# --- the store --------------------------------------------------------------------------------


class Store:
    """All objects, keyed by storage key then (namespace, name), plus the watch machinery."""

    def __init__(self, watch_window: int = 20_000) -> None:
        self.rv = 0
        self._objects: dict[StorageKey, dict[ObjKey, Obj]] = {}
        self._history: deque[WatchEvent] = deque(maxlen=max(1, watch_window))
        # The rv of the newest event dropped from the history: a watch from an older rv
        # would miss it, so it gets 410 Gone.
        self.compacted_rv = 0
        # etcd's compaction (:meth:`compact`): a read at an older rv, or a watch from one of a
        # kind kube-apiserver keeps no watch cache for, gets 410 Gone
        self.storage_compacted_rv = 0
        self._watchers: dict[StorageKey, set[Watcher]] = {}
        self._listeners: list[Listener] = []
        # uid -> (storage key, namespace, name), for owner lookups by the garbage collector.
        self.by_uid: dict[str, tuple[StorageKey, str, str]] = {}
        # owner uid -> uids of objects whose ownerReferences name it.
        self.dependents: dict[str, set[str]] = {}

    # -- reads --

    def get(self, key: StorageKey, namespace: str, name: str) -> Obj | None:
        bucket = self._objects.get(key)
        return bucket.get((namespace, name)) if bucket else None

    def get_by_uid(self, uid: str) -> tuple[StorageKey, Obj] | None:
        where = self.by_uid.get(uid)
        if where is None:
            return None
        obj = self.get(where[0], where[1], where[2])
        return (where[0], obj) if obj is not None else None

    def iter(self, key: StorageKey, namespace: str | None = None) -> Iterator[Obj]:
        bucket = self._objects.get(key, {})
        if namespace is None:
            return iter(list(bucket.values()))
        return iter([o for (ns, _), o in bucket.items() if ns == namespace])

    def keys(self) -> Iterable[StorageKey]:
        return list(self._objects)

    def count(self) -> int:
        return sum(len(b) for b in self._objects.values())

    def select(
        self, key: StorageKey, flt: Filter, limit: int = 0, continue_token: str | None = None,
        at: int | None = None,
    ) -> tuple[list[Obj], str | None, int | None, int]:
        """Matching objects sorted by (namespace, name), a continue token, remaining count, and the
        resourceVersion the list is at: ``at`` (a list at an exact resourceVersion), else the
        current one. A continued list is read at its first page's, as the API server reads it."""
        start: ObjKey | None = None
        if continue_token:
            start, at = self._decode_continue(continue_token)
        if at is None or at >= self.rv:
            at = self.rv
            bucket = self._objects.get(key, {})
        else:
            bucket = self._bucket_at(key, at)
        names = sorted(bucket) if flt.namespace is None else sorted(k for k in bucket if k[0] == flt.namespace)
        items: list[Obj] = []
        last: ObjKey | None = None
        remaining = 0
        for k in names:
            if start is not None and k <= start:
                continue
            obj = bucket[k]
            if not flt.matches(obj):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                continue
            items.append(obj)
            last = k
        if limit and remaining and last is not None:
            return items, self._encode_continue(last, at), remaining, at
        return items, None, None, at

    def _bucket_at(self, key: StorageKey, at: int) -> dict[ObjKey, Obj]:
        """The objects of one kind as they were at resourceVersion ``at``: the current ones with
        the retained changes since undone, newest first."""
        if at < max(self.compacted_rv, self.storage_compacted_rv):
            raise gone("The resourceVersion for the provided list is too old.")
        later = []
        for event in reversed(self._history):
            if event.rv <= at:
                break
            if event.key == key:
                later.append(event)
        live = self._objects.get(key, {})
        if not later:
            return live
        bucket = dict(live)
        for event in later:
            meta = event.obj["metadata"]
            okey = (meta.get("namespace", ""), meta["name"])
            if event.type == "ADDED":
                bucket.pop(okey, None)
            elif event.type == "MODIFIED" and event.prev is not None:
                bucket[okey] = event.prev
            elif event.type == "DELETED" and event.before is not None:
                bucket[okey] = event.before
        return bucket

    def _encode_continue(self, last: ObjKey, rv: int) -> str:
        # the API server's token: the storage key to go on from (just after the last item)
        start = (f"{last[0]}/{last[1]}" if last[0] else last[1]) + "\x00"
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def _decode_continue(self, token: str) -> tuple[ObjKey, int | None]:
        """Where a continued list starts, and the resourceVersion it is read at (None: the latest,
        for a token of -1, which an expired one's 410 hands out to go on inconsistently)."""
        data = _decode_continue_token(token)
        rv, start = data["rv"], data["start"]
        ns, _, name = start.rstrip("\x00").rpartition("/")
        if 0 < rv < max(self.compacted_rv, self.storage_compacted_rv):
            raw = json.dumps({"v": "meta.k8s.io/v1", "rv": -1, "start": start}, separators=(",", ":"))
            raise ApiError(410, "Expired", _INCONSISTENT_CONTINUE,
                           continue_token=base64.urlsafe_b64encode(raw.encode()).decode().rstrip("="))
        return (ns, name), rv if rv > 0 else None

    # -- writes (each bumps the global resourceVersion and emits one event) --

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def create(self, key: StorageKey, obj: Obj) -> Obj:
        """Store a new object (caller checked it is new); sets resourceVersion, emits ADDED."""
        meta = obj["metadata"]
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        self._objects.setdefault(key, {})[(meta.get("namespace", ""), meta["name"])] = obj
        self._index(key, obj, None)
        self._emit(WatchEvent("ADDED", obj, key, rv))
        return obj

    def replace(self, key: StorageKey, obj: Obj) -> Obj:
        """Store a new version of an existing object; sets resourceVersion, emits MODIFIED."""
        meta = obj["metadata"]
        okey = (meta.get("namespace", ""), meta["name"])
        bucket = self._objects[key]
        old = bucket[okey]
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        bucket[okey] = obj
        self._index(key, obj, old)
        self._emit(WatchEvent("MODIFIED", obj, key, rv, old))
        return obj

    def remove(self, key: StorageKey, obj: Obj) -> Obj:
        """Remove an object; the DELETED event carries ``obj`` (its last state) at a new rv."""
        meta = obj["metadata"]
        okey = (meta.get("namespace", ""), meta["name"])
        old = self._objects[key].pop(okey)
        rv = self._next_rv()
        # ``obj`` may be the stored snapshot other events still reference: copy, don't mutate.
        obj = {**obj, "metadata": {**meta, "resourceVersion": str(rv)}}
        self._unindex(old)
        self._emit(WatchEvent("DELETED", obj, key, rv, before=old))
        return obj

    def _index(self, key: StorageKey, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        self.by_uid[uid] = (key, meta.get("namespace", ""), meta["name"])
        new_owners = {r.get("uid") for r in meta.get("ownerReferences") or ()}
        old_owners = {r.get("uid") for r in (old["metadata"].get("ownerReferences") or ())} if old else set()
        for owner in old_owners - new_owners:
            deps = self.dependents.get(owner)
            if deps is not None:
                deps.discard(uid)
                if not deps:
                    del self.dependents[owner]
        for owner in new_owners - old_owners:
            if owner:
                self.dependents.setdefault(owner, set()).add(uid)

    def _unindex(self, obj: Obj) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        self.by_uid.pop(uid, None)
        for ref in meta.get("ownerReferences") or ():
            deps = self.dependents.get(ref.get("uid"))
            if deps is not None:
                deps.discard(uid)
                if not deps:
                    del self.dependents[ref.get("uid")]

    def _emit(self, event: WatchEvent) -> None:
        if len(self._history) == self._history.maxlen:
            self.compacted_rv = self._history[0].rv
        self._history.append(event)
        for watcher in self._watchers.get(event.key, ()):
            watcher.offer(event)
        for listener in self._listeners:
            listener(event)

    # -- watch --

    def add_listener(self, listener: Listener) -> None:
        """In-process subscribers (garbage collector, kubelet): called synchronously per event."""
        self._listeners.append(listener)

    def watch(self, key: StorageKey, flt: Filter, since: int | None, *,
              cached: bool = True) -> tuple[Watcher, list[WatchEvent]]:
        """Open a watch; returns the watcher and the events to send first.

        ``since`` None: synthetic ADDED for every matching object. Otherwise the retained
        events after ``since``; 410 Gone if some of them were already dropped, or, for a kind
        without a watch cache (not ``cached``), compacted.
        """
        if since is not None and since < self.compacted_rv:
            raise gone(f"too old resource version: {since} ({self.compacted_rv})")
        if since is not None and not cached and since < self.storage_compacted_rv:
            raise gone("The resourceVersion for the provided watch is too old.")
        watcher = Watcher(key, flt)
        if since is None:
            # in key order, as the watch cache holds them
            bucket = self._objects.get(key, {})
            initial = [
                WatchEvent("ADDED", bucket[k], key, int(bucket[k]["metadata"]["resourceVersion"]))
                for k in sorted(bucket)
                if (flt.namespace is None or k[0] == flt.namespace) and flt.matches(bucket[k])
            ]
        else:
            selected = (flt.select(e) for e in self._history if e.rv > since and e.key == key)
            initial = [e for e in selected if e is not None]
        self._watchers.setdefault(key, set()).add(watcher)
        return watcher, initial

    def compact(self, rv: int) -> None:
        """etcd compacts its revisions before ``rv``."""
        self.storage_compacted_rv = max(self.storage_compacted_rv, rv)

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.get(watcher.key, set()).discard(watcher)

    def all_watchers(self) -> list[Watcher]:
        return [w for ws in self._watchers.values() for w in ws]
