"""Events are stored once and served as core/v1 and events.k8s.io/v1 views."""

from __future__ import annotations

import kubernetes

from tests.kubesim.conftest import job_body


def test_a_core_event_reads_back_as_an_events_v1_event(core, http, batch, ns):
    job = batch.create_namespaced_job(ns, job_body("evj"))
    ts = "2026-01-01T00:00:00Z"
    core.create_namespaced_event(ns, {
        "metadata": {"name": "evj.1"},
        "involvedObject": {"kind": "Job", "apiVersion": "batch/v1", "name": "evj", "namespace": ns, "uid": job.metadata.uid},
        "reason": "BadSchedule", "message": "unparseable schedule", "type": "Warning",
        "source": {"component": "batchd"}, "firstTimestamp": ts, "lastTimestamp": ts, "count": 2,
    })
    # Raw HTTP: like kube-apiserver, a legacy event has ``eventTime: null`` in this view, which
    # the python client's EventsV1Event model rejects (kubernetes-client/python#1616).
    v1 = http.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events/evj.1")
    assert v1["apiVersion"] == "events.k8s.io/v1" and v1["eventTime"] is None
    assert v1["regarding"]["name"] == "evj" and v1["regarding"]["uid"] == job.metadata.uid
    assert v1["note"] == "unparseable schedule" and v1["reason"] == "BadSchedule" and v1["type"] == "Warning"
    assert v1["deprecatedSource"] == {"component": "batchd"} and v1["deprecatedCount"] == 2
    assert "involvedObject" not in v1 and "message" not in v1


def test_an_events_v1_event_reads_back_as_a_core_event(core, events_api, ns):
    # The client turns the body into its model and writes eventTime with datetime.isoformat(),
    # which has no fraction at microsecond 0: a MicroTime the API server refuses (API-60).
    events_api.create_namespaced_event(ns, {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "new.1"},
        "eventTime": "2026-01-01T00:00:00.000001Z", "reportingController": "batchd.io/job-controller",
        "reportingInstance": "batchd-0", "action": "Create", "reason": "SuccessfulCreate",
        "note": "created pod", "type": "Normal",
        "regarding": {"kind": "Job", "name": "j", "namespace": ns},
    })
    ev = core.read_namespaced_event("new.1", ns)
    assert ev.involved_object.name == "j" and ev.message == "created pod"
    assert ev.reporting_component == "batchd.io/job-controller" and ev.event_time is not None
    listed = events_api.list_namespaced_event(ns, field_selector="regarding.name=j").items
    assert [e.metadata.name for e in listed] == ["new.1"]


def test_event_field_selectors_on_involved_object(core, ns):
    for name, target in (("a.1", "a"), ("b.1", "b")):
        core.create_namespaced_event(ns, {
            "metadata": {"name": name}, "reason": "R", "message": "m", "type": "Normal",
            "involvedObject": {"kind": "Job", "name": target, "namespace": ns, "uid": f"uid-{target}"},
            "source": {"component": "t"},
        })
    sel = f"involvedObject.name=a,involvedObject.namespace={ns},involvedObject.kind=Job,involvedObject.uid=uid-a"
    assert [e.metadata.name for e in core.list_namespaced_event(ns, field_selector=sel).items] == ["a.1"]


def test_events_v1_watch_shows_the_v1_view(core, events_api, ns):
    rv = events_api.list_namespaced_event(ns).metadata.resource_version
    events_api.create_namespaced_event(ns, {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "w.1"},
        "eventTime": "2026-01-01T00:00:00.000001Z", "reportingController": "batchd.io/x",
        "reportingInstance": "x-0", "action": "Sync", "reason": "R", "note": "hello", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": ns},
    })
    seen = [(e["type"], e["object"].note) for e in kubernetes.watch.Watch().stream(
        events_api.list_namespaced_event, ns, resource_version=rv, timeout_seconds=1)]
    assert seen == [("ADDED", "hello")]
    core_seen = [(e["type"], e["object"].message) for e in kubernetes.watch.Watch().stream(
        core.list_namespaced_event, ns, resource_version=rv, timeout_seconds=1)]
    assert core_seen == [("ADDED", "hello")]
