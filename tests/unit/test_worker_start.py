"""A starting worker waits out a Temporal frontend that is briefly away, and gives up on one
that stays away (worker/app.py ``_connect_while_starting``); its workflow sandbox compiles each
call snippet once and keeps no completion between activations, its payloads skip the per-command
context lookup that nothing reads, a workflow instance makes its
random generator only when asked for one, every workflow shares one set of payload encodings,
and ``--sticky-wait`` reaches its main worker (worker/temporal.py); the worker gives large freed
blocks back to the system at once (worker/temporal.py)."""

from __future__ import annotations

import builtins
import ctypes
import dataclasses
import inspect
import random
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from click.testing import CliRunner
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import (
    CompositePayloadConverter,
    PayloadCodec,
    WorkflowSerializationContext,
)
from temporalio.worker import _workflow as workflow_worker
from temporalio.worker import _workflow_instance as workflow_instance
from temporalio.worker.workflow_sandbox import _runner

from worker import app, cli, temporal
from worker.temporal import TemporalSettings
from workflows.models.cronjob import CronJobObservation, CronJobState
from workflows.ttl import TTLAfterFinishedWorkflow


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


def test_a_sandboxed_workflow_keeps_no_completion_between_activations() -> None:
    # The SDK's activate() runs the snippet that sets both; a stand-in for it here.
    workflow = SimpleNamespace(_current_completion=WorkflowActivationCompletion())

    def run_code(code: str, **extra_globals: Any) -> None:
        workflow._current_completion = instance.globals_and_locals["__temporal_completion"] = \
            WorkflowActivationCompletion(run_id=f"done {extra_globals['__temporal_activation']}")

    instance = SimpleNamespace(
        globals_and_locals={"__temporal_in_sandbox": SimpleNamespace(instance=workflow)}, _run_code=run_code,
        importer=SimpleNamespace(restriction_context=SimpleNamespace(is_runtime=False, in_activation=False)))
    returned = _runner._Instance.activate(instance, "act")  # type: ignore[arg-type]
    assert returned.run_id == "done act"
    # let go, and an empty one in its place for an evicted workflow's late timer cancellations
    assert workflow._current_completion is not returned
    assert workflow._current_completion == WorkflowActivationCompletion()
    workflow._current_completion.successful.commands.add()


def test_a_workflow_instance_keeps_nothing_of_its_first_activation() -> None:
    # A part of a decoded message kept keeps the whole activation, the workflow's argument included
    act = WorkflowActivation(run_id="run")
    init = act.jobs.add().initialize_workflow
    init.workflow_type, init.workflow_id, init.attempt = "W", "w", 1
    init.arguments.add(metadata={"encoding": b"json/plain"}, data=b'"' + b"x" * 20_000 + b'"')
    init.headers["trace"].data = b"h"
    init.memo.fields["memo"].data = b'"m"'
    init.last_completion_result.payloads.add(data=b'"last"')
    defn = SimpleNamespace(sandboxed=False, name="W", arg_types=[str], cls=object, run_fn=None)
    worker = SimpleNamespace(
        _workflows={"W": defn}, _dynamic_workflow=None, _namespace="default", _task_queue="q",
        _data_converter=temporal.DATA_CONVERTER, _interceptor_classes=[], _extern_functions={},
        _disable_eager_activity_execution=True, _workflow_failure_exception_types=[],
        _patch_activation_callback=None, _default_workflow_logic_flags=set(),
        _unsandboxed_workflow_runner=SimpleNamespace(create_instance=lambda det: det))
    det = workflow_worker._WorkflowWorker._create_workflow_instance(worker, act, init)  # type: ignore[arg-type]
    instance = SimpleNamespace(_defn=defn, _workflow_context_payload_converter=temporal.DATA_CONVERTER.payload_converter,
                               _convert_payloads=lambda payloads, types, conv: conv.from_payloads(payloads, types))
    made = workflow_instance._WorkflowInstanceImpl._make_workflow_input(instance, init)  # type: ignore[arg-type]
    assert made.args == ["x" * 20_000]  # decoded from the activation itself
    for part in (init.headers["trace"], init.memo.fields["memo"], init.last_completion_result.payloads[0]):
        part.data = b"changed"  # what still shares the activation's arena sees this
    assert det.info.headers["trace"].data == made.headers["trace"].data == b"h"
    assert det.info.raw_memo["memo"].data == b'"m"'
    assert det.last_completion_result.payloads[0].data == b'"last"'


