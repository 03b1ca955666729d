"""Creation, defaulting and validation of Jobs, CronJobs and Pods: the objects as stored, and the
422 bodies (``details.causes``: field, reason, message) of what is refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.differential.harness import MERGE, STRATEGIC, Call, Case
from tests.differential.objects import (
    CONTAINER,
    CRONJOBS,
    GATE,
    JOBS,
    PODS,
    code,
    cronjob,
    job,
    params,
    pod,
)

CASES = [
    # -- Jobs ------------------------------------------------------------------------------------
    Case("job: defaults, generated selector and labels", (
        Call("POST", JOBS, job(meta={"labels": {"team": "a"}},
                               template={"metadata": {"labels": {"app": "x"}},
                                         "spec": {"restartPolicy": "OnFailure", "containers": [CONTAINER]}})),
        Call("GET", JOBS + "/j"),
    )),
    Case("job: labels copied from the template", (
        Call("POST", JOBS, job(template={"metadata": {"labels": {"app": "x"}},
                                         "spec": {"restartPolicy": "Never", "containers": [CONTAINER]}})),
    )),
    Case("job: work queue, indexed, per-index limits, pod failure policy", (
        Call("POST", JOBS, job("queue", parallelism=3)),
        Call("POST", JOBS, job("indexed", completions=4, parallelism=2, completionMode="Indexed",
                               backoffLimitPerIndex=1, maxFailedIndexes=1)),
        Call("POST", JOBS, job("pfp", podFailurePolicy={"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]})),
    )),
    Case("job: empty collections and zero values are not kept", (
        Call("POST", JOBS, job(meta={"labels": {}, "annotations": {}},
                               template={"metadata": {"annotations": {}},
                                         "spec": {"restartPolicy": "Never", "nodeSelector": {},
                                                  "containers": [{**CONTAINER, "args": [], "workingDir": ""}]}})),
    )),
    Case("job: invalid counts and modes", (
        Call("POST", JOBS, job(parallelism=-1, completions=-2, backoffLimit=-1, activeDeadlineSeconds=0,
                               completionMode="Sideways", ttlSecondsAfterFinished=-3)),
    )),
    Case("job: restartPolicy Always and a missing one", (
        Call("POST", JOBS, job("always", template={"spec": {"restartPolicy": "Always", "containers": [CONTAINER]}})),
        Call("POST", JOBS, job("missing", template={"spec": {"containers": [CONTAINER]}})),
    )),
    Case("job: a selector that does not match, and a manual one", (
        Call("POST", JOBS, job("nomatch", selector={"matchLabels": {"a": "b"}}, manualSelector=True)),
        Call("POST", JOBS, job("manual", selector={"matchLabels": {"a": "b"}}, manualSelector=True,
                               template={"metadata": {"labels": {"a": "b"}},
                                         "spec": {"restartPolicy": "Never", "containers": [CONTAINER]}})),
        Call("POST", JOBS, job("auto", selector={"matchLabels": {"a": "b"}})),
    )),
    Case("job: invalid indexed options", (
        Call("POST", JOBS, job("indexed", completionMode="Indexed", maxFailedIndexes=2)),
        Call("POST", JOBS, job("perindex", backoffLimitPerIndex=1)),
    )),
    Case("job: a struct in an invalid value", (
        Call("POST", JOBS, job("success", completions=2, successPolicy={"rules": [{"succeededCount": 1}]})),
    )),
    Case("job: a template's negative grace period is warned of", (
        Call("POST", JOBS, job(template={"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": -5,
                                                  "containers": [CONTAINER]}})),
    )),
    Case("job: invalid pod failure policy", (
        Call("POST", JOBS, job(podFailurePolicy={"rules": [
            {"action": "Explode", "onExitCodes": {"operator": "In", "values": [0, 3, 2]}},
            {"action": "FailIndex", "onPodConditions": []}]})),
    )),
    Case("job: managedBy", (
        Call("POST", JOBS, job("bad", managedBy="no-slash")),
        Call("POST", JOBS, job("good", managedBy="example.com/controller")),
        Call("PATCH", JOBS + "/good", {"spec": {"managedBy": "example.com/other"}}, ctype=MERGE),
    )),
    Case("job: names", (
        Call("POST", JOBS, job("Bad_Name")),
        Call("POST", JOBS, {**job(), "metadata": {}}),
        Call("POST", JOBS, {**job(), "metadata": {"generateName": "gen-"}}),
        Call("POST", JOBS, job("a" * 64)),
    )),
    Case("job: already exists, not found, kind and version mismatches", (
        Call("POST", JOBS, job(), show=code),
        Call("POST", JOBS, job()),
        Call("GET", JOBS + "/nope"),
        Call("PATCH", JOBS + "/nope", {"spec": {}}, ctype=MERGE),
        Call("POST", JOBS, {**job("k"), "kind": "CronJob"}),
        Call("POST", JOBS, {**job("v"), "apiVersion": "batch/v2"}),
        Call("POST", JOBS, {**job("m"), "metadata": {"name": "m", "namespace": "elsewhere"}}),
    )),
    Case("job: mutable and immutable fields", (
        Call("POST", JOBS, job(completions=4, parallelism=2), show=code),
        Call("PATCH", JOBS + "/j", {"spec": {"parallelism": 3, "activeDeadlineSeconds": 60, "suspend": True,
                                             "backoffLimit": 2}}, ctype=MERGE),
        Call("PATCH", JOBS + "/j", {"spec": {"completions": 5, "completionMode": "Indexed"}}, ctype=MERGE),
        Call("PATCH", JOBS + "/j", {"spec": {"selector": {"matchLabels": {"x": "y"}}}}, ctype=STRATEGIC),
    )),
    Case("job: an update validates the spec twice", (
        Call("POST", JOBS, job(), show=code),
        Call("PATCH", JOBS + "/j", {"spec": {"parallelism": -1, "backoffLimit": -2,
                                             "template": {"metadata": {"labels": {"Bad Key": "x"}}}}},
             ctype=STRATEGIC, show=lambda r: r.body["details"]["causes"][:6]),
    )),
    Case("job: the template is immutable", (
        Call("POST", JOBS, job(), show=code),
        Call("PATCH", JOBS + "/j", {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "other"}]}}}},
             ctype=STRATEGIC),
    )),
    Case("job: a suspended Job's template may change", (
        Call("POST", JOBS, job(suspend=True), show=code),
        Call("PATCH", JOBS + "/j", {"spec": {"template": {"metadata": {"labels": {"extra": "1"}},
                                                          "spec": {"nodeSelector": {"disk": "ssd"}}}}},
             ctype=STRATEGIC),
    )),
    Case("job: a body of the wrong types", (
        Call("POST", JOBS, job(parallelism="two")),
        Call("POST", JOBS, job(parallelism=2**31)),
        Call("POST", JOBS, job(suspend="yes")),
        Call("POST", JOBS, {**job(), "metadata": {"name": "x", "labels": {"a": 1}}}),
    )),
    # -- CronJobs --------------------------------------------------------------------------------
    Case("cronjob: defaults", (
        Call("POST", CRONJOBS, cronjob()),
        Call("GET", CRONJOBS + "/cj"),
    )),
    Case("cronjob: invalid schedule, policies, limits and time zone", (
        Call("POST", CRONJOBS, cronjob(schedule="0 0 0 * * *", concurrencyPolicy="Sometimes",
                                       startingDeadlineSeconds=-1, timeZone="Mars/Base",
                                       successfulJobsHistoryLimit=-1, failedJobsHistoryLimit=-2)),
        Call("POST", CRONJOBS, cronjob("tz", schedule="TZ=UTC 0 * * * *")),
        Call("POST", CRONJOBS, cronjob("local", timeZone="Local")),
        Call("POST", CRONJOBS, cronjob("empty", schedule="")),
        Call("POST", CRONJOBS, cronjob("every", schedule="@every 5m")),
        Call("POST", CRONJOBS, cronjob("zone", timeZone="Europe/Berlin"), show=code),
    )),
    Case("cronjob: the job template", (
        Call("POST", CRONJOBS, cronjob(job_spec={"selector": {"matchLabels": {"a": "b"}}, "manualSelector": True,
                                                 "template": {"metadata": {"labels": {"a": "b"}},
                                                              "spec": {"restartPolicy": "Always",
                                                                       "containers": [CONTAINER]}}})),
        Call("POST", CRONJOBS, cronjob("negative", job_spec={"parallelism": -1, "backoffLimit": -1,
                                                             "template": {"spec": {"restartPolicy": "Never",
                                                                                   "containers": [CONTAINER]}}})),
    )),
    Case("cronjob: name length on create and update", (
        Call("POST", CRONJOBS, cronjob("a" * 53)),
        Call("POST", CRONJOBS, cronjob("a" * 52), show=code),
        Call("PATCH", CRONJOBS + "/" + "a" * 52, {"spec": {"suspend": True}}, ctype=MERGE),
    )),
    Case("cronjob: updates raise the generation", (
        Call("POST", CRONJOBS, cronjob(), show=code),
        Call("PATCH", CRONJOBS + "/cj", {"spec": {"schedule": "0 * * * *"}}, ctype=MERGE),
        Call("PATCH", CRONJOBS + "/cj", {"metadata": {"labels": {"a": "b"}}}, ctype=MERGE),
    )),
    # -- Pods -----------------------------------------------------------------------------------
    Case("pod: defaults and admission", (
        Call("POST", PODS, pod(containers=[{"name": "main", "image": "busybox"},
                                           {"name": "side", "image": "busybox:1.36",
                                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                                            "ports": [{"containerPort": 80}]}])),
    ), pods=True),
    Case("pod: QoS classes", (
        Call("POST", PODS, pod("guaranteed", containers=[{**CONTAINER, "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}])),
        Call("POST", PODS, pod("burstable", containers=[{**CONTAINER, "resources": {"requests": {"cpu": "100m"}}}])),
    ), pods=True),
    Case("pod: invalid containers and spec", (
        Call("POST", PODS, pod(initContainers=[{"name": "Bad", "image": "x"}],
                               containers=[{"name": "Bad", "image": ""},
                                           {"name": "Bad", "image": "x", "ports": [{"containerPort": 70000}],
                                            "imagePullPolicy": "Sometimes"}],
                               restartPolicy="Sometimes", activeDeadlineSeconds=0)),
        Call("POST", PODS, pod("none", containers=[])),
    ), pods=True),
    Case("pod: a negative grace period becomes 1", (
        Call("POST", PODS, pod(terminationGracePeriodSeconds=-5)),
    ), pods=True),
    Case("pod: empty collections and zero values are not kept", (
        Call("POST", PODS, {"metadata": {"name": "p", "labels": {}, "annotations": {}, "finalizers": []},
                            "spec": {"schedulingGates": [GATE], "nodeSelector": {}, "hostNetwork": False,
                                     "containers": [{**CONTAINER, "args": [], "command": [], "env": [],
                                                     "workingDir": "", "stdin": False,
                                                     "resources": {"limits": {}}}]}}),
    ), pods=True),
    Case("pod: scheduling gates may only go", (
        Call("POST", PODS, pod(schedulingGates=[GATE, {"name": "example.com/second"}]), show=code),
        Call("PATCH", PODS + "/p", {"spec": {"schedulingGates": [GATE, {"name": "example.com/second"},
                                                                 {"name": "example.com/third"}]}}, ctype=MERGE),
        Call("PATCH", PODS + "/p", {"spec": {"schedulingGates": [GATE]}}, ctype=MERGE,
             show=lambda r: r.body["spec"].get("schedulingGates") if r.status == 200 else r.body),
    ), pods=True),
    Case("pod: what an update may change", (
        Call("POST", PODS, pod(activeDeadlineSeconds=100), show=code),
        Call("PATCH", PODS + "/p", {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}],
                                             "activeDeadlineSeconds": 50}}, ctype=STRATEGIC),
        Call("PATCH", PODS + "/p", {"spec": {"activeDeadlineSeconds": 60}}, ctype=STRATEGIC),
        Call("PATCH", PODS + "/p", {"spec": {"restartPolicy": "Never"}}, ctype=STRATEGIC),
    ), pods=True),
]


@pytest.mark.parametrize("case", params(CASES))
def test_create(case: Case, differential: Callable[[Case], None]) -> None:
    differential(case)
