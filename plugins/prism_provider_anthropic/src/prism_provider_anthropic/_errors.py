"""Mapping Anthropic failures (HTTP statuses, stream ``error`` events, transport) to ``ErrorInfo``.

Retryable: rate limits (429), overload (529), server errors (5xx), request timeouts (408),
conflicts (409), transport failures and read timeouts, and the same kinds when they arrive as
an ``error`` event in the middle of a stream. Everything else (authentication, permission,
bad request, not found, too large) is final. Prism's retry policy does the retrying; the SDK's
own retries are turned off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import anthropic
import httpx2

from prism_core import ErrorInfo
from prism_core.provider_errors import (
    PROVIDER_AUTH,
    PROVIDER_CONFIG,
    PROVIDER_CONNECTION,
    PROVIDER_OVERLOADED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_REQUEST,
    PROVIDER_SERVER,
    PROVIDER_STREAM,
    PROVIDER_TIMEOUT,
    http_error_info,
    redact_credentials,
    retry_after_ms,
)

__all__ = ("error_info",)

# ``error.type`` values of the API's error bodies (also sent as stream ``error`` events),
# mapped onto the shared provider codes: (code, retryable).
_BY_TYPE: dict[str, tuple[str, bool]] = {
    "rate_limit_error": (PROVIDER_RATE_LIMITED, True),
    "overloaded_error": (PROVIDER_OVERLOADED, True),
    "api_error": (PROVIDER_SERVER, True),
    "timeout_error": (PROVIDER_TIMEOUT, True),
    "authentication_error": (PROVIDER_AUTH, False),
    "permission_error": (PROVIDER_AUTH, False),
    "invalid_request_error": (PROVIDER_REQUEST, False),
    "not_found_error": (PROVIDER_REQUEST, False),
    "request_too_large": (PROVIDER_REQUEST, False),
    "billing_error": (PROVIDER_REQUEST, False),
}


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


def _status_info(exc: anthropic.APIStatusError) -> ErrorInfo:
    status = exc.status_code
    kind, server_message = _body_error(exc.body)
    mid_stream = status < 400  # an ``error`` event after a 200 response
    where = "Anthropic stream error" if mid_stream else f"Anthropic API error {status}"
    detail = server_message or (exc.body if isinstance(exc.body, str) else None) or exc.message
    label = f" ({kind})" if kind else ""
    message = f"{where}{label}: {detail}"
    if mid_stream:
        code, retryable = _BY_TYPE.get(kind or "", (PROVIDER_STREAM, False))
        wait = retry_after_ms(exc.response.headers) if retryable else None
        return ErrorInfo(message, code, retryable, wait)
    known = _BY_TYPE.get(kind or "")
    return http_error_info(
        status,
        message,
        headers=exc.response.headers,
        code=known[0] if known else None,
        retryable=known[1] if known else None,
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
            code=PROVIDER_TIMEOUT,
            retryable=True,
        )
    elif isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) else exc
        reason = f": {cause}" if cause is not None and str(cause) else ""
        info = ErrorInfo(
            f"Could not reach the Anthropic API{reason}", code=PROVIDER_CONNECTION, retryable=True
        )
    elif isinstance(exc, TypeError | anthropic.CredentialsError):
        info = ErrorInfo(
            f"The Anthropic client is not configured: {exc}. Set ANTHROPIC_API_KEY or pass "
            "api_key= (or client=) to create_anthropic_provider",
            code=PROVIDER_CONFIG,
            retryable=False,
        )
    else:
        info = ErrorInfo(
            f"Anthropic provider failed: {exc}" if str(exc) else type(exc).__name__,
            code=PROVIDER_CONFIG,
            retryable=False,
        )
    message = redact_credentials(info.message, secrets)
    return ErrorInfo(message, info.code, info.retryable, info.retry_after_ms)
