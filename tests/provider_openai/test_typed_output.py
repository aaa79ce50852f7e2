"""Typed output through the official SDK: ``response_format`` ``json_schema`` on the wire, the
answer validated into ``result.output``, and an invalid answer sent back with its problems."""

from __future__ import annotations

import dataclasses

import pydantic
import pytest

from prism_core import OutputValidationError, create_agent
from tests.fake_http import serve

from ._support import MODEL, SDK_STREAM_FINALISER, add_tool, provider_for, text_reply, tool_reply

pytestmark = SDK_STREAM_FINALISER


@dataclasses.dataclass
class Sum:
    """The sum of two numbers and how it was found."""

    total: float
    method: str


class Forecast(pydantic.BaseModel):
    """A loose pydantic model: open to extra keys, one optional field."""

    city: str
    rain: bool = False


@pytest.mark.anyio
async def test_the_schema_goes_as_a_strict_json_schema_response_format() -> None:
    """A dataclass's closed schema is sent strict, named after the class; the streamed JSON
    answer becomes the instance."""
    with serve(text_reply('{"total": 5, ', '"method": "add"}')) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), output_type=Sum)
        result = await agent.create_session().run("What is 2 + 3?")
    assert result.output == Sum(total=5.0, method="add")
    body = server.requests[0].json()
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Sum",
            "strict": True,
            "schema": {
                "type": "object",
                "description": "The sum of two numbers and how it was found.",
                "properties": {"total": {"type": "number"}, "method": {"type": "string"}},
                "required": ["total", "method"],
                "additionalProperties": False,
            },
        },
    }


@pytest.mark.anyio
async def test_a_schema_strict_mode_cannot_take_is_sent_non_strict() -> None:
    """A pydantic model with an optional field and no ``additionalProperties: false``."""
    with serve(text_reply('{"city": "Oslo", "rain": true}')) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), output_type=Forecast)
        result = await agent.create_session().run("Forecast for Oslo?")
    assert result.output == Forecast(city="Oslo", rain=True)
    sent = server.requests[0].json()["response_format"]["json_schema"]
    assert sent["name"] == "Forecast"
    assert sent["strict"] is False
    assert sent["schema"] == Forecast.model_json_schema()


@pytest.mark.anyio
async def test_tools_still_run_and_the_final_answer_is_validated() -> None:
    """With a tool: the tool call runs, every request carries the response format, and an
    invalid final answer goes back as a user message naming the field before the valid one."""
    log: list[tuple[str, dict[str, float]]] = []
    replies = (
        tool_reply("call_1", "add", '{"a": 2, "b": 3}'),
        text_reply('{"total": "five", "method": "add"}'),
        text_reply('{"total": 5, "method": "add"}'),
    )
    with serve(*replies) as server:
        agent = create_agent(
            model=MODEL, provider=provider_for(server), tools=[add_tool(log)], output_type=Sum
        )
        result = await agent.create_session().run("What is 2 + 3?")
    assert log == [("call_1", {"a": 2, "b": 3})]
    assert result.output == Sum(total=5.0, method="add")
    bodies = [request.json() for request in server.requests]
    assert all(body["response_format"]["type"] == "json_schema" for body in bodies)
    retry = bodies[2]["messages"][-1]
    assert retry["role"] == "user"
    assert "$.total: expected number (type)" in retry["content"]


@pytest.mark.anyio
async def test_a_host_response_format_wins_and_the_answer_is_still_checked() -> None:
    with serve(text_reply("plain words")) as server:
        agent = create_agent(
            model=MODEL,
            provider=provider_for(server),
            output_type=Sum,
            provider_options={"response_format": {"type": "json_object"}},
            limits={"max_output_retries": 0},
        )
        with pytest.raises(OutputValidationError):
            await agent.create_session().run("What is 2 + 3?")
    assert server.requests[0].json()["response_format"] == {"type": "json_object"}


@pytest.mark.anyio
async def test_without_output_type_no_response_format_is_sent() -> None:
    with serve(text_reply("Paris.")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server))
        await agent.create_session().run("Capital of France?")
    assert "response_format" not in server.requests[0].json()
