"""A host application for the server tests, real uvicorn servers on loopback, seeded runs.

The host's ``billing`` agent asks for refunds in its first turn (one ``refund`` call per order
it was given) and answers in its second; every run is durable with ``interrupt_before_tool``,
so it suspends before its refunds until a person decides. ``Host.refunds`` records every
refund the tool really made, across the server's thread.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import attrs
import httpx
import uvicorn

from prism_core import (
    AGENT_RUN_NAMESPACE,
    ProviderRequest,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    create_secret_redactor,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)
from prism_server._serve import close_on_shutdown
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store
from tests.core.durable_support import rewrite_as_in_doubt

REVISION = "billing-1"
#: The agents the host serves: the same tools under two ids.
AGENT_IDS = ("billing", "support")
T = TypeVar("T")
REFUND_SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"}},
    "required": ["order"],
    "additionalProperties": False,
}


CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"approved_by": {"type": "string"}},
    "required": ["approved_by"],
    "additionalProperties": False,
}


class Host:
    """The host's agents, as a deployment would define them. An order named ``ASK`` is a
    ``confirm`` call instead (an elicitation: a person answers it); ``secrets`` are redacted."""

    def __init__(
        self, secrets: Sequence[str] = (), answer_delay: float = 0, refund_delay: float = 0
    ) -> None:
        self.refunds: list[str] = []
        self.secrets = tuple(secrets)
        #: Seconds the model takes over its answer after the refunds (a slow last turn).
        self.answer_delay = answer_delay
        #: Seconds a refund takes after it started (``refunding`` is set when one starts).
        self.refund_delay = refund_delay
        self.refunding = threading.Event()
        self._lock = threading.Lock()

    def refund(self, args: dict[str, Any], context: Any) -> dict[str, Any]:
        """The tool: refunds one order (recorded so tests can count real effects)."""
        self.refunding.set()
        time.sleep(self.refund_delay)
        with self._lock:
            self.refunds.append(args["order"])
        return {"refunded": args["order"]}

    def build_agent(self, store: Any = None, agent_id: str = "billing") -> Any:
        """The ``billing`` agent (or another of :data:`AGENT_IDS`) on ``store``."""

        async def generate(request: ProviderRequest) -> Any:
            # The newest request decides: its orders are asked for once, then answered. Call
            # ids count on from the calls earlier runs of the session made.
            asked = max(i for i, m in enumerate(request.messages) if m.role == "user")
            orders = request.messages[asked].content[0].text.split()  # type: ignore[union-attr]
            earlier = sum(len(m.tool_calls) for m in request.messages[:asked])
            if not any(m.role == "assistant" for m in request.messages[asked:]):
                for index, order in enumerate(orders, start=earlier + 1):
                    if order == "ASK":
                        call = tool_call_content(
                            f"c{index}", "confirm", {"amount": 120, "card": "card pan-4111-0042"}
                        )
                    else:
                        call = tool_call_content(f"c{index}", "refund", {"order": order})
                    yield provider_tool_call(call)
                yield provider_done()
                return
            await anyio.sleep(self.answer_delay)
            yield provider_text_delta("refunds settled")
            yield provider_done()

        class Model:
            id = "mock"

            def generate(self, request: ProviderRequest) -> Any:
                return generate(request)

        return create_agent(
            id=agent_id,
            model={"provider": "mock", "model": "demo"},
            provider=Model(),
            tools=[
                ToolDefinition(
                    "refund", self.refund, description="Refund an order", parameters=REFUND_SCHEMA
                ),
                ToolDefinition(
                    "confirm",
                    self.refund,
                    description="Ask a manager to confirm a large refund",
                    elicitation=CONFIRM_SCHEMA,
                ),
            ],
            store=store,
            redactor=create_secret_redactor(self.secrets) if self.secrets else None,
        )

    def resolve_agent(self, agent_id: str) -> tuple[Any, str]:
        """``resolve_agent`` for the server: one of :data:`AGENT_IDS` or nothing."""
        return (self.build_agent(agent_id=agent_id) if agent_id in AGENT_IDS else None), REVISION


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run ``make()`` on an event loop of its own in a worker thread (the browser tests' thread
    already runs Playwright's loop)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, make).result()


@attrs.frozen
class Database:
    """Where a test's stores live: a URL and a table prefix of its own."""

    url: str
    prefix: str

    def stores(self) -> tuple[Any, Any]:
        """A new checkpoint store and session store on this database."""
        checkpoints = create_sql_checkpoint_store(self.url, table_prefix=self.prefix)
        sessions = create_sql_session_store(self.url, table_prefix=self.prefix)
        return checkpoints, sessions


