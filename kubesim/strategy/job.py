"""Jobs (batch/v1): defaults (API-1 to API-7), selector generation (API-9, API-10) and the
validation of ``pkg/apis/batch/validation`` (API-11 to API-20, API-24 to API-47), as the Job
strategy and the Job status strategy of ``pkg/registry/batch/job/strategy.go`` run them.

Layer: kubesim. Called through :mod:`kubesim.strategy.registry`; :mod:`.cronjob` validates its job
template with :func:`validate_job_spec`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

from kubesim.codec import clone
from kubesim.strategy.common import (
    HTTP_PATH_FMT,
    HTTP_PATH_RE,
    OMIT,
    Errs,
    Obj,
    bump_generation,
    dig,
    ensure,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_int,
    is_qualified_name,
    norm,
    parse_time,
    regex_error,
    sem_equal,
    validate_labels,
    validate_object_meta,
)
from kubesim.strategy.pod import default_template, validate_pod_template

# --------------------------------------------------------------------------------------------
# Label selectors
# --------------------------------------------------------------------------------------------

_SELECTOR_OPS = ["In", "NotIn", "Exists", "DoesNotExist"]


def _validate_label_selector(sel: Any, path: str, errs: Errs) -> None:
    if not isinstance(sel, dict):
        return
    validate_labels(sel.get("matchLabels"), path + ".matchLabels", errs)
    for i, req in enumerate(sel.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op = req.get("operator")
        values = req.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                errs.required(p + ".values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.forbidden(
                    p + ".values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
        else:
            errs.invalid(p + ".operator", op, "not a valid selector operator")
        for m in is_qualified_name(req.get("key") or ""):
            errs.invalid(p + ".key", req.get("key") or "", m)


def _selector_matches(sel: Obj, labels: dict[str, str]) -> bool:
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for req in sel.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _selector_is_valid(sel: object) -> TypeGuard[Obj]:
    if not isinstance(sel, dict):
        return False
    return all(r.get("operator") in _SELECTOR_OPS for r in sel.get("matchExpressions") or [])


# --------------------------------------------------------------------------------------------
# Jobs: defaults (API-1 to API-7), selector generation (API-9, API-10),
# validation (API-11 to API-20, API-26 to API-47)
# --------------------------------------------------------------------------------------------

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
_MAX_INT32 = 2**31 - 1
_MAX_PARALLELISM_INDEXED = 100_000
_MAX_FAILED_INDEXES = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000
_PARALLELISM_HIGH_COMPLETIONS = 10_000
_MAX_MANAGED_BY = 63
_MAX_PFP_RULES = 20
_MAX_EXIT_CODES = 255
_MAX_POD_CONDITIONS = 20
_MAX_SUCCESS_RULES = 20
_MAX_SUCCEEDED_INDEXES_LEN = 64 * 1024


def _default_job_spec_fields(spec: Obj) -> None:
    """SetDefaults_Job's spec part (API-1 to API-6)."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1  # API-1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1  # API-2
    if spec.get("backoffLimit") is None:
        # API-3: per-index backoff makes the global limit effectively unbounded
        spec["backoffLimit"] = _MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"  # API-4
    if spec.get("suspend") is None:
        spec["suspend"] = False
    pfp = spec.get("podFailurePolicy")
    if isinstance(pfp, dict):
        for rule in pfp.get("rules") or []:
            for pattern in rule.get("onPodConditions") or []:
                if not pattern.get("status"):
                    pattern["status"] = "True"  # API-6
    if spec.get("podReplacementPolicy") is None:
        # API-5
        spec["podReplacementPolicy"] = "Failed" if pfp is not None else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False


def _default_job(job: Obj) -> None:
    spec = ensure(job, "spec")
    _default_job_spec_fields(spec)
    default_template(spec.get("template"))


def job_defaults(job: Obj) -> None:
    """SetDefaults_Job, as a decoded body gets it (API-1 to API-7)."""
    _default_job(job)
    if not dig(job, "metadata", "labels"):
        _copy_template_labels(job)


def _generate_selector(job: Obj) -> None:
    """generateSelectorIfNeeded (API-9, API-10)."""
    spec = job["spec"]
    if spec.get("manualSelector") is True:
        return
    meta = job.get("metadata") or {}
    template = ensure(spec, "template")
    t_labels = ensure(ensure(template, "metadata"), "labels")
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        t_labels.setdefault(key, meta.get("name") or "")
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        t_labels.setdefault(key, meta.get("uid") or "")
    selector = ensure(spec, "selector")
    match_labels = ensure(selector, "matchLabels")
    match_labels.setdefault(CONTROLLER_UID_LABEL, meta.get("uid") or "")


