"""A ``continue`` on the SQLite stores reads its checkpoint and its session in one hand-off."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import RunStateOptions, create_agent, create_mock_provider, resume_agent_run
from prism_core.durable import AGENT_RUN_NAMESPACE
from prism_core.records import SessionEntryNotFoundError
from prism_core.stores import CheckpointAndBranchLoader
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store, open_sql_stores
from tests.core.helpers import echo_tool, text_turn, tool_turn

from .conftest import Target

pytestmark = pytest.mark.anyio


class Died(BaseException):
    """The worker process killed at its model call."""


def _agent(sessions: Any, log: list[Any], *, die: bool) -> Any:
    requests: list[Any] = []

    def on_request(request: Any) -> None:
        requests.append(request)
        if die and len(requests) == 2:
            raise Died

    provider = create_mock_provider(
        on_request=on_request,
        # The continuing worker's model answers: the crashed one's tool round is kept.
        turns=[tool_turn(("c1", "lookup", {"q": "a"})), text_turn("done")]
        if die
        else [text_turn("done")],
    )
    return create_agent(
        id="reader",
        model={"provider": "mock", "model": "m"},
        provider=provider,
        store=sessions,
        tools=[echo_tool("lookup", log, effect="read")],
    )


async def _crashed(checkpoints: Any, sessions: Any) -> tuple[dict[str, str], int]:
    """A run that died at the model call after its tool round: its ref and version."""
    session = _agent(sessions, [], die=True).create_session(id="s")
    options = RunStateOptions(checkpoints, "rev-1", checkpoint_policy="every-turn")
    try:
        await session.run("go", run_state=options)
    except Died:
        pass
    except BaseExceptionGroup as group:
        if group.subgroup(Died) is None:
            raise
    else:
        raise AssertionError("the worker was meant to die")
    (record,) = (await checkpoints.list(AGENT_RUN_NAMESPACE)).records
    return {"run_id": record.key, "session_id": "s"}, record.version


def _count_runs(store: Any) -> list[str]:
    """The actions of the store calls on ``store``'s connection, in order: each hand-off
    (a write, a read, any other call) and each one-row read (inline or, when it must wait,
    handed off), once."""
    calls: list[str] = []
    database = store.database
    depth = 0

    def counting(method: Any) -> Any:
        async def counted(action: str, operation: Any, **options: Any) -> Any:
            nonlocal depth
            if depth == 0:
                calls.append(action)
            depth += 1
            try:
                return await method(action, operation, **options)
            finally:
                depth -= 1

        return counted

    for name in ("run", "read", "read_many", "write"):
        setattr(database, name, counting(getattr(database, name)))
    return calls


async def test_a_continue_loads_and_reads_in_one_hand_off(sqlite_target: Target) -> None:
    """Stores on one connection: the checkpoint load carries the branch and run-tail read,
    so a continue makes two store calls (load with the read, the claim) before it finishes
    the run exactly as before."""
    async with open_sql_stores(sqlite_target.url) as stores:
        checkpoints, sessions = stores.checkpoints, stores.sessions
        assert isinstance(checkpoints, CheckpointAndBranchLoader)
        ref, version = await _crashed(checkpoints, sessions)
        calls = _count_runs(checkpoints)
        log: list[Any] = []
        result = await resume_agent_run(
            _agent(sessions, log, die=False),
            ref,
            {"expected_version": version, "decision": "continue"},
            checkpoints=checkpoints,
            definition_revision="rev-1",
        )
        assert result.status == "succeeded"
        assert result.text == "done"
        assert log == []  # the crashed worker's completed round is kept, not run again
        before_provider = calls[: calls.index("save a checkpoint") + 1]
        assert before_provider == ["load a checkpoint", "save a checkpoint"]


async def test_the_prefetched_read_equals_the_session_stores_read(sqlite_target: Target) -> None:
    """The read that rides with the load is the session store's own read, decoded only when
    asked; another connection's session store gets no prefetched read."""
    async with open_sql_stores(sqlite_target.url) as stores:
        checkpoints, sessions = stores.checkpoints, stores.sessions
        ref, _ = await _crashed(checkpoints, sessions)
        record, prefetched = await checkpoints.load_with_run_branch(  # type: ignore[attr-defined]
            AGENT_RUN_NAMESPACE, ref["run_id"], ownership=None, sessions=sessions
        )
        assert record == await checkpoints.load(AGENT_RUN_NAMESPACE, ref["run_id"])
        assert prefetched is not None
        assert prefetched.store is sessions
        value = record.value
        ids = (value["session_id"], value["leaf_id"], value["run_id"])
        assert (prefetched.session_id, prefetched.leaf_id, prefetched.run_id) == ids
        assert prefetched.decode() == await sessions.read_branch_and_run_tail(*ids)
        path = prefetched.decode().path
        assert [entry.message.role for entry in path] == ["user", "assistant", "tool"]
        missing, none = await checkpoints.load_with_run_branch(  # type: ignore[attr-defined]
            AGENT_RUN_NAMESPACE, "no-such-run", ownership=None, sessions=sessions
        )
        assert (missing, none) == (None, None)
        other = create_sql_session_store(sqlite_target.url)
        async with other:
            again, elsewhere = await checkpoints.load_with_run_branch(  # type: ignore[attr-defined]
                AGENT_RUN_NAMESPACE, ref["run_id"], ownership=None, sessions=other
            )
        assert again == record
        assert elsewhere is None


