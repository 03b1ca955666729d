"""deploy/monitoring's alerts and recording rules: promtool, the PrometheusRule and the metrics they name.

promtool (Debian's ``prometheus`` package, installed by .ci/run) checks the rules and runs the
unit tests of rules_test.yaml. Without it these tests fail: skipping would let rules that no
Prometheus loads pass CI.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.monitoring.exported import exported, metric_names

HERE = Path(__file__).resolve().parent
MONITORING = HERE.parents[1] / "deploy" / "monitoring"
RULES = MONITORING / "rules.yaml"
UNIT_TESTS = HERE / "rules_test.yaml"
OPERATIONS = HERE.parents[1] / "docs" / "operations.md"



def _load_generate() -> Any:
    """deploy/monitoring/generate.py, a script rather than a package module."""
    spec = importlib.util.spec_from_file_location("batchd_monitoring_generate", MONITORING / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load_generate()


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: install Debian's prometheus package "
                    "(apt-get install -y --no-install-recommends prometheus), as .ci/run does")
    return path


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=60)


def rules() -> list[dict[str, Any]]:
    return [rule for group in generate.load_groups() for rule in group["rules"]]


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def test_promtool_accepts_the_rules() -> None:
    result = run_promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass() -> None:
    result = run_promtool("test", "rules", str(UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_renamed_metric_fails_the_unit_tests(tmp_path: Path) -> None:
    """The unit tests feed the real names: rules that select another name see no series."""
    renamed = RULES.read_text().replace("temporal_workflow_task_execution_failed_total", "temporal_wft_failed_total")
    (tmp_path / "rules.yaml").write_text(renamed)
    unit = UNIT_TESTS.read_text().replace("../../deploy/monitoring/rules.yaml", "rules.yaml")
    (tmp_path / "rules_test.yaml").write_text(unit)
    result = run_promtool("test", "rules", str(tmp_path / "rules_test.yaml"))
    assert result.returncode != 0
    assert "BatchdWorkflowTaskFailing" in result.stdout + result.stderr


def test_every_alert_fires_in_one_unit_test_and_stays_silent_in_another() -> None:
    fired: set[str] = set()
    silent: set[str] = set()
    for case in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fired if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {rule["alert"] for rule in alerts()}
    assert names - fired == set(), "alerts never seen firing"
    assert names - silent == set(), "alerts never seen silent"


def test_the_prometheusrule_holds_the_same_groups_as_the_plain_file() -> None:
    committed = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert committed == generate.prometheus_rule(generate.load_groups())
    assert committed["apiVersion"] == "monitoring.coreos.com/v1" and committed["kind"] == "PrometheusRule"
    assert (MONITORING / "prometheusrule.yaml").read_text() == generate.render(committed), \
        "prometheusrule.yaml is stale: run python deploy/monitoring/generate.py"


def test_a_runbook_base_rewrites_every_runbook_url() -> None:
    groups = generate.with_runbook_base(generate.load_groups(), "https://docs.example.com/operations.html")
    urls = [r["annotations"]["runbook_url"] for g in groups for r in g["rules"] if "alert" in r]
    assert urls and all(u.startswith("https://docs.example.com/operations.html#") for u in urls)


def test_every_rule_names_only_metrics_the_worker_exports() -> None:
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    for rule in rules():
        unknown = {n for n in metric_names(rule["expr"]) if n not in recorded and not exported(n)}
        assert not unknown, f"{rule.get('alert') or rule.get('record')}: {unknown}"


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of ``markdown``."""
    anchors = set()
    for line in markdown.splitlines():
        if m := re.match(r"#+\s+(.*)", line):
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("alert", [a["alert"] for a in alerts()])
def test_each_alert_has_a_severity_and_a_runbook_section(alert: str) -> None:
    rule = next(a for a in alerts() if a["alert"] == alert)
    assert rule["labels"]["severity"] in {"warning", "critical"}
    url = rule["annotations"]["runbook_url"]
    assert url == f"docs/operations.md#{alert.lower()}"
    assert alert.lower() in github_anchors(OPERATIONS.read_text()), f"no section {alert} in docs/operations.md"
