"""Middleware: host and plugin objects called at fixed points of a session and its runs.

A middleware object defines any of these methods (sync or async):

- ``session_start(context)`` / ``session_shutdown(context)``: once per session each;
- ``provider_request(request, context)``: once per provider turn, before ``generate``;
- ``tool_call(call, context)``: before tool-input guardrails and dispatch;
- ``tool_result(result, context)``: after tool-output guardrails;
- ``retry(decision, context)``: after the retry policy decided, before ``retry_scheduled``;
- ``compaction(result, context)``: after a compaction strategy returned, before the append.

A value-returning point may return a replacement value, or ``None`` to keep it unchanged.
A mapping of point name to callable works as a middleware object too.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs

from .signals import AbortSignal

__all__ = ("MIDDLEWARE_POINTS", "MiddlewareChain", "MiddlewareContext")

T = TypeVar("T")

MIDDLEWARE_POINTS = (
    "session_start",
    "session_shutdown",
    "provider_request",
    "tool_call",
    "tool_result",
    "retry",
    "compaction",
)


@attrs.frozen(kw_only=True)
class MiddlewareContext:
    """Where a middleware call happens: the point, the session and run, metadata and signal."""

    point: str
    session_id: str
    run_id: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    signal: AbortSignal | None = attrs.field(default=None, eq=False, repr=False)


def _handler(middleware: Any, point: str) -> Any:
    if isinstance(middleware, Mapping):
        return middleware.get(point)
    return getattr(middleware, point, None)


class MiddlewareChain:
    """Middleware objects applied in order."""

    def __init__(self, middleware: Sequence[Any] = ()) -> None:
        for item in middleware:
            if item is None or isinstance(item, str | bytes):
                raise TypeError(f"middleware must be an object or a mapping, got {item!r}")
        self._items = tuple(middleware)

    def __len__(self) -> int:
        return len(self._items)

    def handles(self, point: str) -> bool:
        """Whether any middleware defines ``point``."""
        return any(_handler(m, point) is not None for m in self._items)

    async def notify(self, point: str, context: MiddlewareContext) -> None:
        """Call ``point(context)`` on each middleware that defines it."""
        for item in self._items:
            handler = _handler(item, point)
            if handler is None:
                continue
            outcome = handler(context)
            if inspect.isawaitable(outcome):
                await outcome

    async def run(self, point: str, value: T, context: MiddlewareContext) -> T:
        """Thread ``value`` through ``point(value, context)`` of each middleware."""
        for item in self._items:
            handler = _handler(item, point)
            if handler is None:
                continue
            outcome = handler(value, context)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if outcome is not None:
                value = outcome
        return value
