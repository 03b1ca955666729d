"""Pods (core/v1): the defaults of ``pkg/apis/core/v1/defaults.go``, the QoS class, spec and
template validation, and the pod strategy's create, update and ``/status`` rules.

Layer: kubesim. Called through :mod:`kubesim.strategy.registry`; the Job and CronJob strategies
use the pod template defaults and validation for their templates.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from kubesim.codec import clone
from kubesim.store import timestamp
from kubesim.strategy.common import (
    Errs,
    Obj,
    bump_generation,
    dig,
    ensure,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_int,
    sem_equal,
    validate_annotations,
    validate_labels,
    validate_object_meta,
)


def _default_container(c: Obj) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if not c.get("imagePullPolicy"):
        image = c.get("image") or ""
        # Upstream: ":latest" or no tag (digests count as a tag) pulls Always.
        tag = image.rsplit("/", 1)[-1]
        if "@" in tag:
            c["imagePullPolicy"] = "IfNotPresent"
        elif ":" not in tag or tag.endswith(":latest"):
            c["imagePullPolicy"] = "Always"
        else:
            c["imagePullPolicy"] = "IfNotPresent"
    c.setdefault("resources", {})  # a non-pointer struct: always serialised, even empty
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for env in c.get("env") or []:
        ref = dig(env, "valueFrom", "fieldRef")
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")
    for probe_key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(probe_key)
        if isinstance(probe, dict):
            probe.setdefault("timeoutSeconds", 1)
            probe.setdefault("periodSeconds", 10)
            probe.setdefault("successThreshold", 1)
            probe.setdefault("failureThreshold", 3)
            if isinstance(probe.get("httpGet"), dict):
                probe["httpGet"].setdefault("path", "/")
                probe["httpGet"].setdefault("scheme", "HTTP")


def _default_pod_spec(spec: Obj) -> None:
    """SetDefaults_PodSpec plus the container defaults; applies to Pods and pod templates."""
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "default-scheduler"
    # serviceAccount is the deprecated alias of serviceAccountName: read when the name is
    # missing, and always written as its copy
    if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    else:
        spec.pop("serviceAccount", None)
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _default_container(c)


def default_template(template: Any) -> None:
    if isinstance(template, dict):
        _default_pod_spec(ensure(template, "spec"))


def pod_defaults(pod: Obj) -> None:
    """The Pod defaults a decoded body gets."""
    _default_pod(pod)


def _default_pod(pod: Obj) -> None:
    spec = ensure(pod, "spec")
    _default_pod_spec(spec)
    _default_pod_ips(pod.get("status"))
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    # SetDefaults_Pod: limits without requests make the requests equal to the limits.
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            res = c.get("resources") if isinstance(c, dict) else None
            if isinstance(res, dict) and isinstance(res.get("limits"), dict):
                requests = res.setdefault("requests", {})
                for name, qty in res["limits"].items():
                    requests.setdefault(name, qty)


_QTY_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QTY_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def _quantity(value: Any) -> Decimal | None:
    text = str(value).strip()
    m = _QTY_RE.match(text)
    if not m or m.group(2) not in _QTY_SUFFIX:
        return None
    try:
        return Decimal(m.group(1)) * _QTY_SUFFIX[m.group(2)]
    except InvalidOperation:
        return None


def _qos_class(spec: Obj) -> str:
    """qos.GetPodQOS: Guaranteed, Burstable or BestEffort from cpu/memory requests and limits."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    any_set = False
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        c_limits = {
            k: _quantity(v) for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")
        }
        c_requests = {
            k: _quantity(v)
            for k, v in (res.get("requests") or {}).items()
            if k in ("cpu", "memory")
        }
        for k, v in c_requests.items():
            if v is not None and v != 0:
                any_set = True
                requests[k] = requests.get(k, Decimal(0)) + v
        for k, v in c_limits.items():
            if v is not None and v != 0:
                any_set = True
                limits[k] = limits.get(k, Decimal(0)) + v
        if set(k for k, v in c_limits.items() if v) != {"cpu", "memory"}:
            guaranteed = False
    if not any_set:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


_RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_PULL_POLICIES = ["Always", "IfNotPresent", "Never"]


def _validate_containers(containers: Any, path: str, names: set[str], errs: Errs) -> None:
    """validateContainers and validateInitContainers: each container's common checks, then its
    name's uniqueness among every container named so far (regular ones first)."""
    for i, c in enumerate(containers or []):
        cp = f"{path}[{i}]"
        name = c.get("name") or ""
        if not name:
            errs.required(cp + ".name")
        else:
            for m in is_dns1123_label(name):
                errs.invalid(cp + ".name", name, m)
        if not c.get("image"):
            errs.required(cp + ".image")
        for j, port in enumerate(c.get("ports") or []):
            cport = port.get("containerPort")
            if is_int(cport) and not 1 <= cport <= 65535:
                errs.invalid(f"{cp}.ports[{j}].containerPort", cport, "must be between 1 and 65535, inclusive")
        policy = c.get("imagePullPolicy")
        if policy and policy not in _PULL_POLICIES:
            errs.not_supported(cp + ".imagePullPolicy", policy, _PULL_POLICIES)
        if name in names:
            errs.duplicate(cp + ".name", name)
        else:
            names.add(name)


def _validate_pod_spec(spec: Any, path: str, errs: Errs) -> None:
    if not isinstance(spec, dict):
        errs.required(path + ".containers")
        return
    if not spec.get("containers"):
        errs.required(path + ".containers")
    names: set[str] = set()
    _validate_containers(spec.get("containers"), path + ".containers", names, errs)
    _validate_containers(spec.get("initContainers"), path + ".initContainers", names, errs)
    restart = spec.get("restartPolicy") or ""
    if not restart:
        errs.required(path + ".restartPolicy")
    elif restart not in _RESTART_POLICIES:
        errs.not_supported(path + ".restartPolicy", restart, _RESTART_POLICIES)
    ads = spec.get("activeDeadlineSeconds")
    if is_int(ads) and ads <= 0:
        errs.invalid(
            path + ".activeDeadlineSeconds", ads, "must be between 1 and 2147483647, inclusive"
        )
    tgps = spec.get("terminationGracePeriodSeconds")
    if is_int(tgps) and tgps < 0:  # accepted (a Pod's is made 1 on create), with a warning
        errs.warnings.append(f"{path}.terminationGracePeriodSeconds: must be >= 0; negative values are "
                             "invalid and will be treated as 1")


def validate_pod_template(template: Any, path: str, errs: Errs) -> None:
    template = template if isinstance(template, dict) else {}
    meta = template.get("metadata") or {}
    # ValidatePodTemplateSpec names the template's own fields, without "metadata"
    validate_labels(meta.get("labels"), path + ".labels", errs)
    validate_annotations(meta.get("annotations"), path + ".annotations", errs)
    _validate_pod_spec(template.get("spec"), path + ".spec", errs)