def test_a_workflow_instance_makes_its_random_generator_only_when_asked_and_draws_the_same() -> None:
    # The SDK makes a 2.5 KiB generator per instance, seeded with what it records as _current_seed
    init = inspect.getsource(workflow_instance._WorkflowInstanceImpl.__init__)
    assert "self._random = random.Random(det.randomness_seed)" in init
    assert "self._current_seed = det.randomness_seed" in init
    impl = workflow_instance._WorkflowInstanceImpl
    wf: Any = object.__new__(impl)
    wf._random, wf._current_seed = random.Random(7), 7  # as its __init__ does
    wf._read_only, wf._deleting, wf._seed_callbacks = False, False, []
    assert wf.__dict__["_random_made"] is None  # no generator kept until one is asked for
    impl._apply_update_random_seed(wf, SimpleNamespace(randomness_seed=9))
    expected = random.Random(9)
    assert [wf.workflow_random().random() for _ in range(3)] == [expected.random() for _ in range(3)]
    drawn = wf.workflow_random().random()
    impl._apply_update_random_seed(wf, SimpleNamespace(randomness_seed=11))  # reseeds the one in use
    assert wf.workflow_random().random() == random.Random(11).random() != drawn


def test_every_workflow_shares_one_pydantic_encoding() -> None:
    # The SDK makes a payload converter per workflow instance; the pydantic encoding's cache of
    # TypeAdapters was then built again in each (docs/benchmarks.md)
    first, second = (temporal.DATA_CONVERTER.payload_converter_class() for _ in range(2))
    assert isinstance(first, CompositePayloadConverter) and isinstance(second, CompositePayloadConverter)
    assert first is not second and first.converters[b"json/plain"] is second.converters[b"json/plain"]
    state = CronJobState(observation=CronJobObservation(namespace="ns", name="cj", lead_seconds=60.0))
    assert second.from_payloads(first.to_payloads([state]), [CronJobState]) == [state]


class _NoContextHere:
    """A workflow instance whose contexts no one may ask for."""

    def get_serialization_context(self, command_info: Any) -> Any:
        raise AssertionError("asked for a serialization context")

    get_external_store_context = get_serialization_context


class _Reversing(PayloadCodec):
    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload(metadata=p.metadata, data=p.data[::-1]) for p in payloads]

    decode = encode


async def test_payloads_skip_the_command_context_lookup_only_when_nothing_reads_it() -> None:
    # The SDK asks the workflow, inside its sandbox, for a context per payload sequence; without
    # a codec or external storage nothing reads it (docs/benchmarks.md)
    ctx = WorkflowSerializationContext(namespace="default", workflow_id="w")
    plain = temporal.DATA_CONVERTER.with_context(ctx)
    made = workflow_worker._CommandAwareDataConverter.create(
        instance=_NoContextHere(), context_free_dc=temporal.DATA_CONVERTER, workflow_context_dc=plain,  # type: ignore[arg-type]
        workflow_context=ctx)
    assert made is plain
    payload = made.payload_converter.to_payloads(["x"])[0]
    assert await made._encode_payload_sequence([payload]) == [payload]
    assert await made._external_store_payload_sequence([payload]) == [payload]
    assert await made._decode_reference_payload_sequence([payload]) == [payload]

    coded = dataclasses.replace(temporal.DATA_CONVERTER, payload_codec=_Reversing())
    aware = workflow_worker._CommandAwareDataConverter.create(
        instance=_NoContextHere(), context_free_dc=coded, workflow_context_dc=coded.with_context(ctx),  # type: ignore[arg-type]
        workflow_context=ctx)
    assert isinstance(aware, workflow_worker._CommandAwareDataConverter)  # a codec may read the context
    with pytest.raises(AssertionError, match="serialization context"):
        await aware._encode_payload_sequence([payload])


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def test_large_blocks_go_back_to_the_system_when_freed() -> None:
    # glibc would raise its mmap threshold past ``size`` on the first free below, and put the next
    # large block in a heap that it gives back only in part and later (docs/benchmarks.md: the peak)
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("not glibc")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = _MallInfo2
    assert temporal.return_large_blocks_at_once()
    size = max(16 << 20, libc.mallinfo2().fordblks + (1 << 20))  # more than the heaps' free space
    libc.free(libc.malloc(size + (8 << 20)))
    mapped = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    try:
        assert libc.mallinfo2().hblkhd >= mapped + size  # mapped for itself, so unmapped when freed
    finally:
        libc.free(block)


