"""Watch: from a resourceVersion, initial ADDED events, bookmarks, timeouts, 410 Gone,
selectors and forced disconnects, through the official client, raw HTTP and kubectl -w."""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
import time
from urllib.parse import urlsplit

import kubernetes
import pytest
from kubernetes.client import ApiException

from kubesim import KubeSim
from tests.kubesim.conftest import eventually, job_body, pod_body


def stream_lines(url: str, path: str, *, max_lines: int = 100, timeout: float = 5.0) -> list[dict]:
    """Read watch events from a raw HTTP stream until EOF, ``max_lines`` or ``timeout``."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    conn.request("GET", path)
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    events: list[dict] = []
    try:
        while len(events) < max_lines:
            line = resp.readline()
            if not line:
                break
            events.append(json.loads(line))
    except TimeoutError:
        pass
    finally:
        conn.close()
    return events


def test_watch_from_a_resource_version_sends_only_later_events(batch, ns):
    batch.create_namespaced_job(ns, job_body("before"))
    rv = batch.list_namespaced_job(ns).metadata.resource_version
    batch.create_namespaced_job(ns, job_body("after"))
    batch.patch_namespaced_job("after", ns, {"metadata": {"labels": {"m": "1"}}})
    batch.delete_namespaced_job("before", ns, propagation_policy="Background")
    seen = [
        (e["type"], e["object"].metadata.name)
        for e in kubernetes.watch.Watch().stream(batch.list_namespaced_job, ns, resource_version=rv, timeout_seconds=1)
    ]
    assert seen == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "before")]


def test_watch_without_resource_version_starts_with_synthetic_added_events(sim, batch, ns):
    batch.create_namespaced_job(ns, job_body("w1"))
    batch.create_namespaced_job(ns, job_body("w2"))
    got: list[tuple[str, str]] = []
    w = kubernetes.watch.Watch()

    def later() -> None:
        eventually(lambda: len(got) >= 2)
        batch.create_namespaced_job(ns, job_body("w3"))

    threading.Thread(target=later, daemon=True).start()
    for e in w.stream(batch.list_namespaced_job, ns, timeout_seconds=5):
        got.append((e["type"], e["object"].metadata.name))
        if len(got) == 3:
            w.stop()
    assert got == [("ADDED", "w1"), ("ADDED", "w2"), ("ADDED", "w3")]
    rv0 = stream_lines(sim.url, f"/apis/batch/v1/namespaces/{ns}/jobs?watch=1&resourceVersion=0&timeoutSeconds=1")
    assert sorted(e["object"]["metadata"]["name"] for e in rv0) == ["w1", "w2", "w3"]


def test_bookmarks_carry_the_current_resource_version(sim, batch, ns):
    batch.create_namespaced_job(ns, job_body("bm"))
    rv = batch.list_namespaced_job(ns).metadata.resource_version
    events = stream_lines(
        sim.url, f"/apis/batch/v1/namespaces/{ns}/jobs?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2",
        max_lines=2,
    )
    assert events and all(e["type"] == "BOOKMARK" for e in events)
    assert events[0]["object"]["kind"] == "Job" and events[0]["object"]["apiVersion"] == "batch/v1"
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) >= int(rv)
    plain = stream_lines(sim.url, f"/apis/batch/v1/namespaces/{ns}/jobs?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert plain == []  # no bookmarks unless asked for


def test_timeout_seconds_ends_the_stream(sim, ns):
    start = time.monotonic()
    events = stream_lines(sim.url, f"/api/v1/namespaces/{ns}/pods?watch=1&timeoutSeconds=1", timeout=10)
    elapsed = time.monotonic() - start
    assert events == []
    assert 0.8 < elapsed < 3


def test_a_resource_version_older_than_the_window_is_gone(tmp_path):
    with KubeSim(kubelet=False, watch_window=5) as small:
        api = kubernetes.config.new_client_from_config(str(small.write_kubeconfig(tmp_path / "kc")))
        core = kubernetes.client.CoreV1Api(api)
        first = core.create_namespaced_pod("default", pod_body("old")).metadata.resource_version
        for i in range(10):
            core.create_namespaced_pod("default", pod_body(f"p{i}"))
        with pytest.raises(ApiException) as err:
            for _ in kubernetes.watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=first, timeout_seconds=2):
                pass
        assert err.value.status == 410
        events = stream_lines(small.url, f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={first}")
        assert events[0]["type"] == "ERROR"
        assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
        # A recent resourceVersion still works.
        recent = core.list_namespaced_pod("default").metadata.resource_version
        assert stream_lines(small.url, f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={recent}&timeoutSeconds=1") == []


def test_compaction_expires_a_watch_of_events_a_list_at_a_resource_version_and_a_continue(tmp_path):
    """As kube-apiserver's: Events have no watch cache, so a watch of them is etcd's, as are a list
    at a resourceVersion and a continue token, all 410 Gone once compacted."""
    with KubeSim(kubelet=False, compaction_seconds=0.2) as small:
        api = kubernetes.config.new_client_from_config(str(small.write_kubeconfig(tmp_path / "kc")))
        core = kubernetes.client.CoreV1Api(api)
        first = core.create_namespaced_pod("default", pod_body("old")).metadata.resource_version
        core.create_namespaced_pod("default", pod_body("new"))
        page = core.list_namespaced_pod("default", limit=1)
        events = f"/api/v1/namespaces/default/events?watch=1&resourceVersion={first}&timeoutSeconds=1"
        # a revision not compacted (the newest: compaction only reaches the previous interval's) is watched
        current = page.metadata.resource_version
        assert stream_lines(small.url, events.replace(f"resourceVersion={first}", f"resourceVersion={current}")) == []
        core.create_namespaced_pod("default", pod_body("later"))  # (sorted before the page's next key)
        eventually(lambda: small.store.storage_compacted_rv > int(page.metadata.resource_version))
        [gone] = stream_lines(small.url, events)
        assert gone["object"]["message"] == "The resourceVersion for the provided watch is too old."
        with pytest.raises(ApiException) as err:
            core.list_namespaced_pod("default", resource_version=first, resource_version_match="Exact")
        assert err.value.status == 410
        with pytest.raises(ApiException) as err:
            core.list_namespaced_pod("default", limit=1, _continue=page.metadata._continue)
        expired = json.loads(err.value.body)
        assert expired["code"] == 410 and "inconsistent list" in expired["message"]
        rest = core.list_namespaced_pod("default", limit=1, _continue=expired["metadata"]["continue"])
        assert [p.metadata.name for p in rest.items] == ["old"] and not rest.metadata._continue
        # Pods have a watch cache, which still holds the compacted revisions
        pods = f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={first}&timeoutSeconds=1"
        assert [e["object"]["metadata"]["name"] for e in stream_lines(small.url, pods)] == ["new", "later"]


def test_a_paged_list_is_at_its_first_pages_resource_version(core, sim, ns):
    """As the API server's: a watch from the list's version replays what changed while later pages
    were read (kubesim reads each page live), so an informer's cache misses nothing (JOB-93)."""
    for name in ("a", "b", "c"):
        core.create_namespaced_pod(ns, pod_body(name))
    first = core.list_namespaced_pod(ns, limit=1)
    core.patch_namespaced_pod("c", ns, {"metadata": {"labels": {"changed": "meanwhile"}}})
    rest = core.list_namespaced_pod(ns, limit=2, _continue=first.metadata._continue)
    assert rest.metadata.resource_version == first.metadata.resource_version
    events = stream_lines(sim.url, f"/api/v1/namespaces/{ns}/pods?watch=1&timeoutSeconds=1"
                                   f"&resourceVersion={first.metadata.resource_version}")
    assert any(e["type"] == "MODIFIED" and e["object"]["metadata"]["name"] == "c"
               and (e["object"]["metadata"].get("labels") or {}).get("changed") == "meanwhile" for e in events)


