"""Turning SDK and HTTP failures into Prism ``ErrorInfo`` values the retry policy understands."""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from datetime import UTC
from typing import Any

import openai

from prism_core import ErrorInfo

__all__ = (
    "AUTH",
    "CONFIG",
    "CONNECTION",
    "CONTENT_FILTER",
    "OVERLOADED",
    "RATE_LIMITED",
    "REQUEST",
    "SERVER",
    "STREAM",
    "TIMEOUT",
    "error_info",
    "redact_key",
    "retry_after_ms",
)

RATE_LIMITED = "ERR_PRISM_PROVIDER_RATE_LIMITED"
OVERLOADED = "ERR_PRISM_PROVIDER_OVERLOADED"
SERVER = "ERR_PRISM_PROVIDER_SERVER"
AUTH = "ERR_PRISM_PROVIDER_AUTH"
REQUEST = "ERR_PRISM_PROVIDER_REQUEST"
TIMEOUT = "ERR_PRISM_PROVIDER_TIMEOUT"
CONNECTION = "ERR_PRISM_PROVIDER_CONNECTION"
STREAM = "ERR_PRISM_PROVIDER_STREAM"
CONFIG = "ERR_PRISM_PROVIDER_CONFIG"
CONTENT_FILTER = "ERR_PRISM_PROVIDER_CONTENT_FILTER"

# 429 also means "out of credit" on OpenAI; waiting does not help with that one.
_NOT_RETRYABLE_429 = frozenset({"insufficient_quota", "billing_hard_limit_reached"})


def retry_after_ms(headers: Mapping[str, str]) -> float | None:
    """The server's requested wait: ``retry-after-ms``, else ``retry-after`` (seconds or a date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms)
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        seconds = parsed.timestamp() - time.time()
    return max(0.0, seconds * 1000.0)


def redact_key(message: str, api_key: str | None) -> str:
    """``message`` with the API key, and the masked forms servers echo of it, removed."""
    if not api_key:
        return message
    message = message.replace(api_key, "[REDACTED]")
    if len(api_key) >= 12:
        # Servers echo a masked key ("sk-abcd****wxyz"); its visible head is still secret.
        message = re.sub(re.escape(api_key[:6]) + r"\S*", "[REDACTED]", message)
    return message


def _server_message(exc: openai.APIError) -> str:
    body: Any = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    if isinstance(body, str) and body.strip():
        return body.strip()
    return exc.message


def error_info(exc: BaseException, *, api_key: str | None) -> ErrorInfo:
    """The ``ErrorInfo`` for an SDK exception; the API key never appears in the message."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"HTTP {status} from the model server: {_server_message(exc)}"
        wait = retry_after_ms(exc.response.headers)
        if status == 429:
            retryable = exc.code not in _NOT_RETRYABLE_429
            info = ErrorInfo(message, RATE_LIMITED, retryable, wait if retryable else None)
        elif status in (503, 529):
            info = ErrorInfo(message, OVERLOADED, True, wait)
        elif status >= 500 or status in (408, 409):
            info = ErrorInfo(message, SERVER, True, wait)
        elif status in (401, 403):
            info = ErrorInfo(message, AUTH, False)
        else:
            info = ErrorInfo(message, REQUEST, False)
    elif isinstance(exc, openai.APITimeoutError):
        info = ErrorInfo("The model server did not answer in time (timeout)", TIMEOUT, True)
    elif isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause is not None and str(cause) else ""
        info = ErrorInfo(f"Could not reach the model server{detail}", CONNECTION, True)
    elif isinstance(exc, openai.APIError):
        # An error event inside a 200 stream.
        message = f"The model server failed mid-stream: {_server_message(exc)}"
        info = ErrorInfo(message, STREAM, True)
    else:
        info = ErrorInfo(str(exc) or type(exc).__name__, CONFIG, False)
    return ErrorInfo(
        redact_key(info.message, api_key), info.code, info.retryable, info.retry_after_ms
    )
