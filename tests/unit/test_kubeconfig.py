"""kube/config.py: the kubeconfig and in-cluster loading, checked against the official
Python client's loader (a test dependency) where both read the same file, and on its own for
what renews credentials: exec plugins, token files, the OIDC auth provider."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from kube import config as kubeconfig
from kube.config import KubeConfigError, from_files, in_cluster, load_access

PEM = {name: f"-----BEGIN CERTIFICATE-----\n{name}\n-----END CERTIFICATE-----\n" for name in ("ca", "cert", "key")}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def _config(cluster: dict[str, Any], user: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": cluster}], "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}], **extra}


def _read(path: str | None) -> str | None:
    return None if path is None else Path(path).read_text()


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "pki").mkdir()
    for name, pem in PEM.items():
        (tmp_path / "pki" / f"{name}.pem").write_text(pem)
    (tmp_path / "token").write_text("file-token")  # the official loader sends a final newline on
    return tmp_path


def _plugin(directory: Path, output: dict[str, Any], *, exit_code: int = 0) -> Path:
    """An exec plugin that records each run (its args, env and exec info) and prints ``output``."""
    script = directory / "plugin.py"
    script.write_text(f"""#!{sys.executable}
import json, os, sys
with open({str(directory / 'runs')!r}, "a") as f:
    f.write(json.dumps({{"args": sys.argv[1:], "env": os.environ.get("PLUGIN_ENV"),
                        "info": json.loads(os.environ["KUBERNETES_EXEC_INFO"])}}) + "\\n")
print(json.dumps({json.dumps(output)}))
sys.stderr.write("plugin says no\\n")
sys.exit({exit_code})
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _runs(directory: Path) -> list[dict[str, Any]]:
    runs = directory / "runs"
    return [json.loads(line) for line in runs.read_text().splitlines()] if runs.exists() else []


EXEC_TOKEN = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
              "status": {"token": "exec-token"}}

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "token and a CA file relative to the kubeconfig": (
        {"server": "https://api.example:6443/", "certificate-authority": "pki/ca.pem"}, {"token": "t0k"}),
    "token file, inline CA and tls-server-name": (
        {"server": "https://10.0.0.1", "certificate-authority-data": _b64(PEM["ca"]), "tls-server-name": "api"},
        {"tokenFile": "token"}),
    "inline client certificate, no verification": (
        {"server": "https://api.example", "insecure-skip-tls-verify": True},
        {"client-certificate-data": _b64(PEM["cert"]), "client-key-data": _b64(PEM["key"])}),
    "client certificate files and a proxy": (
        {"server": "https://api.example", "certificate-authority": "pki/ca.pem", "proxy-url": "http://proxy:3128"},
        {"client-certificate": "pki/cert.pem", "client-key": "pki/key.pem"}),
    "username and password": ({"server": "https://api.example"}, {"username": "admin", "password": "s3cr:t"}),
    "exec plugin with a token": ({"server": "https://api.example"}, {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.py", "args": ["--flag"],
        "interactiveMode": "Never"}}),
}


@pytest.mark.parametrize("case", CASES)
def test_the_same_access_as_the_official_loader(files: Path, case: str) -> None:
    cluster, user = CASES[case]
    _plugin(files, EXEC_TOKEN)
    path = _write(files / "config", _config(cluster, user))
    official = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=str(path), client_configuration=official)
    ours = from_files([path])
    assert ours.server == official.host
    assert _read(ours.ca_file) == _read(official.ssl_ca_cert)
    assert (_read(ours.cert_file), _read(ours.key_file)) == (_read(official.cert_file), _read(official.key_file))
    assert (ours.verify, ours.tls_server_name, ours.proxy) == (official.verify_ssl, official.tls_server_name, official.proxy)
    assert ours.authorization() == official.get_api_key_with_prefix("BearerToken", alias="authorization")


