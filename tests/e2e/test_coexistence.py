"""Tier 4: batchd beside kube-controller-manager on upstream's control plane, as docs/operations.md
("Which objects batchd takes") tells an operator to run them.

A control plane of its own whose kube-controller-manager runs its Job controller (``batchd cluster
--upstream-controllers job``), with its CronJob and TTL controllers off. batchd runs with the
production defaults: Jobs whose ``spec.managedBy`` names it, CronJobs labelled
``batchd.io/managed=true``. Each controller runs only its own Jobs, and neither touches the other's
Pods: who wrote what is read from the objects' ``managedFields`` (batchd's requests say
``User-Agent: batchd``; kube-controller-manager's say ``kube-controller-manager``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.client import Client

from kube.client import Kube
from tests.conftest import (
    backends,
    eventually,
    identities,
    new_namespace,
    routed,
    running,
    workflow_exists,
)
from tests.integration.test_job import condition, job_manifest, pods_of
from worker.cluster import ControlPlane
from workflows.identity import job_workflow_id

pytestmark = pytest.mark.xdist_group("coexistence")


@pytest.fixture(scope="module")
def upstream_jobs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """The admin client of a control plane whose kube-controller-manager runs Jobs too."""
    if "cluster" not in backends(request.config):
        pytest.skip("needs upstream's control plane (--backends cluster)")
    plane = ControlPlane(tmp_path_factory.mktemp("coexistence") / "plane", upstream_controllers=("job",))
    plane.start()
    try:
        yield identities(plane.kubeconfig, plane.batchd_kubeconfig, on_cluster=True)
    finally:
        plane.stop()


def writers(obj: dict[str, Any], subresource: str | None = None) -> set[str]:
    """The field managers that wrote ``obj`` (or only its ``subresource``). The tests' own client
    says ``batchd`` too, so a Job's creation tells nothing: its status does."""
    return {entry.get("manager", "") for entry in obj["metadata"].get("managedFields") or []
            if subresource is None or entry.get("subresource") == subresource}


def kubectl_job(name: str, *, managed_by: str | None) -> dict[str, Any]:
    manifest = job_manifest(name, completions=3, parallelism=3, run_seconds=1)
    if managed_by is None:
        del manifest["spec"]["managedBy"]
    return manifest


@pytest.mark.timeout(300)
async def test_each_job_controller_runs_only_its_own_jobs_and_pods(client: Client, upstream_jobs: Kube,
                                                                   task_queue: str) -> None:
    kube = upstream_jobs
    namespace = new_namespace(kube)
    async with running(client, kube, task_queue, namespace, ttl_scope="managed") as bridge:
        theirs = kube.create("Job", namespace, kubectl_job("theirs", managed_by=None))
        ours = kube.create("Job", namespace, kubectl_job("ours", managed_by="batchd.io/job-controller"))
        for name in ("theirs", "ours"):
            await eventually(lambda n=name: condition(kube.get("Job", namespace, n), "Complete"), timeout=120,
                             what=f"{name} complete")
        theirs = kube.get("Job", namespace, "theirs")
        ours = kube.get("Job", namespace, "ours")
        assert theirs is not None and ours is not None
        await eventually(lambda: routed(bridge, theirs), what="batchd's bridge has seen the upstream Job's end")
        assert not await workflow_exists(client, job_workflow_id(namespace, "theirs", theirs["metadata"]["uid"]))
        assert await workflow_exists(client, job_workflow_id(namespace, "ours", ours["metadata"]["uid"]))

    assert writers(theirs, "status") == {"kube-controller-manager"}
    assert writers(ours, "status") == {"batchd"}
    for job, mine, other in ((theirs, "kube-controller-manager", "batchd"), (ours, "batchd", "kube-controller-manager")):
        pods = pods_of(kube, namespace, job)
        assert len(pods) == 3, [p["metadata"]["name"] for p in pods]
        for pod in pods:
            assert mine in writers(pod) and other not in writers(pod), (job["metadata"]["name"], writers(pod))
            assert not pod["metadata"].get("finalizers"), "each controller removed its own tracking finalizers"
        assert job["status"]["succeeded"] == 3 and job["status"].get("failed", 0) == 0


@pytest.mark.timeout(300)
async def test_batchd_takes_only_the_labelled_cronjobs_and_runs_their_jobs_itself(
        client: Client, upstream_jobs: Kube, task_queue: str) -> None:
    kube = upstream_jobs
    namespace = new_namespace(kube)

    def cronjob(name: str, labels: dict[str, str]) -> dict[str, Any]:
        template = job_manifest("x", run_seconds=0.5)["spec"]
        del template["managedBy"]  # batchd names itself on the Jobs it makes (JOB-1)
        return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "labels": labels},
                "spec": {"schedule": "@every 2s", "jobTemplate": {"spec": template}}}

    def made(owner: str) -> list[dict[str, Any]]:
        return [j for j in kube.list("Job", namespace)["items"]
                if any(o.get("name") == owner for o in j["metadata"].get("ownerReferences") or [])]

    async with running(client, kube, task_queue, namespace, ttl_scope="managed"):
        kube.create("CronJob", namespace, cronjob("unlabelled", {}))
        kube.create("CronJob", namespace, cronjob("labelled", {"batchd.io/managed": "true"}))
        done = await eventually(lambda: [j for j in made("labelled") if condition(j, "Complete")][1:] or None,
                                timeout=120, what="two of the labelled CronJob's Jobs complete")
    # with kube-controller-manager's CronJob controller off, nothing schedules the unlabelled one
    assert made("unlabelled") == []
    for job in done:
        assert job["spec"]["managedBy"] == "batchd.io/job-controller"
        assert writers(job, "status") == {"batchd"}, writers(job)
        for pod in pods_of(kube, namespace, job):
            assert "kube-controller-manager" not in writers(pod) and "batchd" in writers(pod)
