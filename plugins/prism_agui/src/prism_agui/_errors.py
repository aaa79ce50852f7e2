"""The endpoint's own refusals: HTTP answers before a stream starts, and the in-stream ones.

A request that cannot be read or has no caller is refused by the web layer's table
(:mod:`prism_web`: 400 401 403 413 415 421, the body ``{"code", "message"}``), as every HTTP
face refuses it; the names below are that table's, as this package has always exported them.
Everything after that is a stream of AG-UI events, and a refusal there is a ``RUN_ERROR``
carrying the error's ``code``.
"""

from __future__ import annotations

from prism_web import (
    BadRequest,
    Misdirected,
    NotAuthenticated,
    PayloadTooLarge,
    UnsupportedMediaType,
    WebError,
    error_response,
)
from prism_web import Forbidden as AccessDenied

__all__ = (
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
    "error_response",
)


class AguiError(WebError):
    """A run input the AG-UI endpoint refuses in its stream (``RUN_ERROR``), before the core
    sees it."""

    code = "ERR_PRISM_AGUI"
    status = 400


class InputRefused(AguiError):
    """The input has no user message to run, or content the agent cannot take (not text)."""

    code = "ERR_PRISM_AGUI_INPUT"


class ThreadUnavailable(AguiError):
    """The thread belongs to another caller, or its session was not started through this
    endpoint (its history is not the caller's to continue)."""

    code = "ERR_PRISM_AGUI_THREAD"


class InterruptPending(AguiError):
    """The thread's run waits for decisions: the next input must answer them with ``resume``."""

    code = "ERR_PRISM_AGUI_INTERRUPT_PENDING"


class RunActive(AguiError):
    """The thread's last run is still running (here or in a worker that died: the host
    continues such a run, never an AG-UI client)."""

    code = "ERR_PRISM_AGUI_RUN_ACTIVE"
