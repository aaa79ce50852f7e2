"""Cancelling a resume: the caller's abort signal, checked before each preparation step.

A resume takes an optional :class:`~prism_core.signals.AbortSignal`. Before the claim, an
aborted signal stops the pipeline at the next step with its reason when that is an exception
(raised as it is), else :class:`ResumeAbortedError`: nothing is claimed, nothing is written, no
tool runs. A restore hook in flight is cancelled. After the
claim the signal is bridged into the resumed execution, which then aborts like a live run
(``session.abort``): the step in flight is cancelled and the run ends ``aborted``.

It must not write: it only checks and bridges the signal.
"""

from __future__ import annotations

from typing import Any, Protocol

import anyio

from ..errors import PrismError

__all__ = (
    "AbortableRun",
    "ResumeAbortedError",
    "abort_error",
    "bridge_signal",
    "check_signal",
    "coerce_signal",
)


class ResumeAbortedError(PrismError):
    """The caller aborted a resume before it claimed the run: nothing was claimed or run."""

    code = "ERR_PRISM_ABORTED"


class AbortableRun(Protocol):
    """What bridging a signal needs of the resumed execution."""

    @property
    def signal(self) -> Any:
        """The run's own abort signal."""
        ...

    @property
    def step_scope(self) -> anyio.CancelScope | None:
        """The cancel scope of the step in flight."""
        ...


def coerce_signal(signal: Any) -> Any:
    """``signal`` when it is ``None`` or an abort signal (``aborted``, ``reason``,
    ``on_abort``); raise ``TypeError`` otherwise."""
    if signal is None:
        return None
    if not hasattr(signal, "aborted") or not callable(getattr(signal, "on_abort", None)):
        raise TypeError("signal must be an AbortSignal (aborted, reason, on_abort)")
    return signal


def abort_error(signal: Any, step: str, *, during: bool = False) -> BaseException:
    """What a caller's abort raises: its reason when that is an exception (a host that aborts
    with its own error gets that error back, as from an aborted live run), else
    :class:`ResumeAbortedError` naming the reason and the step (before it, or ``during``)."""
    reason = getattr(signal, "reason", None)
    if isinstance(reason, Exception):
        return reason
    when = "during" if during else "before"
    return ResumeAbortedError(f"Resume aborted {when} {step}: {reason}; nothing was claimed")


def check_signal(signal: Any, step: str) -> None:
    """Raise :func:`abort_error` when ``signal`` has fired (before ``step``)."""
    if signal is not None and signal.aborted:
        raise abort_error(signal, step)


def bridge_signal(signal: Any, execution: AbortableRun) -> None:
    """Abort the claimed, resumed execution when ``signal`` fires (at once if it has)."""
    if signal is None:
        return

    def abort(reason: Any) -> None:
        execution.signal.abort(reason)
        scope = execution.step_scope
        if scope is not None:
            scope.cancel()

    signal.on_abort(abort)