def test_kubeconfig_lists_files_merged_first_name_wins(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As kubectl merges them; the official Python loader takes the last file's current-context instead
    first = _write(files / "first", {"current-context": "second", "contexts": [
        {"name": "first", "context": {"cluster": "k", "user": "u"}},
        {"name": "second", "context": {"cluster": "k", "user": "other"}}],
        "users": [{"name": "other", "user": {"token": "from-first"}}]})
    second = _write(files / "second", {"current-context": "first",
                                       "clusters": [{"name": "k", "cluster": {"server": "https://merged"}}],
                                       "users": [{"name": "other", "user": {"token": "from-second"}},
                                                 {"name": "u", "user": {"token": "u"}}]})
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(files / "missing"), str(second)]))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    access = load_access()
    assert (access.server, access.authorization()) == ("https://merged", "Bearer from-first")


def test_an_exec_plugin_runs_again_once_its_token_expires(files: Path) -> None:
    soon = (datetime.now(UTC) + kubeconfig.EXPIRY_MARGIN / 2).strftime("%Y-%m-%dT%H:%M:%SZ")
    _plugin(files, {**EXEC_TOKEN, "status": {"token": "exec-token", "expirationTimestamp": soon}})
    cluster = {"server": "https://api.example", "certificate-authority-data": _b64(PEM["ca"]),
               "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "a"}}]}
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.py", "args": ["x"],
                     "env": [{"name": "PLUGIN_ENV", "value": "set"}], "provideClusterInfo": True}}
    access = from_files([_write(files / "config", _config(cluster, user))])
    assert len(_runs(files)) == 1  # at load: a plugin that fails stops the worker at start
    assert access.authorization() == access.authorization() == "Bearer exec-token"
    runs = _runs(files)
    assert len(runs) == 3  # within the margin of its expiry: run again before each request
    assert runs[0]["args"] == ["x"] and runs[0]["env"] == "set"
    assert runs[0]["info"] == {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {
        "interactive": False, "cluster": {"server": "https://api.example", "certificate-authority-data": _b64(PEM["ca"]),
                                          "config": {"audience": "a"}}}}


def test_an_exec_plugin_token_without_expiry_is_kept(files: Path) -> None:
    _plugin(files, EXEC_TOKEN)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(files / "plugin.py")}}
    access = from_files([_write(files / "config", _config({"server": "https://api.example"}, user))])
    assert [access.authorization() for _ in range(3)] == ["Bearer exec-token"] * 3
    assert len(_runs(files)) == 1


def test_an_exec_plugin_may_answer_with_a_client_certificate(files: Path) -> None:
    _plugin(files, {**EXEC_TOKEN, "status": {"clientCertificateData": PEM["cert"], "clientKeyData": PEM["key"]}})
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.py"}}
    access = from_files([_write(files / "config", _config({"server": "https://api.example"}, user))])
    assert (_read(access.cert_file), _read(access.key_file), access.authorization()) == (PEM["cert"], PEM["key"], None)
    assert stat.S_IMODE(os.stat(access.key_file or "").st_mode) == 0o600


@pytest.mark.parametrize(("output", "exit_code", "error"), [
    (EXEC_TOKEN, 1, "exited 1: plugin says no"),
    ({**EXEC_TOKEN, "apiVersion": "client.authentication.k8s.io/v1beta1"}, 0, "answered client.authentication.k8s.io/v1beta1"),
    ({**EXEC_TOKEN, "status": {}}, 0, "neither a token nor a client certificate"),
    ({"kind": "nothing"}, 0, "not an ExecCredential"),
])
def test_an_exec_plugin_that_fails_says_why(files: Path, output: dict[str, Any], exit_code: int, error: str) -> None:
    _plugin(files, output, exit_code=exit_code)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.py"}}
    with pytest.raises(KubeConfigError, match=error):
        from_files([_write(files / "config", _config({"server": "https://api.example"}, user))])


def test_an_exec_plugin_that_needs_a_terminal_is_refused_without_running(files: Path) -> None:
    _plugin(files, EXEC_TOKEN)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.py", "interactiveMode": "Always"}}
    with pytest.raises(KubeConfigError, match="asks for a terminal"):
        from_files([_write(files / "config", _config({"server": "https://api.example"}, user))])
    assert _runs(files) == []


