"""The fake kubelet: Pod phases, container states, restarts and graceful termination, with
real short durations and with an injected clock."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import kubernetes
import pytest
from kubernetes.client import ApiException

from kubesim import KubeSim
from tests.kubesim.conftest import eventually, pod_body

TERMINATE = "kubesim.batchd.io/terminate-seconds"


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self._now = datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += timedelta(seconds=seconds)


def gone(core, name, ns) -> bool:
    try:
        core.read_namespaced_pod(name, ns)
        return False
    except ApiException as err:
        return err.status == 404


def test_a_pod_runs_and_succeeds(core, ns):
    core.create_namespaced_pod(ns, pod_body("ok", run_seconds=0.3))
    running = eventually(lambda: (p := core.read_namespaced_pod("ok", ns)).status.phase == "Running" and p)
    assert running.spec.node_name == "kubesim-node"
    assert running.status.start_time is not None and running.status.pod_ip
    assert running.status.container_statuses[0].state.running.started_at is not None
    conds = {c.type: c.status for c in running.status.conditions}
    assert conds["Ready"] == "True" and conds["ContainersReady"] == "True"
    done = eventually(lambda: (p := core.read_namespaced_pod("ok", ns)).status.phase == "Succeeded" and p)
    term = done.status.container_statuses[0].state.terminated
    assert term.exit_code == 0 and term.reason == "Completed"
    assert term.finished_at >= term.started_at
    assert {c.type: c.status for c in done.status.conditions}["Ready"] == "False"


def test_a_pod_behind_scheduling_gates_waits_for_the_last_one_to_go(core, ns):
    body = pod_body("gated", run_seconds=0.3)
    body["spec"]["schedulingGates"] = [{"name": "example.com/a"}, {"name": "example.com/b"}]
    created = core.create_namespaced_pod(ns, body)
    assert [(c.type, c.status, c.reason) for c in created.status.conditions] == [
        ("PodScheduled", "False", "SchedulingGated")]
    core.patch_namespaced_pod("gated", ns, {"spec": {"schedulingGates": [{"name": "example.com/b"}]}})
    # the update that leaves a gate is written, and the kubelet still does not bind the Pod
    eventually(lambda: len(core.read_namespaced_pod("gated", ns).spec.scheduling_gates) == 1)
    assert core.read_namespaced_pod("gated", ns).spec.node_name is None
    core.patch_namespaced_pod("gated", ns, {"spec": {"schedulingGates": None}})
    eventually(lambda: core.read_namespaced_pod("gated", ns).status.phase == "Succeeded")


def test_a_non_zero_exit_code_fails_the_pod(core, ns):
    core.create_namespaced_pod(ns, pod_body("bad", run_seconds=0.1, exit_code=3))
    done = eventually(lambda: (p := core.read_namespaced_pod("bad", ns)).status.phase == "Failed" and p)
    term = done.status.container_statuses[0].state.terminated
    assert term.exit_code == 3 and term.reason == "Error"


def test_on_failure_restarts_the_container_in_place(clocked):
    clock, core = clocked
    core.create_namespaced_pod("default", pod_body("again", run_seconds=1, exit_code=1, restart_policy="OnFailure"))
    eventually(lambda: core.read_namespaced_pod("again", "default").status.phase == "Running")
    clock.advance(1)
    eventually(lambda: _waiting(core, "again"))
    clock.advance(10)
    pod = eventually(lambda: (p := core.read_namespaced_pod("again", "default")).status.container_statuses[0]
                     .state.running and p)
    assert pod.status.phase == "Running"
    cs = pod.status.container_statuses[0]
    assert cs.restart_count == 1 and cs.last_state.terminated.exit_code == 1


def _waiting(core, name: str):
    cs = core.read_namespaced_pod(name, "default").status.container_statuses[0]
    return cs.state.waiting is not None and cs.state.waiting.reason == "CrashLoopBackOff" and cs


def test_crash_loop_backs_off_10s_doubling_to_5_minutes_and_resets_after_10_minutes_of_running(clocked):
    """Issue 14: a crashing restartPolicy Always Pod was restarted 13 times in 14 s."""
    clock, core = clocked
    core.create_namespaced_pod("default", pod_body("crash", run_seconds=1, exit_code=2, restart_policy="Always"))
    eventually(lambda: core.read_namespaced_pod("crash", "default").status.phase == "Running")
    restarts = 0
    for delay in (10, 20, 40, 80, 160, 300, 300):
        clock.advance(1)  # the run ends
        cs = eventually(lambda: _waiting(core, "crash"))
        assert f"back-off {delay}s restarting failed container=main" in cs.state.waiting.message
        assert cs.restart_count == restarts and cs.last_state.terminated.exit_code == 2 and not cs.ready
        assert {c.type: c.status for c in core.read_namespaced_pod("crash", "default").status.conditions}[
            "Ready"] == "False"
        clock.advance(delay - 0.5)
        assert _waiting(core, "crash")  # still backing off just before the delay ends
        clock.advance(0.5)
        restarts += 1
        eventually(lambda n=restarts: core.read_namespaced_pod("crash", "default").status.container_statuses[0]
                   .restart_count == n)
    core.patch_namespaced_pod("crash", "default", {"metadata": {"annotations": {"kubesim.batchd.io/run-seconds": "600"}}})
    clock.advance(1)  # the current run (1 s) ends: still the capped delay
    eventually(lambda: _waiting(core, "crash"))
    clock.advance(300)
    eventually(lambda: core.read_namespaced_pod("crash", "default").status.container_statuses[0].state.running)
    clock.advance(600)  # a 10-minute run resets the sequence
    cs = eventually(lambda: _waiting(core, "crash"))
    assert "back-off 10s" in cs.state.waiting.message


def test_container_exit_codes_and_index_scripted_failures(clocked):
    clock, core = clocked
    body = pod_body("two", run_seconds=1, annotations={"kubesim.batchd.io/container-exit-codes": "side=42"})
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
    core.create_namespaced_pod("default", body)
    script = {"kubesim.batchd.io/fail-indexes": "1,3-4", "kubesim.batchd.io/fail-exit-code": "7",
              "kubesim.batchd.io/fail-times": "1", "batch.kubernetes.io/job-completion-index": "3"}
    core.create_namespaced_pod("default", pod_body("idx3", run_seconds=1, annotations=script))
    core.create_namespaced_pod("default", pod_body("idx3-retry", run_seconds=1, annotations={
        **script, "batch.kubernetes.io/job-index-failure-count": "1"}))
    core.create_namespaced_pod("default", pod_body("idx2", run_seconds=1, annotations={
        **script, "batch.kubernetes.io/job-completion-index": "2"}))
    every = {"kubesim.batchd.io/fail-every": "10", "kubesim.batchd.io/fail-exit-code": "7"}
    core.create_namespaced_pod("default", pod_body("idx20", run_seconds=1, annotations={
        **every, "batch.kubernetes.io/job-completion-index": "20"}))
    core.create_namespaced_pod("default", pod_body("idx21", run_seconds=1, annotations={
        **every, "batch.kubernetes.io/job-completion-index": "21"}))
    for name in ("two", "idx3", "idx3-retry", "idx2", "idx20", "idx21"):
        eventually(lambda n=name: core.read_namespaced_pod(n, "default").status.phase == "Running")
    clock.advance(1)
    two = eventually(lambda: (p := core.read_namespaced_pod("two", "default")).status.phase == "Failed" and p)
    assert {c.name: c.state.terminated.exit_code for c in two.status.container_statuses} == {"main": 0, "side": 42}
    idx3 = eventually(lambda: (p := core.read_namespaced_pod("idx3", "default")).status.phase == "Failed" and p)
    assert idx3.status.container_statuses[0].state.terminated.exit_code == 7
    eventually(lambda: core.read_namespaced_pod("idx3-retry", "default").status.phase == "Succeeded")  # failed once
    eventually(lambda: core.read_namespaced_pod("idx2", "default").status.phase == "Succeeded")  # not scripted
    eventually(lambda: core.read_namespaced_pod("idx20", "default").status.phase == "Failed")  # 10 divides 20
    eventually(lambda: core.read_namespaced_pod("idx21", "default").status.phase == "Succeeded")


def test_evict_annotation_sets_disruption_target_and_fails_the_pod(core, ns):
    core.create_namespaced_pod(ns, pod_body("victim", run_seconds=60))
    eventually(lambda: core.read_namespaced_pod("victim", ns).status.phase == "Running")
    core.patch_namespaced_pod("victim", ns, {"metadata": {"annotations": {"kubesim.batchd.io/evict": "true"}}})
    pod = eventually(lambda: (p := core.read_namespaced_pod("victim", ns)).status.phase == "Failed" and p)
    conds = {c.type: c for c in pod.status.conditions}
    assert conds["DisruptionTarget"].status == "True" and conds["DisruptionTarget"].reason == "TerminationByKubelet"
    assert pod.status.reason == "Evicted"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 137


def test_a_deleted_running_pod_terminates_gracefully_then_disappears(core, ns):
    core.create_namespaced_pod(ns, pod_body("grace", run_seconds=60, annotations={TERMINATE: "0.5"}))
    eventually(lambda: core.read_namespaced_pod("grace", ns).status.phase == "Running")
    core.delete_namespaced_pod("grace", ns, grace_period_seconds=20)
    pod = core.read_namespaced_pod("grace", ns)
    assert pod.metadata.deletion_grace_period_seconds == 20
    assert pod.metadata.deletion_timestamp > datetime.now(UTC) + timedelta(seconds=15)
    assert pod.status.phase == "Running"  # Terminating
    eventually(lambda: gone(core, "grace", ns), what="terminated pod removed")


def test_a_terminated_pod_with_finalizers_stays_failed_until_released(core, ns):
    rv = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod_body("held", run_seconds=60, finalizers=["batch.kubernetes.io/job-tracking"],
                                            annotations={TERMINATE: "0.2"}))
    eventually(lambda: core.read_namespaced_pod("held", ns).status.phase == "Running")
    core.delete_namespaced_pod("held", ns)
    pod = eventually(lambda: (p := core.read_namespaced_pod("held", ns)).status.phase == "Failed" and p)
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 143 and term.reason == "Error"  # exited on SIGTERM, before the 30 s grace
    eventually(lambda: core.read_namespaced_pod("held", ns).metadata.deletion_grace_period_seconds == 0)
    core.patch_namespaced_pod("held", ns, {"metadata": {"finalizers": None}})
    assert gone(core, "held", ns)
    types = [e["type"] for e in kubernetes.watch.Watch().stream(
        core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=1)]
    assert types[0] == "ADDED" and types[-1] == "DELETED" and set(types[1:-1]) == {"MODIFIED"}


def test_terminal_pods_are_deleted_at_once(core, ns):
    core.create_namespaced_pod(ns, pod_body("fast", run_seconds=0.05))
    eventually(lambda: core.read_namespaced_pod("fast", ns).status.phase == "Succeeded")
    core.delete_namespaced_pod("fast", ns)
    assert gone(core, "fast", ns)


@pytest.fixture
def clocked(tmp_path):
    clock = FakeClock()
    with KubeSim(clock=clock, kubelet=True) as sim:
        api = kubernetes.config.new_client_from_config(str(sim.write_kubeconfig(tmp_path / "kc")))
        yield clock, kubernetes.client.CoreV1Api(api)


def test_kubelet_timing_follows_the_injected_clock(clocked):
    clock, core = clocked
    core.create_namespaced_pod("default", pod_body("slow", run_seconds=3600))
    pod = eventually(lambda: (p := core.read_namespaced_pod("slow", "default")).status.phase == "Running" and p)
    assert pod.status.start_time == datetime(2026, 1, 1, tzinfo=UTC)
    assert core.read_namespaced_pod("slow", "default").status.phase == "Running"
    clock.advance(3601)
    done = eventually(lambda: (p := core.read_namespaced_pod("slow", "default")).status.phase == "Succeeded" and p)
    assert done.status.container_statuses[0].state.terminated.finished_at == datetime(2026, 1, 1, 1, 0, 1, tzinfo=UTC)


def test_grace_period_comes_from_the_pod_spec_by_default(clocked):
    clock, core = clocked
    body = pod_body("spec-grace", run_seconds=3600)
    body["spec"]["terminationGracePeriodSeconds"] = 45
    core.create_namespaced_pod("default", body)
    eventually(lambda: core.read_namespaced_pod("spec-grace", "default").status.phase == "Running")
    core.delete_namespaced_pod("spec-grace", "default")
    pod = core.read_namespaced_pod("spec-grace", "default")
    assert pod.metadata.deletion_grace_period_seconds == 45
    assert pod.metadata.deletion_timestamp == datetime(2026, 1, 1, 0, 0, 45, tzinfo=UTC)
    clock.advance(44)
    assert core.read_namespaced_pod("spec-grace", "default").status.phase == "Running"
    clock.advance(2)
    eventually(lambda: gone(core, "spec-grace", "default"), what="pod killed at the end of its grace period")


def test_pods_stay_pending_and_delete_at_once_without_a_kubelet(tmp_path):
    with KubeSim(kubelet=False) as sim:
        api = kubernetes.config.new_client_from_config(str(sim.write_kubeconfig(tmp_path / "kc")))
        core = kubernetes.client.CoreV1Api(api)
        pod = core.create_namespaced_pod("default", pod_body("idle"))
        assert pod.status.phase == "Pending" and not pod.spec.node_name
        core.delete_namespaced_pod("idle", "default")
        assert gone(core, "idle", "default")
