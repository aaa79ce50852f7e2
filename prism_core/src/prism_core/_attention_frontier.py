"""``AttentionFrontier``: what the attention compiler already changed in a session's input.

A session keeps one frontier: the tool calls whose results the compiler stubbed and the
thinking it stripped (by a 32-hex key of the thinking, never the text). A change is sticky:
once made it is made again on every later turn and run, even under a relaxed ratio, so the
prompt-cache prefix is not rewritten back and forth. With ``persist_session_state`` the
frontier rides the checkpoint (newest :data:`MAX_ATTENTION_STICKY` of each); restoring one is
lenient: a malformed entry is dropped alone and never blocks a resume.

It must not decide what to change: the compiler (``runs/_attention``) does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ("MAX_ATTENTION_STICKY", "AttentionFrontier")

#: How many tool call ids and thinking keys a checkpoint carries, each (the newest).
MAX_ATTENTION_STICKY = 256
_KEY = re.compile(r"\A[0-9a-f]{32}\Z")
_MAX_CALL_ID_CHARS = 256


class AttentionFrontier:
    """The session's sticky attention changes, oldest first."""

    def __init__(self) -> None:
        self._tool_call_ids: dict[str, None] = {}
        self._thinking_keys: dict[str, None] = {}

    def __bool__(self) -> bool:
        return bool(self._tool_call_ids or self._thinking_keys)

    def has_tool_call(self, tool_call_id: str) -> bool:
        """Whether that call's result is stubbed."""
        return tool_call_id in self._tool_call_ids

    def has_thinking(self, key: str) -> bool:
        """Whether the thinking with that key is stripped."""
        return key in self._thinking_keys

    def add_tool_call(self, tool_call_id: str) -> None:
        """Remember a stubbed result (as the newest)."""
        self._tool_call_ids.pop(tool_call_id, None)
        self._tool_call_ids[tool_call_id] = None

    def add_thinking(self, key: str) -> None:
        """Remember stripped thinking (as the newest)."""
        self._thinking_keys.pop(key, None)
        self._thinking_keys[key] = None

    def snapshot(self) -> dict[str, list[str]] | None:
        """``{"tool_call_ids", "thinking_keys"}`` (newest 256 each), ``None`` when empty."""
        if not self:
            return None
        return {
            "tool_call_ids": list(self._tool_call_ids)[-MAX_ATTENTION_STICKY:],
            "thinking_keys": list(self._thinking_keys)[-MAX_ATTENTION_STICKY:],
        }

    def restore(self, data: Any) -> None:
        """Add what a checkpoint's frontier holds; anything malformed is skipped."""
        if not isinstance(data, Mapping):
            return
        for call_id in _entries(data.get("tool_call_ids")):
            if 0 < len(call_id) <= _MAX_CALL_ID_CHARS:
                self.add_tool_call(call_id)
        for key in _entries(data.get("thinking_keys")):
            if _KEY.match(key):
                self.add_thinking(key)


def _entries(value: Any) -> list[str]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        return []
    return [item for item in value[-MAX_ATTENTION_STICKY:] if isinstance(item, str)]
