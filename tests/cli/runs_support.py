"""A small host application for the ``prism runs`` tests, and helpers that seed its runs.

``HOST_SOURCE`` is written into a temporary folder as the module ``--app`` names: an agent
``billing`` whose first turn asks for two refunds and whose second turn answers, a
``resolve_agent`` for it, and a refund log in a file beside the module, so refunds are visible
across processes.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

from prism_core import (
    AGENT_RUN_NAMESPACE,
    RunStateOptions,
    open_checkpoint_store,
    open_session_store,
)
from tests.core.durable_support import rewrite_as_in_doubt

HOST_SOURCE = '''
"""The host application of a Prism deployment (test fixture)."""

import os
from pathlib import Path

import anyio

from prism_core import (
    ToolDefinition,
    create_agent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)

REVISION = "billing-1"
LOG = Path(__file__).with_name("refunds.log")
#: Set by a test to make the second turn hang, as a worker does when it is killed.
HANG = {"second_turn": False}


class BillingModel:
    id = "mock"

    async def generate(self, request):
        turn = sum(1 for message in request.messages if message.role == "assistant")
        if turn == 0:
            yield provider_tool_call(tool_call_content("c1", "refund", {"order": "A-1"}))
            yield provider_tool_call(tool_call_content("c2", "refund", {"order": "B-2"}))
            yield provider_done()
            return
        if HANG["second_turn"]:
            await anyio.sleep_forever()
        yield provider_text_delta("refunds settled")
        yield provider_done()


def refund(args, context):
    with LOG.open("a") as log:
        log.write(f"{args['order']} {os.getpid()}\\n")
    return {"refunded": args["order"]}


def build_agent(store=None):
    return create_agent(
        id="billing",
        model={"provider": "mock", "model": "demo"},
        provider=BillingModel(),
        tools=[ToolDefinition("refund", refund, description="Refund an order")],
        store=store,
    )


def resolve_agent(agent_id):
    return (build_agent() if agent_id == "billing" else None), REVISION
'''


def install_host(folder: Path) -> Any:
    """Write the host module into ``folder`` under a fresh name and import it."""
    name = f"billing_host_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(HOST_SOURCE)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def refunds(host: Any) -> list[str]:
    """The orders the host's refund tool has refunded, in order."""
    return [order for order, _ in refund_log(host)]


def refund_log(host: Any) -> list[tuple[str, int]]:
    """Each refund with the process id that ran it, in order."""
    path = Path(host.LOG)
    lines = path.read_text().splitlines() if path.exists() else []
    return [(order, int(pid)) for order, pid in (line.split() for line in lines)]


def _plugins() -> list[object]:
    import prism_store_redis
    import prism_store_sql

    return [prism_store_sql.plugin, prism_store_redis.plugin]


def seed(
    url: str, host: Any, session_id: str, *, how: str, owner: Any = None, guardrails: Any = None
) -> str:
    """One run of the host's agent on ``url`` (with ``guardrails`` of its own when given);
    returns its run id.

    ``how``: ``suspended`` (before its tools), ``crashed`` (the worker stopped in the second
    turn, leaving the run ``running``), ``in-doubt`` (a suspended run rewritten as a crash
    between a call's dispatched mark and its result leaves it).
    """

    async def run() -> str:
        checkpoints = open_checkpoint_store(url, plugins=_plugins())
        sessions = open_session_store(url, plugins=_plugins())
        try:
            agent = host.build_agent(store=sessions)
            options: dict[str, Any] = {"ownership": owner}
            if how == "crashed":
                options["checkpoint_policy"] = "every-turn"
            else:
                options["interrupt_before_tool"] = True
            state = RunStateOptions(checkpoints, host.REVISION, **options)
            session = agent.create_session(id=session_id)
            if how == "crashed":
                host.HANG["second_turn"] = True
                try:
                    with anyio.move_on_after(0.5):
                        await session.run("refund both", run_state=state, guardrails=guardrails)
                finally:
                    host.HANG["second_turn"] = False
                record = await checkpoints.list(AGENT_RUN_NAMESPACE, ownership=owner, limit=1000)
                mine = [r for r in record.records if r.value["session_id"] == session_id]
                return str(mine[0].key)
            result = await session.run("refund both", run_state=state, guardrails=guardrails)
            if how == "in-doubt":
                await rewrite_as_in_doubt(checkpoints, result.run_id, owner)
            return str(result.run_id)
        finally:
            await checkpoints.aclose()
            await sessions.aclose()

    return anyio.run(run)


def stored(url: str, run_id: str, owner: Any = None) -> tuple[int, str] | None:
    """The run record's version and status, read straight from the store."""

    async def read() -> tuple[int, str] | None:
        checkpoints = open_checkpoint_store(url, plugins=_plugins())
        try:
            record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=owner)
        finally:
            await checkpoints.aclose()
        return None if record is None else (record.version, record.value["status"])

    return anyio.run(read)