def _copy_template_labels(job: Obj) -> None:
    # API-7. Upstream's defaulter copies the template's label map when the Job has none; the
    # map is shared with the template (and defaults run again when the object is read back from
    # storage), so the Job ends up carrying the generated job-name/controller-uid labels too, as
    # `kubectl get job -o yaml` on a real cluster shows.
    meta = ensure(job, "metadata")
    t_labels = dig(job, "spec", "template", "metadata", "labels")
    if t_labels and not meta.get("labels"):
        meta["labels"] = dict(t_labels)


def _validate_generated_selector(job: Obj, require_prefixed: bool, errs: Errs) -> None:
    spec = job.get("spec") or {}
    if spec.get("manualSelector") is True or not isinstance(spec.get("selector"), dict):
        return
    meta = job.get("metadata") or {}
    uid = meta.get("uid") or ""
    name = meta.get("name") or ""
    if not uid:
        errs.required("metadata.uid")
    t_labels = dig(spec, "template", "metadata", "labels") or {}
    wanted = [(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)]
    if require_prefixed:
        wanted += [(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]
    for key, value in wanted:
        p = f"spec.template.metadata.labels[{key}]"
        if key not in t_labels:
            errs.required(p, value)
        elif t_labels[key] != value:
            errs.invalid(p, t_labels, f"must be '{value}'")
    expected = dict(wanted)
    if _selector_is_valid(spec["selector"]) and not _selector_matches(spec["selector"], expected):
        errs.invalid("spec.selector", spec["selector"], "`selector` not auto-generated")


def _parse_index_interval(text: str, completions: int) -> tuple[int, int]:
    parts = text.split("-")
    if len(parts) > 2:
        raise ValueError(
            f"the fragment \"{text}\" violates the requirement that an index interval can have at most two parts separated by '-'"
        )

    def atoi(s: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]+", s):
            raise ValueError(f'cannot convert string to integer for index: "{s}"')
        return int(s)

    x = atoi(parts[0])
    if x >= completions:
        raise ValueError(f'too large index: "{parts[0]}"')
    if len(parts) == 1:
        return x, x
    y = atoi(parts[1])
    if y >= completions:
        raise ValueError(f'too large index: "{parts[1]}"')
    if x >= y:
        raise ValueError(f"non-increasing order, previous: {x}, current: {y}")
    return x, y


def _validate_indexes_format(text: str, completions: int) -> int:
    """validateIndexesFormat (JOB-48, API-36): returns the number of indexes or raises ValueError."""
    if not text:
        return 0
    last: int | None = None
    total = 0
    for interval in text.split(","):
        x, y = _parse_index_interval(interval, completions)
        if last is not None and last >= x:
            raise ValueError(f"non-increasing order, previous: {last}, current: {x}")
        total += y - x + 1
        last = y
    return total


def _index_set(text: str, completions: int) -> set[int]:
    out: set[int] = set()
    for interval in (text or "").split(","):
        try:
            x, y = _parse_index_interval(interval, completions)
        except ValueError:
            continue
        out.update(range(x, y + 1))
    return out


def validate_job_spec(spec: Obj, path: str, errs: Errs) -> None:
    """validateJobSpec: shared by Jobs and CronJob job templates (API-13 to API-18, API-24, API-26, API-27)."""
    for key in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ):
        errs.nonnegative(f"{path}.{key}", spec.get(key))  # API-24
    completions = spec.get("completions")
    parallelism = spec.get("parallelism")
    blpi = spec.get("backoffLimitPerIndex")
    mfi = spec.get("maxFailedIndexes")
    if mfi is not None and blpi is None:
        errs.required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified")
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        _validate_managed_by(managed_by, f"{path}.managedBy", errs)
    mode = spec.get("completionMode")
    if mode is not None:
        if mode not in ("NonIndexed", "Indexed"):
            errs.not_supported(f"{path}.completionMode", mode, ["NonIndexed", "Indexed"])
        if mode == "Indexed":  # API-14, API-15
            if completions is None:
                errs.required(f"{path}.completions", "when completion mode is Indexed")
            if is_int(parallelism) and parallelism > _MAX_PARALLELISM_INDEXED:
                errs.invalid(
                    f"{path}.parallelism",
                    parallelism,
                    f"must be less than or equal to {_MAX_PARALLELISM_INDEXED} when completion mode is Indexed",
                )
            if is_int(completions) and is_int(mfi) and mfi > completions:
                errs.invalid(
                    f"{path}.maxFailedIndexes", mfi, "must be less than or equal to completions"
                )
            if is_int(mfi) and mfi > _MAX_FAILED_INDEXES:
                errs.invalid(
                    f"{path}.maxFailedIndexes",
                    mfi,
                    f"must be less than or equal to {_MAX_FAILED_INDEXES}",
                )
            if is_int(completions) and completions > _COMPLETIONS_SOFT_LIMIT and blpi is not None:
                suffix = f"when completions are above {_COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                if mfi is None:
                    errs.required(
                        f"{path}.maxFailedIndexes",
                        f"must be specified when completions is above {_COMPLETIONS_SOFT_LIMIT}",
                    )
                if is_int(parallelism) and parallelism > _PARALLELISM_HIGH_COMPLETIONS:
                    errs.invalid(
                        f"{path}.parallelism",
                        parallelism,
                        f"must be less than or equal to {_PARALLELISM_HIGH_COMPLETIONS} {suffix}",
                    )
                if is_int(mfi) and mfi > _PARALLELISM_HIGH_COMPLETIONS:
                    errs.invalid(
                        f"{path}.maxFailedIndexes",
                        mfi,
                        f"must be less than or equal to {_PARALLELISM_HIGH_COMPLETIONS} {suffix}",
                    )
    if mode in (None, "NonIndexed"):
        if blpi is not None:
            errs.invalid(f"{path}.backoffLimitPerIndex", blpi, "requires indexed completion mode")
        if mfi is not None:
            errs.invalid(f"{path}.maxFailedIndexes", mfi, "requires indexed completion mode")
    pfp = spec.get("podFailurePolicy")
    if pfp is not None:
        _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy", errs)
    sp = spec.get("successPolicy")
    if sp is not None:
        if mode != "Indexed":
            errs.invalid(f"{path}.successPolicy", sp, "requires indexed completion mode")
        else:
            _validate_success_policy(spec, f"{path}.successPolicy", errs)
    prp = spec.get("podReplacementPolicy")
    if prp is not None:  # API-17
        if pfp is not None:
            if prp != "Failed":
                errs.not_supported(f"{path}.podReplacementPolicy", prp, ["Failed"])
        elif prp not in ("Failed", "TerminatingOrFailed"):
            errs.not_supported(
                f"{path}.podReplacementPolicy", prp, ["Failed", "TerminatingOrFailed"]
            )
    template = spec.get("template")
    validate_pod_template(template, f"{path}.template", errs)
    # API-13: pod defaulting turns a missing restartPolicy into Always, so both read
    # as "required" here.
    restart = dig(template, "spec", "restartPolicy") or ""
    rp_path = f"{path}.template.spec.restartPolicy"
    if restart in ("", "Always"):
        errs.required(rp_path, 'valid values: "OnFailure", "Never"')
    elif restart not in ("OnFailure", "Never"):
        errs.not_supported(rp_path, restart, ["OnFailure", "Never"])
    elif pfp is not None and restart != "Never":
        errs.invalid(
            rp_path, restart, 'only "Never" is supported when podFailurePolicy is specified'
        )


