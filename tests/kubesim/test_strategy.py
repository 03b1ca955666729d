"""kubesim.strategy: defaults, validation and status/spec separation, called directly on dicts.

Rule ids are the API-n of docs/kubesim.md (and a few JOB-n, CJ-n of docs/job.md, docs/cronjob.md).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from kubesim import strategy
from kubesim.errors import ApiError

NOW = datetime(2026, 1, 1, tzinfo=UTC)
UID = "0b1c2d3e-0000-4000-8000-000000000001"


def job(name: str = "pi", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": UID,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox:1.36"}],
                }
            },
        },
    }
    body["spec"].update(spec)
    return body


def cronjob(name: str = "hello", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default", "uid": UID},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [{"name": "c", "image": "busybox"}],
                        }
                    }
                }
            },
        },
    }
    body["spec"].update(spec)
    return body


def pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": UID},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    body["spec"].update(spec)
    return body


def create(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    return strategy.prepare_create(group, plural, obj, now=NOW)


def causes_of(err: ApiError) -> list[tuple[str, str, str]]:
    return [(c.field, c.reason, c.message) for c in err.causes]


def rejected(group: str, plural: str, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    with pytest.raises(ApiError) as info:
        create(group, plural, obj)
    assert info.value.code == 422 and info.value.reason == "Invalid"
    return causes_of(info.value)


def update(
    group: str, plural: str, old: dict[str, Any], new: dict[str, Any], sub: str | None = None
) -> dict[str, Any]:
    return strategy.prepare_update(group, plural, old, new, subresource=sub, now=NOW)


def update_rejected(
    group: str, plural: str, old: dict[str, Any], new: dict[str, Any], sub: str | None = None
) -> list[tuple[str, str, str]]:
    with pytest.raises(ApiError) as info:
        update(group, plural, old, new, sub)
    assert info.value.code == 422
    return causes_of(info.value)


# --------------------------------------------------------------------------------------------
# Job defaults
# --------------------------------------------------------------------------------------------

JOB_DEFAULTS = [
    # (id, spec overrides, expected spec subset)
    (
        "completions and parallelism unset both default to 1",
        {},
        {"completions": 1, "parallelism": 1},
    ),  # API-1
    (
        "only parallelism unset defaults parallelism, completions stays",
        {"completions": 5},
        {"completions": 5, "parallelism": 1},
    ),  # API-1
    (
        "only completions unset keeps completions nil",
        {"parallelism": 3},
        {"parallelism": 3, "completions": None},
    ),  # API-2
    ("backoffLimit defaults to 6", {}, {"backoffLimit": 6}),  # API-3
    (
        "backoffLimit defaults to MaxInt32 with backoffLimitPerIndex",
        {"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1},
        {"backoffLimit": 2147483647},
    ),  # API-3
    ("completionMode defaults to NonIndexed", {}, {"completionMode": "NonIndexed"}),  # API-4
    ("suspend defaults to false", {}, {"suspend": False}),  # API-4
    ("manualSelector defaults to false", {}, {"manualSelector": False}),  # API-4
    (
        "podReplacementPolicy defaults to TerminatingOrFailed",
        {},
        {"podReplacementPolicy": "TerminatingOrFailed"},
    ),  # API-5
    ("ttlSecondsAfterFinished has no default", {}, {"ttlSecondsAfterFinished": None}),  # API-49
    ("an explicit backoffLimit is kept", {"backoffLimit": 0}, {"backoffLimit": 0}),
]


@pytest.mark.parametrize(
    "overrides,expected", [c[1:] for c in JOB_DEFAULTS], ids=[c[0] for c in JOB_DEFAULTS]
)
def test_job_defaults(overrides: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = create("batch", "jobs", job(**overrides))["spec"]
    for key, value in expected.items():
        assert spec.get(key) == value, key


def test_pod_failure_policy_makes_replacement_policy_failed_and_condition_status_true() -> None:
    # API-5, API-6
    pfp = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    spec = create("batch", "jobs", job(podFailurePolicy=pfp))["spec"]
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_job_create_generates_selector_and_template_labels() -> None:
    # API-9, API-10
    out = create("batch", "jobs", job())
    labels = out["spec"]["template"]["metadata"]["labels"]
    assert labels == {
        "batch.kubernetes.io/job-name": "pi",
        "job-name": "pi",
        "batch.kubernetes.io/controller-uid": UID,
        "controller-uid": UID,
    }
    assert out["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}


def test_job_labels_default_to_template_labels() -> None:
    # API-7 (as stored: the Job also carries the generated labels, as on a real cluster)
    body = job()
    body["spec"]["template"]["metadata"] = {"labels": {"app": "pi"}}
    out = create("batch", "jobs", body)
    assert out["metadata"]["labels"]["app"] == "pi"
    assert out["metadata"]["labels"]["job-name"] == "pi"


def test_job_own_labels_are_kept() -> None:
    body = job()
    body["metadata"]["labels"] = {"team": "a"}
    assert create("batch", "jobs", body)["metadata"]["labels"] == {"team": "a"}


def test_job_create_clears_status_and_sets_generation_1() -> None:
    # API-8
    body = job()
    body["status"] = {"active": 3, "succeeded": 2}
    body["metadata"]["generation"] = 7
    out = create("batch", "jobs", body)
    assert out["status"] == {}
    assert out["metadata"]["generation"] == 1


def test_job_template_gets_pod_defaults() -> None:
    tspec = create("batch", "jobs", job())["spec"]["template"]["spec"]
    assert tspec["dnsPolicy"] == "ClusterFirst"
    assert tspec["terminationGracePeriodSeconds"] == 30
    assert tspec["schedulerName"] == "default-scheduler"
    assert tspec["securityContext"] == {}
    c = tspec["containers"][0]
    assert (c["terminationMessagePath"], c["terminationMessagePolicy"], c["imagePullPolicy"]) == (
        "/dev/termination-log",
        "File",
        "IfNotPresent",
    )
    assert "enableServiceLinks" not in tspec  # a Pod-only default


def test_unknown_fields_are_pruned_on_create() -> None:
    body = job()
    body["spec"]["bogus"] = 1
    body["spec"]["template"]["spec"]["containers"][0]["nope"] = True
    body["metadata"]["whatever"] = "x"
    out = create("batch", "jobs", body)
    assert "bogus" not in out["spec"]
    assert "nope" not in out["spec"]["template"]["spec"]["containers"][0]
    assert "whatever" not in out["metadata"]


def test_prepare_create_does_not_mutate_its_argument() -> None:
    body = job()
    snapshot = copy.deepcopy(body)
    create("batch", "jobs", body)
    assert body == snapshot


def _containers(value: Any) -> list[int]:
    """ids of every dict and list inside a JSON value."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


def test_prepare_create_and_update_results_share_no_containers_with_their_inputs() -> None:
    # The strategy copies each write once (while pruning); the stored object must not alias the
    # request body or the old object, since stored snapshots are never mutated in place.
    body = job()
    body["metadata"]["labels"] = {"a": "b"}
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 1}}
    stored = create("batch", "jobs", body)
    assert not set(_containers(stored)) & set(_containers(body))
    new = copy.deepcopy(stored)
    new["metadata"]["annotations"] = {"touched": "yes"}
    old_snapshot = copy.deepcopy(stored)
    updated = update("batch", "jobs", stored, new)
    assert not set(_containers(updated)) & (set(_containers(stored)) | set(_containers(new)))
    assert stored == old_snapshot
    status = update("batch", "jobs", updated, {**copy.deepcopy(updated), "status": {"active": 1}}, "status")
    assert not set(_containers(status)) & set(_containers(updated))


# --------------------------------------------------------------------------------------------
# Job validation
# --------------------------------------------------------------------------------------------

