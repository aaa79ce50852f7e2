"""Helpers shared by the Redis store tests."""

from __future__ import annotations

import socket
from typing import Any

import redis.asyncio as aioredis

__all__ = ("CountingRedis", "closed_port", "counting_client", "delete_prefix")


class CountingRedis(aioredis.Redis):
    """A client that records the name of every command it sends."""

    commands: list[str]

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Record the command name, then send it."""
        self.commands.append(str(args[0]).upper())
        return await super().execute_command(*args, **options)


def counting_client(url: str) -> CountingRedis:
    """A :class:`CountingRedis` for ``url`` with an empty command log."""
    client = CountingRedis.from_url(url)
    assert isinstance(client, CountingRedis)
    client.commands = []
    return client


def closed_port() -> int:
    """A local TCP port with nothing listening on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def delete_prefix(client: aioredis.Redis, prefix: str) -> None:
    """Delete every key under ``<prefix>:`` (SCAN + DEL)."""
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= 500:
            await client.delete(*batch)
            batch.clear()
    if batch:
        await client.delete(*batch)
