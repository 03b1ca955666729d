"""Deletion semantics and the garbage collector, as kube-apiserver and kube-controller-manager.

Layer: kubesim (imports nothing from batchd). :class:`Lifecycle` is called by the HTTP
handlers (delete, deletecollection, and every update, since removing the last finalizer of a
deleting object removes it), by the kubelet (the final grace-0 delete of a terminated Pod)
and by the collector. :class:`GarbageCollector` is a store listener plus one task on the
server's loop; it handles ``foregroundDeletion`` and ``orphan`` finalizers, collects objects
whose owners are all gone, and empties terminating namespaces, telling in their conditions what
content and finalizers hold them.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any, Protocol

from kubesim import resources
from kubesim.errors import ApiError, bad_request, conflict
from kubesim.resources import Resource
from kubesim.store import Clock, Obj, StorageKey, Store, WatchEvent, timestamp

log = logging.getLogger(__name__)

FOREGROUND = "Foreground"
BACKGROUND = "Background"
ORPHAN = "Orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
NAMESPACE_FINALIZER = "kubernetes"  # a namespace's spec.finalizers entry the namespace controller owns
NAMESPACES: StorageKey = ("", "namespaces")
PODS: StorageKey = ("", "pods")
PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
DEFAULT_POD_GRACE = 30


def is_deleting(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def finalizers_of(obj: Obj) -> list[str]:
    return list(obj["metadata"].get("finalizers") or [])


def with_meta(obj: Obj, **changes: Any) -> Obj:
    """A new object sharing everything but a new metadata dict with ``changes`` (None deletes)."""
    meta = dict(obj["metadata"])
    for k, v in changes.items():
        if v is None:
            meta.pop(k, None)
        else:
            meta[k] = v
    return {**obj, "metadata": meta}


class Writes(Protocol):
    """The store writes a :class:`Lifecycle` makes; a server-side dry run passes writes that keep nothing."""

    def replace(self, key: StorageKey, obj: Obj) -> Obj: ...

    def remove(self, key: StorageKey, obj: Obj) -> Obj: ...


class Lifecycle:
    """Delete and finalize objects with kube-apiserver's rules (graceful pods, finalizers)."""

    def __init__(self, store: Writes, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def write(self, key: StorageKey, obj: Obj) -> tuple[Obj, bool]:
        """Store an update; a deleting object left without finalizers (and with no grace
        period pending) is removed instead, with a single DELETED event. Returns (obj, removed)."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            # A namespace also waits for its spec.finalizers (the namespace controller's
            # "kubernetes" finalizer, dropped by /finalize once the content is gone).
            if key != NAMESPACES or not (obj.get("spec") or {}).get("finalizers"):
                return self.store.remove(key, obj), True
        return self.store.replace(key, obj), False

    def delete(self, res: Resource, obj: Obj, options: dict[str, Any] | None) -> tuple[Obj, bool]:
        """Apply DeleteOptions to ``obj``; returns (resulting object, removed from storage)."""
        options = options or {}
        meta = obj["metadata"]
        self._check_preconditions(res, obj, options.get("preconditions") or {})
        if res.storage == NAMESPACES:
            return self._delete_namespace(res, obj)
        policy = self._policy(res, obj, options)
        fins = finalizers_of(obj)
        if policy == ORPHAN:
            fins = [f for f in fins if f != FOREGROUND_FINALIZER]
            if ORPHAN_FINALIZER not in fins:
                fins.append(ORPHAN_FINALIZER)
        elif policy == FOREGROUND:
            fins = [f for f in fins if f != ORPHAN_FINALIZER]
            if FOREGROUND_FINALIZER not in fins:
                fins.append(FOREGROUND_FINALIZER)
        elif policy == BACKGROUND:
            fins = [f for f in fins if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
        grace = self._grace(res, obj, options)
        now = self.clock.now()
        if meta.get("deletionTimestamp"):
            # Already deleting: a shorter grace period (the kubelet's final grace-0 delete,
            # or a force delete) moves the deadline; finalizers follow the new policy.
            changes: dict[str, Any] = {}
            if fins != finalizers_of(obj):
                changes["finalizers"] = fins or None
            current = int(meta.get("deletionGracePeriodSeconds") or 0)
            if grace < current:
                changes["deletionGracePeriodSeconds"] = grace
                changes["deletionTimestamp"] = timestamp(now + timedelta(seconds=grace))
            if not changes:
                return obj, False
            return self.write(res.storage, with_meta(obj, **changes))
        # BeforeDelete stamps the object and counts the deletion as a change of generation; a Pod
        # deleted at once is removed stamped so (in its answer and its DELETED event)
        stamps: dict[str, Any] = {"deletionTimestamp": timestamp(now + timedelta(seconds=grace)),
                                  "deletionGracePeriodSeconds": grace}
        if meta.get("generation"):
            stamps["generation"] = int(meta["generation"]) + 1
        if grace > 0 or fins:
            return self.store.replace(res.storage, with_meta(obj, finalizers=fins or None, **stamps)), False
        if res.storage == PODS:
            return self.store.remove(res.storage, with_meta(obj, **stamps)), True
        return self.store.remove(res.storage, obj), True

    def _check_preconditions(self, res: Resource, obj: Obj, pre: dict[str, Any]) -> None:
        """BeforeDelete's checks, in its words (the conflict names the kind, not the resource)."""
        meta = obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise conflict(
                res.kind, meta["name"],
                f"the UID in the precondition ({pre['uid']}) does not match the UID in record ({meta.get('uid')}). "
                "The object might have been deleted and then recreated",
                res.group,
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise conflict(
                res.kind, meta["name"],
                f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not match the "
                f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have been modified",
                res.group,
            )

    def _policy(self, res: Resource, obj: Obj, options: dict[str, Any]) -> str | None:
        """The propagation policy of a delete (the server has refused unknown ones)."""
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = ORPHAN if options["orphanDependents"] else BACKGROUND
        if policy is None:
            fins = finalizers_of(obj)
            if ORPHAN_FINALIZER in fins or FOREGROUND_FINALIZER in fins:
                return None  # keep what an earlier delete chose
            return res.default_propagation
        return str(policy)

    def _grace(self, res: Resource, obj: Obj, options: dict[str, Any]) -> int:
        requested = options.get("gracePeriodSeconds")
        if requested is not None:
            try:
                requested = int(requested)
            except (TypeError, ValueError) as e:
                raise bad_request(f"invalid gracePeriodSeconds {requested!r}") from e
        if res.storage != PODS:
            return 0
        spec = obj.get("spec") or {}
        grace = requested if requested is not None else spec.get("terminationGracePeriodSeconds", DEFAULT_POD_GRACE)
        phase = (obj.get("status") or {}).get("phase")
        # Pod strategy CheckGracefulDelete: unscheduled or terminal pods go away at once.
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        return max(0, int(grace or 0))

    def _delete_namespace(self, res: Resource, obj: Obj) -> tuple[Obj, bool]:
        name = obj["metadata"]["name"]
        if name in PROTECTED_NAMESPACES:
            raise ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                           kind="namespaces", name=name)
        if is_deleting(obj):
            return obj, False
        new = with_meta(obj, deletionTimestamp=timestamp(self.clock.now()))  # a namespace has no grace period
        new["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
        return self.store.replace(res.storage, new), False


class GarbageCollector:
    """Owner-reference garbage collection and namespace cleanup, driven by store events."""

    def __init__(self, store: Store, lifecycle: Lifecycle) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self._pending: dict[tuple[str, str], None] = {}  # an ordered set of work items
        self._wake = asyncio.Event()

    def on_event(self, event: WatchEvent) -> None:
        """Store listener: queue the work an event may cause (cheap, synchronous)."""
        meta = event.obj["metadata"]
        uid = meta["uid"]
        refs = meta.get("ownerReferences") or ()
        if event.type == "DELETED":
            for dep in self.store.dependents.get(uid, ()):
                self._enqueue("item", dep)
            for ref in refs:
                self._enqueue("owner", ref.get("uid", ""))
            ns = meta.get("namespace")
            if ns:
                owner = self.store.get(NAMESPACES, "", ns)
                if owner is not None and is_deleting(owner):
                    self._enqueue("namespace", ns)
            return
        if refs and not meta.get("deletionTimestamp"):
            self._enqueue("item", uid)
        if meta.get("deletionTimestamp"):
            if event.key == NAMESPACES:
                self._enqueue("namespace", meta["name"])
            else:
                fins = meta.get("finalizers") or ()
                if FOREGROUND_FINALIZER in fins or ORPHAN_FINALIZER in fins:
                    self._enqueue("owner", uid)

    def _enqueue(self, kind: str, ident: str) -> None:
        self._pending[(kind, ident)] = None
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            done = 0
            while self._pending:
                item = next(iter(self._pending))
                del self._pending[item]
                try:
                    self.process(*item)
                except ApiError as e:
                    log.debug("gc %s: %s", item, e)
                except Exception:
                    log.exception("gc failed on %s", item)
                done += 1
                if done % 200 == 0:
                    await asyncio.sleep(0)  # let requests in between large cascades

    def process(self, kind: str, ident: str) -> None:
        if kind == "item":
            self._attempt_to_delete(ident)
        elif kind == "owner":
            self._process_deleting_owner(ident)
        elif kind == "namespace":
            self._process_namespace(ident)

    def _attempt_to_delete(self, uid: str) -> None:
        found = self.store.get_by_uid(uid)
        if found is None:
            return
        key, obj = found
        if is_deleting(obj):
            return
        refs = obj["metadata"].get("ownerReferences") or []
        if not refs:
            return
        solid, dangling, waiting = [], [], []
        for ref in refs:
            owner = self.store.get_by_uid(ref.get("uid", ""))
            if owner is None:
                dangling.append(ref)
            elif is_deleting(owner[1]) and FOREGROUND_FINALIZER in finalizers_of(owner[1]):
                waiting.append(ref)
            else:
                solid.append(ref)
        if solid:
            if dangling or waiting:
                gone = {r.get("uid") for r in dangling + waiting}
                kept = [r for r in refs if r.get("uid") not in gone]
                self.lifecycle.write(key, with_meta(obj, ownerReferences=kept))
            return
        res = resources.STORAGE_OWNER[key]
        policy = FOREGROUND if waiting and self.store.dependents.get(uid) else BACKGROUND
        self.lifecycle.delete(res, obj, {"propagationPolicy": policy})

    def _process_deleting_owner(self, uid: str) -> None:
        found = self.store.get_by_uid(uid)
        if found is None:
            return
        key, obj = found
        if not is_deleting(obj):
            return
        fins = finalizers_of(obj)
        deps = [d for d in (self.store.get_by_uid(u) for u in list(self.store.dependents.get(uid, ()))) if d]
        if ORPHAN_FINALIZER in fins:
            for dkey, dep in deps:
                kept = [r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
                self.lifecycle.write(dkey, with_meta(dep, ownerReferences=kept or None))
            fins.remove(ORPHAN_FINALIZER)
            self.lifecycle.write(key, with_meta(obj, finalizers=fins or None))
            return
        if FOREGROUND_FINALIZER not in fins:
            return
        blocking = False
        for dkey, dep in deps:
            if not is_deleting(dep):
                policy = FOREGROUND if self.store.dependents.get(dep["metadata"]["uid"]) else BACKGROUND
                self.lifecycle.delete(resources.STORAGE_OWNER[dkey], dep, {"propagationPolicy": policy})
            if self.store.get_by_uid(dep["metadata"]["uid"]) is None:
                continue
            for ref in dep["metadata"].get("ownerReferences") or ():
                if ref.get("uid") == uid and ref.get("blockOwnerDeletion"):
                    blocking = True
        if not blocking:
            fins.remove(FOREGROUND_FINALIZER)
            self.lifecycle.write(key, with_meta(obj, finalizers=fins or None))

    def _namespace_conditions(self, ns: Obj, counts: dict[str, int], held: dict[str, int]) -> Obj:
        """The namespace controller's account of a deletion in the namespace's conditions: what
        content remains, by resource, and which finalizers hold it. Written only when it changes."""
        remain = ", ".join(f"{r} has {n} resource instances" for r, n in sorted(counts.items()))
        holding = ", ".join(f"{f} in {n} resource instances" for f, n in sorted(held.items()))
        wanted = [
            ("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered"),
            ("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
             "All legacy kube types successfully parsed"),
            ("NamespaceDeletionContentFailure", "False", "ContentDeleted",
             "All content successfully deleted, may be waiting on finalization"),
            ("NamespaceContentRemaining", "True", "SomeResourcesRemain", f"Some resources are remaining: {remain}")
            if counts else ("NamespaceContentRemaining", "False", "ContentRemoved", "All content successfully removed"),
            ("NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain",
             f"Some content in the namespace has finalizers remaining: {holding}")
            if held else ("NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers",
                          "All content-preserving finalizers finished"),
        ]
        status = ns.get("status") or {}
        old = {c.get("type"): c for c in status.get("conditions") or []}
        now = timestamp(self.lifecycle.clock.now())
        conditions = []
        for ctype, cstatus, reason, message in wanted:
            before = old.get(ctype) or {}
            since = before.get("lastTransitionTime") if before.get("status") == cstatus else now
            conditions.append({"type": ctype, "status": cstatus, "lastTransitionTime": since or now,
                               "reason": reason, "message": message})
        if conditions == status.get("conditions"):
            return ns
        written, _ = self.lifecycle.write(NAMESPACES, {**ns, "status": {**status, "conditions": conditions}})
        return written

    def _process_namespace(self, name: str) -> None:
        ns = self.store.get(NAMESPACES, "", name)
        if ns is None or not is_deleting(ns):
            return
        spec_finalizers = list((ns.get("spec") or {}).get("finalizers") or [])
        if NAMESPACE_FINALIZER not in spec_finalizers:
            return  # the namespace controller's work is done, or was never asked for
        for key in self.store.keys():
            res = resources.STORAGE_OWNER.get(key)
            if res is None or not res.namespaced:
                continue
            for obj in self.store.iter(key, name):
                if not is_deleting(obj):
                    self.lifecycle.delete(res, obj, {"propagationPolicy": BACKGROUND})
        counts: dict[str, int] = {}
        held: dict[str, int] = {}
        for key in self.store.keys():
            res = resources.STORAGE_OWNER.get(key)
            if res is None or not res.namespaced:
                continue
            for obj in self.store.iter(key, name):
                counts[res.qualified] = counts.get(res.qualified, 0) + 1
                for f in finalizers_of(obj):
                    held[f] = held.get(f, 0) + 1
        ns = self._namespace_conditions(ns, counts, held)
        if counts:
            return
        # The namespace controller's /finalize step: drop its own finalizer (others' stay for their
        # controllers), then the object goes once no finalizer of either kind is left.
        ns = self.store.get(NAMESPACES, "", name) or ns
        spec = {**(ns.get("spec") or {}), "finalizers": [f for f in spec_finalizers if f != NAMESPACE_FINALIZER]}
        self.lifecycle.write(NAMESPACES, {**ns, "spec": spec})
