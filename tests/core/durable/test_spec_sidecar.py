"""Sidecar metadata read rules: ``{}`` and legacy values read as absent, one non-string value
drops only that key."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    RunStateOptions,
    create_agent_run_lifecycle,
    create_memory_checkpoint_store,
    load_agent_run_state,
    resume_agent_run_stream,
)

from ..helpers import echo_tool, scripted_agent, text_turn, tool_turn

pytestmark = pytest.mark.anyio

REVISION = "2026-09-19.1"


async def suspended_run(checkpoints: Any) -> tuple[Any, Any]:
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")], id="docs", tools=[echo_tool()]
    )
    result = await agent.create_session().run(
        "go",
        run_state=RunStateOptions(
            checkpoints,
            REVISION,
            interrupt_before_tool=True,
            checkpoint_metadata={"git_commit": "abc123", "doc_version": "v12"},
        ),
    )
    assert result.status == "suspended"
    return agent, result


def rewrite_metadata(checkpoints: Any, run_id: str, metadata: Any) -> None:
    # The memory store keeps the record object itself: the test replaces its sidecar as a
    # legacy writer (or another tool) would have left it.
    slot = (AGENT_RUN_NAMESPACE, run_id)
    checkpoints._records[slot] = attrs.evolve(checkpoints._records[slot], metadata=metadata)


class LegacySidecar:
    """A checkpoint store whose records come back with a sidecar in an old, non-map form."""

    def __init__(self, inner: Any, legacy: Any) -> None:
        self.inner, self.legacy = inner, legacy

    async def load(self, namespace: str, key: str, **kw: Any) -> Any:
        record = await self.inner.load(namespace, key, **kw)
        return None if record is None else attrs.evolve(record, metadata=self.legacy)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("stored", [{}, {"n": 1}, {"a": None, "b": ["x"]}])
async def test_an_empty_sidecar_or_one_without_strings_reads_as_absent(stored: Any) -> None:
    """{} and a map with no string value read as absent through load_agent_run_state and the
    lifecycle's status."""
    checkpoints = create_memory_checkpoint_store()
    _, result = await suspended_run(checkpoints)
    rewrite_metadata(checkpoints, result.run_id, stored)
    ref = {"run_id": result.run_id, "session_id": result.session_id}
    status = await load_agent_run_state(checkpoints, ref)
    assert status is not None
    assert status.metadata is None
    lifecycle = create_agent_run_lifecycle(checkpoints=checkpoints, resolve_agent=lambda _: None)
    found = await lifecycle.status(ref)
    assert found is not None
    assert found.metadata is None


@pytest.mark.parametrize("legacy", ["gitCommit=abc123", ["abc123"], 7])
async def test_a_legacy_sidecar_that_is_not_a_map_reads_as_absent(legacy: Any) -> None:
    """A record whose sidecar is an old string or list form reads as absent, never fails."""
    inner = create_memory_checkpoint_store()
    _, result = await suspended_run(inner)
    status = await load_agent_run_state(
        LegacySidecar(inner, legacy), {"run_id": result.run_id, "session_id": result.session_id}
    )
    assert status is not None
    assert (status.metadata, status.state.status) == (None, "suspended")


async def test_one_non_string_value_drops_only_that_key() -> None:
    """A sidecar {"git_commit": "abc123", "attempt": 3} reads as {"git_commit": "abc123"}
    in the status, in the restore hooks' context and on agent_resumed."""
    checkpoints = create_memory_checkpoint_store()
    agent, result = await suspended_run(checkpoints)
    rewrite_metadata(checkpoints, result.run_id, {"git_commit": "abc123", "attempt": 3})
    ref = {"run_id": result.run_id, "session_id": result.session_id}
    status = await load_agent_run_state(checkpoints, ref)
    assert status is not None
    assert status.metadata == {"git_commit": "abc123"}
    seen: list[Any] = []

    def restore_git(context: Any) -> None:
        seen.append(dict(context.metadata))

    stream = resume_agent_run_stream(
        agent,
        ref,
        {"expected_version": status.version, "decision": "approve"},
        checkpoints=checkpoints,
        definition_revision=REVISION,
        restore_hooks=[restore_git],
    )
    events = [event async for event in stream]
    resumed = next(e for e in events if e.type == "agent_resumed")
    assert resumed.checkpoint_metadata == {"git_commit": "abc123"}
    assert seen == [{"git_commit": "abc123"}]
    assert events[-1].type == "agent_finished"
