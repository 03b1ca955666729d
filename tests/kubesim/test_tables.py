"""Server-side Tables: what ``kubectl get`` (and ``get -w``) prints for every served kind, plus
the pure helpers (Accept negotiation, apimachinery's HumanDuration)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kubesim import tables
from tests.kubesim.conftest import Http, eventually, job_body, pod_body

TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------

HUMAN = [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (150, "2m30s"),
    (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"), (3 * 3600 + 60, "3h1m"), (8 * 3600, "8h"),
    (47 * 3600, "47h"), (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"),
    (2 * 365 * 86400, "2y"), (2 * 365 * 86400 + 86400, "2y1d"), (9 * 365 * 86400, "9y"),
]


@pytest.mark.parametrize("seconds,expected", HUMAN, ids=[h[1] + f"@{h[0]}" for h in HUMAN])
def test_human_duration_matches_apimachinery(seconds: int, expected: str) -> None:
    assert tables.human_duration(seconds) == expected


ACCEPTS = [
    ("kubectl's default asks for a v1 Table", TABLE_ACCEPT, "v1"),
    ("only v1beta1", "application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
    ("plain JSON", "application/json", None),
    ("no header", None, None),
    ("JSON preferred over a Table", "application/json,application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ("a Table of another group", "application/json;as=Table;v=v1;g=example.com", None),
]


@pytest.mark.parametrize("accept,expected", [a[1:] for a in ACCEPTS], ids=[a[0] for a in ACCEPTS])
def test_accept_negotiation(accept: str | None, expected: str | None) -> None:
    assert tables.accepts_table(accept) == expected


# --------------------------------------------------------------------------------------------
# Over HTTP
# --------------------------------------------------------------------------------------------


def get_table(http: Http, path: str) -> dict[str, Any]:
    req = urllib.request.Request(http.base + path, headers={"Accept": TABLE_ACCEPT})
    with urllib.request.urlopen(req, timeout=10) as resp:
        body: dict[str, Any] = json.loads(resp.read())
    return body


def test_a_list_table_carries_rows_partial_metadata_and_the_continue_token(http: Http, batch, ns: str) -> None:
    for name in ("a", "b", "c"):
        batch.create_namespaced_job(ns, job_body(name))
    table = get_table(http, f"/apis/batch/v1/namespaces/{ns}/jobs?limit=2")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Status", "Completions", "Duration", "Age"]
    assert [r["cells"][0] for r in table["rows"]] == ["a", "b"]
    assert table["metadata"]["continue"] and table["metadata"]["remainingItemCount"] == 1
    obj = table["rows"][0]["object"]
    assert obj["kind"] == "PartialObjectMetadata" and obj["metadata"]["name"] == "a"
    full = get_table(http, f"/apis/batch/v1/namespaces/{ns}/jobs/a?includeObject=Object")
    assert full["rows"][0]["object"]["spec"]["template"]["spec"]["containers"][0]["name"] == "main"
    bare = get_table(http, f"/apis/batch/v1/namespaces/{ns}/jobs/a?includeObject=None")
    assert "object" not in bare["rows"][0]


def test_without_the_table_accept_header_lists_stay_plain_json(http: Http, batch, ns: str) -> None:
    batch.create_namespaced_job(ns, job_body("plain"))
    assert http.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["kind"] == "JobList"


# --------------------------------------------------------------------------------------------
# The real kubectl
# --------------------------------------------------------------------------------------------


def columns(output: str) -> list[list[str]]:
    """kubectl's table as rows of whitespace-separated words (a cell with spaces spans several)."""
    return [line.split() for line in output.strip().splitlines()]


