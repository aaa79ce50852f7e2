"""The Redis checkpoint store: each save is one atomic Lua script, one round trip.

The two indexes (``cpidx:<owner>`` for ``list``, ``cpall`` for ``max_records``) describe the
prefix, not one store: stores with different ``max_records`` and ``finished_ttl_seconds`` may
share a prefix, and each of them must see an exact count. So every store keeps them, under one
rule that costs nothing on the hot path: a save touches them only when a record's membership or
expiry changes (a new record; a TTL set, moved or cleared). An update of a record that exists
without a TTL and keeps none leaves it where it is already indexed: under the same owner (a
different owner is a conflict) with the ``+inf`` score of a record that never expires.

``load`` reads the fields of a record with one ``HMGET``; the namespace and key are the
caller's, since the record key encodes them exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import redis.asyncio as aioredis

from prism_core.codec import dumps, loads

# The kernel's own name check, so every store refuses a bad namespace or key identically.
from prism_core.stores import (
    CheckpointPage,
    CheckpointRecord,
    CheckpointStamp,
    CheckpointStoreBase,
    DecisionPage,
    DecisionQuery,
    EffectPage,
    EffectQuery,
    InvalidCheckpointError,
    RunWatch,
    SaveRequest,
    check_name,
    check_status,
    check_value_bytes,
    conflict,
    corrupt_record,
    decode_listed,
    decode_stored_metadata,
    decode_stored_value,
    echo,
    normalise_ownership,
    stored_int,
    validate_list,
    validate_save,
)

from . import _scripts
from ._client import RedisConnection, run_script, text
from ._keys import CheckpointKeys, decode_cursor, encode_cursor, index_member, member_name
from ._ledger import RedisLedger, ledger_payload
from ._save_call import SaveCall
from ._sessions import RedisSessionStore
from ._transaction import RedisTransaction
from ._wakeups import RedisWakeups

__all__ = ("FINISHED_STATUSES", "RedisCheckpointStore", "SaveCall", "positive")

#: Run statuses after which a record is final; ``finished_ttl_seconds`` applies to these.
FINISHED_STATUSES = ("succeeded", "failed", "aborted", "denied")


# What ``load`` reads; the namespace and key are the caller's, which the record key encodes.
_LOAD_FIELDS = ("owner", "v", "value", "fence", "meta", "cat", "created", "updated")
_STAMP_FIELDS = ("owner", "v", "fence")


def positive(value: Any, what: str) -> int | None:
    """``value`` if it is ``None`` or a positive integer, else :class:`InvalidCheckpointError`
    naming ``what``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidCheckpointError(
            f"{what} must be a positive integer or None, got {echo(value)}"
        )
    return value


def _fields(reply: Sequence[Any]) -> dict[str, str]:
    """A stored hash as text, from a script's flat ``HGETALL`` field list."""
    try:
        return {text(reply[i]): text(reply[i + 1]) for i in range(0, len(reply), 2)}
    except UnicodeDecodeError:
        raise corrupt_record("?", "?", "a text field is not UTF-8") from None


def _record(fields: Mapping[str, str]) -> CheckpointRecord:
    namespace, key = fields.get("ns"), fields.get("key")
    if namespace is None or key is None:
        raise corrupt_record(namespace or "?", key or "?", "its namespace or key is missing")
    owner = fields.get("owner") or ""
    ownership = decode_stored_metadata(owner) if owner else None
    if owner and ownership is None:
        raise corrupt_record(namespace, key, "its owner is not a map of strings")
    return _build(
        namespace,
        key,
        ownership,
        (
            fields.get("v"),
            fields.get("value"),
            fields.get("fence"),
            fields.get("meta"),
            fields.get("cat"),
            fields.get("created"),
            fields.get("updated"),
        ),
    )


