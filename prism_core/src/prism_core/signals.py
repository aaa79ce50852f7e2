"""Abort signals: what providers, tools and hooks read to learn that a run was aborted."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ._threads import LoopHandle, call_on_loop, current_loop

__all__ = ("AbortSignal",)


class AbortSignal:
    """A one-shot abort flag with a reason. Cancellation itself travels as anyio cancellation.

    It may be fired from any thread: each callback runs on the event loop it was registered
    from (a callback that cancels a run's scope must run on that run's loop), and ``abort``
    returns once they have run.
    """

    __slots__ = ("_callbacks", "_lock", "_reason", "aborted")

    def __init__(self) -> None:
        self.aborted = False
        self._reason: Any = None
        self._callbacks: list[tuple[Callable[[Any], None], LoopHandle | None]] = []
        self._lock = threading.Lock()

    @property
    def reason(self) -> Any:
        """Why the signal fired (``None`` until it does)."""
        return self._reason

    def abort(self, reason: Any = None) -> bool:
        """Fire the signal; returns ``False`` when it had already fired."""
        with self._lock:
            if self.aborted:
                return False
            self._reason = reason if reason is not None else "aborted"
            self.aborted = True
            callbacks, self._callbacks = self._callbacks, []
        for callback, loop in callbacks:
            call_on_loop(loop, callback, self._reason)
        return True

    def on_abort(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(reason)`` when the signal fires (at once if it already has), on the
        event loop this is called from."""
        with self._lock:
            if not self.aborted:
                self._callbacks.append((callback, current_loop()))
                return
        callback(self._reason)

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted}, reason={self._reason!r})"
