"""Optional admission plugins: kube-apiserver's ``OwnerReferencesPermissionEnforcement``.

Layer: kubesim (imports nothing from batchd). Off by default; enabled per emulator with
``KubeSim(admission=[OwnerReferencesPermissionEnforcement(authorizer)])``. The server calls
:meth:`validate` for every create, update and patch, before the object is stored.

The plugin (plugin/pkg/admission/gc/gc_admission.go upstream; on in OpenShift and in many
hardened clusters) stops a client from using ownerReferences to gain power it does not have:

- changing an existing object's ownerReferences requires ``delete`` on that object;
- setting ``blockOwnerDeletion: true`` on a reference (new, or newly blocking) requires
  ``update`` on the *owner's* ``finalizers`` subresource, e.g. ``jobs/finalizers`` for a Pod
  that a Job owns, since a blocking reference holds up the owner's foreground deletion.

kubesim does not authenticate clients, so the authorizer answers for every client alike:
:func:`rbac_authorizer` grants what a list of RBAC rules grants (a test passes the ClusterRole
under test). Every authorization this plugin asked is counted in :attr:`checks`, in the audit's
terms, so a test can compare a role with what a run needed beyond its requests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from kubesim import resources
from kubesim.errors import ApiError
from kubesim.resources import Resource


class Attributes(NamedTuple):
    """What an authorizer is asked, in RBAC's terms (authorizer.AttributesRecord upstream)."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


Authorizer = Callable[[Attributes], bool]


class AdmissionPlugin(Protocol):
    """A validating admission plugin, as the server calls it."""

    def validate(self, res: Resource, subresource: str, namespace: str, new: Mapping[str, Any],
                 old: Mapping[str, Any] | None) -> None:
        """Admit a create (``old`` None) or an update, or raise the :class:`ApiError` to answer."""


def rbac_authorizer(rules: Iterable[Mapping[str, Any]]) -> Authorizer:
    """Allow what any of ``rules`` (a ClusterRole's ``rules``, bound cluster-wide) allows.

    Matching follows RBAC's: ``*`` in apiGroups, resources or verbs matches anything;
    ``resource/subresource`` names a subresource, ``resource/*`` all of them and ``*/sub`` one
    subresource of every resource; resourceNames, when given, limits the rule to those names.
    """
    granted = [dict(r) for r in rules]

    def covers(rule: dict[str, Any], a: Attributes) -> bool:
        target = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        wanted = {target, "*"}
        if a.subresource:
            wanted |= {f"{a.resource}/*", f"*/{a.subresource}"}
        return (bool({a.group, "*"} & set(rule.get("apiGroups") or ()))
                and bool(wanted & set(rule.get("resources") or ()))
                and bool({a.verb, "*"} & set(rule.get("verbs") or ()))
                and (not rule.get("resourceNames") or a.name in rule["resourceNames"]))

    return lambda a: any(covers(r, a) for r in granted)


def _refs(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return list(((obj or {}).get("metadata") or {}).get("ownerReferences") or [])


def _forbidden(res: Resource, name: str, reason: str) -> ApiError:
    # admission.NewForbidden: the object's own qualified name, then the plugin's reason.
    return ApiError(403, "Forbidden", f'{res.qualified} "{name}" is forbidden: {reason}',
                    kind=res.plural, name=name, group=res.group or None)


class OwnerReferencesPermissionEnforcement:
    """The admission plugin; :meth:`validate` raises the 403 kube-apiserver would answer."""

    #: Requests the plugin never checks (its whiteList upstream): the kubelet's status writes.
    EXEMPT = frozenset({("", "pods", "status")})

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer
        self.checks: Counter[Attributes] = Counter()

    def _allowed(self, attributes: Attributes) -> bool:
        self.checks[attributes] += 1
        return self.authorizer(attributes)

    def validate(self, res: Resource, subresource: str, namespace: str, new: Mapping[str, Any],
                 old: Mapping[str, Any] | None) -> None:
        """Admit a create (``old`` None) or an update of ``res`` in ``namespace``, or raise 403."""
        if (res.group, res.plural, subresource) in self.EXEMPT:
            return
        new_refs, old_refs = _refs(new), _refs(old)
        changing = bool(new_refs) if old is None else new_refs != old_refs
        if not changing:
            return
        name = str((new.get("metadata") or {}).get("name") or "")
        if old is not None and not self._allowed(Attributes("delete", res.group, res.plural, "", namespace, name)):
            raise _forbidden(res, name, "cannot set an ownerRef on a resource you can't delete: , <nil>")
        was_blocking = {r.get("uid"): bool(r.get("blockOwnerDeletion")) for r in old_refs}
        for ref in new_refs:
            if not ref.get("blockOwnerDeletion") or was_blocking.get(ref.get("uid")):
                continue
            owner = self._owner_resource(ref)
            if owner is None:
                raise _forbidden(res, name, "cannot set blockOwnerDeletion in this case because cannot find "
                                            f"RESTMapping for APIVersion {ref.get('apiVersion')} Kind {ref.get('kind')}: "
                                            f'no matches for kind "{ref.get("kind")}" in version "{ref.get("apiVersion")}"')
            # A namespaced owner is in the dependent's namespace (cross-namespace owners are invalid).
            check = Attributes("update", owner.group, owner.plural, "finalizers",
                               namespace if owner.namespaced else "", str(ref.get("name") or ""))
            if not self._allowed(check):
                raise _forbidden(res, name, "cannot set blockOwnerDeletion if an ownerReference refers to a "
                                            "resource you can't set finalizers on: , <nil>")

    @staticmethod
    def _owner_resource(ref: Mapping[str, Any]) -> Resource | None:
        group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
        return next((r for r in resources.RESOURCES
                     if (r.group, r.version, r.kind) == (group, version, ref.get("kind"))), None)