NEG = "must be greater than or equal to 0"
JOB_INVALID = [
    # (id, spec overrides, field, reason, message fragment)
    (
        "negative ttlSecondsAfterFinished is invalid",
        {"ttlSecondsAfterFinished": -1},
        "spec.ttlSecondsAfterFinished",
        "FieldValueInvalid",
        f"Invalid value: -1: {NEG}",
    ),  # API-24
    (
        "negative parallelism is invalid",
        {"parallelism": -1},
        "spec.parallelism",
        "FieldValueInvalid",
        NEG,
    ),  # API-24
    (
        "negative completions is invalid",
        {"completions": -2},
        "spec.completions",
        "FieldValueInvalid",
        NEG,
    ),  # API-24
    (
        "negative activeDeadlineSeconds is invalid",
        {"activeDeadlineSeconds": -5},
        "spec.activeDeadlineSeconds",
        "FieldValueInvalid",
        NEG,
    ),  # API-24
    (
        "negative backoffLimit is invalid",
        {"backoffLimit": -1},
        "spec.backoffLimit",
        "FieldValueInvalid",
        NEG,
    ),  # API-24
    (
        "Indexed without completions is required",
        {"completionMode": "Indexed", "parallelism": 2},
        "spec.completions",
        "FieldValueRequired",
        "Required value: when completion mode is Indexed",
    ),  # API-14
    (
        "Indexed parallelism above 100000 is invalid",
        {"completionMode": "Indexed", "completions": 5, "parallelism": 100001},
        "spec.parallelism",
        "FieldValueInvalid",
        "must be less than or equal to 100000 when completion mode is Indexed",
    ),  # API-14
    (
        "unknown completionMode is not supported",
        {"completionMode": "Sometimes"},
        "spec.completionMode",
        "FieldValueNotSupported",
        'supported values: "NonIndexed", "Indexed"',
    ),
    (
        "backoffLimitPerIndex needs Indexed mode",
        {"backoffLimitPerIndex": 1},
        "spec.backoffLimitPerIndex",
        "FieldValueInvalid",
        "requires indexed completion mode",
    ),  # API-15
    (
        "maxFailedIndexes needs backoffLimitPerIndex",
        {"completionMode": "Indexed", "completions": 3, "maxFailedIndexes": 1},
        "spec.backoffLimitPerIndex",
        "FieldValueRequired",
        "when maxFailedIndexes is specified",
    ),  # API-15
    (
        "maxFailedIndexes above completions is invalid",
        {
            "completionMode": "Indexed",
            "completions": 3,
            "backoffLimitPerIndex": 1,
            "maxFailedIndexes": 4,
        },
        "spec.maxFailedIndexes",
        "FieldValueInvalid",
        "must be less than or equal to completions",
    ),  # API-15
    (
        "unknown podReplacementPolicy is not supported",
        {"podReplacementPolicy": "Never"},
        "spec.podReplacementPolicy",
        "FieldValueNotSupported",
        'supported values: "Failed", "TerminatingOrFailed"',
    ),  # API-17
    (
        "successPolicy needs Indexed mode",
        {"successPolicy": {"rules": [{"succeededCount": 1}]}},
        "spec.successPolicy",
        "FieldValueInvalid",
        "requires indexed completion mode",
    ),  # API-18
    (
        "managedBy without a domain prefix is invalid",
        {"managedBy": "controller"},
        "spec.managedBy",
        "FieldValueInvalid",
        'must be a domain-prefixed path (such as \\"acme.io/foo\\")',
    ),  # API-26
    (
        "managedBy with an invalid domain is invalid",
        {"managedBy": "Not_A.Domain/x"},
        "spec.managedBy",
        "FieldValueInvalid",
        "RFC 1123 subdomain",
    ),  # API-26
    (
        "managedBy with two slashes is invalid",
        {"managedBy": "batchd.io/job/controller"},
        "spec.managedBy",
        "FieldValueInvalid",
        "domain-prefixed path",
    ),  # API-27
    (
        "managedBy longer than 63 characters is too long",
        {"managedBy": "batchd.io/" + "x" * 60},
        "spec.managedBy",
        "FieldValueTooLong",
        "Too long: may not be more than 63 bytes",
    ),  # API-26
]


@pytest.mark.parametrize(
    "overrides,field,reason,fragment", [c[1:] for c in JOB_INVALID], ids=[c[0] for c in JOB_INVALID]
)
def test_job_spec_validation(
    overrides: dict[str, Any], field: str, reason: str, fragment: str
) -> None:
    causes = rejected("batch", "jobs", job(**overrides))
    matching = [c for c in causes if c[0] == field and c[1] == reason]
    assert matching, causes
    assert any(fragment.replace('\\"', '"') in c[2] for c in matching), matching


RESTART_POLICY = [
    # API-13: pod defaulting turns a missing restartPolicy into Always, reported as Required
    (
        "missing restartPolicy reads as required",
        None,
        "FieldValueRequired",
        'Required value: valid values: "OnFailure", "Never"',
    ),
    (
        "restartPolicy Always reads as required",
        "Always",
        "FieldValueRequired",
        'Required value: valid values: "OnFailure", "Never"',
    ),
    (
        "restartPolicy Sometimes is not supported",
        "Sometimes",
        "FieldValueNotSupported",
        'supported values: "OnFailure", "Never"',
    ),
]


@pytest.mark.parametrize(
    "policy,reason,fragment", [c[1:] for c in RESTART_POLICY], ids=[c[0] for c in RESTART_POLICY]
)
def test_job_template_restart_policy(policy: str | None, reason: str, fragment: str) -> None:
    body = job()
    if policy is None:
        del body["spec"]["template"]["spec"]["restartPolicy"]
    else:
        body["spec"]["template"]["spec"]["restartPolicy"] = policy
    causes = rejected("batch", "jobs", body)
    assert ("spec.template.spec.restartPolicy", reason) in [(c[0], c[1]) for c in causes]
    assert any(fragment in c[2] for c in causes if c[0] == "spec.template.spec.restartPolicy")


def test_pod_failure_policy_requires_restart_policy_never() -> None:
    # API-13
    body = job(
        podFailurePolicy={
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]
        }
    )
    body["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    causes = rejected("batch", "jobs", body)
    assert (
        "spec.template.spec.restartPolicy",
        "FieldValueInvalid",
        'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified',
    ) in causes


POD_FAILURE_POLICY_INVALID = [
    # API-16
    (
        "exit code 0 with In is invalid",
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0]}},
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]",
        "must not be 0 for the In operator",
    ),
    (
        "unsorted exit codes are invalid",
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3, 1]}},
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "must be ordered",
    ),
    (
        "a rule needs onExitCodes or onPodConditions",
        {"action": "Ignore"},
        "spec.podFailurePolicy.rules[0]",
        "specifying one of OnExitCodes and OnPodConditions is required",
    ),
    (
        "FailIndex needs backoffLimitPerIndex",
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}},
        "spec.podFailurePolicy.rules[0].action",
        "requires the backoffLimitPerIndex to be set",
    ),
    (
        "containerName must name a container",
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "x", "operator": "In", "values": [1]},
        },
        "spec.podFailurePolicy.rules[0].onExitCodes.containerName",
        "must be one of the container or initContainer names",
    ),
]


@pytest.mark.parametrize(
    "rule,field,fragment",
    [c[1:] for c in POD_FAILURE_POLICY_INVALID],
    ids=[c[0] for c in POD_FAILURE_POLICY_INVALID],
)
def test_pod_failure_policy_validation(rule: dict[str, Any], field: str, fragment: str) -> None:
    causes = rejected("batch", "jobs", job(podFailurePolicy={"rules": [rule]}))
    assert any(c[0] == field and fragment in c[2] for c in causes), causes


def test_indexed_job_name_must_leave_room_for_the_hostname_suffix() -> None:
    # API-14
    causes = rejected("batch", "jobs", job(name="a" * 62, completionMode="Indexed", completions=10))
    assert any(
        c[0] == "metadata.name" and "will not able to create pod with invalid DNS label" in c[2]
        for c in causes
    )


def test_manual_selector_must_match_template_labels() -> None:
    # API-12
    body = job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    body["spec"]["template"]["metadata"] = {"labels": {"app": "y"}}
    causes = rejected("batch", "jobs", body)
    assert any(
        c[0] == "spec.template.metadata.labels"
        and "`selector` does not match template `labels`" in c[2]
        for c in causes
    )


