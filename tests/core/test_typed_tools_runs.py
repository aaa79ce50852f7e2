"""``@tool`` functions inside real agent runs with the mock provider."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from prism_core import (
    ProviderRequest,
    ToolExecutionContext,
    ToolResultContent,
    create_agent,
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool,
    tool_call_content,
)

from .helpers import MODEL


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclasses.dataclass
class Ticket:
    title: str
    priority: Priority
    tags: tuple[str, ...] = ()


@dataclasses.dataclass
class Receipt:
    id: int
    ticket: Ticket


def tool_results(request: ProviderRequest) -> list[ToolResultContent]:
    """Every tool result the provider is shown in ``request``."""
    return [
        block
        for message in request.messages
        for block in message.content
        if isinstance(block, ToolResultContent)
    ]


def scripted(calls: list[tuple[str, str, dict[str, Any]]], requests: list[ProviderRequest]) -> Any:
    """A mock provider asking for ``calls`` on the first turn, then answering ``done``."""
    first = [provider_tool_call(tool_call_content(*call)) for call in calls] + [provider_done()]
    return create_mock_provider(
        turns=[first, [provider_text_delta("done"), provider_done()]],
        on_request=requests.append,
    )


@pytest.mark.anyio
async def test_sync_and_async_tools_get_typed_values_and_return_json() -> None:
    """The model sends JSON; the functions receive typed values; results reach the model."""
    received: list[Any] = []

    @tool
    def file_ticket(ticket: Ticket, context: ToolExecutionContext) -> Receipt:
        """File a ticket.

        Args:
            ticket: What to file.
        """
        received.append((ticket, context.tool_call_id))
        return Receipt(41, ticket)

    @tool(idempotent=True)
    async def count(priority: Priority, among: list[Ticket]) -> dict[str, int]:
        """Count tickets of one priority."""
        await anyio.lowlevel.checkpoint()
        received.append((priority, among))
        return {"count": sum(ticket.priority is priority for ticket in among)}

    requests: list[ProviderRequest] = []
    agent = create_agent(
        model=MODEL,
        provider=scripted(
            [
                (
                    "c1",
                    "file_ticket",
                    {"ticket": {"title": "Crash", "priority": "high", "tags": ["ui", "p1"]}},
                ),
                (
                    "c2",
                    "count",
                    {
                        "priority": "low",
                        "among": [
                            {"title": "a", "priority": "low"},
                            {"title": "b", "priority": "high"},
                        ],
                    },
                ),
            ],
            requests,
        ),
        tools=[file_ticket, count],
    )
    result = await agent.create_session().run("File it and count")
    assert result.status == "succeeded"
    assert result.text == "done"
    assert received == [
        (Ticket("Crash", Priority.HIGH, ("ui", "p1")), "c1"),
        (Priority.LOW, [Ticket("a", Priority.LOW), Ticket("b", Priority.HIGH)]),
    ]
    specs = {spec.name: spec for spec in requests[0].tools}
    assert specs["file_ticket"].description == "File a ticket."
    assert specs["file_ticket"].parameters == file_ticket.parameters
    assert specs["count"].parameters is not None
    assert specs["count"].parameters["required"] == ["priority", "among"]
    results = {block.tool_call_id: block for block in tool_results(requests[1])}
    assert results["c1"].error is None
    assert results["c1"].value == {
        "id": 41,
        "ticket": {"title": "Crash", "priority": "high", "tags": ["ui", "p1"]},
    }
    assert results["c2"].value == {"count": 1}


@pytest.mark.anyio
async def test_ill_typed_arguments_reach_the_model_as_an_error() -> None:
    """Arguments the schema gate lets through but the types refuse never run the function."""
    ran: list[Any] = []

    @tool
    def file_ticket(ticket: Ticket) -> str:
        """File a ticket."""
        ran.append(ticket)
        return "filed"

    requests: list[ProviderRequest] = []
    agent = create_agent(
        model=MODEL,
        provider=scripted(
            [("c1", "file_ticket", {"ticket": {"title": 7, "priority": "urgent"}})], requests
        ),
        tools=[file_ticket],
    )
    session = agent.create_session()
    events = [event async for event in session.stream("File it")]
    assert ran == []
    errors = [event for event in events if event.type == "tool_execution_error"]
    assert len(errors) == 1
    [result] = tool_results(requests[1])
    assert result.error is not None
    assert "Invalid arguments for file_ticket" in result.error.message
    assert "expected a string, got int @ $.ticket.title" in result.error.message
    assert "'urgent' is not a value of Priority @ $.ticket.priority" in result.error.message


@pytest.mark.anyio
async def test_unknown_arguments_are_blocked_before_the_call() -> None:
    """``additionalProperties: false`` at the top level keeps unknown arguments out."""
    ran: list[Any] = []

    @tool
    def ping(host: str) -> str:
        """Ping a host."""
        ran.append(host)
        return "pong"

    requests: list[ProviderRequest] = []
    agent = create_agent(
        model=MODEL,
        provider=scripted([("c1", "ping", {"host": "a", "port": 1})], requests),
        tools=[ping],
    )
    await agent.create_session().run("Ping")
    assert ran == []
    [result] = tool_results(requests[1])
    assert result.error is not None
    assert "port" in result.error.message
