"""The benches' production-like Temporal: the server batchd's dev server runs (1.32), built from its
Go module by ``make upstream``, on Debian's PostgreSQL 15 with SQL advanced visibility.

Layer: bench. A bench that asks what batchd costs a real deployment, not the dev server (one
process on SQLite), runs on :func:`postgres_server`. It starts a fresh PostgreSQL, lets the
server's own ``temporal-sql-tool`` create both databases and apply the schemas the tool carries,
starts ``temporal-server`` (frontend, history, matching and worker in one process), registers the
``default`` namespace and batchd's search attributes, and yields once a visibility query naming
them is answered. Everything it started is stopped on the way out, whatever the way out is.

Files in the state directory: ``temporal.yaml`` and ``dynamicconfig.yaml`` (the server's config),
``logs/<component>.log``, and ``postgres``, a link to the database's directory (see
:func:`_pg_home`), which is removed with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from worker.cluster import child_pids, halt, log_tail
from worker.dev import free_port
from worker.temporal import DATA_CONVERTER
from worker.upstream import bin_dir
from workflows.identity import SEARCH_ATTRIBUTES

T = TypeVar("T")

PG_BIN = Path("/usr/lib/postgresql/15/bin")
NAMESPACE = "default"
#: The limits bench/harness.py's dev server raises, raised here too: the two backends are
#: compared under the same admission, and the defaults (1,200 long polls per API, 2,400 RPS)
#: would turn a bench's load into RESOURCE_EXHAUSTED retries, not into figures.
BENCH_DYNAMIC_CONFIG: Mapping[str, object] = {
    "frontend.namespaceCount": 5000, "frontend.namespaceRPS": 100000, "frontend.rps": 100000}
#: The schemas compiled into temporal-sql-tool (``--schema-name``), the very ones of the module
#: the server was built from: no Go module cache is needed once the binaries are built.
_SCHEMAS = {"temporal": "postgresql/v12/temporal", "temporal_visibility": "postgresql/v12/visibility"}
_PLUGIN = "postgres12"
_DB_USER = "temporal"  # initdb's superuser; trust on loopback, so no password
_SERVICES = ("frontend", "history", "matching", "worker")
_TOOL_TIMEOUT = 120.0
_STOP_TIMEOUT = 30.0
_Started = list[tuple[subprocess.Popen[bytes], signal.Signals]]  # what to stop, and with which signal


class BackendError(RuntimeError):
    """A prerequisite that is missing, or a component that did not start (its log's last lines)."""


@dataclass
class PostgresTemporal:
    """The running stack :func:`postgres_server` yields."""

    address: str  # the frontend, host:port
    client: Client  # batchd's data converter, namespace default
    state_dir: Path
    server_pid: int
    postmaster_pid: int
    pprof: str  # host:port of the server's Go profiler (go tool pprof http://…/debug/pprof/profile)

    def roles(self) -> dict[str, list[int]]:
        """The processes by role: temporal-server, and PostgreSQL's (the postmaster and its
        children, a connection each), whose CPU seconds a bench sums (bench.harness.cpu_seconds)."""
        return {"Temporal": [self.server_pid], "PostgreSQL": [self.postmaster_pid, *child_pids(self.postmaster_pid)]}


def postgres_bin() -> Path:
    """Debian's PostgreSQL 15 binaries, or :class:`BackendError` saying which package to install."""
    if not all((PG_BIN / name).is_file() for name in ("initdb", "postgres", "pg_isready")):
        raise BackendError(f"PostgreSQL 15 is not installed ({PG_BIN} lacks initdb/postgres): "
                           "apt-get install postgresql-15")
    return PG_BIN


@contextlib.asynccontextmanager
async def postgres_server(
        state_dir: Path, *, search_attributes: Iterable[SearchAttributeKey[Any]] = SEARCH_ATTRIBUTES,
        dynamic_config: Mapping[str, object] = BENCH_DYNAMIC_CONFIG, history_shards: int = 4,
        timeout: float = 120.0) -> AsyncIterator[PostgresTemporal]:
    """A fresh PostgreSQL and temporal-server in ``state_dir``, stopped on exit.

    Args:
        state_dir: created if missing; a previous run's database is not reused.
        search_attributes: registered in the ``default`` namespace before this yields.
        dynamic_config: the server's dynamic config, key to value (no constraints).
        history_shards: fixed for the life of a database; 4 keeps a 2-core machine's idle cost low.
        timeout: seconds for each component to become ready.

    Raises:
        BackendError: a binary is missing, or a component did not start in ``timeout``.
        worker.upstream.UpstreamError: the server is not built (``make upstream``).
    """
    pg, server_bin = postgres_bin(), bin_dir()
    state_dir = state_dir.resolve()
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    keys = list(search_attributes)
    started: _Started = []
    home: Path | None = None
    try:
        home = _pg_home(state_dir)
        pg_port = free_port()
        postmaster = await _start_postgres(pg, home, pg_port, logs, started, timeout)
        await _create_databases(server_bin, pg_port, logs)
        pprof = free_port()
        address, config = _write_config(state_dir, pg_port, pprof, dynamic_config, history_shards)
        server = _spawn("temporal-server", [str(server_bin / "temporal-server"), "--config-file", str(config),
                                            "--allow-no-auth", "start"], logs, started)
        client = await _until(lambda: Client.connect(address, namespace=NAMESPACE, data_converter=DATA_CONVERTER),
                              server, logs, timeout, "to answer on its frontend")
        await _register(client, keys, server, logs, timeout)
        yield PostgresTemporal(address, client, state_dir, server.pid, postmaster.pid, f"127.0.0.1:{pprof}")
    finally:
        # synchronous on purpose: a cancelled task (Ctrl-C under asyncio.run) cannot await here
        for proc, stop in reversed(started):
            halt(proc, stop, _STOP_TIMEOUT)
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)
            (state_dir / "postgres").unlink(missing_ok=True)