def _validate_managed_by(value: Any, path: str, errs: Errs) -> None:
    """API-26, API-27: a domain-prefixed path of at most 63 characters with exactly one '/'."""
    if not isinstance(value, str) or not value:
        errs.required(path)
        return
    segments = value.split("/", 1)
    if len(segments) != 2 or not segments[0] or not segments[1] or "/" in segments[1]:
        # API-27: the newest API rule admits exactly one '/', which IsDomainPrefixedPath's
        # wording already describes ("acme.io/foo").
        errs.invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')
    else:
        host, rest = segments
        for m in is_dns1123_subdomain(host):
            errs.invalid(path, host, m)
        if not HTTP_PATH_RE.fullmatch(rest):
            errs.invalid(path, rest, regex_error("Invalid path", HTTP_PATH_FMT))
    if len(value) > _MAX_MANAGED_BY:
        errs.too_long(path, _MAX_MANAGED_BY)


_PFP_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
_PFP_OPERATORS = ["In", "NotIn"]
_CONDITION_STATUSES = ["False", "True", "Unknown"]


def _validate_pod_failure_policy(spec: Obj, path: str, errs: Errs) -> None:
    """API-16: the structural rules of podFailurePolicy."""
    rules = dig(spec, "podFailurePolicy", "rules") or []
    if len(rules) > _MAX_PFP_RULES:
        errs.too_many(path + ".rules", len(rules), _MAX_PFP_RULES)
    tspec = dig(spec, "template", "spec") or {}
    names = {
        c.get("name") for c in (tspec.get("containers") or []) + (tspec.get("initContainers") or [])
    }
    for i, rule in enumerate(rules):
        rp = f"{path}.rules[{i}]"
        action = rule.get("action") or ""
        if not action:
            errs.required(
                rp + ".action", "valid values: " + json.dumps(_PFP_ACTIONS).replace(",", " ")[1:-1]
            )
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                errs.invalid(rp + ".action", action, "requires the backoffLimitPerIndex to be set")
        elif action not in _PFP_ACTIONS:
            errs.not_supported(rp + ".action", action, _PFP_ACTIONS)
        on_exit = rule.get("onExitCodes")
        on_conds = rule.get("onPodConditions") or []
        if on_exit is not None:
            ep = rp + ".onExitCodes"
            op = on_exit.get("operator") or ""
            if not op:
                errs.required(ep + ".operator", 'valid values: ["In" "NotIn"]')
            elif op not in _PFP_OPERATORS:
                errs.not_supported(ep + ".operator", op, _PFP_OPERATORS)
            cname = on_exit.get("containerName")
            if cname is not None and cname not in names:
                errs.invalid(
                    ep + ".containerName",
                    cname,
                    "must be one of the container or initContainer names in the pod template",
                )
            values = on_exit.get("values") or []
            if not values:
                errs.invalid(ep + ".values", values, "at least one value is required")
            elif len(values) > _MAX_EXIT_CODES:
                errs.too_many(ep + ".values", len(values), _MAX_EXIT_CODES)
            seen: set[int] = set()
            for j, v in enumerate(values):
                if op == "In" and v == 0:
                    errs.invalid(f"{ep}.values[{j}]", v, "must not be 0 for the In operator")
                if v in seen:
                    errs.duplicate(f"{ep}.values[{j}]", v)
                seen.add(v)
            if any(values[j - 1] > values[j] for j in range(1, len(values))):
                errs.invalid(ep + ".values", values, "must be ordered")
        if on_conds:
            cp = rp + ".onPodConditions"
            if len(on_conds) > _MAX_POD_CONDITIONS:
                errs.too_many(cp, len(on_conds), _MAX_POD_CONDITIONS)
            for j, pattern in enumerate(on_conds):
                for m in is_qualified_name(pattern.get("type") or ""):
                    errs.invalid(f"{cp}[{j}].type", pattern.get("type") or "", m)
                status = pattern.get("status") or ""
                if not status:
                    errs.required(f"{cp}[{j}].status", 'valid values: ["False" "True" "Unknown"]')
                elif status not in _CONDITION_STATUSES:
                    errs.not_supported(f"{cp}[{j}].status", status, _CONDITION_STATUSES)
        if on_exit is not None and on_conds:
            errs.invalid(
                rp, OMIT, "specifying both OnExitCodes and OnPodConditions is not supported"
            )
        if on_exit is None and not on_conds:
            errs.invalid(rp, OMIT, "specifying one of OnExitCodes and OnPodConditions is required")


