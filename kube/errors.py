"""The Kubernetes error taxonomy, mapped once (STYLE rule 7).

The client (kube/client.py) turns every failure into one of these :class:`KubeError` subclasses
(``http.client``, socket and TLS errors never escape it), with retryability as data: 429, 5xx,
timeouts, connection failures and conflicts retry (honouring ``Retry-After``); 400, 403, 422 are
permanent. NotFound is usually a result, not an error: callers catch it where "gone" means
"done". activities/errors.py hands them to workflows as ``ApplicationError``.
"""

from __future__ import annotations

import json
from typing import Any

_MAX_MESSAGE = 300


class KubeError(Exception):
    """A failed Kubernetes request; ``status`` is the HTTP code (0 when none came back)."""

    retryable = True

    def __init__(
        self, status: int, reason: str, message: str, *, retry_after: float | None = None,
        causes: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.causes = causes  # the Status body's details.causes[].reason, in order


class NotFound(KubeError):
    """404."""

    retryable = False


class AlreadyExists(KubeError):
    """409 AlreadyExists: the deterministic name is taken (usually by our own earlier attempt)."""

    retryable = False


class Conflict(KubeError):
    """409 Conflict: stale resourceVersion or a failed precondition; re-read and retry."""


class Invalid(KubeError):
    """422 Invalid: the object breaks validation; retrying cannot help."""

    retryable = False


class Forbidden(KubeError):
    """403: RBAC or admission refused (quota-like refusals are retried by callers that expect them)."""

    retryable = False


class BadRequest(KubeError):
    """400 and other 4xx a retry cannot fix."""

    retryable = False


class TooManyRequests(KubeError):
    """429: server-side throttling; retry after ``retry_after``."""


class ServerError(KubeError):
    """5xx."""


class Unreachable(KubeError):
    """No HTTP answer: connection refused or reset, timeout, TLS failure."""


def _truncate(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"


def from_response(status: int, body: bytes | str | None, headers: Any = None) -> KubeError:
    """Classify an HTTP error response; keeps only a ``Status`` body's reason and message."""
    reason, message = "", ""
    causes: tuple[str, ...] = ()
    try:
        doc = json.loads(body or b"{}")
        if isinstance(doc, dict) and doc.get("kind") == "Status":
            reason = str(doc.get("reason") or "")
            message = str(doc.get("message") or "")
            details = doc.get("details")
            if isinstance(details, dict):
                causes = tuple(str(c.get("reason") or "") for c in details.get("causes") or [] if isinstance(c, dict))
    except (ValueError, TypeError):
        pass
    message = _truncate(message or f"HTTP {status}")
    retry_after: float | None = None
    if headers is not None:
        raw = headers.get("Retry-After")
        if raw is not None:
            try:
                retry_after = float(raw)
            except ValueError:
                retry_after = None
    cls: type[KubeError]
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status == 422:
        cls = Invalid
    elif status == 403:
        cls = Forbidden
    elif status == 429:
        cls = TooManyRequests
    elif status >= 500:
        cls = ServerError
    else:
        cls = BadRequest
    return cls(status, reason, message, retry_after=retry_after, causes=causes)


def namespace_terminating(err: KubeError) -> bool:
    """A create refused because its namespace is being deleted (the cause upstream checks)."""
    return isinstance(err, Forbidden) and "NamespaceTerminating" in err.causes
