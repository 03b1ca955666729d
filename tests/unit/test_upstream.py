"""`make upstream`'s cache and its errors (worker/upstream.py): a cache that does not match is not
trusted, and what is missing to build is named."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from worker import upstream


def _fake_cache(directory: Path) -> None:
    directory.mkdir(parents=True)
    sizes = {}
    for b in upstream.BINARIES:
        path = directory / b.name
        path.write_bytes(b"#!/bin/sh\n")
        path.chmod(0o755)
        sizes[b.name] = path.stat().st_size
    (directory / ".built").write_text(json.dumps(sizes))


def test_a_complete_cache_is_trusted_and_any_flaw_is_not(tmp_path: Path) -> None:
    _fake_cache(tmp_path / "c")
    assert upstream._intact(tmp_path / "c")
    (tmp_path / "c" / "kube-apiserver").write_bytes(b"cut short")  # another size than stamped
    assert not upstream._intact(tmp_path / "c")
    _fake_cache(tmp_path / "d")
    (tmp_path / "d" / "kwok").unlink()
    assert not upstream._intact(tmp_path / "d")
    _fake_cache(tmp_path / "e")
    (tmp_path / "e" / ".built").unlink()  # a build that died before its stamp
    assert not upstream._intact(tmp_path / "e")


@pytest.mark.skipif(not upstream.shutil.which("go"), reason="needs Go")
def test_binaries_not_built_for_this_checkout_say_how_to_build_them(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHD_UPSTREAM_CACHE", str(tmp_path))
    _fake_cache(tmp_path / "0123456789abcdef")  # another checkout's key
    with pytest.raises(upstream.UpstreamError, match="make upstream"):
        upstream.bin_dir()


def test_without_go_the_build_names_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BATCHD_UPSTREAM_CACHE", str(tmp_path))
    monkeypatch.setattr(upstream.shutil, "which", lambda _name: None)
    with pytest.raises(upstream.UpstreamError, match=r"needs Go 1\.26\.8 or newer on PATH"):
        upstream.build(log=lambda _line: None)
    # a machine without Go still uses a cache built before
    _fake_cache(tmp_path / "built-earlier")
    assert upstream.bin_dir() == tmp_path / "built-earlier"


@pytest.mark.skipif(not upstream.shutil.which("go"), reason="needs Go")
def test_without_the_module_proxy_the_build_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHD_UPSTREAM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "mod"))  # nothing downloaded yet
    monkeypatch.setenv("GOPROXY", "off")
    with pytest.raises(upstream.UpstreamError, match=r"could not be downloaded from the module proxy \(GOPROXY=off\)"):
        upstream.build(log=lambda _line: None)
    assert not list((tmp_path / "cache").glob("*/.built"))
    # the module cache is read-only as Go writes it: make it removable for pytest's clean-up
    subprocess.run(["chmod", "-R", "u+w", str(tmp_path)], check=False)
