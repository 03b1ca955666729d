"""A CloudEvents sink for the tests (NOTIFY-EVENTS): an HTTP server that keeps what it is sent, and can
refuse (``status``) or be down for a while."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Sink:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.headers: list[str] = []
        self.status = 202  # what it answers
        self.refused = 0  # how many it answered with anything but 2xx
        self.url = ""

    def by_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.received if e["type"] == type_]


@contextmanager
def sink_server() -> Iterator[Sink]:
    sink = Sink()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if 200 <= sink.status < 300:
                sink.received.append(json.loads(body))
                sink.headers.append(self.headers.get("Content-Type") or "")
            else:
                sink.refused += 1
            self.send_response(sink.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.url = f"http://127.0.0.1:{server.server_address[1]}/events?from=batchd"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
