"""The turn write protocol on the memory stores: commits per turn, held entries, fallback.

An every-turn run whose checkpoint store commits together with its session store costs one
commit for a read-only or idempotent turn and two for a side-effecting one; with stores that
cannot (a third-party checkpoint store) it appends each entry on its own, as before.
"""

from __future__ import annotations

import uuid
from types import TracebackType
from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunError,
    MemoryCheckpointStore,
    RunStateOptions,
    create_agent,
    create_mock_provider,
)
from prism_core.records import MemorySessionStore, SessionEntry
from tests.core.durable_support import CountingStore
from tests.core.helpers import text_turn, tool_turn
from tests.turn_commits import commits_per_turn


class Commits:
    """One counter shared by the stores below."""

    def __init__(self) -> None:
        self.count = 0


class CountedTransaction:
    """A shared transaction that counts one commit when it writes anything."""

    def __init__(self, inner: Any, commits: Commits) -> None:
        self.inner, self.commits = inner, commits

    def append(self, *args: Any, **kw: Any) -> None:
        self.inner.append(*args, **kw)

    def save(self, *args: Any, **kw: Any) -> None:
        self.inner.save(*args, **kw)

    def save_request(self, request: Any) -> None:
        self.inner.save_request(request)

    @property
    def entries(self) -> Any:
        return self.inner.entries

    @property
    def records(self) -> Any:
        return self.inner.records

    async def __aenter__(self) -> CountedTransaction:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.inner.__aexit__(kind, exc, tb)
        if kind is None and (self.inner.entries or self.inner.records):
            self.commits.count += 1


class CountingCheckpoints(MemoryCheckpointStore):
    """A memory checkpoint store counting its commits: saves and shared commits."""

    def __init__(self, commits: Commits) -> None:
        super().__init__()
        self.commits = commits

    async def save_request(self, request: Any) -> Any:
        # Every save reaches the store here (the keyword ``save`` of the base calls it too).
        record = await super().save_request(request)
        self.commits.count += 1
        return record

    def shared_transaction(self, sessions: object) -> Any:
        inner = super().shared_transaction(sessions)
        return None if inner is None else CountedTransaction(inner, self.commits)

    def checkpoint_transaction(self) -> Any:
        return CountedTransaction(super().checkpoint_transaction(), self.commits)


class CountingSessions(MemorySessionStore):
    """A memory session store counting its appends (each one a commit of its own)."""

    def __init__(self, commits: Commits) -> None:
        super().__init__()
        self.commits = commits

    async def append(self, entry: SessionEntry, **kw: Any) -> SessionEntry:
        stored = await super().append(entry, **kw)
        self.commits.count += 1
        return stored


@pytest.mark.anyio
async def test_one_commit_per_read_only_turn_two_per_side_effecting_turn() -> None:
    """Stores that commit together: 1 commit for a read-only or idempotent turn, 2 for a
    side-effecting one (the mark with the assistant message, then the result with the turn
    checkpoint), 1 for the answer (the terminal checkpoint with the message)."""
    commits = Commits()
    per_turn = await commits_per_turn(
        CountingCheckpoints(commits), CountingSessions(commits), lambda: commits.count
    )
    assert per_turn == {"read-only": 1, "idempotent": 1, "side-effecting": 2, "answer": 1}


@pytest.mark.anyio
@pytest.mark.parametrize("notify", [False, True], ids=["quiet", "notifying"])
async def test_notifications_add_no_commit_to_a_turn(notify: bool) -> None:
    """A run that notifies nobody writes no outbox record; one that does writes its
    ``finished`` notification in its last commit: the same commits per turn either way."""
    commits = Commits()
    per_turn = await commits_per_turn(
        CountingCheckpoints(commits),
        CountingSessions(commits),
        lambda: commits.count,
        notify=notify,
    )
    assert per_turn == {"read-only": 1, "idempotent": 1, "side-effecting": 2, "answer": 1}


