"""``batchd cluster``: upstream's control plane on loopback, built by ``make upstream``.

Layer: worker. etcd, kube-apiserver (RBAC, service-account tokens, the default admission plugins
and ``OwnerReferencesPermissionEnforcement``), kube-controller-manager without the controllers
batchd replaces (unless ``upstream_controllers`` names them), kube-scheduler, and kwok with a few
fake Nodes; ``batchd cluster`` and ``batchd dev --kube cluster`` apply deploy/policy's admission
policy too, as an operator would (the tests' control plane has none: it must let them make the
objects whose hold they test). It is the second backend of the tests and of ``batchd dev --kube
cluster``.

Pods are played by kwok's stages (hack/upstream/kwok/stages.yaml) where a stage can express
what kubesim's fake kubelet does with the Pod's ``kubesim.batchd.io/`` annotations; the other
Pods (:func:`played_by_kwok` is false) are played by kubesim's own kubelet, run here as a client of
the API. Both mean the same by an annotation, so one test runs on both backends.

Files in the state directory: ``kubeconfig`` (an admin, ``system:masters``), ``batchd.kubeconfig``
(the ServiceAccount ``batchd-system/batchd`` of deploy/base, bound to its ClusterRole and Role and
nothing more), ``pki/``, ``etcd/`` (the data: a rerun resumes), ``logs/<component>.log`` and
``logs/audit.log`` (kube-apiserver's record of every DELETE of a Job or Pod).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import secrets
import signal
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kube.client import Kube
from kube.config import load_access
from kube.errors import Conflict, KubeError, NotFound
from worker.dev import free_port
from worker.upstream import HACK, bin_dir

log = logging.getLogger("batchd.cluster")

#: kube-controller-manager's controllers that batchd replaces, by the names ``--upstream-controllers`` takes
UPSTREAM_CONTROLLERS = {"job": "job-controller", "cronjob": "cronjob-controller",
                        "ttl-after-finished": "ttl-after-finished-controller"}
DEPLOY_BASE = Path(__file__).resolve().parent.parent / "deploy" / "base"
#: FAIL-CLOSED: the batchd-annotations ValidatingAdmissionPolicy and its binding
DEPLOY_POLICY = DEPLOY_BASE.parent / "policy" / "admission-policy.yaml"
RBAC_FILES = ("namespace.yaml", "serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml",
              "role.yaml", "rolebinding.yaml")
BATCHD_ACCOUNT = ("batchd-system", "batchd")
#: the Lease kube-controller-manager holds when elected (its defaults): namespace, name
CONTROLLER_MANAGER_LEASE = ("kube-system", "kube-controller-manager")
NODES = 4
#: The kubesim annotations kwok's stages play; a Pod with any other, or not restartPolicy Never,
#: is kubesim's kubelet's.
KWOK_ANNOTATIONS = ("kubesim.batchd.io/run-seconds", "kubesim.batchd.io/exit-code", "kubesim.batchd.io/evict")
_PREFIX = "kubesim.batchd.io/"
KWOK_PODS = (  # CEL over the Pod (self): the same predicate as played_by_kwok
    "self.spec.restartPolicy == 'Never' && (!has(self.metadata.annotations) || "
    "self.metadata.annotations.all(k, !k.startsWith('" + _PREFIX + "') || k in ["
    + ", ".join(f"'{a}'" for a in KWOK_ANNOTATIONS) + "]))")
_TOKEN_SECONDS = 30 * 24 * 3600
_READY_TIMEOUT = 120.0


def played_by_kwok(pod: dict[str, Any]) -> bool:
    """Whether kwok's stages play this Pod (else kubesim's kubelet does): :data:`KWOK_PODS`."""
    if (pod.get("spec") or {}).get("restartPolicy") != "Never":
        return False
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return all(not k.startswith(_PREFIX) or k in KWOK_ANNOTATIONS for k in annotations)


class ClusterError(RuntimeError):
    """A component that did not start: its name and the last lines of its log."""


@dataclass
class _Component:
    name: str
    args: Callable[[], list[str]]  # built again on each start: a port may have been picked anew
    ready: Callable[[], bool]
    ports: list[str] = field(default_factory=list)  # keys of ControlPlane.ports it binds
    proc: subprocess.Popen[bytes] | None = None


class ControlPlane:
    """Start with :meth:`start`, stop with :meth:`stop` (everything started, newest first)."""

    def __init__(self, state_dir: Path, *, upstream_controllers: Iterable[str] = (), nodes: int = NODES,
                 admission_policy: bool = False, compaction_seconds: int | None = None,
                 controller_manager_qps: tuple[int, int] | None = None, audited_users: Iterable[str] = ()) -> None:
        """``controller_manager_qps``: kube-controller-manager as it ships (its defaults: 20 / 30 and 5
        concurrent syncs of each batch controller) but this ``--kube-api-qps`` and burst; None: tuned for
        the tests (200 / 400, 20 syncs). ``audited_users``: every request of theirs is in the audit
        log (by default only the DELETEs of Jobs and Pods are)."""
        self.dir = state_dir.resolve()
        self.admission_policy = admission_policy
        self.compaction_seconds = compaction_seconds  # kube-apiserver's own default (5 minutes) when None
        self.upstream_controllers = _controllers(upstream_controllers)
        self.controller_manager_qps = controller_manager_qps
        self.audited_users = tuple(audited_users)
        self.nodes = nodes
        self.bin = bin_dir()
        self.pki = self.dir / "pki"
        self.logs = self.dir / "logs"
        self.kubeconfig = self.dir / "kubeconfig"
        self.batchd_kubeconfig = self.dir / "batchd.kubeconfig"
        self.audit_log = self.logs / "audit.log"
        self.ports: dict[str, int] = {}
        self._token = ""
        self._started: list[_Component] = []
        self._kubelet: _RemoteKubelet | None = None
        self.components = self._components()

    # -- start and stop --------------------------------------------------------------------

    def start(self) -> None:
        for d in (self.dir, self.pki, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        try:
            self._pki()
            for comp in self.components:
                if comp.name == "kwok":
                    self._nodes()
                self._launch(comp)
            self._rbac()
            self._kubelet = _RemoteKubelet(Kube(load_access(self.kubeconfig)), Kube(load_access(self.kubeconfig)))
            self._kubelet.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self._kubelet is not None:
            self._kubelet.stop()
            self._kubelet = None
        while self._started:
            halt(self._started.pop().proc)

    def restart(self, name: str) -> None:
        """Stop one component (SIGKILL, as a crash) and start it again on the same ports."""
        comp = next(c for c in self.components if c.name == name)
        if comp.proc is not None:
            comp.proc.kill()
            comp.proc.wait()
        self._started.remove(comp)
        self._launch(comp)

    def reconfigure_controller_manager(self, upstream_controllers: Iterable[str],
                                       qps: tuple[int, int] | None = None) -> None:
        """Run kube-controller-manager again (stopped as a rollout stops it) with these batch
        controllers and API rate: one control plane, upstream's controllers and then batchd's."""
        self.upstream_controllers = _controllers(upstream_controllers)
        self.controller_manager_qps = qps
        comp = next(c for c in self.components if c.name == "kube-controller-manager")
        halt(comp.proc)
        self._started.remove(comp)
        # a killed kube-controller-manager does not release its Lease: its successor would wait out the 15 s
        self.admin().delete("Lease", *CONTROLLER_MANAGER_LEASE)
        self._launch(comp)

    def pid(self, name: str) -> int:
        """The process id of a running component (a bench reads its CPU and memory)."""
        proc = next(c for c in self.components if c.name == name).proc
        if proc is None or proc.poll() is not None:
            raise ClusterError(f"{name} is not running")
        return proc.pid

    def _launch(self, comp: _Component) -> None:
        """Start ``comp`` and wait until it is ready; a port taken meanwhile is picked anew (3 tries)."""
        for attempt in range(3):
            logf = (self.logs / f"{comp.name}.log").open("ab")
            comp.proc = subprocess.Popen(comp.args(), stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, cwd=self.dir)
            logf.close()
            self._started.append(comp)
            deadline = time.monotonic() + _READY_TIMEOUT
            while time.monotonic() < deadline:
                if comp.proc.poll() is not None:
                    break
                with contextlib.suppress(OSError, ValueError, KubeError, urllib.error.URLError):
                    if comp.ready():
                        log.info("%s is ready", comp.name)
                        return
                time.sleep(0.2)
            self._started.remove(comp)
            halt(comp.proc)
            tail = log_tail(self.logs / f"{comp.name}.log")
            if comp.ports and "address already in use" in tail and attempt < 2:
                for key in comp.ports:
                    self.ports[key] = free_port()
                continue
            how = (f"exited with {comp.proc.returncode}" if comp.proc.returncode is not None
                   else f"was not ready in {_READY_TIMEOUT:.0f} s")
            raise ClusterError(f"{comp.name} {how}; the last lines of "
                               f"{self.logs / (comp.name + '.log')}:\n{tail}")

    # -- the components --------------------------------------------------------------------

    def _port(self, key: str) -> int:
        if key not in self.ports:
            self.ports[key] = free_port()
        return self.ports[key]

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self._port('apiserver')}"

    def _components(self) -> list[_Component]:
        b, p = self.bin, self.pki
        kube_common = ["--kubeconfig", str(self.kubeconfig), "--bind-address", "127.0.0.1"]
        tuned = ["--kube-api-qps", "200", "--kube-api-burst", "400"]

        def etcd() -> list[str]:
            client, peer = self._port("etcd"), self._port("etcd-peer")
            return [str(b / "etcd"), "--name", "batchd", "--data-dir", str(self.dir / "etcd"),
                    "--listen-client-urls", f"http://127.0.0.1:{client}",
                    "--advertise-client-urls", f"http://127.0.0.1:{client}",
                    "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                    "--initial-cluster", f"batchd=http://127.0.0.1:{peer}",
                    # a test control plane: fsync would make every write wait on this machine's disk
                    "--unsafe-no-fsync", "--quota-backend-bytes", str(8 << 30), "--log-level", "warn"]

        def apiserver() -> list[str]:
            return [str(b / "kube-apiserver"), "--etcd-servers", f"http://127.0.0.1:{self._port('etcd')}",
                    "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
                    "--secure-port", str(self._port("apiserver")),
                    "--tls-cert-file", str(p / "apiserver.crt"), "--tls-private-key-file", str(p / "apiserver.key"),
                    "--client-ca-file", str(p / "ca.crt"), "--token-auth-file", str(p / "tokens.csv"),
                    "--authorization-mode", "Node,RBAC",
                    "--enable-admission-plugins", "OwnerReferencesPermissionEnforcement",
                    "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
                    "--service-account-key-file", str(p / "sa.pub"),
                    "--service-account-signing-key-file", str(p / "sa.key"),
                    "--service-cluster-ip-range", "10.96.0.0/16", "--allow-privileged=true",
                    "--max-requests-inflight", "800", "--max-mutating-requests-inflight", "400",
                    "--audit-policy-file", str(self._audit_policy()), "--audit-log-path", str(self.audit_log),
                    # never rotated (its default is at 100 MB): readers count from an offset into one file
                    "--audit-log-maxsize", "1000000",
                    *(["--etcd-compaction-interval", f"{self.compaction_seconds}s"] if self.compaction_seconds else []),
                    "--profiling=false", "--v=1"]

        def controller_manager() -> list[str]:
            disabled = [name for key, name in UPSTREAM_CONTROLLERS.items() if key not in self.upstream_controllers]
            qps = self.controller_manager_qps
            rate = (["--kube-api-qps", str(qps[0]), "--kube-api-burst", str(qps[1])] if qps else
                    [*tuned, "--concurrent-job-syncs", "20", "--concurrent-cron-job-syncs", "20"])
            # as it ships, it renews a Lease every 2 s, as batchd's worker does: a bench counts both
            elect = [] if qps else ["--leader-elect=false"]
            return [str(b / "kube-controller-manager"), *kube_common, *rate, *elect,
                    "--secure-port", str(self._port("controller-manager")),
                    "--controllers", ",".join(["*", *(f"-{name}" for name in disabled)]),
                    "--use-service-account-credentials=true",
                    "--service-account-private-key-file", str(p / "sa.key"), "--root-ca-file", str(p / "ca.crt"),
                    "--v=1"]

        def scheduler() -> list[str]:
            return [str(b / "kube-scheduler"), *kube_common, *tuned, "--leader-elect=false",
                    "--secure-port", str(self._port("scheduler")), "--v=1"]

        def kwok() -> list[str]:
            stages = self.dir / "kwok-stages.yaml"
            stages.write_text((HACK / "kwok" / "stages.yaml").read_text().replace("${KWOK_PODS}", KWOK_PODS))
            return [str(b / "kwok"), "--kubeconfig", str(self.kubeconfig), "--config", str(stages),
                    "--manage-nodes-with-label-selector", "batchd.io/kwok-node=true",
                    "--node-lease-duration-seconds", "40", "--cidr", "10.244.0.0/16", "--node-ip", "10.0.0.10", "--v", "WARN",
                    "--server-address", f"127.0.0.1:{self._port('kwok')}"]

        return [
            _Component("etcd", etcd, self._etcd_ready, ["etcd", "etcd-peer"]),
            _Component("kube-apiserver", apiserver, self._apiserver_ready, ["apiserver"]),
            _Component("kube-controller-manager", controller_manager, lambda: self._healthz("controller-manager"),
                       ["controller-manager"]),
            _Component("kube-scheduler", scheduler, lambda: self._healthz("scheduler"), ["scheduler"]),
            _Component("kwok", kwok, self._nodes_ready, ["kwok"]),
        ]

    def _audit_policy(self) -> Path:
        """The API server's audit log records every DELETE of a Job or Pod (the tests count them), and
        every request of the audited users and on kube-controller-manager's Lease (a bench counts them)."""
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
            "rules": [*([{"level": "Metadata", "users": list(self.audited_users)}] if self.audited_users else []),
                      {"level": "Metadata", "namespaces": [CONTROLLER_MANAGER_LEASE[0]], "resources": [{
                          "group": "coordination.k8s.io", "resources": ["leases"],
                          "resourceNames": [CONTROLLER_MANAGER_LEASE[1]]}]},
                      {"level": "Metadata", "verbs": ["delete"],
                       "resources": [{"group": "batch", "resources": ["jobs"]}, {"group": "", "resources": ["pods"]}]},
                      {"level": "None"}]}))
        return policy

    def _etcd_ready(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self._port('etcd')}/health", timeout=2) as resp:
            return b'"true"' in resp.read()

    def _apiserver_ready(self) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        req = urllib.request.Request(f"{self.server}/readyz", headers={"Authorization": f"Bearer {self._token}"})
        with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
            return resp.status == 200

    def _healthz(self, key: str) -> bool:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # a component's own self-signed certificate
        with urllib.request.urlopen(f"https://127.0.0.1:{self._port(key)}/healthz", timeout=2, context=ctx) as resp:
            return resp.status == 200

    def _nodes_ready(self) -> bool:
        nodes = self.admin().request("GET", "/api/v1/nodes", query={"labelSelector": "batchd.io/kwok-node=true"})["items"]
        return len(nodes) >= self.nodes and all(
            any(c.get("type") == "Ready" and c.get("status") == "True" for c in (n.get("status") or {}).get("conditions") or [])
            for n in nodes)

    # -- identities, Nodes and RBAC -------------------------------------------------------

    def admin(self) -> Kube:
        return Kube(load_access(self.kubeconfig))

    def _pki(self) -> None:
        """A CA, the API server's serving certificate, the service-account key pair and an admin token."""
        p = self.pki
        tokens = p / "tokens.csv"
        if tokens.exists():
            self._token = tokens.read_text().split(",", 1)[0]
        else:
            def openssl(*args: str) -> None:
                subprocess.run(["openssl", *args], cwd=p, check=True, capture_output=True, timeout=60)
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
                    "-days", "3650", "-subj", "/CN=batchd-cluster-ca")
            openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
                    "-subj", "/CN=kube-apiserver")
            (p / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,"
                                       "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n")
            openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", "apiserver.crt", "-days", "3650", "-extfile", "san.ext")
            openssl("genrsa", "-out", "sa.key", "2048")
            openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
            self._token = secrets.token_hex(24)
            tokens.write_text(f'{self._token},batchd-admin,batchd-admin,"system:masters"\n')
            tokens.chmod(0o600)
        _write_kubeconfig(self.kubeconfig, self.server, self.pki / "ca.crt", self._token, "admin")

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        """The kubectl built with the control plane, as the admin."""
        done = subprocess.run([str(self.bin / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args], input=stdin,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def _nodes(self) -> None:
        nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": f"kwok-node-{n}", "labels": {"batchd.io/kwok-node": "true", "kubernetes.io/os": "linux",
                                                 "kubernetes.io/hostname": f"kwok-node-{n}", "type": "kwok"}}}
                 for n in range(self.nodes)]
        self.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(nodes))

    def _rbac(self) -> None:
        """deploy/base's Namespace, ServiceAccount and RBAC, deploy/policy's admission policy if asked
        for, and kubesim's deny-create as a policy (hack/upstream/deny-create.yaml); then
        batchd.kubeconfig, a token of that account."""
        policy = ["-f", str(DEPLOY_POLICY)] if self.admission_policy else []
        self.kubectl("apply", "--server-side", *(arg for name in RBAC_FILES for arg in ("-f", str(DEPLOY_BASE / name))),
                     *policy, "-f", str(HACK / "deny-create.yaml"))
        ns, name = BATCHD_ACCOUNT
        token = self.admin().request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": _TOKEN_SECONDS}})["status"]["token"]
        _write_kubeconfig(self.batchd_kubeconfig, self.server, self.pki / "ca.crt", token, f"system:serviceaccount:{ns}:{name}")


def _controllers(names: Iterable[str]) -> tuple[str, ...]:
    unknown = set(names) - set(UPSTREAM_CONTROLLERS)
    if unknown:
        raise ValueError(f"unknown upstream controllers {sorted(unknown)}: choose from {sorted(UPSTREAM_CONTROLLERS)}")
    return tuple(sorted(set(names)))


def _write_kubeconfig(path: Path, server: str, ca: Path, token: str, user: str) -> None:
    """A kubeconfig that carries its CA (``certificate-authority-data``), so it works where the state
    directory is not, as in the image test's container."""
    ca_data = base64.b64encode(ca.read_bytes()).decode()
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "batchd-cluster",
           "clusters": [{"name": "batchd-cluster", "cluster": {"server": server, "certificate-authority-data": ca_data}}],
           "users": [{"name": user, "user": {"token": token}}],
           "contexts": [{"name": "batchd-cluster", "context": {"cluster": "batchd-cluster", "user": user}}]}
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)


def audited_deletes(state_dir: Path, resource: str, namespace: str, username: str | None = None) -> int:
    """Successful DELETEs of ``resource`` (``jobs`` or ``pods``) in ``namespace``, by ``username`` if
    given, from kube-apiserver's audit log of the control plane in ``state_dir``."""
    count = 0
    for line in (state_dir / "logs" / "audit.log").read_text().splitlines():
        entry = json.loads(line)
        ref = entry.get("objectRef") or {}
        if (entry.get("verb") == "delete" and ref.get("resource") == resource and ref.get("namespace") == namespace
                and (username is None or (entry.get("user") or {}).get("username") == username)
                and (entry.get("responseStatus") or {}).get("code") == 200):
            count += 1
    return count