def _validate_success_policy(spec: Obj, path: str, errs: Errs) -> None:
    """API-18."""
    rules = dig(spec, "successPolicy", "rules") or []
    completions = c if is_int(c := spec.get("completions")) else 0
    if not rules:
        errs.required(
            path + ".rules",
            "at least one rules must be specified when the successPolicy is specified",
        )
    if len(rules) > _MAX_SUCCESS_RULES:
        errs.too_many(path + ".rules", len(rules), _MAX_SUCCESS_RULES)
    for i, rule in enumerate(rules):
        rp = f"{path}.rules[{i}]"
        count = rule.get("succeededCount")
        indexes = rule.get("succeededIndexes")
        if count is None and indexes is None:
            errs.required(
                rp, "at least one of succeededCount or succeededIndexes must be specified"
            )
        total = 0
        if indexes is not None:
            if len(indexes) > _MAX_SUCCEEDED_INDEXES_LEN:
                errs.too_long(rp + ".succeededIndexes", _MAX_SUCCEEDED_INDEXES_LEN)
            try:
                total = _validate_indexes_format(indexes, completions)
            except ValueError as e:
                errs.invalid(
                    rp + ".succeededIndexes", indexes, f"error parsing succeededIndexes: {e}"
                )
        if is_int(count):
            errs.nonnegative(rp + ".succeededCount", count)
            if count > completions:
                errs.invalid(
                    rp + ".succeededCount",
                    count,
                    f"must be less than or equal to {completions} (the number of specified completions)",
                )
            if indexes is not None and count > total:
                errs.invalid(
                    rp + ".succeededCount",
                    count,
                    f"must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)",
                )


