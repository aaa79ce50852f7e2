"""The console's HTML helpers: escaping, JSON blocks, times, and what a status means.

Every stored value reaches a page through :func:`text` or :func:`json_block` (HTML-escaped,
quotes included), so a value holding markup is shown as text and never parsed; :func:`text`
also shows control characters escaped.
"""

from __future__ import annotations

import json
import re
import time
from html import escape
from typing import Any

__all__ = (
    "MAX_SHOWN_CHARS",
    "STATUS_WORDS",
    "TERMINAL_STATUSES",
    "age",
    "json_block",
    "json_text",
    "long_text",
    "stamp",
    "text",
)

#: What each run status means to a person, as the console words it.
STATUS_WORDS = {
    "running": "running",
    "suspended": "waiting for a decision",
    "succeeded": "succeeded",
    "failed": "failed",
    "aborted": "aborted",
    "denied": "denied",
}
TERMINAL_STATUSES = ("succeeded", "failed", "aborted", "denied")

#: A stored text longer than this is shown cut, with a note saying how much is not shown.
MAX_SHOWN_CHARS = 20000


#: Control characters a one-line value shows escaped (C0 and C1 controls, DEL, zero-width
#: and direction marks, line and paragraph separators, the byte-order mark).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text(value: Any) -> str:
    """``value`` as escaped HTML text on one line (``None`` as an empty string): markup is
    escaped, and control characters are shown escaped (a newline reads ``\\x0a``), so a
    stored value can neither add markup nor break or reorder the line it is on."""
    return "" if value is None else escape(_CONTROL.sub(_escaped, str(value)), quote=True)


def _cut(rendered: str) -> tuple[str, int]:
    if len(rendered) <= MAX_SHOWN_CHARS:
        return rendered, 0
    return rendered[:MAX_SHOWN_CHARS], len(rendered) - MAX_SHOWN_CHARS


def json_text(value: Any) -> str:
    """``value`` as indented JSON, escaped (whole: it fills an editor)."""
    return escape(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str))


def json_block(value: Any) -> str:
    """``value`` as an indented JSON ``<pre>``, escaped; a very long one is cut with a note."""
    rendered = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    shown, hidden = _cut(rendered)
    note = f'<p class="note">{hidden} more characters are not shown.</p>' if hidden else ""
    return f"<pre>{escape(shown)}</pre>{note}"


def long_text(value: str) -> str:
    """A stored message text as an escaped paragraph block; a very long one is cut with a
    note."""
    shown, hidden = _cut(value)
    note = f'<p class="note">{hidden} more characters are not shown.</p>' if hidden else ""
    return f'<div class="text">{escape(shown)}</div>{note}'


def age(epoch: float) -> str:
    """How long ago ``epoch`` was, shortly (``42s``, ``5m``, ``3h``, ``2d``)."""
    seconds = max(0, int(time.time() - epoch))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def stamp(epoch: Any) -> str:
    """An epoch time as a ``<time>`` element in UTC (the raw value, escaped, when it is not a
    number)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int | float):
        return text(epoch)
    try:
        moment = time.gmtime(epoch)
    except (OverflowError, OSError, ValueError):
        return text(epoch)
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", moment)
    shown = time.strftime("%Y-%m-%d %H:%M:%S UTC", moment)
    return f'<time datetime="{iso}">{shown}</time>'
