"""Tier 4: a real Prometheus scrapes a real ``batchd worker`` and an alert of rules.yaml fires.

Prometheus scrapes the worker (against a kubesim of its own) until ``BatchdWorkerAbsent``, which
fires while nothing has been scraped yet, has resolved; then the worker is SIGKILLed and the alert
must fire again. The rules are rules.yaml's with their windows and ``for`` shortened (a test-only
copy), so the expressions are the shipped ones. The same scrape checks that every sample the
worker serves is a name tests/monitoring/exported.py derives from the code. Prometheus comes
from Debian's ``prometheus`` package, as promtool does; without it this fails.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from temporalio.testing import WorkflowEnvironment

from tests.conftest import eventually
from tests.e2e.test_worker_process import http_get, ready, worker_process
from tests.monitoring.exported import exported
from worker.dev import free_port

RULES = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "rules.yaml"


def short_rules(text: str) -> str:
    """rules.yaml with every range at 20 s and every ``for`` at 3 s, for a 1 s scrape."""
    doc = yaml.safe_load(text)
    for group in doc["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            rule["expr"] = re.sub(r"\[\d+[smh]\]", "[20s]", rule["expr"])
            if "for" in rule:
                rule["for"] = "3s"
    return yaml.safe_dump(doc, sort_keys=False)


def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        pytest.fail("prometheus not found: install Debian's prometheus package, as .ci/run does")
    return path


def alerts(port: int) -> dict[str, str]:
    """Alert name → state (pending, firing) from Prometheus' API."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/alerts", timeout=5) as resp:
        body = json.load(resp)
    return {a["labels"]["alertname"]: a["state"] for a in body["data"]["alerts"]}


def scraped_up(port: int) -> bool:
    url = f"http://127.0.0.1:{port}/api/v1/query?query=up%7Bjob%3D%22batchd%22%7D"
    with urllib.request.urlopen(url, timeout=5) as resp:
        result = json.load(resp)["data"]["result"]
    return bool(result) and result[0]["value"][1] == "1"


@pytest.mark.timeout(150)
async def test_prometheus_fires_batchd_worker_absent_when_the_worker_is_killed(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path,
) -> None:
    from kubesim import KubeSim

    sim = KubeSim(port=free_port()).start()
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    health, web = free_port(), free_port()
    (tmp_path / "rules.yaml").write_text(short_rules(RULES.read_text()))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yaml")],
        "scrape_configs": [{"job_name": "batchd", "static_configs": [{"targets": [f"127.0.0.1:{health}"]}]}],
    }))
    prometheus: subprocess.Popen[bytes] | None = None
    try:
        with worker_process(temporal_env, kubeconfig, "default", task_queue, tmp_path / "worker.log", health) as proc:
            await ready(health)
            with open(tmp_path / "prometheus.log", "wb") as log:
                prometheus = subprocess.Popen(
                    [prometheus_binary(), f"--config.file={tmp_path / 'prometheus.yml'}",
                     f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}"],
                    stdout=log, stderr=subprocess.STDOUT)

            def scraped_and_quiet() -> bool:
                return scraped_up(web) and "BatchdWorkerAbsent" not in alerts(web)

            await eventually(lambda: _ok(scraped_and_quiet), timeout=60, what="the worker scraped, the alert quiet")
            names = {s.name for f in text_string_to_metric_families(http_get(health, "/metrics")[1]) for s in f.samples}
            assert {"target_info", "temporal_worker_task_slots_available", "process_resident_memory_bytes"} <= names
            assert {n for n in names if not exported(n)} == set()
            proc.send_signal(signal.SIGKILL)
            proc.wait()

            def firing() -> bool:
                return alerts(web).get("BatchdWorkerAbsent") == "firing"

            await eventually(lambda: _ok(firing), timeout=60, what="BatchdWorkerAbsent firing")
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        sim.stop()


def _ok(check: Any) -> bool:
    """``check()``, counting a connection refused (Prometheus still starting) as not yet."""
    try:
        return bool(check())
    except OSError:
        return False
