"""The worker's ``/healthz``, ``/readyz`` and ``/metrics`` server (worker/app.py ``HealthServer``),
spoken to over real sockets: what a kubelet probe, Prometheus, or a broken client gets."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter

from worker.app import HealthServer


class Problems:
    """What ``/readyz`` is told; ``fail`` makes the next call raise once."""

    def __init__(self) -> None:
        self.now: list[str] = []
        self.fail = False

    def __call__(self) -> list[str]:
        if self.fail:
            self.fail = False
            raise RuntimeError("readiness check broke")
        return self.now


@pytest.fixture
def problems() -> Problems:
    return Problems()


@pytest.fixture
async def server(problems: Problems) -> AsyncIterator[HealthServer]:
    registry = CollectorRegistry()
    Counter("batchd_test_pings", "A counter the scrape must show", registry=registry).inc()
    health = HealthServer(registry, problems, timeout=0.2)
    await health.start("127.0.0.1", 0)
    yield health
    await health.stop()


async def exchange(server: HealthServer, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` raw; status, headers (lower-cased names) and body, read until the server closes."""
    assert server.port
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(request)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), timeout=5)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body) or request.startswith(b"HEAD ")
    return int(status_line.split(" ")[1]), headers, body


def get(path: str, method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: probe\r\nUser-Agent: kube-probe/1.30\r\n\r\n".encode()


async def test_healthz_answers_ok(server: HealthServer) -> None:
    status, headers, body = await exchange(server, get("/healthz"))
    assert (status, body) == (200, b"ok")
    assert headers["content-type"].startswith("text/plain")


async def test_readyz_lists_the_problems_one_a_line(server: HealthServer, problems: Problems) -> None:
    assert (await exchange(server, get("/readyz")))[::2] == (200, b"ok")
    problems.now = ["bridge: informers not synced", "workers: not running"]
    assert (await exchange(server, get("/readyz")))[::2] == (503, b"bridge: informers not synced\nworkers: not running\n")


async def test_metrics_is_the_prometheus_exposition(server: HealthServer) -> None:
    status, headers, body = await exchange(server, get("/metrics"))
    assert status == 200
    assert headers["content-type"] == CONTENT_TYPE_LATEST
    assert b"batchd_test_pings_total 1.0" in body


async def test_head_has_the_headers_of_get_and_no_body(server: HealthServer) -> None:
    _, got, _ = await exchange(server, get("/metrics"))
    status, headers, body = await exchange(server, get("/metrics", method="HEAD"))
    assert (status, body) == (200, b"")
    assert headers["content-length"] == got["content-length"] != "0"
    assert headers["content-type"] == CONTENT_TYPE_LATEST


async def test_a_query_string_is_ignored(server: HealthServer) -> None:
    assert (await exchange(server, get("/healthz?verbose=1")))[::2] == (200, b"ok")


async def test_an_unknown_path_is_404(server: HealthServer) -> None:
    assert (await exchange(server, get("/livez")))[0] == 404


@pytest.mark.parametrize("method", ["POST", "DELETE", "OPTIONS"])
async def test_other_methods_are_405_with_allow(server: HealthServer, method: str) -> None:
    status, headers, _ = await exchange(server, get("/readyz", method=method))
    assert status == 405
    assert headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("request_head", [
    b"GARBAGE\r\n\r\n",
    b"GET /healthz\r\n\r\n",
    b"GET /healthz SPDY/3\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nX-Padding: " + b"a" * 17 * 1024 + b"\r\n\r\n",
], ids=["no-target", "no-version", "not-http", "head-over-16-KiB"])
async def test_a_malformed_or_oversized_head_is_400(server: HealthServer, request_head: bytes) -> None:
    assert (await exchange(server, request_head))[0] == 400


async def test_a_failing_handler_answers_500_and_the_server_carries_on(
        server: HealthServer, problems: Problems, caplog: pytest.LogCaptureFixture) -> None:
    problems.fail = True
    with caplog.at_level(logging.WARNING):
        assert (await exchange(server, get("/readyz")))[0] == 500
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.exc_info and isinstance(record.exc_info[1], RuntimeError)
    assert (await exchange(server, get("/readyz")))[::2] == (200, b"ok")


async def dribble(writer: asyncio.StreamWriter) -> None:
    """A request line, then a header line every 50 ms, never the blank line that ends the head."""
    writer.write(b"GET /healthz HTTP/1.1\r\n")
    while not writer.is_closing():
        await asyncio.sleep(0.05)
        writer.write(b"X-Slow: 1\r\n")


async def say_nothing(writer: asyncio.StreamWriter) -> None:
    pass


@pytest.mark.parametrize("client", [say_nothing, dribble])
async def test_a_silent_or_dribbling_client_is_disconnected(server: HealthServer, client: Callable[[asyncio.StreamWriter], Awaitable[None]]) -> None:
    assert server.port
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    talking = asyncio.create_task(client(writer))
    # The evidence is the server closing (EOF or a reset), well within this test's own 5 s.
    with contextlib.suppress(ConnectionResetError):
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""
    writer.close()
    await asyncio.wait_for(talking, timeout=5)
