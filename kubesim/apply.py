"""Server-side apply for kubesim's kinds: field ownership (``managedFields``) and the apply merge.

Layer: kubesim (imports nothing from batchd). Called by the server for ``PATCH`` with
``application/apply-patch+yaml`` and, to keep ownership current, for every create and update
that names a ``fieldManager`` or touches an object that already has managed fields.

No maintained Python implementation of structured-merge-diff exists, so this is the subset
kubesim's kinds (Namespace, Pod, Event, Job, CronJob, Lease) need:

- a field set is a set of paths in ``FieldsV1`` notation (``f:name``, ``k:{"name":"x"}`` for an
  item of an associative list, ``v:"x"`` for a member of a set, ``.`` for the item itself);
- lists are associative (merged by key) where the table below says so, sets for
  ``finalizers``, atomic (owned and replaced whole) otherwise; maps and structs are granular
  but for those the schema marks atomic (a label selector, ``nodeSelector``, object references);
- apply conflicts when another manager owns a field whose value the applied configuration
  changes (409 in the API server's words); ``force`` takes those fields over;
- fields the applier owned before and no longer applies are removed unless someone else owns
  them; an ``Update`` takes ownership of what it changed away from every other manager.

Left out: per-version field sets (kubesim serves one version per kind), defaulted list keys
(``protocol`` of ports is matched only when given), and ``apply-patch+cbor``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kubesim.codec import clone
from kubesim.errors import ApiError, Cause

__all__ = [
    "APPLY_PATCH",
    "FieldSet",
    "apply",
    "create_entries",
    "fields_of",
    "update_entries",
]

APPLY_PATCH = "application/apply-patch+yaml"

Obj = dict[str, Any]
Path = tuple[str, ...]
FieldSet = frozenset[Path]

# List fields merged by key (the list's field name → key fields), as the kinds' schemas mark them.
LIST_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "ports": ("containerPort", "protocol"),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "hostAliases": ("ip",),
    "schedulingGates": ("name",),
    "resourceClaims": ("name",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "podIPs": ("ip",),
    "hostIPs": ("ip",),
}
SET_LISTS = frozenset({"finalizers"})
# Maps and structs the schema marks atomic (``+structType=atomic``, ``+mapType=atomic``), by field
# name: owned and replaced whole, as a leaf. Among kubesim's kinds each of these names is atomic
# wherever it occurs.
ATOMIC = frozenset({
    "selector", "labelSelector", "namespaceSelector", "nodeSelector", "involvedObject", "regarding", "related",
    "fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef",
    "requiredDuringSchedulingIgnoredDuringExecution", "preference", "dataSource",
})
# Keyed lists whose items are atomic structs: an item is a leaf of its own.
ATOMIC_ITEMS = frozenset({"ownerReferences", "imagePullSecrets"})
# Metadata the server owns: never part of a field set.
_SYSTEM_META = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink",
})


def _item_key(name: str, item: Any) -> str | None:
    keys = LIST_KEYS.get(name)
    if keys is None or not isinstance(item, dict):
        return None
    picked = {k: item[k] for k in sorted(keys) if k in item}
    if not picked:
        return None
    return "k:" + json.dumps(picked, separators=(",", ":"), sort_keys=True)


def _walk(value: Any, path: Path, out: set[Path], containers: bool) -> None:
    if isinstance(value, dict) and value and not (path and path[-1][2:] in ATOMIC):
        if containers and path:
            out.add((*path, "."))
        for k, v in value.items():
            _walk(v, (*path, f"f:{k}"), out, containers)
        return
    if isinstance(value, list) and path:
        name = path[-1][2:]
        if name in SET_LISTS and path[:-1] == ("f:metadata",):  # a namespace's spec.finalizers is atomic
            for item in value:
                out.add((*path, "v:" + json.dumps(item, separators=(",", ":"))))
            if not value:
                out.add(path)
            elif containers:
                out.add((*path, "."))
            return
        keys = [_item_key(name, item) for item in value]
        if value and all(keys):
            if containers:
                out.add((*path, "."))
            for key, item in zip(keys, value, strict=True):
                assert key is not None
                if name in ATOMIC_ITEMS:
                    out.add((*path, key))
                    continue
                out.add((*path, key, "."))
                _walk(item, (*path, key), out, containers)
            return
    out.add(path)


def fields_of(obj: Obj, *, subresource: str = "", containers: bool = False) -> FieldSet:
    """The paths an object sets, without what the server owns (system metadata) or what the
    endpoint resets (the status on the main resource, the spec on the status subresource).

    An item of a keyed list is a path of its own (``k:{…}`` then ``.``); with ``containers``, so
    is every non-empty map, struct and list (``.`` under it): an ``Update`` owns a container it
    added, as structured-merge-diff's comparison reports it, where an ``Apply`` owns its leaves.
    """
    out: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == ("spec" if subresource == "status" else "status"):
            continue
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _SYSTEM_META}
            if not value:
                continue
        _walk(value, (f"f:{key}",), out, containers)
    return frozenset(out)


def _changed(base: Any, new: Any, fields: FieldSet) -> FieldSet:
    """What of ``fields`` (of ``new``) an Update changed from ``base``: leaves with another
    value, and containers ``base`` lacks."""
    out = set()
    for p in fields:
        if p[-1] == ".":
            if value_at(base, p[:-1]) is _MISSING:
                out.add(p)
        elif value_at(base, p) != value_at(new, p):
            out.add(p)
    return frozenset(out)


def to_fields_v1(fields: Iterable[Path]) -> dict[str, Any]:
    """A field set as the ``fieldsV1`` trie the API shows: a container owned without any of its
    fields is written as a leaf (``{}``), not as ``{".": {}}``."""
    root: dict[str, Any] = {}
    for path in sorted(fields):
        node = root
        for part in path:
            node = node.setdefault(part, {})

    def collapse(node: dict[str, Any]) -> dict[str, Any]:
        if list(node) == ["."]:
            return {}
        return {k: collapse(v) for k, v in node.items()}

    return collapse(root)


def _both_forms(paths: FieldSet) -> FieldSet:
    """A container's own path in either form: ``(…, ".")`` and the leaf ``fieldsV1`` reads back."""
    return paths | {p[:-1] for p in paths if p[-1] == "."}


