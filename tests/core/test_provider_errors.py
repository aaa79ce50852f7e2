"""The shared provider failure vocabulary: status mapping, retry-after, credential redaction."""

from __future__ import annotations

import email.utils
import time

import pytest

from prism_core import provider_errors as pe


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (429, pe.PROVIDER_RATE_LIMITED, True),
        (503, pe.PROVIDER_OVERLOADED, True),
        (529, pe.PROVIDER_OVERLOADED, True),
        (500, pe.PROVIDER_SERVER, True),
        (408, pe.PROVIDER_SERVER, True),
        (401, pe.PROVIDER_AUTH, False),
        (403, pe.PROVIDER_AUTH, False),
        (400, pe.PROVIDER_REQUEST, False),
        (422, pe.PROVIDER_REQUEST, False),
    ],
)
def test_status_decides_code_and_retryability(status: int, code: str, retryable: bool) -> None:
    """Each HTTP status maps to one shared code; only retryable errors carry a wait."""
    info = pe.http_error_info(status, "boom", headers={"retry-after": "2"})
    assert (info.code, info.retryable) == (code, retryable)
    assert info.retry_after_ms == (2000.0 if retryable else None)


def test_server_facts_override_the_status() -> None:
    """An error type the body names wins over the status's default mapping."""
    info = pe.http_error_info(500, "x", code=pe.PROVIDER_OVERLOADED, retryable=False)
    assert (info.code, info.retryable, info.retry_after_ms) == (pe.PROVIDER_OVERLOADED, False, None)


def test_retry_after_forms() -> None:
    """retry-after-ms wins; retry-after is seconds or an HTTP date; junk reads as absent."""
    assert pe.retry_after_ms({"retry-after-ms": "250", "retry-after": "9"}) == 250.0
    assert pe.retry_after_ms({"retry-after": "1.5"}) == 1500.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25_000 <= (pe.retry_after_ms({"retry-after": when}) or 0) <= 31_000
    assert pe.retry_after_ms({"retry-after": "soon"}) is None
    assert pe.retry_after_ms({"retry-after-ms": "-5"}) is None
    assert pe.retry_after_ms(None) is None


def test_redact_credentials_removes_keys_and_their_masked_echo() -> None:
    """The key, and a masked echo starting with its head, never survive."""
    key = "sk-abcdef1234567890"
    message = f"bad key {key}; you sent sk-abcd****7890 (key {key[:6]}…)"
    redacted = pe.redact_credentials(message, (key, None, ""))
    assert "abcdef" not in redacted
    assert "sk-abcd" not in redacted
    assert redacted.startswith("bad key [REDACTED]")