def _build(
    namespace: str, key: str, ownership: dict[str, str] | None, stored: Sequence[Any]
) -> CheckpointRecord:
    """A record from its stored fields (version, value, fence, meta, category, created,
    updated), each checked: a field Redis holds that cannot be read is a corrupt record."""
    version, value, fence, meta, category, created, updated = stored
    return CheckpointRecord(
        namespace=namespace,
        key=key,
        version=stored_int(version, namespace, key, "version"),
        value=decode_stored_value(value, namespace, key),
        metadata=decode_stored_metadata(meta),
        ownership=ownership,
        fencing_token=None if fence is None else stored_int(fence, namespace, key, "fence"),
        category=None if category is None else _stored_text(category, namespace, key),
        created_at=_stored_time(created, namespace, key),
        updated_at=_stored_time(updated, namespace, key),
    )


def _stored_text(value: bytes | str, namespace: str, key: str) -> str:
    try:
        return text(value)
    except UnicodeDecodeError:
        raise corrupt_record(namespace, key, "a text field is not UTF-8") from None


def _stored_time(value: Any, namespace: str, key: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise corrupt_record(namespace, key, "its timestamps are not numbers") from None


class RedisCheckpointStore(CheckpointStoreBase):
    """A :class:`~prism_core.stores.CheckpointStore` on Redis (asyncio only).

    Create it with :func:`~prism_store_redis.create_redis_checkpoint_store`. Records live in
    hashes under ``<prefix>:cp:``; every save runs one Lua script that checks ownership, the
    expected version, version order and the fencing token and then writes, so concurrent
    writers in any number of processes see exactly one winner. Redis failures raise
    :class:`~prism_core.stores.CheckpointStoreError`.
    """

    def __init__(
        self,
        connection: RedisConnection,
        *,
        prefix: str,
        finished_ttl_seconds: int | None,
        max_records: int | None,
        max_value_bytes: int | None,
    ) -> None:
        self._connection = connection
        self._keys = CheckpointKeys(prefix)
        self._finished_ttl = finished_ttl_seconds
        self._max_records = max_records
        self._max_records_arg = "" if max_records is None else str(max_records)
        self.max_value_bytes = max_value_bytes
        client = connection.client
        self._save = client.register_script(_scripts.CHECKPOINT_SAVE)
        self._delete = client.register_script(_scripts.CHECKPOINT_DELETE)
        self._renew = client.register_script(_scripts.CHECKPOINT_RENEW)
        self._list = client.register_script(_scripts.CHECKPOINT_LIST)
        self._list_status = client.register_script(_scripts.CHECKPOINT_LIST_STATUS)
        self._commit = client.register_script(_scripts.SHARED_COMMIT)
        #: The effect ledger (see :class:`~prism_core.stores.EffectLedger`).
        self._ledger = RedisLedger(connection, prefix)

    @property
    def prefix(self) -> str:
        """The key prefix this store reads and writes under."""
        return self._keys.prefix

    @property
    def client(self) -> aioredis.Redis:
        """The ``redis.asyncio.Redis`` client this store talks through."""
        return self._connection.client

    async def load(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointRecord | None:
        """The record, or ``None`` when absent, expired or owned by someone else."""
        record_key = self._keys.record(check_name(namespace, "namespace"), check_name(key, "key"))
        owner_map = normalise_ownership(ownership)
        with self._connection.guard("load a checkpoint") as client:
            reply: list[Any] = await client.hmget(record_key, _LOAD_FIELDS)
        owner, version, value, fence, meta, category, created, updated = reply
        if owner is None or _stored_text(owner, namespace, key) != self._keys.owner_text(owner_map):
            return None
        # The caller's names and ownership are what the record key and owner check matched.
        return _build(
            namespace, key, owner_map, (version, value, fence, meta, category, created, updated)
        )

    async def load_stamp(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointStamp | None:
        """The record's version and fencing token, or ``None`` when absent, expired or owned
        by someone else (see :class:`~prism_core.stores.CheckpointStampReader`): three
        fields of its hash, the value neither sent nor decoded."""
        record_key = self._keys.record(check_name(namespace, "namespace"), check_name(key, "key"))
        owner_map = normalise_ownership(ownership)
        with self._connection.guard("read a checkpoint's version") as client:
            owner, version, fence = await client.hmget(record_key, _STAMP_FIELDS)
        if owner is None or _stored_text(owner, namespace, key) != self._keys.owner_text(owner_map):
            return None
        return CheckpointStamp(
            stored_int(version, namespace, key, "version"),
            None if fence is None else stored_int(fence, namespace, key, "fence"),
        )

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        """Write the record atomically (one script) or raise ``CheckpointConflictError``.

        Raises :class:`~prism_core.stores.CheckpointLimitError` when the value is over
        ``max_value_bytes`` or a new record would exceed ``max_records``.
        """
        call = self._save_call(request)
        with self._connection.guard("save a checkpoint"):
            reply = await run_script(self._save, keys=call.keys, args=call.args)
        return call.record(text(reply))

    def _save_call(self, request: SaveRequest) -> SaveCall:
        """``request`` checked against this store's limits and encoded as the keys and
        arguments of ``CHECKPOINT_SAVE`` (no I/O)."""
        check_value_bytes(request, self.max_value_bytes)
        status = request.status
        ttl = ""
        if self._finished_ttl is not None and status in FINISHED_STATUSES:
            ttl = str(self._finished_ttl)
        owner = self._keys.owner_text(request.ownership)
        record_key = self._keys.record(request.namespace, request.key)
        args: list[str | bytes] = [
            index_member(request.namespace, request.key),
            str(request.version),
            "" if request.expected_version is None else str(request.expected_version),
            owner,
            "" if request.fencing_token is None else str(request.fencing_token),
            request.value_json,
            "" if request.metadata is None else dumps(request.metadata),
            request.category or "",
            "0" if request.category is None else "1",
            request.namespace,
            request.key,
            ttl,
            self._max_records_arg,
            status or "",
            self._keys.status_base,
            self._ledger.base,
            ledger_payload(request.ledger),
        ]
        keys: list[str | bytes] = [
            record_key,
            self._keys.owner_index(owner),
            self._keys.all_records,
        ]
        # The record hands back a copy of the value, decoded from the text that is stored.
        return SaveCall(keys, args, request, loads(request.value_json), self._max_records)

    def shared_transaction(self, sessions: object) -> RedisTransaction | None:
        """One ``EVALSHA`` over this store and ``sessions`` (see
        :func:`prism_core.stores.shared_transaction`), or ``None`` unless ``sessions`` is a
        Redis session store on this store's very client (and both are open)."""
        if (
            isinstance(sessions, RedisSessionStore)
            and sessions._connection.client is self._connection.client
            and not (sessions._connection.closed or self._connection.closed)
        ):
            return RedisTransaction(self, sessions)
        return None

    def checkpoint_transaction(self) -> RedisTransaction:
        """One ``EVALSHA`` over several saves of this store (see
        :class:`prism_core.stores.CheckpointBatchStore`)."""
        return RedisTransaction(self, None)

    async def renew_lease(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
    ) -> None:
        """Replace the value of the record at exactly ``version`` in one Lua script, keeping
        its version (see :class:`~prism_core.stores.LeaseRenewalStore`);
        ``CheckpointConflictError`` otherwise."""
        request = validate_save(
            namespace,
            key,
            value,
            version=version,
            expected_version=version,
            ownership=ownership,
            fencing_token=fencing_token,
            max_value_bytes=self.max_value_bytes,
        )
        args = [
            self._keys.owner_text(request.ownership),
            str(request.version),
            "" if request.fencing_token is None else str(request.fencing_token),
            request.value_json,
        ]
        keys = [self._keys.record(request.namespace, request.key)]
        with self._connection.guard("renew a lease"):
            reply = await run_script(self._renew, keys=keys, args=args)
        if text(reply) != "ok":
            raise conflict(request.namespace, request.key)

    async def delete(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> bool:
        """Delete the record; ``False`` when absent or owned by someone else."""
        namespace, key = check_name(namespace, "namespace"), check_name(key, "key")
        owner = self._keys.owner_text(normalise_ownership(ownership))
        keys = [
            self._keys.record(namespace, key),
            self._keys.owner_index(owner),
            self._keys.all_records,
        ]
        with self._connection.guard("delete a checkpoint"):
            deleted = await run_script(
                self._delete,
                keys=keys,
                args=[owner, index_member(namespace, key), self._keys.status_base],
            )
        return bool(deleted)

    async def list(
        self,
        namespace: str | None = None,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records of exactly ``ownership`` (in ``namespace`` when given), in key order."""
        validate_list(limit, cursor)
        owner = self._keys.owner_text(normalise_ownership(ownership))
        if namespace is None:
            low, high = b"-", b"+"
        else:
            low, high = self._keys.namespace_range(check_name(namespace, "namespace"))
        if cursor is not None:
            after = decode_cursor(cursor)
            if namespace is None or after >= low[1:]:
                low = b"(" + after
        keys = [self._keys.owner_index(owner), self._keys.all_records]
        args: list[str | bytes] = [self._keys.record_base, low, high, str(limit + 1)]
        with self._connection.guard("list checkpoints"):
            reply = await run_script(self._list, keys=keys, args=args)
        return self._page(reply, limit)

    @staticmethod
    def _page(reply: Sequence[Any], limit: int) -> CheckpointPage:
        """A page from a list script's flat reply of up to ``limit + 1`` (member, fields)
        pairs; a record that cannot be read back is left out and named in ``unreadable``."""
        pairs = list(zip(reply[0 : 2 * limit : 2], reply[1 : 2 * limit : 2], strict=True))
        records, unreadable = decode_listed(
            pairs, lambda pair: _record(_fields(pair[1])), lambda pair: member_name(pair[0])
        )
        if len(reply) <= 2 * limit:
            return CheckpointPage(records, None, unreadable)
        last = reply[2 * limit - 2]
        member = last if isinstance(last, bytes) else last.encode()
        return CheckpointPage(records, encode_cursor(member), unreadable)

    async def list_by_status(
        self,
        namespace: str,
        status: str,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records of exactly ``ownership`` in ``namespace`` whose value's status is
        ``status``, in key order, read from that owner's status set (one round trip)."""
        validate_list(limit, cursor)
        check_status(status)
        owner = self._keys.owner_text(normalise_ownership(ownership))
        low, high = self._keys.namespace_range(check_name(namespace, "namespace"))
        if cursor is not None:
            after = decode_cursor(cursor)
            if after >= low[1:]:
                low = b"(" + after
        keys = [self._keys.status_index(owner, status)]
        args: list[str | bytes] = [self._keys.record_base, low, high, str(limit + 1), status, owner]
        with self._connection.guard("list checkpoints by status"):
            reply = await run_script(self._list_status, keys=keys, args=args)
        return self._page(reply, limit)

    async def notify_runs(self) -> None:
        """Wake the workers watching this prefix, in any process: one ``PUBLISH`` (see
        :class:`~prism_core.stores.RunWakeups` and :mod:`prism_store_redis._wakeups`)."""
        await RedisWakeups(self._connection, self.prefix).notify_runs()

    def watch_runs(self) -> AbstractAsyncContextManager[RunWatch]:
        """Watch this prefix's run notifications on a subscribed connection of its own."""
        return RedisWakeups(self._connection, self.prefix).watch_runs()

    async def query_effects(self, query: EffectQuery) -> EffectPage:
        """The effect rows ``query`` matches (see :class:`~prism_core.stores.EffectLedger`)."""
        return await self._ledger.query_effects(query)

    async def query_decisions(self, query: DecisionQuery) -> DecisionPage:
        """The decision rows ``query`` matches, in the order they were written."""
        return await self._ledger.query_decisions(query)

    async def mark_in_doubt(
        self, run_id: str, tool_call_ids: Sequence[str], *, ownership: Mapping[str, str] | None
    ) -> int:
        """Move the named calls of ``run_id`` from ``dispatched`` to ``in_doubt``."""
        return await self._ledger.mark_in_doubt(run_id, tool_call_ids, ownership)

    async def erase_session(self, session_id: str, *, ownership: Mapping[str, str] | None) -> int:
        """Rewrite the session's effect and decision rows in their erased form."""
        return await self._ledger.erase_session(session_id, ownership)

    async def aclose(self) -> None:
        """Close the Redis client if this store created it; idempotent."""
        await self._connection.aclose()
