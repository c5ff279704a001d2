"""Errors of the Shardplan client.

The server answers every error as ``{"error": {"code", "message", "path"}}``
(docs/api.md, "Errors"): ``code`` is one of a fixed set (``invalid``,
``not_found``, ...) and ``path`` is a JSON Pointer into the request
(``/ops/3/operands/0``, ``/options/pass``, ``/limit``) or ``LINE:COL`` in
MLIR, empty when the error is not about the input. Each code has its own
subclass of :class:`ShardplanError`, so callers can catch what they expect::

    try:
        client.get_plan(999)
    except shardplan.NotFound as e:
        print(e.code, e.path, e.message)   # not_found /id no plan 999
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Type


class ShardplanError(Exception):
    """An error answer of the server, or no answer at all (:class:`TransportError`).

    Attributes: ``status`` (the HTTP status, 0 when nothing came back),
    ``code`` (the server's error code), ``message``, ``path`` (the JSON
    Pointer or ``LINE:COL`` into the request, "" when none), ``method`` and
    ``url`` of the request, ``body`` (the raw answer) and ``retry_after``
    (seconds, from a 503's ``Retry-After``, else None).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        path: str = "",
        method: str = "",
        url: str = "",
        body: bytes = b"",
        retry_after: Optional[float] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.path = path
        self.method = method
        self.url = url
        self.body = body
        self.retry_after = retry_after
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"HTTP {self.status}: " if self.status else ""
        code = f"{self.code}: " if self.code else ""
        at = f" at {self.path}" if self.path else ""
        return f"{head}{code}{self.message}{at}"

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild, (type(self), self.message, self.__dict__.copy()))


def _rebuild(cls: Type[ShardplanError], message: str, state: Dict[str, Any]) -> ShardplanError:
    e = cls.__new__(cls)
    e.__dict__.update(state)
    Exception.__init__(e, message)
    return e


class TransportError(ShardplanError):
    """No HTTP answer: the server is unreachable, the connection broke, or it timed out."""


class BadRequest(ShardplanError):
    """400 ``invalid``: bad JSON, graph, MLIR, mesh, rule, profile or query argument."""


class Unauthorized(ShardplanError):
    """401 ``unauthorized``: the token is missing or unknown."""


class Forbidden(ShardplanError):
    """403 ``forbidden``: the token's scope does not allow the request."""


class NotFound(ShardplanError):
    """404 ``not_found``: no such resource or id."""


class MethodNotAllowed(ShardplanError):
    """405 ``method_not_allowed``."""


class Conflict(ShardplanError):
    """409 ``conflict``: a create-only write over another document, an ended run canceled,
    an Idempotency-Key reused for another body."""


class PayloadTooLarge(ShardplanError):
    """413 ``too_large``: the body is over the server's limit."""


class UnsupportedMediaType(ShardplanError):
    """415 ``unsupported_media_type``."""


class RequestTimeout(ShardplanError):
    """408 ``request_timeout``: the request head did not arrive within the server's deadline."""


class UriTooLong(BadRequest):
    """414 ``uri_too_long``: the request line is over the server's limit."""


class HeadersTooLarge(BadRequest):
    """431 ``headers_too_large``: the request head is over the server's size or field limit."""


class NotImplementedByServer(ShardplanError):
    """501 ``not_implemented``: a transfer coding other than ``chunked``."""


class HttpVersionNotSupported(ShardplanError):
    """505 ``http_version_not_supported``: a version other than HTTP/1.0 or 1.1."""


class ServerError(ShardplanError):
    """500 ``internal``: the server's own stored data or a bug."""


class Unavailable(ShardplanError):
    """503 ``unavailable`` or ``out_of_memory``: retry later (see ``retry_after``)."""


class PlanTimeout(Unavailable):
    """503 ``timeout``: the plan or computation ran past the server's limit.

    A plan goes on in the background and is stored when it finishes, so
    the same request retried later is answered from the store (200). Suggest
    and sweep stop at ``--compute-timeout`` instead: raise it rather than
    retrying those.
    """


class BenchmarkFailed(ShardplanError):
    """A benchmark awaited with ``wait=True`` ended failed or canceled; ``run`` is the final run."""

    run: Any = None


class WaitTimeout(ShardplanError):
    """A benchmark awaited with a timeout is still queued or running; ``run`` is its last state."""

    run: Any = None


_BY_CODE: Dict[str, Type[ShardplanError]] = {
    "invalid": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "conflict": Conflict,
    "too_large": PayloadTooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "internal": ServerError,
    "unavailable": Unavailable,
    "out_of_memory": Unavailable,
    "timeout": PlanTimeout,
    "request_timeout": RequestTimeout,
    "uri_too_long": UriTooLong,
    "headers_too_large": HeadersTooLarge,
    "not_implemented": NotImplementedByServer,
    "http_version_not_supported": HttpVersionNotSupported,
}

_BY_STATUS: Dict[int, Type[ShardplanError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    408: RequestTimeout,
    409: Conflict,
    413: PayloadTooLarge,
    414: UriTooLong,
    415: UnsupportedMediaType,
    431: HeadersTooLarge,
    500: ServerError,
    501: NotImplementedByServer,
    503: Unavailable,
    505: HttpVersionNotSupported,
}


def error_from_response(
    status: int,
    body: bytes,
    *,
    method: str = "",
    url: str = "",
    retry_after: Optional[str] = None,
) -> ShardplanError:
    """The exception for an error answer: the class of its ``code`` (else of its status)."""
    code, message, path = "", "", ""
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        doc = None
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        code = str(err.get("code") or "")
        message = str(err.get("message") or "")
        path = str(err.get("path") or "")
    else:
        message = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or ShardplanError
    ra: Optional[float] = None
    if retry_after:
        try:
            ra = float(retry_after)
        except ValueError:
            ra = None
    return cls(
        message,
        status=status,
        code=code,
        path=path,
        method=method,
        url=url,
        body=body,
        retry_after=ra,
    )
