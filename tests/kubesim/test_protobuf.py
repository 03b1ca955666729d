"""Protobuf bodies (``application/vnd.kubernetes.protobuf``): round trips of every served kind
checked field by field against their JSON form, and kubesim's handling of protobuf writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubesim import protobuf
from kubesim.store import micro_timestamp, timestamp
from tests.kubesim.conftest import Http, eventually, job_body

PB = protobuf.MEDIA_TYPE
T0, T1 = "2026-11-22T10:00:00Z", "2026-11-22T10:00:05Z"
META = {
    "name": "x", "namespace": "ns", "uid": "6f1c6a52-0000-4000-8000-000000000001", "resourceVersion": "42",
    "generation": 3, "creationTimestamp": T0, "labels": {"app": "demo", "tier": "batch"},
    "annotations": {"note": "a"}, "finalizers": ["example.com/keep"],
    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                         "uid": "6f1c6a52-0000-4000-8000-000000000002", "controller": True,
                         "blockOwnerDeletion": False}],
    "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "batch/v1",
                       "time": T0, "fieldsType": "FieldsV1",
                       "fieldsV1": {"f:spec": {"f:parallelism": {}}}}],
}
POD_SPEC: dict[str, Any] = {
    "restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "activeDeadlineSeconds": 600,
    "nodeSelector": {"disk": "ssd"}, "serviceAccountName": "runner", "automountServiceAccountToken": False,
    "hostNetwork": True, "priority": 0, "enableServiceLinks": False,
    "securityContext": {"runAsUser": 1000, "runAsNonRoot": True, "fsGroup": 2000,
                        "supplementalGroups": [5, 6], "seccompProfile": {"type": "RuntimeDefault"}},
    "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
    "containers": [{
        "name": "main", "image": "busybox:1.36", "command": ["sh", "-c"], "args": ["echo hi"],
        "workingDir": "/w", "imagePullPolicy": "IfNotPresent", "stdin": True,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "A", "value": "1"},
                {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "S", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "k", "optional": True}}}],
        "envFrom": [{"prefix": "C_", "configMapRef": {"name": "cm"}}],
        "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}, "requests": {"cpu": "100m"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                          "periodSeconds": 10, "failureThreshold": 3},
        "readinessProbe": {"tcpSocket": {"port": 8080}, "initialDelaySeconds": 2},
        "startupProbe": {"exec": {"command": ["cat", "/ready"]}},
        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        "securityContext": {"privileged": False, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }],
    "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "cfg", "configMap": {"name": "cm", "defaultMode": 420,
                                              "items": [{"key": "a", "path": "a.txt"}]}},
                {"name": "sec", "secret": {"secretName": "sec", "optional": False}},
                {"name": "pvc", "persistentVolumeClaim": {"claimName": "claim"}},
                {"name": "proj", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}}],
    "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                   "labelSelector": {"matchLabels": {"app": "demo"}}}],
    "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
}
JOB_SPEC: dict[str, Any] = {
    "parallelism": 0, "completions": 3, "activeDeadlineSeconds": 9223372036854775807, "backoffLimit": 6,
    "backoffLimitPerIndex": 1, "maxFailedIndexes": 2, "ttlSecondsAfterFinished": 2147483647,
    "completionMode": "Indexed", "suspend": False, "manualSelector": True,
    "podReplacementPolicy": "Failed", "managedBy": "batchd.io/job-controller",
    "selector": {"matchLabels": {"app": "demo"},
                 "matchExpressions": [{"key": "tier", "operator": "In", "values": ["batch"]}]},
    "podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [1, 42]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
    "successPolicy": {"rules": [{"succeededIndexes": "0-2", "succeededCount": 1}]},
    "template": {"metadata": {"labels": {"app": "demo"}}, "spec": POD_SPEC},
}
CONTAINER_STATUS = {
    "name": "main", "image": "busybox:1.36", "imageID": "docker.io/busybox@sha256:1", "containerID": "containerd://1",
    "ready": False, "restartCount": 0, "started": False,
    "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": T0, "finishedAt": T1,
                             "containerID": "containerd://1"}},
    "lastState": {"terminated": {"exitCode": 137, "signal": 9, "reason": "Error", "startedAt": T0,
                                 "finishedAt": T0}},
}
OBJECTS: dict[str, dict[str, Any]] = {
    "Namespace": {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Terminating", "conditions": [
            {"type": "NamespaceDeletionContentFailure", "status": "False", "lastTransitionTime": T0,
             "reason": "ContentDeleted", "message": "All content successfully deleted"}]},
    },
    "Pod": {
        "apiVersion": "v1", "kind": "Pod", "metadata": META, "spec": {**POD_SPEC, "nodeName": "kubesim-node"},
        "status": {"phase": "Succeeded", "hostIP": "10.0.0.10", "hostIPs": [{"ip": "10.0.0.10"}],
                   "podIP": "10.244.0.2", "podIPs": [{"ip": "10.244.0.2"}], "startTime": T0, "qosClass": "Burstable",
                   "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": T1,
                                   "reason": "PodCompleted"}],
                   "containerStatuses": [CONTAINER_STATUS],
                   "initContainerStatuses": [{**CONTAINER_STATUS, "name": "init"}]},
    },
    "Job": {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": META, "spec": JOB_SPEC,
        "status": {"startTime": T0, "completionTime": T1, "active": 1, "succeeded": 2, "failed": 1,
                   "ready": 0, "terminating": 0, "completedIndexes": "0-1", "failedIndexes": "2",
                   "uncountedTerminatedPods": {"succeeded": ["u1"], "failed": ["u2"]},
                   "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": T1,
                                   "lastTransitionTime": T1, "reason": "Done", "message": "ok"}]},
    },
    "CronJob": {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": META,
        "spec": {"schedule": "*/1 * * * *", "timeZone": "Europe/Paris", "startingDeadlineSeconds": 0,
                 "concurrencyPolicy": "Forbid", "suspend": True, "successfulJobsHistoryLimit": 0,
                 "failedJobsHistoryLimit": 1,
                 "jobTemplate": {"metadata": {"labels": {"app": "demo"}}, "spec": JOB_SPEC}},
        "status": {"lastScheduleTime": T0, "lastSuccessfulTime": T1,
                   "active": [{"kind": "Job", "namespace": "ns", "name": "x-1", "uid": "u",
                               "apiVersion": "batch/v1", "resourceVersion": "7"}]},
    },
    "Event": {
        "apiVersion": "v1", "kind": "Event", "metadata": {**META, "name": "x.1"},
        "involvedObject": {"kind": "Job", "namespace": "ns", "name": "x", "uid": "u", "apiVersion": "batch/v1",
                           "fieldPath": "spec"},
        "reason": "Completed", "message": "Job completed", "source": {"component": "batchd", "host": "h"},
        "firstTimestamp": T0, "lastTimestamp": T1, "count": 2, "type": "Normal",
        "eventTime": "2026-11-22T10:00:00.123456Z", "series": {"count": 2, "lastObservedTime": "2026-11-22T10:00:05.000001Z"},
        "action": "Sync", "related": {"kind": "Pod", "name": "x-abc"}, "reportingComponent": "batchd",
        "reportingInstance": "batchd-0",
    },
    "events.k8s.io/Event": {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {**META, "name": "x.2"},
        "eventTime": "2026-11-22T10:00:00.000000Z", "series": {"count": 3, "lastObservedTime": "2026-11-22T10:00:01.500000Z"},
        "reportingController": "batchd.io/job-controller", "reportingInstance": "batchd-0", "action": "Sync",
        "reason": "Completed", "regarding": {"kind": "Job", "namespace": "ns", "name": "x"},
        "related": {"kind": "Pod", "name": "x-abc"}, "note": "done", "type": "Normal",
        "deprecatedSource": {"component": "c"}, "deprecatedFirstTimestamp": T0, "deprecatedLastTimestamp": T1,
        "deprecatedCount": 4,
    },
    "Lease": {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": META,
        "spec": {"holderIdentity": "batchd-0", "leaseDurationSeconds": 15, "acquireTime": "2026-11-22T10:00:00.123456Z",
                 "renewTime": "2026-11-22T10:00:05.000001Z", "leaseTransitions": 0,
                 "strategy": "OldestEmulationVersion", "preferredHolder": "batchd-1"},
    },
}


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """Every scalar of a JSON value by its path, so a mismatch names the field."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(leaves(v, f"{path}.{k}"))
        return out or {path: {}}
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(leaves(v, f"{path}[{i}]"))
        return out or {path: []}
    return {path: value}