def from_fields_v1(trie: Any) -> FieldSet:
    out: set[Path] = set()

    def walk(node: Any, path: Path) -> None:
        if not isinstance(node, dict) or not node:
            if path:
                out.add(path)
            return
        for k, v in node.items():
            walk(v, (*path, k))

    walk(trie, ())
    return frozenset(out)


# -- values at paths ---------------------------------------------------------------------------

_MISSING = object()


def _find_item(items: list[Any], name: str, part: str) -> int | None:
    for i, item in enumerate(items):
        if part.startswith("k:") and _item_key(name, item) == part:
            return i
        if part.startswith("v:") and "v:" + json.dumps(item, separators=(",", ":")) == part:
            return i
    return None


def value_at(obj: Any, path: Path) -> Any:
    """The value a path names in ``obj`` (``_MISSING`` when absent)."""
    node, name = obj, ""
    for part in path:
        if part == ".":
            return node
        if part.startswith("f:"):
            if not isinstance(node, dict) or part[2:] not in node:
                return _MISSING
            name, node = part[2:], node[part[2:]]
        else:
            if not isinstance(node, list):
                return _MISSING
            i = _find_item(node, name, part)
            if i is None:
                return _MISSING
            node = node[i]
    return node


def _remove(obj: Any, path: Path) -> None:
    if path and path[-1] == ".":
        path = path[:-1]
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if last.startswith("f:"):
        if isinstance(parent, dict):
            parent.pop(last[2:], None)
        return
    if isinstance(parent, list):
        name = path[-2][2:] if len(path) > 1 else ""
        i = _find_item(parent, name, last)
        if i is not None:
            parent.pop(i)


