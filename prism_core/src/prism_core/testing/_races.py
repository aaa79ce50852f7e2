"""Races across independent store instances (the ``*_store_factory`` fixtures).

A store that guards its read-then-write with a per-instance lock passes every race on one
instance; two workers in two processes each hold their own instance, so the suites below
race writers spread over several instances on the same backend. Each suite class declares
a default factory fixture that fails with instructions, so a subclass states its answer.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

import anyio
import pytest

from ..content import Message
from ..errors import CheckpointConflictError
from ..records import SessionConflictError, SessionEntry, SessionStore, create_session_entry
from ..stores import CheckpointRecord, CheckpointStore

__all__ = ("CheckpointRaces", "SessionRaces")

#: How many instances the races spread their writers over (``checkpoint_store`` included).
INSTANCES = 4
#: How many writers race in each test.
WRITERS = 16

CheckpointStoreFactory = Callable[[], CheckpointStore]
SessionStoreFactory = Callable[[], SessionStore]


def _missing_factory(kind: str) -> NoReturn:
    pytest.fail(
        f"define a {kind}_store_factory fixture in your conformance subclass: a zero-argument "
        f"callable returning a new, independent {kind} store instance on the same backend "
        f"(same database, file, server and prefix) as the {kind}_store fixture, the way a "
        "second worker process would open it. The kit closes every instance it gets. A store "
        f"whose instances cannot share data (like the memory stores) returns the {kind}_store "
        "fixture itself and says so.",
        pytrace=False,
    )


@contextlib.asynccontextmanager
async def _instances(first: Any, factory: Callable[[], Any]) -> AsyncIterator[list[Any]]:
    opened: list[Any] = []
    try:
        for _ in range(INSTANCES - 1):
            opened.append(factory())
        yield [first, *opened]
    finally:
        for instance in opened:
            if instance is not first:
                await instance.aclose()


def _namespace() -> str:
    return f"prism.conformance.{uuid.uuid4().hex}"


class CheckpointRaces:
    """Checkpoint writes racing across instances: CAS, create-only and fencing."""

    @pytest.fixture
    def checkpoint_store_factory(self) -> CheckpointStoreFactory:
        """Opens another instance on the backend of ``checkpoint_store``; subclasses define it."""
        _missing_factory("checkpoint")

    @pytest.mark.anyio
    async def test_cross_instance_compare_and_swap_has_one_winner(
        self,
        checkpoint_store: CheckpointStore,
        checkpoint_store_factory: CheckpointStoreFactory,
    ) -> None:
        """16 writers on 4 instances racing from version 1 to 2: one wins, 15 conflict."""
        ns = _namespace()
        await checkpoint_store.save(ns, "race", {"writer": None}, version=1)
        winners: list[CheckpointRecord] = []
        losers: list[int] = []
        async with _instances(checkpoint_store, checkpoint_store_factory) as stores:

            async def writer(index: int) -> None:
                store: CheckpointStore = stores[index % len(stores)]
                try:
                    record = await store.save(
                        ns, "race", {"writer": index}, version=2, expected_version=1
                    )
                except CheckpointConflictError:
                    losers.append(index)
                else:
                    winners.append(record)

            async with anyio.create_task_group() as tg:
                for index in range(WRITERS):
                    tg.start_soon(writer, index)
            assert len(winners) == 1, f"{len(winners)} writers won one compare-and-swap"
            assert len(losers) == WRITERS - 1
            for store in stores:
                stored = await store.load(ns, "race")
                assert stored is not None
                assert (stored.version, stored.value) == (2, winners[0].value)

    @pytest.mark.anyio
    async def test_cross_instance_create_only_has_one_winner(
        self,
        checkpoint_store: CheckpointStore,
        checkpoint_store_factory: CheckpointStoreFactory,
    ) -> None:
        """16 create-only saves of one key on 4 instances: exactly one creates it."""
        ns = _namespace()
        winners: list[Any] = []
        conflicts: list[int] = []
        async with _instances(checkpoint_store, checkpoint_store_factory) as stores:

            async def creator(index: int) -> None:
                store: CheckpointStore = stores[index % len(stores)]
                try:
                    record = await store.save(
                        ns, "race", {"writer": index}, version=1, expected_version=0
                    )
                except CheckpointConflictError:
                    conflicts.append(index)
                else:
                    winners.append(record.value)

            async with anyio.create_task_group() as tg:
                for index in range(WRITERS):
                    tg.start_soon(creator, index)
            assert len(winners) == 1, f"{len(winners)} writers created one key"
            assert len(conflicts) == WRITERS - 1
            stored = await stores[-1].load(ns, "race")
            assert stored is not None
            assert stored.value == winners[0]

    @pytest.mark.anyio
    async def test_cross_instance_fencing_keeps_the_highest_token(
        self,
        checkpoint_store: CheckpointStore,
        checkpoint_store_factory: CheckpointStoreFactory,
    ) -> None:
        """On two keys, holders of tokens 2 to 17 race on 4 instances: token 17 survives.

        Each saves ``version == token`` with no expected version, so a save succeeds exactly
        when no higher token was stored before it. Token 17 starts second on one key and
        second to last on the other, so it is among the first concurrent writers of a key
        whichever way round the scheduler starts them, and a lower token written after it
        by another instance shows.
        """
        ns = _namespace()
        top = WRITERS + 1
        first = [top - 1, top, *range(top - 2, 1, -1)]
        orders = {"fenced-a": first, "fenced-b": first[::-1]}
        for key in orders:
            await checkpoint_store.save(ns, key, {"token": 1}, version=1, fencing_token=1)
        outcomes: dict[str, list[int]] = {key: [] for key in orders}
        holders = [(key, token) for key, tokens in orders.items() for token in tokens]
        async with _instances(checkpoint_store, checkpoint_store_factory) as stores:

            async def holder(store: CheckpointStore, key: str, token: int) -> None:
                try:
                    await store.save(ns, key, {"token": token}, version=token, fencing_token=token)
                except CheckpointConflictError:
                    outcomes[key].append(-token)
                else:
                    outcomes[key].append(token)

            async with anyio.create_task_group() as tg:
                for index, (key, token) in enumerate(holders):
                    tg.start_soon(holder, stores[index % len(stores)], key, token)
            for key in orders:
                assert top in outcomes[key]
                assert len(outcomes[key]) == WRITERS
                for store in stores:
                    stored = await store.load(ns, key)
                    assert stored is not None
                    assert (stored.fencing_token, stored.version, stored.value) == (
                        top,
                        top,
                        {"token": top},
                    ), f"a lower token overwrote token {top}: {stored.value}"


class SessionRaces:
    """Guarded session appends racing across instances."""

    @pytest.fixture
    def session_store_factory(self) -> SessionStoreFactory:
        """Opens another instance on the backend of ``session_store``; subclasses define it."""
        _missing_factory("session")

    @pytest.mark.anyio
    async def test_cross_instance_guarded_appends_have_one_winner(
        self, session_store: SessionStore, session_store_factory: SessionStoreFactory
    ) -> None:
        """16 appends on 4 instances racing on one expected head: one lands, 15 conflict."""
        sid = f"session-conformance-{uuid.uuid4().hex}"
        root = await session_store.append(
            create_session_entry(session_id=sid, kind="message", message=Message.user("root"))
        )
        winners: list[SessionEntry] = []
        conflicts: list[int] = []
        async with _instances(session_store, session_store_factory) as stores:

            async def writer(index: int) -> None:
                store: SessionStore = stores[index % len(stores)]
                entry = create_session_entry(
                    session_id=sid,
                    kind="message",
                    parent_id=root.id,
                    message=Message.user(f"writer {index}"),
                )
                try:
                    winners.append(await store.append(entry, expected_leaf_id=root.id))
                except SessionConflictError:
                    conflicts.append(index)

            async with anyio.create_task_group() as tg:
                for index in range(WRITERS):
                    tg.start_soon(writer, index)
            assert len(winners) == 1, f"{len(winners)} appends landed on one head"
            assert len(conflicts) == WRITERS - 1
            for store in stores:
                assert await store.list(sid) == [root, winners[0]]
