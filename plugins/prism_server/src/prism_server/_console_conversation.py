"""The conversation behind a run, as a run page shows it.

It reads the run's branch from the server's session store (root to the checkpoint's leaf: the
user's requests, the assistant's text and tool calls, the tools' results, summaries), passes
every string through the agent's redactor (entries are redacted when written; this applies the
host's current redactor again) and renders it escaped. The branch up to a given leaf never
changes, so it matches the checkpoint version it was read with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from prism_core import SessionEntryNotFoundError, codec

from ._console_html import json_block, long_text, stamp, text

__all__ = ("MAX_ENTRIES", "Conversation", "read_conversation")

#: The newest entries a run page shows; a note says how many earlier ones it leaves out.
MAX_ENTRIES = 200

_WHO = {"user": "User", "assistant": "Assistant", "tool": "Tool result", "system": "System"}


@attrs.frozen
class Conversation:
    """The rendered conversation and, for a run that succeeded, its final answer's text."""

    html: str
    answer: str | None


def redacted(value: Any, redactor: Any) -> Any:
    """``value`` (JSON-shaped data) with every string, keys included, passed through
    ``redactor.redact_text`` (unchanged without a redactor)."""
    if redactor is None:
        return value
    if isinstance(value, str):
        return redactor.redact_text(value)
    if isinstance(value, Mapping):
        return {redacted(k, redactor): redacted(v, redactor) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(item, redactor) for item in value]
    return value


def _call(block: Mapping[str, Any], waiting: Mapping[str, str], in_doubt: set[str]) -> str:
    call_id = str(block.get("id") or "")
    tag = ""
    if call_id in waiting:
        tag = f' <a class="tag" href="#card-{text(waiting[call_id])}">waiting for a decision</a>'
    elif call_id in in_doubt:
        tag = f' <a class="tag" href="#doubt-{text(call_id)}">in doubt</a>'
    return (
        f'<div class="call" data-call-id="{text(call_id)}"><p>Calls '
        f"<strong>{text(block.get('name'))}</strong> <code>{text(call_id)}</code>{tag}</p>"
        f"{json_block(block.get('arguments'))}</div>"
    )


def _result(block: Mapping[str, Any]) -> str:
    head = (
        f"<p><strong>{text(block.get('name'))}</strong> "
        f"<code>{text(block.get('tool_call_id'))}</code>"
    )
    error = block.get("error")
    if isinstance(error, Mapping):
        code = f"{text(error.get('code'))}: " if error.get("code") else ""
        return (
            f'<div class="tool-result">{head} did not succeed</p>'
            f'<p class="error-text">{code}{text(error.get("message"))}</p></div>'
        )
    return f'<div class="tool-result">{head} returned</p>{json_block(block.get("value"))}</div>'


def _blocks(content: Any, waiting: Mapping[str, str], in_doubt: set[str]) -> str:
    parts = []
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            parts.append(long_text(str(block.get("text") or "")))
        elif kind == "thinking":
            parts.append(
                "<details><summary>The model's reasoning</summary>"
                f"{long_text(str(block.get('text') or ''))}</details>"
            )
        elif kind == "tool_call":
            parts.append(_call(block, waiting, in_doubt))
        elif kind == "tool_result":
            parts.append(_result(block))
        else:
            parts.append(json_block(block))
    return "".join(parts)


def _message(
    data: Any, when: Any, waiting: Mapping[str, str], in_doubt: set[str], extra_tag: str = ""
) -> str:
    role = str(data.get("role")) if isinstance(data, Mapping) else "?"
    who = _WHO.get(role, role)
    when_html = f" <small>{stamp(when)}</small>" if when is not None else ""
    return (
        f'<li class="msg {text(role)}"><p class="who">{text(who)}{extra_tag}{when_html}</p>'
        f"{_blocks(data.get('content') if isinstance(data, Mapping) else None, waiting, in_doubt)}"
        "</li>"
    )


def _answer(data: Any) -> str | None:
    if not isinstance(data, Mapping) or data.get("role") != "assistant":
        return None
    texts = [
        str(block.get("text") or "")
        for block in data.get("content") or ()
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    return "".join(texts) if texts else None


async def read_conversation(
    sessions: Any,
    state: Any,
    redactor: Any,
    *,
    waiting: Mapping[str, str],
    in_doubt: set[str],
) -> Conversation:
    """The conversation of ``state``'s branch; ``waiting`` maps each pending call id to its
    approval id (its card's anchor), ``in_doubt`` names the calls in doubt."""
    try:
        path = (
            await sessions.read_branch_path(state.session_id, state.leaf_id)
            if state.leaf_id is not None
            else []
        )
    except SessionEntryNotFoundError:
        return Conversation(
            '<p class="note">The session store does not hold this run\'s conversation '
            f"(entry <code>{text(state.leaf_id)}</code> is missing).</p>",
            None,
        )
    shown = [entry for entry in path if entry.message is not None or entry.summary is not None]
    items: list[str] = []
    if len(shown) > MAX_ENTRIES:
        left = len(shown) - MAX_ENTRIES
        items.append(f'<li class="note">{left} earlier entries are not shown.</li>')
        shown = shown[-MAX_ENTRIES:]
    started = False
    last_message: Any = None
    for entry in shown:
        if not started and entry.run_id == state.run_id:
            started = True
            if items and any(item.startswith('<li class="msg') for item in items):
                items.append('<li class="divider">This run starts here</li>')
        if entry.message is not None:
            data = redacted(codec.unstructure(entry.message), redactor)
            items.append(_message(data, entry.timestamp, waiting, in_doubt))
            last_message = data
        else:
            summary = redacted(entry.summary, redactor)
            items.append(
                '<li class="msg summary"><p class="who">Summary of earlier messages '
                f"<small>{stamp(entry.timestamp)}</small></p>{long_text(str(summary))}</li>"
            )
    for held in getattr(state, "pending_input", ()) or ():
        data = redacted(codec.unstructure(held), redactor)
        tag = ' <span class="tag">held until the decision</span>'
        items.append(_message(data, None, waiting, in_doubt, tag))
    if not items:
        return Conversation('<p class="note">No messages are stored for this run.</p>', None)
    answer = _answer(last_message) if state.status == "succeeded" else None
    html = f'<ol class="conversation" aria-label="Conversation">{"".join(items)}</ol>'
    return Conversation(html, answer)