def _merge(current: Any, applied: Any, name: str) -> Any:
    if isinstance(current, dict) and isinstance(applied, dict) and name not in ATOMIC:
        out = dict(current)
        for k, v in applied.items():
            out[k] = _merge(current.get(k, _MISSING), v, k)
        return out
    if isinstance(current, list) and isinstance(applied, list):
        if name in SET_LISTS:
            return current + [v for v in applied if v not in current]
        keys = [_item_key(name, item) for item in applied]
        if applied and all(keys):
            out_list = list(current)
            for key, item in zip(keys, applied, strict=True):
                i = _find_item(out_list, name, key or "")
                if i is None:
                    out_list.append(clone(item))
                else:
                    out_list[i] = clone(item) if name in ATOMIC_ITEMS else _merge(out_list[i], item, "")
            return out_list
    return clone(applied)


# -- path text, as structured-merge-diff prints it ---------------------------------------------


def path_text(path: Path) -> str:
    out = []
    for part in path:
        if part == ".":
            continue
        if part.startswith("f:"):
            out.append("." + part[2:])
        elif part.startswith("k:"):
            keys = json.loads(part[2:])
            out.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]")
        else:
            out.append(f"[={part[2:]}]")
    return "".join(out)


# -- managed field entries ---------------------------------------------------------------------


def _entry(manager: str, operation: str, api_version: str, now: str, fields: FieldSet,
           subresource: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"manager": manager, "operation": operation, "apiVersion": api_version,
                             "time": now, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(fields)}
    if subresource:
        entry["subresource"] = subresource
    return entry


def _ident(entry: dict[str, Any]) -> tuple[str, str, str]:
    return entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", "")


def _owner_text(entry: dict[str, Any]) -> str:
    text = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        text += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == "Update":
        text += f" using {entry.get('apiVersion', '')}"
    return text


