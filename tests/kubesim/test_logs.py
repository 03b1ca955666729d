"""``kubectl logs`` for the fake kubelet's containers: the command, the exit code, timestamps,
``-f`` ending with the container, and the API server's errors."""

from __future__ import annotations

import time

import pytest

from kubesim import logs
from kubesim.errors import ApiError
from tests.kubesim.conftest import Http, eventually, pod_body


def test_logs_show_the_command_then_the_exit_code(kubectl, http: Http, ns: str) -> None:
    body = pod_body("p", run_seconds=0.2, exit_code=3)
    body["spec"]["containers"][0]["command"] = ["sh", "-c", "echo 'hello world'; exit 3"]
    assert http.request("POST", f"/api/v1/namespaces/{ns}/pods", body)[0] == 201
    eventually(lambda: http.get(f"/api/v1/namespaces/{ns}/pods/p")["status"].get("phase") == "Failed",
               what="Pod failed")
    assert kubectl("logs", "-n", ns, "p").stdout == "+ sh -c 'echo '\"'\"'hello world'\"'\"'; exit 3'\nkubesim: exit code 3\n"
    stamped = kubectl("logs", "-n", ns, "p", "--timestamps").stdout.splitlines()
    status = http.get(f"/api/v1/namespaces/{ns}/pods/p")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert [line.split(" ", 1)[0] for line in stamped] == [
        status["startedAt"].replace("Z", ".000000000Z"), status["finishedAt"].replace("Z", ".000000000Z")]
    assert kubectl("logs", "-n", ns, "p", "--tail=1").stdout == "kubesim: exit code 3\n"


def test_follow_ends_when_the_container_does(kubectl, http: Http, ns: str) -> None:
    body = pod_body("slow", run_seconds=3)
    assert http.request("POST", f"/api/v1/namespaces/{ns}/pods", body)[0] == 201
    eventually(lambda: http.get(f"/api/v1/namespaces/{ns}/pods/slow")["status"].get("phase") == "Running",
               what="Pod running")
    started = time.monotonic()
    out = kubectl("logs", "-n", ns, "slow", "-f", timeout=30).stdout
    assert out == "+ (entrypoint of busybox:1.36)\nkubesim: exit code 0\n"
    assert http.get(f"/api/v1/namespaces/{ns}/pods/slow")["status"]["phase"] == "Succeeded"
    assert time.monotonic() - started < 25


def test_log_errors_are_the_api_servers(kubectl, http: Http, ns: str) -> None:
    body = pod_body("two")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
    assert http.request("POST", f"/api/v1/namespaces/{ns}/pods", body)[0] == 201
    code, _, answer = http.request("GET", f"/api/v1/namespaces/{ns}/pods/two/log")
    assert (code, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == "a container name must be specified for pod two, choose one of: [main side]"
    code, _, answer = http.request("GET", f"/api/v1/namespaces/{ns}/pods/two/log?container=nope")
    assert (code, answer["message"]) == (400, "container nope is not valid for pod two")
    code, _, answer = http.request("GET", f"/api/v1/namespaces/{ns}/pods/two/log?container=main&previous=true")
    assert (code, answer["message"]) == (400, 'previous terminated container "main" in pod "two" not found')
    code, _, answer = http.request("GET", f"/api/v1/namespaces/{ns}/pods/missing/log")
    assert (code, answer["reason"]) == (404, "NotFound")
    code, _, answer = http.request("PUT", f"/api/v1/namespaces/{ns}/pods/two/log", {})
    assert (code, answer["reason"]) == (405, "MethodNotAllowed")


def test_a_container_not_started_yet_has_no_log() -> None:
    pod = {"metadata": {"name": "new"}, "spec": {"containers": [{"name": "main"}]},
           "status": {"containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}}]}}
    with pytest.raises(ApiError) as info:
        logs.lines(pod, "main", previous=False)
    assert (info.value.code, info.value.message) == (
        400, 'container "main" in pod "new" is waiting to start: ContainerCreating')
    assert not logs.ended(pod, "main")
