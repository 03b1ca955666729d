"""The CLI's update path (worker/commands.py), against a fake client: what it retries and what it does not."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from google.protobuf.any_pb2 import Any as AnyProto
from temporalio.api.common.v1 import GrpcStatus
from temporalio.service import RPCError, RPCStatusCode

from worker import commands


def refused(status: RPCStatusCode, detail: str) -> RPCError:
    grpc = GrpcStatus(code=int(status), message="refused",
                      details=[AnyProto(type_url=f"type.googleapis.com/temporal.api.errordetails.v1.{detail}")])
    return RPCError("refused", status, grpc.SerializeToString())


class Handle:
    def __init__(self, failures: list[RPCError]) -> None:
        self.failures, self.ids = failures, []

    async def execute_update(self, update: str, arg: Any, *, id: str) -> dict[str, Any]:  # noqa: A002
        self.ids.append(id)
        if self.failures:
            raise self.failures.pop(0)
        return {"jobName": "tick-1"}


class Client:
    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def get_workflow_handle(self, wid: str) -> Handle:
        return self.handle


def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    sleep = asyncio.sleep
    monkeypatch.setattr(asyncio, "sleep", lambda _seconds: sleep(0))


def run(handle: Handle) -> str:
    return asyncio.run(commands.cronjob_update(Client(handle), "ns", "tick", "trigger", output="json"))  # type: ignore[arg-type]


def test_an_update_refused_as_not_ready_is_sent_again_with_the_same_id(monkeypatch: pytest.MonkeyPatch) -> None:
    no_wait(monkeypatch)
    handle = Handle([refused(RPCStatusCode.FAILED_PRECONDITION, "WorkflowNotReadyFailure")] * 2)
    assert json.loads(run(handle))["result"] == {"jobName": "tick-1"}
    assert len(handle.ids) == 3 and len(set(handle.ids)) == 1


def test_other_refusals_and_a_lasting_one_are_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    no_wait(monkeypatch)
    handle = Handle([refused(RPCStatusCode.FAILED_PRECONDITION, "OtherFailure")])
    with pytest.raises(RPCError):
        run(handle)
    assert len(handle.ids) == 1
    handle = Handle([refused(RPCStatusCode.FAILED_PRECONDITION, "WorkflowNotReadyFailure")] * commands.UPDATE_ATTEMPTS)
    with pytest.raises(RPCError):
        run(handle)
    assert len(handle.ids) == commands.UPDATE_ATTEMPTS


@pytest.mark.parametrize(("key", "label"), [
    ("nextScheduleTime", "Next Schedule Time"), ("failuresInARow", "Failures In A Row"),
    ("uid", "Uid"), ("lastFailedJob", "Last Failed Job"), ("armedFor", "Armed For"),
    ("resource_version", "Resource Version"), ("held_by", "Held By"),
])
def test_describe_labels_fields_in_words(key: str, label: str) -> None:
    assert commands._label(key) == label


def test_describe_aligns_a_blocks_values_past_its_longest_label() -> None:
    lines = commands._described({"phase": "Sleeping", "failuresSinceLastSuccess": 0,
                                 "window": {"activeFrom": "2026-01-01T00:00:00Z"}}, 4)
    assert lines == ["    Phase:                       Sleeping",
                     "    Failures Since Last Success: 0",
                     "    Window:",
                     "      Active From:          2026-01-01T00:00:00Z"]  # a block of its own: column 28
