"""Command timeouts and the transient/permanent classification of Redis failures."""

from __future__ import annotations

import pytest
from redis.exceptions import (
    BusyLoadingError,
    ReadOnlyError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from prism_core import CheckpointStoreError, CheckpointStoreUnavailableError
from prism_store_redis import create_redis_checkpoint_store, create_redis_session_store
from prism_store_redis._client import RedisConnection
from tests.conftest import REDIS_URL


def test_timeout_ms_must_be_a_positive_integer() -> None:
    """0, negative, boolean and float timeouts are refused."""
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="timeout_ms"):
            create_redis_checkpoint_store(REDIS_URL, timeout_ms=bad)  # type: ignore[arg-type]


def test_clients_created_from_urls_carry_the_timeouts() -> None:
    """Connect and socket timeouts come from timeout_ms (default 10 s)."""
    store = create_redis_checkpoint_store(REDIS_URL, timeout_ms=250)
    kwargs = store._connection.client.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (0.25, 0.25)
    sessions = create_redis_session_store(REDIS_URL)
    kwargs = sessions._connection.client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 10.0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (RedisConnectionError("Connection reset by peer"), True),
        (RedisTimeoutError("Timeout reading from socket"), True),
        (BusyLoadingError("LOADING"), True),
        (ReadOnlyError("READONLY You can't write against a read only replica."), True),
        (ConnectionRefusedError(111, "refused"), True),
        (ResponseError("WRONGTYPE"), False),
    ],
)
async def test_failures_are_classified(error: BaseException, transient: bool) -> None:
    """Dropped connections, timeouts, loading and failover replies are transient."""
    connection = RedisConnection(
        REDIS_URL, error=CheckpointStoreError, transient=CheckpointStoreUnavailableError
    )
    with pytest.raises(CheckpointStoreError) as info, connection.guard("save a checkpoint"):
        raise error
    assert isinstance(info.value, CheckpointStoreUnavailableError) is transient
    await connection.aclose()
