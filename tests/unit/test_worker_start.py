"""A starting worker waits out a Temporal frontend that is briefly away, and gives up on one
that stays away (worker/app.py ``_connect_while_starting``); its workflow sandbox compiles each
call snippet once (worker/temporal.py)."""

from __future__ import annotations

import builtins
import uuid
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from temporalio.worker.workflow_sandbox import _runner

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


def test_the_sandbox_compiles_each_call_snippet_once() -> None:
    instance = SimpleNamespace(globals_and_locals={}, _current_thread_id=None)
    source = f"result_{uuid.uuid4().hex} = __value + 1\n"  # never compiled before in this process
    with mock.patch.object(builtins, "compile", wraps=builtins.compile) as compiling:
        for value in (1, 2):
            _runner._Instance._run_code(instance, source, __value=value)
            assert instance.globals_and_locals.pop(source.split()[0]) == value + 1
    assert compiling.call_count == 1
    assert "__value" not in instance.globals_and_locals  # the SDK's own clean-up still runs
