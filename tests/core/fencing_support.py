"""Scenarios shared by the fencing, lease and store-fault tests on every backend."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import anyio
import attrs
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunError,
    AgentRunStateError,
    ProviderEvent,
    ProviderRequest,
    RunStateOptions,
    create_agent,
    create_mock_provider,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.stores import LeaseRenewalStore
from tests.core.helpers import echo_tool, text_turn, tool_turn

REVISION = "fencing-1"

#: Three turns: a tool, another tool, the answer.
TURNS: list[list[ProviderEvent]] = [
    tool_turn(("c1", "echo", {"n": 1})),
    tool_turn(("c2", "echo", {"n": 2})),
    text_turn("all done"),
]


@attrs.define
class Stall:
    """Blocks a provider's request number ``at`` (0-based, by assistant messages in the
    history) until ``release`` is set; ``entered`` is set when it blocks."""

    at: int
    entered: anyio.Event = attrs.field(factory=anyio.Event)
    release: anyio.Event = attrs.field(factory=anyio.Event)

    async def __call__(self, request: ProviderRequest) -> None:
        index = sum(1 for m in request.messages if m.role == "assistant")
        if index == self.at and not self.release.is_set():
            self.entered.set()
            await self.release.wait()


def scripted(turns: Sequence[Sequence[ProviderEvent]], on_request: Any = None) -> Any:
    """A provider picking its turn from the history (so a resumed run continues the script)."""

    def events(request: ProviderRequest) -> Sequence[ProviderEvent]:
        index = sum(1 for m in request.messages if m.role == "assistant")
        return turns[min(index, len(turns) - 1)]

    return create_mock_provider(events, on_request=on_request)


def worker(sessions: Any, log: list[Any], *, stall: Any = None, tools: Any = None) -> Any:
    """One worker's agent object on the shared session store, with its own tool log
    (``stall``: the provider's ``on_request``, e.g. a :class:`Stall`)."""
    return create_agent(
        id="fenced",
        model={"provider": "mock", "model": "demo"},
        provider=scripted(TURNS, on_request=stall),
        tools=tools if tools is not None else [echo_tool(log=log)],
        store=sessions,
    )


def ref(run_id: str, session_id: str) -> dict[str, str]:
    """A run reference."""
    return {"run_id": run_id, "session_id": session_id}


@attrs.define
class SplitBrain:
    """What the split brain scenario observed."""

    a_log: list[Any]
    b_log: list[Any]
    a_error: BaseException | None
    b_status: str
    final_status: str
    final_version: int
    final_token: int | None


async def split_brain(checkpoints: Any, sessions: Any, **run_state: Any) -> SplitBrain:
    """Worker A stalls in its second model call; worker B continues the run and finishes it;
    then A wakes up. Returns what each worker did."""
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    a_log: list[Any] = []
    b_log: list[Any] = []
    stall = Stall(at=1)
    a_error: list[BaseException] = []

    async def run_a() -> None:
        agent = worker(sessions, a_log, stall=stall)
        try:
            await agent.create_session(id=session_id).run(
                "go",
                run_state=RunStateOptions(
                    checkpoints, REVISION, checkpoint_policy="every-turn", **run_state
                ),
            )
        except AgentRunError as exc:
            a_error.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(run_a)
        with anyio.fail_after(30):
            await stall.entered.wait()
        run_id = await only_run(checkpoints)
        status = await load_agent_run_state(checkpoints, ref(run_id, session_id))
        assert status is not None
        assert status.state.status == "running"
        if run_state.get("lease_ms"):
            # A holds a live lease: a plain continue is refused, a forced one goes ahead.
            with pytest.raises(AgentRunStateError) as refused:
                await resume_agent_run(
                    worker(sessions, b_log),
                    ref(run_id, session_id),
                    {"expected_version": status.version, "decision": "continue"},
                    checkpoints=checkpoints,
                    definition_revision=REVISION,
                )
            assert refused.value.code == "ERR_PRISM_RUN_LEASED"
            # Wait for the first renewal (a third of the lease in), then claim the version it
            # wrote before the next one. Polled: on a loaded machine it may come a little late.
            before = status
            renewed = None
            with anyio.move_on_after(run_state["lease_ms"] / 1000 * 0.6):
                while renewed is None:
                    await anyio.sleep(0.05)
                    latest = await load_agent_run_state(checkpoints, ref(run_id, session_id))
                    assert latest is not None
                    if (latest.state.lease_expires_at or 0) > (before.state.lease_expires_at or 0):
                        renewed = latest
            assert renewed is not None, "the live run never renewed its lease"
            status = renewed
            if isinstance(checkpoints, LeaseRenewalStore):
                assert status.version == before.version
            else:
                assert status.version > before.version
        done = await resume_agent_run(
            worker(sessions, b_log),
            ref(run_id, session_id),
            {"expected_version": status.version, "decision": "continue"},
            checkpoints=checkpoints,
            definition_revision=REVISION,
            force=True,
        )
        stall.release.set()
    record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    return SplitBrain(
        a_log=a_log,
        b_log=b_log,
        a_error=a_error[0] if a_error else None,
        b_status=done.status,
        final_status=record.value["status"],
        final_version=record.version,
        final_token=record.fencing_token,
    )


async def only_run(checkpoints: Any) -> str:
    """The id of the one run record in ``checkpoints``."""
    page = await checkpoints.list(AGENT_RUN_NAMESPACE)
    assert len(page.records) == 1
    return str(page.records[0].key)


def check_split_brain(outcome: SplitBrain) -> None:
    """A ran only the tool before its stall and then nothing; B ran the rest; the record is
    B's, with a raised fencing token."""
    assert outcome.a_log == [("echo", {"n": 1})]
    assert outcome.b_log == [("echo", {"n": 2})]
    assert outcome.b_status == "succeeded"
    assert isinstance(outcome.a_error, AgentRunError)
    assert outcome.a_error.code == "ERR_PRISM_CHECKPOINT_CONFLICT"
    assert outcome.final_status == "succeeded"
    assert outcome.final_token == 1
