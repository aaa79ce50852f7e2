"""One AG-UI run as server-sent events: ``RUN_STARTED``, the run's events, and its end.

The run is opened and consumed in the task that handles the request (a resumed run's task
group lives there), while a second task listens for the client going away: when it does,
the run is left, which aborts it, as leaving any Prism stream does. A refusal is a
``RUN_ERROR`` with the refusal's ``code``; an unexpected failure is a generic ``RUN_ERROR``
and is then raised again for the server to log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from ag_ui.core import BaseEvent, RunAgentInput, RunStartedEvent
from ag_ui.encoder import EventEncoder
from starlette.types import Receive, Scope, Send

from prism_core import PrismError

from ._agent import AgentFactory
from ._events import EventTranslator
from ._interrupts import interrupts_for, session_call_arguments
from ._runs import OpenedRun, open_run

__all__ = ("INTERNAL_ERROR", "AguiEventStream")

logger = logging.getLogger("prism_agui")

INTERNAL_ERROR = "ERR_PRISM_AGUI_INTERNAL"
PROTOCOL_VERSION = "1.0"

Emit = Callable[[BaseEvent], Awaitable[None]]


async def _suspension(
    factory: AgentFactory, translator: EventTranslator, opened: OpenedRun, event: Any
) -> list[BaseEvent]:
    arguments = dict(translator.arguments)
    decisions = event.interruption.pending_decisions
    if any(d.tool_call_id and d.tool_call_id not in arguments for d in decisions):
        # Calls held over from an earlier AG-UI run of the same Prism run.
        arguments = {
            **await session_call_arguments(factory.sessions, opened.session_id),
            **arguments,
        }
    interrupts = interrupts_for(event.interruption, arguments, factory.redactor)
    return translator.suspended(interrupts)


async def _relay(
    factory: AgentFactory,
    run_input: RunAgentInput,
    caller: dict[str, str] | None,
    translator: EventTranslator,
    emit: Emit,
) -> None:
    try:
        opened = await open_run(factory, run_input, caller)
    except PrismError as exc:
        await emit(_started(run_input, None))
        for refusal in translator.error(str(exc), exc.code):
            await emit(refusal)
        return
    try:
        await emit(_started(run_input, opened.run_id))
        event = opened.first
        while event is not None and not translator.finished:
            if event.type == "agent_suspended":
                produced = await _suspension(factory, translator, opened, event)
            else:
                produced = translator.translate(event)
            for out in produced:
                await emit(out)
            event = await anext(opened.stream, None)
        if not translator.finished:
            for out in translator.error("the run ended without an outcome", INTERNAL_ERROR):
                await emit(out)
    except PrismError as exc:
        if not translator.finished:
            for out in translator.error(str(exc), exc.code):
                await emit(out)
    finally:
        # Shielded: a client that left cancels the request, and the run must still be left
        # (and so aborted) properly.
        with anyio.CancelScope(shield=True):
            await opened.aclose()


def _started(run_input: RunAgentInput, prism_run_id: str | None) -> RunStartedEvent:
    return RunStartedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        protocol_version=PROTOCOL_VERSION,
        metadata={"prism_run_id": prism_run_id} if prism_run_id is not None else None,
    )


class AguiEventStream:
    """The ASGI response for one accepted ``RunAgentInput``."""

    def __init__(
        self, factory: AgentFactory, run_input: RunAgentInput, caller: dict[str, str] | None
    ) -> None:
        self._factory = factory
        self._input = run_input
        self._caller = caller

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

        failure: Exception | None = None
        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                logger.info("AG-UI client left run %s; the run is aborted", self._input.run_id)
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            translator = EventTranslator(self._input.thread_id, self._input.run_id)
            try:
                await _relay(self._factory, self._input, self._caller, translator, emit)
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
