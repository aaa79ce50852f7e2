"""One process of the notification crash test: suspends a notifying refund run on the stores
it is given, says so, and waits to be killed before it delivers anything (it has no
notifier).

Run as ``python notify_worker.py '<json args>'`` with ``url`` and ``prefix``. It prints
``{"suspended": run_id, "pid": pid}`` once the suspension is committed, then sleeps.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from prism_core import RunStateOptions, ToolDefinition, create_agent

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prism_cli._demo_stores import open_demo_stores
from tests.core.durable_support import by_history
from tests.core.helpers import text_turn, tool_turn
from tests.store_plugins import STORE_PLUGINS

REVISION = "notify-1"
TURNS = [tool_turn(("r1", "refund", {"amount": 250})), text_turn("refund handled")]


def desk(sessions: Any) -> Any:
    """The refund agent: ``refund`` needs a person's approval."""
    return create_agent(
        id="desk",
        model={"provider": "mock", "model": "m"},
        provider=by_history(TURNS),
        store=sessions,
        tools=[ToolDefinition("refund", lambda args, ctx: "refunded", needs_approval=True)],
    )


async def main(args: dict[str, Any]) -> None:
    stores = open_demo_stores(args["url"], args["prefix"], STORE_PLUGINS)
    result = await (
        desk(stores.sessions)
        .create_session(id="refunds")
        .run("refund 250", run_state=RunStateOptions(stores.checkpoints, REVISION, notify=True))
    )
    assert result.status == "suspended"
    print(json.dumps({"suspended": result.run_id, "pid": os.getpid()}), flush=True)
    await anyio.sleep(600)


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
