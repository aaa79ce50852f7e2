"""Provider-turn retry: only before any output, with abort-aware exponential backoff."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .content import ErrorInfo

__all__ = ("RetryConfig", "RetryDecision", "coerce_retry")


@attrs.frozen(kw_only=True)
class RetryDecision:
    """Whether to retry the failed turn, and after how long."""

    retry: bool
    delay_ms: float = 0.0


@attrs.frozen(kw_only=True)
class RetryConfig:
    """Retry a provider turn that failed before emitting output.

    ``max_attempts`` counts every attempt (the first included). The delay before attempt
    ``n + 1`` is ``min(max_delay_ms, base_delay_ms * multiplier ** (n - 1))``.
    ``should_retry(error)`` may veto; by default every error not marked
    ``retryable=False`` is retried. When the error carries ``retry_after_ms`` (a server's
    ``retry-after``), the delay is at least that long, still capped by ``max_delay_ms``.
    """

    max_attempts: int = 3
    base_delay_ms: float = 100.0
    max_delay_ms: float = 5000.0
    multiplier: float = 2.0
    should_retry: Callable[[ErrorInfo], bool] | None = attrs.field(default=None, eq=False)

    def decide(self, attempt: int, error: ErrorInfo) -> RetryDecision:
        """The decision after ``attempt`` (1-based) failed with ``error``."""
        if attempt >= self.max_attempts or error.retryable is False:
            return RetryDecision(retry=False)
        if self.should_retry is not None and not self.should_retry(error):
            return RetryDecision(retry=False)
        delay = self.base_delay_ms * self.multiplier ** (attempt - 1)
        if error.retry_after_ms is not None:
            delay = max(delay, error.retry_after_ms)
        delay = min(self.max_delay_ms, delay)
        return RetryDecision(retry=True, delay_ms=delay)


def coerce_retry(value: RetryConfig | Mapping[str, Any] | bool | None) -> RetryConfig | None:
    """Accept ``RetryConfig``, a mapping, ``True`` (defaults) or ``False``/``None`` (off)."""
    if value is None or value is False:
        return None
    if value is True:
        return RetryConfig()
    if isinstance(value, RetryConfig):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"retry must be a mapping, RetryConfig or bool, got {type(value).__name__}")
    known = {f.name for f in attrs.fields(RetryConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"unknown retry keys {unknown}; known keys: {sorted(known)}")
    config = RetryConfig(**value)
    if not isinstance(config.max_attempts, int) or config.max_attempts < 1:
        raise ValueError("retry.max_attempts must be an integer >= 1")
    for name in ("base_delay_ms", "max_delay_ms", "multiplier"):
        number = getattr(config, name)
        if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
            raise ValueError(f"retry.{name} must be a non-negative number")
    return config