def _validate_job(job: Obj, require_prefixed: bool, errs: Errs) -> None:
    """ValidateJob (API-11 to API-18, API-25)."""
    meta = job.get("metadata") or {}
    validate_object_meta(meta, is_dns1123_subdomain, errs)
    _validate_generated_selector(job, require_prefixed, errs)
    spec = job.get("spec") or {}
    _validate_standalone_job_spec(spec, errs)
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed" and is_int(completions) and completions > 0:
        # API-14: the controller names pods' hostnames <name>-<index>.
        hostname = f"{meta.get('name') or ''}-{completions - 1}"
        if is_dns1123_label(hostname):
            errs.invalid(
                "metadata.name",
                meta.get("name") or "",
                f"will not able to create pod with invalid DNS label: {hostname}",
            )


def _validate_standalone_job_spec(spec: Obj, errs: Errs) -> None:
    """ValidateJobSpec: a Job's spec with its selector (a CronJob's template has none yet)."""
    validate_job_spec(spec, "spec", errs)
    selector = spec.get("selector")
    if selector is None:
        errs.required("spec.selector")
    else:
        _validate_label_selector(selector, "spec.selector", errs)
    if _selector_is_valid(selector):  # API-12
        t_labels = dig(spec, "template", "metadata", "labels") or {}
        if not _selector_matches(selector, t_labels):
            errs.invalid(
                "spec.template.metadata.labels",
                t_labels or None,  # an empty map is Go's nil, printed as null
                "`selector` does not match template `labels`",
            )


def _validate_job_update(job: Obj, old: Obj, errs: Errs) -> None:
    """ValidateJobSpecUpdate (API-19, API-20, API-28). It validates the spec again first, so
    upstream reports a bad spec twice on update; so does kubesim."""
    spec = job.get("spec") or {}
    old_spec = old.get("spec") or {}
    _validate_standalone_job_spec(spec, errs)
    # API-19: completions is immutable except for elastic Indexed Jobs.
    if spec.get("completionMode") != "Indexed":
        errs.immutable("spec.completions", spec.get("completions"), old_spec.get("completions"))
    elif (
        spec.get("completions") != old_spec.get("completions")
        and spec.get("completions") is not None
    ):
        if spec.get("completions") != spec.get("parallelism"):
            errs.invalid(
                "spec.completions",
                spec.get("completions"),
                "can only be modified in tandem with spec.parallelism",
            )
    errs.immutable("spec.selector", spec.get("selector"), old_spec.get("selector"))
    # API-20: the template may change only its scheduling directives, and only while the old
    # Job is suspended and has never started.
    template = spec.get("template") or {}
    old_template = old_spec.get("template") or {}
    if old_spec.get("suspend") is True and dig(old, "status", "startTime") is None:
        # The allowed changes are copied into (a copy of) the old template before comparing.
        old_template = clone(old_template)
        t_spec = template.get("spec") or {}
        o_spec = old_template.setdefault("spec", {})
        new_aff = t_spec.get("affinity")
        old_aff = o_spec.get("affinity")
        if new_aff is None and old_aff is not None:
            old_aff.pop("nodeAffinity", None)
            if not norm(old_aff):
                o_spec.pop("affinity", None)
        elif new_aff is not None and old_aff is None:
            o_spec["affinity"] = {"nodeAffinity": new_aff.get("nodeAffinity")}
        elif new_aff is not None and old_aff is not None:
            old_aff["nodeAffinity"] = new_aff.get("nodeAffinity")
        for key in ("nodeSelector", "tolerations", "schedulingGates"):
            o_spec[key] = t_spec.get(key)
        o_meta = old_template.setdefault("metadata", {})
        t_meta = template.get("metadata") or {}
        for key in ("labels", "annotations"):
            o_meta[key] = t_meta.get(key)
    errs.immutable("spec.template", template, old_template)
    for key in (
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ):
        errs.immutable(f"spec.{key}", spec.get(key), old_spec.get(key))  # API-19, API-28


def _conditions_true(job: Obj, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True"
        for c in dig(job, "status", "conditions") or []
    )


# The condition types the status checks read, and the field their errors are reported at.
_STATUS_CONDITIONS = ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet")
_CONDITIONS_PATH = "status.conditions"


