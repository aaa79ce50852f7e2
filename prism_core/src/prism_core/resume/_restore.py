"""Restore hooks: put external state back, all or nothing, before a resume claims.

Each hook direction (``restore``, ``compensate``) runs under the per-hook timeout with a
context of its own whose ``signal`` fires on the caller's abort or on that timeout, so a hook
talking to a remote system can stop instead of dangling. A hook is named by its ``id``, else
its restore function's ``__name__``, else ``hook[i]`` (its position).

It must not claim or write a checkpoint: the claim follows it in ``_pipeline``.
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
from ..signals import AbortSignal
from ._signal import abort_error, check_signal

__all__ = (
    "MAX_COMPENSATION_REASON_BYTES",
    "CheckpointRestoreContext",
    "Compensation",
    "compensate_all",
    "hook_name",
    "run_restore_hooks",
)

#: A failed compensation's reason is redacted, then cut to this many UTF-8 bytes.
MAX_COMPENSATION_REASON_BYTES = 1024

logger = logging.getLogger(__package__ or __name__)


@attrs.frozen(kw_only=True)
class CheckpointRestoreContext:
    """What a restore hook sees: the run, the checkpoint version and status, the redacted
    sidecar ``metadata``, the raw ``checkpoint`` record, and ``signal``, fired when the caller
    aborts the resume or the hook overruns its timeout (each call gets a signal of its own)."""

    run_id: str
    session_id: str
    version: int
    status: str
    metadata: Mapping[str, str] | None
    checkpoint: CheckpointRecord
    signal: AbortSignal = attrs.field(factory=AbortSignal, eq=False, repr=False)


def _usable(name: Any) -> bool:
    return isinstance(name, str) and bool(name) and not name.startswith("<")


def hook_name(hook: Any, index: int | None = None) -> str:
    """A hook's ``id``, else its restore function's ``__name__`` (a lambda has none that
    names anything), else ``hook[index]``, its position."""
    restore = getattr(hook, "restore", None)
    if callable(restore):
        name = getattr(hook, "id", None)
        if not _usable(name):
            name = getattr(restore, "__name__", None)
    else:
        name = getattr(hook, "__name__", None)
    if _usable(name):
        return str(name)
    return f"hook[{index}]" if index is not None else type(hook).__name__


def check_hooks(hooks: Sequence[Any]) -> tuple[Any, ...]:
    """Each hook must be callable or have ``restore``; raise ``TypeError`` otherwise."""
    for hook in hooks:
        if not callable(hook) and not callable(getattr(hook, "restore", None)):
            raise TypeError(f"restore hook {echo(hook)} is neither callable nor has restore()")
    return tuple(hooks)


def _ms(timeout_ms: float) -> str:
    value = float(timeout_ms)
    return str(int(value)) if value.is_integer() else f"{value:g}"


@attrs.define
class _Outcome:
    """How one hook call ended: ``error`` (what it raised, or a timeout), ``aborted`` (the
    caller's abort ended it)."""

    error: BaseException | None = None
    timed_out: bool = False
    aborted: bool = False
    duration_ms: float = 0.0


async def _invoke(
    function: Any,
    context: CheckpointRestoreContext,
    timeout_ms: float,
    *,
    caller: Any,
    limiter: anyio.CapacityLimiter | None,
    cancel_on_abort: bool,
) -> _Outcome:
    """``function(context)`` with a signal of its own, under ``timeout_ms``.

    The timeout fires the signal and cancels the call; the caller's abort fires the signal and,
    when ``cancel_on_abort``, cancels the call too (a sync hook's thread is abandoned, its
    result discarded)."""
    signal = AbortSignal()
    own = attrs.evolve(context, signal=signal)
    outcome = _Outcome()
    begun = anyio.current_time()
    async with anyio.create_task_group() as group:

        def on_caller_abort(reason: Any) -> None:
            outcome.aborted = True
            signal.abort(reason)
            if cancel_on_abort:
                group.cancel_scope.cancel()

        async def watchdog() -> None:
            await anyio.sleep(timeout_ms / 1000)
            outcome.timed_out = True
            signal.abort(f"timed out after {_ms(timeout_ms)}ms")
            group.cancel_scope.cancel()

        group.start_soon(watchdog)
        if caller is not None:
            caller.on_abort(on_caller_abort)
        try:
            await call_host(function, own, limiter=limiter)
        except Exception as exc:
            outcome.error = exc
        finally:
            group.cancel_scope.cancel()
    outcome.duration_ms = (anyio.current_time() - begun) * 1000
    if outcome.timed_out and outcome.error is None:
        outcome.error = TimeoutError(f"timed out after {_ms(timeout_ms)}ms")
    return outcome


@attrs.define
class Compensation:
    """What a compensation pass did: every hook whose ``compensate`` was attempted, the most
    recently applied layer first (the pass goes on after a failure), and the first that
    failed, with its redacted, bounded reason."""

    ran: list[str] = attrs.field(factory=list)
    failed: dict[str, str] | None = None
    errors: list[tuple[str, BaseException]] = attrs.field(factory=list)

    def audit(self) -> dict[str, Any] | None:
        """``{"ran": [...], "failed"?: {"hook", "reason"}}``, or ``None`` when none ran."""
        if not self.ran:
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
    timeout_ms: float,
    *,
    limiter: anyio.CapacityLimiter | None = None,
    signal: Any = None,
    redactor: Redactor | None = None,
) -> Compensation:
    """Undo ``hooks`` in the order given, each under the per-hook timeout, best effort: a
    failing compensation is recorded and the pass goes on. The caller's abort fires the
    running compensation's signal (it is never cancelled mid-call) and then raises, before the
    next hook (see :func:`abort_error`)."""
    outcome = Compensation()
    for index, hook in hooks:
        compensate = getattr(hook, "compensate", None)
        if not callable(compensate):
            continue
        name = hook_name(hook, index)
        if signal is not None and signal.aborted:
            raise abort_error(signal, f"the compensation of restore hook {name}", during=True)
        result = await _invoke(
            compensate,
            context,
            timeout_ms,
            caller=signal,
            limiter=limiter,
            cancel_on_abort=False,
        )
        if signal is not None and signal.aborted:
            raise abort_error(signal, f"the compensation of restore hook {name}", during=True)
        outcome.ran.append(name)
        if result.error is None:
            continue
        error = result.error
        if result.timed_out:
            error = TimeoutError(
                f"Restore hook {name} compensate timed out after {_ms(timeout_ms)}ms"
            )
        logger.warning(
            "compensation of restore hook %s for run %s raised %s; compensation goes on",
            name,
            context.run_id,
            type(error).__name__,
        )
        if outcome.failed is None:
            outcome.failed = {"hook": name, "reason": _bounded_reason(error, redactor)}
        outcome.errors.append((name, error))
    return outcome


