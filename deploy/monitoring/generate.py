"""Write prometheusrule.yaml (the Prometheus Operator's PrometheusRule) from rules.yaml.

rules.yaml is the one source, loadable by a plain Prometheus (``rule_files``) and by promtool;
the PrometheusRule only wraps the same groups for clusters that run the Operator, so it is
generated rather than kept by hand. tests/monitoring checks that the committed file is what
this script writes.

    python deploy/monitoring/generate.py [--runbook-base https://example.com/batchd/docs/operations.md]

``--runbook-base`` replaces the repository-relative ``docs/operations.md`` of every
``runbook_url`` (in the PrometheusRule only; write your own copy of rules.yaml the same way with
``--plain``) with where your docs are published.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "rules.yaml"
TARGET = HERE / "prometheusrule.yaml"
RUNBOOK_DOC = "docs/operations.md"

HEADER = "# Generated from rules.yaml by generate.py: edit rules.yaml, then run generate.py.\n"


def load_groups(path: Path = SOURCE) -> list[dict[str, Any]]:
    """The rule groups of the plain rules file."""
    groups: list[dict[str, Any]] = yaml.safe_load(path.read_text())["groups"]
    return groups


def with_runbook_base(groups: list[dict[str, Any]], base: str | None) -> list[dict[str, Any]]:
    """A copy of ``groups`` whose runbook URLs start with ``base`` instead of docs/operations.md."""
    out = copy.deepcopy(groups)
    if base:
        for group in out:
            for rule in group["rules"]:
                url = rule.get("annotations", {}).get("runbook_url")
                if url and url.startswith(RUNBOOK_DOC):
                    rule["annotations"]["runbook_url"] = base + url[len(RUNBOOK_DOC):]
    return out


def prometheus_rule(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The PrometheusRule holding ``groups``, in batchd's namespace.

    The ``prometheus``/``role`` labels are the ones kube-prometheus' default ruleSelector matches;
    a Prometheus with another selector needs its own labels here.
    """
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "batchd",
            "namespace": "batchd-system",
            "labels": {"app.kubernetes.io/name": "batchd", "prometheus": "k8s", "role": "alert-rules"},
        },
        "spec": {"groups": groups},
    }


def render(doc: dict[str, Any]) -> str:
    return HEADER + yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runbook-base", help="URL that replaces docs/operations.md in runbook_url")
    parser.add_argument("--plain", action="store_true", help="write the plain rules file to stdout instead")
    parser.add_argument("--stdout", action="store_true", help="print the PrometheusRule instead of writing it")
    args = parser.parse_args(argv)
    groups = with_runbook_base(load_groups(), args.runbook_base)
    if args.plain:
        sys.stdout.write(yaml.safe_dump({"groups": groups}, sort_keys=False, width=120, allow_unicode=True))
        return 0
    text = render(prometheus_rule(groups))
    if args.stdout:
        sys.stdout.write(text)
    else:
        TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
