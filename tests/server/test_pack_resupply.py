"""A run whose session pack holds a deny predicate is resumed over HTTP with the pack handed
back by the host's ``guardrail_packs`` callable; without it the resume is refused."""

from __future__ import annotations

from typing import Any

import httpx

from prism_core import RunStateOptions, create_agent, create_mock_provider
from prism_server import create_app
from tests.core.helpers import echo_tool, text_turn, tool_turn

from ._support import Database, run_async, running

REVISION = "janitor-1"


def no_root(args: dict[str, Any], context: Any) -> bool:
    return args.get("path") == "/"


def house_pack() -> dict[str, Any]:
    """An inline pack whose rule is a deny predicate (a checkpoint records its identity only)."""
    return {
        "id": "house",
        "version": 2,
        "rules": [{"id": "no-root", "tool": "rm", "deny": no_root}],
    }


def script() -> Any:
    """The model: ``echo``, then ``rm /``, then an answer (one provider for the whole run, so
    a resumed agent continues the script instead of starting it over)."""
    return create_mock_provider(
        turns=[
            tool_turn(("c1", "echo", {"x": 1})),
            tool_turn(("c2", "rm", {"path": "/"})),
            text_turn("done"),
        ]
    )


def janitor(log: list[Any], provider: Any) -> Any:
    return create_agent(
        id="janitor",
        model="mock:demo",
        provider=provider,
        tools=[echo_tool(log=log), echo_tool("rm", log=log)],
    )


def suspended_run(db: Database, log: list[Any], provider: Any) -> str:
    """A durable run on a session with the predicate pack, suspended before ``echo``."""

    async def run() -> str:
        checkpoints, sessions = db.stores()
        try:
            agent = janitor(log, provider)
            session = agent.create_session(store=sessions, guardrail_packs=[house_pack()])
            result = await session.run(
                "clean up",
                run_state=RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True),
            )
            assert result.status == "suspended"
            return str(result.run_id)
        finally:
            await checkpoints.aclose()
            await sessions.aclose()

    return run_async(run)


def resume(
    db: Database, run_id: str, log: list[Any], provider: Any, **options: Any
) -> httpx.Response:
    checkpoints, sessions = db.stores()
    app = create_app(
        checkpoints=checkpoints,
        sessions=sessions,
        resolve_agent=lambda agent_id: (janitor(log, provider), REVISION),
        **options,
    )
    with running(app, checkpoints, sessions) as base, httpx.Client(base_url=base) as http:
        version = http.get(f"/api/runs/{run_id}").json()["version"]
        return http.post(
            f"/api/runs/{run_id}/resume", json={"expected_version": version, "decision": "approve"}
        )


def test_a_resume_without_the_recorded_pack_is_refused(sqlite_database: Database) -> None:
    """The checkpoint names the pack; a server that cannot hand it back claims nothing."""
    log: list[Any] = []
    provider = script()
    run_id = suspended_run(sqlite_database, log, provider)
    refused = resume(sqlite_database, run_id, log, provider)
    assert refused.status_code == 409, refused.text
    assert "house" in refused.json()["message"]
    assert log == []


def test_the_host_hands_the_pack_back_and_its_predicate_still_blocks(
    sqlite_database: Database,
) -> None:
    """``guardrail_packs(state)`` reinstates the pack: after the approved ``echo`` the model's
    ``rm /`` is still denied by the pack's predicate."""
    log: list[Any] = []
    provider = script()
    run_id = suspended_run(sqlite_database, log, provider)
    seen: list[str] = []

    def packs(state: Any) -> list[Any]:
        seen.append(state.run_id)
        return [house_pack()]

    done = resume(sqlite_database, run_id, log, provider, guardrail_packs=packs)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "succeeded", done.text
    # Asked when the decision is recorded, and again by the worker that claims the run.
    assert seen == [run_id, run_id]
    assert log == [("echo", {"x": 1})]  # rm was refused by the predicate and never ran
