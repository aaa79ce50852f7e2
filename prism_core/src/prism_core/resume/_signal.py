"""Cancelling a resume: the caller's abort signal, checked before each preparation step.

A resume takes an optional :class:`~prism_core.signals.AbortSignal`. Before the claim, an
aborted signal stops the pipeline at the next step with :class:`ResumeAbortedError`: nothing is
claimed, nothing is written, no tool runs. A restore hook in flight is cancelled. After the
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


def check_signal(signal: Any, step: str) -> None:
    """Raise :class:`ResumeAbortedError` when ``signal`` has fired (before ``step``)."""
    if signal is not None and signal.aborted:
        raise ResumeAbortedError(
            f"Resume aborted before {step}: {getattr(signal, 'reason', None)}; nothing was claimed"
        )


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