def test_the_sticky_wait_flag_reaches_the_main_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # A workflow task waits this long for the worker's cache before any worker replays it: the
    # SDK's 10 s by default (failover), 60 s for 2,000 CronJobs on one minute (docs/benchmarks.md)
    settings: list[app.WorkerSettings] = []
    codes: list[int] = []

    async def run(given: app.WorkerSettings) -> None:
        settings.append(given)

    monkeypatch.setattr(app, "run", run)
    monkeypatch.setattr(cli, "exit_flushed", codes.append)
    for args in ([], ["--sticky-wait", "60s"]):
        result = CliRunner().invoke(cli.main, ["worker", *args])
        assert result.exit_code == 0, result.output
    assert [s.sticky_wait for s in settings] == [10, 60] and codes == [0, 0]

    made: list[dict[str, Any]] = []
    monkeypatch.setattr(temporal, "Worker", lambda *a, **kw: made.append(kw))
    temporal.build_workers(mock.Mock(), mock.Mock(), sticky_wait=timedelta(seconds=5))
    main, timed, ttl = made
    assert main["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=5)
    assert "workflows" not in timed  # the timed worker runs activities only: no workflow tasks
    # the TTL workflows' sleepers stay out of the main cache, in a small one of their own
    assert (ttl["task_queue"], ttl["workflows"], ttl["max_cached_workflows"]) == (
        "batchd-ttl", [TTLAfterFinishedWorkflow], temporal.TTL_CACHED_WORKFLOWS)
    assert ttl["activities"] == main["activities"] and ttl["activity_executor"] is main["activity_executor"]
    # readiness asks the server for pollers on each of them, by the kinds of task each polls
    WORKFLOW, ACTIVITY = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
    assert sorted(temporal.polled_queues()) == sorted(
        (w["task_queue"], kind) for w in made for kind, key in ((WORKFLOW, "workflows"), (ACTIVITY, "activities"))
        if w.get(key))


def test_a_backoff_doubles_to_its_cap_and_starts_again_after_a_success() -> None:
    from datetime import timedelta

    from workflows.policies import Backoff

    seconds = Backoff(0.5, 3.0)
    assert [seconds.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    seconds.reset()
    assert seconds.next() == 0.5
    delta = Backoff(timedelta(seconds=10), timedelta(minutes=5))
    assert [delta.next().total_seconds() for _ in range(7)] == [10, 20, 40, 80, 160, 300, 300]


def test_the_memory_limit_is_read_from_cgroup_v2_then_v1_and_none_is_no_limit(tmp_path: Path) -> None:
    from worker.telemetry import memory_limit

    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    assert memory_limit((v2, v1)) is None  # neither file: not in a cgroup we know
    v1.write_text("671088640\n")
    assert memory_limit((v2, v1)) == 671088640
    v1.write_text("9223372036854771712\n")  # v1's "no limit", 2**63 rounded down to a page
    assert memory_limit((v2, v1)) is None
    v2.write_text("max\n")
    assert memory_limit((v2, v1)) is None  # v2 without a limit; v1 is not read then
    v2.write_text("536870912\n")
    assert memory_limit((v2, v1)) == 536870912
