"""Restore hooks: put external state back, all or nothing, before a resume claims."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs

from .._threads import call_host
from ..errors import CheckpointRestoreError
from ._checkpoints import CheckpointRecord

__all__ = ("CheckpointRestoreContext", "hook_name", "run_restore_hooks")

logger = logging.getLogger(__package__ or __name__)


@attrs.frozen(kw_only=True)
class CheckpointRestoreContext:
    """What a restore hook sees: the run, the checkpoint version and status, the redacted
    sidecar ``metadata`` and the raw ``checkpoint`` record."""

    run_id: str
    session_id: str
    version: int
    status: str
    metadata: Mapping[str, str] | None
    checkpoint: CheckpointRecord


def hook_name(hook: Any) -> str:
    """A function hook's ``__name__``, an object hook's ``id``."""
    if callable(getattr(hook, "restore", None)):
        return str(getattr(hook, "id", None) or type(hook).__name__)
    return str(getattr(hook, "__name__", None) or type(hook).__name__)


def check_hooks(hooks: Sequence[Any]) -> tuple[Any, ...]:
    """Each hook must be callable or have ``restore``; raise ``TypeError`` otherwise."""
    for hook in hooks:
        if not callable(hook) and not callable(getattr(hook, "restore", None)):
            raise TypeError(f"restore hook {hook!r} is neither callable nor has restore()")
    return tuple(hooks)


async def _call(
    function: Any, context: CheckpointRestoreContext, limiter: anyio.CapacityLimiter | None
) -> None:
    # A synchronous hook runs in a worker thread so its timeout can stop the wait for it.
    await call_host(function, context, limiter=limiter)


async def _compensate(
    hooks: Sequence[Any],
    context: CheckpointRestoreContext,
    limiter: anyio.CapacityLimiter | None = None,
) -> tuple[tuple[str, BaseException], ...]:
    failures: list[tuple[str, BaseException]] = []
    for hook in hooks:
        compensate = getattr(hook, "compensate", None)
        if not callable(compensate):
            continue
        try:
            await _call(compensate, context, limiter)
        except Exception as exc:
            # Recorded on the restore error; the restore failure stays the one raised.
            logger.warning(
                "compensation of restore hook %s for run %s raised %s",
                hook_name(hook),
                context.run_id,
                type(exc).__name__,
            )
            failures.append((hook_name(hook), exc))
    return tuple(failures)


async def compensate_all(
    hooks: Sequence[Any],
    context: CheckpointRestoreContext,
    *,
    limiter: anyio.CapacityLimiter | None = None,
) -> tuple[tuple[str, BaseException], ...]:
    """Compensate every hook, last first (after a claim lost its race), returning failures."""
    return await _compensate(list(reversed(hooks)), context, limiter)


async def run_restore_hooks(
    hooks: Sequence[Any],
    context: CheckpointRestoreContext,
    timeout_ms: float,
    *,
    limiter: anyio.CapacityLimiter | None = None,
) -> dict[str, Any] | None:
    """Run ``hooks`` in order, each under its own ``timeout_ms``. A synchronous hook runs in a
    worker thread under ``limiter`` (``None``: anyio's default limiter), so its timeout ends
    the wait for it (the thread itself cannot be stopped; its result is discarded).

    The first hook that raises or overruns aborts with :class:`CheckpointRestoreError`;
    completed object hooks (and the failing one) are compensated in reverse order. Returns the
    audit ``{"hooks": [{"hook", "duration_ms"}], "duration_ms"}``, or ``None`` without hooks.
    """
    if not hooks:
        return None
    started = anyio.current_time()
    audit: list[dict[str, Any]] = []
    done: list[Any] = []
    for hook in hooks:
        name = hook_name(hook)
        restore = hook.restore if callable(getattr(hook, "restore", None)) else hook
        begun = anyio.current_time()
        error: CheckpointRestoreError | None = None
        try:
            with anyio.fail_after(timeout_ms / 1000):
                await _call(restore, context, limiter)
        except TimeoutError as exc:
            error = CheckpointRestoreError(
                f"Checkpoint restore hook {name} timed out after {timeout_ms:g}ms", hook=name
            )
            error.__cause__ = exc
        except Exception as exc:
            error = CheckpointRestoreError(
                f"Checkpoint restore hook {name} failed: {exc}", hook=name
            )
            error.__cause__ = exc
        if error is not None:
            logger.warning(
                "restore hook %s for run %s failed (%s); nothing is claimed",
                name,
                context.run_id,
                type(error.__cause__).__name__,
            )
            error.compensation_errors = await _compensate([hook, *reversed(done)], context, limiter)
            raise error
        logger.debug("restore hook %s for run %s done", name, context.run_id)
        done.append(hook)
        audit.append({"hook": name, "duration_ms": (anyio.current_time() - begun) * 1000})
    return {"hooks": audit, "duration_ms": (anyio.current_time() - started) * 1000}