def test_manual_selector_matching_template_is_accepted() -> None:
    body = job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    body["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    out = create("batch", "jobs", body)
    assert out["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert "job-name" not in out["spec"]["template"]["metadata"]["labels"]


def test_conflicting_generated_label_is_rejected() -> None:
    # API-11: the template must carry job-name=<name>
    body = job()
    body["spec"]["template"]["metadata"] = {"labels": {"job-name": "other"}}
    causes = rejected("batch", "jobs", body)
    assert any(
        c[0] == "spec.template.metadata.labels[job-name]" and "must be 'pi'" in c[2] for c in causes
    )


def test_valid_indexed_job_with_success_policy_is_accepted() -> None:
    # API-18
    out = create(
        "batch",
        "jobs",
        job(
            completionMode="Indexed",
            completions=5,
            parallelism=5,
            successPolicy={"rules": [{"succeededIndexes": "0-2", "succeededCount": 2}]},
        ),
    )
    assert out["spec"]["completionMode"] == "Indexed"


def test_managed_by_batchd_value_is_accepted() -> None:
    # API-26
    assert (
        create("batch", "jobs", job(managedBy="batchd.io/job-controller"))["spec"]["managedBy"]
        == "batchd.io/job-controller"
    )


# --------------------------------------------------------------------------------------------
# Metadata validation (all kinds)
# --------------------------------------------------------------------------------------------

META_INVALID = [
    (
        "an upper-case name is not a DNS subdomain",
        {"name": "Pi"},
        "metadata.name",
        "a lowercase RFC 1123 subdomain",
    ),
    (
        "a name longer than 253 characters is invalid",
        {"name": "a" * 254},
        "metadata.name",
        "must be no more than 253 characters",
    ),
    (
        "a label value longer than 63 characters is invalid",
        {"labels": {"a": "v" * 64}},
        "metadata.labels",
        "must be no more than 63 characters",
    ),
    (
        "a label value with a space is invalid",
        {"labels": {"a": "b c"}},
        "metadata.labels",
        "a valid label must be an empty string",
    ),
    (
        "a label key with two slashes is invalid",
        {"labels": {"a/b/c": "x"}},
        "metadata.labels",
        "a qualified name must consist of",
    ),
    (
        "a label key with a bad prefix is invalid",
        {"labels": {"Bad_Prefix/x": "y"}},
        "metadata.labels",
        "prefix part a lowercase RFC 1123 subdomain",
    ),
    (
        "an annotation key with a space is invalid",
        {"annotations": {"a b": "x"}},
        "metadata.annotations",
        "name part must consist of",
    ),
    (
        "a finalizer must be a qualified name",
        {"finalizers": ["not valid/x/y"]},
        "metadata.finalizers",  # upstream names the list for the name check
        "a qualified name",
    ),
    (
        "owner references need a uid",
        {"ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x"}]},
        "metadata.ownerReferences.uid",  # upstream names the list, not the item
        "must not be empty",
    ),
]


@pytest.mark.parametrize(
    "meta,field,fragment", [c[1:] for c in META_INVALID], ids=[c[0] for c in META_INVALID]
)
def test_metadata_validation(meta: dict[str, Any], field: str, fragment: str) -> None:
    body = job()
    body["metadata"].update(meta)
    causes = rejected("batch", "jobs", body)
    assert any(c[0] == field and fragment in c[2] for c in causes), causes


