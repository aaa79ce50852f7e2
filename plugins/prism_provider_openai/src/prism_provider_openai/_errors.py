"""Turning OpenAI SDK and HTTP failures into Prism's shared provider error codes.

The codes, the status mapping and ``retry-after`` parsing are ``prism_core.provider_errors``;
what is OpenAI's own is where the server's message sits in the body and that a 429 can mean
"out of credit", which waiting does not cure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openai

from prism_core import ErrorInfo
from prism_core.provider_errors import (
    PROVIDER_CONFIG,
    PROVIDER_CONNECTION,
    PROVIDER_STREAM,
    PROVIDER_TIMEOUT,
    http_error_info,
    redact_credentials,
)

__all__ = ("error_info", "redact_key")

# 429 also means "out of credit" on OpenAI; waiting does not help with that one.
_NOT_RETRYABLE_429 = frozenset({"insufficient_quota", "billing_hard_limit_reached"})


def redact_key(message: str, api_key: str | None) -> str:
    """``message`` with the API key, and the masked forms servers echo of it, removed."""
    return redact_credentials(message, (api_key,))


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
        info = http_error_info(
            status,
            f"HTTP {status} from the model server: {_server_message(exc)}",
            headers=exc.response.headers,
            retryable=False if status == 429 and exc.code in _NOT_RETRYABLE_429 else None,
        )
    elif isinstance(exc, openai.APITimeoutError):
        info = ErrorInfo(
            "The model server did not answer in time (timeout)", PROVIDER_TIMEOUT, True
        )
    elif isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause is not None and str(cause) else ""
        info = ErrorInfo(f"Could not reach the model server{detail}", PROVIDER_CONNECTION, True)
    elif isinstance(exc, openai.APIError):
        # An error event inside a 200 stream.
        message = f"The model server failed mid-stream: {_server_message(exc)}"
        info = ErrorInfo(message, PROVIDER_STREAM, True)
    else:
        info = ErrorInfo(str(exc) or type(exc).__name__, PROVIDER_CONFIG, False)
    return ErrorInfo(
        redact_key(info.message, api_key), info.code, info.retryable, info.retry_after_ms
    )
