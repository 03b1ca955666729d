"""Tier 4: the real ``batchd`` console script (``ttl list``, ``describe``, ``cronjob …``) as a user runs it.

Each command runs as a subprocess against the session dev server while a worker and bridge run
on this test's loop — hence ``asyncio.create_subprocess_exec``: a blocking subprocess call would
starve the worker that must answer the CLI's queries and updates. The ``cronjob`` commands run
against a stand-in workflow registered under the name ``CronJob`` with the contract's update and
query names, so the CLI is tested independently of the real CronJob workflow.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from kube.client import Kube
from tests.conftest import eventually, new_namespace, running, utcnow
from tests.integration.test_cronjob import cronjob_manifest
from tests.k8s import create_job, finish_job, second
from workflows.identity import K8S_KIND, K8S_NAME, K8S_NAMESPACE, cronjob_workflow_id

BATCHD = str(Path(sys.executable).parent / "batchd")
LONG_TTL = 3600  # the timer must still be pending while the CLI looks at it


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def address(temporal_env: WorkflowEnvironment) -> str:
    """host:port of the session dev server."""
    return str(temporal_env.client.service_client.config.target_host)


async def batchd(address: str, *args: str, timeout: float = 180.0) -> Result:
    """Run ``batchd ARGS`` with ``TEMPORAL_ADDRESS=ADDRESS`` without blocking the loop.

    The time limit is generous: a cold ``batchd`` start imports for 15–40 s on a loaded 2-core
    machine, and that is not what these tests measure.
    """
    proc = await asyncio.create_subprocess_exec(
        BATCHD, *args, env={**os.environ, "TEMPORAL_ADDRESS": address},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


async def sleeping_ttl_job(client: Client, kube: Kube, namespace: str, name: str) -> str:
    """A finished managed Job with a long TTL, whose workflow has armed its timer; returns its uid."""
    uid = create_job(kube, namespace, name, ttl=LONG_TTL)["metadata"]["uid"]
    finish_job(kube, namespace, name, second(utcnow()))

    async def expiry_visible() -> bool:
        query = f'K8sNamespace = "{namespace}" AND K8sName = "{name}" AND ExpiresAt > "2000-01-01T00:00:00Z"'
        return (await client.count_workflows(query)).count == 1

    await eventually(expiry_visible, what="the TTL workflow's ExpiresAt in visibility")
    return str(uid)


async def test_help_teaches_every_command_and_exits_0(address: str) -> None:
    for args in (["--help"], ["ttl", "list", "--help"], ["describe", "job", "--help"],
                 ["cronjob", "trigger", "--help"]):
        res = await batchd(address, *args)
        assert res.code == 0, (args, res)
        assert "Usage: batchd" in res.out
    top = (await batchd(address, "--help")).out
    for command in ("ttl", "describe", "cronjob", "worker", "dev", "kubesim"):
        assert f"  {command} " in top
    assert "Exit codes: 0 ok, 1 failure, 2 usage error, 3 no such object/workflow." in top


async def test_a_malformed_object_reference_is_a_usage_error(address: str) -> None:
    res = await batchd(address, "describe", "job", "no-slash")
    assert res.code == 2
    assert "NAMESPACE/NAME" in res.err


async def test_ttl_list_shows_a_sleeping_job_soonest_first(
        client: Client, kube: Kube, namespace: str, task_queue: str, address: str) -> None:
    async with running(client, kube, task_queue, namespace):
        late_uid = await sleeping_ttl_job(client, kube, namespace, "etl-late")
        # A shorter TTL on a later Job: it must sort first although it was created second.
        uid = create_job(kube, namespace, "etl-soon", ttl=LONG_TTL // 2)["metadata"]["uid"]
        finish_job(kube, namespace, "etl-soon", second(utcnow()))
        await eventually(lambda: client.count_workflows(
            f'K8sNamespace = "{namespace}" AND ExpiresAt > "2000-01-01T00:00:00Z"'), what="both expiries")

        async def both_listed() -> list[dict[str, Any]]:
            res = await batchd(address, "ttl", "list", "-o", "json", "--namespace", namespace)
            assert res.code == 0, res
            rows: list[dict[str, Any]] = res.json()
            return rows if len(rows) == 2 else []

        rows = await eventually(both_listed, what="two rows in ttl list")
        assert [r["name"] for r in rows] == ["etl-soon", "etl-late"]
        assert rows[1] == rows[1] | {"kind": "Job", "namespace": namespace, "uid": late_uid,
                                     "workflowId": f"job-ttl/{namespace}/etl-late/{late_uid}"}
        assert rows[0]["uid"] == uid
        assert LONG_TTL - 120 < rows[1]["inSeconds"] <= LONG_TTL
        assert rows[1]["expiresAt"].endswith("Z")

        table = await batchd(address, "ttl", "list", "-n", namespace, "--limit", "1")
        assert table.code == 0, table
        header, *lines = table.out.strip().splitlines()
        assert header.split() == ["KIND", "NAMESPACE", "NAME", "UID", "EXPIRES", "IN", "HELD", "WORKFLOW", "ID"]
        assert len(lines) == 1 and lines[0].split()[:4] == ["Job", namespace, "etl-soon", uid]
        assert lines[0].split()[5].startswith(("29m", "30m"))


@pytest.mark.timeout(600)  # seven cold CLI starts
async def test_ttl_hold_extend_and_release_write_the_job_and_ttl_list_shows_the_hold(
        client: Client, kube: Kube, kubeconfig: Path, namespace: str, task_queue: str, address: str) -> None:
    async with running(client, kube, task_queue, namespace):
        await sleeping_ttl_job(client, kube, namespace, "debug-me")
        ref = f"{namespace}/debug-me"
        kc = ("--kubeconfig", str(kubeconfig))
        held = await batchd(address, "ttl", "hold", ref, "--reason", "INC-42: look at the logs", *kc)
        assert held.code == 0, held
        annotations = kube.get("Job", namespace, "debug-me")["metadata"]["annotations"]
        assert annotations["batchd.io/ttl-hold"] == "INC-42: look at the logs"

        async def hold_listed() -> dict[str, Any] | None:
            res = await batchd(address, "ttl", "list", "-o", "json", "-n", namespace)
            assert res.code == 0, res
            return next((r for r in res.json() if r["held"]), None)

        row = await eventually(hold_listed, what="the hold in ttl list")
        assert row["name"] == "debug-me" and row["holdReason"] == "INC-42: look at the logs"

        extended = await batchd(address, "ttl", "extend", ref, "--by", "1h30m", *kc)
        assert extended.code == 0, extended
        assert kube.get("Job", namespace, "debug-me")["spec"]["ttlSecondsAfterFinished"] == LONG_TTL + 5400
        bad = await batchd(address, "ttl", "extend", ref, "--by", "soon", *kc)
        assert bad.code == 2 and "1h30m" in bad.err

        released = await batchd(address, "ttl", "release", ref, *kc)
        assert released.code == 0 and "released" in released.out, released
        assert "batchd.io/ttl-hold" not in kube.get("Job", namespace, "debug-me")["metadata"].get("annotations", {})
        missing = await batchd(address, "ttl", "hold", f"{namespace}/nope", *kc)
        assert missing.code == 3 and "not found" in missing.err


async def test_describe_job_shows_its_pending_ttl_timer_with_the_summary(
        client: Client, kube: Kube, namespace: str, task_queue: str, address: str) -> None:
    async with running(client, kube, task_queue, namespace):
        uid = await sleeping_ttl_job(client, kube, namespace, "etl-42")

        async def timer_shown() -> dict[str, Any] | None:
            res = await batchd(address, "describe", "job", f"{namespace}/etl-42", "-o", "json")
            assert res.code == 0, res
            wf = res.json()["workflows"][0]
            return wf if wf["pendingTimers"] else None

        wf = await eventually(timer_shown, what="a pending timer in describe")
        assert wf["workflowId"] == f"job-ttl/{namespace}/etl-42/{uid}"
        assert (wf["type"], wf["status"]) == ("TTLAfterFinished", "RUNNING")
        [timer] = wf["pendingTimers"]
        assert timer["summary"] == f"TTL of Job {namespace}/etl-42 expires {wf['describe']['expireAt']}"
        assert timer["firesAt"] == wf["describe"]["expireAt"]
        assert wf["searchAttributes"]["K8sUID"] == uid
        assert wf["describe"]["observation"]["ttlSeconds"] is not None  # camelCase, as every describe's JSON

        text = await batchd(address, "describe", "job", f"{namespace}/etl-42")
        assert text.code == 0, text
        assert f"TTL of Job {namespace}/etl-42 expires " in text.out
        assert "Pending timers:\n    TIMER" in text.out
        assert re.search(r"^    Expire At: +\d{4}-", text.out, re.MULTILINE), text.out  # the state, kubectl-like


async def test_an_object_without_a_workflow_exits_3(address: str) -> None:
    ns = f"nowhere-{uuid.uuid4().hex[:8]}"
    for args in (["describe", "job", f"{ns}/ghost"], ["describe", "cronjob", f"{ns}/ghost"],
                 ["cronjob", "describe", f"{ns}/ghost"], ["cronjob", "trigger", f"{ns}/ghost"]):
        res = await batchd(address, *args)
        assert res.code == 3, (args, res)
        assert "ghost" in res.err


async def test_an_unreachable_server_exits_1() -> None:
    proc = await asyncio.create_subprocess_exec(
        BATCHD, "ttl", "list", "--temporal-address", "127.0.0.1:1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    assert b"cannot connect to Temporal" in err


# -- cronjob commands against a stand-in of the CronJob workflow --------------------------


@workflow.defn(name="CronJob")
class StandInCronJob:
    """The CronJob workflow's operator contract, and nothing else: updates and the query."""

    def __init__(self) -> None:
        self.suspended = False
        self.triggered: list[str] = []
        self.done = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.done)

    @workflow.update(name="trigger")
    def trigger(self, _inp: dict[str, Any]) -> dict[str, Any]:
        name = f"nightly-manual-{len(self.triggered) + 1}"
        self.triggered.append(name)
        return {"jobName": name}

    @trigger.validator
    def validate_trigger(self, _inp: dict[str, Any]) -> None:
        if self.suspended:
            raise ValueError("CronJob is suspended")

    @workflow.update(name="suspend")
    def suspend(self, _inp: dict[str, Any]) -> dict[str, Any]:
        changed, self.suspended = not self.suspended, True
        return {"suspended": True, "changed": changed}

    @workflow.update(name="resume")
    def resume(self, _inp: dict[str, Any]) -> dict[str, Any]:
        changed, self.suspended = self.suspended, False
        return {"suspended": False, "changed": changed}

    @workflow.query(name="describe")
    def describe(self) -> dict[str, Any]:
        return {"suspended": self.suspended, "manualJobs": self.triggered}

    @workflow.signal(name="stop")
    def stop(self) -> None:
        self.done = True