@pytest.mark.parametrize("kind", sorted(OBJECTS))
def test_every_served_kind_round_trips_field_by_field(kind: str) -> None:
    obj = OBJECTS[kind]
    decoded = protobuf.decode(protobuf.encode(obj))
    assert decoded.unknown == ()
    assert (decoded.api_version, decoded.kind) == (obj["apiVersion"], obj["kind"])
    want, got = leaves(obj), leaves(decoded.obj)
    assert sorted(got) == sorted(want)
    for path, value in want.items():
        assert got[path] == value, path


def test_a_zero_value_of_a_pointer_field_survives_and_an_omitempty_zero_does_not() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "z"},
           "spec": {"parallelism": 0, "template": {"spec": {"containers": [{"name": "c", "stdin": False}]}}},
           "status": {"active": 0}}
    got = protobuf.decode(protobuf.encode(job)).obj
    assert got["spec"]["parallelism"] == 0
    assert got["spec"]["template"]["spec"]["containers"] == [{"name": "c"}]
    assert got["status"] == {}


@pytest.mark.parametrize("year", [1, 999])
def test_a_time_before_year_1000_is_written_with_four_year_digits(year: int) -> None:
    # Go's RFC 3339 layout pads the year ("0001"); strftime's %Y leaves it unpadded ("1").
    at = datetime(year, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    time, micro = f"{year:04d}-01-02T03:04:05Z", f"{year:04d}-01-02T03:04:05.000006Z"
    assert (timestamp(at), micro_timestamp(at)) == (time, micro)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "creationTimestamp": time}}
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
             "spec": {"renewTime": micro}}
    assert protobuf.decode(protobuf.encode(job)).obj["metadata"]["creationTimestamp"] == time
    assert protobuf.decode(protobuf.encode(lease)).obj["spec"]["renewTime"] == micro