def wait_for_default_account(kube: Kube, namespace: str, timeout: float = 60.0) -> None:
    """Wait until kube-controller-manager has made ``namespace``'s ``default`` ServiceAccount: until
    then the ServiceAccount admission plugin refuses the namespace's Pods."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            kube.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            return
        except NotFound:
            if time.monotonic() > deadline:
                raise ClusterError(f"no ServiceAccount {namespace}/default after {timeout:.0f} s") from None
            time.sleep(0.05)


# -- kubesim's kubelet as a client of the API --------------------------------------------------


class _RemoteKubelet:
    """kubesim's :class:`~kubesim.kubelet.Kubelet` playing the Pods kwok does not (:func:`played_by_kwok`),
    on kwok's Nodes, through the API: a watch feeds it, status and deletes go back as requests.

    The Kubelet was written against kubesim's store; :class:`_ApiStore` and :class:`_ApiLifecycle`
    give it the three calls it makes there.
    """

    def __init__(self, watcher: Kube, writer: Kube) -> None:
        self.watcher, self.writer = watcher, writer
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="remote-kubelet", daemon=True)
        self._stopping = threading.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(10)

    def _run(self) -> None:
        from kubesim.kubelet import Kubelet
        from kubesim.store import RealClock

        asyncio.set_event_loop(self._loop)
        store = _ApiStore(self.writer)
        kubelet = Kubelet(store, _ApiLifecycle(self.writer), RealClock(), tick=0.05)  # type: ignore[arg-type]
        threading.Thread(target=self._watch, args=(kubelet, store), name="remote-kubelet-watch", daemon=True).start()
        self._task = self._loop.create_task(kubelet.run())
        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._task)
        self._loop.close()

    def _watch(self, kubelet: Any, store: _ApiStore) -> None:
        """List and watch the bound Pods; hand the kubelet's own to it as kubesim's store events.

        A watch that ends is resumed from the last resourceVersion it gave (bookmarks too); after
        an error the Pods are listed again and compared with what was known, so that no change
        made in between is lost: a deletion missed would leave its Pod running for ever.
        """
        from kubesim.gc import PODS
        from kubesim.store import WatchEvent

        known: dict[str, str] = {}  # uid -> resourceVersion, as delivered (this thread's own view)

        def deliver(etype: str, pod: dict[str, Any]) -> None:  # in the kubelet's loop
            uid = pod["metadata"]["uid"]
            if etype == "DELETED":
                store.pods.pop(uid, None)
            else:
                if uid not in store.pods:
                    etype = "ADDED"  # the kubelet binds (here: starts) a Pod it sees for the first time
                store.pods[uid] = pod
            kubelet.on_event(WatchEvent(etype, pod, PODS, 0))

        def send(etype: str, pod: dict[str, Any]) -> None:
            meta = pod["metadata"]
            if etype == "DELETED":
                known.pop(meta["uid"], None)
            else:
                known[meta["uid"]] = meta["resourceVersion"]
            self._loop.call_soon_threadsafe(deliver, etype, pod)

        rv: str | None = None
        while not self._stopping.is_set():
            try:
                if rv is None:
                    listed = self.watcher.list("Pod", field_selector="spec.nodeName!=")
                    mine = {p["metadata"]["uid"]: p for p in listed["items"] if not played_by_kwok(p)}
                    for uid, pod in mine.items():
                        if known.get(uid) != pod["metadata"]["resourceVersion"]:
                            send("MODIFIED", pod)
                    for uid in set(known) - set(mine):
                        send("DELETED", {"metadata": {"uid": uid}})
                    rv = listed["metadata"]["resourceVersion"]
                for event in self.watcher.watch("Pod", None, resource_version=rv, field_selector="spec.nodeName!=",
                                                timeout_seconds=60):
                    if self._stopping.is_set():
                        return
                    pod, etype = event.get("object") or {}, event.get("type")
                    if etype == "ERROR":  # 410: too old to resume from
                        rv = None
                        break
                    rv = pod["metadata"]["resourceVersion"]
                    if etype in ("ADDED", "MODIFIED", "DELETED") and not played_by_kwok(pod):
                        send(str(etype), pod)
            except Exception:  # the API restarting, a dropped watch: list again
                rv = None
                if not self._stopping.is_set():
                    log.debug("remote kubelet: watch failed, listing again", exc_info=True)
                    time.sleep(0.5)


class _ApiStore:
    """The store calls kubesim's kubelet makes, answered from the watch and sent as requests."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> the Pod as last seen or written

    def get_by_uid(self, uid: str) -> tuple[Any, dict[str, Any]] | None:
        from kubesim.gc import PODS

        pod = self.pods.get(uid)
        return (PODS, pod) if pod is not None else None

    def replace(self, _key: Any, pod: dict[str, Any]) -> dict[str, Any]:
        """The kubelet's status write: an unconditional PUT of ``pods/status`` (the kubelet is the
        only writer of its Pods' status; metadata changed by others since is kept by the server)."""
        meta = pod["metadata"]
        body = {**pod, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
        try:
            written = _retried(lambda: self.kube.request(
                "PUT", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", body=body))
        except (NotFound, Conflict):
            return pod
        if written.get("metadata", {}).get("uid") == meta["uid"]:
            self.pods[meta["uid"]] = written
        return written


class _ApiLifecycle:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def delete(self, _res: Any, pod: dict[str, Any], options: dict[str, Any] | None) -> tuple[dict[str, Any], bool]:
        meta = pod["metadata"]
        with contextlib.suppress(Conflict, NotFound):
            _retried(lambda: self.kube.delete("Pod", meta["namespace"], meta["name"], uid=meta["uid"],
                                              grace_period_seconds=int((options or {}).get("gracePeriodSeconds") or 0)))
        return pod, False


def _retried(call: Callable[[], Any], tries: int = 6) -> Any:
    """A write of the kubelet's, tried again on a transient failure (a busy or restarting API
    server): kubesim's kubelet does each step once, so a step lost here would leave its Pod stuck."""
    for attempt in range(tries):
        try:
            return call()
        except (NotFound, Conflict):
            raise
        except KubeError:
            if attempt == tries - 1:
                raise
            time.sleep(0.25 * 2**attempt)


# -- batchd cluster ------------------------------------------------------------------------------


def run(state_dir: Path, upstream_controllers: Iterable[str] = ()) -> int:
    """``batchd cluster``: start, print ``running``, stop everything on SIGINT or SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    plane = ControlPlane(state_dir, upstream_controllers=upstream_controllers, admission_policy=True)
    try:
        plane.start()
        print(f"kubeconfig: {plane.kubeconfig} (admin); {plane.batchd_kubeconfig} (batchd's ServiceAccount)")
        print("running", flush=True)
        stop.wait()
    finally:
        plane.stop()
    return 0


def halt(proc: subprocess.Popen[bytes] | None, stop: signal.Signals = signal.SIGTERM, timeout: float = 15.0) -> None:
    """Stop a process started in a session of its own: ``stop`` to its process group, then after
    ``timeout`` SIGKILL to the group and to each child it had (a postmaster's children leave its
    group for sessions of their own)."""
    if proc is None or proc.poll() is not None:
        return
    children = child_pids(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, stop)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, from /proc."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(entry.path, "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def log_tail(log: Path, lines: int = 20, width: int = 600) -> str:
    """A log's last lines, each cut to ``width`` (temporal-server's carry whole stack traces)."""
    try:
        return "\n".join(line if len(line) <= width else line[:width] + " …"
                         for line in log.read_text(errors="replace").splitlines()[-lines:])
    except OSError as err:
        return f"({err})"