async def test_cronjob_trigger_suspend_resume_and_describe_use_the_workflows_updates(
        client: Client, task_queue: str, address: str) -> None:
    ns, name = f"cj-{uuid.uuid4().hex[:8]}", "nightly"
    async with Worker(client, task_queue=task_queue, workflows=[StandInCronJob],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        handle = await client.start_workflow(
            "CronJob", id=cronjob_workflow_id(ns, name), task_queue=task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(K8S_KIND, "CronJob"),
                                                     SearchAttributePair(K8S_NAMESPACE, ns),
                                                     SearchAttributePair(K8S_NAME, name)]),
            execution_timeout=timedelta(minutes=5),
        )
        ref = f"{ns}/{name}"
        try:
            trig = await batchd(address, "cronjob", "trigger", ref, "-o", "json")
            assert trig.code == 0, trig
            assert trig.json() == {"workflowId": f"cronjob/{ns}/{name}", "update": "trigger",
                                   "result": {"jobName": "nightly-manual-1"}}

            table = await batchd(address, "cronjob", "suspend", ref)
            assert table.code == 0, table
            assert table.out.split()[:2] == ["FIELD", "VALUE"]
            assert "result.suspended  true" in table.out and "result.changed    true" in table.out

            again = await batchd(address, "cronjob", "suspend", ref, "-o", "json")
            assert again.json()["result"] == {"suspended": True, "changed": False}

            refused = await batchd(address, "cronjob", "trigger", ref)
            assert refused.code == 1
            assert "CronJob is suspended" in refused.err

            resumed = await batchd(address, "cronjob", "resume", ref, "-o", "json")
            assert resumed.json()["result"] == {"suspended": False, "changed": True}

            state = await batchd(address, "cronjob", "describe", ref, "-o", "json")
            assert state.code == 0, state
            assert state.json() == {"workflowId": f"cronjob/{ns}/{name}", "suspended": False,
                                    "manualJobs": ["nightly-manual-1"]}

            described = await batchd(address, "describe", "cronjob", ref, "-o", "json")
            assert described.code == 0, described
            [wf] = described.json()["workflows"]
            assert (wf["type"], wf["status"], wf["describe"]["suspended"]) == ("CronJob", "RUNNING", False)
        finally:
            await handle.signal("stop")
            await handle.result()


