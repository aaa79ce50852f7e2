"""A run that gets ahead of the a2a-sdk: the SDK reads the task for itself only after the run
it started (or a decision it recorded) has already finished, and still answers the message.

The SDK looks the task up in the task store before it takes a message up, and refuses a task it
finds finished. A Prism task is its run, which runs on its own (in the app's task, in a
worker), so a quick run used to be found finished by the SDK that had just started it
(``UnsupportedOperationError: ... in terminal state``), now and then. Here the request-context
builder is held until the run has stopped, so the SDK always looks afterwards: the ordering
that failed is made to happen every time. In-process, through the official client.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import new_data_part, new_text_part
from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest, TaskState

from prism_a2a import create_a2a_app
from prism_a2a._requests import PrismRequestContextBuilder
from prism_core import (
    Principal,
    StorePair,
    ToolDefinition,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    create_mock_provider,
    load_agent_run_state,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)

pytestmark = pytest.mark.anyio

BASE = "http://testserver"
OWNER = {"tenant_id": "t1"}
STOPPED = frozenset(("suspended", "succeeded", "failed", "aborted", "denied"))


def build_agent(ran: list[str]) -> Any:
    """``refund``: one gated refund call, then an answer; anything else: a plain answer."""

    def refund(args: dict[str, Any], context: Any) -> dict[str, Any]:
        ran.append(args["order"])
        return {"refunded": args["order"]}

    def model(request: Any) -> list[Any]:
        said = [m for m in request.messages if m.role == "user"][-1].text
        if not said.startswith("refund"):
            return [provider_text_delta("hello back"), provider_done()]
        if not any(m.role == "tool" for m in request.messages):
            call = tool_call_content("r1", "refund", {"order": said.split()[1]})
            return [provider_tool_call(call), provider_done()]
        return [provider_text_delta("refunded"), provider_done()]

    return create_agent(
        id="desk",
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(model),
        tools=[ToolDefinition("refund", refund, needs_approval=True)],
    )


@asynccontextmanager
async def served(stores: StorePair, ran: list[str], **options: Any) -> AsyncIterator[Client]:
    """A fresh app on ``stores`` (as a new server process would be) and a client of it
    (``options``: more of ``create_a2a_app``'s)."""
    app = create_a2a_app(
        build_agent(ran),
        stores,
        definition_revision="desk-1",
        url=f"{BASE}/",
        authorize=lambda request: Principal(OWNER, actor="ana"),
        push_notifications=False,
        **options,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            card = await A2ACardResolver(http, BASE).get_agent_card()
            config = ClientConfig(streaming=False, httpx_client=http)
            client = ClientFactory(config).create(card)
            try:
                yield client
            finally:
                await client.close()


@pytest.fixture
def builder_waits_for_the_run(monkeypatch: pytest.MonkeyPatch, stores: StorePair) -> None:
    """Hold every request-context builder until the run it started or decided has stopped."""
    original = PrismRequestContextBuilder.build

    async def build(self: Any, context: Any, params: Any = None, **more: Any) -> Any:
        deciding = bool(params.message.task_id)  # the SDK fills it in for a new task
        built = await original(self, context, params, **more)
        with anyio.fail_after(30):
            while True:
                found = await load_agent_run_state(
                    stores.checkpoints, {"run_id": built.task_id}, ownership=OWNER
                )
                stopped = found is not None and found.version > 1 and found.state.status in STOPPED
                moved_on = not deciding or (found is not None and found.state.status != "suspended")
                if stopped and moved_on:
                    return built
                await anyio.sleep(0.005)

    monkeypatch.setattr(PrismRequestContextBuilder, "build", build)


@pytest.fixture
def stores() -> StorePair:
    """Memory stores shared by the apps of one test."""
    return StorePair(create_memory_checkpoint_store(), create_memory_session_store())


def message(text: str | None = None, *, task_id: str = "", data: Any = None) -> Message:
    """A user message: text, or a data part on ``task_id``."""
    part = new_text_part(text) if text is not None else new_data_part(data)
    return Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, task_id=task_id, parts=[part])


async def sent(client: Client, msg: Message) -> Any:
    """The task ``message/send`` answers with."""
    [response] = [r async for r in client.send_message(SendMessageRequest(message=msg))]
    return response.task


@pytest.mark.usefixtures("builder_waits_for_the_run")
async def test_a_run_that_finished_before_the_sdk_looked_answers_its_message(
    stores: StorePair,
) -> None:
    async with served(stores, []) as client:
        task = await sent(client, message("hello"))
        read = await client.get_task(GetTaskRequest(id=task.id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["hello back"]
    assert read.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.usefixtures("builder_waits_for_the_run")
async def test_a_decided_run_that_finished_before_the_sdk_looked_answers_its_message(
    stores: StorePair,
) -> None:
    ran: list[str] = []
    async with served(stores, ran) as client:
        waiting = await sent(client, message("refund A-1"))
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    record = await load_agent_run_state(stores.checkpoints, {"run_id": waiting.id}, ownership=OWNER)
    assert record is not None
    assert record.state.interruption is not None
    [pending] = record.state.interruption.pending_decisions
    batch = {"decisions": [{"approval_id": pending.approval_id, "outcome": "allow_once"}]}
    # Another app on the same stores (a restarted server) takes the decision.
    async with served(stores, ran) as client:
        done = await sent(client, message(task_id=waiting.id, data=batch))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert ran == ["A-1"]