def test_watch_filters_by_label_and_field_selectors(batch, ns):
    rv = batch.list_namespaced_job(ns).metadata.resource_version
    batch.create_namespaced_job(ns, job_body("keep", labels={"team": "a"}))
    batch.create_namespaced_job(ns, job_body("skip", labels={"team": "b"}))
    by_label = [e["object"].metadata.name for e in kubernetes.watch.Watch().stream(
        batch.list_namespaced_job, ns, resource_version=rv, label_selector="team=a", timeout_seconds=1)]
    assert by_label == ["keep"]
    by_field = [e["object"].metadata.name for e in kubernetes.watch.Watch().stream(
        batch.list_namespaced_job, ns, resource_version=rv, field_selector="metadata.name=skip", timeout_seconds=1)]
    assert by_field == ["skip"]


def test_watch_across_all_namespaces_sees_every_namespace(batch, core, ns):
    rv = batch.list_job_for_all_namespaces(limit=1).metadata.resource_version
    batch.create_namespaced_job(ns, job_body("everywhere"))
    seen = [(e["object"].metadata.namespace, e["object"].metadata.name) for e in kubernetes.watch.Watch().stream(
        batch.list_job_for_all_namespaces, resource_version=rv, timeout_seconds=1)
        if e["object"].metadata.namespace == ns]
    assert seen == [(ns, "everywhere")]