def seed(
    db: Database,
    host: Host,
    orders: Sequence[str],
    *,
    owner: dict[str, str] | None = None,
    agent_id: str = "billing",
    earlier: Sequence[str] = (),
) -> str:
    """A suspended run of the host's agent that asks to refund ``orders``; its run id.
    ``earlier`` are requests run to their end first on the same session (not durable: their
    refunds run without asking)."""

    async def run() -> str:
        checkpoints, sessions = db.stores()
        try:
            agent = host.build_agent(store=sessions, agent_id=agent_id)
            state = RunStateOptions(
                checkpoints, REVISION, interrupt_before_tool=True, ownership=owner
            )
            session = agent.create_session(id=f"s-{uuid.uuid4().hex[:10]}")
            for request in earlier:
                done = await session.run(request)
                assert done.status == "succeeded", done
            result = await session.run(" ".join(orders), run_state=state)
            assert result.status == "suspended", result
            return str(result.run_id)
        finally:
            await checkpoints.aclose()
            await sessions.aclose()

    return run_async(run)


def make_in_doubt(db: Database, run_id: str, *, owner: dict[str, str] | None = None) -> None:
    """Rewrite a suspended run as a crash between its first call's dispatch and its result."""

    async def rewrite() -> None:
        checkpoints, sessions = db.stores()
        try:
            await rewrite_as_in_doubt(checkpoints, run_id, owner)
        finally:
            await checkpoints.aclose()
            await sessions.aclose()

    run_async(rewrite)


def stored(db: Database, run_id: str, owner: dict[str, str] | None = None) -> tuple[int, str]:
    """The run record's version and status, straight from the store."""

    async def read() -> tuple[int, str]:
        checkpoints, sessions = db.stores()
        try:
            record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=owner)
        finally:
            await checkpoints.aclose()
            await sessions.aclose()
        assert record is not None
        return record.version, record.value["status"]

    return run_async(read)


def stored_run(
    db: Database, run_id: str, owner: dict[str, str] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's stored record value, and each tool result its session holds by call id (the
    value, or the error's message)."""

    async def read() -> tuple[dict[str, Any], dict[str, Any]]:
        checkpoints, sessions = db.stores()
        try:
            record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=owner)
            assert record is not None
            results: dict[str, Any] = {}
            for entry in await sessions.list(record.value["session_id"]):
                if entry.message is not None and entry.message.role == "tool":
                    for block in entry.message.content:
                        error = block.error
                        results[block.tool_call_id] = (
                            error.message if error is not None else block.value
                        )
        finally:
            await checkpoints.aclose()
            await sessions.aclose()
        return dict(record.value), results

    return run_async(read)


@contextmanager
def running(app: Any, *stores: Any) -> Iterator[str]:
    """``app`` under a real uvicorn server on 127.0.0.1 (a free port), in a thread; yields the
    base URL and stops the server (closing ``stores`` on its loop) on the way out."""
    if stores:
        close_on_shutdown(app, *stores)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def sse_frames(text: str) -> list[tuple[str, Any]]:
    """Parse a server-sent event body into ``(event, data)`` pairs, checking the framing."""
    return [(event, data) for _, event, data in sse_frames_with_ids(text)]


def sse_frames_with_ids(text: str) -> list[tuple[str | None, str, Any]]:
    """Parse a server-sent event body into ``(id, event, data)``, checking the framing: an
    optional ``id:`` line, then ``event:`` and one ``data:`` line."""
    assert text.endswith("\n\n"), text[-80:]
    frames = []
    for block in text[:-2].split("\n\n"):
        lines = block.split("\n")
        event_id = None
        if lines[0].startswith("id: "):
            event_id = lines.pop(0)[len("id: ") :]
        assert len(lines) == 2, block
        assert lines[0].startswith("event: "), block
        assert lines[1].startswith("data: "), block
        data = json.loads(lines[1][len("data: ") :])
        frames.append((event_id, lines[0][len("event: ") :], data))
    return frames


def header_tenant(request: Any) -> dict[str, str] | None:
    """A test ``authorize``: ``X-Tenant: t1`` is tenant t1; ``blocked`` is refused (403)."""
    from prism_server import AccessDenied

    tenant = request.headers.get("x-tenant")
    if tenant is None:
        return None
    if tenant == "blocked":
        raise AccessDenied("this caller may not approve runs")
    return {"tenant_id": tenant}


def client(base: str, tenant: str | None = "t1") -> httpx.Client:
    """An HTTP client for ``base`` speaking as ``tenant``."""
    headers = {} if tenant is None else {"x-tenant": tenant}
    return httpx.Client(base_url=base, headers=headers, timeout=30)
