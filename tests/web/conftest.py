"""The web tests' servers: one per module and kind of ``authorize``, on SQLite files, and the
official AG-UI client installed from its lock file (the AG-UI tests' fixture)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agui.conftest import agui_client

from ._support import Server

__all__ = ("agui_client",)


@pytest.fixture
def anyio_backend() -> str:
    """The a2a-sdk's client runs on asyncio."""
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The three faces with the team's ``authorize``."""
    where = tmp_path_factory.mktemp("web")
    served = Server(where / "prism.db", where / "effects.jsonl")
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The three faces with their default ``authorize`` (no token: this machine only)."""
    where = tmp_path_factory.mktemp("web-default")
    served = Server(where / "prism.db", where / "effects.jsonl", auth="default")
    try:
        yield served
    finally:
        served.stop()