def _pg_home(state_dir: Path) -> Path:
    """A directory the ``postgres`` user owns, linked as ``<state_dir>/postgres``.

    PostgreSQL refuses to run as root, and the user it runs as must reach its data directory:
    a state directory under pytest's or tempfile's 0700 directories is out of its reach. So the
    data live in a directory of their own under the system's temporary directory.
    """
    home = Path(tempfile.mkdtemp(prefix="batchd-pg-"))
    shutil.chown(home, "postgres", "postgres")
    link = state_dir / "postgres"
    link.unlink(missing_ok=True)
    link.symlink_to(home)
    return home


async def _start_postgres(pg: Path, home: Path, port: int, logs: Path, started: _Started,
                          timeout: float) -> subprocess.Popen[bytes]:
    data, sockets = home / "data", home / "run"
    as_postgres: dict[str, Any] = {"user": "postgres", "group": "postgres", "extra_groups": [], "cwd": home}
    sockets.mkdir()
    shutil.chown(sockets, "postgres", "postgres")
    await _run("initdb", [str(pg / "initdb"), "-D", str(data), "-U", _DB_USER, "--auth=trust", "-E", "UTF8",
                          "--locale=C", "--no-sync", "--no-instructions"], logs, **as_postgres)
    # 4 services, each with its own pools (20 + 10 connections at most): more than the default 100
    postmaster = _spawn("postgres", [str(pg / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port),
                                     "-k", str(sockets), "-c", "max_connections=200"], logs, started,
                        stop=signal.SIGINT, **as_postgres)  # SIGINT: its fast shutdown
    ping = [str(pg / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port), "-U", _DB_USER, "-d", "postgres"]
    deadline = time.monotonic() + timeout
    while await _exec(ping, subprocess.DEVNULL, 10.0) != 0:
        if postmaster.poll() is not None or time.monotonic() > deadline:
            raise _failed("postgres", postmaster, logs, timeout)
        await asyncio.sleep(0.1)
    return postmaster


async def _create_databases(server_bin: Path, port: int, logs: Path) -> None:
    for db, schema in _SCHEMAS.items():
        tool = [str(server_bin / "temporal-sql-tool"), "--plugin", _PLUGIN, "--endpoint", "127.0.0.1",
                "--port", str(port), "--user", _DB_USER, "--database", db]
        await _run("temporal-sql-tool", [*tool, "create-database"], logs)
        await _run("temporal-sql-tool", [*tool, "setup-schema", "-v", "0.0"], logs)
        await _run("temporal-sql-tool", [*tool, "update-schema", "--schema-name", schema], logs)


def _write_config(state_dir: Path, pg_port: int, pprof_port: int, dynamic_config: Mapping[str, object],
                  history_shards: int) -> tuple[str, Path]:
    """``temporal.yaml`` and ``dynamicconfig.yaml``; returns the frontend's address and the config."""
    def store(db: str, conns: int) -> dict[str, Any]:
        return {"sql": {"pluginName": _PLUGIN, "databaseName": db, "connectAddr": f"127.0.0.1:{pg_port}",
                        "connectProtocol": "tcp", "user": _DB_USER, "maxConns": conns, "maxIdleConns": conns,
                        "maxConnLifetime": "1h"}}

    dynamic = state_dir / "dynamicconfig.yaml"
    dynamic.write_text(yaml.safe_dump({k: [{"value": v, "constraints": {}}] for k, v in dynamic_config.items()}))
    rpc = {name: {"grpcPort": free_port(), "membershipPort": _membership_port(), "bindOnIP": "127.0.0.1"}
           for name in _SERVICES}
    address = f"127.0.0.1:{rpc['frontend']['grpcPort']}"
    config = {
        "log": {"stdout": True, "level": "warn"},
        "persistence": {"numHistoryShards": history_shards, "defaultStore": "default", "visibilityStore": "visibility",
                        "datastores": {"default": store("temporal", 20),
                                       "visibility": store("temporal_visibility", 10)}},
        "global": {"membership": {"maxJoinDuration": "30s", "broadcastAddress": "127.0.0.1"},
                   "pprof": {"port": pprof_port, "host": "127.0.0.1"}},  # Go's profiler, idle until asked
        "services": {name: {"rpc": r} for name, r in rpc.items()},  # no httpPort: the HTTP API stays off
        "clusterMetadata": {
            "enableGlobalNamespace": False, "failoverVersionIncrement": 10, "masterClusterName": "active",
            "currentClusterName": "active",
            "clusterInformation": {"active": {"enabled": True, "initialFailoverVersion": 1, "rpcName": "frontend",
                                              "rpcAddress": address}}},
        "dcRedirectionPolicy": {"policy": "noop"},
        "dynamicConfigClient": {"filepath": str(dynamic), "pollInterval": "60s"},
    }
    path = state_dir / "temporal.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return address, path


