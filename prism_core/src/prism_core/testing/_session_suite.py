"""The session store conformance suite (see :class:`SessionStoreConformance`)."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from ..content import (
    ErrorInfo,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)
from ..models import ModelConfig
from ..records import (
    SessionConflictError,
    SessionEntry,
    SessionEntryNotFoundError,
    SessionStore,
    create_session_entry,
)
from ._races import SessionRaces
from ._run_tail_suite import RunTailReads

__all__ = ("SessionStoreConformance",)


def _session_id() -> str:
    # A fresh session per test keeps tests independent on a shared server.
    return f"session-conformance-{uuid.uuid4().hex}"


def _text(session_id: str, text: str, parent: SessionEntry | None = None) -> SessionEntry:
    return create_session_entry(
        session_id=session_id,
        kind="message",
        parent_id=parent.id if parent is not None else None,
        message=Message.user(text),
    )


async def _chain(store: SessionStore, session_id: str, count: int) -> list[SessionEntry]:
    entries: list[SessionEntry] = []
    parent: SessionEntry | None = None
    for index in range(count):
        parent = await store.append(_text(session_id, f"entry {index}", parent))
        entries.append(parent)
    return entries


class SessionStoreConformance(SessionRaces, RunTailReads):
    """The behaviour every :class:`~prism_core.SessionStore` must show.

    Subclass it in a test module as ``class TestMyStore(SessionStoreConformance)`` and define
    a ``session_store`` fixture (an async generator fixture may be used) that yields a fresh,
    open store. The tests run on whichever anyio backends the ``anyio_backend`` fixture in
    scope selects. Define ``session_store_factory`` too: a callable opening another,
    independent instance on the same backend (the memory store returns ``session_store``
    itself). A parent outside the entry's session and an unknown branch leaf raise
    :class:`~prism_core.SessionEntryNotFoundError`; a stale ``expected_leaf_id`` and a
    duplicate entry id raise :class:`~prism_core.SessionConflictError`. Every test uses its
    own session ids, so the suite can run against a shared server. The branch-and-run-tail
    read (:func:`~prism_core.records.read_branch_and_run_tail`) is checked on the store's
    own read when it offers one, else on its ``list`` fallback.
    """

    @pytest.mark.anyio
    async def test_append_get_and_list_keep_append_order(self, session_store: SessionStore) -> None:
        """Appended entries come back from ``get`` and ``list`` equal and in append order."""
        sid = _session_id()
        assert await session_store.list(sid) == []
        entries = await _chain(session_store, sid, 3)
        sibling = await session_store.append(_text(sid, "sibling", entries[0]))
        assert await session_store.list(sid) == [*entries, sibling]
        for entry in [*entries, sibling]:
            assert await session_store.get(entry.id) == entry
        assert await session_store.get(f"entry_{uuid.uuid4().hex}") is None

    @pytest.mark.anyio
    async def test_append_returns_the_stored_entry(self, session_store: SessionStore) -> None:
        """``append`` answers an entry equal to the one it was given."""
        sid = _session_id()
        entry = _text(sid, "hello")
        assert await session_store.append(entry) == entry

    @pytest.mark.anyio
    async def test_sessions_do_not_mix(self, session_store: SessionStore) -> None:
        """Each session lists only its own entries."""
        sid_a, sid_b = _session_id(), _session_id()
        a = await session_store.append(_text(sid_a, "in a"))
        b = await session_store.append(_text(sid_b, "in b"))
        a2 = await session_store.append(_text(sid_a, "in a again", a))
        assert await session_store.list(sid_a) == [a, a2]
        assert await session_store.list(sid_b) == [b]

    @pytest.mark.anyio
    async def test_parent_must_belong_to_the_same_session(
        self, session_store: SessionStore
    ) -> None:
        """A parent from another session, or an unknown one, is refused; nothing is written."""
        sid_a, sid_b = _session_id(), _session_id()
        foreign_parent = await session_store.append(_text(sid_a, "root of a"))
        stray = _text(sid_b, "child of a's root", foreign_parent)
        with pytest.raises(SessionEntryNotFoundError):
            await session_store.append(stray)
        orphan = create_session_entry(
            session_id=sid_b,
            kind="message",
            parent_id=f"entry_{uuid.uuid4().hex}",
            message=Message.user("orphan"),
        )
        with pytest.raises(SessionEntryNotFoundError):
            await session_store.append(orphan)
        assert await session_store.list(sid_b) == []
        assert await session_store.get(stray.id) is None
        assert await session_store.get(orphan.id) is None
        assert await session_store.list(sid_a) == [foreign_parent]

    @pytest.mark.anyio
    async def test_read_branch_path_follows_the_chosen_branch(
        self, session_store: SessionStore
    ) -> None:
        """On a tree with two children of one parent, each leaf reads only its own branch."""
        sid = _session_id()
        root = await session_store.append(_text(sid, "root"))
        middle = await session_store.append(_text(sid, "middle", root))
        left = await session_store.append(_text(sid, "left", middle))
        right = await session_store.append(_text(sid, "right", middle))
        left_leaf = await session_store.append(_text(sid, "left leaf", left))
        assert await session_store.read_branch_path(sid, left_leaf.id) == [
            root,
            middle,
            left,
            left_leaf,
        ]
        assert await session_store.read_branch_path(sid, right.id) == [root, middle, right]
        assert await session_store.read_branch_path(sid, middle.id) == [root, middle]
        assert await session_store.read_branch_path(sid, root.id) == [root]

    @pytest.mark.anyio
    async def test_read_branch_path_of_none_is_empty(self, session_store: SessionStore) -> None:
        """A ``None`` leaf reads as the empty branch."""
        sid = _session_id()
        assert await session_store.read_branch_path(sid, None) == []
        await session_store.append(_text(sid, "root"))
        assert await session_store.read_branch_path(sid, None) == []

    @pytest.mark.anyio
    async def test_read_branch_path_of_unknown_leaf_raises(
        self, session_store: SessionStore
    ) -> None:
        """An unknown leaf, or a leaf of another session, raises ``SessionEntryNotFoundError``."""
        sid, other = _session_id(), _session_id()
        await session_store.append(_text(sid, "root"))
        foreign = await session_store.append(_text(other, "elsewhere"))
        with pytest.raises(SessionEntryNotFoundError):
            await session_store.read_branch_path(sid, f"entry_{uuid.uuid4().hex}")
        with pytest.raises(SessionEntryNotFoundError):
            await session_store.read_branch_path(sid, foreign.id)

    @pytest.mark.anyio
    async def test_expected_leaf_id_guards_the_head(self, session_store: SessionStore) -> None:
        """``expected_leaf_id`` appends on the current head and refuses a stale one."""
        sid = _session_id()
        root = await session_store.append(_text(sid, "root"), expected_leaf_id=None)
        late_first = _text(sid, "also first")
        with pytest.raises(SessionConflictError):
            await session_store.append(late_first, expected_leaf_id=None)
        child = await session_store.append(_text(sid, "child", root), expected_leaf_id=root.id)
        stale = _text(sid, "stale", root)
        with pytest.raises(SessionConflictError):
            await session_store.append(stale, expected_leaf_id=root.id)
        assert await session_store.list(sid) == [root, child]
        assert await session_store.get(stale.id) is None
        assert await session_store.get(late_first.id) is None
        unguarded = await session_store.append(_text(sid, "unguarded", root))
        assert await session_store.list(sid) == [root, child, unguarded]

    @pytest.mark.anyio
    async def test_concurrent_guarded_appends_have_one_winner(
        self, session_store: SessionStore
    ) -> None:
        """16 appends racing on the same expected head: one lands, 15 conflict."""
        sid = _session_id()
        root = await session_store.append(_text(sid, "root"))
        winners: list[SessionEntry] = []
        conflicts = 0

        async def writer(index: int) -> None:
            nonlocal conflicts
            try:
                entry = await session_store.append(
                    _text(sid, f"writer {index}", root), expected_leaf_id=root.id
                )
            except SessionConflictError:
                conflicts += 1
            else:
                winners.append(entry)

        async with anyio.create_task_group() as tg:
            for index in range(16):
                tg.start_soon(writer, index)
        assert len(winners) == 1
        assert conflicts == 15
        assert await session_store.list(sid) == [root, winners[0]]

    @pytest.mark.anyio
    async def test_duplicate_entry_id_is_rejected(self, session_store: SessionStore) -> None:
        """Reusing an existing id raises ``SessionConflictError`` and keeps the first entry."""
        sid = _session_id()
        first = await session_store.append(_text(sid, "first"))
        again = create_session_entry(
            session_id=sid, kind="message", id=first.id, message=Message.user("second")
        )
        with pytest.raises(SessionConflictError):
            await session_store.append(again)
        elsewhere = create_session_entry(
            session_id=_session_id(), kind="message", id=first.id, message=Message.user("x")
        )
        with pytest.raises(SessionConflictError):
            await session_store.append(elsewhere)
        assert await session_store.get(first.id) == first
        assert await session_store.list(sid) == [first]
        assert await session_store.list(elsewhere.session_id) == []

    @pytest.mark.anyio
    async def test_every_entry_kind_round_trips(self, session_store: SessionStore) -> None:
        """Entries of every kind, with every content block type, read back equal."""
        sid = _session_id()
        run_id = f"run-{uuid.uuid4().hex}"
        payloads: list[dict[str, Any]] = [
            {"kind": "message", "message": Message.user("Publish the draft ✓")},
            {
                "kind": "message",
                "run_id": run_id,
                "message": Message(
                    "assistant",
                    (
                        ThinkingContent("Need the draft id.", signature="sig-1"),
                        ThinkingContent("No signature."),
                        TextContent("Publishing."),
                        ToolCallContent(
                            "call-1",
                            "publish",
                            {"draft": {"id": 42, "tags": ["a", "b"]}, "dry_run": False},
                        ),
                        ToolCallContent("call-2", "noop"),
                    ),
                ),
            },
            {
                "kind": "message",
                "run_id": run_id,
                "message": Message(
                    "tool",
                    (
                        ToolResultContent("call-1", "publish", {"url": "https://x", "ok": True}),
                        ToolResultContent(
                            "call-2",
                            "noop",
                            None,
                            ErrorInfo("refused", code="ERR_X", retryable=False),
                        ),
                        ToolResultContent("call-3", "count", [1, 2.5, None, "s"]),
                    ),
                ),
            },
            {"kind": "message", "message": Message("system", (TextContent("Be brief."),))},
            {"kind": "model_change", "model": ModelConfig("mock", "demo-2")},
            {"kind": "label", "label": "checkpoint A"},
            {"kind": "summary", "summary": "So far: one draft published."},
            {"kind": "metadata", "data": {"title": "Drafts", "pinned": True}},
            {"kind": "event", "data": {"type": "agent_started", "n": 1}},
            {
                "kind": "custom",
                "data": {"nested": {"list": [1, {"x": None}], "ratio": 0.5}, "s": "ü"},
            },
            {"kind": "custom", "data": None},
        ]
        entries: list[SessionEntry] = []
        parent: SessionEntry | None = None
        for payload in payloads:
            entry = create_session_entry(
                session_id=sid, parent_id=parent.id if parent else None, **payload
            )
            parent = await session_store.append(entry)
            entries.append(parent)
        compaction = create_session_entry(
            session_id=sid,
            kind="compaction",
            parent_id=parent.id if parent else None,
            summary="Compacted the first turns.",
            first_kept_entry_id=entries[4].id,
            run_id=run_id,
        )
        entries.append(await session_store.append(compaction))
        assert entries[-1] == compaction
        assert await session_store.list(sid) == entries
        for entry in entries:
            assert await session_store.get(entry.id) == entry
        assert await session_store.read_branch_path(sid, entries[-1].id) == entries

    @pytest.mark.anyio
    async def test_long_branch_reads_back_in_order(self, session_store: SessionStore) -> None:
        """A 40-entry branch reads back root to leaf, in order."""
        sid = _session_id()
        entries = await _chain(session_store, sid, 40)
        assert await session_store.read_branch_path(sid, entries[-1].id) == entries
        assert await session_store.read_branch_path(sid, entries[19].id) == entries[:20]
        assert await session_store.list(sid) == entries

    @pytest.mark.anyio
    async def test_aclose_is_idempotent(self, session_store: SessionStore) -> None:
        """Closing the store twice is harmless."""
        await session_store.append(_text(_session_id(), "before close"))
        await session_store.aclose()
        await session_store.aclose()