async def test_a_missing_leaf_is_refused_at_the_session_rebuild(sqlite_target: Target) -> None:
    """A prefetched read whose leaf is gone raises only when decoded, as the store's read
    does: the resume refuses at the same step, writing nothing."""
    async with open_sql_stores(sqlite_target.url) as stores:
        checkpoints, sessions = stores.checkpoints, stores.sessions
        ref, version = await _crashed(checkpoints, sessions)
        record = await checkpoints.load(AGENT_RUN_NAMESPACE, ref["run_id"])
        assert record is not None
        leaf = record.value["leaf_id"]
        connection = checkpoints.database._connection  # type: ignore[attr-defined]
        connection.execute("DELETE FROM prism_session_entries WHERE id = ?", (leaf,))
        _, prefetched = await checkpoints.load_with_run_branch(  # type: ignore[attr-defined]
            AGENT_RUN_NAMESPACE, ref["run_id"], ownership=None, sessions=sessions
        )
        with pytest.raises(SessionEntryNotFoundError):
            prefetched.decode()
        with pytest.raises(Exception) as raised:
            await resume_agent_run(
                _agent(sessions, [], die=False),
                ref,
                {"expected_version": version, "decision": "continue"},
                checkpoints=checkpoints,
                definition_revision="rev-1",
            )
        assert "session leaf is missing" in str(raised.value)
        after = await checkpoints.load(AGENT_RUN_NAMESPACE, ref["run_id"])
        assert after is not None
        assert after.version == version


async def test_stores_on_two_connections_continue_as_before(sqlite_target: Target) -> None:
    """Separate connections: no prefetch, the usual three store calls, the same result."""
    checkpoints = create_sql_checkpoint_store(sqlite_target.url)
    sessions = create_sql_session_store(sqlite_target.url)
    async with checkpoints, sessions:
        ref, version = await _crashed(checkpoints, sessions)
        loads = _count_runs(checkpoints)
        reads = _count_runs(sessions)
        result = await resume_agent_run(
            _agent(sessions, [], die=False),
            ref,
            {"expected_version": version, "decision": "continue"},
            checkpoints=checkpoints,
            definition_revision="rev-1",
        )
        assert result.status == "succeeded"
        assert loads[:2] == ["load a checkpoint", "save a checkpoint"]
        assert reads[0] == "read a session branch and a run's entries"