def test_the_envelope_is_magic_then_runtime_unknown() -> None:
    body = protobuf.encode(OBJECTS["Namespace"])
    assert body[:4] == b"k8s\x00"
    unknown = protobuf.message_for("Unknown").FromString(body[4:])
    assert (unknown.typeMeta.apiVersion, unknown.typeMeta.kind) == ("v1", "Namespace")  # type: ignore[attr-defined]
    ns = protobuf.message_for("Namespace").FromString(unknown.raw)  # type: ignore[attr-defined]
    assert ns.metadata.name == "team-a"  # type: ignore[attr-defined]


def _with_unknown_field(obj: dict[str, Any]) -> bytes:
    """An envelope whose object carries field 99 (not described), as a newer client might send."""
    body = protobuf.encode(obj)
    unknown = protobuf.message_for("Unknown").FromString(body[4:])
    unknown.raw += b"\xfa\x06\x03abc"  # type: ignore[attr-defined]  # field 99, length-delimited
    return protobuf.MAGIC + unknown.SerializeToString()


def test_a_protobuf_create_stores_the_object_of_its_json_form(http: Http, ns: str) -> None:
    body = job_body("pb", labels={"app": "pb"})
    body["spec"]["ttlSecondsAfterFinished"] = 30
    code, _, created = http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", raw=protobuf.encode(body),
                                    content_type=PB)
    assert code == 201, created
    assert created["metadata"]["labels"]["app"] == "pb"
    assert created["spec"]["ttlSecondsAfterFinished"] == 30
    assert created["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"


def test_protobuf_update_and_status_update(http: Http, ns: str) -> None:
    ns_path = f"/api/v1/namespaces/{ns}"
    code, _, pod = http.request("POST", f"{ns_path}/pods", raw=protobuf.encode({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"kubesim.batchd.io/run-seconds": "600"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}), content_type=PB)
    assert code == 201, pod
    # The fake kubelet binds and starts the Pod meanwhile: wait for it to be Running, so the
    # updates below race with no one.
    pod = eventually(lambda: (p := http.get(f"{ns_path}/pods/p"))["status"].get("phase") == "Running" and p,
                     what="Pod running")
    pod["metadata"]["labels"] = {"updated": "yes"}
    code, _, updated = http.request("PUT", f"{ns_path}/pods/p", raw=protobuf.encode(pod), content_type=PB)
    assert code == 200, updated
    assert updated["metadata"]["labels"] == {"updated": "yes"}
    updated["status"]["conditions"] = [*updated["status"].get("conditions", []),
                                       {"type": "example.com/Checked", "status": "True", "lastTransitionTime": T0}]
    code, _, status = http.request("PUT", f"{ns_path}/pods/p/status", raw=protobuf.encode(updated), content_type=PB)
    assert code == 200, status
    # lastProbeTime, a non-pointer time, is written as null when unset
    assert {"type": "example.com/Checked", "status": "True", "lastTransitionTime": T0,
            "lastProbeTime": None} in status["status"]["conditions"]


@pytest.mark.parametrize(("validation", "code"), [("Strict", 400), ("Warn", 201), ("Ignore", 201)])
def test_unknown_protobuf_fields_follow_field_validation(http: Http, ns: str, validation: str, code: int) -> None:
    body = _with_unknown_field(job_body(f"unknown-{validation.lower()}"))
    got, headers, answer = http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs?fieldValidation={validation}",
                                        raw=body, content_type=PB)
    assert got == code, answer
    if validation == "Strict":
        assert answer["reason"] == "BadRequest"
        assert answer["message"] == 'strict decoding error: unknown field in protobuf message at "."'
    elif validation == "Warn":
        assert headers.get("Warning") == '299 - "unknown field in protobuf message at \\".\\""'
    else:
        assert "Warning" not in headers


def test_bodies_kubesim_cannot_read_are_4xx_status_objects(http: Http, ns: str) -> None:
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    code, _, answer = http.request("POST", path, raw=b"k8s\x00\xff\xff", content_type=PB)
    assert (code, answer["kind"], answer["reason"]) == (400, "Status", "BadRequest")
    assert answer["message"].startswith("the body of the request was in an unknown format: unable to decode")
    code, _, answer = http.request("POST", path, raw=b"\x00\x01", content_type=PB)
    assert code == 400 and "expected prefix [107 56 115 0]" in answer["message"]
    code, _, answer = http.request("POST", path, raw=protobuf.encode(OBJECTS["Namespace"]), content_type=PB)
    assert code == 400 and answer["message"] == (
        'Namespace in version "v1" cannot be handled as a Job: converting (v1.Namespace) to (batch.Job): unknown conversion')
    code, _, answer = http.request("POST", path, raw=b"<job/>", content_type="application/xml")
    assert (code, answer["reason"]) == (415, "UnsupportedMediaType")
    assert answer["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )
