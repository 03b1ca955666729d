"""Tier 4: upstream's ``job_controller_*`` metrics (POL-48 to POL-56) and batchd's
``batchd_cronjob_runs_total`` on a real worker's /metrics.

The in-process workers of the integration tests use the SDK's default runtime, whose metric meter
records nowhere; only the ``batchd worker`` process wires ``workflow.metric_meter()`` into its
Prometheus registry. So: one worker process, four Jobs run on kubesim's fake kubelet and one
CronJob triggered, /metrics scraped before and after, and the deltas asserted — names,
exact label sets and values.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from temporalio.testing import WorkflowEnvironment

from kube.client import Kube
from tests.conftest import eventually, workflow_exists
from tests.e2e.test_worker_process import http_get, ready, worker_process
from tests.integration.test_cronjob import cronjob_manifest
from tests.integration.test_job import job_manifest
from worker.commands import cronjob_update
from worker.dev import free_port
from workflows.identity import cronjob_workflow_id, job_workflow_id
from workflows.jobmetrics import METRICS, SYNC_DURATION_BUCKETS

Sample = tuple[str, tuple[tuple[str, str], ...]]
LABELS = {m.name: set(m.labels) for m in METRICS}


def scrape(port: int) -> dict[Sample, float]:
    """The job_controller_* and batchd_cronjob_runs samples on /metrics, keyed by (name, sorted labels)."""
    status, body = http_get(port, "/metrics")
    assert status == 200
    out: dict[Sample, float] = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            if s.name.startswith(("job_controller_", "batchd_cronjob_runs")):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def delta(before: dict[Sample, float], after: dict[Sample, float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def runs_moved(before: dict[Sample, float], after: dict[Sample, float]) -> dict[tuple[str, str], float]:
    """``batchd_cronjob_runs_total`` series that moved, by (outcome, source); the workflow's meter adds
    its own labels (namespace, task queue, workflow type) beside them."""
    moved: dict[tuple[str, str], float] = defaultdict(float)
    for key, value in after.items():
        if key[0] == "batchd_cronjob_runs_total" and value != before.get(key, 0.0):
            labels = dict(key[1])
            moved[(labels["outcome"], labels["source"])] += value - before.get(key, 0.0)
    return dict(moved)


def jobs() -> list[dict[str, Any]]:
    done = job_manifest("done", completions=2, parallelism=2)
    fatal = job_manifest("fatal", exit_code=42)
    fatal["spec"]["podFailurePolicy"] = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    per_index = job_manifest("perindex", completions=3, parallelism=3, indexed=True)
    per_index["spec"]["backoffLimitPerIndex"] = 0
    per_index["spec"]["template"]["metadata"]["annotations"]["kubesim.batchd.io/fail-indexes"] = "1"
    crash = job_manifest("crash", exit_code=1, backoff_limit=0)
    return [done, fatal, per_index, crash]


async def test_job_controller_metrics_count_each_job_and_pod_once_with_upstreams_labels(
    temporal_env: WorkflowEnvironment, kube: Kube, worker_kubeconfig: Path, namespace: str, task_queue: str,
    tmp_path: Path,
) -> None:
    health = free_port()
    client = temporal_env.client
    with worker_process(temporal_env, worker_kubeconfig, namespace, task_queue, tmp_path / "worker.log", health):
        await ready(health)
        # a CronJob never due, run by hand: each run a ledger entry, counted by the workflow's meter
        kube.create("CronJob", namespace, cronjob_manifest("yearly", "0 0 1 1 *"))
        await eventually(lambda: workflow_exists(client, cronjob_workflow_id(namespace, "yearly")), what="CronJob workflow")
        before = scrape(health)
        await cronjob_update(client, namespace, "yearly", "trigger", output="json")
        created = [kube.create("Job", namespace, m) for m in jobs()]
        outcomes = {}
        for job in created:
            wid = job_workflow_id(namespace, job["metadata"]["name"], job["metadata"]["uid"])
            await eventually(lambda wid=wid: workflow_exists(client, wid), what=f"workflow {wid}")
            outcomes[job["metadata"]["name"]] = await asyncio.wait_for(client.get_workflow_handle(wid).result(), 90)
        assert outcomes == {"done": "Complete", "fatal": "Failed", "perindex": "Failed", "crash": "Failed"}

        last: list[dict[Sample, float]] = []

        def settled() -> dict[Sample, float] | None:
            """The counts every finished Job and Pod adds, then no change between two scrapes.

            The runtime forwards the SDK's metric buffer every second, and a workflow's last sync
            sample can be forwarded a second after its ``jobs_finished`` one; the finalizers' deletes
            come from the Pod informer, which may lag the workflows' results.
            """
            now = scrape(health)
            gone = delta(before, now, "job_controller_terminated_pods_tracking_finalizer_total", event="delete")
            finished = sum(delta(before, now, "job_controller_jobs_finished_total", **dict(k[1]))
                           for k in now if k[0] == "job_controller_jobs_finished_total")
            runs = sum(runs_moved(before, now).values())
            assert gone >= 7 and finished >= 4 and runs >= 1, \
                f"forwarded: {gone} of 7 finalizer deletes, {finished} of 4 Jobs, {runs} of 1 run"
            steady = last == [now]
            last[:] = [now]
            return now if steady else None

        after = await eventually(settled, timeout=60, interval=2.5, what="metrics forwarded and steady")
        text = http_get(health, "/metrics")[1]
        (tmp_path / "metrics.txt").write_text(text)  # kept by pytest for a look after a failure

    d = lambda name, **labels: delta(before, after, name, **labels)  # noqa: E731
    # POL-51: one per finished Job, with the condition's reason
    assert d("job_controller_jobs_finished_total", completion_mode="NonIndexed", result="succeeded",
             reason="CompletionsReached") == 1
    assert d("job_controller_jobs_finished_total", completion_mode="NonIndexed", result="failed",
             reason="PodFailurePolicy") == 1
    assert d("job_controller_jobs_finished_total", completion_mode="NonIndexed", result="failed",
             reason="BackoffLimitExceeded") == 1
    assert d("job_controller_jobs_finished_total", completion_mode="Indexed", result="failed",
             reason="FailedIndexes") == 1
    # POL-52: every Pod finished once
    assert d("job_controller_job_pods_finished_total", completion_mode="NonIndexed", result="succeeded") == 2
    assert d("job_controller_job_pods_finished_total", completion_mode="NonIndexed", result="failed") == 2
    assert d("job_controller_job_pods_finished_total", completion_mode="Indexed", result="succeeded") == 2
    assert d("job_controller_job_pods_finished_total", completion_mode="Indexed", result="failed") == 1
    # POL-53, POL-55, POL-56
    assert d("job_controller_pod_failures_handled_by_failure_policy_total", action="FailJob") == 1
    assert d("job_controller_job_finished_indexes_total", status="succeeded", backoffLimit="perIndex") == 2
    assert d("job_controller_job_finished_indexes_total", status="failed", backoffLimit="perIndex") == 1
    assert d("job_controller_job_pods_creation_total", reason="new", status="succeeded") == 7
    assert d("job_controller_job_pods_creation_total", reason="new", status="failed") == 0
    # POL-54: each of the 7 Pods entered "finished with the finalizer" once and left it once
    assert d("job_controller_terminated_pods_tracking_finalizer_total", event="add") == 7
    assert d("job_controller_terminated_pods_tracking_finalizer_total", event="delete") == 7
    # CJ-LEDGER: each run once, under its own outcome and source, and no other series moved
    assert runs_moved(before, after) == {("created", "trigger"): 1.0}
    # POL-49, POL-50: one sample per sync of a live Job, the histogram's count equal to the counter's
    syncs: dict[tuple[str, str, str], float] = defaultdict(float)
    for (name, labels), _ in after.items():
        if name == "job_controller_job_syncs_total":
            lab = dict(labels)
            syncs[(lab["completion_mode"], lab["result"], lab["action"])] = d(name, **lab)
            assert d("job_controller_job_sync_duration_seconds_count", **lab) == d(name, **lab)
    assert syncs[("NonIndexed", "success", "pods_created")] >= 3  # done, fatal, crash: first syncs
    assert syncs[("Indexed", "success", "pods_created")] >= 1
    # Each NonIndexed Job has a sync after its first that creates nothing: the one that meets its
    # finished Pods. Whether that sync is "tracking" or "reconciling" depends on which Pod events
    # one sync takes in at once (a loaded machine coalesces more), so only their sum is fixed.
    assert syncs[("NonIndexed", "success", "tracking")] + syncs[("NonIndexed", "success", "reconciling")] >= 3
    # POL-48: upstream's label sets exactly (the runtime's namespace/task_queue/workflow_type/service dropped)
    for (name, labels), _ in after.items():
        if not name.startswith("job_controller_"):
            continue
        base = name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")
        assert {k for k, _ in labels} - {"le"} == LABELS[base], (name, labels)
    les = sorted({float(dict(labels)["le"]) for (name, labels) in after if name.startswith("job_controller_")
                  and name.endswith("_seconds_bucket")})
    assert les[:-1] == list(SYNC_DURATION_BUCKETS) and les[-1] == float("inf")
    assert "# TYPE job_controller_job_sync_duration_seconds histogram" in text
    assert "# TYPE job_controller_job_syncs_total counter" in text
