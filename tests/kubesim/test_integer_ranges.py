"""Integers decode as the API server decodes them (issue 14): every int32 and int64 field of the
served kinds refuses a value out of its range, or a float literal, with upstream's 400."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import kubernetes.client as k8s
import pytest

from kubesim import protobuf, schema, strategy
from kubesim.errors import ApiError

LIST = re.compile(r"^List\[(.+)\]$")
DICT = re.compile(r"^Dict\[str, *(.+)\]$")
ROOTS = {("batch", "jobs"): "V1Job", ("batch", "cronjobs"): "V1CronJob", ("", "pods"): "V1Pod",
         ("", "namespaces"): "V1Namespace", ("", "events"): "CoreV1Event",
         ("events.k8s.io", "events"): "EventsV1Event", ("coordination.k8s.io", "leases"): "V1Lease"}


def int_fields(model: str, steps: tuple[tuple[str, str], ...] = (), seen: frozenset[str] = frozenset()
               ) -> Iterator[tuple[tuple[tuple[str, str], ...], str, str]]:
    """(path of (json name, container kind), owning model, json name) of every integer field."""
    klass = getattr(k8s, model)
    for attr, type_str in klass.openapi_types.items():
        name = klass.attribute_map[attr]
        wrapper = ""
        m = LIST.match(type_str) or DICT.match(type_str)
        if m:
            wrapper = "list" if type_str.startswith("List") else "map"
            type_str = m.group(1)
        if type_str == "int":
            yield (*steps, (name, wrapper)), model, name
        elif hasattr(k8s, type_str) and type_str not in seen and len(steps) < 12:
            yield from int_fields(type_str, (*steps, (name, wrapper)), seen | {model})


def build(steps: tuple[tuple[str, str], ...], value: Any) -> dict[str, Any]:
    """A minimal object holding ``value`` at ``steps`` (lists of one item, maps of one key)."""
    for name, wrapper in reversed(steps):
        value = [value] if wrapper == "list" else {"k": value} if wrapper == "map" else value
        value = {name: value}
    return value


CASES = [(group, plural, steps, model, name)
         for (group, plural), root in sorted(ROOTS.items())
         for steps, model, name in int_fields(root)]


# Fields of the installed client newer than kubesim's wire table (alpha features past 1.33):
# decoded with int64's bounds until the table describes them.
NEWER = {
    "V1ClusterTrustBundleProjection.user", "V1ConfigMapVolumeSource.defaultUser",
    "V1ContainerRestartRuleOnExitCodes.values", "V1DownwardAPIVolumeFile.user",
    "V1DownwardAPIVolumeSource.defaultUser", "V1EmptyDirVolumeSource.mode", "V1EvictionResponder.priority",
    "V1KeyToPath.user", "V1PodCertificateProjection.maxExpirationSeconds", "V1PodCertificateProjection.user",
    "V1ProjectedVolumeSource.defaultUser", "V1SecretVolumeSource.defaultUser",
    "V1ServiceAccountTokenProjection.user", "V1alpha3WorkloadPodGroupGangSchedulingPolicy.minCount",
}


def test_the_wire_table_knows_the_width_of_every_integer_field() -> None:
    missing = {f"{model}.{name}" for _, _, _, model, name in CASES if protobuf.int_format(model, name) is None}
    assert missing <= NEWER
    assert len(CASES) > 150  # all of Pod's, Job's and CronJob's integers, not a sample


def refusal(group: str, plural: str, steps: tuple[tuple[str, str], ...], value: int) -> str | None:
    try:
        schema.prune(group, plural, build(steps, value))
    except ApiError as e:
        assert e.code == 400
        return e.message
    return None


@pytest.mark.parametrize(("group", "plural"), sorted(ROOTS), ids=[p or g for g, p in sorted(ROOTS)])
def test_every_integer_field_refuses_the_first_value_past_its_range(group: str, plural: str) -> None:
    wrong = []
    cases = [(steps, model, name) for g, p, steps, model, name in CASES if (g, p) == (group, plural)]
    for steps, model, name in cases:
        width = protobuf.int_format(model, name) or "int64"
        bits = 32 if width == "int32" else 64
        go_type = model.removeprefix("CoreV1").removeprefix("EventsV1").removeprefix("V1")
        path = ".".join(s for s, _ in steps)
        for value in (1 << (bits - 1), -(1 << (bits - 1)) - 1):
            want = f"json: cannot unmarshal number {value} into Go struct field {go_type}.{path} of type {width}"
            got = refusal(group, plural, steps, value)
            if got is None or not got.endswith(want):
                wrong.append((path, value, got))
        for bound in ((1 << (bits - 1)) - 1, -(1 << (bits - 1))):  # the bounds themselves decode
            if (got := refusal(group, plural, steps, bound)) is not None:
                wrong.append((path, bound, got))
    assert cases and wrong == []


@pytest.mark.parametrize(("field", "value", "message"), [
    ("ttlSecondsAfterFinished", 2147483648,
     'Job in version "v1" cannot be handled as a Job: json: cannot unmarshal number 2147483648 into Go struct '
     "field JobSpec.spec.ttlSecondsAfterFinished of type int32"),
    ("activeDeadlineSeconds", 9223372036854775808,
     'Job in version "v1" cannot be handled as a Job: json: cannot unmarshal number 9223372036854775808 into '
     "Go struct field JobSpec.spec.activeDeadlineSeconds of type int64"),
    ("backoffLimit", 1.5,
     'Job in version "v1" cannot be handled as a Job: json: cannot unmarshal number 1.5 into Go struct '
     "field JobSpec.spec.backoffLimit of type int32"),
], ids=["int32 past 2^31-1", "int64 past 2^63-1", "a fraction"])
def test_job_fields_out_of_range_are_refused_with_the_decoders_message(field: str, value: Any, message: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {field: value}}
    with pytest.raises(ApiError) as info:
        strategy.prepare_create("batch", "jobs", job, now=None)  # type: ignore[arg-type]
    assert (info.value.code, info.value.reason, info.value.message) == (400, "BadRequest", message)


def test_a_float_literal_beyond_int64_is_refused_over_http(http: Any, ns: str) -> None:
    # 1e20 is past int64 and a float literal: the decoder refuses it before any validation.
    raw = (b'{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"schedule":"@hourly",'
           b'"startingDeadlineSeconds":1e20,"jobTemplate":{"spec":{"template":{"spec":{"containers":[]}}}}}}')
    code, _, answer = http.request("POST", f"/apis/batch/v1/namespaces/{ns}/cronjobs", raw=raw)
    assert (code, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == (
        'CronJob in version "v1" cannot be handled as a CronJob: json: cannot unmarshal number 1e20 into Go '
        "struct field CronJobSpec.spec.startingDeadlineSeconds of type int64"
    )


def test_the_openapi_document_gives_each_integer_its_width() -> None:
    doc = schema.openapi_v3_document("apis/batch/v1")
    assert doc is not None
    spec = doc["components"]["schemas"]["io.k8s.api.batch.v1.JobSpec"]["properties"]
    assert spec["ttlSecondsAfterFinished"]["format"] == "int32"
    assert spec["activeDeadlineSeconds"]["format"] == "int64"