def _count(status: Obj, key: str) -> int:
    value = status.get(key)
    return value if is_int(value) else 0


@dataclass(frozen=True)
class _StatusWrite:
    """A ``/status`` write as ValidateJobStatusUpdate reads it: both statuses, the conditions
    that are True in each, and the times parsed. Most checks run only when a field they involve
    changes in the write (API-31), so a Job whose stored status is already odd can still receive
    unrelated status writes; the ``*_changed`` members say what changed."""

    status: Obj
    old_status: Obj
    spec: Obj
    true: frozenset[str]
    old_true: frozenset[str]
    start: datetime | None
    old_start: datetime | None
    completion: datetime | None
    old_completion: datetime | None

    @classmethod
    def of(cls, job: Obj, old: Obj) -> _StatusWrite:
        st, ost = job.get("status") or {}, old.get("status") or {}
        return cls(
            status=st,
            old_status=ost,
            spec=job.get("spec") or {},
            true=frozenset(t for t in _STATUS_CONDITIONS if _conditions_true(job, t)),
            old_true=frozenset(t for t in _STATUS_CONDITIONS if _conditions_true(old, t)),
            start=parse_time(st.get("startTime")),
            old_start=parse_time(ost.get("startTime")),
            completion=parse_time(st.get("completionTime")),
            old_completion=parse_time(ost.get("completionTime")),
        )

    @property
    def finished(self) -> bool:
        return "Complete" in self.true or "Failed" in self.true

    @property
    def finished_changed(self) -> bool:
        return self.finished != ("Complete" in self.old_true or "Failed" in self.old_true)

    def conditions_changed(self, *ctypes: str) -> bool:
        return any((t in self.true) != (t in self.old_true) for t in ctypes)

    def changed(self, key: str) -> bool:
        return self.status.get(key) != self.old_status.get(key)

    @property
    def active_changed(self) -> bool:
        return _count(self.status, "active") != _count(self.old_status, "active")

    @property
    def uncounted_changed(self) -> bool:
        key = "uncountedTerminatedPods"
        return not sem_equal(self.status.get(key), self.old_status.get(key))

    @property
    def start_changed(self) -> bool:
        return self.start != self.old_start

    @property
    def completion_changed(self) -> bool:
        return self.completion != self.old_completion


def _validate_job_status_update(job: Obj, old: Obj, errs: Errs) -> None:
    """ValidateJobStatusUpdate with the JobManagedBy options of the Job status strategy (API-29 to API-47).

    The checks append their errors in upstream's order: validateJobStatus, then the
    transitions from the old status.
    """
    write = _StatusWrite.of(job, old)
    _validate_status_counters(write, errs)
    _validate_status_conditions(write, errs)
    _validate_finished_status(write, errs)
    _validate_status_indexes(write, errs)
    _validate_status_pod_counts(write, errs)
    _validate_success_criteria(write, errs)
    _validate_status_transitions(write, errs)


def _validate_status_counters(write: _StatusWrite, errs: Errs) -> None:
    """API-29, on every write: counters ≥ 0, uncounted uids non-empty and unique."""
    for key in ("active", "succeeded", "failed", "ready", "terminating"):
        errs.nonnegative(f"status.{key}", write.status.get(key))
    uncounted = write.status.get("uncountedTerminatedPods")
    if not isinstance(uncounted, dict):
        return
    seen: set[str] = set()
    for kind in ("succeeded", "failed"):
        for i, uid in enumerate(uncounted.get(kind) or []):
            p = f"status.uncountedTerminatedPods.{kind}[{i}]"
            if not uid:
                errs.invalid(p, uid or "", "must not be empty")
            elif uid in seen:
                errs.duplicate(p, uid)
            else:
                seen.add(uid)