def test_kubectl_get_jobs_prints_status_completions_duration_and_age(kubectl, batch, ns: str) -> None:
    batch.create_namespaced_job(ns, job_body("running"))
    batch.create_namespaced_job(ns, job_body("done"))
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    stamp = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    finish = (start + timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    batch.patch_namespaced_job_status("done", ns, {"status": {
        "startTime": stamp, "completionTime": finish, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": finish, "lastTransitionTime": finish},
            {"type": "Complete", "status": "True", "lastProbeTime": finish, "lastTransitionTime": finish},
        ]}})
    out = kubectl("get", "jobs", "-n", ns).stdout
    lines = out.strip().splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    rows = {r[0]: r for r in columns(out)[1:]}
    assert rows["done"][1:4] == ["Complete", "1/1", "5s"]
    assert rows["running"][1:3] == ["Running", "0/1"] and len(rows["running"]) == 4  # no duration
    wide = columns(kubectl("get", "jobs", "-n", ns, "-o", "wide").stdout)
    assert wide[0][5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert "busybox:1.36" in wide[1]


def test_kubectl_get_cronjobs_prints_schedule_time_zone_suspend_active_and_last_schedule(
    kubectl, batch, ns: str
) -> None:
    template = {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                                               "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    batch.create_namespaced_cron_job(ns, {"metadata": {"name": "nightly"}, "spec": {
        "schedule": "0 3 * * *", "timeZone": "Europe/Paris", "jobTemplate": template}})
    batch.create_namespaced_cron_job(ns, {"metadata": {"name": "paused"}, "spec": {
        "schedule": "@hourly", "suspend": True, "jobTemplate": template}})
    last = (datetime.now(UTC) - timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    batch.patch_namespaced_cron_job_status("nightly", ns, {"status": {
        "lastScheduleTime": last,
        "active": [{"kind": "Job", "name": "nightly-1", "namespace": ns, "apiVersion": "batch/v1"}]}})
    out = kubectl("get", "cronjobs", "-n", ns).stdout
    header = out.splitlines()[0]
    assert header.split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    assert "LAST SCHEDULE" in header
    rows = {r[0]: r for r in columns(out)[1:]}
    assert rows["nightly"][1:6] == ["0", "3", "*", "*", "*"]
    assert rows["nightly"][6:9] == ["Europe/Paris", "False", "1"]
    # 3m exactly, or 3m1s… when kubectl took its time on a loaded machine
    assert re.fullmatch(r"3m(\d+s)?", rows["nightly"][9]), rows["nightly"][9]
    assert rows["paused"][1:6] == ["@hourly", "<none>", "True", "0", "<none>"]


def test_kubectl_get_namespaces_and_events(kubectl, core, ns: str) -> None:
    out = columns(kubectl("get", "namespaces").stdout)
    assert out[0] == ["NAME", "STATUS", "AGE"]
    assert [ns, "Active"] == next(r for r in out if r[0] == ns)[:2]
    ts = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    core.create_namespaced_event(ns, {
        "metadata": {"name": "e.1"}, "involvedObject": {"kind": "Job", "name": "evj", "namespace": ns},
        "reason": "BadSchedule", "message": "unparseable schedule", "type": "Warning",
        "source": {"component": "batchd"}, "firstTimestamp": ts, "lastTimestamp": ts, "count": 2,
    })
    events = kubectl("get", "events", "-n", ns).stdout.strip().splitlines()
    assert events[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert events[1].split()[1:] == ["Warning", "BadSchedule", "job/evj", "unparseable", "schedule"]


def test_kubectl_get_pods_watch_prints_each_phase(sim_kubeconfig: Path, core, ns: str) -> None:
    # A pod present before the watch makes kubectl print the header and a row from its list;
    # once they are there the watch is open.
    core.create_namespaced_pod(ns, pod_body("before", run_seconds=60))
    lines: list[str] = []
    proc = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(sim_kubeconfig), "get", "pods", "-n", ns, "-w"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        eventually(lambda: any(line.startswith("before ") for line in lines), what="kubectl's list")
        core.create_namespaced_pod(ns, pod_body("w", run_seconds=0.5, exit_code=0))

        def statuses() -> list[str]:
            return [line.split()[2] for line in lines if line.startswith("w ")]

        eventually(lambda: "Completed" in statuses(), what="the pod completing in kubectl's watch")
    finally:
        proc.terminate()
        proc.wait(10)
    seen = statuses()
    assert seen[0] == "Pending" and "Running" in seen and seen[-1] == "Completed", seen
    header = next(line for line in lines if "NAME" in line)
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert sum("NAME" in line for line in lines) == 1  # column definitions once, as upstream
