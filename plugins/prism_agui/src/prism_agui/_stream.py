"""One AG-UI run as server-sent events: ``RUN_STARTED``, the run's events, and its end.

The request only watches: a new run runs in a task of the app's own, a decided one in a
worker (see :mod:`._runs`). A second task listens for the client going away; when it does,
the watching stops and the run goes on to its next stop (nothing is aborted: an abort while
a side-effecting call runs would leave an effect nobody recorded). A refusal is a
``RUN_ERROR`` with the refusal's ``code``; an unexpected failure is a generic ``RUN_ERROR``
and is then raised again for the server to log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import attrs
from ag_ui.core import BaseEvent, RunAgentInput, RunStartedEvent
from ag_ui.encoder import EventEncoder
from starlette.types import Receive, Scope, Send

from prism_core import Principal, PrismError

from ._agent import AgentFactory
from ._events import EventTranslator
from ._interrupts import interrupts_for, session_call_arguments
from ._runs import OpenedRun, open_run

__all__ = ("INTERNAL_ERROR", "AguiEventStream")

logger = logging.getLogger("prism_agui")

INTERNAL_ERROR = "ERR_PRISM_AGUI_INTERNAL"
PROTOCOL_VERSION = "1.0"
CLIENT_LEFT = "the AG-UI client went away"

Emit = Callable[[BaseEvent], Awaitable[None]]


def _started(run_input: RunAgentInput, prism_run_id: str | None) -> RunStartedEvent:
    return RunStartedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        protocol_version=PROTOCOL_VERSION,
        metadata={"prism_run_id": prism_run_id} if prism_run_id is not None else None,
    )


@attrs.define
class _Relay:
    """Opens the run and sends its events through ``emit``."""

    factory: AgentFactory
    run_input: RunAgentInput
    caller: Principal
    agent: Any
    emit: Emit
    translator: EventTranslator
    opened: OpenedRun | None = None

    async def _send(self, events: list[BaseEvent]) -> None:
        for event in events:
            await self.emit(event)

    async def run(self) -> None:
        """The whole AG-UI run, from ``RUN_STARTED`` to its end."""
        try:
            self.opened = opened = await open_run(
                self.factory, self.run_input, self.caller, self.agent
            )
        except PrismError as exc:
            await self.emit(_started(self.run_input, None))
            await self._send(self.translator.error(str(exc), exc.code))
            return
        try:
            await self.emit(_started(self.run_input, opened.run_id))
            event = opened.first
            while event is not None and not self.translator.finished:
                await self._send(await self._translate(event))
                event = await anext(opened.events, None)
            if not self.translator.finished:
                await self._send(
                    self.translator.error("the run ended without an outcome", INTERNAL_ERROR)
                )
        except PrismError as exc:
            if not self.translator.finished:
                await self._send(self.translator.error(str(exc), exc.code))
        finally:
            await opened.aclose()

    async def _translate(self, event: Any) -> list[BaseEvent]:
        if event.type == "agent_suspended":
            return await self._suspension(event)
        return self.translator.translate(event)

    async def _suspension(self, event: Any) -> list[BaseEvent]:
        assert self.opened is not None
        arguments = dict(self.translator.arguments)
        decisions = event.interruption.pending_decisions
        if any(d.tool_call_id and d.tool_call_id not in arguments for d in decisions):
            # Calls held over from an earlier AG-UI run of the same Prism run.
            held = await session_call_arguments(self.factory.sessions, self.opened.session_id)
            arguments = {**held, **arguments}
        interrupts = interrupts_for(event.interruption, arguments, self.factory.redactor)
        return self.translator.suspended(interrupts)


class AguiEventStream:
    """The ASGI response for one accepted ``RunAgentInput``."""

    def __init__(
        self, factory: AgentFactory, run_input: RunAgentInput, caller: Principal, agent: Any
    ) -> None:
        self._factory = factory
        self._input = run_input
        self._caller = caller
        self._agent = agent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        encoder = EventEncoder()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", f"{encoder.get_content_type()}; charset=utf-8".encode()),
                    (b"cache-control", b"no-store"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )

        async def emit(event: BaseEvent) -> None:
            body = encoder.encode(event).encode()
            await send({"type": "http.response.body", "body": body, "more_body": True})

        translator = EventTranslator(self._input.thread_id, self._input.run_id)
        relay = _Relay(self._factory, self._input, self._caller, self._agent, emit, translator)
        failure: Exception | None = None
        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                # The client went away: stop watching; the run is not this request's.
                logger.info("AG-UI run %s: %s", self._input.run_id, CLIENT_LEFT)
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            try:
                await relay.run()
            except Exception as exc:
                failure = exc
                if not translator.finished:
                    for out in translator.error(
                        "the agent could not complete the run", INTERNAL_ERROR
                    ):
                        await emit(out)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            group.cancel_scope.cancel()
        if failure is not None:
            raise failure
