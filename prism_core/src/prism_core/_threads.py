"""Calling host callables that may be sync or async without blocking the event loop, and
reaching an event loop from other threads.

A sync callable runs in a worker thread under a :class:`anyio.CapacityLimiter` (``None``
means anyio's default limiter of the running event loop, 40 threads unless the host resizes
it with ``anyio.to_thread.current_default_thread_limiter().total_tokens = n``). A thread cannot
be interrupted: when the caller is cancelled (an abort, a timeout) the wait ends at once, the
thread is abandoned to finish on its own and whatever it returns is discarded.

The other way round, a host thread (a GUI, a signal handler, a sync tool) that aborts a run
must not touch the run's cancel scopes itself: they belong to the loop's thread.
:func:`call_on_loop` runs such a call on the loop, through anyio's event loop token.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import attrs

# anyio imports the module of its asyncio backend on the first call that needs it: in a
# process that starts and continues one run, inside that continue (about 9 ms of a 20 ms cold
# continue on the 2-core development machine). Imported with the kernel, the process pays it
# once at start-up with the rest of its modules instead. Another anyio layout: the first call
# imports it, as before.
with contextlib.suppress(ImportError):
    importlib.import_module("anyio._backends._asyncio")

__all__ = (
    "LoopHandle",
    "call_host",
    "call_on_loop",
    "call_sync",
    "current_loop",
    "is_async_callable",
    "runs_inline",
)

# The kernel's own sync callables (pack rule checks, the load_skill tool) never block, and a
# thread hop costs far more than they do.
_KERNEL_PREFIX = "prism_core."


def _unwrap(function: Any) -> Any:
    while isinstance(function, functools.partial):
        function = function.func
    return function


def is_async_callable(function: Any) -> bool:
    """Whether calling ``function`` returns a coroutine (functions, partials, callable objects)."""
    function = _unwrap(function)
    if inspect.iscoroutinefunction(function):
        return True
    call = getattr(function, "__call__", None)  # noqa: B004
    return call is not None and inspect.iscoroutinefunction(call)


def runs_inline(function: Any) -> bool:
    """Whether ``function`` is called on the event loop: coroutine functions and the kernel's
    own sync callables; every other sync callable runs in a worker thread."""
    if is_async_callable(function):
        return True
    module = getattr(_unwrap(function), "__module__", None)
    return isinstance(module, str) and module.startswith(_KERNEL_PREFIX)


async def call_sync(
    function: Callable[..., Any], *args: Any, limiter: anyio.CapacityLimiter | None = None
) -> Any:
    """``function(*args)`` in a worker thread; abandoned (result discarded) on cancellation."""
    return await anyio.to_thread.run_sync(function, *args, limiter=limiter, abandon_on_cancel=True)


async def call_host(
    function: Callable[..., Any], *args: Any, limiter: anyio.CapacityLimiter | None = None
) -> Any:
    """Call a host callable that may be sync or async and return its awaited result.

    Coroutine functions and the kernel's own callables run on the event loop; anything else
    runs in a worker thread (see :func:`call_sync`), and an awaitable it returns is awaited on
    the event loop.
    """
    if runs_inline(function):
        result = function(*args)
    else:
        result = await call_sync(function, *args, limiter=limiter)
    if inspect.isawaitable(result):
        result = await result
    return result


@attrs.frozen
class LoopHandle:
    """An event loop as other threads reach it: the thread running it and anyio's token."""

    thread: int
    token: anyio.lowlevel.EventLoopToken


def current_loop() -> LoopHandle | None:
    """The running event loop's handle, or ``None`` when called outside an event loop."""
    try:
        token = anyio.lowlevel.current_token()
    except anyio.NoEventLoopError:
        return None
    return LoopHandle(threading.get_ident(), token)


def call_on_loop(loop: LoopHandle | None, function: Callable[..., Any], *args: Any) -> None:
    """``function(*args)`` on ``loop``'s thread: at once when already there (or when ``loop``
    is ``None``), else through the loop, waiting until it has run.

    A loop that has finished has nothing left for ``function`` to act on (its scopes and tasks
    are gone), so the call is then dropped.
    """
    if loop is None or loop.thread == threading.get_ident():
        function(*args)
        return
    try:
        anyio.from_thread.run_sync(function, *args, token=loop.token)
    except anyio.RunFinishedError:
        return
