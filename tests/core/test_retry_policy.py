"""The retry policy's delays: exponential backoff, a server's retry-after, the cap."""

from __future__ import annotations

from prism_core.content import ErrorInfo
from prism_core.retry import RetryConfig


def test_backoff_grows_exponentially() -> None:
    """Without a retry-after, the delay doubles per attempt from the base delay."""
    config = RetryConfig(max_attempts=4, base_delay_ms=100, multiplier=2)
    error = ErrorInfo("overloaded", retryable=True)
    assert [config.decide(n, error).delay_ms for n in (1, 2, 3)] == [100, 200, 400]
    assert config.decide(4, error).retry is False


def test_retry_after_lengthens_the_delay_up_to_the_cap() -> None:
    """A server's retry-after is honoured when longer than the backoff, within max_delay_ms."""
    config = RetryConfig(base_delay_ms=100, max_delay_ms=5000)
    assert config.decide(1, ErrorInfo("429", retry_after_ms=2000)).delay_ms == 2000
    assert config.decide(1, ErrorInfo("429", retry_after_ms=50)).delay_ms == 100
    assert config.decide(1, ErrorInfo("429", retry_after_ms=60000)).delay_ms == 5000


def test_non_retryable_error_is_not_retried_even_with_retry_after() -> None:
    """retryable=False wins over a retry-after hint."""
    config = RetryConfig()
    assert config.decide(1, ErrorInfo("401", retryable=False, retry_after_ms=10)).retry is False
