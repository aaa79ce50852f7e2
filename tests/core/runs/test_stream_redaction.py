"""Streamed text deltas are redacted as one stream: a secret split over deltas never shows."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism_core import (
    create_secret_redactor,
    provider_done,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call_delta,
)
from prism_core.redaction import REDACTED, StreamRedaction
from tests.core.helpers import echo_tool, scripted_agent

SECRET = "sk-live-4242"


def _seen_prefixes(pieces: list[str]) -> list[str]:
    """Every prefix of the concatenated text an observer of ``pieces`` has seen."""
    seen, text = [], ""
    for piece in pieces:
        text += piece
        seen.append(text)
    return seen


def test_a_secret_split_over_pieces_is_held_back_then_redacted() -> None:
    """Fed ``"key: sk-li"``, ``"ve-42"``, ``"42 ok"``, no released prefix holds the secret, at
    most len(secret) - 1 characters are held at any time, and the whole is redacted."""
    stream = StreamRedaction(create_secret_redactor([SECRET]))
    raw, released = "", []
    for piece in ("key: sk-li", "ve-42", "42 ok"):
        raw += piece
        released.append(stream.feed(piece))
        shown = "".join(released)
        assert SECRET not in shown
        assert len(raw) - len(shown.replace(REDACTED, SECRET)) <= len(SECRET) - 1
    released.append(stream.flush())
    assert "".join(released) == f"key: {REDACTED} ok"


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.text(alphabet="ab- k", max_size=12),
    suffix=st.text(alphabet="ab- k", max_size=12),
    seed=st.integers(0, 2**16),
)
def test_no_cut_of_the_stream_shows_a_secret(prefix: str, suffix: str, seed: int) -> None:
    """Whatever the cuts between pieces, no prefix of the released text holds a secret and
    the released text is the redacted whole."""
    secrets = ["abab", "k-b"]
    text = prefix + secrets[seed % 2] + suffix + secrets[(seed + 1) % 2]
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(0, 6))))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    redactor = create_secret_redactor(secrets)
    stream = StreamRedaction(redactor)
    released = [stream.feed(piece) for piece in pieces] + [stream.flush()]
    for shown in _seen_prefixes(released):
        assert not any(secret in shown for secret in secrets), (pieces, released)
    assert "".join(released) == redactor.redact_text(text)


def test_a_redactor_that_names_no_secrets_holds_the_whole_stream() -> None:
    """A custom redactor without ``secrets`` releases nothing before the end of the stream."""

    class Upper:
        def redact_text(self, text: str) -> str:
            return text.replace("hush", "[X]")

    stream = StreamRedaction(Upper())
    assert stream.feed("hu") == ""
    assert stream.feed("sh!") == ""
    assert stream.flush() == "[X]!"


@pytest.mark.anyio
async def test_message_deltas_never_spell_a_secret(anyio_backend: str) -> None:
    """Text, thinking and tool-call argument deltas of a run whose redactor knows a secret
    split over two deltas: no prefix of any delta stream an observer saw holds the secret,
    the stream is complete, and message_finished is clean."""
    del anyio_backend
    turn = [
        provider_thinking_delta("think sk-live"),
        provider_thinking_delta("-4242 done"),
        provider_text_delta("your key is sk-li"),
        provider_text_delta("ve-4242, keep it"),
        provider_tool_call_delta(0, id="c1", name="echo", arguments_text='{"k": "sk-'),
        provider_tool_call_delta(0, arguments_text='live-4242"}'),
        provider_done(),
    ]
    agent = scripted_agent(
        [turn, [provider_text_delta("ok"), provider_done()]],
        redactor=create_secret_redactor([SECRET]),
        tools=[echo_tool("echo")],
    )
    streams: dict[Any, list[str]] = {}
    finished = []
    async for event in agent.create_session().stream("hi"):
        if event.type == "message_delta" and not finished:
            delta = event.delta
            key = (delta.kind, delta.index)
            streams.setdefault(key, []).append(delta.text or delta.arguments_text or "")
        if event.type == "message_finished":
            finished.append(event.message)
    for pieces in streams.values():
        for shown in _seen_prefixes(pieces):
            assert SECRET not in shown
    assert "".join(streams[("text", None)]) == f"your key is {REDACTED}, keep it"
    assert "".join(streams[("thinking", None)]) == f"think {REDACTED} done"
    assert "".join(streams[("tool_call", 0)]) == f'{{"k": "{REDACTED}"}}'
    assert all(SECRET not in repr(message) for message in finished)
