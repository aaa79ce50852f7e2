"""Transient store faults: bounded, jittered retries of the durable layer's store calls.

A store marks a connection-level failure (a dropped or refused connection, a statement or
command timeout, a failover) by raising :class:`~prism_core.CheckpointStoreUnavailableError`.
The durable layer retries such a call up to ``RETRY_ATTEMPTS`` times in all, sleeping a
full-jitter exponential backoff (``RETRY_BASE_S * 2**attempt``, at most ``RETRY_CAP_S``)
between attempts, and never past the run's deadline: each attempt is bounded by what is left
of the run's wall time. Every other error is final at once. When
the store stays unreachable the last :class:`CheckpointStoreUnavailableError` propagates: the
run stops with it and its record stays as last written (``running``), continuable later.

It must not decide what is written: it only repeats the store call it is given.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ._checkpoints import CheckpointStoreUnavailableError

__all__ = (
    "RETRY_ATTEMPTS",
    "RETRY_BASE_S",
    "RETRY_CAP_S",
    "backoff_delay",
    "bounded",
    "retry_transient",
)

T = TypeVar("T")

RETRY_ATTEMPTS = 5
RETRY_BASE_S = 0.05
RETRY_CAP_S = 1.0

_random = random.SystemRandom()


def backoff_delay(attempt: int) -> float:
    """The sleep before retry number ``attempt`` (0-based): full jitter, capped."""
    return _random.uniform(0, min(RETRY_CAP_S, RETRY_BASE_S * (2**attempt)))


async def bounded(call: Callable[[], Awaitable[T]], deadline: float | None) -> T:
    """``await call()``, abandoned with :class:`CheckpointStoreUnavailableError` once
    ``deadline`` (on the event loop's clock, the run's wall-time deadline) has passed: every
    store call of a run is bounded by what is left of its wall time, and none starts after it
    (the run loop stops a durable run's work early enough for its terminal write)."""
    if deadline is None:
        return await call()
    remaining = deadline - anyio.current_time()
    if remaining <= 0:
        raise CheckpointStoreUnavailableError(
            "the run's wall time is spent: no checkpoint store call starts after it"
        )
    try:
        with anyio.fail_after(remaining):
            return await call()
    except TimeoutError as exc:
        raise CheckpointStoreUnavailableError(
            "the checkpoint store did not answer before the run's deadline"
        ) from exc


async def retry_transient(
    call: Callable[[], Awaitable[T]],
    *,
    deadline: float | None = None,
    attempts: int = RETRY_ATTEMPTS,
) -> T:
    """``await call()``, retried on :class:`CheckpointStoreUnavailableError` (see the module
    docstring); each attempt is bounded by ``deadline``."""
    for attempt in range(attempts):
        try:
            return await bounded(call, deadline)
        except CheckpointStoreUnavailableError:
            if attempt == attempts - 1:
                raise
            delay = backoff_delay(attempt)
            if deadline is not None and anyio.current_time() + delay >= deadline:
                raise
        await anyio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