def test_regex_error_wording_matches_upstream() -> None:
    causes = rejected("batch", "jobs", job(name="Pi"))
    assert causes[0] == (
        "metadata.name",
        "FieldValueInvalid",
        'Invalid value: "Pi": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
        "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    )


def test_invalid_error_names_kind_group_and_object() -> None:
    with pytest.raises(ApiError) as info:
        create("batch", "jobs", job(ttlSecondsAfterFinished=-1))
    status = info.value.status()
    assert status["details"]["kind"] == "Job" and status["details"]["group"] == "batch"
    assert status["details"]["name"] == "pi"
    assert 'Job.batch "pi" is invalid' in status["message"]


# --------------------------------------------------------------------------------------------
# Job updates: generation, immutability, status/spec separation
# --------------------------------------------------------------------------------------------


@pytest.fixture
def stored_job() -> dict[str, Any]:
    return create("batch", "jobs", job(ttlSecondsAfterFinished=100))


def test_spec_change_bumps_generation(stored_job: dict[str, Any]) -> None:
    # API-21
    new = copy.deepcopy(stored_job)
    new["spec"]["ttlSecondsAfterFinished"] = 200
    assert update("batch", "jobs", stored_job, new)["metadata"]["generation"] == 2


def test_metadata_only_change_keeps_generation(stored_job: dict[str, Any]) -> None:
    new = copy.deepcopy(stored_job)
    new["metadata"]["labels"]["extra"] = "1"
    out = update("batch", "jobs", stored_job, new)
    assert out["metadata"]["generation"] == 1 and out["metadata"]["labels"]["extra"] == "1"


def test_client_cannot_set_generation(stored_job: dict[str, Any]) -> None:
    new = copy.deepcopy(stored_job)
    new["metadata"]["generation"] = 42
    assert update("batch", "jobs", stored_job, new)["metadata"]["generation"] == 1


def test_main_resource_write_ignores_status(stored_job: dict[str, Any]) -> None:
    # API-22
    new = copy.deepcopy(stored_job)
    new["status"] = {"active": 5}
    assert update("batch", "jobs", stored_job, new)["status"] == {}


def test_status_write_ignores_spec_but_keeps_labels(stored_job: dict[str, Any]) -> None:
    # API-22: /status ignores spec only
    new = copy.deepcopy(stored_job)
    new["spec"]["parallelism"] = 9
    new["metadata"]["labels"]["seen"] = "yes"
    new["status"] = {"active": 1, "startTime": "2026-01-01T00:00:01Z"}
    out = update("batch", "jobs", stored_job, new, "status")
    assert out["spec"]["parallelism"] == 1
    assert out["status"]["active"] == 1
    assert out["metadata"]["labels"]["seen"] == "yes"
    assert out["metadata"]["generation"] == 1


IMMUTABLE = [
    # API-19, API-20, API-28
    ("completions is immutable", lambda s: s.update(completions=3), "spec.completions"),
    (
        "selector is immutable",
        lambda s: s["selector"]["matchLabels"].update(x="y"),
        "spec.selector",
    ),
    (
        "completionMode is immutable",
        lambda s: s.update(completionMode="Indexed"),
        "spec.completionMode",
    ),
    (
        "managedBy cannot be added",
        lambda s: s.update(managedBy="batchd.io/job-controller"),
        "spec.managedBy",
    ),
    (
        "template is immutable",
        lambda s: s["template"]["spec"]["containers"][0].update(image="other"),
        "spec.template",
    ),
]


@pytest.mark.parametrize("mutate,field", [c[1:] for c in IMMUTABLE], ids=[c[0] for c in IMMUTABLE])
def test_job_immutable_fields(stored_job: dict[str, Any], mutate: Any, field: str) -> None:
    new = copy.deepcopy(stored_job)
    mutate(new["spec"])
    causes = update_rejected("batch", "jobs", stored_job, new)
    assert any(c[0] == field and c[2].endswith("field is immutable") for c in causes), causes


MUTABLE = [
    # API-21
    ("parallelism is mutable", lambda s: s.update(parallelism=4)),
    ("suspend is mutable", lambda s: s.update(suspend=True)),
    ("activeDeadlineSeconds is mutable", lambda s: s.update(activeDeadlineSeconds=60)),
    ("backoffLimit is mutable", lambda s: s.update(backoffLimit=1)),
    ("ttlSecondsAfterFinished is mutable", lambda s: s.update(ttlSecondsAfterFinished=5)),
]


@pytest.mark.parametrize("mutate", [c[1] for c in MUTABLE], ids=[c[0] for c in MUTABLE])
def test_job_mutable_fields(stored_job: dict[str, Any], mutate: Any) -> None:
    new = copy.deepcopy(stored_job)
    mutate(new["spec"])
    assert update("batch", "jobs", stored_job, new)["metadata"]["generation"] == 2


def test_managed_by_cannot_be_changed() -> None:
    # API-28
    old = create("batch", "jobs", job(managedBy="batchd.io/job-controller"))
    new = copy.deepcopy(old)
    new["spec"]["managedBy"] = "other.io/x"
    assert any(c[0] == "spec.managedBy" for c in update_rejected("batch", "jobs", old, new))


def test_suspended_unstarted_job_may_change_scheduling_directives() -> None:
    # API-20
    old = create("batch", "jobs", job(suspend=True))
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    new["spec"]["template"]["metadata"]["annotations"] = {"x": "y"}
    assert update("batch", "jobs", old, new)["spec"]["template"]["spec"]["nodeSelector"] == {
        "zone": "a"
    }


def test_started_job_may_not_change_node_selector() -> None:
    # API-20
    old = create("batch", "jobs", job(suspend=True))
    old["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert any(c[0] == "spec.template" for c in update_rejected("batch", "jobs", old, new))


def test_elastic_indexed_job_may_change_completions_with_parallelism() -> None:
    # API-19
    old = create("batch", "jobs", job(completionMode="Indexed", completions=4, parallelism=4))
    new = copy.deepcopy(old)
    new["spec"].update(completions=2, parallelism=2)
    assert update("batch", "jobs", old, new)["spec"]["completions"] == 2
    new["spec"].update(completions=3, parallelism=2)
    causes = update_rejected("batch", "jobs", old, new)
    assert any("can only be modified in tandem with spec.parallelism" in c[2] for c in causes)


# --------------------------------------------------------------------------------------------
# Job /status validation (API-29 to API-47)
# --------------------------------------------------------------------------------------------

START = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:05:00Z"


def cond(ctype: str, status: str = "True") -> dict[str, Any]:
    return {"type": ctype, "status": status, "lastTransitionTime": LATER, "lastProbeTime": LATER}


def with_status(base: dict[str, Any], **status: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out["status"] = status
    return out


STATUS_INVALID = [
    # (id, old status, new status, field, message fragment)
    (
        "failed never decreases",
        {"failed": 2},
        {"failed": 1},
        "status.failed",
        "cannot decrease the failed counter",
    ),  # API-32
    (
        "succeeded never decreases",
        {"succeeded": 2},
        {"succeeded": 1},
        "status.succeeded",
        "cannot decrease the succeeded counter",
    ),  # API-33
    (
        "negative active is invalid",
        {},
        {"active": -1},
        "status.active",
        "must be greater than or equal to 0",
    ),  # API-29
    (
        "duplicate uncounted uids are invalid",
        {},
        {"uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["a"]}},
        "status.uncountedTerminatedPods.failed[0]",
        'Duplicate value: "a"',
    ),  # API-29
    (
        "empty uncounted uid is invalid",
        {},
        {"uncountedTerminatedPods": {"failed": [""]}},
        "status.uncountedTerminatedPods.failed[0]",
        "must not be empty",
    ),  # API-29
    (
        "Complete cannot be removed",
        {
            "startTime": START,
            "completionTime": LATER,
            "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
        },
        {"startTime": START, "completionTime": LATER, "conditions": [cond("SuccessCriteriaMet")]},
        "status.conditions",
        "cannot disable the terminal Complete=True condition",
    ),  # API-34
    (
        "FailureTarget cannot be removed",
        {"startTime": START, "conditions": [cond("FailureTarget")]},
        {"startTime": START, "conditions": []},
        "status.conditions",
        "cannot disable the terminal FailureTarget=True condition",
    ),  # API-34
    (
        "Failed cannot flip to False",
        {"startTime": START, "conditions": [cond("FailureTarget"), cond("Failed")]},
        {"startTime": START, "conditions": [cond("FailureTarget"), cond("Failed", "False")]},
        "status.conditions",
        "cannot disable the terminal Failed=True condition",
    ),  # API-34
    (
        "Complete and Failed are exclusive",
        {"startTime": START},
        {
            "startTime": START,
            "completionTime": LATER,
            "conditions": [
                cond("FailureTarget"),
                cond("Failed"),
                cond("SuccessCriteriaMet"),
                cond("Complete"),
            ],
        },
        "status.conditions",
        "cannot set Complete=True and Failed=true conditions",
    ),  # API-35
    (
        "Complete and FailureTarget are exclusive",
        {"startTime": START},
        {
            "startTime": START,
            "completionTime": LATER,
            "conditions": [cond("FailureTarget"), cond("SuccessCriteriaMet"), cond("Complete")],
        },
        "status.conditions",
        "cannot set Complete=True and FailureTarget=true conditions",
    ),  # API-35
    (
        "a finished job must have active 0",
        {"startTime": START, "active": 1, "conditions": [cond("FailureTarget")]},
        {"startTime": START, "active": 1, "conditions": [cond("FailureTarget"), cond("Failed")]},
        "status.active",
        "active>0 is invalid for finished job",
    ),  # API-38
    (
        "a finished job must have a startTime",
        {"conditions": [cond("FailureTarget")]},
        {"conditions": [cond("FailureTarget"), cond("Failed")]},
        "status.startTime",
        "startTime is required for finished job",
    ),  # API-39
    (
        "a finished job must have empty uncounted pods",
        {"startTime": START, "conditions": [cond("FailureTarget")]},
        {
            "startTime": START,
            "uncountedTerminatedPods": {"failed": ["u"]},
            "conditions": [cond("FailureTarget"), cond("Failed")],
        },
        "status.uncountedTerminatedPods",
        "uncountedTerminatedPods needs to be empty for finished job",
    ),  # API-40
    (
        "startTime may not change while unsuspended",
        {"startTime": START},
        {"startTime": LATER},
        "status.startTime",
        "startTime cannot be removed for unsuspended job",
    ),  # API-41
    (
        "completionTime before startTime is invalid",
        {"startTime": LATER, "conditions": [cond("SuccessCriteriaMet")]},
        {
            "startTime": LATER,
            "completionTime": START,
            "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
        },
        "status.completionTime",
        "completionTime cannot be set before startTime",
    ),  # API-42
    (
        "completionTime cannot be mutated",
        {
            "startTime": START,
            "completionTime": LATER,
            "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
        },
        {
            "startTime": START,
            "completionTime": "2026-01-01T00:06:00Z",
            "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
        },
        "status.completionTime",
        "field is immutable",
    ),  # API-43
    (
        "completionTime needs Complete",
        {"startTime": START},
        {"startTime": START, "completionTime": LATER},
        "status.completionTime",
        "cannot set completionTime when there is no Complete=True condition",
    ),  # API-44
    (
        "Complete needs completionTime",
        {"startTime": START, "conditions": [cond("SuccessCriteriaMet")]},
        {"startTime": START, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]},
        "status.completionTime",
        "completionTime is required for Complete jobs",
    ),  # API-44
    (
        "Failed needs FailureTarget",
        {"startTime": START},
        {"startTime": START, "conditions": [cond("Failed")]},
        "status.conditions",
        "cannot set Failed=True condition without the FailureTarget=true condition",
    ),  # API-45
    (
        "Complete needs SuccessCriteriaMet",
        {"startTime": START},
        {"startTime": START, "completionTime": LATER, "conditions": [cond("Complete")]},
        "status.conditions",
        "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
    ),  # API-45
    (
        "a finished job must have terminating 0",
        {"startTime": START, "terminating": 1, "conditions": [cond("FailureTarget")]},
        {
            "startTime": START,
            "terminating": 1,
            "conditions": [cond("FailureTarget"), cond("Failed")],
        },
        "status.terminating",
        "terminating>0 is invalid for finished job",
    ),  # API-46
    (
        "ready may not exceed active",
        {"active": 1},
        {"active": 1, "ready": 2},
        "status.ready",
        "cannot set more ready pods than active",
    ),  # API-47
    (
        "SuccessCriteriaMet cannot be removed",
        {"conditions": [cond("SuccessCriteriaMet")]},
        {"conditions": []},
        "status.conditions",
        "cannot disable the SuccessCriteriaMet=True condition",
    ),  # API-29
    (
        "SuccessCriteriaMet excludes FailureTarget",
        {},
        {"conditions": [cond("SuccessCriteriaMet"), cond("FailureTarget")]},
        "status.conditions",
        "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
    ),  # API-29
    (
        "completedIndexes must be empty for NonIndexed jobs",
        {},
        {"completedIndexes": "0"},
        "status.completedIndexes",
        "cannot set non-empty completedIndexes when non-indexed completion mode",
    ),  # API-36
    (
        "failedIndexes needs backoffLimitPerIndex",
        {},
        {"failedIndexes": ""},
        "status.failedIndexes",
        "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
    ),  # API-37
]


@pytest.mark.parametrize(
    "old_status,new_status,field,fragment",
    [c[1:] for c in STATUS_INVALID],
    ids=[c[0] for c in STATUS_INVALID],
)
def test_job_status_validation(
    stored_job: dict[str, Any],
    old_status: dict[str, Any],
    new_status: dict[str, Any],
    field: str,
    fragment: str,
) -> None:
    old = with_status(stored_job, **old_status)
    causes = update_rejected("batch", "jobs", old, with_status(stored_job, **new_status), "status")
    assert any(c[0] == field and fragment in c[2] for c in causes), causes


def test_two_phase_success_is_accepted(stored_job: dict[str, Any]) -> None:
    # JOB-86: SuccessCriteriaMet first, then Complete + completionTime with everything at 0
    running = with_status(
        stored_job, startTime=START, active=1, ready=1, uncountedTerminatedPods={}
    )
    interim = with_status(
        stored_job,
        startTime=START,
        active=0,
        ready=0,
        succeeded=1,
        uncountedTerminatedPods={},
        conditions=[cond("SuccessCriteriaMet")],
    )
    done = with_status(
        stored_job,
        startTime=START,
        completionTime=LATER,
        active=0,
        ready=0,
        terminating=0,
        succeeded=1,
        uncountedTerminatedPods={},
        conditions=[cond("SuccessCriteriaMet"), cond("Complete")],
    )
    update("batch", "jobs", running, interim, "status")
    assert update("batch", "jobs", interim, done, "status")["status"]["completionTime"] == LATER


def test_two_phase_failure_is_accepted(stored_job: dict[str, Any]) -> None:
    interim = with_status(stored_job, startTime=START, failed=7, conditions=[cond("FailureTarget")])
    done = with_status(
        stored_job, startTime=START, failed=7, conditions=[cond("FailureTarget"), cond("Failed")]
    )
    assert (
        update("batch", "jobs", interim, done, "status")["status"]["conditions"][1]["type"]
        == "Failed"
    )


def test_checks_run_only_when_their_fields_change(stored_job: dict[str, Any]) -> None:
    # API-31: a stored status that already breaks API-38 does not block an unrelated write
    old = with_status(
        stored_job, startTime=START, active=2, conditions=[cond("FailureTarget"), cond("Failed")]
    )
    new = copy.deepcopy(old)
    new["status"]["ready"] = 1
    update("batch", "jobs", old, new, "status")


def test_suspended_job_may_clear_start_time() -> None:
    # API-41, JOB-83
    old = create("batch", "jobs", job(suspend=True))
    old["status"] = {"startTime": START}
    assert "startTime" not in update("batch", "jobs", old, with_status(old), "status")["status"]


COMPLETED_INDEXES = [
    # JOB-48, API-36: (id, completedIndexes, valid?)
    ("a canonical index set is valid", "0,2-4", True),
    ("an index at completions is too large", "0-5", False),
    ("decreasing indexes are invalid", "3,1", False),
    ("a three-part interval is invalid", "1-2-3", False),
    ("a non-numeric index is invalid", "a", False),
    ("a reversed interval is invalid", "3-1", False),
]


@pytest.mark.parametrize(
    "indexes,valid", [c[1:] for c in COMPLETED_INDEXES], ids=[c[0] for c in COMPLETED_INDEXES]
)
def test_completed_indexes_format(indexes: str, valid: bool) -> None:
    old = create("batch", "jobs", job(completionMode="Indexed", completions=5, parallelism=2))
    new = with_status(old, completedIndexes=indexes, succeeded=0)
    if valid:
        assert update("batch", "jobs", old, new, "status")["status"]["completedIndexes"] == indexes
    else:
        causes = update_rejected("batch", "jobs", old, new, "status")
        assert any(
            c[0] == "status.completedIndexes" and "error parsing completedIndexes" in c[2]
            for c in causes
        )


def indexed_job(**spec: Any) -> dict[str, Any]:
    return create(
        "batch", "jobs", job(completionMode="Indexed", completions=5, parallelism=5, **spec)
    )


INDEXED_STATUS_INVALID = [
    # (id, extra spec, old status, new status, field, message fragment)
    (
        "failedIndexes must be well-formed",
        {"backoffLimitPerIndex": 1},
        {},
        {"failedIndexes": "3,1"},
        "status.failedIndexes",
        "error parsing failedIndexes: non-increasing order, previous: 3, current: 1",
    ),  # API-37
    (
        "failedIndexes and completedIndexes are disjoint",
        {"backoffLimitPerIndex": 1},
        {},
        {"completedIndexes": "0-2", "failedIndexes": "2,4", "succeeded": 3},
        "status.failedIndexes",
        "failedIndexes and completedIndexes overlap at index: 2",
    ),  # API-37
    (
        "SuccessCriteriaMet excludes Failed",
        {},
        {"startTime": START, "conditions": [cond("FailureTarget")]},
        {
            "startTime": START,
            "conditions": [cond("FailureTarget"), cond("Failed"), cond("SuccessCriteriaMet")],
        },
        "status.conditions",
        "cannot set SuccessCriteriaMet=True and Failed=true conditions",
    ),  # API-29
    (
        "a successPolicy Job completes only after SuccessCriteriaMet",
        {"successPolicy": {"rules": [{"succeededCount": 1}]}},
        {"startTime": START},
        {"startTime": START, "completionTime": LATER, "conditions": [cond("Complete")]},
        "status.conditions",
        "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
    ),  # API-29
    (
        "SuccessCriteriaMet is not added to a Job already Complete",
        {},
        {"startTime": START, "completionTime": LATER, "conditions": [cond("Complete")]},
        {
            "startTime": START,
            "completionTime": LATER,
            "conditions": [cond("Complete"), cond("SuccessCriteriaMet")],
        },
        "status.conditions",
        "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
    ),  # API-29
]


@pytest.mark.parametrize(
    "spec,old_status,new_status,field,fragment",
    [c[1:] for c in INDEXED_STATUS_INVALID],
    ids=[c[0] for c in INDEXED_STATUS_INVALID],
)
def test_indexed_job_status_validation(
    spec: dict[str, Any],
    old_status: dict[str, Any],
    new_status: dict[str, Any],
    field: str,
    fragment: str,
) -> None:
    stored = indexed_job(**spec)
    old = with_status(stored, **old_status)
    causes = update_rejected("batch", "jobs", old, with_status(stored, **new_status), "status")
    assert any(c[0] == field and fragment in c[2] for c in causes), causes


def test_an_elastic_indexed_job_may_lower_succeeded() -> None:
    # API-33: completions == parallelism, as after a scale-down
    stored = indexed_job()
    old = with_status(stored, succeeded=4, completedIndexes="0-3")
    new = with_status(stored, succeeded=2, completedIndexes="0-1")
    assert update("batch", "jobs", old, new, "status")["status"]["succeeded"] == 2


STATUS_MANY_INVALID = [
    # (id, Indexed?, old status, new status, every cause in order): the order in which
    # validateJobStatus and then the update's transition checks append their errors.
    (
        "an Indexed Job's counters, uncounted pods, conditions and indexes",
        True,
        {
            "startTime": START,
            "completionTime": START,
            "succeeded": 3,
            "failed": 2,
            "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
        },
        {
            "startTime": LATER,
            "completionTime": LATER,
            "active": 2,
            "ready": 3,
            "terminating": 1,
            "succeeded": 1,
            "failed": -1,
            "completedIndexes": "0-2",
            "failedIndexes": "1",
            "uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["a", ""]},
            "conditions": [cond("FailureTarget"), cond("Failed"), cond("Complete")],
        },
        [
            ("status.failed", "FieldValueInvalid", "Invalid value: -1: must be greater than or equal to 0"),
            ("status.uncountedTerminatedPods.failed[0]", "FieldValueDuplicate", 'Duplicate value: "a"'),
            ("status.uncountedTerminatedPods.failed[1]", "FieldValueInvalid", 'Invalid value: "": must not be empty'),
            ("status.conditions", "FieldValueInvalid", "Invalid value: cannot set Complete=True and Failed=true conditions"),
            ("status.conditions", "FieldValueInvalid", "Invalid value: cannot set Complete=True and FailureTarget=true conditions"),
            ("status.conditions", "FieldValueInvalid", "Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition"),
            ("status.active", "FieldValueInvalid", "Invalid value: 2: active>0 is invalid for finished job"),
            ("status.uncountedTerminatedPods", "FieldValueInvalid", 'Invalid value: {"failed":["a",""],"succeeded":["a"]}: uncountedTerminatedPods needs to be empty for finished job'),
            ("status.failedIndexes", "FieldValueInvalid", 'Invalid value: "1": failedIndexes and completedIndexes overlap at index: 1'),
            ("status.terminating", "FieldValueInvalid", "Invalid value: 1: terminating>0 is invalid for finished job"),
            ("status.ready", "FieldValueInvalid", "Invalid value: 3: cannot set more ready pods than active"),
            ("status.failed", "FieldValueInvalid", "Invalid value: -1: cannot decrease the failed counter"),
            ("status.completionTime", "FieldValueInvalid", 'Invalid value: "2026-01-01T00:05:00Z": field is immutable'),
            ("status.startTime", "FieldValueRequired", "Required value: startTime cannot be removed for unsuspended job"),
            ("status.conditions", "FieldValueInvalid", "Invalid value: cannot disable the SuccessCriteriaMet=True condition"),
        ],
    ),
    (
        "a NonIndexed Job's times, conditions and indexes",
        False,
        {"startTime": START, "succeeded": 2, "conditions": [cond("FailureTarget")]},
        {
            "startTime": LATER,
            "completionTime": START,
            "succeeded": 1,
            "completedIndexes": "0",
            "failedIndexes": "",
            "conditions": [cond("Failed"), cond("SuccessCriteriaMet")],
        },
        [
            ("status.completionTime", "FieldValueInvalid", 'Invalid value: "2026-01-01T00:00:00Z": cannot set completionTime when there is no Complete=True condition'),
            ("status.completionTime", "FieldValueInvalid", 'Invalid value: "2026-01-01T00:00:00Z": completionTime cannot be set before startTime'),
            ("status.conditions", "FieldValueInvalid", "Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"),
            ("status.completedIndexes", "FieldValueInvalid", 'Invalid value: "0": cannot set non-empty completedIndexes when non-indexed completion mode'),
            ("status.failedIndexes", "FieldValueInvalid", 'Invalid value: "": cannot set non-null failedIndexes when backoffLimitPerIndex is null'),
            ("status.conditions", "FieldValueInvalid", "Invalid value: cannot set SuccessCriteriaMet=True and Failed=true conditions"),
            ("status.conditions", "FieldValueInvalid", "Invalid value: cannot disable the terminal FailureTarget=True condition"),
            ("status.succeeded", "FieldValueInvalid", "Invalid value: 1: cannot decrease the succeeded counter"),
            ("status.startTime", "FieldValueRequired", "Required value: startTime cannot be removed for unsuspended job"),
        ],
    ),
]


@pytest.mark.parametrize(
    "indexed,old_status,new_status,expected",
    [c[1:] for c in STATUS_MANY_INVALID],
    ids=[c[0] for c in STATUS_MANY_INVALID],
)
def test_a_status_write_breaking_many_rules_reports_each_once_in_order(
    indexed: bool,
    old_status: dict[str, Any],
    new_status: dict[str, Any],
    expected: list[tuple[str, str, str]],
) -> None:
    stored = (
        indexed_job(backoffLimitPerIndex=1)
        if indexed
        else create("batch", "jobs", job(ttlSecondsAfterFinished=100))
    )
    old, new = with_status(stored, **old_status), with_status(stored, **new_status)
    assert update_rejected("batch", "jobs", old, new, "status") == expected


# --------------------------------------------------------------------------------------------
# CronJob: defaults, schedule grammar, time zones, validation
# --------------------------------------------------------------------------------------------


def test_cronjob_defaults() -> None:
    # API-48
    out = create("batch", "cronjobs", cronjob())
    spec = out["spec"]
    assert (
        spec["concurrencyPolicy"],
        spec["suspend"],
        spec["successfulJobsHistoryLimit"],
        spec["failedJobsHistoryLimit"],
    ) == (
        "Allow",
        False,
        3,
        1,
    )
    assert "startingDeadlineSeconds" not in spec and "timeZone" not in spec
    assert out["status"] == {} and out["metadata"]["generation"] == 1
    # The job template's pod spec is defaulted, its JobSpec is not (that happens on Job create).
    jt = spec["jobTemplate"]["spec"]
    assert jt["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert "backoffLimit" not in jt and "completions" not in jt


VALID_SCHEDULES = [
    # CJ-3 to CJ-5
    ("every 5 minutes", "*/5 * * * *"),
    ("a list", "0,15,30,45 * * * *"),
    ("a range", "0 9-17 * * *"),
    ("a range with a step", "0-30/10 * * * *"),
    ("a single value with a step", "5/15 * * * *"),
    ("month names in any case", "0 0 1 JAN,feb,Mar *"),
    ("weekday names in any case", "0 0 * * MON-fri"),
    ("sunday as 0", "0 0 * * 0"),
    ("question mark as any", "0 0 ? * *"),
    ("extra whitespace between fields", "0  0 *   * *"),
    ("@yearly", "@yearly"),
    ("@annually", "@annually"),
    ("@monthly", "@monthly"),
    ("@weekly", "@weekly"),
    ("@daily", "@daily"),
    ("@midnight", "@midnight"),
    ("@hourly", "@hourly"),
    ("@every with a compound duration", "@every 1h30m"),
    ("@every with a sub-second duration", "@every 500ms"),
    ("@every with a fractional duration", "@every 1.5h"),
]


@pytest.mark.parametrize(
    "schedule", [c[1] for c in VALID_SCHEDULES], ids=[c[0] for c in VALID_SCHEDULES]
)
def test_valid_schedules(schedule: str) -> None:
    assert create("batch", "cronjobs", cronjob(schedule=schedule))["spec"]["schedule"] == schedule


INVALID_SCHEDULES = [
    # CJ-3 to CJ-5, API-51
    ("7 as day of week is out of range", "0 0 * * 7", "end of range (7) above maximum (6): 7"),
    (
        "six fields (seconds) are rejected",
        "0 0 0 * * *",
        "expected exactly 5 fields, found 6: [0 0 0 * * *]",
    ),
    ("four fields are rejected", "* * * *", "expected exactly 5 fields, found 4"),
    ("minute 60 is out of range", "60 * * * *", "end of range (60) above maximum (59): 60"),
    ("day of month 0 is below minimum", "0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
    (
        "a reversed range is invalid",
        "0 5-3 * * *",
        "beginning of range (5) beyond end of range (3): 5-3",
    ),
    ("a zero step is invalid", "*/0 * * * *", "step of range should be a positive number: */0"),
    (
        "an unknown name is invalid",
        "0 0 * * funday",
        'failed to parse int from funday: strconv.Atoi: parsing "funday": invalid syntax',
    ),
    ("L is not supported", "0 0 L * *", "failed to parse int from L"),
    ("too many slashes", "*/2/3 * * * *", "too many slashes: */2/3"),
    ("too many hyphens", "1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("an unknown descriptor", "@reboot", "unrecognized descriptor: @reboot"),
    (
        "@every with a bad duration",
        "@every 1x",
        'failed to parse duration @every 1x: time: unknown unit "x" in duration "1x"',
    ),
    (
        "@every without a unit",
        "@every 10",
        'failed to parse duration @every 10: time: missing unit in duration "10"',
    ),
]


@pytest.mark.parametrize(
    "schedule,message", [c[1:] for c in INVALID_SCHEDULES], ids=[c[0] for c in INVALID_SCHEDULES]
)
def test_invalid_schedules(schedule: str, message: str) -> None:
    causes = rejected("batch", "cronjobs", cronjob(schedule=schedule))
    assert any(
        c[0] == "spec.schedule" and c[1] == "FieldValueInvalid" and message in c[2] for c in causes
    ), causes


def test_empty_schedule_is_required() -> None:
    # API-51
    assert ("spec.schedule", "FieldValueRequired", "Required value") in rejected(
        "batch", "cronjobs", cronjob(schedule="")
    )


def test_tz_in_schedule_is_rejected_on_create() -> None:
    # API-57
    causes = rejected("batch", "cronjobs", cronjob(schedule="TZ=UTC 0 0 * * *"))
    assert any(
        "cannot use TZ or CRON_TZ in schedule, use timeZone field instead" in c[2] for c in causes
    )


def test_tz_in_schedule_stays_allowed_on_update_if_it_was_there() -> None:
    # API-57
    old = create("batch", "cronjobs", cronjob())
    old["spec"]["schedule"] = "CRON_TZ=UTC 0 0 * * *"  # a legacy object
    new = copy.deepcopy(old)
    new["spec"]["schedule"] = "CRON_TZ=UTC 0 1 * * *"
    assert update("batch", "cronjobs", old, new)["spec"]["schedule"] == "CRON_TZ=UTC 0 1 * * *"
    new["spec"]["timeZone"] = "UTC"
    causes = update_rejected("batch", "cronjobs", old, new)
    assert any(
        "cannot use both timeZone field and TZ or CRON_TZ in schedule" in c[2] for c in causes
    )


TIME_ZONES = [
    # API-53: (id, value, error fragment or None)
    ("a valid IANA zone is accepted", "Europe/Berlin", None),
    ("UTC is accepted", "UTC", None),
    ("Etc/GMT+5 is accepted", "Etc/GMT+5", None),
    ("an empty string is invalid", "", "timeZone must be nil or non-empty string"),
    ("Local is rejected", "Local", "timeZone must be an explicit time zone"),
    ("local in any case is rejected", "LOCAL", "timeZone must be an explicit time zone"),
    ("an unknown zone is invalid", "Foo/Bar", "unknown time zone Foo/Bar"),
    (
        "a part longer than 14 characters is invalid",
        "America/Abcdefghijklmnop",
        "unknown time zone America/Abcdefghijklmnop",
    ),
    (
        "a part starting with a dash is invalid",
        "-Europe/Berlin",
        "unknown time zone -Europe/Berlin",
    ),
    ("a dot-dot part is invalid", "../etc/passwd", "unknown time zone ../etc/passwd"),
]


@pytest.mark.parametrize("tz,fragment", [c[1:] for c in TIME_ZONES], ids=[c[0] for c in TIME_ZONES])
def test_time_zone_validation(tz: str, fragment: str | None) -> None:
    if fragment is None:
        assert create("batch", "cronjobs", cronjob(timeZone=tz))["spec"]["timeZone"] == tz
    else:
        causes = rejected("batch", "cronjobs", cronjob(timeZone=tz))
        assert any(c[0] == "spec.timeZone" and fragment in c[2] for c in causes), causes


def test_time_zone_is_revalidated_only_when_changed() -> None:
    # API-53: an unchanged (even unknown) zone does not block other updates
    old = create("batch", "cronjobs", cronjob())
    old["spec"]["timeZone"] = "Mars/Olympus"
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    assert update("batch", "cronjobs", old, new)["metadata"]["generation"] == 2


CRONJOB_INVALID = [
    (
        "negative startingDeadlineSeconds is invalid",
        {"startingDeadlineSeconds": -1},
        "spec.startingDeadlineSeconds",
        NEG,
    ),  # API-52
    (
        "unknown concurrencyPolicy is not supported",
        {"concurrencyPolicy": "Sometimes"},
        "spec.concurrencyPolicy",
        'supported values: "Allow", "Forbid", "Replace"',
    ),  # API-54
    (
        "negative successfulJobsHistoryLimit is invalid",
        {"successfulJobsHistoryLimit": -1},
        "spec.successfulJobsHistoryLimit",
        NEG,
    ),  # API-55
    (
        "negative failedJobsHistoryLimit is invalid",
        {"failedJobsHistoryLimit": -1},
        "spec.failedJobsHistoryLimit",
        NEG,
    ),  # API-55
]


@pytest.mark.parametrize(
    "overrides,field,fragment",
    [c[1:] for c in CRONJOB_INVALID],
    ids=[c[0] for c in CRONJOB_INVALID],
)
def test_cronjob_spec_validation(overrides: dict[str, Any], field: str, fragment: str) -> None:
    causes = rejected("batch", "cronjobs", cronjob(**overrides))
    assert any(c[0] == field and fragment in c[2] for c in causes), causes


def test_zero_history_limits_and_deadline_are_valid() -> None:
    # API-52, API-55
    out = create(
        "batch",
        "cronjobs",
        cronjob(successfulJobsHistoryLimit=0, failedJobsHistoryLimit=0, startingDeadlineSeconds=0),
    )
    assert out["spec"]["successfulJobsHistoryLimit"] == 0


JOB_TEMPLATE_INVALID = [
    # API-56, API-24, API-13
    (
        "a job template selector is rejected",
        {"selector": {"matchLabels": {"a": "b"}}},
        "spec.jobTemplate.spec.selector",
        "`selector` will be auto-generated",
    ),
    (
        "manualSelector true is not supported",
        {"manualSelector": True},
        "spec.jobTemplate.spec.manualSelector",
        'Unsupported value: true: supported values: "nil", "false"',
    ),
    (
        "negative template ttlSecondsAfterFinished is invalid",
        {"ttlSecondsAfterFinished": -1},
        "spec.jobTemplate.spec.ttlSecondsAfterFinished",
        NEG,
    ),
    (
        "negative template backoffLimit is invalid",
        {"backoffLimit": -1},
        "spec.jobTemplate.spec.backoffLimit",
        NEG,
    ),
]


@pytest.mark.parametrize(
    "overrides,field,fragment",
    [c[1:] for c in JOB_TEMPLATE_INVALID],
    ids=[c[0] for c in JOB_TEMPLATE_INVALID],
)
def test_cronjob_job_template_validation(
    overrides: dict[str, Any], field: str, fragment: str
) -> None:
    body = cronjob()
    body["spec"]["jobTemplate"]["spec"].update(overrides)
    causes = rejected("batch", "cronjobs", body)
    assert any(c[0] == field and fragment in c[2] for c in causes), causes


def test_cronjob_template_restart_policy_always_reads_as_required() -> None:
    # API-13
    body = cronjob()
    del body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"]
    causes = rejected("batch", "cronjobs", body)
    assert (
        "spec.jobTemplate.spec.template.spec.restartPolicy",
        "FieldValueRequired",
        'Required value: valid values: "OnFailure", "Never"',
    ) in causes


def test_cronjob_name_limit_is_52_on_create_only() -> None:
    # API-50
    assert create("batch", "cronjobs", cronjob(name="a" * 52))["metadata"]["name"] == "a" * 52
    causes = rejected("batch", "cronjobs", cronjob(name="a" * 53))
    assert (
        "metadata.name",
        "FieldValueInvalid",
        f'Invalid value: "{"a" * 53}": must be no more than 52 characters',
    ) in causes
    old = create("batch", "cronjobs", cronjob(name="a" * 52))
    old["metadata"]["name"] = "b" * 60  # a legacy object stored before the limit
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    assert update("batch", "cronjobs", old, new)["spec"]["suspend"] is True


def test_cronjob_status_write_ignores_spec_and_main_write_ignores_status() -> None:
    old = create("batch", "cronjobs", cronjob())
    new = copy.deepcopy(old)
    new["spec"]["schedule"] = "@hourly"
    new["status"] = {"lastScheduleTime": START}
    out = update("batch", "cronjobs", old, new, "status")
    assert out["spec"]["schedule"] == "*/5 * * * *" and out["status"]["lastScheduleTime"] == START
    main = update("batch", "cronjobs", old, new)
    assert main["spec"]["schedule"] == "@hourly" and main["status"] == {}
    assert main["metadata"]["generation"] == 2


# --------------------------------------------------------------------------------------------
# Pods, Namespaces, Events
# --------------------------------------------------------------------------------------------


def test_pod_defaults_and_status_on_create() -> None:
    out = create("", "pods", pod())
    spec = out["spec"]
    assert (
        spec["restartPolicy"],
        spec["terminationGracePeriodSeconds"],
        spec["dnsPolicy"],
        spec["schedulerName"],
    ) == (
        "Always",
        30,
        "ClusterFirst",
        "default-scheduler",
    )
    assert spec["enableServiceLinks"] is True
    assert out["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


IMAGE_PULL = [
    ("latest tag pulls Always", "busybox:latest", "Always"),
    ("no tag pulls Always", "busybox", "Always"),
    ("a registry port is not a tag", "localhost:5000/busybox", "Always"),
    ("a version tag pulls IfNotPresent", "busybox:1.36", "IfNotPresent"),
    ("a digest pulls IfNotPresent", "busybox@sha256:" + "a" * 64, "IfNotPresent"),
]


@pytest.mark.parametrize(
    "image,policy", [c[1:] for c in IMAGE_PULL], ids=[c[0] for c in IMAGE_PULL]
)
def test_image_pull_policy_default(image: str, policy: str) -> None:
    body = pod()
    body["spec"]["containers"][0]["image"] = image
    assert create("", "pods", body)["spec"]["containers"][0]["imagePullPolicy"] == policy


QOS = [
    ("no resources is BestEffort", {}, "BestEffort"),
    (
        "limits only is Guaranteed (requests default to limits)",
        {"limits": {"cpu": "1", "memory": "1Gi"}},
        "Guaranteed",
    ),
    (
        "equal requests and limits is Guaranteed",
        {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1Gi"}},
        "Guaranteed",
    ),
    ("requests only is Burstable", {"requests": {"cpu": "100m"}}, "Burstable"),
]


@pytest.mark.parametrize("resources,qos", [c[1:] for c in QOS], ids=[c[0] for c in QOS])
def test_pod_qos_class(resources: dict[str, Any], qos: str) -> None:
    body = pod()
    body["spec"]["containers"][0]["resources"] = resources
    assert create("", "pods", body)["status"]["qosClass"] == qos


POD_INVALID = [
    ("a pod needs a container", {"containers": []}, "spec.containers", "Required value"),
    (
        "container names are DNS labels",
        {"containers": [{"name": "Main", "image": "x"}]},
        "spec.containers[0].name",
        "a lowercase RFC 1123 label",
    ),
    (
        "container names are unique",
        {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "x"}]},
        "spec.containers[1].name",
        'Duplicate value: "a"',
    ),
    (
        "a container needs an image",
        {"containers": [{"name": "a"}]},
        "spec.containers[0].image",
        "Required value",
    ),
    (
        "an unknown restartPolicy is not supported",
        {"restartPolicy": "Sometimes"},
        "spec.restartPolicy",
        "Unsupported value",
    ),
]


@pytest.mark.parametrize(
    "spec,field,fragment", [c[1:] for c in POD_INVALID], ids=[c[0] for c in POD_INVALID]
)
def test_pod_validation(spec: dict[str, Any], field: str, fragment: str) -> None:
    causes = rejected("", "pods", pod(**spec))
    assert any(c[0] == field and fragment in c[2] for c in causes), causes


def test_pod_spec_is_mostly_immutable() -> None:
    old = create("", "pods", pod())
    new = copy.deepcopy(old)
    new["spec"]["restartPolicy"] = "Never"
    causes = update_rejected("", "pods", old, new)
    assert causes[0][0] == "spec" and causes[0][1] == "FieldValueForbidden"
    assert causes[0][2].startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
    )


def test_pod_image_and_tolerations_may_change() -> None:
    old = create("", "pods", pod())
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "busybox:1.37"
    new["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    new["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    out = update("", "pods", old, new)
    assert out["spec"]["containers"][0]["image"] == "busybox:1.37"


def test_pod_status_write_keeps_spec_and_owner_references() -> None:
    old = create("", "pods", pod())
    old["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    ]
    new = copy.deepcopy(old)
    new["spec"]["nodeName"] = "node-1"
    new["metadata"]["ownerReferences"] = []
    new["status"] = {"phase": "Running"}
    out = update("", "pods", old, new, "status")
    assert "nodeName" not in out["spec"] and out["status"]["phase"] == "Running"
    assert out["metadata"]["ownerReferences"][0]["name"] == "j"


def test_namespace_defaults() -> None:
    out = create("", "namespaces", {"metadata": {"name": "team-a", "uid": UID}})
    assert out["spec"] == {"finalizers": ["kubernetes"]} and out["status"] == {"phase": "Active"}
    assert out["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team-a"


def test_namespace_main_write_keeps_finalizers_and_finalize_changes_them() -> None:
    old = create("", "namespaces", {"metadata": {"name": "team-a", "uid": UID}})
    new = copy.deepcopy(old)
    new["spec"]["finalizers"] = []
    new["status"] = {"phase": "Terminating"}
    main = update("", "namespaces", old, new)
    assert main["spec"]["finalizers"] == ["kubernetes"] and main["status"]["phase"] == "Active"
    finalized = update("", "namespaces", old, new, "finalize")
    # an empty finalizers list is left out, as Go writes it
    assert "finalizers" not in finalized["spec"] and finalized["status"]["phase"] == "Active"


def test_namespace_name_is_a_dns_label() -> None:
    causes = rejected("", "namespaces", {"metadata": {"name": "a.b", "uid": UID}})
    # a valid subdomain that is no label: only its dots are wrong, and upstream says so
    assert any(c[0] == "metadata.name" and "must not contain dots" in c[2] for c in causes)
    causes = rejected("", "namespaces", {"metadata": {"name": "A_b", "uid": UID}})
    assert any(c[0] == "metadata.name" and "RFC 1123 label" in c[2] for c in causes)


def test_events_v1_event_requires_new_style_fields() -> None:
    body = {
        "metadata": {"name": "e1", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "type": "Normal",
    }
    causes = rejected("events.k8s.io", "events", body)
    fields = {c[0] for c in causes}
    assert {"reportingController", "reportingInstance", "action", "reason"} <= fields


def test_core_event_with_legacy_fields_is_accepted() -> None:
    body = {
        "metadata": {"name": "pi.1", "namespace": "default"},
        "involvedObject": {"kind": "Job", "name": "pi", "namespace": "default"},
        "reason": "SuccessfulCreate",
        "message": "Created pod",
        "type": "Normal",
        "bogus": 1,
    }
    out = create("", "events", body)
    assert "bogus" not in out and out["reason"] == "SuccessfulCreate"


def test_unknown_kinds_pass_through_unchanged() -> None:
    body = {"metadata": {"name": "x"}, "spec": {"anything": 1}}
    assert create("apps", "deployments", body) is body


def test_finalizers_cannot_be_added_while_deleting(stored_job: dict[str, Any]) -> None:
    old = copy.deepcopy(stored_job)
    old["metadata"]["deletionTimestamp"] = START
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["example.com/x"]
    causes = update_rejected("batch", "jobs", old, new)
    assert any(
        c[1] == "FieldValueForbidden" and "no new finalizers can be added" in c[2] for c in causes
    )


def test_wrong_json_type_is_a_bad_request() -> None:
    with pytest.raises(ApiError) as info:
        create("batch", "jobs", job(ttlSecondsAfterFinished="100"))
    assert info.value.code == 400
    assert info.value.message == (
        'Job in version "v1" cannot be handled as a Job: json: cannot unmarshal string into Go struct '
        "field JobSpec.spec.ttlSecondsAfterFinished of type int32"
    )
