"""The host the web tests serve under uvicorn: the three HTTP faces over one SQLite file.

``/agui`` is ``create_agui_app``, ``/a2a`` is ``create_a2a_app`` (its card names
``PRISM_WEB_TEST_BASE/a2a/``), and the rest is ``create_app`` (the JSON API and the console),
all serving the ``billing`` agent of :mod:`tests.web.agents` on one ``StorePair``.

``PRISM_WEB_TEST_AUTH=team`` serves every face with one ``authorize``: ``Authorization:
Bearer NAME`` is ``Principal({"tenant_id": "acme"}, actor=NAME)`` (a person of the acme
team), ``Bearer mallory`` is refused (``Forbidden``, 403), no header is unknown (401).
``PRISM_WEB_TEST_AUTH=default`` serves every face with its default ``authorize`` (no token:
this machine only).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from prism_a2a import create_a2a_app
from prism_agui import create_agui_app
from prism_core import Principal
from prism_server import create_app
from prism_store_sql import open_sql_stores
from prism_web import Forbidden

from .agents import AGENT_ID, REVISION, billing

TEAM = {"tenant_id": "acme"}
DEFAULT_AUTH = os.environ.get("PRISM_WEB_TEST_AUTH") == "default"


def team(request: Request) -> Principal | None:
    """``Bearer NAME``: NAME of the acme team; ``mallory`` is refused; nobody is unknown."""
    scheme, _, name = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not name:
        return None
    if name == "mallory":
        raise Forbidden("mallory may not decide acme's runs")
    return Principal(TEAM, actor=name)


stores = open_sql_stores(os.environ["PRISM_WEB_TEST_DB"])
agent = billing(Path(os.environ["PRISM_WEB_TEST_EFFECTS"]))
authorize = None if DEFAULT_AUTH else team


def resolve_agent(agent_id: str) -> tuple[Any, str] | None:
    """The server's agents: ``billing`` only."""
    return (agent, REVISION) if agent_id == AGENT_ID else None


@asynccontextmanager
async def lifespan(_app: Starlette) -> AsyncIterator[None]:
    """Close the stores when the server stops."""
    try:
        yield
    finally:
        await stores.aclose()


app = Starlette(
    routes=[
        Mount(
            "/agui",
            create_agui_app(agent, stores, definition_revision=REVISION, authorize=authorize),
        ),
        Mount(
            "/a2a",
            create_a2a_app(
                agent,
                stores,
                definition_revision=REVISION,
                url=f"{os.environ['PRISM_WEB_TEST_BASE']}/a2a/",
                authorize=authorize,
            ),
        ),
        Mount("", create_app(stores, resolve_agent=resolve_agent, authorize=authorize)),
    ],
    lifespan=lifespan,
)
