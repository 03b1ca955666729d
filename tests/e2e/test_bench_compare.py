"""Tier 4: `python -m bench.compare` at a tiny size, batchd's phase on the Temporal server on
PostgreSQL (a smoke test: the bench prints, never asserts; this checks that each phase did its work,
that the table and its JSON are whole, and that nothing is left running)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require, temporal_server_missing

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_bench_compare_runs_upstream_and_batchd_on_one_control_plane(tmp_path: Path) -> None:
    require(temporal_server_missing(), "make upstream; apt-get install postgresql-15")
    out = tmp_path / "compare.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.compare", "--workloads", "job,ttl", "--completions", "4", "--parallelism", "2",
         "--ttl-jobs", "3", "--ttl-spread", "4", "--upstream-qps", "100/200", "--temporal", "postgres", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert all(set(r) == {"workload", "size", "figure", "upstream", "batchd", "ratio"} for r in rows)
    by = {(r["workload"], r["figure"]): r for r in rows}
    deleted = by[("ttl", "Jobs deleted [100/200 vs postgres]")]
    assert deleted["upstream"] == deleted["batchd"] == 3
    requests = by[("job", "API requests per Pod [100/200 vs postgres]")]
    assert requests["upstream"] > 0 and requests["batchd"] > 0  # each controller's own identity, audited
    assert all(by[("job", f"CPU-s per Pod: {role} [postgres]")]["batchd"] > 0 for role in ("worker", "Temporal", "PostgreSQL"))
    assert "API requests per Pod [100/200 vs postgres]" in done.stdout  # the printed table
    state = done.stdout.split("state in ", 1)[1].split()[0]
    audit = (Path(state) / "plane" / "logs" / "audit.log").read_text()
    assert '"name":"kube-controller-manager"' in audit  # elected as it ships: its Lease is counted as batchd's is
    assert not _running_in(state), "the bench left processes running"


def _running_in(path: str) -> list[str]:
    """Command lines of the processes that name ``path`` (the control plane's, the Temporal server's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if path in cmdline:
                found.append(cmdline)
    return found
