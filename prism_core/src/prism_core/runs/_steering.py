"""Mid-run steering: user messages queued into the active run.

It must not run anything: the turn boundary (``_boundary``) takes the queued messages.
"""

from __future__ import annotations

from collections import deque

import attrs

from ..content import Message, message_text
from ..errors import PrismError

__all__ = (
    "DEFAULT_MAX_PENDING_STEERS",
    "DEFAULT_MAX_PENDING_STEER_BYTES",
    "SteerQueue",
)

DEFAULT_MAX_PENDING_STEERS = 8
DEFAULT_MAX_PENDING_STEER_BYTES = 64 * 1024


@attrs.define
class SteerQueue:
    """Pending steered messages, bounded by count and total UTF-8 bytes."""

    max_messages: int = DEFAULT_MAX_PENDING_STEERS
    max_bytes: int = DEFAULT_MAX_PENDING_STEER_BYTES
    _messages: deque[Message] = attrs.field(factory=deque)
    _bytes: int = 0

    def push(self, message: Message) -> None:
        """Queue ``message``; raise ``PrismError`` (``ERR_PRISM_STEER_LIMIT``) when over a cap."""
        size = len(message_text(message).encode("utf-8"))
        if len(self._messages) >= self.max_messages:
            raise PrismError(
                f"Too many pending steers: at most {self.max_messages} may wait for the next "
                "turn boundary",
                code="ERR_PRISM_STEER_LIMIT",
            )
        if self._bytes + size > self.max_bytes:
            raise PrismError(
                f"Pending steers would hold {self._bytes + size} bytes; at most "
                f"{self.max_bytes} may wait",
                code="ERR_PRISM_STEER_LIMIT",
            )
        self._messages.append(message)
        self._bytes += size

    def drain(self) -> list[Message]:
        """Take every pending message, oldest first."""
        messages = list(self._messages)
        self._messages.clear()
        self._bytes = 0
        return messages

    def __len__(self) -> int:
        return len(self._messages)
