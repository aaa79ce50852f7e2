"""AG-UI 1.0 for Prism agents: a Starlette endpoint that streams durable runs.

``create_agui_app(agent, definition_revision=..., checkpoints=..., sessions=...)`` serves one
agent at ``POST /`` to any AG-UI client (``@ag-ui/client``'s ``HttpAgent``, CopilotKit): text
and tool calls stream as AG-UI events, a suspension before a side effect ends the AG-UI run
with interrupts, and the next input's ``resume`` answers them as one decision batch.

The endpoint answers no hook, so the distribution registers no ``prism`` entry point: plugin
discovery (every ``prism`` command does it) never imports it or the AG-UI models.
"""

from __future__ import annotations

from ._app import DEFAULT_MAX_BODY_BYTES, create_agui_app
from ._auth import TOKEN_ENV
from ._decisions import CANCELLED_REASON
from ._errors import (
    AccessDenied,
    AguiError,
    BadRequest,
    InputRefused,
    InterruptPending,
    Misdirected,
    NotAuthenticated,
    PayloadTooLarge,
    RunActive,
    ThreadUnavailable,
    UnsupportedMediaType,
)
from ._interrupts import APPROVAL_SCHEMA
from ._threads import THREAD_NAMESPACE

__all__ = (
    "APPROVAL_SCHEMA",
    "CANCELLED_REASON",
    "DEFAULT_MAX_BODY_BYTES",
    "THREAD_NAMESPACE",
    "TOKEN_ENV",
    "AccessDenied",
    "AguiError",
    "BadRequest",
    "InputRefused",
    "InterruptPending",
    "Misdirected",
    "NotAuthenticated",
    "PayloadTooLarge",
    "RunActive",
    "ThreadUnavailable",
    "UnsupportedMediaType",
    "create_agui_app",
)
