"""The host of the cross-process tracing test: one agent definition, and a worker that runs it
until it suspends, traced by ``prism_otel.plugin`` on the global tracer provider.

``python -m tests.otel.durable_app DB_URL`` starts a durable run on session ``s1`` that
suspends before ``deploy`` and prints one JSON line: the run id, the checkpoint version and
the trace and span ids (hex) of the run's ``invoke_agent`` span as the worker exported it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

from prism_core import Agent, RunStateOptions, ToolDefinition, create_agent
from tests.core.durable_support import by_history
from tests.core.helpers import text_turn, tool_turn

REVISION = "release-agent.1"


def deploy_tool() -> ToolDefinition:
    """The side effect the run suspends before."""
    return ToolDefinition("deploy", lambda args, context: {"ok": True}, effect="write")


def build_agent(sessions: Any, **config: Any) -> Agent:
    """The agent both processes build: a ``deploy`` side effect, then an answer."""
    return create_agent(
        id="release",
        name="release",
        model={"provider": "mock", "model": "demo"},
        provider=by_history(
            [tool_turn(("call_deploy", "deploy", {"env": "prod"})), text_turn("deployed")]
        ),
        store=sessions,
        tools=[deploy_tool()],
        **config,
    )


async def _suspend(db_url: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import prism_otel
    from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    async with (
        create_sql_checkpoint_store(db_url) as checkpoints,
        create_sql_session_store(db_url) as sessions,
    ):
        agent = build_agent(sessions, plugins=[prism_otel.plugin])
        result = await agent.create_session(id="s1").run(
            "ship it",
            run_state=RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True),
        )
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent release"]
    assert result.run_state is not None
    print(
        json.dumps(
            {
                "status": result.status,
                "run_id": result.run_id,
                "version": result.run_state.version,
                "trace_id": format(span.context.trace_id, "032x"),
                "span_id": format(span.context.span_id, "016x"),
            }
        )
    )


if __name__ == "__main__":
    anyio.run(_suspend, sys.argv[1])
