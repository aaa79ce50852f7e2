"""``Transcript``: a session's branch as its runs work on it.

A session owns one and lends it to each run: the leaf, the history as provider messages and
its byte bounds, the model the branch last changed to, the latest provider turn's input
reading, appends that move the leaf, and the entries a durable run holds back for its next
shared commit (:class:`~prism_core.records._held.HeldEntries`). It knows the store and the
entries, nothing of runs, checkpoints or agents; it must not import them.
"""

from __future__ import annotations

import logging
from typing import Any

from ..codec import dumps
from ..content import Message, message_size_bound
from ..models import ModelConfig
from ._branch import branch_history
from ._entries import SessionEntry, create_session_entry
from ._held import HeldEntries
from ._store import SessionStore

__all__ = ("Transcript",)

logger = logging.getLogger("prism_core.sessions")


def _log_commit(entry: SessionEntry) -> None:
    logger.debug(
        "session %s: %s entry %s committed (run %s)",
        entry.session_id,
        entry.kind,
        entry.id,
        entry.run_id,
        extra={
            "prism_session_id": entry.session_id,
            "prism_entry_id": entry.id,
            "prism_run_id": entry.run_id,
        },
    )


class Transcript:
    """The branch of one session: where it ends, what it says, and how to extend it.

    The history is loaded lazily (:meth:`ensure_loaded`) and then kept current by every
    append. While a durable run holds appends (:meth:`hold`), new entries stay in memory:
    the leaf names the newest, the history has their messages, and :meth:`read_branch` adds
    them after what the store holds, until the run's checkpoint write commits them.
    """

    def __init__(self, session_id: str, store: SessionStore, leaf_id: str | None) -> None:
        self.session_id = session_id
        self.store = store
        self.leaf_id = leaf_id
        #: The latest provider turn's input tokens and where the figure came from
        #: (``"reported"`` or ``"estimate"``), once a turn has run.
        self.last_input: tuple[int, str] | None = None
        self._messages: list[Message] | None = None
        self._size: int | None = 0
        self._bound = 0
        self._model: ModelConfig | None = None
        self._held: HeldEntries | None = None

    # -- the history ------------------------------------------------------------------------

    @property
    def model(self) -> ModelConfig | None:
        """The model of the branch's newest ``model_change`` entry (``None``: never changed,
        or the history is not loaded yet)."""
        return self._model

    async def ensure_loaded(self) -> None:
        """Read the branch into the history, unless it is loaded already."""
        if self._messages is None:
            self.load(await self.store.read_branch_path(self.session_id, self.leaf_id))

    def load(self, path: list[SessionEntry]) -> None:
        """Take ``path`` (the branch at the current leaf, root first) as the history."""
        messages, self._model = branch_history(path)
        self._messages = messages
        self._size = None
        self._bound = sum(map(message_size_bound, messages)) + len(messages)

    def move_to(self, leaf_id: str | None, path: list[SessionEntry]) -> None:
        """Move the leaf to ``leaf_id`` and take ``path`` (its branch) as the history."""
        self.leaf_id = leaf_id
        self.load(path)

    @property
    def messages(self) -> list[Message]:
        """The history as provider messages (load it first: :meth:`ensure_loaded`)."""
        if self._messages is None:
            raise RuntimeError("the transcript's history is not loaded (call ensure_loaded)")
        return self._messages

    def size_bytes(self) -> int:
        """The exact canonical-JSON size of the history (computed once, then kept current)."""
        if self._size is None:
            self._size = sum(len(dumps(m)) + 1 for m in self.messages)
        return self._size

    def size_bound(self) -> int:
        """A cheap upper bound of :meth:`size_bytes`."""
        return self._bound

    # -- appends ----------------------------------------------------------------------------

    async def append_entry(self, *, kind: Any, run_id: str | None, **payload: Any) -> SessionEntry:
        """Append an entry at the leaf (or hold it for the durable run's next commit) and move
        the leaf to it."""
        entry = create_session_entry(
            session_id=self.session_id, kind=kind, parent_id=self.leaf_id, run_id=run_id, **payload
        )
        if self._held is not None:
            self._held.entries.append(entry)
            self.leaf_id = entry.id
        else:
            entry = await self.store.append(entry)
            self.leaf_id = entry.id
            _log_commit(entry)
        if entry.kind == "model_change" and entry.model is not None:
            self._model = entry.model
        return entry

    async def append_message(self, message: Message, run_id: str | None) -> SessionEntry:
        """Append a message entry and extend the history with it."""
        entry = await self.append_entry(kind="message", run_id=run_id, message=message)
        if self._messages is not None:
            self._messages.append(message)
            self._bound += message_size_bound(message) + 1
            if self._size is not None:
                self._size += len(dumps(message)) + 1
        return entry

    # -- appends held for a shared commit ---------------------------------------------------

    def hold(self) -> HeldEntries:
        """Hold appended entries from now on, for the durable run to commit; return them."""
        if self._held is None:
            self._held = HeldEntries(self.leaf_id)
        return self._held

    def release(self) -> None:
        """Stop holding appends. Entries still held were never committed: the leaf goes back
        to what the store holds, and the history is read again when next needed."""
        held, self._held = self._held, None
        if held is not None and held.entries:
            self.leaf_id = held.committed_leaf
            self._messages = None

    async def read_branch(self, leaf_id: str | None) -> list[SessionEntry]:
        """The branch ending at ``leaf_id``, root first; at the current leaf, with the
        entries held for the next commit."""
        held = self._held
        if held is not None and held.entries and leaf_id == self.leaf_id:
            path = await self.store.read_branch_path(self.session_id, held.committed_leaf)
            return [*path, *held.entries]
        return await self.store.read_branch_path(self.session_id, leaf_id)
