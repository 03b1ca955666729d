"""CronJobs (batch/v1): defaults (API-48) and validation (API-50 to API-57, with API-13 and
API-24 for the job template), as ``pkg/registry/batch/cronjob/strategy.go`` runs them.

Layer: kubesim. Called through :mod:`kubesim.strategy.registry`. Schedules are parsed by the
standalone ``cronexpr``, the parser batchd evaluates them with (API-51).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import cronexpr
from kubesim.codec import clone
from kubesim.strategy.common import (
    Errs,
    Obj,
    bump_generation,
    dig,
    ensure,
    is_dns1123_subdomain,
    validate_object_meta,
)
from kubesim.strategy.job import validate_job_spec
from kubesim.strategy.pod import default_template

_TZ_PART_RE = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")
_CONCURRENCY = ["Allow", "Forbid", "Replace"]


def _default_cronjob(cj: Obj) -> None:
    spec = ensure(cj, "spec")
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"  # API-48
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("successfulJobsHistoryLimit") is None:
        spec["successfulJobsHistoryLimit"] = 3
    if spec.get("failedJobsHistoryLimit") is None:
        spec["failedJobsHistoryLimit"] = 1
    # Upstream's generated defaulter walks into the job template's pod spec (pod and container
    # defaults) but not into JobSpec: the Job defaults apply when the controller creates the Job.
    default_template(dig(spec, "jobTemplate", "spec", "template"))


def cronjob_defaults(cj: Obj) -> None:
    """The CronJob defaults a decoded body gets (API-48)."""
    _default_cronjob(cj)


def _validate_time_zone(tz: Any, path: str, errs: Errs) -> None:
    """API-53."""
    if tz is None:
        return
    if tz == "":
        errs.invalid(path, tz, "timeZone must be nil or non-empty string")
        return
    for part in tz.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART_RE.match(part):
            errs.invalid(path, tz, f"unknown time zone {tz}")
            return
    if tz.lower() == "local":
        errs.invalid(
            path,
            tz,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        )
    try:
        cronexpr.load_location(tz)
    except LookupError as e:
        if tz.lower() != "local":
            errs.invalid(path, tz, str(e))


def _validate_cronjob_spec(spec: Obj, old_spec: Obj | None, errs: Errs) -> None:
    schedule = spec.get("schedule") or ""
    if not schedule:
        errs.required("spec.schedule")  # API-51
    else:
        try:  # the parser batchd evaluates schedules with, in robfig's words (API-51)
            cronexpr.parse_standard(schedule)
        except cronexpr.ParseError as e:
            errs.invalid("spec.schedule", schedule, str(e))
        allow_tz = old_spec is not None and "TZ" in (old_spec.get("schedule") or "")
        if allow_tz and "TZ" in schedule and spec.get("timeZone") is not None:  # API-57
            errs.invalid(
                "spec.schedule",
                schedule,
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            )
        elif not allow_tz and "TZ" in schedule:
            errs.invalid(
                "spec.schedule",
                schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            )
    errs.nonnegative("spec.startingDeadlineSeconds", spec.get("startingDeadlineSeconds"))  # API-52
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        _validate_time_zone(spec.get("timeZone"), "spec.timeZone", errs)  # API-53
    policy = spec.get("concurrencyPolicy") or ""
    if not policy:
        errs.required("spec.concurrencyPolicy")  # API-54
    elif policy not in _CONCURRENCY:
        errs.not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY)
    job_spec = dig(spec, "jobTemplate", "spec") or {}
    validate_job_spec(job_spec, "spec.jobTemplate.spec", errs)
    if job_spec.get("selector") is not None:  # API-56
        errs.invalid(
            "spec.jobTemplate.spec.selector",
            job_spec.get("selector"),
            "`selector` will be auto-generated",
        )
    if job_spec.get("manualSelector") is True:
        errs.not_supported("spec.jobTemplate.spec.manualSelector", True, ["nil", "false"])
    errs.nonnegative(
        "spec.successfulJobsHistoryLimit", spec.get("successfulJobsHistoryLimit")
    )  # API-55
    errs.nonnegative("spec.failedJobsHistoryLimit", spec.get("failedJobsHistoryLimit"))


def cronjob_create(cj: Obj, now: datetime, errs: Errs) -> None:
    _default_cronjob(cj)
    cj["status"] = {}
    ensure(cj, "metadata")["generation"] = 1
    meta = cj["metadata"]
    validate_object_meta(meta, is_dns1123_subdomain, errs)
    _validate_cronjob_spec(cj.get("spec") or {}, None, errs)
    name = meta.get("name") or ""
    if len(name) > 52:  # API-50: create only; 63 minus the 11-character "-<minutes>" suffix
        errs.invalid("metadata.name", name, "must be no more than 52 characters")


def cronjob_update(cj: Obj, old: Obj, errs: Errs) -> None:
    _default_cronjob(cj)
    cj["status"] = clone(old.get("status") or {})
    bump_generation(cj, old)
    validate_object_meta(cj["metadata"], is_dns1123_subdomain, errs)
    _validate_cronjob_spec(cj.get("spec") or {}, old.get("spec") or {}, errs)


def cronjob_status_update(cj: Obj, old: Obj, errs: Errs) -> None:
    # Upstream's CronJob status strategy copies the spec and validates nothing else.
    cj["spec"] = clone(old.get("spec") or {})
