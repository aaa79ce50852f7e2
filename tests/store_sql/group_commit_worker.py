"""One process of the group-commit crash test: many durable runs at once on one store pair.

Run as ``python group_commit_worker.py '<json args>'``. Every session in ``sessions`` is
driven at the same time on one pair of stores (so their turn commits share group commits):
started when the store has no run for it, otherwise continued, with the in-doubt calls
resolved from the effect log (``completed`` with the logged result, or ``not_started``).
The provider prints ``{"session": s, "turns": n}`` at each request: the runtime makes a
request only once the turns before it are durable, so each such line is a turn reported
as committed. At the end it prints ``{"done": {session: status}}``.

The one tool is side-effecting (neither read-only nor idempotent): each call is marked
``dispatched`` before it starts and logs its effect (appended and fsynced) under its
idempotency key, which the test counts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

import prism_store_redis
import prism_store_sql
from prism_cli._demo_stores import open_demo_stores
from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    ProviderRequest,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    load_agent_run_state,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    resume_agent_run,
    tool_call_content,
)
from prism_core.durable import in_doubt_calls

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.effect_log import EffectLog, say

STORE_PLUGINS = (prism_store_redis.plugin, prism_store_sql.plugin)
REVISION = "group-commit-1"


def build_agent(session: str, turns: int, sessions: Any, effects: EffectLog) -> Any:
    class Provider:
        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            turn = sum(1 for m in request.messages if m.role == "assistant")
            say({"session": session, "turns": turn})
            await anyio.sleep(0.001)
            if turn < turns:
                call = tool_call_content(f"{session}t{turn}", "charge", {"amount": turn})
                yield provider_tool_call(call)
            else:
                yield provider_text_delta("all charged")
            yield provider_done()

    def charge(args: dict[str, Any], context: Any) -> Any:
        value = {"charged": args["amount"]}
        effects.apply(context.idempotency_key, context.tool_call_id, value)
        return value

    return create_agent(
        id="group-commit",
        model={"provider": "mock", "model": "demo"},
        provider=Provider(),
        tools=[ToolDefinition("charge", charge)],
        store=sessions,
    )


async def find_runs(checkpoints: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    cursor = None
    while True:
        page = await checkpoints.list(AGENT_RUN_NAMESPACE, cursor=cursor)
        for record in page.records:
            found[record.value["session_id"]] = record
        cursor = page.cursor
        if cursor is None:
            return found


async def drive(session: str, args: dict[str, Any], pair: Any, record: Any) -> str:
    checkpoints, sessions = pair
    effects = EffectLog(args["effects"])
    agent = build_agent(session, args["turns"], sessions, effects)
    if record is None:
        result = await agent.create_session(id=session).run(
            "charge every line item",
            run_state=RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn"),
        )
        return str(result.status)
    ref = {"run_id": record.key, "session_id": session}
    for _ in range(3):
        status = await load_agent_run_state(checkpoints, ref)
        assert status is not None
        if status.state.terminal:
            return str(status.state.status)
        applied = effects.applied(by="call")
        resume: dict[str, Any] = {"expected_version": status.version, "decision": "continue"}
        doubt = in_doubt_calls(status.state)
        if doubt:
            resume["resolutions"] = [
                {"tool_call_id": call, "outcome": "completed", "result": applied[call]}
                if call in applied
                else {"tool_call_id": call, "outcome": "not_started"}
                for call in doubt
            ]
        try:
            result = await resume_agent_run(
                agent, ref, resume, checkpoints=checkpoints, definition_revision=REVISION
            )
        except AgentRunStateError as exc:
            if exc.code != "ERR_PRISM_TOOL_IN_DOUBT":
                raise
            continue
        return str(result.status)
    raise AssertionError(f"{session} stayed in doubt")


async def main(args: dict[str, Any]) -> int:
    pair = open_demo_stores(args["store"], args["prefix"], STORE_PLUGINS)
    async with pair:
        runs = await find_runs(pair.checkpoints)
        say({"ready": True})
        done: dict[str, str] = {}

        async def one(session: str) -> None:
            done[session] = await drive(session, args, pair, runs.get(session))

        async with anyio.create_task_group() as group:
            for session in args["sessions"]:
                group.start_soon(one, session)
    say({"done": done})
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, json.loads(sys.argv[1])))
