"""FAIL-CLOSED on kube-apiserver: deploy/policy's ``batchd-annotations`` ValidatingAdmissionPolicy
refuses exactly what the worker's readers refuse.

The table of tests/annotation_cases.py, and a few hundred values derived from it at random, go
through both: the readers in this process, the policy by server-side dry-run creates on the run's
control plane. The policy's binding there is deploy/policy's, narrowed to this test's namespaces so
that the other tests on the same control plane can still make objects the policy would refuse
(FAIL-CLOSED's holds are tested on clusters without the policy). kubesim has no CEL
(docs/kubesim.md): these run on upstream's control plane only.
"""

from __future__ import annotations

import contextlib
import copy
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube.client import Kube
from kube.config import load_access
from kube.errors import KubeError, NotFound
from tests.annotation_cases import CASES, Case, refusals
from tests.conftest import backends, new_namespace
from workflows.models.cronjob import CRONJOB_ANNOTATIONS
from workflows.models.job import JOB_ANNOTATIONS

pytestmark = pytest.mark.xdist_group("admission-policy")

POLICY = Path(__file__).resolve().parents[2] / "deploy" / "policy" / "admission-policy.yaml"
SELECTOR = "batchd.io/admission-policy-test"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def manifest(case: Case) -> tuple[str, dict[str, Any]]:
    meta = {"name": case.name, "annotations": case.annotations}
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
    if case.kind == "Job":
        return "jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": template}}
    return "cronjobs", {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": {
        "schedule": "@daily", "jobTemplate": {"metadata": {"annotations": case.template}, "spec": {"template": template}}}}


def refused_by_policy(kube: Kube, ns: str, case: Case) -> str | None:
    """The policy's message if a dry-run create of ``case`` is refused, else None."""
    plural, body = manifest(case)
    try:
        kube.request("POST", f"/apis/batch/v1/namespaces/{ns}/{plural}", body=body, query={"dryRun": "All"})
    except KubeError as err:
        assert "batchd-annotations" in err.message, err.message  # refused by the policy, not for another reason
        return err.message
    return None


@pytest.fixture(scope="module")
def policed(request: pytest.FixtureRequest) -> Iterator[tuple[Kube, str]]:
    """The admin client and a namespace where deploy/policy's policy is in force."""
    if "cluster" not in backends(request.config):
        pytest.skip("the admission policy runs on upstream's control plane (--backends cluster)")
    kube = Kube(load_access(Path(request.getfixturevalue("cluster_dir")) / "kubeconfig"))
    ns = new_namespace(kube)
    kube.request("PATCH", f"/api/v1/namespaces/{ns}", body={"metadata": {"labels": {SELECTOR: "true"}}},
                 content_type="application/merge-patch+json")
    policy, binding = yaml.safe_load_all(POLICY.read_text())
    binding = copy.deepcopy(binding)
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {SELECTOR: "true"}}}
    for kind, body in (("validatingadmissionpolicies", policy), ("validatingadmissionpolicybindings", binding)):
        with contextlib.suppress(NotFound):  # left by an earlier module's run in this process
            kube.request("DELETE", f"{ADMISSION}/{kind}/batchd-annotations")
        kube.request("POST", f"{ADMISSION}/{kind}", body=body)
    try:
        # the API server compiles the policy and its binding asynchronously: until then, all passes
        probe = Case("Job", {"batchd.io/max-runs": "-1", "batchd.io/after": "A"}, valid=False)
        deadline = time.monotonic() + 120
        while refused_by_policy(kube, ns, probe) is None:
            assert time.monotonic() < deadline, "the policy did not come into force within 120 s"
            time.sleep(0.5)
        yield kube, ns
    finally:
        for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            kube.request("DELETE", f"{ADMISSION}/{kind}/batchd-annotations")


def test_the_policy_refuses_what_the_readers_refuse_and_names_the_annotation(policed: tuple[Kube, str]) -> None:
    kube, ns = policed
    disagree = []
    for case in CASES:
        message = refused_by_policy(kube, ns, case)
        if (message is None) != case.valid or bool(refusals(case)) == case.valid:
            disagree.append((case.id(), message, refusals(case)))
        elif message is not None:
            names = {*case.annotations, *case.template}
            assert any(name in message for name in names), (case.id(), message)
    assert not disagree, "\n".join(map(repr, disagree))
    print(f"admission policy: {len(CASES)} cases, the policy and the readers agree on each")