def _membership_port() -> int:
    """A free port below 32768: the schema keeps a member's port as a SMALLINT
    (``cluster_membership.rpc_port``), and free_port's come from the kernel's ephemeral range,
    which on Linux begins at 32768."""
    for _ in range(100):
        port = random.randrange(10000, 32768)
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port))
            return port
    raise BackendError("no free port below 32768 for temporal-server's membership")


async def _register(client: Client, keys: list[SearchAttributeKey[Any]], server: subprocess.Popen[bytes],
                    logs: Path, timeout: float) -> None:
    """The ``default`` namespace and ``keys`` in it, then a visibility query naming every key.

    Custom search attributes on SQL visibility are aliases of the namespace, served from the
    frontend's namespace cache (refreshed every 2 s): the query proves the frontend sees them.
    """
    async def register_namespace() -> None:
        try:
            await client.workflow_service.register_namespace(RegisterNamespaceRequest(
                namespace=NAMESPACE, workflow_execution_retention_period=Duration(seconds=24 * 3600)))
        except RPCError as err:
            if err.status != RPCStatusCode.ALREADY_EXISTS:  # else an earlier try timed out, but did it
                raise

    await _until(register_namespace, server, logs, timeout, f"to register namespace {NAMESPACE}")
    if not keys:
        return
    await _until(lambda: client.operator_service.add_search_attributes(AddSearchAttributesRequest(
        namespace=NAMESPACE, search_attributes={k.name: IndexedValueType.ValueType(k.indexed_value_type) for k in keys})),
        server, logs, timeout, "to register batchd's search attributes")
    query = " AND ".join(f"{k.name} IS NULL" for k in keys)
    await _until(lambda: client.count_workflows(query), server, logs, timeout,
                 "to answer a visibility query on batchd's search attributes")


async def _until(call: Callable[[], Awaitable[T]], server: subprocess.Popen[bytes], logs: Path, timeout: float,
                 what: str) -> T:
    """``call`` retried while the server comes up (refused, unavailable, namespace not yet cached)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except (RPCError, RuntimeError) as err:  # Client.connect raises RuntimeError while refused
            if server.poll() is not None or time.monotonic() > deadline:
                raise _failed("temporal-server", server, logs, timeout, f"{what} ({err})") from err
        await asyncio.sleep(0.5)


def _spawn(name: str, args: list[str], logs: Path, started: _Started, *, stop: signal.Signals = signal.SIGTERM,
           **kw: Any) -> subprocess.Popen[bytes]:
    """Start ``args`` in a session of its own (a bench's Ctrl-C is not its), logging to ``logs``."""
    with (logs / f"{name}.log").open("ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, **kw)
    started.append((proc, stop))
    return proc


async def _run(name: str, args: list[str], logs: Path, **kw: Any) -> None:
    """A short-lived tool, logged to ``logs/<name>.log``; :class:`BackendError` unless it succeeds."""
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        out.write(f"$ {' '.join(args)}\n".encode())
        out.flush()
        code = await _exec(args, out, _TOOL_TIMEOUT, **kw)
    if code != 0:
        how = f"took over {_TOOL_TIMEOUT:.0f} s" if code is None else f"exited with {code}"
        raise BackendError(f"{name} {how}; the last lines of {log}:\n{log_tail(log, 30)}")


async def _exec(args: list[str], out: Any, timeout: float, **kw: Any) -> int | None:
    """The exit code of ``args``, or None if it ran out of ``timeout``; killed then, or when the caller
    is cancelled."""
    proc = await asyncio.create_subprocess_exec(*args, stdout=out, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, **kw)
    try:
        return await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        return None
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())


def _failed(name: str, proc: subprocess.Popen[bytes], logs: Path, timeout: float, what: str = "") -> BackendError:
    how = (f"exited with {proc.returncode}" if proc.poll() is not None
           else f"did not {what or 'become ready'} in {timeout:.0f} s")
    log = logs / f"{name}.log"
    return BackendError(f"{name} {how}; the last lines of {log}:\n{log_tail(log, 30)}")
