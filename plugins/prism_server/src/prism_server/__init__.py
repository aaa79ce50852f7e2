"""Approvals over HTTP and in the browser: a Starlette app over a host's Prism stores.

``create_app(checkpoints=..., sessions=..., resolve_agent=...)`` serves the JSON API
(``/api/runs``, ``/api/runs/{run_id}``, ``/api/runs/{run_id}/resume`` with server-sent events)
and the console at ``/``; ``prism serve`` runs it under uvicorn.
"""

from __future__ import annotations

from ._app import DEFAULT_MAX_BODY_BYTES, create_app
from ._errors import (
    AccessDenied,
    BadRequest,
    Misdirected,
    NotAuthenticated,
    PayloadTooLarge,
    RunNotFound,
    ServerError,
    UnsupportedMediaType,
)

__all__ = (
    "DEFAULT_MAX_BODY_BYTES",
    "AccessDenied",
    "BadRequest",
    "Misdirected",
    "NotAuthenticated",
    "PayloadTooLarge",
    "RunNotFound",
    "ServerError",
    "UnsupportedMediaType",
    "create_app",
)
