"""Shared test configuration: async backends and real-service requirements."""

from __future__ import annotations

import os

import pytest

#: Set by CI: a store test whose service is unreachable fails instead of skipping.
REQUIRE_SERVICES = os.environ.get("PRISM_REQUIRE_SERVICES") == "1"

POSTGRES_URL = os.environ.get(
    "PRISM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("PRISM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every ``@pytest.mark.anyio`` test on asyncio and on trio."""
    return str(request.param)


def service_unavailable(name: str, reason: str) -> None:
    """Fail (when services are required) or skip with a clear reason."""
    message = f"{name} is not reachable: {reason}"
    if REQUIRE_SERVICES:
        pytest.fail(f"{message} (PRISM_REQUIRE_SERVICES=1)")
    pytest.skip(f"{message}; set PRISM_REQUIRE_SERVICES=1 to make this a failure")