def _mutations(rng: random.Random, n: int) -> Iterator[Case]:
    """Values near the table's: a valid or invalid one with a character inserted, removed or changed."""
    alphabet = "0123456789-,;:/*? \t\nTZ@aAjmJz.+"
    for _ in range(n):
        base = rng.choice(CASES)
        name = rng.choice([*base.annotations] or ["batchd.io/after"])
        value = base.annotations.get(name, "a")
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(value))
            op = rng.choice("irc")
            if op == "i":
                value = value[:at] + rng.choice(alphabet) + value[at:]
            elif op == "r":
                value = value[:at] + value[at + 1:]
            else:
                value = value[:at] + rng.choice(alphabet) + value[at + 1:]
        kind = "Job" if name in JOB_ANNOTATIONS else "CronJob"
        assert name in JOB_ANNOTATIONS or name in CRONJOB_ANNOTATIONS or name.startswith("batchd.io/")
        yield Case(kind, {**base.annotations, name: value} if base.kind == kind else {name: value}, valid=True)


def test_random_values_near_the_tables_get_the_same_verdict_from_both(policed: tuple[Kube, str]) -> None:
    kube, ns = policed
    rng = random.Random(53)
    cases = list(_mutations(rng, 400))
    verdicts = [(case, refused_by_policy(kube, ns, case), refusals(case)) for case in cases]
    disagree = [(case.id(), message, found) for case, message, found in verdicts if (message is None) != (not found)]
    refused = sum(1 for _, message, _ in verdicts if message is not None)
    assert not disagree, "\n".join(map(repr, disagree[:20]))
    print(f"admission policy: {len(cases)} random values, {refused} refused by both, the rest accepted by both")


def test_an_update_is_refused_only_for_what_it_changes(policed: tuple[Kube, str]) -> None:
    kube, policed_ns = policed
    ns = new_namespace(kube)  # without the policy at first: an object from before it was installed
    _, cronjob = manifest(Case("CronJob", {"batchd.io/max-runs": "-1"}, valid=False, name="old"))
    kube.create("CronJob", ns, cronjob)
    kube.request("PATCH", f"/api/v1/namespaces/{ns}", body={"metadata": {"labels": {SELECTOR: "true"}}},
                 content_type="application/merge-patch+json")
    deadline = time.monotonic() + 30  # the binding's namespace selector reads the namespace from a cache
    while refused_by_policy(kube, ns, Case("Job", {"batchd.io/after": "A"}, valid=False)) is None:
        assert time.monotonic() < deadline, "the namespace's new label was not seen within 30 s"
        time.sleep(0.5)

    def patch(annotations: dict[str, str | None]) -> str | None:
        try:
            kube.patch("CronJob", ns, "old", {"metadata": {"annotations": annotations}})
        except KubeError as err:
            return err.message
        return None

    # batchd's own writes (a status annotation) and unrelated changes pass; the hold stays
    assert patch({"batchd.io/next-schedule-time": "2026-01-01T00:00:00Z", "team": "a"}) is None
    assert "batchd.io/max-runs" in (patch({"batchd.io/max-runs": "-2"}) or "")
    assert patch({"batchd.io/max-runs": "3"}) is None
    assert "batchd.io/concurrency-limit" in (patch({"batchd.io/concurrency-limit": "2"}) or "")
    assert patch({"batchd.io/concurrency-group": "etl", "batchd.io/concurrency-limit": "2"}) is None
    assert "batchd.io/concurrency-limit" in (patch({"batchd.io/concurrency-group": None}) or ""), \
        "removing the group leaves the limit without one"
    # a Job that names itself
    job = manifest(Case("Job", {"batchd.io/after": "self-1"}, valid=False, name="self-1"))[1]
    with pytest.raises(KubeError, match="names the Job itself"):
        kube.create("Job", policed_ns, job)