_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _validate_pod_update(new: Obj, old: Obj, errs: Errs) -> None:
    spec = new.get("spec") or {}
    old_spec = clone(old.get("spec") or {})  # made to match ``spec`` where changes are allowed
    # Mutable: images, activeDeadlineSeconds (set or lowered), tolerations (additions only).
    for key in ("containers", "initContainers"):
        new_cs = spec.get(key) or []
        old_cs = old_spec.get(key) or []
        if len(new_cs) == len(old_cs):
            for nc, oc in zip(new_cs, old_cs, strict=True):
                if isinstance(nc, dict) and isinstance(oc, dict):
                    oc["image"] = nc.get("image")
    new_ads, old_ads = spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if new_ads != old_ads:
        if new_ads is None or (old_ads is not None and is_int(new_ads) and new_ads > old_ads):
            errs.invalid(
                "spec.activeDeadlineSeconds",
                new_ads,
                "must be less than or equal to previous value",
            )
        old_spec["activeDeadlineSeconds"] = new_ads
    # Scheduling gates may only go (the scheduler waits for the last one).
    new_gates, old_gates = spec.get("schedulingGates") or [], old_spec.get("schedulingGates") or []
    old_names = [g.get("name") for g in old_gates if isinstance(g, dict)]
    for i, gate in enumerate(new_gates):
        if isinstance(gate, dict) and gate.get("name") not in old_names:
            errs.forbidden(f"spec.schedulingGates[{i}].name",
                           f"only deletion is allowed, but found new scheduling gate '{gate.get('name')}'")
    old_spec["schedulingGates"] = new_gates
    old_tol = old_spec.get("tolerations") or []
    new_tol = spec.get("tolerations") or []
    if all(t in new_tol for t in old_tol):
        old_spec["tolerations"] = new_tol
    if (
        old_spec.get("terminationGracePeriodSeconds", 0) < 0
        and spec.get("terminationGracePeriodSeconds") == 1
    ):
        old_spec["terminationGracePeriodSeconds"] = 1
    if not sem_equal(spec, old_spec):
        changed = sorted(
            k for k in set(spec) | set(old_spec) if not sem_equal(spec.get(k), old_spec.get(k))
        )
        errs.forbidden(
            "spec",
            _POD_UPDATE_FORBIDDEN + "\n  changed: " + ", ".join(f"spec.{k}" for k in changed),
        )
    for i, c in enumerate(spec.get("containers") or []):
        if not (c.get("image") or "").strip():
            errs.required(f"spec.containers[{i}].image")


# --------------------------------------------------------------------------------------------
# podStrategy and podStatusStrategy (pkg/registry/core/pod/strategy.go)
# --------------------------------------------------------------------------------------------


def pod_create(pod: Obj, now: datetime, errs: Errs) -> None:
    _default_pod(pod)
    spec = pod["spec"]
    tgps = spec.get("terminationGracePeriodSeconds")
    if is_int(tgps) and tgps < 0:
        spec["terminationGracePeriodSeconds"] = 1  # a negative grace period is taken as the shortest
    # podStrategy.PrepareForCreate: the status is reset to Pending with the computed QoS class,
    # and a Pod behind scheduling gates says so.
    pod["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
    if spec.get("schedulingGates"):
        pod["status"]["conditions"] = [{
            "type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": timestamp(now),
            "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}]
    validate_object_meta(ensure(pod, "metadata"), is_dns1123_subdomain, errs)
    _validate_pod_spec(spec, "spec", errs)


def pod_update(pod: Obj, old: Obj, errs: Errs) -> None:
    _default_pod(pod)
    pod["status"] = clone(old.get("status") or {})
    bump_generation(pod, old)  # a Pod's generation counts its spec changes (since 1.33)
    validate_object_meta(ensure(pod, "metadata"), is_dns1123_subdomain, errs)
    _validate_pod_update(pod, old, errs)


def _default_pod_ips(status: Any) -> None:
    """The v1 conversion fills the plural IP lists from the singular fields."""
    if not isinstance(status, dict):
        return
    for one, many in (("podIP", "podIPs"), ("hostIP", "hostIPs")):
        if status.get(one) and not status.get(many):
            status[many] = [{"ip": status[one]}]


def pod_status_update(pod: Obj, old: Obj, errs: Errs) -> None:
    # Nothing guards the phase here: a terminal Pod stays terminal because the kubelet never
    # writes otherwise, not because the API server refuses it.
    pod["spec"] = clone(old.get("spec") or {})
    _default_pod_ips(pod.get("status"))
    # The pods/status endpoint may not touch owner references (old kubelets corrupted them).
    meta = ensure(pod, "metadata")
    if "ownerReferences" in (old.get("metadata") or {}):
        meta["ownerReferences"] = clone(old["metadata"]["ownerReferences"])
    else:
        meta.pop("ownerReferences", None)
