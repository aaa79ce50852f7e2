"""``StorePair``: a checkpoint store and a session store opened together.

A pair from one URL shares its connection (or engine, or client) and commits a durable turn's
session entries and checkpoint together. It holds the two stores and closes them; it must
not hold store behaviour of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

import attrs

from ..records._store import SessionStore
from ._checkpoints import CheckpointStore

__all__ = ("StorePair",)


@attrs.define(eq=False)
class StorePair:
    """A checkpoint store and a session store, closed together.

    Unpacks as ``checkpoints, sessions = pair``; ``async with open_stores(url) as pair:``
    closes both on the way out. :meth:`aclose` is idempotent and closes the session store
    first, then the checkpoint store (which owns a shared connection when there is one).
    """

    checkpoints: CheckpointStore
    """The checkpoint store."""
    sessions: SessionStore
    """The session store."""
    _closed: bool = attrs.field(default=False, init=False, repr=False)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.checkpoints, self.sessions))

    async def aclose(self) -> None:
        """Close both stores; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.sessions.aclose()
        finally:
            await self.checkpoints.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
