"""The one place that builds Temporal clients and workers (tests, ``batchd dev`` and production share it).

Layer: worker. Callers: worker/app.py, worker/cli.py, worker/dev.py, tests/conftest.py.
Every client uses batchd's data converter (pydantic, ``DATA_CONVERTER``); the main worker
registers every batchd workflow and activity on the ``batchd`` task queue (tests pass a unique
queue), a second one the armed CronJob creations on ``batchd-timed``.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import random
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from google.protobuf.message import Message
from temporalio.api.enums.v1 import IndexedValueType, TaskQueueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client, TLSConfig
from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import CompositePayloadConverter, DataConverter
from temporalio.runtime import Runtime
from temporalio.service import RPCError
from temporalio.worker import Worker
from temporalio.worker import _workflow as workflow_worker
from temporalio.worker import _workflow_instance as workflow_instance
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.worker.workflow_sandbox import _runner as sandbox_runner

from activities.contract import check_implemented
from activities.cronjob import CronJobActivities, CronJobCache, GroupActivities
from activities.events import CloudEventActivities, EventActivities
from activities.job import JobActivities, JobPodIndex, JobView
from activities.ttl import TTLActivities
from kube.client import Clock, Kube
from workflows.cronjob import CronJobWorkflow
from workflows.group import CronJobGroupWorkflow
from workflows.identity import SEARCH_ATTRIBUTES, TASK_QUEUE, timed_task_queue, ttl_task_queue
from workflows.job import JobWorkflow
from workflows.ttl import TTLAfterFinishedWorkflow

log = logging.getLogger(__name__)

WORKFLOWS: list[type] = [TTLAfterFinishedWorkflow, CronJobWorkflow, CronJobGroupWorkflow, JobWorkflow]


class _SharedPayloadConverter(PydanticPayloadConverter):
    """The SDK's pydantic payload converter, its encodings built once for the process.

    The SDK builds a payload converter for every workflow instance it creates, and the pydantic
    one keeps its own cache of pydantic ``TypeAdapter``s: unshared, each cached workflow would hold
    its own adapters (with their validators and serializers, in ``malloc``) for the types it has
    decoded, and build them again after every continue-as-new, which with thousands of cached
    workflows is a large part of the worker's memory (docs/benchmarks.md). The encodings hold no
    state of a workflow's (serialization context reaches them through ``with_context``, which the
    pydantic one does not take), so every instance can share them.
    """

    _encodings = tuple(PydanticPayloadConverter().converters.values())

    def __init__(self) -> None:
        CompositePayloadConverter.__init__(self, *self._encodings)


#: The data converter of every batchd client, worker and replayer: pydantic models as JSON.
DATA_CONVERTER = DataConverter(payload_converter_class=_SharedPayloadConverter)

#: The sandbox, with batchd's own workflow modules passed through: it would otherwise import the
#: workflow's module afresh (compiling it, without a bytecode cache) for every workflow it
#: instantiates — every wake-up of a workflow that left the sticky cache — and keep that copy in
#: every cached workflow. The modules hold only constants and code; the replay test runs the
#: recorded histories under the full sandbox, whose restrictions still guard this code.
WORKFLOW_RUNNER = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("workflows"))


def _compile_sandbox_calls_once() -> None:
    """Let the sandbox compile each of its few call snippets once, not at every call.

    The SDK (1.35) enters a sandboxed workflow by ``exec`` of a source string: for each activation
    and, when it encodes a task's result, three times for each payload in it, so it compiles the
    same handful of strings again and again. Compiling costs many times what running the compiled
    code does, and with thousands of cached workflows it is a large share of the time the worker
    holds the interpreter (docs/benchmarks.md). ``exec`` takes a code object as well as a string,
    so the same call runs. An SDK without this method is left alone (the unit test then fails).
    """
    # its annotation says str only
    run_code: Callable[..., None] | None = getattr(getattr(sandbox_runner, "_Instance", None), "_run_code", None)
    if run_code is None or getattr(run_code, "compiles_once", False):
        return
    compiled = functools.lru_cache(maxsize=256)(lambda source: compile(source, "<string>", "exec"))

    @functools.wraps(run_code)
    def run_compiled(self: Any, code: Any, **extra_globals: Any) -> None:
        run_code(self, compiled(code) if isinstance(code, str) else code, **extra_globals)

    run_compiled.compiles_once = True  # type: ignore[attr-defined]
    sandbox_runner._Instance._run_code = run_compiled  # type: ignore[method-assign]


def _release_completions() -> None:
    """Let a cached workflow's last activation completion go once the worker has it.

    The SDK (1.35) keeps the completion it returns from a sandboxed workflow's activation (its
    commands, with their payloads copied into the message's protobuf arena) in the workflow's
    instance until the next activation: for a ``*/1`` CronJob, a minute. The worker encodes and
    sends the completion it was handed; each activation begins by making a new one. What is left
    in its place is an empty completion, not None: an evicted workflow's coroutines, closed later
    by the garbage collector, still cancel their timers into it. An SDK without these attributes
    is left alone (the unit test then fails).
    """
    activate: Callable[..., Any] | None = getattr(getattr(sandbox_runner, "_Instance", None), "activate", None)
    if activate is None or getattr(activate, "releases_completion", False):
        return

    @functools.wraps(activate)
    def activate_and_release(self: Any, act: Any) -> Any:
        try:
            return activate(self, act)
        finally:
            inner: Any = getattr(self.globals_and_locals.get("__temporal_in_sandbox"), "instance", None)
            if hasattr(inner, "_current_completion"):
                inner._current_completion = type(inner._current_completion)()

    activate_and_release.releases_completion = True  # type: ignore[attr-defined]
    sandbox_runner._Instance.activate = activate_and_release  # type: ignore[method-assign]


def _no_command_contexts_without_codec() -> None:
    """Let a workflow's payloads skip the per-command context lookup when nothing would read it.

    The SDK (1.35) wraps the data converter of each activation and completion so that every
    payload sequence it visits asks the workflow, inside the sandbox, which command the payloads
    belong to (the serialization context, and for storing, the external store's context): two or
    three entries into the sandbox per sequence, about a sixth of the interpreter time a busy
    CronJob worker spends (docs/benchmarks.md). Only a payload codec or external storage reads
    those contexts; batchd's converter has neither, so each of the wrapper's calls returns its
    payloads unchanged whatever the context. A converter with either is wrapped as before, and an
    SDK without this method is left alone (the unit test then fails).
    """
    aware: Any = getattr(workflow_worker, "_CommandAwareDataConverter", None)
    create: Callable[..., Any] | None = getattr(aware, "create", None)
    if create is None or getattr(create, "skips_unread_contexts", False):
        return

    def create_if_read(instance: Any, context_free_dc: DataConverter, workflow_context_dc: DataConverter,
                       workflow_context: Any) -> DataConverter:
        if workflow_context_dc.payload_codec is None and workflow_context_dc.external_storage is None:
            return workflow_context_dc
        return create(instance=instance, context_free_dc=context_free_dc, workflow_context_dc=workflow_context_dc,
                      workflow_context=workflow_context)

    create_if_read.skips_unread_contexts = True  # type: ignore[attr-defined]
    aware.create = staticmethod(create_if_read)


def _detached(msg: Message, *, without: str = "") -> Message:
    """A copy of ``msg`` in its own protobuf arena, leaving out the field ``without``."""
    out = type(msg)()
    for fd, value in msg.ListFields():
        if fd.name == without:
            continue
        if fd.is_repeated:  # maps too
            getattr(out, fd.name).MergeFrom(value)
        elif fd.message_type is not None:
            getattr(out, fd.name).CopyFrom(value)
        else:
            setattr(out, fd.name, value)
    return out


def _release_first_activations() -> None:
    """Let a workflow instance keep nothing of the activation that started it.

    A decoded protobuf message lives in one arena, and a part of it still referenced keeps the
    whole arena. The SDK (1.35) keeps the start job's headers, memo, last result and failure for
    the life of the instance (in its info, its details and its input), and with them the whole
    first activation: the workflow's argument too, which for a CronJob after continue-as-new is
    its state with a ledger of up to 100 runs, kept beside the state the workflow works on
    (docs/benchmarks.md). The instance is given copies of those parts instead; it decodes the
    argument from the activation itself, once. An SDK without these methods is left alone (the
    unit test then fails).
    """
    create: Callable[..., Any] | None = getattr(
        getattr(workflow_worker, "_WorkflowWorker", None), "_create_workflow_instance", None)
    make_input: Callable[..., Any] | None = getattr(
        getattr(workflow_instance, "_WorkflowInstanceImpl", None), "_make_workflow_input", None)
    if create is None or make_input is None or getattr(create, "detaches", False):
        return

    @functools.wraps(create)
    def create_detached(self: Any, act: Any, init: Message) -> Any:
        return create(self, act, _detached(init, without="arguments"))

    @functools.wraps(make_input)
    def make_input_detached(self: Any, init: Any) -> Any:
        made = make_input(self, init)
        made.headers = {key: _detached(value) for key, value in made.headers.items()}
        return made

    create_detached.detaches = True  # type: ignore[attr-defined]
    workflow_worker._WorkflowWorker._create_workflow_instance = create_detached  # type: ignore[method-assign]
    workflow_instance._WorkflowInstanceImpl._make_workflow_input = make_input_detached  # type: ignore[method-assign, assignment]


class _SeededOnFirstUse:
    """The workflow instance's ``_random``: a ``random.Random`` made from the current seed when
    first asked for, not when the instance is made.

    The SDK (1.35) gives every workflow instance its own generator, a Mersenne Twister whose state
    every cached workflow then holds (docs/benchmarks.md), though only the Job workflow draws from
    it. Until then the generator is fully described by ``_current_seed``, which the SDK keeps
    beside it and sets again at every seed update, so one made then from that seed draws what the
    SDK's own would have.
    """

    def __get__(self, instance: Any, owner: type | None = None) -> random.Random:
        made: random.Random | None = instance.__dict__.get("_random_made")
        if made is None:
            made = instance.__dict__["_random_made"] = random.Random(instance._current_seed)
        return made

    def __set__(self, instance: Any, value: random.Random) -> None:
        # the SDK's __init__ hands over a generator seeded with the seed it records next: let it go
        instance.__dict__["_random_made"] = None


def _seed_random_on_first_use() -> None:
    """Install :class:`_SeededOnFirstUse`. An SDK without ``_current_seed`` is left alone (the
    unit test also checks that the SDK's ``__init__`` still sets it beside ``_random``)."""
    impl: Any = getattr(workflow_instance, "_WorkflowInstanceImpl", None)
    if impl is None or not hasattr(impl, "workflow_random_seed") or isinstance(
            impl.__dict__.get("_random"), _SeededOnFirstUse):
        return
    impl._random = _SeededOnFirstUse()


#: glibc's ``mallopt`` parameter number of M_MMAP_THRESHOLD (malloc.h).
M_MMAP_THRESHOLD = -3
#: Blocks of this size and more are mapped for themselves and given back when freed: low enough
#: to catch the blocks that the wake-ups after a burst allocate and free (docs/benchmarks.md).
MMAP_THRESHOLD = 256 * 1024


def return_large_blocks_at_once() -> bool:
    """Fix glibc's mmap threshold, so a large block is given back to the system when it is freed.

    By default glibc raises the threshold each time a mapped block is freed (up to 32 MiB), and
    with it the free space it keeps at the top of each thread's heap (up to 64 MiB). The wake-ups
    after a burst of armed creations allocate and free such blocks in many threads, so with the
    threshold left to glibc the worker's RSS rises for a few seconds after each burst while its
    bytes in use stay level, and that spike is the worker's peak (docs/benchmarks.md). False
    where the C library has no ``mallopt`` (not glibc); nothing is changed then.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


_compile_sandbox_calls_once()
_release_completions()
_no_command_contexts_without_codec()
_release_first_activations()
_seed_random_on_first_use()

#: Workflow tasks in progress at once. Workflow code shares one interpreter, so more at once only
#: makes each take longer: with the SDK's default, a burst of wake-ups (CronJobs sharing a
#: schedule time) holds tasks past the server's task timeout, and a timed-out task is done twice
#: (docs/benchmarks.md).
MAX_WORKFLOW_TASKS = 20
#: How long a workflow task waits on this worker's sticky queue before the server hands it to any
#: worker, which replays the run from its history (``--sticky-wait``). The SDK's 10 s, kept as the
#: default: a task already sent to a worker that is then killed waits this long, so a longer wait
#: stalls that worker's workflows after a crash. Where one minute's tasks take longer than this to
#: drain (thousands of CronJobs on one schedule) most of them time out and are replayed, each
#: costing the worker far more than the cached task it replaced; a wait longer than the drain
#: avoids that, so such a deployment raises it (docs/benchmarks.md).
STICKY_WAIT = timedelta(seconds=10)
#: CJ-GROUP: how often a group with a waiting member re-reads the Jobs holding its slots (``--group-recheck``)
GROUP_RECHECK = timedelta(seconds=30)

#: Armed CronJob creations one worker holds at once: each is a sleeping coroutine until its time.
MAX_ARMED = 10_000
#: TTL workflows the TTL worker keeps cached (``ttl_task_queue``). A cached sleeper holds about
#: 70 KiB (docs/benchmarks.md) and wakes once, hours later; this is room for the ones at work
#: (at most TTL_WORKFLOW_TASKS at once, each with its local activities) and those just started,
#: which the next change of their object (a second signal) finds cached.
TTL_CACHED_WORKFLOWS = 200
#: Its workflow tasks at once: they share the interpreter with the main worker's.
TTL_WORKFLOW_TASKS = 10


@dataclass(frozen=True)
class TemporalSettings:
    """How to reach Temporal. TLS: ``tls`` alone for server TLS; add client cert+key for mTLS."""

    address: str = "localhost:7233"
    namespace: str = "default"
    api_key: str | None = None
    tls: bool = False
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_server_name: str | None = None
    interceptors: Sequence[Any] = field(default_factory=tuple)

    def tls_config(self) -> TLSConfig | bool:
        if not (self.tls or self.tls_ca or self.tls_cert or self.api_key):
            return False

        def read(p: Path | None) -> bytes | None:
            return p.read_bytes() if p else None

        return TLSConfig(
            server_root_ca_cert=read(self.tls_ca),
            client_cert=read(self.tls_cert),
            client_private_key=read(self.tls_key),
            domain=self.tls_server_name,
        )


async def connect(settings: TemporalSettings, *, runtime: Runtime | None = None) -> Client:
    """Connect a client with batchd's data converter and interceptors."""
    return await Client.connect(
        settings.address,
        namespace=settings.namespace,
        api_key=settings.api_key,
        tls=settings.tls_config(),
        data_converter=DATA_CONVERTER,
        interceptors=list(settings.interceptors),
        runtime=runtime,
    )


_INDEXED = {
    SearchAttributeIndexedValueType.KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    SearchAttributeIndexedValueType.DATETIME: IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
}


async def ensure_search_attributes(client: Client, keys: Sequence[SearchAttributeKey[Any]] = SEARCH_ATTRIBUTES) -> None:
    """Register batchd's custom search attributes if the server lacks them (idempotent).

    A workflow that upserts an unregistered attribute fails its task forever, so the worker
    checks before it polls. Servers that refuse the operator API (Temporal Cloud) need the
    attributes created out of band; the worker then only logs.
    """
    try:
        existing = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        missing = {k.name: _INDEXED[k.indexed_value_type] for k in keys if k.name not in existing.custom_attributes}
        if missing:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
            )
            log.info("registered search attributes %s", ", ".join(sorted(missing)))
    except RPCError as err:
        log.warning("could not check or register search attributes (%s); create them out of band: %s",
                    err.status.name, ", ".join(k.name for k in keys))


def activities(kube: Kube, clock: Clock | None = None, cronjob_cache: CronJobCache | None = None,
               job_pods: JobPodIndex | None = None, job_view: JobView | None = None,
               cloudevents_sink: str | None = None,
               client: Client | None = None, group_recheck: timedelta = GROUP_RECHECK,
               ) -> tuple[list[Callable[..., object]], list[Callable[..., object]]]:
    """Every activity, bound to ``kube``: the main task queue's, and the timed one's (armed CronJob creations).

    Raises:
        TypeError: they do not implement exactly the declarations of workflows/models/
            (:func:`~activities.contract.check_implemented`), so no worker starts.
    """
    cronjob = CronJobActivities(kube, clock, cronjob_cache)
    main = [*TTLActivities(kube, clock).all(), *cronjob.all(), *JobActivities(kube, clock, job_pods, job_view).all(),
            EventActivities(kube, clock).record_event, CloudEventActivities(cloudevents_sink).deliver,
            *GroupActivities(kube, client, group_recheck).all()]
    timed: list[Callable[..., object]] = [cronjob.create_job_at]
    check_implemented([*main, *timed])
    return main, timed


def polled_queues(task_queue: str = TASK_QUEUE) -> list[tuple[str, TaskQueueType.ValueType]]:
    """The queues, with their task types, that the workers of :func:`build_workers` poll."""
    workflow, activity = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
    return [(task_queue, workflow), (task_queue, activity), (timed_task_queue(task_queue), activity),
            (ttl_task_queue(task_queue), workflow), (ttl_task_queue(task_queue), activity)]


def build_workers(
    client: Client,
    kube: Kube,
    *,
    task_queue: str = TASK_QUEUE,
    clock: Clock | None = None,
    max_concurrent_activities: int = 64,
    cronjob_cache: CronJobCache | None = None,
    job_pods: JobPodIndex | None = None,
    job_view: JobView | None = None,
    sticky_wait: timedelta = STICKY_WAIT,
    cloudevents_sink: str | None = None,
    group_recheck: timedelta = GROUP_RECHECK,
    **options: Any,
) -> list[Worker]:
    """The main worker (every workflow and activity; sync activities in a thread pool), the timed
    one and the TTL one.

    The timed worker polls ``{task_queue}-timed`` for armed CronJob creations only: they wait in
    the worker until their schedule time, so they must not take the main queue's slots and threads.
    The TTL worker polls ``{task_queue}-ttl`` for the TTL workflows, with a cache of its own
    (``TTL_CACHED_WORKFLOWS``), so that sleepers neither fill the main cache nor, expiring by the
    thousand, evict the CronJobs from it. It shares the main worker's activities and threads.
    ``cronjob_cache`` is the bridge's :meth:`~worker.bridge.Bridge.cached_cronjob`, ``job_pods``
    its :attr:`~worker.bridge.Bridge.job_pods` and ``job_view`` its
    :meth:`~worker.bridge.Bridge.cached_job` when it runs in the same process. Raises
    :class:`TypeError` as :func:`activities` does.
    """
    main, timed = activities(kube, clock, cronjob_cache, job_pods, job_view, cloudevents_sink, client,
                             group_recheck)
    threads = ThreadPoolExecutor(max_workers=max_concurrent_activities, thread_name_prefix="activity")
    return [
        Worker(
            client,
            task_queue=task_queue,
            workflows=WORKFLOWS,
            activities=main,
            activity_executor=threads,
            max_concurrent_activities=max_concurrent_activities,
            workflow_runner=WORKFLOW_RUNNER,
            max_concurrent_workflow_tasks=MAX_WORKFLOW_TASKS,
            sticky_queue_schedule_to_start_timeout=sticky_wait,
            **options,
        ),
        Worker(client, task_queue=timed_task_queue(task_queue), activities=timed,
               max_concurrent_activities=MAX_ARMED),
        Worker(client, task_queue=ttl_task_queue(task_queue), workflows=[TTLAfterFinishedWorkflow], activities=main,
               activity_executor=threads, max_concurrent_activities=max_concurrent_activities,
               workflow_runner=WORKFLOW_RUNNER, max_concurrent_workflow_tasks=TTL_WORKFLOW_TASKS,
               max_cached_workflows=TTL_CACHED_WORKFLOWS, sticky_queue_schedule_to_start_timeout=sticky_wait),
    ]