def test_tls_material_comes_from_a_mounted_secret_directory_when_present(tmp_path: Path) -> None:
    from worker import cli

    (tmp_path / "ca.crt").write_text("ca")  # a Secret with only a CA: server TLS, no client cert
    kw: dict[str, Any] = {"temporal_address": "t:7233", "temporal_namespace": "default", "temporal_api_key": "",
                          "temporal_tls": False, "temporal_tls_ca": None, "temporal_tls_cert": None,
                          "temporal_tls_key": None, "temporal_tls_server_name": "", "temporal_tls_dir": tmp_path}
    settings = cli._temporal_settings(kw)
    assert (settings.tls_ca, settings.tls_cert, settings.tls_key) == (tmp_path / "ca.crt", None, None)  # type: ignore[attr-defined]
    assert settings.api_key is None and settings.tls_config()  # type: ignore[attr-defined]
    assert not kw, "every Temporal flag is consumed"


async def test_the_cli_operates_the_real_cronjob_workflow(
        client: Client, kube: Kube, namespace: str, task_queue: str, address: str) -> None:
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob",
               "metadata": {"name": "yearly", "labels": {"batchd.io/managed": "true"}},
               "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": {
                   "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}}}
    ref = f"{namespace}/yearly"
    async with running(client, kube, task_queue, namespace):
        kube.create("CronJob", namespace, cronjob)

        async def next_time_armed() -> dict[str, Any] | None:
            res = await batchd(address, "describe", "cronjob", ref, "-o", "json")
            return res.json()["workflows"][0] if res.code == 0 and res.json()["workflows"][0]["pendingTimers"] else None

        wf = await eventually(next_time_armed, what="the CronJob workflow's schedule timer")
        assert wf["type"] == "CronJob" and wf["workflowId"] == f"cronjob/{ref}"
        timer = wf["pendingTimers"][0]
        due = datetime.fromisoformat(timer["firesAt"].replace("Z", "+00:00")) + timedelta(seconds=60)  # the lead
        assert timer["summary"] == \
            f"CronJob {ref} next schedule {due:%Y-%m-%dT%H:%M:%SZ}; Job creation armed 60s before"

        trig = await batchd(address, "cronjob", "trigger", ref, "-o", "json")
        assert trig.code == 0, trig
        job_name = trig.json()["result"]["jobName"]
        await eventually(lambda: kube.get("Job", namespace, job_name), what="the triggered Job")

        suspended = await batchd(address, "cronjob", "suspend", ref, "--reason", "quarter close", "-o", "json")
        assert suspended.json()["result"] == {"suspended": True, "changed": True}
        cj = kube.get("CronJob", namespace, "yearly") or {}
        assert cj["spec"]["suspend"] is True and cj["metadata"]["annotations"]["batchd.io/suspend-reason"] == "quarter close"
        state = await batchd(address, "cronjob", "describe", ref)  # as kubectl describe prints
        assert re.search(r"^Suspend Reason: +quarter close$", state.out, re.MULTILINE), state.out
        assert re.search(r"^Counters:\n  Succeeded: +\d", state.out, re.MULTILINE), state.out
        resumed = await batchd(address, "cronjob", "resume", ref, "-o", "json")
        assert resumed.json()["result"] == {"suspended": False, "changed": True}
        assert "batchd.io/suspend-reason" not in (kube.get("CronJob", namespace, "yearly") or {})["metadata"]["annotations"]
        state = await batchd(address, "cronjob", "describe", ref, "-o", "json")
        assert state.code == 0 and job_name in json.dumps(state.json())

        history = await batchd(address, "cronjob", "history", ref, "-o", "json")
        assert history.code == 0, history
        [entry] = history.json()
        assert (entry["source"], entry["outcome"], entry["job"]) == ("trigger", "created", job_name)
        assert entry["result"] in ("running", "Complete")  # the Job controller may have run it by now
        rows = (await batchd(address, "cronjob", "history", ref)).out.splitlines()
        assert rows[0].split() == ["SCHEDULED", "SOURCE", "OUTCOME", "JOB", "CREATED", "RESULT"]
        assert rows[1].split()[1:4] == ["trigger", "created", job_name]


def suspended_every_minute(name: str) -> dict[str, Any]:
    """A CronJob whose schedule adds no Job while it is suspended; ten of its Jobs kept, to be counted."""
    return cronjob_manifest(name, "* * * * *", suspend=True, limits=(10, 1), job_managed_by=None)


async def test_cronjob_backfill_prints_what_it_created_and_what_existed_and_refuses_over_1000_with_exit_2(
        client: Client, kube: Kube, namespace: str, task_queue: str, address: str) -> None:
    # CJ-BACKFILL through the real CLI; suspended, so the schedule itself adds no Job meanwhile
    cronjob = suspended_every_minute("minutely")
    ref = f"{namespace}/minutely"
    start = utcnow().replace(second=0, microsecond=0) - timedelta(hours=1)
    m = int(start.timestamp()) // 60

    def at(minutes: int) -> str:
        return f"{start + timedelta(minutes=minutes):%Y-%m-%dT%H:%M:%SZ}"

    async with running(client, kube, task_queue, namespace):
        kube.create("CronJob", namespace, cronjob)
        await eventually(lambda: client.get_workflow_handle(cronjob_workflow_id(namespace, "minutely")).query("describe"),
                         what="the CronJob workflow")
        first = await batchd(address, "cronjob", "backfill", ref, "--from", at(0), "--to", at(2))
        assert first.code == 0, first
        lines = first.out.splitlines()
        assert lines[0].split() == ["JOB", "RESULT"]
        assert [line.split() for line in lines[1:4]] == [[f"minutely-{m + i}", "created"] for i in range(3)]
        assert lines[-1] == "3 schedule time(s): 3 created, 0 existed, 0 failed, 0 queued"
        again = await batchd(address, "cronjob", "backfill", ref, "--from", at(2), "--to", at(3), "-o", "json")
        assert again.code == 0, again
        result = again.json()["result"]
        assert (result["created"], result["existed"]) == ([f"minutely-{m + 3}"], [f"minutely-{m + 2}"])
        assert sorted(j["metadata"]["name"] for j in kube.list("Job", namespace)["items"]) == \
            [f"minutely-{m + i}" for i in range(4)]

        refused = await batchd(address, "cronjob", "backfill", ref, "--from", at(-2000), "--to", at(0))
        assert refused.code == 2, refused
        assert "more than 1000 schedule times" in refused.err and refused.out == ""
        malformed = await batchd(address, "cronjob", "backfill", ref, "--from", "yesterday", "--to", at(0))
        assert malformed.code == 2 and "RFC 3339" in malformed.err
        assert len(kube.list("Job", namespace)["items"]) == 4

        serial = await batchd(address, "cronjob", "backfill", ref, "--from", at(10), "--to", at(12), "--one-at-a-time")
        assert serial.code == 0, serial
        assert [line.split() for line in serial.out.splitlines()[1:-1]] == [
            [f"minutely-{m + 10}", "created"], [f"minutely-{m + 11}", "queued"], [f"minutely-{m + 12}", "queued"]]
        await eventually(lambda: len(kube.list("Job", namespace)["items"]) == 7, what="the queued Jobs, in turn")
        [entry] = [e for e in (await batchd(address, "cronjob", "history", ref, "-o", "json")).json()
                   if e["job"] == f"minutely-{m + 12}"]
        assert entry["source"] == "backfill"


async def test_the_kubernetes_door_triggers_suspends_resumes_and_backfills_with_the_callers_kubeconfig(
        client: Client, kube: Kube, namespace: str, task_queue: str, address: str, kubeconfig: Path) -> None:
    # --via kubernetes: the same actions as writes to the CronJob and its Jobs; a Temporal server that
    # cannot be reached shows the CLI never asks it
    ref = f"{namespace}/door"
    start = utcnow().replace(second=0, microsecond=0) - timedelta(hours=1)
    m = int(start.timestamp()) // 60
    span = ["--from", f"{start:%Y-%m-%dT%H:%M:%SZ}", "--to", f"{start + timedelta(minutes=2):%Y-%m-%dT%H:%M:%SZ}"]

    async def door(*args: str) -> Result:
        return await batchd("127.0.0.1:1", "cronjob", *args, "--via", "kubernetes", "--kubeconfig", str(kubeconfig))

    async with running(client, kube, task_queue, namespace):
        kube.create("CronJob", namespace, suspended_every_minute("door"))
        await eventually(lambda: client.get_workflow_handle(cronjob_workflow_id(namespace, "door")).query("describe"),
                         what="the CronJob workflow")
        trig = await door("trigger", ref, "-o", "json")
        assert trig.code == 0, trig
        job = kube.get("Job", namespace, trig.json()["result"]["jobName"]) or {}
        assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
        assert job["metadata"]["ownerReferences"][0]["name"] == "door" and job["spec"]["managedBy"] == "batchd.io/job-controller"

        resumed = await door("resume", ref, "-o", "json")
        assert resumed.json()["result"] == {"suspended": False, "changed": True}
        suspended = await door("suspend", ref, "--reason", "quarter close", "-o", "json")
        assert suspended.json()["result"] == {"suspended": True, "changed": True}
        notes = (kube.get("CronJob", namespace, "door") or {})["metadata"]["annotations"]
        assert notes["batchd.io/suspend-reason"] == "quarter close" and "batchd.io/suspended-at" in notes

        first = await door("backfill", ref, *span)
        assert first.code == 0, first
        assert first.out.strip().endswith("3 schedule time(s): 3 created, 0 existed, 0 failed, 0 queued"), first.out
        again = await door("backfill", ref, *span, "-o", "json")  # the same range again: taken again
        assert again.code == 0, again
        assert again.json()["message"].endswith("3 schedule time(s): 0 created, 3 existed, 0 failed, 0 queued")
        future = await door("backfill", ref, "--from", f"{utcnow():%Y-%m-%dT%H:%M:%SZ}",
                            "--to", f"{utcnow() + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}")
        assert future.code == 2 and "in the future" in future.err, future
        names = [j["metadata"]["name"] for j in kube.list("Job", namespace)["items"]]
        # the backfill's, each once (the minute it was resumed for may have made a scheduled one too)
        assert {f"door-{m + i}" for i in range(3)} <= set(names) and len(names) == len(set(names))


async def test_a_user_bound_to_one_namespace_triggers_and_backfills_there_and_is_refused_elsewhere(
        client: Client, kube: Kube, namespace: str, task_queue: str, address: str, kubeconfig: Path, backend: str,
        tmp_path: Path) -> None:
    # docs/operations.md, "Who may do what": a namespace's own Role decides, and nothing else is needed
    if backend != "cluster":
        pytest.skip("RBAC is kube-apiserver's (kubesim authorizes nobody)")
    other = new_namespace(kube)
    for ns in (namespace, other):
        kube.create("CronJob", ns, suspended_every_minute("door"))
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={"metadata": {"name": "operator"}})
    kube.request("POST", f"{rbac}/namespaces/{namespace}/roles", body={"metadata": {"name": "cronjob-operator"}, "rules": [
        {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get", "patch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]})
    kube.request("POST", f"{rbac}/namespaces/{namespace}/rolebindings", body={
        "metadata": {"name": "cronjob-operator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cronjob-operator"},
        "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}]})
    token = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/operator/token",
                         body={"spec": {"expirationSeconds": 3600}})["status"]["token"]
    config = yaml.safe_load(kubeconfig.read_text())
    config["users"] = [{"name": config["users"][0]["name"], "user": {"token": token}}]
    operator = tmp_path / "operator.kubeconfig"
    operator.write_text(yaml.safe_dump(config))
    start = utcnow().replace(second=0, microsecond=0) - timedelta(hours=1)
    span = ["--from", f"{start:%Y-%m-%dT%H:%M:%SZ}", "--to", f"{start + timedelta(minutes=1):%Y-%m-%dT%H:%M:%SZ}"]

    async def door(ns: str, *args: str) -> Result:
        return await batchd(address, "cronjob", args[0], f"{ns}/door", *args[1:], "--via", "kubernetes",
                            "--kubeconfig", str(operator))

    async with running(client, kube, task_queue, namespace):
        await eventually(lambda: client.get_workflow_handle(cronjob_workflow_id(namespace, "door")).query("describe"),
                         what="the CronJob workflow")
        trig = await door(namespace, "trigger", "-o", "json")
        assert trig.code == 0, trig
        assert kube.get("Job", namespace, trig.json()["result"]["jobName"])
        back = await door(namespace, "backfill", *span)
        assert back.code == 0 and back.out.strip().endswith("2 created, 0 existed, 0 failed, 0 queued"), back
        for args in (["trigger"], ["backfill", *span]):
            refused = await door(other, *args)
            assert refused.code == 1 and "forbidden" in refused.err.lower(), refused
            assert f'system:serviceaccount:{namespace}:operator' in refused.err, refused
        assert kube.list("Job", other)["items"] == []
        assert "batchd.io/backfill" not in ((kube.get("CronJob", other, "door") or {})["metadata"].get("annotations") or {})
