"""Durable runs: suspension, checkpoint writes and a resume linked to the run's span, in one
process and across two."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.trace import SpanKind

from prism_core import AGENT_RUN_NAMESPACE, resume_agent_run
from tests.core.durable_support import REVISION as WORLD_REVISION
from tests.core.durable_support import World
from tests.core.helpers import text_turn, tool_turn

from ._support import events, named, one, traced
from .durable_app import REVISION, build_agent, deploy_tool

ROOT = Path(__file__).resolve().parents[2]

TURNS = [tool_turn(("call_deploy", "deploy", {"env": "prod"})), text_turn("deployed")]


@pytest.mark.anyio
async def test_suspension_checkpoint_writes_and_the_resume_link() -> None:
    """The suspended run's span records the checkpoint write and the suspension and ends;
    the checkpoint carries its ``traceparent``; the resumed run is a new ``invoke_agent``
    span linked to it, with a ``prism.run.resumed`` event."""
    from prism_otel import create_otel_middleware

    provider, exporter = traced()
    world = World()
    agent = world.agent(
        TURNS,
        name="release",
        tools=[deploy_tool()],
        middleware=[create_otel_middleware(tracer_provider=provider)],
    )
    suspended = await agent.create_session(id="s1").run(
        "ship it", run_state=world.run_state(interrupt_before_tool=True)
    )
    assert suspended.status == "suspended"
    assert suspended.run_state is not None

    (first,) = exporter.get_finished_spans()[-1:]
    assert first.name == "invoke_agent release"
    assert first.attributes is not None
    assert first.attributes["prism.run.status"] == "suspended"
    # The agent's version is the definition revision its durable runs are recorded under.
    assert first.attributes["gen_ai.agent.version"] == WORLD_REVISION
    (suspension,) = events(first, "prism.run.suspended")
    assert suspension["prism.checkpoint.version"] == suspended.run_state.version
    assert suspension["prism.interruption.kind"] == "tool_approval"
    assert suspension["prism.interruption.pending_decisions"] == 1
    writes = events(first, "prism.checkpoint.write")
    assert [w["prism.checkpoint.version"] for w in writes] == [suspended.run_state.version]
    assert writes[0]["prism.checkpoint.status"] == "suspended"
    assert isinstance(writes[0]["prism.checkpoint.bytes"], int)
    assert writes[0]["prism.checkpoint.bytes"] > 100
    assert writes[0]["prism.checkpoint.duration_ms"] >= 0
    # The gated call's span ends with the run: it never executed.
    gated = one(exporter.get_finished_spans(), "execute_tool deploy")
    assert gated.attributes is not None
    assert gated.attributes["prism.tool.outcome"] == "suspended"

    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, suspended.run_id)
    assert record is not None
    traceparent = dict(record.metadata or {})["traceparent"]
    assert traceparent.startswith(f"00-{first.context.trace_id:032x}-{first.context.span_id:016x}-")

    exporter.clear()
    resumer = world.agent(
        TURNS,
        name="release",
        tools=[deploy_tool()],
        middleware=[create_otel_middleware(tracer_provider=provider)],
    )
    resumed = await resume_agent_run(
        resumer,
        {"run_id": suspended.run_id, "session_id": "s1"},
        {"expected_version": suspended.run_state.version, "decision": "approve"},
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    spans = exporter.get_finished_spans()
    second = one(spans, "invoke_agent release")
    assert second.context.span_id != first.context.span_id
    assert second.attributes is not None
    assert second.attributes["gen_ai.agent.version"] == WORLD_REVISION
    assert second.attributes["gen_ai.provider.name"] == "mock"
    (link,) = second.links
    assert link.context.trace_id == first.context.trace_id
    assert link.context.span_id == first.context.span_id
    (resume_event,) = events(second, "prism.run.resumed")
    assert resume_event["prism.resume.decision"] == "approve"
    # The dispatch mark before ``deploy`` runs and the terminal write (the claim is written
    # before the resumed run starts, so no run span holds it).
    assert [w["prism.checkpoint.status"] for w in events(second, "prism.checkpoint.write")] == [
        "running",
        "succeeded",
    ]
    tool = one(spans, "execute_tool deploy")
    assert tool.parent is not None
    assert tool.parent.span_id == second.context.span_id
    assert tool.attributes is not None
    assert tool.attributes["prism.tool.outcome"] == "success"
    assert [s.kind for s in named(spans, "chat demo")] == [SpanKind.CLIENT]
    # The resumed run keeps the original span's context in the sidecar.
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, suspended.run_id)
    assert record is not None
    assert dict(record.metadata or {})["traceparent"] == traceparent


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_run_suspended_in_one_process_resumes_linked_in_another(
    tmp_path: Path, anyio_backend: str
) -> None:
    """A worker process runs until the run suspends (traced by ``prism_otel.plugin``); this
    process resumes it: the resume span links to the worker's span, found through the
    checkpoint's sidecar ``traceparent`` alone."""
    from prism_otel import create_otel_middleware
    from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store

    db_url = f"sqlite:///{tmp_path / 'runs.db'}"
    worker = await anyio.run_process(
        [sys.executable, "-m", "tests.otel.durable_app", db_url], cwd=ROOT
    )
    origin: dict[str, Any] = json.loads(worker.stdout.decode().strip().splitlines()[-1])
    assert origin["status"] == "suspended"

    provider, exporter = traced()
    async with (
        create_sql_checkpoint_store(db_url) as checkpoints,
        create_sql_session_store(db_url) as sessions,
    ):
        agent = build_agent(sessions, middleware=[create_otel_middleware(tracer_provider=provider)])
        resumed = await resume_agent_run(
            agent,
            {"run_id": origin["run_id"], "session_id": "s1"},
            {"expected_version": origin["version"], "decision": "approve"},
            checkpoints=checkpoints,
            definition_revision=REVISION,
        )
    assert resumed.status == "succeeded"
    spans = exporter.get_finished_spans()
    run = one(spans, "invoke_agent release")
    (link,) = run.links
    assert format(link.context.trace_id, "032x") == origin["trace_id"]
    assert format(link.context.span_id, "016x") == origin["span_id"]
    assert link.attributes is not None
    assert link.attributes["prism.link"] == "resumed_from"
    assert run.attributes is not None
    assert run.attributes["prism.run.id"] == origin["run_id"]
    assert run.attributes["prism.run.status"] == "succeeded"
    assert run.attributes["gen_ai.agent.version"] == REVISION
