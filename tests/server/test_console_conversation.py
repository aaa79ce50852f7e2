"""The run page's conversation, read from a session store: what it leaves out, it says."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from prism_core import Message, TextContent, create_memory_session_store, create_session_entry
from prism_server._console_conversation import MAX_ENTRIES, read_conversation
from prism_server._console_html import MAX_SHOWN_CHARS


@attrs.frozen
class RunAt:
    """The parts of a run state the conversation reads."""

    session_id: str
    leaf_id: str | None
    run_id: str = "run_1"
    status: str = "succeeded"
    pending_input: tuple[Message, ...] = ()


async def branch(texts: list[tuple[str, str]]) -> tuple[Any, str]:
    """A memory session store holding one branch of ``(role, text)`` messages; its leaf id."""
    store = create_memory_session_store()
    parent = None
    for role, body in texts:
        message = Message(role, (TextContent(body),))  # type: ignore[arg-type]
        entry = create_session_entry(
            session_id="s1", kind="message", parent_id=parent, message=message, run_id="run_1"
        )
        await store.append(entry)
        parent = entry.id
    assert parent is not None
    return store, parent


async def read(store: Any, state: RunAt) -> Any:
    return await read_conversation(store, state, None, waiting={}, in_doubt=set())


@pytest.mark.anyio
async def test_a_long_branch_shows_its_newest_entries_and_says_how_many_it_leaves_out() -> None:
    texts = [("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(205)]
    store, leaf = await branch(texts)
    shown = await read(store, RunAt("s1", leaf))
    assert shown.html.count('<li class="msg') == MAX_ENTRIES
    assert "5 earlier entries are not shown." in shown.html
    assert "message 4<" not in shown.html
    assert "message 5<" in shown.html
    assert shown.answer is None  # the newest message is the user's


@pytest.mark.anyio
async def test_a_very_long_text_is_cut_with_a_note() -> None:
    store, leaf = await branch([("user", "x" * (MAX_SHOWN_CHARS + 5000)), ("assistant", "done")])
    shown = await read(store, RunAt("s1", leaf))
    assert "5000 more characters are not shown." in shown.html
    assert "x" * MAX_SHOWN_CHARS in shown.html
    assert "x" * (MAX_SHOWN_CHARS + 1) not in shown.html
    assert shown.answer == "done"


@pytest.mark.anyio
async def test_only_a_succeeded_run_has_an_answer() -> None:
    store, leaf = await branch([("user", "refund A-1"), ("assistant", "refund sent")])
    assert (await read(store, RunAt("s1", leaf))).answer == "refund sent"
    assert (await read(store, RunAt("s1", leaf, status="failed"))).answer is None


@pytest.mark.anyio
async def test_a_leaf_the_store_does_not_hold_is_said_so() -> None:
    store, _leaf = await branch([("user", "refund A-1")])
    shown = await read(store, RunAt("s1", "entry_gone"))
    assert "does not hold this run's conversation" in shown.html
    assert "entry_gone" in shown.html


@pytest.mark.anyio
async def test_input_held_for_a_decision_is_shown_as_held() -> None:
    store = create_memory_session_store()
    state = RunAt("s1", None, status="suspended", pending_input=(Message.user("drop table"),))
    shown = await read(store, state)
    assert "held until the decision" in shown.html
    assert "drop table" in shown.html