def _validate_status_conditions(write: _StatusWrite, errs: Errs) -> None:
    """API-35, API-44, API-42, API-45: which conditions and times may stand together."""
    complete, failed = "Complete" in write.true, "Failed" in write.true
    target, criteria = "FailureTarget" in write.true, "SuccessCriteriaMet" in write.true
    completion_time = write.status.get("completionTime")
    complete_or_time_changed = write.conditions_changed("Complete") or write.completion_changed
    if write.conditions_changed("Complete", "Failed") and complete and failed:  # API-35
        errs.invalid(_CONDITIONS_PATH, OMIT, "cannot set Complete=True and Failed=true conditions")
    if write.conditions_changed("Complete", "FailureTarget") and complete and target:
        errs.invalid(
            _CONDITIONS_PATH, OMIT, "cannot set Complete=True and FailureTarget=true conditions"
        )
    if complete_or_time_changed and completion_time and not complete:  # API-44
        errs.invalid(
            "status.completionTime",
            completion_time,
            "cannot set completionTime when there is no Complete=True condition",
        )
    if complete_or_time_changed and not completion_time and complete:
        errs.required("status.completionTime", "completionTime is required for Complete jobs")
    _validate_completion_after_start(write, errs)
    if (write.conditions_changed("Failed") or write.changed("failedIndexes")) and failed:
        if not target:  # API-45
            errs.invalid(
                _CONDITIONS_PATH,
                OMIT,
                "cannot set Failed=True condition without the FailureTarget=true condition",
            )
    if write.conditions_changed("Complete", "SuccessCriteriaMet") and complete and not criteria:
        errs.invalid(
            _CONDITIONS_PATH,
            OMIT,
            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        )


def _validate_completion_after_start(write: _StatusWrite, errs: Errs) -> None:
    """API-42: completionTime is not before startTime."""
    start, completion = write.start, write.completion
    if not (write.start_changed or write.completion_changed):
        return
    if start is not None and completion is not None and completion < start:
        errs.invalid(
            "status.completionTime",
            write.status.get("completionTime"),
            "completionTime cannot be set before startTime",
        )


def _validate_finished_status(write: _StatusWrite, errs: Errs) -> None:
    """API-38, API-39, API-40: a finished Job has no active pods, a startTime, and no
    uncounted pods."""
    if not write.finished:
        return
    st = write.status
    active = _count(st, "active")
    if (write.finished_changed or write.active_changed) and active > 0:  # API-38
        errs.invalid("status.active", active, "active>0 is invalid for finished job")
    if (write.finished_changed or write.start_changed) and not st.get("startTime"):  # API-39
        errs.required("status.startTime", "startTime is required for finished job")
    uncounted = st.get("uncountedTerminatedPods")
    if not (write.finished_changed or write.uncounted_changed) or not isinstance(uncounted, dict):
        return
    if (uncounted.get("succeeded") or []) or (uncounted.get("failed") or []):  # API-40
        errs.invalid(
            "status.uncountedTerminatedPods",
            uncounted,
            "uncountedTerminatedPods needs to be empty for finished job",
        )


def _validate_status_indexes(write: _StatusWrite, errs: Errs) -> None:
    """API-36, API-37: completedIndexes and failedIndexes are well-formed, each allowed by the
    spec, and disjoint."""
    spec, completions = write.spec, write.spec.get("completions")
    per_index = spec.get("backoffLimitPerIndex") is not None
    completed = write.status.get("completedIndexes") or ""
    failed = write.status.get("failedIndexes")
    completed_changed = completed != (write.old_status.get("completedIndexes") or "")
    failed_changed = write.changed("failedIndexes")
    if completed_changed and is_int(completions):  # API-36
        _validate_status_index_format("completedIndexes", completed, completions, errs)
    if failed_changed and is_int(completions) and per_index and failed is not None:
        _validate_status_index_format("failedIndexes", failed, completions, errs)
    if completed_changed and completed and spec.get("completionMode") != "Indexed":
        errs.invalid(
            "status.completedIndexes",
            completed,
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        )
    if failed_changed and not per_index and failed is not None:  # API-37
        errs.invalid(
            "status.failedIndexes",
            failed,
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        )
    if (failed_changed or completed_changed) and is_int(completions) and failed:
        overlap = _index_set(completed, completions) & _index_set(failed, completions)
        if overlap:
            errs.invalid(
                "status.failedIndexes",
                failed,
                f"failedIndexes and completedIndexes overlap at index: {min(overlap)}",
            )


def _validate_status_index_format(key: str, indexes: str, completions: int, errs: Errs) -> None:
    try:
        _validate_indexes_format(indexes, completions)
    except ValueError as e:
        errs.invalid(f"status.{key}", indexes, f"error parsing {key}: {e}")


def _validate_status_pod_counts(write: _StatusWrite, errs: Errs) -> None:
    """API-46, API-47: a finished Job has no terminating pods, and ready pods are active."""
    terminating, ready = write.status.get("terminating"), write.status.get("ready")
    if write.finished_changed or write.changed("terminating"):
        if write.finished and is_int(terminating) and terminating > 0:  # API-46
            errs.invalid(
                "status.terminating", terminating, "terminating>0 is invalid for finished job"
            )
    if write.changed("ready") or write.active_changed:
        if is_int(ready) and ready > _count(write.status, "active"):  # API-47
            errs.invalid("status.ready", ready, "cannot set more ready pods than active")


