"""Patch application: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902).

Layer: kubesim (imports nothing from batchd). Called by the server's PATCH handler, which
applies the patch to the current object and then runs the result through the normal update
path (resourceVersion check, strategy.prepare_update, finalizer rules).

Strategic merge is driven by a table of merge keys for the fields of the served kinds
(Pod, Job, CronJob, Event, Namespace, Lease) rather than by Go struct tags; a field not in the
table is replaced as a whole, as upstream does for lists without a patch strategy.
"""

from __future__ import annotations

from typing import Any

from kubesim.codec import clone
from kubesim.errors import ApiError, bad_request

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Lists of objects merged by key (patchStrategy "merge", patchMergeKey) in the served kinds.
MERGE_KEYS: dict[str, str] = {
    "ownerReferences": "uid",
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}
# Lists of scalars merged as sets (patchStrategy "merge" without a key).
MERGE_PRIMITIVE_LISTS = frozenset({"finalizers"})

_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def unprocessable(message: str) -> ApiError:
    """422 as kube-apiserver answers a patch that cannot be applied."""
    return ApiError(422, "Invalid", message)


# --- JSON merge patch -------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = merge_patch(result.get(key), value)
        else:
            result[key] = clone(value)
    return result


# --- strategic merge patch --------------------------------------------------------------------


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch (the subset of directives kubectl and batchd send)."""
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch must be a JSON object")
    if not isinstance(target, dict):
        target = {}
    return _smp_map(target, patch)


def _smp_map(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise bad_request(f"Unknown patch type: {directive}")
    result = dict(original)
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise bad_request("$retainKeys must be a list")
        result = {k: v for k, v in result.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith(_SET_ORDER):
            if not isinstance(value, list):
                raise bad_request(f"{key} must be a list")
            orders[key[len(_SET_ORDER):]] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE):]
            if not isinstance(value, list):
                raise bad_request(f"{key} must be a list")
            current = result.get(field)
            if isinstance(current, list):
                result[field] = [v for v in current if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            if value.get("$patch") == "delete":
                result.pop(key, None)
                continue
            result[key] = _smp_map(current if isinstance(current, dict) else {}, value)
        elif isinstance(value, list):
            result[key] = _smp_list(key, current if isinstance(current, list) else [], value)
        else:
            result[key] = clone(value)
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _apply_order(field, result[field], order)
    return result


def _smp_list(field: str, original: list[Any], patch: list[Any]) -> list[Any]:
    if field in MERGE_PRIMITIVE_LISTS:
        merged = list(original)
        for item in patch:
            if item not in merged:
                merged.append(clone(item))
        return _interleave(merged, patch, original, lambda item: item)
    key = MERGE_KEYS.get(field)
    if key is None:
        # No patch strategy: the patch's list replaces the original (directives dropped).
        return [clone(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [clone(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    merged = [clone(i) for i in original]
    for item in patch:
        if not isinstance(item, dict):
            raise bad_request(f"list {field} with merge key {key} must contain objects")
        if key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {key}")
        idx = next((n for n, o in enumerate(merged) if isinstance(o, dict) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                merged.pop(idx)
            continue
        if idx is None:
            merged.append(_smp_map({}, item))
        else:
            merged[idx] = _smp_map(merged[idx], item)
    kept = [i for i in patch if not (isinstance(i, dict) and i.get("$patch") == "delete")]
    return _interleave(merged, kept, original, lambda item: item.get(key) if isinstance(item, dict) else item)


def _interleave(merged: list[Any], patch: list[Any], original: list[Any], ident: Any) -> list[Any]:
    """The order the API server gives a merged list: the patch's items in the patch's order and
    the others in their old order, each of the others placed before a patch item only where it
    came before that item in the old list (so new items lead)."""
    in_patch = {json_key(ident(i)): n for n, i in enumerate(patch)}
    was = {json_key(ident(i)): n for n, i in enumerate(original)}
    patched = sorted((i for i in merged if json_key(ident(i)) in in_patch), key=lambda i: in_patch[json_key(ident(i))])
    others = [i for i in merged if json_key(ident(i)) not in in_patch]
    out: list[Any] = []
    while others or patched:
        if not patched:
            out.append(others.pop(0))
        elif not others:
            out.append(patched.pop(0))
        else:
            left, right = was.get(json_key(ident(others[0]))), was.get(json_key(ident(patched[0])))
            out.append(others.pop(0) if left is not None and right is not None and left < right else patched.pop(0))
    return out


def _apply_order(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = MERGE_KEYS.get(field)

    def ident(item: Any) -> Any:
        if key is not None and isinstance(item, dict):
            return item.get(key)
        return item

    wanted = [ident(o) for o in order]
    position = {json_key(v): n for n, v in enumerate(wanted)}
    known = [i for i in items if json_key(ident(i)) in position]
    rest = [i for i in items if json_key(ident(i)) not in position]
    known.sort(key=lambda i: position[json_key(ident(i))])
    return known + rest


def json_key(value: Any) -> Any:
    """A hashable stand-in for a JSON scalar or object (merge keys are scalars)."""
    if isinstance(value, (dict, list)):
        return repr(value)
    return value


# --- JSON patch -------------------------------------------------------------------------------


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test; a failed op is a 422."""
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    doc = clone(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation: {op}")
        kind = op["op"]
        path = op["path"]
        if kind == "add":
            doc = _add(doc, path, clone(_value(op)))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc, _ = _remove(doc, path)
            doc = _add(doc, path, clone(_value(op)))
        elif kind == "move":
            doc, moved = _remove(doc, _from(op))
            doc = _add(doc, path, moved)
        elif kind == "copy":
            doc = _add(doc, path, clone(_get(doc, _from(op))))
        elif kind == "test":
            if _get(doc, path) != _value(op):
                raise unprocessable(f"testing value {path} failed")
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc


def _value(op: dict[str, Any]) -> Any:
    if "value" not in op:
        raise bad_request(f"missing value in json patch operation {op['op']}")
    return op["value"]


def _from(op: dict[str, Any]) -> str:
    if "from" not in op:
        raise bad_request(f"missing from in json patch operation {op['op']}")
    return str(op["from"])


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise unprocessable(f"invalid JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise unprocessable("cannot address the document root")
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token, path)
    return node, tokens[-1]


def _child(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise unprocessable(f"doc is missing path: {path}")
        return node[token]
    if isinstance(node, list):
        idx = _index(token, len(node) - 1, path)
        return node[idx]
    raise unprocessable(f"doc is missing path: {path}")


def _index(token: str, maximum: int, path: str) -> int:
    if not token.isdigit():
        raise unprocessable(f"invalid array index {token!r} in {path}")
    idx = int(token)
    if idx > maximum:
        raise unprocessable(f"array index out of bounds in {path}")
    return idx


def _get(doc: Any, path: str) -> Any:
    node = doc
    for token in _tokens(path):
        node = _child(node, token, path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            parent.insert(_index(last, len(parent), path), value)
    else:
        raise unprocessable(f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise unprocessable(f"doc is missing path: {path}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent) - 1, path))
    raise unprocessable(f"doc is missing path: {path}")


def apply(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply a patch of ``content_type`` to ``target`` (not modified) and return the result."""
    if content_type == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise bad_request("merge patch must be a JSON object")
        result = merge_patch(target, patch)
    elif content_type == STRATEGIC_MERGE_PATCH:
        result = strategic_merge_patch(target, patch)
    elif content_type == JSON_PATCH:
        result = json_patch(target, patch)
    else:
        raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: {JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}")
    if not isinstance(result, dict):
        raise bad_request("patch result is not an object")
    return result