async def compensate_all(
    hooks: Sequence[Any],
    context: CheckpointRestoreContext,
    timeout_ms: float,
    *,
    limiter: anyio.CapacityLimiter | None = None,
    redactor: Redactor | None = None,
) -> Compensation:
    """Compensate every hook, last first (after a claim lost its race)."""
    return await _compensate(
        list(reversed(list(enumerate(hooks)))),
        context,
        timeout_ms,
        limiter=limiter,
        redactor=redactor,
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

    The first hook that raises or overruns aborts with :class:`CheckpointRestoreError`; every
    applied object hook, the failing one first, is then compensated in reverse order (best
    effort; ``error.compensation`` records the pass). ``signal`` (the caller's abort): before a
    hook it raises :func:`~._signal.abort_error` (the reason when that is an exception, else
    ``ResumeAbortedError``); during a hook it cancels that hook, which then
    fails the resume with :class:`CheckpointRestoreError` and no compensation. Returns the
    audit ``{"hooks": [{"hook", "duration_ms"}], "duration_ms"}``, or ``None`` without hooks.
    """
    if not hooks:
        return None
    started = anyio.current_time()
    audit: list[dict[str, Any]] = []
    done: list[tuple[int, Any]] = []
    for index, hook in enumerate(hooks):
        name = hook_name(hook, index)
        restore = hook.restore if callable(getattr(hook, "restore", None)) else hook
        check_signal(signal, f"restore hook {name}")
        outcome = await _invoke(
            restore, context, timeout_ms, caller=signal, limiter=limiter, cancel_on_abort=True
        )
        aborted = outcome.aborted or (signal is not None and signal.aborted)
        if outcome.error is None and not aborted:
            logger.debug("restore hook %s for run %s done", name, context.run_id)
            done.append((index, hook))
            audit.append({"hook": name, "duration_ms": outcome.duration_ms})
            continue
        if aborted:
            reason = getattr(signal, "reason", None)
            error = CheckpointRestoreError(
                f"Checkpoint restore hook {name} was aborted: {reason}", hook=name
            )
            error.__cause__ = outcome.error or abort_error(
                signal, f"restore hook {name}", during=True
            )
        elif outcome.timed_out:
            error = CheckpointRestoreError(
                f"Checkpoint restore hook {name} timed out after {_ms(timeout_ms)}ms", hook=name
            )
            error.__cause__ = outcome.error
        else:
            error = CheckpointRestoreError(
                f"Checkpoint restore hook {name} failed: {outcome.error}", hook=name
            )
            error.__cause__ = outcome.error
        logger.warning(
            "restore hook %s for run %s failed (%s); nothing is claimed",
            name,
            context.run_id,
            type(error.__cause__).__name__,
        )
        if not aborted:
            # Never run host compensation code once the caller has aborted.
            compensation = await _compensate(
                [(index, hook), *reversed(done)],
                context,
                timeout_ms,
                limiter=limiter,
                signal=signal,
                redactor=redactor,
            )
            error.compensation = compensation.audit()
            error.compensation_errors = tuple(compensation.errors)
        raise error
    return {"hooks": audit, "duration_ms": (anyio.current_time() - started) * 1000}
