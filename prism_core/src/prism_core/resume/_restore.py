"""Restore hooks: put external state back, all or nothing, before a resume claims.

It must not claim or write a checkpoint: the claim follows it in ``_resume``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs

from .._echo import echo
from .._threads import call_host
from ..durable._checkpoints import CheckpointRecord
from ..errors import CheckpointRestoreError
from ..redaction import Redactor, redact_value
from ._signal import check_signal, signal_scope

__all__ = (
    "MAX_COMPENSATION_REASON_BYTES",
    "CheckpointRestoreContext",
    "Compensation",
    "hook_name",
    "run_restore_hooks",
)

#: A failed compensation's reason is redacted, then cut to this many UTF-8 bytes.
MAX_COMPENSATION_REASON_BYTES = 1024

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


def hook_name(hook: Any, index: int | None = None) -> str:
    """A function hook's ``__name__``, an object hook's ``id``; a hook without a usable name
    (a lambda, a partial, an object without ``id``) is ``hook[index]``, its position."""
    if callable(getattr(hook, "restore", None)):
        name = getattr(hook, "id", None)
    else:
        name = getattr(hook, "__name__", None)
    if isinstance(name, str) and name and not name.startswith("<"):
        return name
    return f"hook[{index}]" if index is not None else type(hook).__name__


def check_hooks(hooks: Sequence[Any]) -> tuple[Any, ...]:
    """Each hook must be callable or have ``restore``; raise ``TypeError`` otherwise."""
    for hook in hooks:
        if not callable(hook) and not callable(getattr(hook, "restore", None)):
            raise TypeError(f"restore hook {echo(hook)} is neither callable nor has restore()")
    return tuple(hooks)


async def _call(
    function: Any, context: CheckpointRestoreContext, limiter: anyio.CapacityLimiter | None
) -> None:
    # A synchronous hook runs in a worker thread so its timeout can stop the wait for it.
    await call_host(function, context, limiter=limiter)


@attrs.define
class Compensation:
    """What a compensation pass did: the hooks it undid, most recent first, and the one whose
    compensation raised (the pass stops there), with its redacted, bounded reason."""

    ran: list[str] = attrs.field(factory=list)
    failed: dict[str, str] | None = None
    attempted: bool = False
    errors: list[tuple[str, BaseException]] = attrs.field(factory=list)

    def audit(self) -> dict[str, Any] | None:
        """``{"ran": [...], "failed"?: {"hook", "reason"}}``, or ``None`` when nothing ran."""
        if not self.attempted:
            return None
        audit: dict[str, Any] = {"ran": list(self.ran)}
        if self.failed is not None:
            audit["failed"] = dict(self.failed)
        return audit


def _bounded_reason(exc: BaseException, redactor: Redactor | None) -> str:
    text = redact_value(str(exc) or type(exc).__name__, redactor)
    data = text.encode("utf-8")
    if len(data) <= MAX_COMPENSATION_REASON_BYTES:
        return text
    return data[:MAX_COMPENSATION_REASON_BYTES].decode("utf-8", errors="ignore")


async def _compensate(
    hooks: Sequence[tuple[int, Any]],
    context: CheckpointRestoreContext,
    limiter: anyio.CapacityLimiter | None = None,
    *,
    signal: Any = None,
    redactor: Redactor | None = None,
) -> Compensation:
    outcome = Compensation()
    for index, hook in hooks:
        compensate = getattr(hook, "compensate", None)
        if not callable(compensate):
            continue
        if signal is not None and signal.aborted:
            # The caller's abort stops compensation between hooks, never inside one.
            break
        name = hook_name(hook, index)
        outcome.attempted = True
        try:
            await _call(compensate, context, limiter)
        except Exception as exc:
            # Recorded on the restore error; the restore failure stays the one raised.
            logger.warning(
                "compensation of restore hook %s for run %s raised %s; compensation stops",
                name,
                context.run_id,
                type(exc).__name__,
            )
            outcome.failed = {"hook": name, "reason": _bounded_reason(exc, redactor)}
            outcome.errors.append((name, exc))
            break
        outcome.ran.append(name)
    return outcome


async def compensate_all(
    hooks: Sequence[Any],
    context: CheckpointRestoreContext,
    *,
    limiter: anyio.CapacityLimiter | None = None,
    redactor: Redactor | None = None,
) -> Compensation:
    """Compensate every hook, last first (after a claim lost its race)."""
    return await _compensate(
        list(reversed(list(enumerate(hooks)))), context, limiter, redactor=redactor
    )


async def run_restore_hooks(
    hooks: Sequence[Any],
    context: CheckpointRestoreContext,
    timeout_ms: float,
    *,
    limiter: anyio.CapacityLimiter | None = None,
    signal: Any = None,
    redactor: Redactor | None = None,
) -> dict[str, Any] | None:
    """Run ``hooks`` in order, each under its own ``timeout_ms``. A synchronous hook runs in a
    worker thread under ``limiter`` (``None``: anyio's default limiter), so its timeout ends
    the wait for it (the thread itself cannot be stopped; its result is discarded).

    The first hook that raises or overruns aborts with :class:`CheckpointRestoreError`;
    completed object hooks (and the failing one) are compensated in reverse order until one
    compensation raises; ``error.compensation`` records that pass. ``signal`` (the caller's
    abort) stops the pass: before a hook, or by cancelling the hook in flight, it raises
    :class:`ResumeAbortedError` and skips compensation; during compensation it stops it between
    hooks. Returns the audit ``{"hooks": [{"hook", "duration_ms"}], "duration_ms"}``, or
    ``None`` without hooks.
    """
    if not hooks:
        return None
    started = anyio.current_time()
    audit: list[dict[str, Any]] = []
    done: list[tuple[int, Any]] = []
    for index, hook in enumerate(hooks):
        name = hook_name(hook, index)
        restore = hook.restore if callable(getattr(hook, "restore", None)) else hook
        begun = anyio.current_time()
        error: CheckpointRestoreError | None = None
        check_signal(signal, f"restore hook {name}")
        try:
            with signal_scope(signal), anyio.fail_after(timeout_ms / 1000):
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
        check_signal(signal, f"restore hook {name} completed")
        if error is not None:
            logger.warning(
                "restore hook %s for run %s failed (%s); nothing is claimed",
                name,
                context.run_id,
                type(error.__cause__).__name__,
            )
            outcome = await _compensate(
                [(index, hook), *reversed(done)],
                context,
                limiter,
                signal=signal,
                redactor=redactor,
            )
            error.compensation = outcome.audit()
            error.compensation_errors = tuple(outcome.errors)
            raise error
        logger.debug("restore hook %s for run %s done", name, context.run_id)
        done.append((index, hook))
        audit.append({"hook": name, "duration_ms": (anyio.current_time() - begun) * 1000})
    return {"hooks": audit, "duration_ms": (anyio.current_time() - started) * 1000}
