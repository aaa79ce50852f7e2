"""Fixtures of the Celery tests: a :class:`Rig` on the shared servers, closed after each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import service_unavailable
from tests.integration.test_crash_demo import reachable

from .harness import Rig


@pytest.fixture
def servers() -> None:
    """Skip (or fail, in CI) when Redis or PostgreSQL is not reachable."""
    for name, port in (("redis", 6379), ("postgresql", 5432)):
        reason = reachable("127.0.0.1", port)
        if reason:
            service_unavailable(name, reason)


@pytest.fixture
def rig(servers: None, tmp_path: Path) -> Iterator[Rig]:
    """A rig with no worker yet; its workers are killed and its keys and tables dropped."""
    made = Rig(tmp_path)
    try:
        yield made
    finally:
        made.close()
