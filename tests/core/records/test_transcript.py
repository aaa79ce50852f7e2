"""The transcript a session lends its runs: history, bounds, appends and held entries."""

from __future__ import annotations

import pytest

from prism_core import Message, ModelConfig, TextContent
from prism_core.codec import dumps
from prism_core.records import create_memory_session_store, create_session_entry
from prism_core.records._transcript import Transcript


def _message(text: str, role: str = "user") -> Message:
    return Message(role, (TextContent(text),))  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_history_loads_lazily_and_tracks_appends_exactly() -> None:
    """The history is read once from the store, then each append extends it; its size is the
    exact canonical-JSON size and the bound is never below it."""
    store = create_memory_session_store()
    first = await store.append(
        create_session_entry(session_id="s", kind="message", message=_message("hi"))
    )
    transcript = Transcript("s", store, first.id)
    with pytest.raises(RuntimeError, match="not loaded"):
        _ = transcript.messages
    await transcript.ensure_loaded()
    assert transcript.messages == [_message("hi")]
    reply = await transcript.append_message(_message("hello there", "assistant"), "run_1")
    assert transcript.leaf_id == reply.id
    assert reply.parent_id == first.id
    assert reply.run_id == "run_1"
    assert [e.id for e in await store.list("s")] == [first.id, reply.id]
    expected = sum(len(dumps(m)) + 1 for m in transcript.messages)
    assert transcript.size_bytes() == expected
    assert transcript.size_bound() >= expected


@pytest.mark.anyio
async def test_a_model_change_entry_moves_the_model() -> None:
    """Appending a ``model_change`` entry sets the transcript's model; loading a branch finds
    the newest one again."""
    store = create_memory_session_store()
    transcript = Transcript("s", store, None)
    await transcript.ensure_loaded()
    assert transcript.model is None
    other = ModelConfig("mock", "other")
    await transcript.append_entry(kind="model_change", run_id=None, model=other)
    assert transcript.model == other
    fresh = Transcript("s", store, transcript.leaf_id)
    await fresh.ensure_loaded()
    assert fresh.model == other


@pytest.mark.anyio
async def test_held_entries_stay_out_of_the_store_until_committed() -> None:
    """While held, appends move the leaf and the history and a branch read shows them, but the
    store does not have them; ``committed`` moves the committed leaf, and ``release`` puts
    the leaf back where the store is and drops the history for a fresh read."""
    store = create_memory_session_store()
    transcript = Transcript("s", store, None)
    await transcript.ensure_loaded()
    kept = await transcript.append_message(_message("stored"), None)
    held = transcript.hold()
    assert transcript.hold() is held
    one = await transcript.append_message(_message("held 1"), "r")
    two = await transcript.append_message(_message("held 2"), "r")
    assert await store.list("s") == [kept]
    assert transcript.leaf_id == two.id
    assert [e.id for e in await transcript.read_branch(two.id)] == [kept.id, one.id, two.id]
    assert len(transcript.messages) == 3
    await store.append(one)
    held.committed(1)
    assert held.committed_leaf == one.id
    assert held.entries == [two]
    transcript.release()
    assert transcript.leaf_id == one.id
    with pytest.raises(RuntimeError):
        _ = transcript.messages
    await transcript.ensure_loaded()
    assert transcript.messages == [_message("stored"), _message("held 1")]
    after = await transcript.append_message(_message("direct"), None)
    assert [e.id for e in await store.list("s")] == [kept.id, one.id, after.id]
