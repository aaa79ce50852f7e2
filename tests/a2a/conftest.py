"""The A2A tests' server: one per module (tests use orders of their own), on SQLite files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._support import Server


@pytest.fixture
def anyio_backend() -> str:
    """The a2a-sdk's server and client run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``tests.a2a.app`` under uvicorn for this module's tests."""
    where = tmp_path_factory.mktemp("a2a")
    served = Server(where / "prism.db", where / "effects")
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(params=["1.0", "0.3"])
def protocol(request: pytest.FixtureRequest) -> str:
    """The A2A protocol the client speaks: 1.0 (``SendMessage`` ...) or 0.3 (``message/send``
    ...); the server answers both on one route."""
    return str(request.param)
