"""Mapping Anthropic failures (HTTP statuses, stream ``error`` events, transport) to ``ErrorInfo``.

Retryable: rate limits (429), overload (529), server errors (5xx), request timeouts (408),
conflicts (409), transport failures and read timeouts, and the same kinds when they arrive as
an ``error`` event in the middle of a stream. Everything else (authentication, permission,
bad request, not found, too large) is final. Prism's retry policy does the retrying; the SDK's
own retries are turned off.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable, Mapping
from typing import Any

import anthropic
import httpx2

from prism_core import ErrorInfo

__all__ = ("error_info", "retry_after_ms")

_RETRYABLE_STATUSES = frozenset({408, 409, 429})
# ``error.type`` values of the API's error bodies (also sent as stream ``error`` events).
_RETRYABLE_TYPES = frozenset({"rate_limit_error", "overloaded_error", "api_error", "timeout_error"})
_CODES_BY_TYPE = {
    "rate_limit_error": "provider_rate_limited",
    "overloaded_error": "provider_overloaded",
    "api_error": "provider_server_error",
    "timeout_error": "provider_timeout",
    "authentication_error": "provider_authentication",
    "permission_error": "provider_permission_denied",
    "invalid_request_error": "provider_invalid_request",
    "not_found_error": "provider_not_found",
    "request_too_large": "provider_request_too_large",
    "billing_error": "provider_billing",
}
_CODES_BY_STATUS = {
    400: "provider_invalid_request",
    401: "provider_authentication",
    403: "provider_permission_denied",
    404: "provider_not_found",
    408: "provider_timeout",
    409: "provider_conflict",
    413: "provider_request_too_large",
    429: "provider_rate_limited",
    529: "provider_overloaded",
}


def retry_after_ms(headers: Mapping[str, str] | None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` (seconds, date)."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value) * 1000)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when.timestamp() - time.time()) * 1000)


def _body_error(body: Any) -> tuple[str | None, str | None]:
    """``(error.type, error.message)`` of an API error body, when it has that shape."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            kind, message = inner.get("type"), inner.get("message")
            return (
                kind if isinstance(kind, str) else None,
                message if isinstance(message, str) else None,
            )
    return None, None


def _redact(message: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            message = message.replace(secret, "[REDACTED]")
    return message


def _status_info(exc: anthropic.APIStatusError) -> ErrorInfo:
    status = exc.status_code
    kind, server_message = _body_error(exc.body)
    mid_stream = status < 400  # an ``error`` event after a 200 response
    if mid_stream:
        retryable = kind in _RETRYABLE_TYPES
        where = "Anthropic stream error"
    else:
        retryable = status in _RETRYABLE_STATUSES or status >= 500
        where = f"Anthropic API error {status}"
    code = _CODES_BY_TYPE.get(kind or "") or _CODES_BY_STATUS.get(status)
    if code is None:
        code = "provider_server_error" if status >= 500 else "provider_error"
    detail = server_message or (exc.body if isinstance(exc.body, str) else None) or exc.message
    label = f" ({kind})" if kind else ""
    return ErrorInfo(
        f"{where}{label}: {detail}",
        code=code,
        retryable=retryable,
        retry_after_ms=retry_after_ms(exc.response.headers) if retryable else None,
    )


def error_info(exc: BaseException, *, secrets: Iterable[str] = ()) -> ErrorInfo:
    """The ``ErrorInfo`` for a failure of the SDK or its transport; ``secrets`` are redacted."""
    if isinstance(exc, anthropic.APIStatusError):
        info = _status_info(exc)
    elif isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        info = ErrorInfo(
            "Anthropic request timed out (no data within the read timeout, or no connection "
            "within the connect timeout); raise timeout= on create_anthropic_provider if the "
            "model needs longer",
            code="provider_timeout",
            retryable=True,
        )
    elif isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) else exc
        reason = f": {cause}" if cause is not None and str(cause) else ""
        info = ErrorInfo(
            f"Could not reach the Anthropic API{reason}", code="provider_connection", retryable=True
        )
    elif isinstance(exc, TypeError | anthropic.CredentialsError):
        info = ErrorInfo(
            f"The Anthropic client is not configured: {exc}. Set ANTHROPIC_API_KEY or pass "
            "api_key= (or client=) to create_anthropic_provider",
            code="provider_configuration",
            retryable=False,
        )
    else:
        info = ErrorInfo(
            f"Anthropic provider failed: {exc}" if str(exc) else type(exc).__name__,
            code="provider_error",
            retryable=False,
        )
    message = _redact(info.message, secrets)
    return (
        info
        if message == info.message
        else ErrorInfo(
            message, code=info.code, retryable=info.retryable, retry_after_ms=info.retry_after_ms
        )
    )
