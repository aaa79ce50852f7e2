"""A host application for the ledger commands' tests (``prism effects``, ``audit``,
``sessions``, ``runs show|purge|--dry-run``), written into a temporary folder as the module
``--app`` names.

Agent ``bank``: its first turn refunds order A-3 (``refund`` needs an approval) and asks a
``researcher`` sub-agent, which looks an order up (read-only) and records a note (a side
effect); its second turn answers. ``ODD`` holds characters a terminal must never see raw.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

from prism_core import RunStateOptions, open_stores

__all__ = ("HOST_SOURCE", "install", "seed", "seed_async")

HOST_SOURCE = '''
"""The host application of the ledger tests (test fixture)."""

from prism_core import (
    ToolDefinition,
    create_agent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)

REVISION = "bank-1"
#: A newline, an escape sequence and a bidirectional override, inside one stored value.
ODD = "line\\nforged \\x1b[31mred\\u202e"


class Script:
    id = "mock"

    def __init__(self, turns):
        self.turns = turns

    async def generate(self, request):
        turn = sum(1 for message in request.messages if message.role == "assistant")
        for event in self.turns[min(turn, len(self.turns) - 1)]:
            yield event


def researcher():
    return create_agent(
        id="researcher",
        model={"provider": "mock", "model": "demo"},
        provider=Script(
            [
                [
                    provider_tool_call(tool_call_content("k1", "lookup", {"order": "A-3"})),
                    provider_tool_call(tool_call_content("k2", "note", {"text": ODD})),
                    provider_done(),
                ],
                [provider_text_delta("A-3 is paid"), provider_done()],
            ]
        ),
        tools=[
            ToolDefinition("lookup", lambda args, context: {"paid": True}, effect="read"),
            ToolDefinition("note", lambda args, context: {"noted": True}),
        ],
    )


def build_agent(store=None):
    return create_agent(
        id="bank",
        model={"provider": "mock", "model": "demo"},
        provider=Script(
            [
                [
                    provider_tool_call(
                        tool_call_content("c1", "refund", {"order": "A-3", "amount": 12})
                    ),
                    provider_tool_call(tool_call_content("c2", "researcher", {"input": "A-3?"})),
                    provider_done(),
                ],
                [provider_text_delta("refunded"), provider_done()],
            ]
        ),
        tools=[
            ToolDefinition(
                "refund", lambda args, context: {"refunded": args["order"]}, needs_approval=True
            ),
            researcher().as_tool(),
        ],
        store=store,
    )


def resolve_agent(agent_id):
    return (build_agent() if agent_id == "bank" else None), REVISION
'''


def install(folder: Path) -> Any:
    """Write the host module into ``folder`` under a fresh name and import it."""
    name = f"bank_host_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(HOST_SOURCE)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


async def seed_async(url: str, host: Any, session_id: str) -> tuple[str, int]:
    """A run of ``bank`` on ``url``, suspended before its refund; its run id and version."""
    from tests.cli.runs_support import _plugins

    async with open_stores(url, plugins=_plugins()) as stores:
        agent = host.build_agent(store=stores.sessions)
        options = RunStateOptions(stores.checkpoints, host.REVISION, checkpoint_policy="every-turn")
        result = await agent.create_session(id=session_id).run("refund A-3", run_state=options)
        assert result.status == "suspended"
        assert result.run_state is not None
        return result.run_id, result.run_state.version


def seed(url: str, host: Any, session_id: str) -> tuple[str, int]:
    """:func:`seed_async` on an event loop of its own."""
    return anyio.run(seed_async, url, host, session_id)
