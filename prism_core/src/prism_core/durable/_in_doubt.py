"""In-doubt tool calls: calls whose ``dispatched`` mark is stored and whose result is not.

A call is marked ``dispatched`` in the run's checkpoint right before its side effect starts
and leaves the pending calls once its result is in the session store. A checkpoint that still
holds a ``dispatched`` call therefore names a call whose side effect may or may not have
happened. This module holds the one definition of that set, for the resume pipeline and for
anything that lists runs, and the refusal raised while such a call has no resolution.

It must not write and must not settle a call: settling is ``_resume_doubt``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import AgentRunStateError
from ._state import AgentRunState

__all__ = ("IN_DOUBT_CODE", "in_doubt_calls", "in_doubt_error")

IN_DOUBT_CODE = "ERR_PRISM_TOOL_IN_DOUBT"


def in_doubt_calls(state: AgentRunState | Mapping[str, Any]) -> tuple[str, ...]:
    """The tool call ids a run's state records as in doubt, in their recorded order.

    ``state`` is a parsed :class:`AgentRunState` or the stored JSON value of an agent-run
    checkpoint. A terminal run has no pending calls, so nothing of it is in doubt.
    """
    if isinstance(state, AgentRunState):
        return tuple(c.tool_call_id for c in state.pending_calls if c.status == "dispatched")
    calls = state.get("pending_calls") if isinstance(state, Mapping) else None
    if not isinstance(calls, list | tuple):
        return ()
    return tuple(
        str(call["tool_call_id"])
        for call in calls
        if isinstance(call, Mapping)
        and call.get("status") == "dispatched"
        and isinstance(call.get("tool_call_id"), str)
    )


def in_doubt_error(ids: Iterable[str], *, version: int | None = None) -> AgentRunStateError:
    """The refusal for a run whose in-doubt calls nobody has resolved."""
    in_doubt = tuple(ids)
    at = f"expected_version {version}" if version is not None else "the run's current version"
    return AgentRunStateError(
        f"tool calls in doubt (their side effect may or may not have happened): "
        f"{', '.join(in_doubt)}. Resolve them with a continue at {at} carrying "
        '"resolutions": [{"tool_call_id": ..., "outcome": "completed", "result": ...} | '
        '{"tool_call_id": ..., "outcome": "not_started"} | '
        '{"tool_call_id": ..., "outcome": "failed", "reason": ...}], or declare the tool '
        "idempotent=True or give it reconcile= so a continue settles it by itself",
        code=IN_DOUBT_CODE,
        in_doubt=in_doubt,
    )
