"""The mutating admission plugins kube-apiserver runs on every new Pod by default: ``ServiceAccount``
(the account's name and its projected token volume), ``DefaultTolerationSeconds`` and
``Priority``.

Layer: kubesim (imports nothing from batchd). Called by the server on a Pod's create, after the
managed fields are taken (admission changes are no manager's) and before the Pod strategy.
kubesim serves no ServiceAccounts or PriorityClasses: every namespace is taken to have its
``default`` account, automounting its token, and only the two built-in classes exist.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from kubesim.errors import ApiError

TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_VOLUME_PREFIX = "kube-api-access-"
# names.SimpleNameGenerator's alphabet, as for generateName
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TOLERATION_SECONDS = 300
_SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def admit_pod(pod: dict[str, Any]) -> None:
    """Mutate a Pod body about to be created, or raise the plugin's refusal."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    _service_account(spec)
    _default_tolerations(spec)
    _priority(pod, spec)


def _service_account(spec: dict[str, Any]) -> None:
    if not spec.get("serviceAccountName") and not spec.get("serviceAccount"):
        spec["serviceAccountName"] = "default"
    if spec.get("automountServiceAccountToken") is False:
        return
    volumes = spec.get("volumes") or []
    existing = next((v.get("name") for v in volumes if isinstance(v, dict)
                     and str(v.get("name") or "").startswith(TOKEN_VOLUME_PREFIX)), None)
    name = existing or TOKEN_VOLUME_PREFIX + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
    mounted = False
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            mounts = container.get("volumeMounts") or []
            if any(isinstance(m, dict) and m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts):
                continue  # a mount of its own at the token's path keeps the token out
            container["volumeMounts"] = [*mounts, {"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}]
            mounted = True
    if mounted and existing is None:
        spec["volumes"] = [*volumes, {"name": name, "projected": {"defaultMode": 0o644, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}}]


def _default_tolerations(spec: dict[str, Any]) -> None:
    tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") in (taint, None, "") and t.get("effect") in ("NoExecute", None, "")
                   for t in tolerations):
            tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": _TOLERATION_SECONDS})
    spec["tolerations"] = tolerations


def _priority(pod: dict[str, Any], spec: dict[str, Any]) -> None:
    name = (pod.get("metadata") or {}).get("name") or ""
    class_name = spec.get("priorityClassName") or ""
    if class_name and class_name not in _SYSTEM_PRIORITY_CLASSES:
        raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: no PriorityClass with name {class_name} was found',
                       kind="pods", name=name)
    priority = _SYSTEM_PRIORITY_CLASSES.get(class_name, 0)
    given = spec.get("priority")
    if given is not None and given != priority:
        raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: the integer value of priority ({json.dumps(given)}) '
                       f"must not be provided in pod spec; priority admission controller computed {priority} from "
                       "the given PriorityClass name", kind="pods", name=name)
    spec["priority"] = priority
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
