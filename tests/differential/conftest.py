"""The differential suite's fixture: :func:`differential` runs one case on kubesim and on the run's
kube-apiserver, in a fresh namespace on each, and holds the two to each other (or to the
difference :data:`tests.differential.known.KNOWN_DIFFERENCES` pins for that case).

Run with ``--backends cluster,kubesim`` (or any list naming ``cluster``): that is what makes the
root conftest start the control plane. The end of the run prints how many cases ran and how many
differed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kube.client import Kube
from kube.config import load_access
from tests.differential.harness import MANAGER, Case, Side, compare, normalise, run
from tests.differential.known import KNOWN_DIFFERENCES

_PROPERTY = "differential"


@pytest.fixture(scope="session")
def sides(request: pytest.FixtureRequest, kubesim_server: Any) -> Iterator[tuple[Side, Side, Kube]]:
    """kubesim, kube-apiserver, and an admin client of kube-apiserver for what only it needs."""
    if "cluster" not in str(request.config.getoption("--backends")).split(","):
        pytest.skip("the differential suite needs kube-apiserver: --backends including cluster")
    cluster_dir: Path = request.getfixturevalue("cluster_dir")
    kubesim = Side("kubesim", Path(kubesim_server.kubeconfig))
    cluster = Side("cluster", cluster_dir / "kubeconfig")
    yield kubesim, cluster, Kube(load_access(cluster_dir / "kubeconfig"))


@pytest.fixture
def differential(sides: tuple[Side, Side, Kube], request: pytest.FixtureRequest) -> Iterator[Callable[[Case], None]]:
    """Run a case on both servers and compare; namespaces made on the way are deleted after."""
    kubesim, cluster, admin = sides
    made: list[str] = []

    def check(case: Case) -> None:
        from worker.cluster import wait_for_default_account

        ns = f"d-{uuid.uuid4().hex[:10]}"
        for side in (kubesim, cluster):
            reply = side.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}},
                                 query={"fieldManager": MANAGER})
            assert reply.status == 201, (side.name, reply.body)
        made.append(ns)
        made.extend(f"{ns}-{suffix}" for suffix in case.extra_namespaces)
        if case.pods:
            wait_for_default_account(admin, ns)  # the ServiceAccount admission plugin refuses Pods until then
        with ThreadPoolExecutor(2) as pool:
            ours, theirs = pool.map(lambda side: run(side, case, ns), (kubesim, cluster))
        diff = compare(normalise(ours, ns), normalise(theirs, ns))
        known = KNOWN_DIFFERENCES.get(case.name)
        request.node.user_properties.append((_PROPERTY, json.dumps(
            {"case": case.name, "differs": bool(diff), "kept": known is not None and diff == known.diff})))
        if known is not None:
            assert diff == known.diff, (
                f"{case.name}: the kept difference ({known.reason}) is no longer what it was; "
                f"now:\n{_show(diff)}")
        else:
            assert not diff, f"{case.name}: kubesim and kube-apiserver differ:\n{_show(diff)}"

    yield check
    for ns in made:
        for side in (kubesim, cluster):
            side.request("DELETE", f"/api/v1/namespaces/{ns}")


def _show(diff: dict[str, tuple[Any, Any]]) -> str:
    return "\n".join(f"  {path}\n    kubesim:        {json.dumps(a)}\n    kube-apiserver: {json.dumps(b)}"
                     for path, (a, b) in diff.items()) or "  (none)"
