"""Where the Kubernetes API server is and who batchd is to it: a kubeconfig, or the Pod's service account.

Callers: worker/app.py, worker/cli.py, worker/dev.py (``load_access``); :class:`Access` is what
:class:`~kube.client.Kube` connects with.

batchd reads it itself rather than through the official Python client's loader, whose import
brings the whole generated client into the worker's memory (docs/design.md). What is read follows kubectl (docs/operations.md, "Connecting to
Kubernetes"): ``KUBECONFIG`` may list several files, merged with the first definition of a name
winning; paths in a file are relative to its directory; a user authenticates by client
certificate, token or token file, exec plugin, OIDC auth provider, or username and password.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

#: The service account's files inside a Pod.
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: A token file is read again this often: the kubelet rotates a projected service-account token
#: well before it expires (kubectl and client-go read theirs every minute too).
TOKEN_FILE_PERIOD = 60.0
#: A token that expires within this margin is renewed before it is sent.
EXPIRY_MARGIN = timedelta(seconds=10)
#: An exec plugin or an OIDC provider that takes longer than this fails the request that asked.
CREDENTIAL_TIMEOUT = 60.0


class KubeConfigError(ValueError):
    """The kubeconfig or the in-cluster environment cannot be used; the message says why."""


Authorization = Callable[[], str | None]  # the Authorization header's value, asked for each request


def _no_authorization() -> str | None:
    return None


@dataclass(frozen=True)
class Access:
    """One API server and the credentials for it, as :class:`~kube.client.Kube` uses them."""

    server: str  # e.g. https://10.0.0.1:443, or with a path behind a gateway
    ca_file: str | None = None  # PEM
    verify: bool = True  # False: insecure-skip-tls-verify
    tls_server_name: str | None = None
    cert_file: str | None = None  # client certificate and key, PEM files
    key_file: str | None = None
    proxy: str | None = None  # the kubeconfig's proxy-url; None: the environment's, minus NO_PROXY
    authorization: Authorization = _no_authorization


def load_access(kubeconfig: Path | None = None, *, environ: Mapping[str, str] = os.environ) -> Access:
    """Inside a Pod (no ``kubeconfig`` given) its service account, else the kubeconfig's current
    context: ``kubeconfig``, else the files ``$KUBECONFIG`` lists, else ``~/.kube/config``."""
    if kubeconfig is None and environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT"):
        with contextlib.suppress(KubeConfigError):  # a Pod without its token mounted may bring a kubeconfig
            return in_cluster(environ)
    if kubeconfig is not None:
        paths = [kubeconfig]
    elif environ.get("KUBECONFIG"):
        paths = [Path(p) for p in environ["KUBECONFIG"].split(os.pathsep) if p]
    else:
        paths = [Path(environ.get("HOME", "~")).expanduser() / ".kube" / "config"]
    return from_files(paths)


def in_cluster(environ: Mapping[str, str] = os.environ, account: Path = SERVICE_ACCOUNT) -> Access:
    """The API server's Service and the Pod's service-account token (read again as it rotates) and CA."""
    host, port = environ["KUBERNETES_SERVICE_HOST"], environ["KUBERNETES_SERVICE_PORT"]
    token, ca = account / "token", account / "ca.crt"
    for needed in (token, ca):
        if not needed.is_file():
            raise KubeConfigError(f"in-cluster config: {needed} does not exist")
    host = f"[{host}]" if ":" in host else host
    return Access(server=f"https://{host}:{port}", ca_file=str(ca), authorization=_TokenFile(token))


def from_files(paths: list[Path]) -> Access:
    """The current context of the kubeconfig merged from ``paths`` (missing ones skipped, as kubectl does)."""
    merged: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {"clusters": {}, "users": {}, "contexts": {}}
    current = ""
    read_any = False
    for path in paths:
        if not path.is_file():
            continue
        read_any = True
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise KubeConfigError(f"cannot read kubeconfig {path}: {err}") from None
        if not isinstance(doc, dict):
            raise KubeConfigError(f"kubeconfig {path} is not a mapping")
        current = current or doc.get("current-context") or ""
        for section, key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for entry in doc.get(section) or []:
                if isinstance(entry, dict) and entry.get("name") and entry["name"] not in merged[section]:
                    merged[section][entry["name"]] = (entry.get(key) or {}, path.resolve().parent)
    if not read_any:
        raise KubeConfigError(f"no kubeconfig found at {os.pathsep.join(map(str, paths))}, and not inside a Pod")
    if current not in merged["contexts"]:
        names = ", ".join(sorted(merged["contexts"])) or "none"
        raise KubeConfigError(f"kubeconfig: current-context {current!r} is not one of its contexts ({names})")
    context, _ = merged["contexts"][current]
    if context.get("cluster") not in merged["clusters"]:
        raise KubeConfigError(f"kubeconfig: context {current!r} names cluster {context.get('cluster')!r}, which is not defined")
    cluster, cluster_dir = merged["clusters"][context["cluster"]]
    user, user_dir = merged["users"].get(context.get("user") or "", ({}, cluster_dir))
    return _access(cluster, cluster_dir, user, user_dir)


def _access(cluster: dict[str, Any], cluster_dir: Path, user: dict[str, Any], user_dir: Path) -> Access:
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise KubeConfigError("kubeconfig: the cluster has no server")
    cert_file = _file(user, "client-certificate", user_dir)
    key_file = _file(user, "client-key", user_dir)
    authorization: Authorization = _no_authorization
    if user.get("token") or user.get("tokenFile"):
        authorization = _static(f"Bearer {user['token']}") if user.get("token") \
            else _TokenFile(_resolve(user["tokenFile"], user_dir))
    elif user.get("exec"):
        plugin = _ExecPlugin(user["exec"], user_dir, cluster)
        authorization = plugin
        if plugin.cert_pem is not None:  # a plugin may answer with a client certificate instead
            cert_file, key_file = _temp_file(plugin.cert_pem), _temp_file(plugin.key_pem or "")
    elif user.get("auth-provider"):
        authorization = _auth_provider(user["auth-provider"], user_dir)
    elif user.get("username") is not None and user.get("password") is not None:
        pair = f"{user['username']}:{user['password']}".encode()
        authorization = _static("Basic " + base64.b64encode(pair).decode())
    return Access(
        server=server,
        ca_file=_file(cluster, "certificate-authority", cluster_dir),
        verify=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=cluster.get("tls-server-name") or None,
        cert_file=cert_file, key_file=key_file,
        proxy=cluster.get("proxy-url") or None,
        authorization=authorization)


def _static(value: str) -> Authorization:
    return lambda: value


def _resolve(path: str, base: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def _file(section: dict[str, Any], key: str, base: Path) -> str | None:
    """A file the kubeconfig names (``key``), or its inline ``key-data`` (base64) written to a private file."""
    if section.get(f"{key}-data"):
        try:
            data = base64.b64decode(section[f"{key}-data"], validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            raise KubeConfigError(f"kubeconfig: {key}-data is not base64-encoded PEM") from None
        return _temp_file(data)
    if section.get(key):
        path = _resolve(section[key], base)
        if not path.is_file():
            raise KubeConfigError(f"kubeconfig: {key} {path} does not exist")
        return str(path)
    return None


_temp_dir: str | None = None


def _temp_file(content: str) -> str:
    """A file only this user can read, removed when the process ends (``ssl`` loads certificates
    and keys from files only)."""
    global _temp_dir
    if _temp_dir is None:
        _temp_dir = tempfile.mkdtemp(prefix="batchd-kube-")
        atexit.register(shutil.rmtree, _temp_dir, ignore_errors=True)
    fd, path = tempfile.mkstemp(dir=_temp_dir)
    with os.fdopen(fd, "w") as f:
        f.write(content)
    return path


class _TokenFile:
    """A bearer token read from a file, and read again every :data:`TOKEN_FILE_PERIOD` seconds."""

    def __init__(self, path: Path) -> None:
        self.path, self.period = path, TOKEN_FILE_PERIOD
        self._lock = threading.Lock()
        self._value, self._read_at = self._read(), time.monotonic()

    def _read(self) -> str:
        try:
            token = self.path.read_text().strip()
        except OSError as err:
            raise KubeConfigError(f"cannot read token file {self.path}: {err}") from None
        if not token:
            raise KubeConfigError(f"token file {self.path} is empty")
        return f"Bearer {token}"

    def __call__(self) -> str:
        with self._lock:
            if time.monotonic() - self._read_at >= self.period:
                try:
                    self._value = self._read()
                except KubeConfigError:
                    pass  # mid-rotation: the token read last is still good for a while
                self._read_at = time.monotonic()
            return self._value


class _Expiring:
    """A token that is renewed (``_renew``) once it is about to expire; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: str | None = None
        self._expiry: datetime | None = None

    def _renew(self) -> tuple[str, datetime | None]:
        raise NotImplementedError

    def __call__(self) -> str | None:
        with self._lock:
            if self._value is None or (self._expiry is not None and datetime.now(UTC) + EXPIRY_MARGIN >= self._expiry):
                self._value, self._expiry = self._renew()
            return self._value


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        ts = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise KubeConfigError(f"unreadable expirationTimestamp {value!r}") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


