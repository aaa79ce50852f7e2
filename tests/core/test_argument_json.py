"""Tool-argument JSON from a provider: strict parsing blocks only the malformed call."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import provider_done, provider_tool_call_delta
from prism_core.arguments import MAX_TOOL_ARGUMENT_DEPTH, parse_tool_arguments
from prism_core.codec import dumps
from prism_core.content import ToolCallContent
from prism_core.providers import ToolCallAssembler

from .helpers import echo_tool, scripted_agent, text_turn

MALFORMED = [
    '{"n": NaN}',
    '{"n": Infinity}',
    '{"n": -Infinity}',
    '{"n": 1e999999}',
    '{"n": "\\ud800"}',
    '{"\\udfff": 1}',
    '{"n": ' + "[" * (MAX_TOOL_ARGUMENT_DEPTH + 1) + "]" * (MAX_TOOL_ARGUMENT_DEPTH + 1) + "}",
    '{"n": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"n": ' + "9" * 5000 + "}",
    "[1, 2]",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_strict_parsing_refuses_what_json_cannot_carry(text: str) -> None:
    """NaN, infinities, overflow, lone surrogates, deep nesting and non-objects are refused."""
    assert parse_tool_arguments(text) is None


def test_strict_parsing_accepts_ordinary_arguments() -> None:
    """Ordinary objects parse; blank text means no arguments."""
    nested: Any = "leaf"
    for _ in range(MAX_TOOL_ARGUMENT_DEPTH - 1):
        nested = [nested]
    assert parse_tool_arguments('{"n": 1.5, "s": "\\u00e9"}') == {"n": 1.5, "s": "é"}
    assert parse_tool_arguments("  ") == {}
    assert (
        parse_tool_arguments(
            '{"n": '
            + "[" * (MAX_TOOL_ARGUMENT_DEPTH - 1)
            + "]" * (MAX_TOOL_ARGUMENT_DEPTH - 1)
            + "}"
        )
        is not None
    )


@pytest.mark.anyio
@pytest.mark.parametrize("text", MALFORMED)
async def test_malformed_streamed_arguments_block_only_that_call(text: str) -> None:
    """The malformed call is blocked as invalid_json_arguments; its sibling runs and the run
    finishes."""
    log: list[Any] = []
    agent = scripted_agent(
        [
            [
                provider_tool_call_delta(0, id="bad", name="echo", arguments_text=text),
                provider_tool_call_delta(1, id="good", name="echo", arguments_text='{"n": 1}'),
                provider_done(),
            ],
            text_turn("recovered"),
        ],
        tools=[echo_tool(log=log)],
    )
    events = [e async for e in agent.create_session().stream("go")]
    blocked = [e for e in events if e.type == "tool_execution_blocked"]
    assert [(b.tool_call_id, b.reason) for b in blocked] == [("bad", "invalid_json_arguments")]
    assert log == [("echo", {"n": 1})]
    assert events[-1].type == "agent_finished"
    assert events[-1].text == "recovered"


@pytest.mark.parametrize(
    "arguments", [{"n": float("nan")}, {"n": float("inf")}, {"s": "\ud800"}, {"\udfff": 1}]
)
def test_a_complete_call_with_non_json_arguments_is_marked_invalid(arguments: Any) -> None:
    """A provider that hands over a parsed call with NaN or a lone surrogate gets that call
    listed as invalid, with its arguments dropped; a valid sibling is kept as is."""
    assembler = ToolCallAssembler()
    recorded = assembler.add_call(ToolCallContent("bad", "echo", arguments))
    assert recorded.arguments == {}
    assembler.add_call(ToolCallContent("good", "echo", {"n": 1}))
    calls = assembler.finish()
    assert [(c.id, c.arguments) for c in calls] == [("bad", {}), ("good", {"n": 1})]
    assert assembler.invalid_ids == {"bad"}
    assert dumps(calls[0].arguments) == b"{}"
