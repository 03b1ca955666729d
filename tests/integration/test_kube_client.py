"""Tier 2: the transport of kube/client.py — kept connections, TLS, credentials, proxies.

kubesim speaks plain HTTP, so TLS, client certificates, ``tls-server-name``, tokens and proxies
are exercised against a small HTTP/1.1 stub server (and a CONNECT proxy) with certificates made
by the ``openssl`` command line at test time.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import resource
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kube import errors
from kube.client import Endpoint, Kube, _Response
from kube.config import Access, KubeConfigError

NAME = "kubernetes.default"  # the only name in the stub server's certificate


class Stub(ThreadingHTTPServer):
    """Answers every request with a small JSON object; records request lines, headers, connections."""

    daemon_threads = True

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context = context
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.connections = 0
        self.closed = 0  # connections this side has shut down
        self.close_after_each = False
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        self.connections += 1
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_side=True)
        return sock, addr

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.closed += 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # refused handshakes are the point of some tests

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Stub

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests.append((self.requestline, {k.lower(): v for k, v in self.headers.items()}))
        out = json.dumps({"kind": "Thing", "echo": json.loads(body) if body else None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
        if self.server.close_after_each:
            self.close_connection = True

    do_GET = do_POST = _reply

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    yield server
    server.shutdown()


def _kube(server: str, **settings: Any) -> Kube:
    return Kube(Access(server=server, **settings), timeout=(2.0, 5.0))


def test_an_unreachable_server_is_a_retryable_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(errors.Unreachable) as info:
        _kube(f"http://127.0.0.1:{port}").get("Job", "default", "x")
    assert info.value.retryable


def test_requests_share_one_kept_connection(stub: Stub) -> None:
    kube = _kube(f"http://127.0.0.1:{stub.port}")
    for _ in range(5):
        kube.get("Job", "ns", "a")
    assert kube.create("Job", "ns", {"metadata": {"name": "b"}})["echo"] == {"metadata": {"name": "b"}}
    assert stub.connections == 1 and len(stub.requests) == 6


def test_a_connection_the_server_closed_is_not_reused(stub: Stub) -> None:
    kube = _kube(f"http://127.0.0.1:{stub.port}")
    stub.close_after_each = True  # without "Connection: close": the close is only seen on the socket
    kube.get("Job", "ns", "a")
    _until(lambda: stub.closed == 1)  # closed: a POST (never sent twice) must see it and connect anew
    assert kube.create("Job", "ns", {"metadata": {"name": "b"}})["echo"] == {"metadata": {"name": "b"}}
    kube.get("Job", "ns", "a")  # at once: if the close races the request, a GET may be sent again
    assert stub.connections == 3 and len(stub.requests) == 3


def test_the_server_url_path_query_and_token_are_sent(stub: Stub) -> None:
    tokens = iter(["first", "second"])  # asked for each request: renewed tokens are sent at once

    kube = _kube(f"http://127.0.0.1:{stub.port}/gateway/", authorization=lambda: f"Bearer {next(tokens)}")
    kube.list("Job", "ns", label_selector="a=b,c in (d)", limit=5)
    kube.get("Job", "ns", "x")
    (line1, headers1), (line2, headers2) = stub.requests
    assert line1 == "GET /gateway/apis/batch/v1/namespaces/ns/jobs?labelSelector=a%3Db%2Cc+in+%28d%29&limit=5 HTTP/1.1"
    assert line2 == "GET /gateway/apis/batch/v1/namespaces/ns/jobs/x HTTP/1.1"
    assert (headers1["authorization"], headers2["authorization"]) == ("Bearer first", "Bearer second")


def test_credentials_that_cannot_be_renewed_are_a_retryable_error(stub: Stub) -> None:
    def renew() -> str:
        raise KubeConfigError("exec plugin aws exited 255: token expired")

    with pytest.raises(errors.Unreachable, match="renewing the credentials: .*exited 255") as info:
        _kube(f"http://127.0.0.1:{stub.port}", authorization=renew).get("Job", "ns", "x")
    assert info.value.retryable and stub.requests == []


def test_plain_http_through_a_proxy_uses_the_absolute_form(stub: Stub) -> None:
    # The stub stands in for the proxy: it sees the request line a proxy would.
    kube = _kube("http://api.invalid:6443", proxy=f"http://user:p%40ss@127.0.0.1:{stub.port}")
    kube.get("Job", "ns", "x")
    ((line, headers),) = stub.requests
    assert line == "GET http://api.invalid:6443/apis/batch/v1/namespaces/ns/jobs/x HTTP/1.1"
    assert headers["proxy-authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss


@pytest.mark.parametrize(("server", "proxy"), [
    ("https://api.example", ("secure-proxy", 3128)),
    ("http://api.example", ("plain-proxy", 80)),
    ("https://10.1.2.3", None),  # a CIDR range
    ("https://node.internal", None),  # a domain and its subdomains
    ("https://internal", None),
    ("https://api.example:6443", None),  # a host with its port
    ("https://notinternal", ("secure-proxy", 3128)),
])
def test_the_environments_proxy_unless_no_proxy_names_the_server(server: str, proxy: tuple[str, int] | None) -> None:
    env = {"https": "http://secure-proxy:3128", "all": "http://plain-proxy", "no": "10.0.0.0/8, .internal,api.example:6443"}
    assert Endpoint.of(Access(server=server, verify=False), env).proxy == proxy


def test_a_kubeconfig_proxy_url_is_used_whatever_no_proxy_says() -> None:
    env = {"https": "http://secure-proxy:3128", "no": "*"}
    assert Endpoint.of(Access(server="https://api", proxy="http://p:8080", verify=False), env).proxy == ("p", 8080)
    assert Endpoint.of(Access(server="https://api", verify=False), env).proxy is None


def test_socks_proxies_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="unsupported proxy"):
        _kube("https://api.invalid", proxy="socks5://127.0.0.1:1080")


# -- TLS --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for NAME signed by it, a client certificate, and a stranger CA."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    for ca in ("ca", "stranger"):
        run("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2", "-subj", f"/CN={ca}")
    (d / "server.ext").write_text(f"subjectAltName=DNS:{NAME}\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for leaf in ("server", "client"):
        run("req", *ec, "-keyout", f"{leaf}.key", "-out", f"{leaf}.csr", "-subj", f"/CN={leaf}")
        run("x509", "-req", "-in", f"{leaf}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{leaf}.crt", "-days", "2", "-extfile", f"{leaf}.ext")
    return d


def _tls_stub(pki: Path, *, client_certs: bool = False) -> Stub:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pki / "server.crt", pki / "server.key")
    if client_certs:
        ctx.load_verify_locations(pki / "ca.crt")
        ctx.verify_mode = ssl.CERT_REQUIRED
    return Stub(ctx)


def test_tls_verifies_the_server_against_the_ca_under_its_tls_server_name(pki: Path) -> None:
    server = _tls_stub(pki)
    url = f"https://127.0.0.1:{server.port}"
    try:
        assert _kube(url, ca_file=str(pki / "ca.crt"), tls_server_name=NAME).get("Job", "ns", "x")
        with pytest.raises(errors.Unreachable, match="SSL"):  # the certificate does not name 127.0.0.1
            _kube(url, ca_file=str(pki / "ca.crt")).get("Job", "ns", "x")
        with pytest.raises(errors.Unreachable, match="SSL"):  # signed by another CA
            _kube(url, ca_file=str(pki / "stranger.crt"), tls_server_name=NAME).get("Job", "ns", "x")
        assert _kube(url, verify=False).get("Job", "ns", "x")
    finally:
        server.shutdown()


def test_tls_client_certificates_are_presented(pki: Path) -> None:
    server = _tls_stub(pki, client_certs=True)
    url = f"https://127.0.0.1:{server.port}"
    trust = {"ca_file": str(pki / "ca.crt"), "tls_server_name": NAME}
    try:
        kube = _kube(url, cert_file=str(pki / "client.crt"), key_file=str(pki / "client.key"), **trust)
        assert kube.get("Job", "ns", "x") and kube.get("Job", "ns", "y")
        assert server.connections == 1
        with pytest.raises(errors.Unreachable):
            _kube(url, **trust).get("Job", "ns", "x")
    finally:
        server.shutdown()


def test_tls_through_a_connect_proxy(pki: Path) -> None:
    server = _tls_stub(pki)
    tunnels: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def proxy() -> None:
        client, _ = listener.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(4096)
        tunnels.append(head.split(b"\r\n")[0])
        upstream = socket.create_connection(("127.0.0.1", server.port))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pipe(a: socket.socket, b: socket.socket) -> None:
            while data := a.recv(65536):
                b.sendall(data)

        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        pipe(client, upstream)

    threading.Thread(target=proxy, daemon=True).start()
    try:
        kube = _kube(f"https://{NAME}:{server.port}", ca_file=str(pki / "ca.crt"),
                     proxy=f"http://127.0.0.1:{listener.getsockname()[1]}")
        assert kube.get("Job", "ns", "x")["kind"] == "Thing"
        assert [t.rsplit(b" ", 1)[0] for t in tunnels] == [f"CONNECT {NAME}:{server.port}".encode()]
    finally:
        listener.close()
        server.shutdown()


def test_kept_connections_work_beyond_descriptor_1024(stub: Stub) -> None:
    # select() refuses descriptors past 1,024; a busy worker has that many open.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("needs more than 1,200 open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        kube = _kube(f"http://127.0.0.1:{stub.port}")
        kube.get("Job", "ns", "a")
        assert kube._idle[0].sock.fileno() > 1024  # type: ignore[union-attr]
        kube.get("Job", "ns", "b")
        assert stub.connections == 1
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class _Bytes:
    """A socket whose reads are ``data``."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode: str) -> io.BytesIO:
        return io.BytesIO(self.data)


_HEADS = [
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nWarning: 299 - \"a\"\r\nWarning: 299 - \"b\"\r\n"
    b"X-Folded: one\r\n  two\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the server closes",
    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nrest",
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
]


@pytest.mark.parametrize("raw", _HEADS)
def test_a_response_head_reads_as_http_client_reads_it(raw: bytes) -> None:
    def read(cls: type[http.client.HTTPResponse]) -> tuple[Any, ...]:
        resp = cls(_Bytes(raw), method="GET")  # type: ignore[arg-type]
        resp.begin()
        return (resp.status, resp.reason, resp.version, resp.chunked, resp.length, resp.will_close,
                [(k.lower(), " ".join(v.split())) for k, v in resp.headers.items()],
                resp.headers.get_all("warning"), resp.getheader("retry-after"), resp.read())

    assert read(_Response) == read(http.client.HTTPResponse)


def test_a_response_head_beyond_the_limits_is_refused() -> None:
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        _Response(_Bytes(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n")).begin()  # type: ignore[arg-type]
    with pytest.raises(http.client.LineTooLong):
        _Response(_Bytes(b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n")).begin()  # type: ignore[arg-type]


def _until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.01)