def _ordered(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API server's order of managedFields: Apply before Update, then oldest first (to the
    second), then by manager, apiVersion and subresource. Clients read ``managedFields[0]``."""
    return sorted(entries, key=lambda e: (e.get("operation", ""), e.get("time") or "", e.get("manager", ""),
                                          e.get("apiVersion", ""), e.get("subresource", "")))


def create_entries(obj: Obj, zero: Obj, manager: str, operation: str, now: str,
                   subresource: str = "") -> list[dict[str, Any]]:
    """The managedFields of a newly created object: what it sets beyond ``zero``, the empty
    object of its kind as Go writes it."""
    fields = _changed(zero, obj, fields_of(obj, subresource=subresource, containers=True))
    return [_entry(manager, operation, obj.get("apiVersion", ""), now, fields, subresource)] if fields else []


def update_entries(old: Obj, new: Obj, manager: str, now: str, subresource: str = "") -> list[dict[str, Any]]:
    """The managedFields after an ``Update`` by ``manager``: it owns what it changed, which
    every other manager loses; fields that are gone are owned by no one."""
    entries = [dict(e) for e in old["metadata"].get("managedFields") or []]
    new_fields = fields_of(new, subresource=subresource, containers=True)
    old_fields = fields_of(old, subresource=subresource, containers=True)
    changed = _changed(old, new, new_fields)
    gone = _both_forms(old_fields - new_fields)
    taken = _both_forms(changed)
    ident = (manager, "Update", subresource)
    out: list[dict[str, Any]] = []
    mine: FieldSet = changed
    for e in entries:
        owned = from_fields_v1(e.get("fieldsV1"))
        if _ident(e) == ident:
            mine = (owned - gone) | changed
            continue
        kept = owned - taken - gone
        if kept != owned:
            e = {**e, "fieldsV1": to_fields_v1(kept)}
        if kept:
            out.append(e)
    if mine:
        previous = next((e for e in entries if _ident(e) == ident), None)
        if previous is not None and not changed:
            # nothing taken: the entry keeps its time (a manager's time is that of its last change)
            out.append(previous if from_fields_v1(previous.get("fieldsV1")) == mine
                       else {**previous, "fieldsV1": to_fields_v1(mine)})
        else:
            out.append(_entry(manager, "Update", new.get("apiVersion", ""), now, mine, subresource))
    return _ordered(out)


def apply(current: Obj | None, applied: Obj, manager: str, *, force: bool, now: str) -> Obj:
    """The object after ``manager`` applies ``applied`` to ``current`` (None: it does not exist
    yet), with its managedFields set.

    Raises:
        ApiError: 409 Conflict listing the fields other managers own with other values.
    """
    api_version = applied.get("apiVersion", "")
    fields = fields_of(applied)
    ident = (manager, "Apply", "")
    obj: Obj
    if current is None:
        obj = clone(applied)
        obj.setdefault("metadata", {})["managedFields"] = [_entry(manager, "Apply", api_version, now, fields)]
        return obj
    entries = [dict(e) for e in current["metadata"].get("managedFields") or []]
    conflicts: list[tuple[dict[str, Any], Path]] = []
    owned_by = [(e, from_fields_v1(e.get("fieldsV1"))) for e in entries]
    for e, owned in owned_by:
        if _ident(e) == ident:
            continue
        for p in sorted(owned & fields):
            if p[-1] != "." and value_at(current, p) != value_at(applied, p):
                conflicts.append((e, p))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    taken = frozenset(p for _, p in conflicts)
    before = next((owned for e, owned in owned_by if _ident(e) == ident), frozenset())
    others = frozenset().union(*(owned - taken for e, owned in owned_by if _ident(e) != ident))
    obj = clone(current)
    for p in sorted(before - fields - others, key=len, reverse=True):
        _remove(obj, p)
    body = {k: v for k, v in applied.items() if k not in ("apiVersion", "kind")}
    meta = body.get("metadata") or {}
    body["metadata"] = {k: v for k, v in meta.items() if k not in _SYSTEM_META}
    obj = _merge(obj, body, "")
    out: list[dict[str, Any]] = []
    for e, owned in owned_by:
        if _ident(e) == ident:
            continue
        kept = owned - taken
        if kept:
            out.append(e if kept == owned else {**e, "fieldsV1": to_fields_v1(kept)})
    previous = next((e for e, owned in owned_by if _ident(e) == ident), None)
    entry = _entry(manager, "Apply", api_version, now, fields)
    if _content(obj) == _content(current):
        # an apply that changes nothing does not stamp its manager: the time stays the last
        # change's (none for a new manager)
        entry.pop("time")
        if previous is not None and previous.get("time"):
            entry["time"] = previous["time"]
    out.append(previous if previous is not None and from_fields_v1(previous.get("fieldsV1")) == fields
               and previous.get("time") == entry.get("time") else entry)
    obj["metadata"]["managedFields"] = _ordered(out)
    return obj


def _content(obj: Obj) -> Obj:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}


def _conflict_error(conflicts: list[tuple[dict[str, Any], Path]]) -> ApiError:
    n = len(conflicts)
    if n == 1:
        entry, path = conflicts[0]
        detail = f"conflict with {_owner_text(entry)}: {path_text(path)}"
    else:
        by_owner: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_owner.setdefault(_owner_text(entry), []).append(path_text(path))
        lines: list[str] = []
        for owner in sorted(by_owner):
            lines.append(f"conflicts with {owner}:")
            lines.extend(f"- {p}" for p in by_owner[owner])
        detail = "\n".join(lines)
    causes = [Cause(path_text(p), "FieldManagerConflict", f"conflict with {_owner_text(e)}") for e, p in conflicts]
    return ApiError(409, "Conflict", f"Apply failed with {n} conflict{'s' if n > 1 else ''}: {detail}",
                    causes=causes)
