"""Turn policies: the host decides, at every turn boundary, whether the run goes on.

A turn policy has an optional ``stop(context)`` and an optional ``max_turns``. ``stop`` is
called once per turn boundary, after steered messages are applied and before the next
provider request, with the run's counters. It answers synchronously (a sync ``stop`` runs in a
worker thread; one that returns an awaitable is refused): ``{"action": "continue"}`` (or
``None``) or ``{"action": "stop", "reason": str}``. A stop ends the run ``succeeded`` with
``finish_reason``/``stop_reason`` ``"host_policy"`` and ``stop_detail`` the redacted reason,
having made exactly the provider requests made so far. ``max_turns`` ends the run the same way
with ``"turn_limit"`` and the detail ``"max_turns"`` once that many provider turns have run. A
policy that raises or answers anything else, and a reason that is empty or over
:data:`MAX_STOP_DETAIL_BYTES` UTF-8 bytes once redacted (refused, never cut), fail the run
closed with ``ERR_PRISM_TURN_POLICY`` and no stop reason.

It must not end the run itself: the boundary acts on the decision.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio

from .._run_values import TurnPolicy, TurnPolicyContext
from .._threads import call_sync, is_async_callable
from ..errors import PrismError
from ..redaction import Redactor, redact_value

__all__ = (
    "HOOK_LIMIT",
    "HOST_POLICY",
    "MAX_STOP_DETAIL_BYTES",
    "TURN_LIMIT",
    "RunStopped",
    "TurnPolicy",
    "TurnPolicyContext",
    "TurnPolicyError",
    "bounded_detail",
    "check_turn_policy_limits",
    "coerce_stop_hooks",
    "coerce_turn_policy",
    "decide",
    "stop_reason_text",
)

#: A turn policy's stop reason may be at most this many UTF-8 bytes once redacted; a provider's
#: finish reason (and a stop hook's error text) is cut to it.
MAX_STOP_DETAIL_BYTES = 256

#: Why a run stopped on purpose: ``finish_reason`` on ``agent_finished``, ``stop_reason`` on the
#: result and the durable state.
HOST_POLICY = "host_policy"
TURN_LIMIT = "turn_limit"
HOOK_LIMIT = "hook_limit"


class TurnPolicyError(PrismError):
    """A turn policy or stop hook raised, or answered something that is not a decision."""

    code = "ERR_PRISM_TURN_POLICY"


class RunStopped(Exception):
    """Internal: the run ends ``succeeded`` on purpose with ``reason`` (``"host_policy"``,
    ``"turn_limit"`` or ``"hook_limit"``) and ``detail``."""

    def __init__(self, reason: str, detail: str | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        #: Events the boundary had emitted before the stop (steers applied), to be yielded.
        self.events: list[Any] = []


def coerce_turn_policy(value: Any) -> TurnPolicy | None:
    """A :class:`TurnPolicy` from ``None``, a policy, a mapping with ``stop``/``max_turns``, a
    bare ``stop`` callable, or an object with ``stop``/``max_turns`` attributes."""
    if value is None or isinstance(value, TurnPolicy):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"stop", "max_turns"})
        if unknown:
            raise ValueError(f"unknown turn_policy keys {unknown}; known: ['max_turns', 'stop']")
        return TurnPolicy(value.get("stop"), value.get("max_turns"))
    stop = getattr(value, "stop", None)
    max_turns = getattr(value, "max_turns", None)
    if stop is not None or max_turns is not None:
        return TurnPolicy(stop, max_turns)
    if callable(value):
        return TurnPolicy(value)
    raise TypeError("turn_policy must be a TurnPolicy, a mapping, or a stop(context) callable")


def coerce_stop_hooks(value: Any) -> tuple[Callable[[Any], Any], ...]:
    """A tuple of stop hooks from ``None``, one callable, or a sequence of callables."""
    if value is None:
        return ()
    hooks: Sequence[Any] = (value,) if callable(value) else value
    if isinstance(hooks, str | bytes) or not isinstance(hooks, Sequence):
        raise TypeError("stop_hooks must be a callable or a sequence of callables")
    for hook in hooks:
        if not callable(hook):
            raise TypeError(f"stop hook {hook!r} is not callable")
    return tuple(hooks)


def check_turn_policy_limits(policy: TurnPolicy | None, max_turns: int | None) -> None:
    """Refuse a ``turn_policy.max_turns`` wider than the ``limits.max_turns`` it runs under
    (a policy may stop a run earlier than its limits, never later): ``ValueError``."""
    if policy is None or policy.max_turns is None or max_turns is None:
        return
    if policy.max_turns > max_turns:
        raise ValueError(
            f"turn_policy.max_turns ({policy.max_turns}) cannot widen limits.max_turns "
            f"({max_turns})"
        )


def bounded_detail(text: str, redactor: Redactor | None) -> str:
    """``text`` redacted, then cut to :data:`MAX_STOP_DETAIL_BYTES` UTF-8 bytes."""
    redacted = redact_value(text, redactor)
    data = redacted.encode("utf-8")
    if len(data) <= MAX_STOP_DETAIL_BYTES:
        return redacted
    return data[:MAX_STOP_DETAIL_BYTES].decode("utf-8", errors="ignore")


async def decide(
    policy: TurnPolicy,
    context: TurnPolicyContext,
    redactor: Redactor | None,
    limiter: anyio.CapacityLimiter | None = None,
) -> None:
    """Consult ``policy`` at a boundary; raise :class:`RunStopped` to end the run there.

    A sync ``stop`` runs in a worker thread under ``limiter`` (see :mod:`prism_core._threads`);
    an async one, or one whose answer is awaitable, is refused (the policy answers at once).
    """
    if policy.max_turns is not None and context.turns >= policy.max_turns:
        raise RunStopped(TURN_LIMIT, "max_turns")
    if policy.stop is None:
        return
    try:
        if is_async_callable(policy.stop):
            verdict = policy.stop(context)
        else:
            verdict = await call_sync(policy.stop, context, limiter=limiter)
    except Exception as exc:
        raise TurnPolicyError(
            f"The turn policy raised {type(exc).__name__}: {bounded_detail(str(exc), redactor)}"
        ) from exc
    if inspect.isawaitable(verdict):
        close = getattr(verdict, "close", None)
        if callable(close):
            close()  # never awaited: closing it keeps Python from warning about it
        raise TurnPolicyError(
            "turn_policy.stop must answer synchronously (a decision, not an awaitable)"
        )
    if verdict is None:
        return
    action = verdict.get("action") if isinstance(verdict, Mapping) else None
    if action == "continue":
        return
    if action == "stop":
        raise RunStopped(HOST_POLICY, stop_reason_text(verdict.get("reason"), redactor))
    raise TurnPolicyError(
        "A turn policy must answer {'action': 'continue'} or {'action': 'stop', 'reason': str}, "
        f"got {type(verdict).__name__}"
    )


def stop_reason_text(reason: Any, redactor: Redactor | None) -> str:
    """A policy's stop reason, redacted; refused when it is not a non-empty string or is over
    :data:`MAX_STOP_DETAIL_BYTES` UTF-8 bytes once redacted (it is never cut)."""
    if not isinstance(reason, str) or not reason:
        raise TurnPolicyError("A turn policy stop needs a non-empty string reason")
    redacted = redact_value(reason, redactor)
    size = len(redacted.encode("utf-8"))
    if size > MAX_STOP_DETAIL_BYTES:
        raise TurnPolicyError(
            f"A turn policy stop reason must be at most {MAX_STOP_DETAIL_BYTES} UTF-8 bytes, "
            f"got {size}"
        )
    return redacted
