"""The host of the durable test: one agent definition, and an approver run as its own process.

``python -m tests.provider_openai.durable_app DB_URL BASE_URL LOG RUN_ID SESSION_ID VERSION``
approves the suspended run and prints the resumed result as one JSON line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

from prism_core import Agent, ToolDefinition, create_agent, resume_agent_run
from prism_provider_openai import create_openai_provider
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store

REVISION = "deploy-agent.1"
API_KEY = "sk-durable-test-key-0123456789"
RESTART_SCHEMA = {
    "type": "object",
    "properties": {"service": {"type": "string"}},
    "required": ["service"],
}


def build_agent(base_url: str, log: Path, sessions: Any) -> Agent:
    """The agent both processes build: the OpenAI provider and a ``restart`` side effect."""

    def restart(args: dict[str, Any], context: Any) -> Any:
        with log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"call": context.tool_call_id, "service": args["service"]}))
            out.write("\n")
        return {"restarted": args["service"]}

    return create_agent(
        id="ops",
        model="openai:gpt-4.1-mini",
        provider=create_openai_provider(api_key=API_KEY, base_url=base_url),
        store=sessions,
        tools=[
            ToolDefinition(
                "restart",
                restart,
                description="Restart a service.",
                parameters=RESTART_SCHEMA,
                effect="write",
            )
        ],
    )


async def approve(argv: list[str]) -> dict[str, Any]:
    """Approve the suspended run named by ``argv`` and report the resumed result."""
    db_url, base_url, log, run_id, session_id, version = argv
    async with (
        create_sql_checkpoint_store(db_url) as checkpoints,
        create_sql_session_store(db_url) as sessions,
    ):
        result = await resume_agent_run(
            build_agent(base_url, Path(log), sessions),
            {"run_id": run_id, "session_id": session_id},
            {"expected_version": int(version), "decision": "approve"},
            checkpoints=checkpoints,
            definition_revision=REVISION,
        )
    return {"status": result.status, "text": result.text, "run_id": result.run_id}


if __name__ == "__main__":
    print(json.dumps(anyio.run(approve, sys.argv[1:])))