@pytest.mark.parametrize("via", ["in-process", "http"])
def test_disconnect_watches_closes_open_streams(sim, http, ns, via):
    result: list[list[dict]] = []
    t = threading.Thread(target=lambda: result.append(
        stream_lines(sim.url, f"/api/v1/namespaces/{ns}/pods?watch=1", timeout=10)), daemon=True)
    start = time.monotonic()
    t.start()
    eventually(lambda: any(w.key == ("", "pods") for w in sim.store.all_watchers()), what="watch open")
    if via == "http":
        code, _, body = http.request("POST", "/kubesim/disconnect-watches")
        assert code == 200 and body["disconnected"] >= 1
    else:
        assert sim.disconnect_watches() >= 1
    t.join(5)
    assert result == [[]] and time.monotonic() - start < 5


def test_kubectl_get_watch_prints_new_jobs(kubectl, sim_kubeconfig, batch, ns, tmp_path):
    batch.create_namespaced_job(ns, job_body("first"))
    proc = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(sim_kubeconfig), "--cache-dir", str(tmp_path / "cache"),
         "get", "jobs", "-n", ns, "-w", "--no-headers", "-o", "custom-columns=NAME:.metadata.name"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        lines: list[str] = []

        def reader() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.strip())

        threading.Thread(target=reader, daemon=True).start()
        eventually(lambda: "first" in lines, what="initial list printed")
        batch.create_namespaced_job(ns, job_body("second"))
        eventually(lambda: "second" in lines, what="watched job printed")
    finally:
        proc.terminate()
        proc.wait(5)


def test_pod_watch_sees_every_kubelet_transition(core, ns):
    rv = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod_body("life", run_seconds=0.2))
    phases: list[tuple[str, str | None]] = []
    w = kubernetes.watch.Watch()
    for e in w.stream(core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=5):
        phases.append((e["type"], e["object"].status.phase if e["object"].status else None))
        if phases[-1][1] == "Succeeded":
            w.stop()
    assert phases[0][0] == "ADDED"
    seen = [p for _, p in phases]
    assert seen.index("Pending") < seen.index("Running") < seen.index("Succeeded")
    assert all(t == "MODIFIED" for t, _ in phases[1:])


def _selection_changes(batch, ns: str) -> None:
    """A Job enters, leaves and re-enters the selection ``app=x``; one change stays outside."""
    batch.create_namespaced_job(ns, job_body("sel", labels={"app": "x"}))
    batch.patch_namespaced_job("sel", ns, {"metadata": {"annotations": {"a": "1"}}})
    batch.patch_namespaced_job("sel", ns, {"metadata": {"labels": {"app": "y"}}})
    batch.patch_namespaced_job("sel", ns, {"metadata": {"annotations": {"a": "2"}}})
    batch.patch_namespaced_job("sel", ns, {"metadata": {"labels": {"app": "x"}}})


SELECTION_EVENTS = [("ADDED", "x", None), ("MODIFIED", "x", "1"), ("DELETED", "x", "1"), ("ADDED", "x", "2")]


def _seen(event) -> tuple[str, str, str | None]:
    obj = event["object"]
    return event["type"], obj.metadata.labels["app"], (obj.metadata.annotations or {}).get("a")


def test_a_selective_watch_sees_objects_leave_and_enter_its_selection(batch, ns):
    # As the watch cache: leaving the selection is a DELETED carrying the last matching state,
    # entering it an ADDED; changes outside the selection are not sent.
    got: list[tuple[str, str, str | None]] = []
    rvs: list[int] = []
    w = kubernetes.watch.Watch()
    rv = batch.list_namespaced_job(ns).metadata.resource_version
    threading.Thread(target=_selection_changes, args=(batch, ns), daemon=True).start()
    for e in w.stream(batch.list_namespaced_job, ns, label_selector="app=x", resource_version=rv,
                      timeout_seconds=5):
        got.append(_seen(e))
        rvs.append(int(e["object"].metadata.resource_version))
        if len(got) == len(SELECTION_EVENTS):
            w.stop()
    assert got == SELECTION_EVENTS
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)  # DELETED is at the leaving change's rv
    stored = batch.read_namespaced_job("sel", ns).metadata.resource_version
    assert rvs[-1] == int(stored)


def test_a_selective_watch_from_history_replays_the_same_transitions(batch, ns):
    rv = batch.list_namespaced_job(ns).metadata.resource_version
    _selection_changes(batch, ns)
    got = [_seen(e) for e in kubernetes.watch.Watch().stream(
        batch.list_namespaced_job, ns, label_selector="app=x", resource_version=rv, timeout_seconds=1)]
    assert got == SELECTION_EVENTS
    outside = [_seen(e) for e in kubernetes.watch.Watch().stream(
        batch.list_namespaced_job, ns, label_selector="app=y", resource_version=rv, timeout_seconds=1)]
    assert outside == [("ADDED", "y", "1"), ("MODIFIED", "y", "2"), ("DELETED", "y", "2")]
