"""Middleware: host and plugin objects called at fixed points of a session and its runs.

A middleware object defines any of these methods (sync or async):

- ``session_start(context)`` / ``session_shutdown(context)``: once per session each;
- ``provider_request(request, context)``: once per provider turn, before ``generate``;
- ``tool_call(call, context)``: before tool-input guardrails and dispatch;
- ``tool_result(result, context)``: after tool-output guardrails;
- ``retry(decision, context)``: after the retry policy decided, before ``retry_scheduled``;
- ``compaction(result, context)``: after a compaction strategy returned, before the append;
- ``checkpoint_metadata(metadata, context)``: before each checkpoint write of a durable run,
  with the sidecar map (``dict[str, str]``) about to be written; a returned mapping replaces
  it and is checked like the host's ``checkpoint_metadata`` (strings, at most 4096 bytes).

Two observer points see what happened and cannot change it:

- ``event(event, context)``: every event a run emits, as subscribers receive it (redacted),
  at the moment it is emitted. It must be synchronous (``async def`` is refused when the
  middleware is composed);
- ``checkpoint_written(write, context)``: after each checkpoint write of a durable run, with a
  :class:`CheckpointWrite` (version, status, bytes, duration).

Sync middleware runs inline on the event loop, never in a worker thread (it is on every
turn's path and must see events in order): a middleware that blocks must be ``async def``
and offload its blocking work itself.

An observer's exception is logged on the ``prism_core.middleware`` logger (its type only)
and dropped: observing never fails a run. A value-returning point may return a replacement
value, or ``None`` to keep it unchanged. A mapping of point name to callable works as a
middleware object too.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs

from .models import ModelConfig
from .signals import AbortSignal

__all__ = ("MIDDLEWARE_POINTS", "CheckpointWrite", "MiddlewareChain", "MiddlewareContext")

T = TypeVar("T")

logger = logging.getLogger(__name__)

MIDDLEWARE_POINTS = (
    "session_start",
    "session_shutdown",
    "provider_request",
    "tool_call",
    "tool_result",
    "retry",
    "compaction",
    "checkpoint_metadata",
    "event",
    "checkpoint_written",
)

#: The observer points that must be synchronous (they run inside ``emit``).
_SYNC_POINTS = ("event",)


@attrs.frozen(kw_only=True)
class MiddlewareContext:
    """Where a middleware call happens: the point, the session and run, metadata and signal.

    Within a run it also names the agent: ``model`` (the run's model), ``agent_version`` (the
    durable run's ``definition_revision``; ``None`` for a run without ``run_state``) and
    ``agent_description``. At the ``tool_call`` point ``tool_description`` is the called
    tool's description, when the tool is registered and has one.
    """

    point: str
    session_id: str
    run_id: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    signal: AbortSignal | None = attrs.field(default=None, eq=False, repr=False)
    agent_id: str | None = None
    agent_name: str | None = None
    agent_version: str | None = None
    agent_description: str | None = None
    model: ModelConfig | None = None
    tool_description: str | None = None


@attrs.frozen(kw_only=True)
class CheckpointWrite:
    """One checkpoint write of a durable run, as ``checkpoint_written`` middleware sees it.

    ``bytes`` is the size of the state's canonical JSON, ``duration_ms`` the time the store
    took to save it, ``status`` the run status the checkpoint records.
    """

    run_id: str
    version: int
    status: str
    bytes: int
    duration_ms: float


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
            for point in _SYNC_POINTS:
                if inspect.iscoroutinefunction(_handler(item, point)):
                    raise TypeError(f"middleware point {point!r} must be synchronous")
        self._items = tuple(middleware)
        self._handled: dict[str, bool] = {}

    def __len__(self) -> int:
        return len(self._items)

    def handles(self, point: str) -> bool:
        """Whether any middleware defines ``point``."""
        handled = self._handled.get(point)
        if handled is None:
            handled = any(_handler(m, point) is not None for m in self._items)
            self._handled[point] = handled
        return handled

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

    def observe(self, point: str, value: Any, context: MiddlewareContext) -> None:
        """Call the synchronous observer ``point(value, context)`` of each middleware."""
        for item in self._items:
            handler = _handler(item, point)
            if handler is None:
                continue
            try:
                handler(value, context)
            except Exception as exc:
                logger.warning("middleware %s observer raised %s", point, type(exc).__name__)

    async def inform(self, point: str, value: Any, context: MiddlewareContext) -> None:
        """Call the observer ``point(value, context)`` (sync or async) of each middleware."""
        for item in self._items:
            handler = _handler(item, point)
            if handler is None:
                continue
            try:
                outcome = handler(value, context)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exc:
                logger.warning("middleware %s observer raised %s", point, type(exc).__name__)