@pytest.mark.anyio
async def test_stores_without_the_capability_commit_each_write() -> None:
    """A checkpoint store without ``shared_transaction`` keeps working: every entry is
    appended on its own, then the checkpoint is saved (3, 3, 4 and 2 commits)."""
    commits = Commits()
    checkpoints = CountingStore(CountingCheckpoints(commits))
    assert not hasattr(checkpoints, "shared_transaction")
    per_turn = await commits_per_turn(checkpoints, CountingSessions(commits), lambda: commits.count)
    assert per_turn == {"read-only": 3, "idempotent": 3, "side-effecting": 4, "answer": 2}


def _agent(sessions: Any, tool: Any) -> Any:
    return create_agent(
        id="held",
        model={"provider": "mock", "model": "m"},
        provider=create_mock_provider(
            turns=[tool_turn(("c1", "probe", {})), tool_turn(("c2", "probe", {})), text_turn("ok")]
        ),
        store=sessions,
        tools=[tool],
    )


@pytest.mark.anyio
async def test_held_entries_are_read_with_the_branch_and_committed_with_the_checkpoint() -> None:
    """While a turn's entries are held, the session's branch reads include them and the store
    does not hold them; the turn checkpoint commits them and names them as its leaf."""
    checkpoints, sessions = MemoryCheckpointStore(), MemorySessionStore()
    seen: list[tuple[list[str], list[str]]] = []

    async def probe(args: dict[str, Any], context: Any) -> str:
        branch = [e.message.role for e in await session.entries() if e.message]
        stored = [e.message.role for e in await sessions.list(session.id) if e.message]
        seen.append((branch, stored))
        return "ok"

    session = _agent(sessions, _tool(probe)).create_session(id="s1")
    result = await session.run(
        "go", run_state=RunStateOptions(checkpoints, "rev-1", checkpoint_policy="every-turn")
    )
    assert result.status == "succeeded"
    # Turn 1: the input was committed with the first checkpoint; the assistant message is
    # held. Turn 2: turn 1's message and result were committed at the boundary.
    assert seen == [
        (["user", "assistant"], ["user"]),
        (["user", "assistant", "tool", "assistant"], ["user", "assistant", "tool"]),
    ]
    record = await checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    stored = await sessions.list("s1")
    assert record.value["leaf_id"] == stored[-1].id == session.leaf_id == result.leaf_id


def _tool(execute: Any) -> Any:
    from prism_core import ToolDefinition

    return ToolDefinition("probe", execute, effect="read")


@pytest.mark.anyio
async def test_a_refused_commit_writes_none_of_the_held_entries() -> None:
    """Another worker claims the run while a turn's entries are held: the turn checkpoint
    loses its compare-and-swap, none of the turn's entries reach the store, and the
    session's leaf goes back to the last committed entry."""
    checkpoints, sessions = MemoryCheckpointStore(), MemorySessionStore()

    async def probe(args: dict[str, Any], context: Any) -> str:
        record = await checkpoints.load(AGENT_RUN_NAMESPACE, context.run_id)
        assert record is not None
        await checkpoints.save(
            AGENT_RUN_NAMESPACE,
            context.run_id,
            record.value,
            version=record.version + 1,
            expected_version=record.version,
        )
        return "ok"

    session = _agent(sessions, _tool(probe)).create_session(id=f"s-{uuid.uuid4().hex[:8]}")
    with pytest.raises(AgentRunError) as caught:
        await session.run(
            "go", run_state=RunStateOptions(checkpoints, "rev-1", checkpoint_policy="every-turn")
        )
    assert caught.value.code == "ERR_PRISM_CHECKPOINT_CONFLICT"
    stored = await sessions.list(session.id)
    assert [e.message.role for e in stored if e.message] == ["user"]
    assert session.leaf_id == stored[-1].id == caught.value.result.leaf_id
    # The session is usable again, from what its store holds.
    assert [e.id for e in await session.entries()] == [e.id for e in stored]
