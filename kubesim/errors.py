"""API errors as kube-apiserver reports them: a ``meta.k8s.io/v1 Status`` body and an HTTP code.

Layer: kubesim (imports nothing from batchd). Raised by the store, the strategies and the HTTP
handlers; the server turns every :class:`ApiError` into its Status response in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One ``details.causes`` entry: the field path, the reason type and a message."""

    field: str
    reason: str  # FieldValueInvalid, FieldValueRequired, FieldValueNotSupported, FieldValueForbidden, ...
    message: str


@dataclass
class ApiError(Exception):
    """An error with the code, reason and details kube-apiserver would send."""

    code: int
    reason: str
    message: str
    kind: str | None = None
    name: str | None = None
    group: str | None = None
    causes: list[Cause] = field(default_factory=list)
    retry_after_seconds: int | None = None
    details: bool = False  # write ``details`` even when it is empty, as route errors carry it
    continue_token: str | None = None  # an expired continue's: where an inconsistent list goes on

    def __str__(self) -> str:
        return self.message

    def status(self) -> dict[str, Any]:
        """Return the ``Status`` object body for this error."""
        details: dict[str, Any] = {}  # every StatusDetails field is omitempty
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [  # each StatusCause field is omitempty
                {k: v for k, v in (("reason", c.reason), ("message", c.message), ("field", c.field)) if v}
                for c in self.causes
            ]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {"continue": self.continue_token} if self.continue_token else {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # an internal error from storage has none
            body["reason"] = self.reason
        body["code"] = self.code
        if details or self.details:
            body["details"] = details
        return body


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    """404, as ``jobs.batch "x" not found``."""
    qual = f"{resource}.{group}" if group else resource
    return ApiError(404, "NotFound", f'{qual} "{name}" not found', kind=resource, name=name, group=group or None)


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    """409 AlreadyExists on create of an existing name."""
    qual = f"{resource}.{group}" if group else resource
    return ApiError(409, "AlreadyExists", f'{qual} "{name}" already exists', kind=resource, name=name, group=group or None)


def conflict(resource: str, name: str, detail: str, group: str = "") -> ApiError:
    """409 Conflict (stale resourceVersion, failed precondition)."""
    qual = f"{resource}.{group}" if group else resource
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qual} "{name}": {detail}', kind=resource, name=name, group=group or None)


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> ApiError:
    """422 Invalid with one cause per offending field, message as kube-apiserver words it."""
    qual = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{qual} "{name}" is invalid: {aggregate(causes)}', kind=kind, name=name, group=group or None, causes=causes)


def aggregate(causes: list[Cause]) -> str:
    """The causes as Go's error aggregate prints them: duplicates once, several in brackets."""
    texts = list(dict.fromkeys(f"{c.field}: {c.message}" if c.field else c.message for c in causes))
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def no_resource() -> ApiError:
    """404 for a path no resource is served at."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", details=True)


def no_method() -> ApiError:
    """405 for a verb the resource does not take."""
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
                    details=True)


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    """410 Gone (watch or continue token from a compacted resourceVersion)."""
    return ApiError(410, "Expired", message)