def test_a_token_file_is_read_again_as_it_rotates(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeconfig, "TOKEN_FILE_PERIOD", 0.0)
    access = from_files([_write(files / "config", _config({"server": "https://a"}, {"tokenFile": "token"}))])
    assert access.authorization() == "Bearer file-token"
    (files / "token").write_text("rotated\n")
    assert access.authorization() == "Bearer rotated"
    (files / "token").unlink()  # mid-rotation: the last token read is still sent
    assert access.authorization() == "Bearer rotated"


def test_in_cluster_the_service_account_and_its_rotated_token(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    account = files / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token")
    (account / "ca.crt").write_text(PEM["ca"])
    monkeypatch.setattr(kubeconfig, "TOKEN_FILE_PERIOD", 0.0)
    access = in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, account)
    assert (access.server, _read(access.ca_file), access.authorization()) == ("https://[fd00::1]:443", PEM["ca"], "Bearer sa-token")
    (account / "token").write_text("sa-token-2")
    assert access.authorization() == "Bearer sa-token-2"


def test_a_pod_without_its_token_falls_back_to_the_kubeconfig(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", files / "absent")
    monkeypatch.setenv("KUBECONFIG", str(_write(files / "config", _config({"server": "https://a"}, {"token": "t"}))))
    env = {**os.environ, "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert load_access(environ=env).server == "https://a"


@pytest.mark.parametrize(("doc", "error"), [
    (_config({"server": "https://a"}, {}, **{"current-context": "nope"}), "current-context 'nope' is not one of its contexts"),
    (_config({}, {}), "the cluster has no server"),
    (_config({"server": "https://a", "certificate-authority": "absent.pem"}, {}), "certificate-authority .*absent.pem does not exist"),
    (_config({"server": "https://a"}, {"auth-provider": {"name": "gcp"}}), "auth-provider 'gcp' is not supported"),
    (_config({"server": "https://a"}, {"client-certificate-data": "not base64!"}), "not base64"),
    ({"contexts": [{"name": "c", "context": {"cluster": "gone"}}], "current-context": "c"}, "names cluster 'gone'"),
])
def test_an_unusable_kubeconfig_says_why(tmp_path: Path, doc: dict[str, Any], error: str) -> None:
    with pytest.raises(KubeConfigError, match=error):
        from_files([_write(tmp_path / "config", doc)])


def test_no_kubeconfig_at_all_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="no kubeconfig found at .*absent"):
        load_access(tmp_path / "absent", environ={})


def _jwt(expires: datetime) -> str:
    def part(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")
    return f"{part({'alg': 'none'})}.{part({'exp': int(expires.timestamp())})}.sig"


@pytest.fixture
def issuer() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """An OIDC provider: discovery, and a token endpoint that answers a refresh with a fresh ID token."""
    refreshes: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._json({"token_endpoint": f"http://127.0.0.1:{server.server_port}/token"})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            refreshes.append(dict(pair.split("=", 1) for pair in body.split("&")))
            self._json({"id_token": _jwt(datetime.now(UTC) + timedelta(hours=1)), "refresh_token": "r2"})

        def _json(self, doc: dict[str, Any]) -> None:
            data = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", refreshes
    server.shutdown()


def test_an_expired_oidc_id_token_is_refreshed(tmp_path: Path, issuer: tuple[str, list[dict[str, str]]]) -> None:
    url, refreshes = issuer
    valid, expired = _jwt(datetime.now(UTC) + timedelta(hours=1)), _jwt(datetime.now(UTC) - timedelta(minutes=1))
    provider: dict[str, Any] = {"name": "oidc", "config": {"idp-issuer-url": url, "client-id": "batchd", "client-secret": "s",
                                           "refresh-token": "r1"}}
    still_valid = {**provider, "config": {**provider["config"], "id-token": valid}}
    access = from_files([_write(tmp_path / "a", _config({"server": "https://a"}, {"auth-provider": still_valid}))])
    assert access.authorization() == f"Bearer {valid}" and refreshes == []
    stale = {**provider, "config": {**provider["config"], "id-token": expired}}
    access = from_files([_write(tmp_path / "b", _config({"server": "https://a"}, {"auth-provider": stale}))])
    first = access.authorization()
    assert first not in (None, f"Bearer {expired}") and access.authorization() == first
    assert refreshes == [{"grant_type": "refresh_token", "refresh_token": "r1", "client_id": "batchd", "client_secret": "s"}]

