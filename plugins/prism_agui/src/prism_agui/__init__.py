"""AG-UI 1.0 for Prism agents: a Starlette endpoint that streams durable runs.

``create_agui_app(agent, definition_revision=..., checkpoints=..., sessions=...)`` serves one
agent at ``POST /`` to any AG-UI client (``@ag-ui/client``'s ``HttpAgent``, CopilotKit): text
and tool calls stream as AG-UI events, a suspension before a side effect ends the AG-UI run
with interrupts, and the next input's ``resume`` answers them as one decision batch.

The names below are imported on first use, so discovering the ``prism`` entry points (every
``prism`` command does) does not load the AG-UI models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import plugin

if TYPE_CHECKING:
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

_ERRORS = (
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
)
_HOME = {
    "APPROVAL_SCHEMA": "._interrupts",
    "CANCELLED_REASON": "._decisions",
    "DEFAULT_MAX_BODY_BYTES": "._app",
    "THREAD_NAMESPACE": "._threads",
    "TOKEN_ENV": "._auth",
    "create_agui_app": "._app",
    **dict.fromkeys(_ERRORS, "._errors"),
}

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
    "plugin",
)


def __getattr__(name: str) -> Any:
    """Import a public name from its module the first time it is asked for."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, for completion."""
    return sorted(__all__)
