"""Fixtures of the Celery tests: rigs on the shared servers, each closed after its test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
def make_rig(servers: None, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    """Build rigs (keyword options as :class:`Rig`); their workers are killed and their keys
    and tables dropped after the test."""
    made: list[Rig] = []

    def make(**options: Any) -> Rig:
        rig = Rig(tmp_path, **options)
        made.append(rig)
        return rig

    try:
        yield make
    finally:
        for rig in made:
            rig.close()


@pytest.fixture
def rig(make_rig: Callable[..., Rig]) -> Rig:
    """A rig with the default settings and no worker yet."""
    return make_rig()
