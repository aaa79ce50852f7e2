"""Builders for sub-agent tests: a lead agent delegating to a researcher on shared stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prism_core import (
    Agent,
    Guardrail,
    ProviderEvent,
    ToolDefinition,
    create_agent,
    load_agent_run_state,
)
from prism_core.durable import child_run_id

from .durable_support import World, by_history
from .helpers import MODEL, text_turn, tool_turn

__all__ = (
    "ASK",
    "Team",
    "child_of",
    "delegate_turn",
    "lookup_tool",
)


def lookup_tool(log: list[Any], name: str = "lookup", **kw: Any) -> ToolDefinition:
    """A side-effecting tool recording each execution."""

    def lookup(args: dict[str, Any], context: Any) -> Any:
        log.append((name, dict(args), context.run_id))
        return {"found": args.get("q")}

    return ToolDefinition(name, lookup, **kw)


def _ask(context: Any) -> Any:
    # A lookup of "y" needs no human (so an approver may edit a call into one).
    query = getattr(context.value, "arguments", {}).get("q")
    if context.tool_name == "lookup" and query != "y":
        return {"action": "interrupt", "reason": "a human approves every lookup"}
    return {"action": "allow"}


#: A tool-input guard of the child agent asking a human before each ``lookup`` (but of "y").
ASK = Guardrail("ask-before-lookup", "tool_input", _ask)


def delegate_turn(call_id: str = "p1", task: str = "find x", tool: str = "researcher") -> Any:
    """A parent turn calling the sub-agent tool."""
    return tool_turn((call_id, tool, {"input": task}))


class Team:
    """A lead agent whose ``researcher`` tool is a sub-agent, on one world's stores."""

    def __init__(
        self,
        *,
        child_turns: Sequence[Sequence[ProviderEvent]] | None = None,
        lead_turns: Sequence[Sequence[ProviderEvent]] | None = None,
        world: World | None = None,
        child_config: dict[str, Any] | None = None,
        lead_config: dict[str, Any] | None = None,
    ) -> None:
        self.world = world or World()
        self.log: list[Any] = []
        self.child_turns = child_turns or [
            tool_turn(("k1", "lookup", {"q": "x"})),
            text_turn("x is 42"),
        ]
        self.lead_turns = lead_turns or [delegate_turn(), text_turn("the answer is 42")]
        self.child_config = child_config or {}
        self.lead_config = lead_config or {}

    def child(self) -> Agent:
        """A fresh researcher (as another worker builds it)."""
        config = {"tools": [lookup_tool(self.log)], **self.child_config}
        return create_agent(
            id="researcher", model=MODEL, provider=by_history(self.child_turns), **config
        )

    def lead(self) -> Agent:
        """A fresh lead agent on the world's session store, delegating to a fresh child."""
        config = {"tools": [self.child().as_tool()], **self.lead_config}
        return self.world.agent(self.lead_turns, id="lead", **config)

    async def child_status(self, parent_run_id: str, call_id: str = "p1") -> Any:
        """The child run's checkpoint status (``None`` when it has none)."""
        return await load_agent_run_state(
            self.world.checkpoints, {"run_id": child_run_id(parent_run_id, call_id)}
        )


def child_of(parent_run_id: str, call_id: str = "p1") -> str:
    """The child run id of ``call_id`` in ``parent_run_id``."""
    return child_run_id(parent_run_id, call_id)
