"""One vocabulary for provider failures, shared by every provider plugin.

A host that switches providers keeps its error handling: whichever SDK failed, the run's
``ErrorInfo.code`` is one of the ``PROVIDER_*`` codes below, ``retryable`` says whether
Prism's retry policy may try the turn again, and ``retry_after_ms`` carries the server's
``retry-after``. Provider plugins map their SDK's exceptions with :func:`http_error_info`
(an HTTP status and the server's message) and :func:`retry_after_ms`, and remove their API
key from every message with :func:`redact_credentials`.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Iterable, Mapping
from datetime import UTC

from .content import ErrorInfo

__all__ = (
    "PROVIDER_AUTH",
    "PROVIDER_CONFIG",
    "PROVIDER_CONNECTION",
    "PROVIDER_CONTENT_FILTER",
    "PROVIDER_OPTIONS",
    "PROVIDER_OVERLOADED",
    "PROVIDER_RATE_LIMITED",
    "PROVIDER_REQUEST",
    "PROVIDER_SERVER",
    "PROVIDER_STREAM",
    "PROVIDER_TIMEOUT",
    "http_error_info",
    "redact_credentials",
    "retry_after_ms",
)

#: 429: the server asks the caller to slow down (retryable, honouring ``retry-after``).
PROVIDER_RATE_LIMITED = "ERR_PRISM_PROVIDER_RATE_LIMITED"
#: 503/529 or an "overloaded" error: the model is busy (retryable).
PROVIDER_OVERLOADED = "ERR_PRISM_PROVIDER_OVERLOADED"
#: Any other 5xx, 408 or 409 (retryable).
PROVIDER_SERVER = "ERR_PRISM_PROVIDER_SERVER"
#: 401/403: the key is missing, wrong or lacks permission (final).
PROVIDER_AUTH = "ERR_PRISM_PROVIDER_AUTH"
#: Other 4xx: the request itself is wrong (final).
PROVIDER_REQUEST = "ERR_PRISM_PROVIDER_REQUEST"
#: No answer within the connect or read timeout (retryable).
PROVIDER_TIMEOUT = "ERR_PRISM_PROVIDER_TIMEOUT"
#: The server could not be reached (retryable).
PROVIDER_CONNECTION = "ERR_PRISM_PROVIDER_CONNECTION"
#: The stream broke off or reported an error after it started.
PROVIDER_STREAM = "ERR_PRISM_PROVIDER_STREAM"
#: The provider is not configured (no key, bad options): nothing was sent (final).
PROVIDER_CONFIG = "ERR_PRISM_PROVIDER_CONFIG"
#: A provider option the provider cannot send (a wrong type, a reserved key): nothing was
#: sent (final).
PROVIDER_OPTIONS = "ERR_PRISM_PROVIDER_OPTIONS"
#: The server withheld the answer by policy (final).
PROVIDER_CONTENT_FILTER = "ERR_PRISM_PROVIDER_CONTENT_FILTER"


def retry_after_ms(headers: Mapping[str, str] | None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` (seconds or an
    HTTP date), in milliseconds; ``None`` when absent or unreadable."""
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            value = float(raw_ms)
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds * 1000.0)


def http_error_info(
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
    retryable: bool | None = None,
) -> ErrorInfo:
    """The ``ErrorInfo`` for an HTTP error answer of a model server.

    The code and retryability follow the status (429 rate limited, 503/529 overloaded, other
    5xx/408/409 server, 401/403 auth, other 4xx request); ``code`` and ``retryable`` override
    them when the server said more (an error type in the body). A retryable error carries the
    server's ``retry-after``.
    """
    if status == 429:
        derived, again = PROVIDER_RATE_LIMITED, True
    elif status in (503, 529):
        derived, again = PROVIDER_OVERLOADED, True
    elif status >= 500 or status in (408, 409):
        derived, again = PROVIDER_SERVER, True
    elif status in (401, 403):
        derived, again = PROVIDER_AUTH, False
    else:
        derived, again = PROVIDER_REQUEST, False
    final_retryable = again if retryable is None else retryable
    wait = retry_after_ms(headers) if final_retryable else None
    return ErrorInfo(message, code or derived, final_retryable, wait)


def redact_credentials(message: str, secrets: Iterable[str | None]) -> str:
    """``message`` with each secret, and the masked forms servers echo of it, removed.

    Servers often echo a masked key (``sk-abcd****wxyz``); its visible head is still a secret,
    so for a secret of 12 or more characters anything starting with its first six is removed.
    """
    for secret in secrets:
        if not secret:
            continue
        message = message.replace(secret, "[REDACTED]")
        if len(secret) >= 12:
            message = re.sub(re.escape(secret[:6]) + r"\S*", "[REDACTED]", message)
    return message
