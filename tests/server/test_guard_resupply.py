"""A durable run with guardrails of its own is resumed over HTTP with the guards handed back by
the host's ``guardrails`` callable; without it the resume is a 409 that claims nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from prism_core import Guardrail, RunStateOptions
from prism_server import create_app

from ._support import Database, run_async, running
from .test_pack_resupply import REVISION, janitor, script

CODE = "ERR_PRISM_RUN_GUARDRAILS"


def no_root(context: Any) -> Any:
    if context.tool_name == "rm" and context.value.arguments.get("path") == "/":
        return {"action": "block", "reason": "never the root"}
    return {"action": "allow"}


def guards() -> dict[str, Any]:
    return {"tool_input": [Guardrail("no-root", "tool_input", no_root, revision="1")]}


def suspended_run(db: Database, log: list[Any], provider: Any) -> str:
    """A durable run with its own ``no-root`` guard, suspended before ``echo``."""

    async def run() -> str:
        checkpoints, sessions = db.stores()
        try:
            session = janitor(log, provider).create_session(store=sessions)
            result = await session.run(
                "clean up",
                run_state=RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True),
                guardrails=guards(),
            )
            assert result.status == "suspended"
            return str(result.run_id)
        finally:
            await checkpoints.aclose()
            await sessions.aclose()

    return run_async(run)


def resume(
    db: Database,
    run_id: str,
    log: list[Any],
    provider: Any,
    *,
    stream: bool = False,
    **options: Any,
) -> tuple[int, int, httpx.Response]:
    """Resume over HTTP; the run's version before and after, and the response."""
    checkpoints, sessions = db.stores()
    app = create_app(
        checkpoints=checkpoints,
        sessions=sessions,
        resolve_agent=lambda agent_id: (janitor(log, provider), REVISION),
        **options,
    )
    headers = {"accept": "text/event-stream"} if stream else {}
    with running(app, checkpoints, sessions) as base, httpx.Client(base_url=base) as http:
        before = http.get(f"/api/runs/{run_id}").json()["version"]
        response = http.post(
            f"/api/runs/{run_id}/resume",
            json={"expected_version": before, "decision": "approve"},
            headers=headers,
        )
        response.read()
        after = http.get(f"/api/runs/{run_id}").json()["version"]
    return before, after, response


@pytest.mark.parametrize("stream", [False, True])
def test_a_resume_without_the_guards_is_a_409(sqlite_database: Database, stream: bool) -> None:
    log: list[Any] = []
    provider = script()
    run_id = suspended_run(sqlite_database, log, provider)
    before, after, refused = resume(sqlite_database, run_id, log, provider, stream=stream)
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == CODE
    assert "no-root" in refused.json()["message"]
    assert after == before
    assert log == []


def test_the_host_hands_the_guards_back_and_they_still_block(sqlite_database: Database) -> None:
    """``guardrails(state)`` hands the guards over: after the approved ``echo`` the model's
    ``rm /`` is blocked by the run's own guard."""
    log: list[Any] = []
    provider = script()
    run_id = suspended_run(sqlite_database, log, provider)
    seen: list[str] = []

    def handed(state: Any) -> Any:
        seen.append(state.run_id)
        return guards()

    _, _, done = resume(sqlite_database, run_id, log, provider, guardrails=handed)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "succeeded", done.text
    # Asked when the decision is recorded, and again by the worker that claims the run.
    assert seen == [run_id, run_id]
    assert log == [("echo", {"x": 1})]


def test_the_guardrails_hook_must_be_callable(sqlite_database: Database) -> None:
    checkpoints, sessions = sqlite_database.stores()
    try:
        with pytest.raises(TypeError, match="guardrails must be callable"):
            create_app(
                checkpoints=checkpoints,
                sessions=sessions,
                resolve_agent=lambda agent_id: None,
                guardrails=guards(),  # type: ignore[arg-type]
            )
    finally:

        async def close() -> None:
            await checkpoints.aclose()
            await sessions.aclose()

        run_async(close)
