"""The conformance suite of the optional run wake-ups (:class:`~prism_core.stores.RunWakeups`).

No test times anything: "is woken" is a ``wait`` given a generous deadline
(:data:`DEADLINE_S`) that returns ``True``, "is not woken" a short ``wait`` that returns
``False``, always beside a watch that shows the notification was sent and delivered.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import anyio
import pytest

from ..durable._wakeups import RunWakeups, RunWatch

__all__ = ("RunWakeupsConformance",)

#: How long a test waits for a wake-up that must come (generous: a loaded machine).
DEADLINE_S = 60.0
#: How long a test waits to see that a wake-up does not come.
QUIET_S = 0.5
#: Notifications sent back to back in the coalescing test.
BURST = 20

OpenWatches = Callable[[], Awaitable[int]]


def _missing(name: str, what: str) -> NoReturn:
    pytest.fail(
        f"define a {name} fixture in your RunWakeupsConformance subclass: {what}",
        pytrace=False,
    )


@contextlib.asynccontextmanager
async def _other(first: Any, factory: Callable[[], Any]) -> AsyncIterator[Any]:
    """Another instance from ``factory``, closed at the end unless it is ``first``."""
    store = factory()
    try:
        yield store
    finally:
        if store is not first:
            await store.aclose()


async def _until(condition: Callable[[], Awaitable[bool]]) -> None:
    with anyio.fail_after(DEADLINE_S):
        while True:
            if await condition():
                return
            await anyio.sleep(0.02)


async def _woken(watch: RunWatch) -> bool:
    return await watch.wait(DEADLINE_S)


class RunWakeupsConformance:
    """The behaviour of a checkpoint store that implements
    :class:`~prism_core.stores.RunWakeups` (see ``prism_core.durable._wakeups``).

    Subclass it with four fixtures:

    - ``wakeup_store``: a fresh, open store (on a database and prefix no other test notifies);
    - ``wakeup_store_factory``: a callable opening another, independent instance on the same
      database and prefix, as a second process would (the memory store returns
      ``wakeup_store`` itself); the kit closes what it opens;
    - ``foreign_wakeup_store_factory``: a callable opening a store on the same server or
      file under another prefix (or, for the memory store, another store);
    - ``open_watches``: an async callable counting the watches open on ``wakeup_store``'s
      database and prefix, as seen from outside the store objects (listening sessions,
      subscribers, socket files), so the suite can check that leaving a watch releases it.
    """

    @pytest.fixture
    def wakeup_store_factory(self) -> Callable[[], Any]:
        """Another instance on the same database and prefix (define it)."""
        _missing(
            "wakeup_store_factory",
            "a zero-argument callable returning another instance on the same database and "
            "prefix as wakeup_store (the memory store returns wakeup_store itself)",
        )

    @pytest.fixture
    def foreign_wakeup_store_factory(self) -> Callable[[], Any]:
        """A store under another prefix (define it)."""
        _missing(
            "foreign_wakeup_store_factory",
            "a zero-argument callable returning a store on the same server or file under "
            "another prefix (the memory store returns a new memory store)",
        )

    @pytest.fixture
    def open_watches(self) -> OpenWatches:
        """A counter of the open watches (define it)."""
        _missing(
            "open_watches",
            "an async callable returning how many watches are open on wakeup_store's "
            "database and prefix, counted outside the store objects",
        )

    @pytest.mark.anyio
    async def test_store_declares_the_capability(self, wakeup_store: Any) -> None:
        """Workers discover the capability with ``isinstance``."""
        assert isinstance(wakeup_store, RunWakeups)

    @pytest.mark.anyio
    async def test_a_notify_on_another_instance_wakes_a_watch(
        self, wakeup_store: Any, wakeup_store_factory: Callable[[], Any]
    ) -> None:
        """A notification sent through another instance on the same database and prefix (as
        another process would send it) wakes a watch, again for each later notification."""
        async with (
            _other(wakeup_store, wakeup_store_factory) as other,
            wakeup_store.watch_runs() as watch,
        ):
            await other.notify_runs()
            assert await _woken(watch)
            await other.notify_runs()
            assert await _woken(watch)
            await wakeup_store.notify_runs()
            assert await _woken(watch)

    @pytest.mark.anyio
    async def test_one_notify_wakes_every_open_watch(
        self, wakeup_store: Any, wakeup_store_factory: Callable[[], Any]
    ) -> None:
        """Every watch open on the database and prefix is woken, on either instance."""
        async with (
            _other(wakeup_store, wakeup_store_factory) as other,
            wakeup_store.watch_runs() as first,
            wakeup_store.watch_runs() as second,
            other.watch_runs() as third,
        ):
            await wakeup_store.notify_runs()
            for watch in (first, second, third):
                assert await _woken(watch)

    @pytest.mark.anyio
    async def test_notifications_coalesce(
        self, wakeup_store: Any, wakeup_store_factory: Callable[[], Any]
    ) -> None:
        """Notifications sent before a wait wake it once, not once each: a burst of
        :data:`BURST` gives fewer wake-ups than notifications (one, when all of them arrived
        before the first wait), and the watch then goes quiet."""
        async with (
            _other(wakeup_store, wakeup_store_factory) as other,
            wakeup_store.watch_runs() as watch,
        ):
            for _ in range(BURST):
                await other.notify_runs()
            assert await _woken(watch)
            wakeups = 1
            while await watch.wait(QUIET_S * 2):
                wakeups += 1
                assert wakeups < BURST
            assert await watch.wait(QUIET_S) is False

    @pytest.mark.anyio
    async def test_a_wait_without_a_notify_returns_false(self, wakeup_store: Any) -> None:
        """``wait`` returns ``False`` once its time has passed without a notification
        (``0``: at once)."""
        async with wakeup_store.watch_runs() as watch:
            assert await watch.wait(QUIET_S) is False
            assert await watch.wait(0) is False

    @pytest.mark.anyio
    async def test_a_watch_opened_after_a_notify_does_not_see_it(
        self, wakeup_store: Any, wakeup_store_factory: Callable[[], Any]
    ) -> None:
        """A notification reaches the watches open when it is sent, not later ones."""
        async with (
            _other(wakeup_store, wakeup_store_factory) as other,
            wakeup_store.watch_runs() as early,
        ):
            await other.notify_runs()
            assert await _woken(early)
            async with wakeup_store.watch_runs() as late:
                assert await late.wait(QUIET_S) is False
                await other.notify_runs()
                assert await _woken(late)

    @pytest.mark.anyio
    async def test_a_watch_on_another_prefix_is_not_woken(
        self,
        wakeup_store: Any,
        foreign_wakeup_store_factory: Callable[[], Any],
    ) -> None:
        """A notification on one prefix leaves the watches of another alone, and the other
        way round."""
        async with (
            _other(wakeup_store, foreign_wakeup_store_factory) as foreign,
            wakeup_store.watch_runs() as mine,
            foreign.watch_runs() as theirs,
        ):
            await wakeup_store.notify_runs()
            assert await _woken(mine)
            assert await theirs.wait(QUIET_S) is False
            await foreign.notify_runs()
            assert await _woken(theirs)
            assert await mine.wait(QUIET_S) is False

    @pytest.mark.anyio
    async def test_leaving_a_watch_releases_it(
        self,
        wakeup_store: Any,
        wakeup_store_factory: Callable[[], Any],
        open_watches: OpenWatches,
    ) -> None:
        """An open watch holds its connection (or socket) and leaving it releases that; a
        notification after that is sent without error, to no one."""
        before = await open_watches()
        async with wakeup_store.watch_runs() as watch:

            async def held() -> bool:
                return await open_watches() == before + 1

            await _until(held)
            await wakeup_store.notify_runs()
            assert await _woken(watch)

        async def released() -> bool:
            return await open_watches() == before

        await _until(released)
        async with _other(wakeup_store, wakeup_store_factory) as other:
            await other.notify_runs()
            await wakeup_store.notify_runs()
