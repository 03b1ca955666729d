"""What ``kubectl logs`` shows for a container of the fake kubelet.

Layer: kubesim (imports nothing from batchd). Called by the server's ``pods/log`` handler.

The fake kubelet runs nothing, so a container's log is made from what its status records, the
same on every read: a first line with the command it would have run (at the run's start), and,
once the run has ended, a last line with its exit code (at its end). ``kubectl logs -f`` keeps
the stream open until that last line exists, as it ends when a real container does.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from kubesim.errors import ApiError, bad_request

__all__ = ["LogLine", "ended", "lines", "pick_container"]

Obj = dict[str, Any]


@dataclass(frozen=True)
class LogLine:
    """One line and the instant it was written (an RFC 3339 timestamp of the container state)."""

    at: str
    text: str

    def render(self, timestamps: bool) -> bytes:
        if not timestamps:
            return f"{self.text}\n".encode()
        # The kubelet prefixes RFC 3339 with nanoseconds; kubesim's times have whole seconds.
        at = self.at[:-1] + ".000000000Z" if self.at.endswith("Z") and "." not in self.at else self.at
        return f"{at} {self.text}\n".encode()


def _spec_container(pod: Obj, name: str) -> Obj:
    spec = pod.get("spec") or {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if c.get("name") == name:
            return dict(c)
    return {}


def _status(pod: Obj, name: str) -> Obj | None:
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") == name:
            return dict(cs)
    return None


def pick_container(pod: Obj, requested: str | None) -> str:
    """The container a log request reads, with the API server's errors for a bad choice."""
    spec = pod.get("spec") or {}
    names: list[str] = [c.get("name", "") for c in spec.get("containers") or []]
    init: list[str] = [c.get("name", "") for c in spec.get("initContainers") or []]
    pod_name = pod["metadata"]["name"]
    if requested:
        if requested not in names + init:
            raise bad_request(f"container {requested} is not valid for pod {pod_name}")
        return requested
    if len(names) == 1:
        return names[0]
    default = (pod["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    if default in names:
        return str(default)
    choices = " ".join(names)
    message = f"a container name must be specified for pod {pod_name}, choose one of: [{choices}]"
    if init:
        message += f" or one of the init containers: [{' '.join(init)}]"
    raise bad_request(message)


def _command_line(container: Obj) -> str:
    words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
    if not words:
        return f"+ (entrypoint of {container.get('image', '')})"
    return "+ " + shlex.join(words)


def lines(pod: Obj, container: str, *, previous: bool) -> list[LogLine]:
    """The log of the container's current run (or, with ``previous``, of its last ended run).

    Raises:
        ApiError: 400 when the container has not started (or has no previous run), as the
            kubelet answers through the API server.
    """
    pod_name = pod["metadata"]["name"]
    cs = _status(pod, container)
    if previous:
        state = ((cs or {}).get("lastState") or {}).get("terminated")
        if not state:
            raise bad_request(f'previous terminated container "{container}" in pod "{pod_name}" not found')
    else:
        current = (cs or {}).get("state") or {}
        state = current.get("running") or current.get("terminated")
        if not state:
            waiting = (current.get("waiting") or {}).get("reason") or "ContainerCreating"
            raise ApiError(400, "BadRequest",
                           f'container "{container}" in pod "{pod_name}" is waiting to start: {waiting}')
    out = [LogLine(state.get("startedAt") or "", _command_line(_spec_container(pod, container)))]
    if "exitCode" in state:
        out.append(LogLine(state.get("finishedAt") or "", f"kubesim: exit code {state['exitCode']}"))
    return out


def ended(pod: Obj, container: str) -> bool:
    """Whether the container's current run has ended for good (``-f`` stops there)."""
    cs = _status(pod, container)
    if cs is None:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    return bool((cs.get("state") or {}).get("terminated"))

