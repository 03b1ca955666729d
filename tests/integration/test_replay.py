"""Determinism: every saved history replays against the current workflow code.

Histories live in tests/histories/*.json (recorded with ``BATCHD_RECORD_HISTORIES=1``). A change
to workflow logic that would break running workflows fails here; such changes need
``workflow.patched()`` and a newly recorded history beside the old ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from worker.temporal import DATA_CONVERTER, WORKFLOWS

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


def test_histories_are_recorded_for_every_workflow_type() -> None:
    recorded = {WorkflowHistory.from_json("x", p.read_text()).events[0]
                .workflow_execution_started_event_attributes.workflow_type.name for p in HISTORIES}
    assert recorded >= {w.__temporal_workflow_definition.name for w in WORKFLOWS}  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_saved_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    # debug_mode: no deadlock detector. This test is about determinism; on a busy machine a first
    # activation (sandbox imports, a zone's first load) may take over the detector's 2 s.
    await Replayer(workflows=WORKFLOWS, data_converter=DATA_CONVERTER,
                   debug_mode=True).replay_workflow(history)
