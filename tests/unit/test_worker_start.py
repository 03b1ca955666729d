"""A starting worker waits out a Temporal frontend that is briefly away, and gives up on one
that stays away (worker/app.py ``_connect_while_starting``)."""

from __future__ import annotations

from typing import Any

import pytest

from worker import app
from worker.temporal import TemporalSettings


def _flaky(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[str]:
    calls: list[str] = []

    async def connect(settings: TemporalSettings, *, runtime: Any = None) -> str:
        calls.append("connect")
        if len(calls) <= failures:
            raise RuntimeError("Failed client connect: connection refused")
        return "client"

    async def ensure(client: Any) -> None:
        calls.append("ensure")

    monkeypatch.setattr(app, "connect", connect)
    monkeypatch.setattr(app, "ensure_search_attributes", ensure)
    return calls


async def test_a_frontend_away_for_a_moment_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _flaky(monkeypatch, failures=3)
    assert await app._connect_while_starting(TemporalSettings(address="127.0.0.1:1"), None, delay=0.01) == "client"
    assert calls == ["connect"] * 4 + ["ensure"]


async def test_a_frontend_that_stays_away_ends_the_process_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _flaky(monkeypatch, failures=10**6)
    with pytest.raises(RuntimeError, match="Failed client connect"):
        await app._connect_while_starting(TemporalSettings(address="127.0.0.1:1"), None, patience=0.5, delay=0.01)
    assert 3 <= calls.count("connect") < 10  # 0.01, 0.02, 0.04 … s apart, until 0.5 s are spent
