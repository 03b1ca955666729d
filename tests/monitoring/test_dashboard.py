"""deploy/monitoring/grafana-dashboard.json: every panel queries metrics the worker exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.monitoring.exported import exported, metric_names

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "grafana-dashboard.json"


def panels() -> list[dict[str, Any]]:
    return [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def test_every_panel_queries_only_metrics_the_worker_exports() -> None:
    for panel in panels():
        assert panel["targets"], f"{panel['title']}: no query"
        for target in panel["targets"]:
            names = metric_names(target["expr"])
            assert names, f"{panel['title']}: no metric in {target['expr']!r}"
            unknown = {n for n in names if not exported(n)}
            assert not unknown, f"{panel['title']}: {unknown}"


def test_the_check_catches_a_metric_the_worker_does_not_export() -> None:
    assert not exported("batchd_cronjob_missed_schedules_total")
    assert not exported("process_open_sockets") and not exported("batchd_memory_used_bytes")
    assert exported("batchd_ttl_deletions_total") and exported("temporal_worker_task_slots_available")
    assert exported("process_resident_memory_bytes") and exported("batchd_memory_limit_bytes")


def test_the_panels_an_operator_opens_first_are_there() -> None:
    queried = {n for p in panels() for t in p["targets"] for n in metric_names(t["expr"])}
    for name in ("cronjob_controller_cronjob_job_creation_skew_duration_seconds_bucket",
                 "job_controller_jobs_finished_total", "batchd_ttl_pending_timers", "batchd_ttl_deletions_total",
                 "job_controller_job_syncs_total", "job_controller_job_pods_creation_total",
                 "temporal_workflow_task_execution_latency_milliseconds_bucket",
                 "temporal_workflow_task_execution_failed_total", "temporal_worker_task_slots_available",
                 "process_resident_memory_bytes"):
        assert name in queried


def test_panels_do_not_overlap_and_have_unique_ids() -> None:
    every = json.loads(DASHBOARD.read_text())["panels"]
    assert len({p["id"] for p in every}) == len(every)
    cells = set()
    for p in every:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps another panel"
                cells.add((x, y))
