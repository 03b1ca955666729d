"""Activities implement exactly the declarations of workflows/models/ (activities/contract.py).

The worker checks this when it builds its workers; these tests show what that check refuses.
mypy rejects the mismatched stand-ins below as well (hence their ignores): here the runtime check
is under test.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from temporalio import activity

from activities.contract import IMPLEMENTS, check_implemented, declarations, implements
from kube.client import Kube
from kube.config import Access
from worker.temporal import activities
from workflows.models import cronjob, ttl
from workflows.models.common import ObserveInput
from workflows.models.cronjob import CreateJobInput, CreateJobResult
from workflows.models.ttl import DeleteExpiredInput, TTLObservation

Activity = Callable[..., object]


@pytest.fixture(scope="module")
def registered() -> list[Activity]:
    """What build_workers registers on its task queues (the Kubernetes client never connects)."""
    main, timed = activities(Kube(Access(server="http://127.0.0.1:1")))
    return [*main, *timed]


def without(acts: list[Activity], name: str) -> list[Activity]:
    return [fn for fn in acts if getattr(fn, IMPLEMENTS).__name__ != name]


class StandIns:
    """Implementations that must not pass the check; never run."""

    @implements(ttl.read_ttl_object)  # type: ignore[arg-type]  # the mismatch under test
    def read_wrong_input(self, inp: DeleteExpiredInput) -> TTLObservation:  # declared: ObserveInput
        raise AssertionError("never run")

    @implements(ttl.read_ttl_object)  # type: ignore[arg-type]  # the mismatch under test
    async def read_async(self, inp: ObserveInput) -> TTLObservation:  # declared sync
        raise AssertionError("never run")

    @implements(cronjob.create_cronjob_job_at)  # type: ignore[arg-type]  # the mismatch under test
    def create_sync(self, inp: CreateJobInput) -> CreateJobResult:  # declared async
        raise AssertionError("never run")

    @implements(ttl.read_ttl_object)
    def read_twice(self, inp: ObserveInput) -> TTLObservation:
        raise AssertionError("never run")

    @activity.defn(name="read_ttl_object")
    def read_by_name(self, inp: ObserveInput) -> TTLObservation:
        raise AssertionError("never run")


def test_the_worker_registers_one_implementation_of_every_declaration(registered: list[Activity]) -> None:
    check_implemented(registered)  # build_workers runs it too: raising there stops the worker
    assert sorted(getattr(fn, IMPLEMENTS).__name__ for fn in registered) == sorted(declarations())


def test_every_contract_module_declares_activities() -> None:
    by_module = {fn.__module__ for fn in declarations().values()}
    assert by_module == {f"workflows.models.{m}" for m in ("common", "ttl", "cronjob", "job")}


@pytest.mark.parametrize(("change", "problem"), [
    (lambda acts, s: without(acts, "read_ttl_object"),
     r"activity read_ttl_object \(workflows.models.ttl\) has no implementation"),
    (lambda acts, s: without(acts, "create_cronjob_job_at"),
     r"activity create_cronjob_job_at \(workflows.models.cronjob\) has no implementation"),
    (lambda acts, s: [*without(acts, "read_ttl_object"), s.read_wrong_input],
     r"read_wrong_input implements read_ttl_object as \(DeleteExpiredInput\) -> TTLObservation, "
     r"but it is declared \(ObserveInput\) -> TTLObservation"),
    (lambda acts, s: [*without(acts, "read_ttl_object"), s.read_async],
     r"read_async implements read_ttl_object as async \(ObserveInput\) -> TTLObservation, but it is declared "
     r"\(ObserveInput\)"),
    (lambda acts, s: [*without(acts, "create_cronjob_job_at"), s.create_sync],
     r"create_sync implements create_cronjob_job_at as \(CreateJobInput\) -> CreateJobResult, but it is "
     r"declared async"),
    (lambda acts, s: [*acts, s.read_twice], r"activity read_ttl_object has two implementations"),
    (lambda acts, s: [*without(acts, "read_ttl_object"), s.read_by_name],
     r"read_by_name is registered but implements no declaration"),
], ids=[
    "a declared activity nobody implements",
    "the timed queue's activity left out",
    "an implementation taking another input type",
    "an async implementation of a sync declaration",
    "a sync implementation of an async declaration",
    "two implementations of one declaration",
    "an activity registered by a name string, not through its declaration",
])
def test_the_check_refuses(registered: list[Activity], change: Callable[[list[Activity], StandIns], list[Activity]],
                           problem: str) -> None:
    with pytest.raises(TypeError, match=problem):
        check_implemented(change(registered, StandIns()))