def _validate_success_criteria(write: _StatusWrite, errs: Errs) -> None:
    """API-29: SuccessCriteriaMet never beside a failure, and before Complete with a
    successPolicy. Checked on every write."""
    if "SuccessCriteriaMet" in write.true:
        if "Failed" in write.true:
            errs.invalid(
                _CONDITIONS_PATH,
                OMIT,
                "cannot set SuccessCriteriaMet=True and Failed=true conditions",
            )
        if "FailureTarget" in write.true:
            errs.invalid(
                _CONDITIONS_PATH,
                OMIT,
                "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
            )
    elif write.spec.get("successPolicy") is not None and "Complete" in write.true:
        errs.invalid(
            _CONDITIONS_PATH,
            OMIT,
            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
        )


def _validate_status_transitions(write: _StatusWrite, errs: Errs) -> None:
    """API-32 to API-34, API-41, API-43: what a status write may not undo."""
    st, ost, spec = write.status, write.old_status, write.spec
    for ctype in ("Failed", "Complete", "FailureTarget"):  # API-34
        if ctype in write.old_true and ctype not in write.true:
            errs.invalid(
                _CONDITIONS_PATH, OMIT, f"cannot disable the terminal {ctype}=True condition"
            )
    if _count(st, "failed") < _count(ost, "failed"):  # API-32
        errs.invalid("status.failed", _count(st, "failed"), "cannot decrease the failed counter")
    # API-33: an elastic Indexed Job (completions scaled down with parallelism) may lose successes.
    indexed = spec.get("completionMode") == "Indexed"
    elastic = indexed and spec.get("completions") == spec.get("parallelism")
    if not elastic and _count(st, "succeeded") < _count(ost, "succeeded"):
        errs.invalid(
            "status.succeeded", _count(st, "succeeded"), "cannot decrease the succeeded counter"
        )
    completion, old_completion = write.completion, write.old_completion
    if completion is not None and old_completion is not None and completion != old_completion:
        # API-43
        errs.invalid(
            "status.completionTime", st.get("completionTime"), "field is immutable"
        )
    if write.old_start is not None and write.start_changed and spec.get("suspend") is not True:
        # API-41
        errs.required("status.startTime", "startTime cannot be removed for unsuspended job")
    _validate_success_criteria_transitions(write, errs)


def _validate_success_criteria_transitions(write: _StatusWrite, errs: Errs) -> None:
    """API-29: SuccessCriteriaMet is never removed, nor added to a Job already Complete."""
    criteria = "SuccessCriteriaMet" in write.true
    old_criteria = "SuccessCriteriaMet" in write.old_true
    if old_criteria and not criteria:
        errs.invalid(_CONDITIONS_PATH, OMIT, "cannot disable the SuccessCriteriaMet=True condition")
    if "Complete" in write.old_true and not old_criteria and criteria:
        errs.invalid(
            _CONDITIONS_PATH,
            OMIT,
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        )


def job_create(job: Obj, now: datetime, errs: Errs) -> None:
    _default_job(job)
    job["status"] = {}  # API-8: status is cleared on create
    ensure(job, "metadata")["generation"] = 1
    # API-7 runs when the body is decoded, before the selector is generated (a template with labels
    # shares them with the Job, generated ones too), and again when the stored Job is read back
    # (a template without labels gives the Job the generated ones, after validation saw none)
    shares = bool(dig(job, "spec", "template", "metadata", "labels")) and not job["metadata"].get("labels")
    _generate_selector(job)
    if shares:
        _copy_template_labels(job)
    _validate_job(job, True, errs)
    _copy_template_labels(job)


def _require_prefixed_on_update(old: Obj) -> bool:
    # API-11: the prefixed labels are required on update only if the old template had both.
    t_labels = dig(old, "spec", "template", "metadata", "labels") or {}
    return JOB_NAME_LABEL in t_labels and CONTROLLER_UID_LABEL in t_labels


def job_update(job: Obj, old: Obj, errs: Errs) -> None:
    _default_job(job)
    job["status"] = clone(old.get("status") or {})  # API-22
    bump_generation(job, old)
    _copy_template_labels(job)
    _validate_job(job, _require_prefixed_on_update(old), errs)
    _validate_job_update(job, old, errs)


def job_status_update(job: Obj, old: Obj, errs: Errs) -> None:
    job["spec"] = clone(old.get("spec") or {})  # API-22
    _validate_job_status_update(job, old, errs)
