"""Stop hooks: when a run is about to finish, a hook may ask it to continue instead.

A stop hook is ``hook(context)`` (sync, in a worker thread under the agent's
``thread_limiter``, or async) called, in order, when the provider returned
no tool calls and no steered message waits. It answers ``None`` (or ``{"action": "finish"}``)
to let the run finish, or ``{"action": "continue", "message": str}`` to append ``message``
(redacted) as a user message and run another provider turn. ``limits.max_stop_continuations``
(default 3; ``0``: the hooks observe only; ``None``: no cap) bounds how often the hooks may do
so: a hook that asks to continue once the cap is reached ends the run ``succeeded`` with
``finish_reason``/``stop_reason`` ``"hook_limit"`` instead (a durable run so stopped is
continuable). A hook that raises or answers anything else fails the run closed with
``ERR_PRISM_TURN_POLICY``.

It must not start turns itself: the run loop does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._threads import call_host
from ..content import Message
from ..redaction import redact_value
from ._state import RunState
from ._turn_policy import HOOK_LIMIT, RunStopped, TurnPolicyError, bounded_detail

__all__ = ("StopHookContext", "consult_stop_hooks")


@attrs.frozen(kw_only=True)
class StopHookContext:
    """What a stop hook sees: the run, its last assistant message and ``finish_reason``,
    its turns so far and how often the hooks already continued it."""

    session_id: str
    run_id: str
    text: str
    message: Message | None
    finish_reason: str | None
    turns: int
    continuations: int
    metadata: Mapping[str, Any]


async def consult_stop_hooks(run: RunState) -> bool:
    """Whether a stop hook continued the run (its message is then in the history); raises
    :class:`~._turn_policy.RunStopped` (``"hook_limit"``) when one asks to continue past the
    cap."""
    if not run.plan.stop_hooks:
        return False
    cap = run.plan.limits.max_stop_continuations
    counters = run.counters
    last = run.last_message
    context = StopHookContext(
        session_id=run.session_id,
        run_id=run.run_id,
        text=last.text if last is not None else "",
        message=last,
        finish_reason=run.finish_reason,
        turns=counters.turns,
        continuations=counters.stop_continuations,
        metadata=run.plan.metadata,
    )
    for hook in run.plan.stop_hooks:
        try:
            verdict = await call_host(hook, context, limiter=run.agent.thread_limiter)
        except Exception as exc:
            detail = bounded_detail(str(exc), run.plan.redactor)
            raise TurnPolicyError(f"A stop hook raised {type(exc).__name__}: {detail}") from exc
        action = verdict.get("action") if isinstance(verdict, Mapping) else None
        if verdict is None or action == "finish":
            continue
        if action != "continue":
            raise TurnPolicyError(
                "A stop hook must answer None, {'action': 'finish'} or "
                "{'action': 'continue', 'message': str}"
            )
        assert isinstance(verdict, Mapping)
        message = verdict.get("message")
        if not isinstance(message, str) or not message:
            raise TurnPolicyError("A stop hook's continue needs a non-empty string message")
        if cap is not None and counters.stop_continuations >= cap:
            raise RunStopped(HOOK_LIMIT, None)
        counters.stop_continuations += 1
        await run.session.transcript.append_message(
            redact_value(Message.user(message), run.plan.redactor), run.run_id
        )
        return True
    return False
