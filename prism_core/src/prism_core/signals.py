"""Abort signals: what providers, tools and hooks read to learn that a run was aborted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ("AbortSignal",)


class AbortSignal:
    """A one-shot abort flag with a reason. Cancellation itself travels as anyio cancellation."""

    __slots__ = ("_callbacks", "_reason", "aborted")

    def __init__(self) -> None:
        self.aborted = False
        self._reason: Any = None
        self._callbacks: list[Callable[[Any], None]] = []

    @property
    def reason(self) -> Any:
        """Why the signal fired (``None`` until it does)."""
        return self._reason

    def abort(self, reason: Any = None) -> bool:
        """Fire the signal; returns ``False`` when it had already fired."""
        if self.aborted:
            return False
        self.aborted = True
        self._reason = reason if reason is not None else "aborted"
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self._reason)
        return True

    def on_abort(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(reason)`` when the signal fires (at once if it already has)."""
        if self.aborted:
            callback(self._reason)
        else:
            self._callbacks.append(callback)

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted}, reason={self._reason!r})"
