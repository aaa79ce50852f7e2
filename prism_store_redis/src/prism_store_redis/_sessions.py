"""The Redis session store: atomic appends and one-round-trip branch reads via Lua."""

from __future__ import annotations

import builtins
from types import TracebackType
from typing import Any

from prism_core.codec import dumps, loads
from prism_core.errors import PrismError
from prism_core.stores import (
    UNSET,
    BranchAndRunTail,
    SessionEntry,
    SessionEntryNotFoundError,
    decode_session_entry,
    echo,
)

from . import _ledger_scripts, _scripts
from ._client import RedisConnection, run_script, text
from ._keys import SessionKeys
from ._refusals import append_refusal

__all__ = (
    "RedisSessionStore",
    "RedisSessionStoreError",
    "RedisSessionStoreUnavailableError",
    "append_refusal",
)


class RedisSessionStoreError(PrismError):
    """Redis failed (connection lost, server error) during a session store call.

    An append either happened completely or not at all.
    """

    code = "ERR_PRISM_SESSION_STORE"


class RedisSessionStoreUnavailableError(RedisSessionStoreError):
    """Redis could not be reached or did not answer in time during a session store call
    (the transient kind, like :class:`~prism_core.CheckpointStoreUnavailableError`): a run
    that stops on it stays continuable."""

    code = "ERR_PRISM_STORE_UNAVAILABLE"


def _entry(data: bytes | str) -> SessionEntry:
    return decode_session_entry(loads(data))


class RedisSessionStore:
    """A :class:`~prism_core.stores.SessionStore` on Redis (asyncio only).

    Create it with :func:`~prism_store_redis.create_redis_session_store`. Appends run one Lua
    script that checks the expected head, the parent and the id and then writes; branch reads
    walk parent ids on the server in one round trip.
    """

    def __init__(self, connection: RedisConnection, *, prefix: str) -> None:
        self._connection = connection
        self._keys = SessionKeys(prefix)
        client = connection.client
        self._append = client.register_script(_scripts.SESSION_APPEND)
        self._list = client.register_script(_scripts.SESSION_LIST)
        self._branch = client.register_script(_scripts.SESSION_BRANCH)
        self._run_tail = client.register_script(_scripts.SESSION_RUN_TAIL)
        self._delete = client.register_script(_ledger_scripts.SESSION_DELETE)

    @property
    def prefix(self) -> str:
        """The key prefix this store reads and writes under."""
        return self._keys.prefix

    async def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> SessionEntry:
        """Append ``entry`` atomically (see :class:`~prism_core.stores.SessionStore`).

        Raises :class:`~prism_core.stores.SessionConflictError` when the head moved or the
        id is taken, :class:`~prism_core.stores.SessionEntryNotFoundError` when the parent is
        not an entry of the same session.
        """
        keys, args = self._append_call(entry, expected_leaf_id)
        with self._connection.guard("append a session entry"):
            outcome = text(await run_script(self._append, keys=keys, args=args))
        append_refusal(outcome, entry)
        return _entry(args[0])

    def _append_call(
        self, entry: SessionEntry, expected_leaf_id: Any
    ) -> tuple[builtins.list[str | bytes], builtins.list[str | bytes]]:
        """An append checked and encoded as the keys and arguments of ``SESSION_APPEND``
        (no I/O; raises ``TypeError`` like :meth:`append`)."""
        if not isinstance(entry, SessionEntry):
            raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
        data = dumps(entry)
        if expected_leaf_id is UNSET:
            check, expected = "any", ""
        elif expected_leaf_id is None:
            check, expected = "empty", ""
        elif isinstance(expected_leaf_id, str):
            check, expected = "leaf", expected_leaf_id
        else:
            raise TypeError(
                "expected_leaf_id must be an entry id, None (the session must be empty) or "
                f"left out, got {type(expected_leaf_id).__name__}"
            )
        keys: builtins.list[str | bytes] = [
            self._keys.entry(entry.id),
            self._keys.order(entry.session_id),
            self._keys.head(entry.session_id),
        ]
        if entry.parent_id is not None:
            keys.append(self._keys.entry(entry.parent_id))
        args: builtins.list[str | bytes] = [
            data,
            entry.id,
            entry.session_id,
            check,
            expected,
            entry.parent_id or "",
        ]
        return keys, args

    async def list(self, session_id: str) -> list[SessionEntry]:
        """Every entry of the session, in append order (one round trip)."""
        with self._connection.guard("list session entries"):
            reply = await run_script(
                self._list, keys=[self._keys.order(session_id)], args=[self._keys.entry_base]
            )
        return [_entry(data) for data in reply]

    async def get(self, entry_id: str) -> SessionEntry | None:
        """One entry by id, or ``None``."""
        with self._connection.guard("read a session entry") as client:
            data = await client.hget(self._keys.entry(entry_id), "entry")
        return None if data is None else _entry(data)

    async def read_branch_path(
        self, session_id: str, leaf_id: str | None
    ) -> builtins.list[SessionEntry]:
        """Root-to-leaf entries of the branch ending at ``leaf_id`` (one round trip).

        Raises :class:`~prism_core.stores.SessionEntryNotFoundError` when the session has no
        such entry.
        """
        if leaf_id is None:
            return []
        with self._connection.guard("read a session branch"):
            reply = await run_script(
                self._branch,
                keys=[self._keys.order(session_id)],
                args=[self._keys.entry_base, session_id, leaf_id],
            )
        if text(reply[0]) != "ok":
            raise SessionEntryNotFoundError(
                f"session {echo(session_id)} has no entry {echo(text(reply[1]))}"
            )
        return [_entry(data) for data in reply[1:]]

    async def read_branch_and_run_tail(
        self, session_id: str, leaf_id: str | None, run_id: str
    ) -> BranchAndRunTail:
        """The branch ending at ``leaf_id`` and the entries of ``run_id`` appended after it,
        in one round trip (see :class:`~prism_core.stores.BranchAndRunTailReader`)."""
        with self._connection.guard("read a session branch and a run's entries"):
            reply = await run_script(
                self._run_tail,
                keys=[self._keys.order(session_id)],
                args=[self._keys.entry_base, session_id, leaf_id or ""],
            )
        if text(reply[0]) != "ok":
            raise SessionEntryNotFoundError(
                f"session {echo(session_id)} has no entry {echo(text(reply[1]))}"
            )
        split = 2 + int(reply[1])
        path = [_entry(data) for data in reply[2:split]]
        later = (loads(data) for data in reply[split:])
        tail = [decode_session_entry(data) for data in later if data.get("run_id") == run_id]
        return BranchAndRunTail(path=path, tail=tail)

    async def delete_session(self, session_id: str) -> int:
        """Delete every entry of ``session_id``, its order list and head (one script); the
        number of entries deleted (see :class:`~prism_core.stores.SessionDeleter`)."""
        keys = [self._keys.order(session_id), self._keys.head(session_id)]
        with self._connection.guard("delete a session"):
            deleted = await run_script(self._delete, keys=keys, args=[self._keys.entry_base])
        return int(deleted)

    async def aclose(self) -> None:
        """Close the Redis client if this store created it; idempotent."""
        await self._connection.aclose()

    async def __aenter__(self) -> RedisSessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
