"""Session store conformance: the branch-and-run-tail read a ``continue`` makes.

Part of :class:`~prism_core.testing.SessionStoreConformance`. Every test reads through
:func:`~prism_core.records.read_branch_and_run_tail`, so a store without the optional
capability is checked on its ``list`` fallback, and a store with it on its own read, which
must also equal the answer computed from ``list``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ..content import ErrorInfo, Message, TextContent, ToolCallContent, ToolResultContent
from ..models import ModelConfig
from ..records import (
    BranchAndRunTail,
    SessionEntry,
    SessionEntryNotFoundError,
    SessionStore,
    branch_and_run_tail,
    create_session_entry,
    read_branch_and_run_tail,
)

__all__ = ("RunTailReads",)


def _ids() -> tuple[str, str, str]:
    hex_ = uuid.uuid4().hex
    return f"session-run-tail-{hex_}", f"run-a-{hex_}", f"run-b-{hex_}"


async def _add(
    store: SessionStore, sid: str, text: str, parent: SessionEntry | None, run: str | None
) -> SessionEntry:
    entry = create_session_entry(
        session_id=sid,
        kind="message",
        parent_id=parent.id if parent is not None else None,
        run_id=run,
        message=Message.user(text),
    )
    return await store.append(entry)


async def _read(
    store: SessionStore, sid: str, leaf: str | None, run: str
) -> tuple[list[SessionEntry], list[SessionEntry]]:
    read = await read_branch_and_run_tail(store, sid, leaf, run)
    assert isinstance(read, BranchAndRunTail)
    expected = branch_and_run_tail(await store.list(sid), sid, leaf, run)
    assert read == expected
    return list(read.path), list(read.tail)


class RunTailReads:
    """The branch and a run's later entries, read in one call."""

    @pytest.mark.anyio
    async def test_run_tail_holds_the_runs_entries_after_the_leaf(
        self, session_store: SessionStore
    ) -> None:
        """The branch to the leaf, then the run's later entries on any branch, in append
        order; other runs' entries and the run's earlier ones are left out."""
        sid, run_a, run_b = _ids()
        root = await _add(session_store, sid, "root", None, None)
        a1 = await _add(session_store, sid, "a1", root, run_a)
        leaf = await _add(session_store, sid, "a2", a1, run_a)
        await _add(session_store, sid, "b1", leaf, run_b)
        a3 = await _add(session_store, sid, "a3", leaf, run_a)
        a4 = await _add(session_store, sid, "a4", a3, run_a)
        fork = await _add(session_store, sid, "a5 on an older branch", a1, run_a)
        await _add(session_store, sid, "no run", a4, None)
        path, tail = await _read(session_store, sid, leaf.id, run_a)
        assert path == [root, a1, leaf]
        assert tail == [a3, a4, fork]
        path, tail = await _read(session_store, sid, a4.id, run_a)
        assert path == [root, a1, leaf, a3, a4]
        assert tail == [fork]
        path, tail = await _read(session_store, sid, leaf.id, f"run-{uuid.uuid4().hex}")
        assert (path, tail) == ([root, a1, leaf], [])

    @pytest.mark.anyio
    async def test_run_tail_from_no_leaf_is_every_entry_of_the_run(
        self, session_store: SessionStore
    ) -> None:
        """A ``None`` leaf: an empty branch and every entry of the run, in append order."""
        sid, run_a, run_b = _ids()
        assert await _read(session_store, sid, None, run_a) == ([], [])
        first = await _add(session_store, sid, "first", None, run_a)
        await _add(session_store, sid, "other run", first, run_b)
        second = await _add(session_store, sid, "second", first, run_a)
        assert await _read(session_store, sid, None, run_a) == ([], [first, second])

    @pytest.mark.anyio
    async def test_run_tail_stays_in_its_session(self, session_store: SessionStore) -> None:
        """The same run id in another session adds nothing to this session's tail."""
        sid, run_a, _ = _ids()
        other, _, _ = _ids()
        leaf = await _add(session_store, sid, "leaf", None, run_a)
        elsewhere = await _add(session_store, other, "elsewhere", None, run_a)
        later = await _add(session_store, sid, "later", leaf, run_a)
        assert await _read(session_store, sid, leaf.id, run_a) == ([leaf], [later])
        assert await _read(session_store, other, elsewhere.id, run_a) == ([elsewhere], [])

    @pytest.mark.anyio
    async def test_run_tail_of_an_unknown_leaf_raises(self, session_store: SessionStore) -> None:
        """An unknown leaf, or one of another session, raises ``SessionEntryNotFoundError``."""
        sid, run_a, _ = _ids()
        other, _, _ = _ids()
        await _add(session_store, sid, "root", None, run_a)
        foreign = await _add(session_store, other, "elsewhere", None, run_a)
        for leaf in (f"entry_{uuid.uuid4().hex}", foreign.id):
            with pytest.raises(SessionEntryNotFoundError):
                await read_branch_and_run_tail(session_store, sid, leaf, run_a)

    @pytest.mark.anyio
    async def test_run_tail_entries_of_every_shape_read_back_equal(
        self, session_store: SessionStore
    ) -> None:
        """Tool calls, results (values, errors), text, model changes and data read back equal
        through the tail and the branch."""
        sid, run_a, _ = _ids()
        payloads: list[dict[str, Any]] = [
            {"kind": "message", "message": Message.user("Find the cause ✓")},
            {
                "kind": "message",
                "message": Message(
                    "assistant",
                    (
                        TextContent("Looking."),
                        ToolCallContent("c1", "probe", {"step": 1, "deep": {"x": [1, None]}}),
                        ToolCallContent("c2", "noop"),
                    ),
                ),
            },
            {
                "kind": "message",
                "message": Message(
                    "tool",
                    (
                        ToolResultContent("c1", "probe", "2026-11-30 api-3 503\n" * 20),
                        ToolResultContent("c2", "noop", None, ErrorInfo("refused", code="E")),
                        ToolResultContent("c3", "count", {"n": 2.5, "list": [1, "s"]}),
                    ),
                ),
            },
            {"kind": "model_change", "model": ModelConfig("mock", "demo-2")},
            {"kind": "event", "data": {"type": "note", "n": 1}},
            {"kind": "summary", "summary": "So far, one probe."},
        ]
        root = await _add(session_store, sid, "root", None, None)
        written: list[SessionEntry] = []
        parent = root
        for payload in payloads:
            entry = create_session_entry(
                session_id=sid, parent_id=parent.id, run_id=run_a, **payload
            )
            parent = await session_store.append(entry)
            written.append(parent)
        assert await _read(session_store, sid, root.id, run_a) == ([root], written)
        assert await _read(session_store, sid, written[-1].id, run_a) == ([root, *written], [])