class _ExecPlugin(_Expiring):
    """A credential plugin (``users[].user.exec``): run at load, and again once its token expires."""

    def __init__(self, spec: dict[str, Any], base: Path, cluster: dict[str, Any]) -> None:
        super().__init__()
        if not spec.get("command") or not spec.get("apiVersion"):
            raise KubeConfigError("kubeconfig: exec needs command and apiVersion")
        if spec.get("interactiveMode") == "Always":
            raise KubeConfigError(f"exec plugin {spec['command']} asks for a terminal (interactiveMode: Always), "
                                  "which the worker does not have")
        self.spec, self.base, self.cluster = spec, base, cluster
        self.cert_pem: str | None = None
        self.key_pem: str | None = None
        self()  # at start: a plugin that fails stops the worker with its error, not the first request

    def _renew(self) -> tuple[str, datetime | None]:
        info: dict[str, Any] = {"apiVersion": self.spec["apiVersion"], "kind": "ExecCredential",
                                "spec": {"interactive": False}}
        if self.spec.get("provideClusterInfo"):
            info["spec"]["cluster"] = _cluster_info(self.cluster)
        env = {**os.environ, **{e["name"]: e["value"] for e in self.spec.get("env") or []},
               "KUBERNETES_EXEC_INFO": json.dumps(info)}
        command = self.spec["command"]
        if os.sep in command and not os.path.isabs(command):
            command = str(self.base / command)  # a path relative to the kubeconfig, as kubectl resolves it
        try:
            done = subprocess.run([command, *(self.spec.get("args") or [])], env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=CREDENTIAL_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            hint = f" ({self.spec['installHint']})" if self.spec.get("installHint") else ""
            raise KubeConfigError(f"exec plugin {command}: {err}{hint}") from None
        if done.returncode != 0:
            raise KubeConfigError(f"exec plugin {command} exited {done.returncode}: {done.stderr.strip()[:500]}")
        try:
            out = json.loads(done.stdout)
            status = out["status"]
        except (ValueError, KeyError, TypeError):
            raise KubeConfigError(f"exec plugin {command}: its output is not an ExecCredential with a status") from None
        if out.get("apiVersion") != self.spec["apiVersion"]:
            raise KubeConfigError(f"exec plugin {command} answered {out.get('apiVersion')}, "
                                  f"not the {self.spec['apiVersion']} asked for")
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            self.cert_pem, self.key_pem = status["clientCertificateData"], status["clientKeyData"]
        if not status.get("token") and self.cert_pem is None:
            raise KubeConfigError(f"exec plugin {command} gave neither a token nor a client certificate and key")
        if not status.get("token"):
            return "", None  # the certificate, loaded once at start, serves until the worker restarts
        return f"Bearer {status['token']}", _timestamp(status.get("expirationTimestamp"))

    def __call__(self) -> str | None:
        return super().__call__() or None


def _cluster_info(cluster: dict[str, Any]) -> dict[str, Any]:
    """The cluster as an exec plugin is told of it (``provideClusterInfo``), its own settings included."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data", "proxy-url"):
        if cluster.get(key):
            info[key] = cluster[key]
    for ext in cluster.get("extensions") or []:
        if ext.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = ext.get("extension")
    return info


def _auth_provider(provider: dict[str, Any], base: Path) -> Authorization:
    name = provider.get("name")
    if name == "oidc":
        return _OIDC(provider.get("config") or {}, base)
    raise KubeConfigError(f"kubeconfig: auth-provider {name!r} is not supported (kubectl dropped it too); "
                          "use its exec plugin, e.g. gke-gcloud-auth-plugin or kubelogin")


class _OIDC(_Expiring):
    """The ``oidc`` auth provider: its ID token, renewed with its refresh token once it expires.

    The renewed tokens are kept in memory; the kubeconfig file is not written.
    """

    def __init__(self, config: dict[str, Any], base: Path) -> None:
        super().__init__()
        if not config.get("id-token"):
            raise KubeConfigError("kubeconfig: the oidc auth-provider has no id-token")
        self.config = dict(config)
        self.ca = _file(config, "idp-certificate-authority", base)
        self._value, self._expiry = f"Bearer {config['id-token']}", _jwt_expiry(config["id-token"])

    def _renew(self) -> tuple[str, datetime | None]:
        cfg = self.config
        if not (cfg.get("refresh-token") and cfg.get("idp-issuer-url") and cfg.get("client-id")):
            raise KubeConfigError("oidc: the id-token expired and there is no refresh-token, idp-issuer-url and client-id")
        context = ssl.create_default_context(cafile=self.ca)
        issuer = cfg["idp-issuer-url"].rstrip("/")
        try:
            with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration", timeout=CREDENTIAL_TIMEOUT,
                                        context=context) as r:
                endpoint = json.load(r)["token_endpoint"]
            form = {"grant_type": "refresh_token", "refresh_token": cfg["refresh-token"], "client_id": cfg["client-id"]}
            if cfg.get("client-secret"):
                form["client_secret"] = cfg["client-secret"]
            body = urllib.parse.urlencode(form).encode()
            with urllib.request.urlopen(urllib.request.Request(endpoint, data=body), timeout=CREDENTIAL_TIMEOUT,
                                        context=context) as r:
                tokens = json.load(r)
            id_token = tokens["id_token"]
        except (OSError, ValueError, KeyError) as err:
            raise KubeConfigError(f"oidc: could not refresh the id-token at {issuer}: {err}") from None
        cfg["id-token"] = id_token
        cfg["refresh-token"] = tokens.get("refresh_token") or cfg["refresh-token"]
        return f"Bearer {id_token}", _jwt_expiry(id_token)


def _jwt_expiry(token: str) -> datetime | None:
    """A JWT's ``exp``, read without verifying it (the API server verifies it)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return datetime.fromtimestamp(int(claims["exp"]), UTC)
    except (IndexError, ValueError, KeyError, TypeError):
        return None
