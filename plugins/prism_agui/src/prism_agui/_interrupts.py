"""A suspension as AG-UI interrupts: one per pending decision, answerable by its id.

``id`` is the decision's ``approval_id``; ``reason`` is ``"tool_approval"`` or
``"elicitation"`` (``"input_guardrail"`` for a held run input); ``message`` says what would
run, with the call's arguments as the agent's redactor shows them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from ag_ui.core import Interrupt

__all__ = ("APPROVAL_SCHEMA", "interrupts_for", "session_call_arguments")

#: What a tool approval's answer looks like (``payload`` of its resume entry).
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "arguments": {"type": "object"},
        "reason": {"type": "string"},
    },
    "required": ["approved"],
}

_MAX_ARGUMENTS_TEXT = 2000


def _redacted(text: str, redactor: Any) -> str:
    return str(redactor.redact_text(text)) if redactor is not None else text


def _arguments_text(arguments: Any, redactor: Any) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    text = _redacted(text, redactor)
    if len(text) > _MAX_ARGUMENTS_TEXT:
        # Said, not hidden: the message is for a person; the call itself is not shortened.
        text = f"{text[:_MAX_ARGUMENTS_TEXT]}... ({len(text)} characters)"
    return text


def _message(decision: Any, tool: str | None, arguments: Any, redactor: Any) -> str:
    reason = f" ({_redacted(decision.reason, redactor)})" if decision.reason else ""
    if decision.kind == "input_guardrail":
        return f"The run's input needs approval before the agent goes on{reason}"
    name = tool or "a tool"
    shown = "" if arguments is None else f" with {_arguments_text(arguments, redactor)}"
    if decision.kind == "elicitation":
        return f"{name}{shown} needs an answer before it can go on{reason}"
    return f"Allow {name} to run{shown}?{reason}"


def interrupts_for(
    interruption: Any, arguments: Mapping[str, Any], redactor: Any
) -> list[Interrupt]:
    """The interrupts of a suspension; ``arguments`` maps tool call ids to their arguments."""
    interrupts = []
    for decision in interruption.pending_decisions:
        call_id = decision.tool_call_id
        tool = decision.scope.tool_name if decision.scope is not None else None
        elicitation = decision.kind == "elicitation"
        interrupts.append(
            Interrupt(
                id=decision.approval_id,
                reason="elicitation" if elicitation else decision.kind,
                message=_message(decision, tool, arguments.get(call_id or ""), redactor),
                tool_call_id=call_id,
                response_schema=dict(decision.elicitation_schema or {})
                if elicitation
                else copy.deepcopy(APPROVAL_SCHEMA),
            )
        )
    return interrupts


async def session_call_arguments(sessions: Any, session_id: str) -> dict[str, Any]:
    """The arguments of every tool call the session's assistant messages hold, by call id."""
    found: dict[str, Any] = {}
    for entry in await sessions.list(session_id):
        message = getattr(entry, "message", None)
        if message is None or message.role != "assistant":
            continue
        for block in message.content:
            if getattr(block, "type", None) == "tool_call":
                found[block.id] = block.arguments
    return found
